"""`bridge verify`'s memory does not grow with the table once the topic's key states are
on disk (issue 48 part 2: peak RSS within `--memory-limit-mb` plus a fixed term,
whatever the table size).

`bridge verify` runs as a process of its own at two table sizes, its own peak resident
memory read from outside (`peak_rss.Alone`: `wait4`'s `ru_maxrss` of the verify process,
not of this one). With `--memory-limit-mb 16` the states go to hash partitions on disk
at both sizes, and the peak may grow by no more than `DISK_BYTES_PER_ROW` per added row;
with the default limit they stay in a dict, and the same measure must show them growing
by at least `MEMORY_BYTES_PER_ROW` per row (the per-key states in memory take ~215-260
bytes of this shape): the measure sees per-row memory where there is some, so a store
that kept its states in memory again would fail the first bound by several times. And
on disk the peak itself stays within the limit + 64 MiB (`DISK_BOUND`, issue 48): memory,
not time, so it may be asserted, and it is verify's own high-water mark, exact (the
kernel's, not sampled), whatever else runs on the machine.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import psycopg
from peak_rss import Alone
from running import running
from tools import venv_tool

from verify.live import bridge_config

SMALL, LARGE = 40_000, 200_000  # rows at the first and the second measure
# Measured (2026-12-02, load average 14): on disk 18.7 bytes per added row (104.9 ->
# 107.8 MiB), in a dict 258 (110.6 -> 150.0 MiB).
DISK_BYTES_PER_ROW = 64  # the states on disk: under a third of a key's state in a dict
MEMORY_BYTES_PER_ROW = 150  # the states in a dict: what the measure must see
# Issue 48: on disk, verify's own peak within --memory-limit-mb + 64 MiB, whatever the table
# size. Measured 2026-12-03 in a fresh clone, as .ci/run runs it: 72.3 / 72.5 MiB (76.5 /
# 77.8 before the fetch queues followed the limit; the project's full CI run of that
# measured 80.4 / 80.8, 3-4 MiB more than this test alone, and took the assertion back).
DISK_LIMIT_MB = 16
DISK_BOUND = (DISK_LIMIT_MB + 64) * 2**20


def _peak(command: list[str]) -> tuple[int, dict[str, Any]]:
    """One `bridge verify` process: its own peak resident bytes and its table's verdict."""
    alone = Alone(command)
    done = subprocess.run(alone.argv, check=False, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    (table,) = json.loads(done.stdout)["tables"]
    return alone.usage().peak, table


def test_peak_memory_does_not_grow_with_rows_on_disk(
    stack: Any, pg_conn: psycopg.Connection[Any], pg_db: str, tmp_path: Path
) -> None:
    pg_conn.execute(
        "CREATE TABLE t (id bigint PRIMARY KEY, v int, s text);"
        "CREATE TABLE signals (id text PRIMARY KEY, type text NOT NULL, data text)"
    )
    publication = f"pub_{pg_db}"
    pg_conn.execute(f"CREATE PUBLICATION {publication} FOR TABLE t, signals")
    cfg = bridge_config(stack, pg_db, publication)
    settings = cfg.model_dump(mode="json", exclude_none=True)
    settings["source"]["password"] = stack.pg_password  # dumped masked
    path = tmp_path / "bridge.yaml"
    path.write_text(json.dumps(settings))
    command = [venv_tool("bridge"), "verify", "-c", str(path), "--format", "json"]
    command += ["--tables", "public.t", "--timeout", "300"]
    insert = "INSERT INTO t SELECT g, g, 'row ' || g FROM generate_series(%s, %s) g"
    peaks: dict[tuple[str, int], int] = {}
    with running(cfg) as bridge:
        for rows in (SMALL, LARGE):
            pg_conn.execute(insert, (len(peaks) // 2 * SMALL + 1, rows))
            for mode, limit in (
                ("disk", ["--memory-limit-mb", str(DISK_LIMIT_MB)]),
                ("memory", []),
            ):
                peaks[mode, rows], table = _peak(command + limit)
                assert (table["status"], table["rows"]) == ("equal", rows), table
                assert table["kafka_state_on_disk"] is (mode == "disk"), table
            bridge.check()
    growth = {
        mode: (peaks[mode, LARGE] - peaks[mode, SMALL]) / (LARGE - SMALL)
        for mode in ("disk", "memory")
    }
    shown = {k: f"{v / 2**20:.1f} MiB" for k, v in peaks.items()}
    assert growth["memory"] >= MEMORY_BYTES_PER_ROW, (growth, shown)
    assert growth["disk"] <= DISK_BYTES_PER_ROW, (growth, shown)
    assert max(peaks["disk", SMALL], peaks["disk", LARGE]) <= DISK_BOUND, shown
    print(f"verify's peaks: {shown}")  # pytest -s shows them when it passes
