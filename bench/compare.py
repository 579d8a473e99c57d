"""The bridge side by side with the physical limit and with Debezium, on the local stack.

    python bench/compare.py [--rows 1000000] [--txn-rows 1,100,100000]
                            [--ops insert,update] [--skip-debezium] [--schemas]
                            [--binary] [--rate 500] [--latency-seconds 30] [--json PATH]

With no arguments: the whole matrix, a million rows of a 10-column table (int,
bigint, text, numeric, timestamptz, bool, jsonb, uuid, float8, date) inserted, then
every row updated, in transactions of 1, 100 and 100,000 rows; then the bridge's
latency at a fixed offered rate. Each cell (transaction size x operation) gets one
fresh slot and publication per reader before its backlog is written, so every
reader drains the very same WAL, one after the other, with nothing else running:

* drain: bench/drain.c, a libpq client that receives every message and drops it (a
  status update every 10 s and when asked), until the WAL position after the load.
* limit: `pg_recvlogical` reading its pgoutput slot with the bridge's options to
  /dev/null, until --endpos: what PostgreSQL's walsender can decode and ship.
* bridge: `python -m bridge run`, commit to broker ack (the slot's
  confirmed_flush_lsn passes the last transaction and the topic holds every row).
* debezium: the PostgreSQL connector (pgoutput, JsonConverter) in Kafka Connect
  standalone, same publication, same broker, same completion test.

`--binary` sets the bridge's source.binary (pgoutput sends each value in its send format)
and gives pg_recvlogical the same option, so the limit decodes the same WAL the same way.

Bridge and Debezium are timed from the moment their slot turns active (JVM and
interpreter start-up excluded, shown separately); CPU seconds cover the same span,
peak RSS is the process's VmHWM. Ratios are of the rows/s figures.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psycopg
from confluent_kafka.admin import AdminClient
from psycopg import sql

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import e2e
from compare_debezium import DEBEZIUM_VERSION, Debezium
from compare_report import cell_line, header, load_average, machine, table
from compare_workloads import (
    OPS,
    TABLE,
    Backlog,
    build_drain,
    drain,
    limit_options,
    load,
    prepare,
    run_drain,
    run_limit,
)

READERS = ("drain", "limit", "bridge", "debezium")


def _topic(prefix: str) -> str:
    return f"{prefix}.public.{TABLE}"


def delete_topics(bootstrap: str, prefixes: list[str]) -> None:
    """A million-row cell leaves up to a GiB of records behind: free the disk."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    topics = [t for t in admin.list_topics(timeout=30).topics if any(p in t for p in prefixes)]
    for future in admin.delete_topics(topics).values():
        future.result(60)


def read_backlog(
    conn: psycopg.Connection[Any],
    stack: Any,
    reader: Any,
    prefix: str,
    rows: int,
    backlog: Backlog,
) -> dict[str, Any]:
    visible = e2e.Visible(stack.kafka_bootstrap, _topic(prefix), prefix, exactly_once=False)
    slot = e2e.Slot(conn, prefix)
    try:
        return drain(reader, slot, visible, rows, backlog.last_start)
    finally:
        reader.stop()
        visible.close()
        slot.drop()


def cell(
    args: argparse.Namespace, stack: Any, workdir: Path, op: str, txn_rows: int, client: Path
) -> dict[str, Any]:
    """One backlog of `op` in transactions of `txn_rows`, drained by each reader in turn."""
    tag = time.time_ns() % 10**9
    names = {r: f"cmp_{op[0]}{txn_rows}_{r}_{tag}" for r in READERS}
    if args.skip_debezium:
        del names["debezium"]
    dsn = str(stack.dsn(e2e.DB))
    with psycopg.connect(dsn, autocommit=True) as conn:
        for name in names.values():
            conn.execute(
                sql.SQL("CREATE PUBLICATION {} FOR TABLE {}").format(
                    sql.Identifier(name), sql.Identifier(TABLE)
                )
            )
            conn.execute("SELECT pg_create_logical_replication_slot(%s, 'pgoutput')", (name,))
        for reader in ("bridge", "debezium"):
            if reader in names:
                e2e.create_topic(stack.kafka_bootstrap, _topic(names[reader]))
        dbz = None
        if "debezium" in names:
            dbz = Debezium(
                stack,
                dbname=e2e.DB,
                table=TABLE,
                slot=names["debezium"],
                publication=names["debezium"],
                prefix=names["debezium"],
                workdir=workdir,
                schemas=args.schemas,
            )
            dbz.prime(e2e.wait)
        backlog = load(dsn, op, args.rows, txn_rows)
        results: dict[str, Any] = {}
        version = conn.info.server_version
        options = limit_options(names["drain"], version, args.binary)
        results["drain"] = run_drain(client, stack, e2e.DB, names["drain"], options, backlog.end)
        e2e.Slot(conn, names["drain"]).drop()
        options = limit_options(names["limit"], version, args.binary)
        results["limit"] = run_limit(stack, e2e.DB, names["limit"], options, backlog.end)
        e2e.Slot(conn, names["limit"]).drop()
        source = {"binary": True} if args.binary else None
        bridge = e2e.Bridge(stack, names["bridge"], workdir, exactly_once=False, source=source)
        results["bridge"] = read_backlog(conn, stack, bridge, names["bridge"], args.rows, backlog)
        if dbz is not None:
            results["debezium"] = read_backlog(
                conn, stack, dbz, names["debezium"], args.rows, backlog
            )
            results["debezium"]["version"] = DEBEZIUM_VERSION
            results["debezium"]["json_schemas"] = args.schemas
        for name in names.values():
            conn.execute(sql.SQL("DROP PUBLICATION {}").format(sql.Identifier(name)))
    delete_topics(stack.kafka_bootstrap, list(names.values()))
    for result in results.values():
        result["rows_per_s"] = round(args.rows / result["seconds"])
        result["seconds"] = round(result["seconds"], 2)
        if "in_topic_s" in result:
            result["rows_per_s_in_topic"] = round(args.rows / result["in_topic_s"])
            result["in_topic_s"] = round(result["in_topic_s"], 2)
    results["limit"]["options"] = dict(options)
    bridge_rate = results["bridge"]["rows_per_s"]
    ratios = {
        "bridge/limit": round(bridge_rate / results["limit"]["rows_per_s"], 3),
        "bridge/drain": round(bridge_rate / results["drain"]["rows_per_s"], 3),
    }
    if "debezium" in results:
        ratios["bridge/debezium"] = round(bridge_rate / results["debezium"]["rows_per_s"], 3)
    return {
        "op": op,
        "rows": args.rows,
        "txn_rows": txn_rows,
        "load_s": round(backlog.seconds, 2),
        "wal_mib": round((backlog.end - backlog.first) / 2**20, 1),
        **results,
        "ratios": ratios,
    }


