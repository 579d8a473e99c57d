"""The verdict printed: a table for people, JSON for scripts."""

from __future__ import annotations

import json

from bridge.lsn import LSN
from bridge.verify.compare import (
    DEAD_LETTERED_KEYS,
    LAKE_FORMATS,
    LAKE_KINDS,
    LAKE_VERSIONS,
    SAMPLES,
    LakeResult,
    TableResult,
)
from bridge.verify.run import Verification

_COLUMNS = ("table", "status", "rows", "equal", "missing", "ghosts", "different", "dead-lettered")


def as_json(result: Verification) -> str:
    return json.dumps(
        {
            "point": str(LSN(result.point)),
            "ok": result.ok,
            "dead_letter_topic": result.dead_letter_topic,
            "tables": [t.as_dict() for t in result.tables],
        },
        indent=2,
        ensure_ascii=False,
    )


def as_table(result: Verification) -> str:
    """One line per table, then the differing columns and a few keys of each mismatch."""
    rows = [list(_COLUMNS)]
    for t in result.tables:
        counts = (t.rows, t.equal, t.missing, t.ghosts, t.different, t.dead_lettered)
        rows.append([t.table, t.status, *(str(n) for n in counts)])
    widths = [max(len(r[i]) for r in rows) for i in range(len(_COLUMNS))]
    lines = [f"verification point {LSN(result.point)}"]
    lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows]
    for t in result.tables:
        if t.skipped is not None:
            lines.append(f"{t.table}: skipped, {t.skipped}")
        if t.columns:
            shown = ", ".join(f"{c} ({n})" for c, n in sorted(t.columns.items()))
            lines.append(f"{t.table}: columns that differ: {shown}")
        for kind, keys in t.samples.items():
            lines.append(f"{t.table}: {kind} keys: {'; '.join(keys)}")
        lines += _dead_lettered_lines(t, result.dead_letter_topic)
        if t.lake is not None:
            lines += _lake_lines(t.table, t.lake)
    lines.append("all tables match" if result.ok else "MISMATCH")
    return "\n".join(lines)


def _dead_lettered_lines(t: TableResult, topic: str) -> list[str]:
    """The differences dead letters explain, a few with their letter's coordinates."""
    if not t.dead_lettered:
        return []
    lines = [
        f"{t.table}: {t.dead_lettered} key(s) differ because their changes were "
        f"dead-lettered to {topic} (of {t.dead_letters} dead letter(s) before the point)"
    ]
    for entry in t.dead_lettered_keys[:SAMPLES]:
        lines.append(
            f"{t.table}: dead-lettered {entry['kind']} key {entry['key']}: {entry['op']} at "
            f"LSN {entry['lsn']} (commit LSN {entry['commit_lsn']}): {entry['error']}"
        )
    if t.dead_lettered > SAMPLES:
        more = t.dead_lettered - SAMPLES
        lines.append(f"{t.table}: {more} more (--format json lists up to {DEAD_LETTERED_KEYS})")
    return lines


def _lake_lines(table: str, lake: LakeResult) -> list[str]:
    counts = ", ".join(f"{k} {lake.counts[k]}" for k in LAKE_KINDS)
    status = "equal" if lake.ok else "differs"
    name = LAKE_FORMATS[lake.format]
    pinned = f"{LAKE_VERSIONS[lake.format]} {lake.version}"
    lines = [f"{table}: {name} table {lake.target} ({pinned}): {status}; {counts}"]
    if lake.columns:
        shown = ", ".join(f"{c} ({n})" for c, n in sorted(lake.columns.items()))
        lines.append(f"{table}: {name} columns that differ: {shown}")
    for kind, keys in lake.samples.items():
        lines.append(f"{table}: {name} {kind} keys: {'; '.join(keys)}")
    return lines
