"""One table compared: PostgreSQL's rows at the point against a folded topic.

PostgreSQL's rows are read inside the point's exported snapshot with the snapshot reader's
query and raw-text loaders, encoded by the bridge's own encoder (op "r", as a snapshot
would produce them) and decoded like the topic's records (`state.Decoder`), so every
documented conversion (numeric modes, timestamptz, infinity sentinels, TOAST placeholders)
is applied on both sides and compares equal.

The topic side is already reduced to one `Kept` per key, so the comparison is one ordered
pass over the table with a dict look-up per row. Most rows are settled without decoding:
the bridge's encoder writes the row's Avro body alone (`ChangeEncoder.row_bodies`), and
its digest equals the key's row digest when the topic's newest record holds the same
bytes (Avro's binary encoding of a value is unique). Only the others (mismatches, rows
completed by carried TOAST values, records of older schema versions) are encoded as
records and decoded as above, and then the column digests say which columns differ.
Key-range hashing would only pay where neither side can be looked up by key.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Final, Protocol

import psycopg

from bridge.decode.messages import KIND_TEXT
from bridge.snapshot.catalog import SnapshotTable
from bridge.snapshot.chunks import Chunk, chunk_query
from bridge.snapshot.reader import Row, TableJob, encode_rows, row_kinds, snapshot_source
from bridge.verify.state import (
    ROW_DIGEST,
    Decoder,
    Kept,
    TopicState,
    differing_columns,
    row_digest,
)

SAMPLES = 5  # keys shown per kind of mismatch
_FETCH = 2000


# a lake key's kinds; `behind` keys (not yet applied) are not judged
LAKE_KINDS: Final = ("equal", "missing", "ghost", "different", "behind", "after_point")


@dataclass
class LakeResult:
    """One table's verdict on its Delta table (`bridge.verify.lake`), `counts` by `LAKE_KINDS`."""

    target: str
    version: int = -1
    counts: Counter[str] = field(default_factory=Counter)
    columns: Counter[str] = field(default_factory=Counter)
    samples: dict[str, list[str]] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not any(self.counts[k] for k in ("missing", "ghost", "different", "behind"))

    def as_dict(self) -> dict[str, Any]:
        return {
            "target": self.target,
            "version": self.version,
            "status": "equal" if self.ok else "differs",
            **{k: self.counts[k] for k in LAKE_KINDS},
            "different_columns": dict(sorted(self.columns.items())),
            "sample_keys": self.samples,
        }


class LakeSink(Protocol):
    """Takes PostgreSQL's rows for the lake comparison (`bridge.verify.lake.LakeSide`, which
    imports pyspark: this module does not)."""

    def add_row(self, name: bytes, key: bytes, value: bytes) -> None: ...


@dataclass
class TableResult:
    """A table's verdict; the fields after `skipped` feed `--repair` and are not printed
    (`reread_keys`: PostgreSQL's key text of missing and different rows; `ghost_keys`: the
    topic's state of keys PostgreSQL does not have)."""

    table: str
    topic: str
    rows: int = 0  # rows in PostgreSQL at the point
    live_keys: int = 0  # keys alive in the topic at the point
    records: int = 0  # records read from the topic
    after_point: int = 0  # of them, committed at or after the point: left out
    equal: int = 0
    decoded: int = 0  # rows compared by decoding, not settled by their bytes alone
    missing: int = 0
    ghosts: int = 0
    different: int = 0
    columns: Counter[str] = field(default_factory=Counter)
    samples: dict[str, list[str]] = field(default_factory=dict)
    skipped: str | None = None
    lake: LakeResult | None = None  # with --delta: the Delta table's verdict
    # for --repair: what was compared, how far the topic was read, and the keys to fix
    snapshot_table: SnapshotTable | None = None
    job: TableJob | None = None
    decoder: Decoder | None = None
    ends: dict[int, int] = field(default_factory=dict)
    reread_keys: list[tuple[str, ...]] = field(default_factory=list)
    ghost_keys: dict[bytes, Kept] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        kafka = not (self.missing or self.ghosts or self.different)
        return self.skipped is None and kafka and (self.lake is None or self.lake.ok)

    @property
    def status(self) -> str:
        if self.skipped is not None:
            return "skipped"
        return "equal" if self.ok else "differs"

    def sample(self, kind: str, decoder: Decoder, key: bytes) -> None:
        found = self.samples.setdefault(kind, [])
        if len(found) < SAMPLES:
            found.append(decoder.show_key(key))

    def as_dict(self) -> dict[str, Any]:
        return {
            "table": self.table,
            "topic": self.topic,
            "status": self.status,
            "rows": self.rows,
            "kafka_keys": self.live_keys,
            "kafka_records": self.records,
            "kafka_records_after_point": self.after_point,
            "equal": self.equal,
            "rows_decoded": self.decoded,
            "missing": self.missing,
            "ghosts": self.ghosts,
            "different": self.different,
            "different_columns": dict(sorted(self.columns.items())),
            "sample_keys": self.samples,
            "skipped": self.skipped,
            **({} if self.lake is None else {"lake": self.lake.as_dict()}),
        }


