"""How the bridge's CPU per row and memory grow with the shape of the work.

    python bench/scaling.py [--rows 100000] [--huge-rows 1000000]
                            [--only columns,size,tables,huge]

Everything is real: PostgreSQL, Kafka and the registry from deploy/local/stack.py, and
the bridge as `python -m bridge run` in its own process (bench/e2e.py's `Bridge`).
Every run is a backlog: the tables and the slot are made, the bridge stopped, the load
committed, then the bridge started; it is measured from the moment its slot is active
(interpreter start-up excluded) until the slot's confirmed_flush_lsn passes the load's
last commit, i.e. until Kafka acknowledged every record. Reported per run: rows/s to
that point, the bridge process's CPU-µs per row (all threads, from /proc) and its peak
RSS (VmHWM).

The four series (issue #22 part 4):
* columns: 5, 20 and 100 columns per row (cycling int4, text, float8, timestamptz),
  `--rows` rows in transactions of 1,000;
* size: one text column of 100 B, 1 KB, 10 KB and 100 KB of incompressible hex per
  row (from 2 KB on PostgreSQL TOASTs it out of line); the row count shrinks with the
  size so every run moves about the same bytes (at most `--rows` rows);
* tables: `--rows` rows spread over 1, 10, 100 and 1,000 tables of one publication
  (each new table costs a relation message, two schema registrations and a topic);
* huge: one transaction of `--huge-rows` rows, with `source.streaming` off (the
  walsender spills it and sends it after the commit) and on (sent while it runs; the
  bridge buffers it, spilling beyond `pipeline.memory_limit_mb`, until the commit).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import psycopg
from e2e import DB, Bridge, Slot, insert_lsn, load_stack, wait
from psycopg import sql

COLUMN_TYPES = (
    ("int4", "g"),
    ("text", "'v' || g"),
    ("float8", "g * 0.5"),
    ("timestamptz", "now()"),
)
SIZES = (100, 1_000, 10_000, 100_000)
TABLE_COUNTS = (1, 10, 100, 1_000)
BYTES_BUDGET = 200 * 1_000 * 1_000


def _columns_table(name: str, columns: int) -> tuple[str, str]:
    """DDL and an INSERT ... SELECT over g for a table of `columns` columns."""
    types = [COLUMN_TYPES[i % len(COLUMN_TYPES)] for i in range(columns - 1)]
    ddl = ", ".join(f"c{i} {t}" for i, (t, _) in enumerate(types))
    values = ", ".join(expr for _, expr in types)
    return (
        f"CREATE TABLE {name} (id bigint PRIMARY KEY, {ddl})",
        f"INSERT INTO {name} SELECT g, {values} FROM generate_series(%s::bigint, %s::bigint) g",
    )


def _size_table(name: str, size: int) -> tuple[str, str]:
    """Incompressible text (md5 chunks salted by the row), so TOAST stores it out of line
    instead of compressing it inline."""
    chunks = max(1, size // 32)
    return (
        f"CREATE TABLE {name} (id bigint PRIMARY KEY, payload text)",
        f"INSERT INTO {name} SELECT g, (SELECT string_agg(md5(random()::text || g || i), '') "
        f"FROM generate_series(1, {chunks}) i) FROM generate_series(%s::bigint, %s::bigint) g",
    )


def measure(
    stack: Any,
    workdir: Path,
    *,
    series: str,
    param: Any,
    tables: list[tuple[str, str]],
    rows: int,
    txn_rows: int,
    source: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Create `tables` (DDL, INSERT over a g range), load `rows` rows spread over them as
    a backlog, and time the bridge draining it."""
    prefix = f"sc_{series}_{time.time_ns() % 10**9}"
    dsn = str(stack.dsn(DB))
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("DROP SCHEMA IF EXISTS sc CASCADE")
        conn.execute("CREATE SCHEMA sc")
        conn.execute("SET search_path = sc")
        for ddl, _ in tables:
            conn.execute(ddl)
        bridge = Bridge(stack, prefix, workdir, exactly_once=False, source=source)
        slot = Slot(conn, prefix)
        bridge.start()
        wait(lambda: slot.state()[0], 120, "the slot", bridge.check)
        bridge.stop()
        wait(lambda: not slot.state()[0], 60, "the slot released", lambda: None)
        conn.execute("SET synchronous_commit = on")
        per_table = max(1, rows // len(tables))
        for _, insert in tables:
            for start in range(1, per_table + 1, txn_rows):  # autocommit: one txn each
                conn.execute(insert, (start, min(start + txn_rows - 1, per_table)))
        end = insert_lsn(conn)
        t0 = time.monotonic()
        bridge.start()
        wait(lambda: slot.state()[0], 120, "the slot", bridge.check)
        cpu0 = bridge.cpu_s()
        wait(lambda: slot.state()[1] >= end, 3600, "the acknowledgement", bridge.check)
        took = time.monotonic() - t0
        cpu = bridge.cpu_s() - cpu0
        rss = bridge.peak_rss_mib()
        bridge.stop()
        slot.drop()
        conn.execute(sql.SQL("DROP PUBLICATION IF EXISTS {}").format(sql.Identifier(prefix)))
    total = per_table * len(tables)
    return {
        "series": series,
        "param": param,
        "rows": total,
        "seconds": round(took, 2),
        "rows_per_s": round(total / took),
        "cpu_us_per_row": round(cpu / total * 1e6, 1),
        "peak_rss_mib": round(rss, 1),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--huge-rows", type=int, default=1_000_000)
    parser.add_argument("--only", default="columns,size,tables,huge")
    args = parser.parse_args()
    only = set(args.only.split(","))
    stack = load_stack().Stack()
    stack.start()
    print(f"# load average before: {os.getloadavg()}", file=sys.stderr)
    try:
        stack.create_database(DB)
        with tempfile.TemporaryDirectory(prefix="bench-scaling-") as tmp:
            work = Path(tmp)
            runs: list[dict[str, Any]] = []  # measure()'s keyword arguments
            if "columns" in only:
                runs += [
                    dict(
                        series="columns",
                        param=n,
                        tables=[_columns_table("t", n)],
                        rows=args.rows,
                        txn_rows=1_000,
                    )
                    for n in (5, 20, 100)
                ]
            if "size" in only:
                runs += [
                    dict(
                        series="row_bytes",
                        param=size,
                        tables=[_size_table("t", size)],
                        rows=min(args.rows, BYTES_BUDGET // size),
                        txn_rows=100,
                    )
                    for size in SIZES
                ]
            if "tables" in only:
                runs += [
                    dict(
                        series="tables",
                        param=n,
                        tables=[_columns_table(f"t{i}", 5) for i in range(n)],
                        rows=args.rows,
                        txn_rows=1_000,
                    )
                    for n in TABLE_COUNTS
                ]
            if "huge" in only:
                runs += [
                    dict(
                        series="one_txn_streaming",
                        param=mode,
                        tables=[_columns_table("t", 5)],
                        rows=args.huge_rows,
                        txn_rows=args.huge_rows,
                        source={"streaming": mode, "proto_version": 2} if mode == "on" else None,
                    )
                    for mode in ("off", "on")
                ]
            for run in runs:
                print(json.dumps(measure(stack, work, **run)), flush=True)
    finally:
        stack.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