def matrix(args: argparse.Namespace, stack: Any, workdir: Path) -> list[dict[str, Any]]:
    """Per transaction size: a fresh table, the insert cell, then the update cell.

    Without an insert cell the rows are inserted unmeasured, in one transaction. The
    table is vacuumed between the two (its autovacuum is off, see compare_workloads).
    """
    cells = []
    dsn = str(stack.dsn(e2e.DB))
    client = build_drain(workdir)
    print(header(), file=sys.stderr, flush=True)
    for txn_rows in args.txn_rows:
        with psycopg.connect(dsn, autocommit=True) as conn:
            prepare(conn)
        if "insert" in args.ops:
            cells.append(cell(args, stack, workdir, "insert", txn_rows, client))
            print(cell_line(cells[-1]), file=sys.stderr, flush=True)
        else:
            load(dsn, "insert", args.rows, args.rows)
        if "update" in args.ops:
            with psycopg.connect(dsn, autocommit=True) as conn:
                conn.execute(f"VACUUM ANALYZE {TABLE}")
            cells.append(cell(args, stack, workdir, "update", txn_rows, client))
            print(cell_line(cells[-1]), file=sys.stderr, flush=True)
    return cells


def latency(args: argparse.Namespace, stack: Any, workdir: Path) -> dict[str, Any] | None:
    """bench/e2e.py's latency run: single-row transactions at `--rate` for a while."""
    if args.latency_seconds <= 0:
        return None
    with psycopg.connect(str(stack.dsn(e2e.DB)), autocommit=True) as conn:
        conn.execute(e2e.TABLE_DDL)
    run = argparse.Namespace(rate=args.rate, seconds=args.latency_seconds, exactly_once=False)
    return e2e.latency(run, stack, workdir)


def _int_list(text: str) -> list[int]:
    return [int(part) for part in text.split(",")]


def _ops(text: str) -> list[str]:
    ops = text.split(",")
    if not ops or any(op not in OPS for op in ops):
        raise argparse.ArgumentTypeError(f"choose from {','.join(OPS)}")
    return ops


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument(
        "--txn-rows", type=_int_list, default=[1, 100, 100_000], help="e.g. 1,100,100000"
    )
    parser.add_argument("--ops", type=_ops, default=list(OPS), help="insert,update")
    parser.add_argument(
        "--schemas", action="store_true", help="Debezium's JsonConverter with schemas.enable"
    )
    parser.add_argument("--skip-debezium", action="store_true")
    parser.add_argument("--binary", action="store_true", help="source.binary for bridge and limit")
    parser.add_argument("--rate", type=float, default=500.0, help="latency: offered txn/s")
    parser.add_argument(
        "--latency-seconds", type=float, default=30.0, help="latency run length; 0 skips it"
    )
    parser.add_argument("--json", type=Path, help="default bench/results/compare-<time>.json")
    args = parser.parse_args()
    started = datetime.now(UTC)
    t0 = time.monotonic()
    host = machine()
    stack = e2e.load_stack().Stack()
    stack.start()
    try:
        stack.create_database(e2e.DB)
        with psycopg.connect(str(stack.dsn(e2e.DB)), autocommit=True) as conn:
            row = conn.execute("SHOW server_version").fetchone()
            host["postgresql"] = row[0] if row else None
        with tempfile.TemporaryDirectory(prefix="bench-compare-") as tmp:
            cells = matrix(args, stack, Path(tmp))
            lat = latency(args, stack, Path(tmp))
    finally:
        stack.stop()
    host["load_average_end"] = load_average()
    debezium = None if args.skip_debezium else DEBEZIUM_VERSION
    report = {
        "started": started.isoformat(timespec="seconds"),
        "duration_s": round(time.monotonic() - t0),
        "full_matrix": args.rows == 1_000_000
        and sorted(args.txn_rows) == [1, 100, 100_000]
        and sorted(args.ops) == sorted(OPS)
        and not args.skip_debezium,
        "config": {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()},
        "machine": host,
        "debezium": debezium,
        "cells": cells,
        "latency": lat,
    }
    stamp = started.strftime("%Y%m%dT%H%M%SZ")
    path = args.json or Path(__file__).resolve().parent / "results" / f"compare-{stamp}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(report, indent=2) + "\n")
    print(table(cells, lat, host, debezium))
    print(f"JSON: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