def compare_table(
    conn: psycopg.Connection[Any],
    table: SnapshotTable,
    job: TableJob,
    state: TopicState,
    result: TableResult,
    lake: LakeSink | None = None,
) -> None:
    """Fill `result` from the table read on `conn` (inside the point's snapshot); each row's
    key (as `Decoder.key`), framed key and value also go to `lake` when given."""
    decoder = state.decoder
    live = {k: s for k, s in state.keys.items() if not s.deleted}
    result.records = state.records
    result.after_point = state.after_point
    result.live_keys = len(live)
    names = [c.name for c in table.relation.columns]
    key_at = [names.index(k.name) for k in table.key]
    all_text = bytes((KIND_TEXT,)) * len(names)
    query, params = chunk_query(table, Chunk(table.label, 0, table.method, None, None))
    source = snapshot_source("", "", state.point, "true")
    with conn.cursor(name=f"verify_{table.relation.oid}") as cursor:
        cursor.itersize = _FETCH
        cursor.execute(query, params)
        while rows := cursor.fetchmany(_FETCH):
            if lake is None:
                rows = _unequal(rows, job, all_text, live, result)
            records, _ = encode_rows(rows, job, source)
            for (key, value, _), row in zip(records, rows, strict=True):
                assert key is not None and value is not None  # a keyed table's "r" record
                where = f"{table.label} row"
                name = decoder.key(key, where)
                if lake is not None:
                    lake.add_row(name, key, value)
                after = decoder.envelope(value, where).get("after") or {}
                columns = b"".join(decoder.digests(after))
                result.rows += 1
                result.decoded += 1
                kept = live.pop(name, None)
                if kept is None:
                    result.missing += 1
                    result.sample("missing", decoder, name)
                elif kept.digests == columns:
                    result.equal += 1
                    continue
                else:
                    result.different += 1
                    result.columns.update(differing_columns(decoder.fields, kept.digests, columns))
                    result.sample("different", decoder, name)
                result.reread_keys.append(tuple(_text(row[i]) for i in key_at))
    for name, kept in live.items():
        result.ghosts += 1
        result.sample("ghost", decoder, name)
        result.ghost_keys[name] = kept


def _unequal(
    rows: list[Row], job: TableJob, all_text: bytes, live: dict[bytes, Kept], result: TableResult
) -> list[Row]:
    """The rows whose Avro body differs from their key's row digest (or that have no key
    in the topic, or no digest there): the others are equal and counted here. A row's key
    body is its `Decoder.key` (written with the current key schema)."""
    bodies = job.encoder.row_bodies
    rest = []
    for row in rows:
        key, body = bodies(row_kinds(row, all_text), row)
        kept = live.get(key)
        if kept is not None and kept.columns[:ROW_DIGEST] == row_digest(body):
            del live[key]
            result.rows += 1
            result.equal += 1
        else:
            rest.append(row)
    return rest


def _text(value: bytes | None) -> str:
    assert value is not None  # key columns are NOT NULL
    return value.decode()
