"""The bridge side by side with the physical limit and with Debezium, on the local stack.

    python bench/compare.py [--rows 1000000] [--txn-rows 100000|100|1] [--schemas]
                            [--json PATH] [--skip-debezium]

One backlog, three readers. A 10-column table (int, bigint, text, numeric, timestamptz,
bool, jsonb, uuid, float8, date) gets `--rows` rows committed in transactions of
`--txn-rows`, after one slot and one publication per reader were created, so every
reader drains the very same WAL, one after the other, with nothing else running:

* limit: `pg_recvlogical` reading its pgoutput slot with the bridge's options
  (proto_version, publication_names, binary, messages) to /dev/null, until --endpos;
  what PostgreSQL's walsender can decode and ship, with a client doing nothing.
* bridge: `python -m bridge run`, commit to broker ack (the slot's confirmed_flush_lsn
  passes the last transaction and the topic holds every row).
* debezium: the PostgreSQL connector (pgoutput, JsonConverter) in Kafka Connect
  standalone, same broker, same completion test (it confirms LSNs on offset commit,
  every second here).

Bridge and Debezium are timed from the moment their slot turns active (JVM and
interpreter start-up excluded; both shown separately); CPU seconds are counted over the
same span and peak RSS is the process's VmHWM. Ratios are of the rows/s figures.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psycopg
from psycopg import sql

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import e2e
from compare_debezium import DEBEZIUM_VERSION, Debezium

from bridge.decode.pgoutput_options import pgoutput_options
from bridge.plugins import default_proto_version

TABLE = "compare_rows"
PG_BIN = Path("/usr/lib/postgresql/15/bin")
CREATE_TABLE = f"""
CREATE TABLE {TABLE} (id int PRIMARY KEY, big bigint, label text, amount numeric(12,2),
  at timestamptz, flag bool, doc jsonb, uid uuid, ratio float8, day date)
"""
INSERT = f"""
INSERT INTO {TABLE}
SELECT g, g::bigint * 1000003, 'row number ' || g, (g %% 100000) / 100.0,
       '2024-01-01 00:00:00+00'::timestamptz + g * interval '1 second', g %% 2 = 0,
       jsonb_build_object('g', g, 'tag', 'x'), md5(g::text)::uuid, g / 7.0,
       DATE '2000-01-01' + g %% 10000
FROM generate_series(%s::int, %s::int) g
"""
READERS = ("limit", "bridge", "debezium")


def proc_cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def proc_peak_rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return 0.0


def flush_lsn(conn: psycopg.Connection[Any]) -> int:
    row = conn.execute("SELECT pg_current_wal_flush_lsn()::text").fetchone()
    assert row is not None
    return e2e.lsn(row[0])


def load(dsn: str, rows: int, txn_rows: int) -> tuple[int, int, int]:
    """Commit the rows; returns WAL positions: before all, before the last transaction, after.

    A reader has seen the last commit once its confirmed position is past the first
    value; the second is pg_recvlogical's --endpos. The WAL is flushed before returning
    (walsenders send flushed WAL only).
    """
    with psycopg.connect(dsn, autocommit=True) as conn:
        first = last_start = e2e.insert_lsn(conn)
        for start in range(1, rows + 1, txn_rows):
            last_start = e2e.insert_lsn(conn)
            conn.execute(INSERT, (start, min(start + txn_rows, rows + 1) - 1))
        end = e2e.insert_lsn(conn)
        e2e.wait(lambda: flush_lsn(conn) >= end, 60, "the WAL flush", lambda: None)
    return first, last_start, end


def run_limit(stack: Any, dbname: str, slot: str, publication: str, end: int) -> dict[str, Any]:
    options = pgoutput_options(
        default_proto_version(150000), [publication], binary=False, messages=True
    )
    argv = [
        str(PG_BIN / "pg_recvlogical"),
        "-h", stack.pg_host, "-p", str(stack.pg_port), "-U", stack.pg_user, "-d", dbname,
        "-S", slot, "--start", "--no-loop", "-f", "/dev/null",
        f"--endpos={end >> 32:X}/{end & 0xFFFFFFFF:X}",
        *(arg for name, value in options for arg in ("-o", f"{name}={value}")),
    ]  # fmt: skip
    env = {**os.environ, "PGPASSWORD": stack.pg_password}
    t0 = time.monotonic()
    with subprocess.Popen(argv, env=env, stderr=subprocess.PIPE) as proc:
        _, err = proc.communicate(timeout=1800)
    wall = time.monotonic() - t0
    if proc.returncode != 0:
        raise SystemExit(f"pg_recvlogical failed ({proc.returncode}): {err.decode()}")
    return {"seconds": wall, "options": dict(options)}


def drain(
    reader: Any, slot: e2e.Slot, visible: e2e.Visible, rows: int, last_start: int
) -> dict[str, Any]:
    """Start `reader`, time it from its slot turning active until it is done."""
    t_start = time.monotonic()
    reader.start()
    e2e.wait(lambda: slot.state()[0], 300, f"slot {slot.name} active", reader.check)
    t0 = time.monotonic()
    cpu0 = proc_cpu_s(reader.proc.pid)
    e2e.wait(lambda: visible() >= rows, 3600, "the records", reader.check)
    e2e.wait(lambda: slot.state()[1] > last_start, 600, "the acknowledgement", reader.check)
    seconds = time.monotonic() - t0
    cpu = proc_cpu_s(reader.proc.pid) - cpu0
    rss = proc_peak_rss_mib(reader.proc.pid)
    reader.stop()
    return {
        "seconds": seconds,
        "startup_s": round(t0 - t_start, 2),
        "cpu_s": round(cpu, 2),
        "rows_per_cpu_s": round(rows / cpu) if cpu else None,
        "peak_rss_mib": round(rss, 1),
    }


def measure(args: argparse.Namespace, stack: Any, workdir: Path) -> dict[str, Any]:
    tag = time.time_ns() % 10**9
    names = {r: f"cmp_{r}_{tag}" for r in READERS}
    dsn = str(stack.dsn(e2e.DB))
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(CREATE_TABLE)
        for name in names.values():
            conn.execute(
                sql.SQL("CREATE PUBLICATION {} FOR TABLE {}").format(
                    sql.Identifier(name), sql.Identifier(TABLE)
                )
            )
            conn.execute("SELECT pg_create_logical_replication_slot(%s, 'pgoutput')", (name,))
        dbz = None
        if not args.skip_debezium:
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
            e2e.create_topic(stack.kafka_bootstrap, f"{names['debezium']}.public.{TABLE}")
            dbz.prime(e2e.wait)
        t0 = time.monotonic()
        first, last_start, end = load(dsn, args.rows, args.txn_rows)
        load_s = time.monotonic() - t0
        results: dict[str, Any] = {}
        results["limit"] = run_limit(stack, e2e.DB, names["limit"], names["limit"], end)
        e2e.Slot(conn, names["limit"]).drop()

        prefix = names["bridge"]
        topic = f"{prefix}.public.{TABLE}"
        e2e.create_topic(stack.kafka_bootstrap, topic)
        bridge = e2e.Bridge(stack, prefix, workdir, exactly_once=False)
        visible = e2e.Visible(stack.kafka_bootstrap, topic, prefix, exactly_once=False)
        slot = e2e.Slot(conn, prefix)
        results["bridge"] = drain(bridge, slot, visible, args.rows, last_start)
        visible.close()
        slot.drop()

        if dbz is not None:
            prefix = names["debezium"]
            topic = f"{prefix}.public.{TABLE}"
            visible = e2e.Visible(stack.kafka_bootstrap, topic, prefix, exactly_once=False)
            slot = e2e.Slot(conn, prefix)
            try:
                results["debezium"] = drain(dbz, slot, visible, args.rows, last_start)
            finally:
                dbz.stop()
                visible.close()
            slot.drop()
            results["debezium"]["version"] = DEBEZIUM_VERSION
            results["debezium"]["json_schemas"] = args.schemas
    for result in results.values():
        result["rows_per_s"] = round(args.rows / result["seconds"])
        result["seconds"] = round(result["seconds"], 2)
    bridge_rate = results["bridge"]["rows_per_s"]
    ratios = {"bridge/limit": round(bridge_rate / results["limit"]["rows_per_s"], 3)}
    if "debezium" in results:
        ratios["bridge/debezium"] = round(bridge_rate / results["debezium"]["rows_per_s"], 3)
    return {
        "rows": args.rows,
        "txn_rows": args.txn_rows,
        "load_s": round(load_s, 2),
        "wal_mib": round((end - first) / 2**20, 1),
        **results,
        "ratios": ratios,
    }


def table(report: dict[str, Any]) -> str:
    lines = [
        f"{report['rows']:,} rows in transactions of {report['txn_rows']:,}",
        f"{'reader':10} {'seconds':>8} {'rows/s':>9} {'CPU s':>7} {'rows/CPU-s':>11} "
        f"{'peak RSS':>9} {'start-up':>9}",
    ]
    for name in READERS:
        r = report.get(name)
        if r is None:
            continue
        cpu = f"{r['cpu_s']:.2f}" if "cpu_s" in r else "-"
        per_cpu = f"{r['rows_per_cpu_s']:,}" if r.get("rows_per_cpu_s") else "-"
        rss = f"{r['peak_rss_mib']:.0f} MiB" if "peak_rss_mib" in r else "-"
        start = f"{r['startup_s']:.1f} s" if "startup_s" in r else "-"
        lines.append(
            f"{name:10} {r['seconds']:8.2f} {r['rows_per_s']:9,} {cpu:>7} {per_cpu:>11} "
            f"{rss:>9} {start:>9}"
        )
    lines.append("  ".join(f"{k} = {v}" for k, v in report["ratios"].items()))
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--txn-rows", type=int, default=100_000)
    parser.add_argument(
        "--schemas", action="store_true", help="Debezium's JsonConverter with schemas.enable"
    )
    parser.add_argument("--skip-debezium", action="store_true")
    parser.add_argument("--json", type=Path, help="default bench/results/compare-<time>.json")
    args = parser.parse_args()
    stack = e2e.load_stack().Stack()
    stack.start()
    try:
        stack.create_database(e2e.DB)
        with tempfile.TemporaryDirectory(prefix="bench-compare-") as tmp:
            report = measure(args, stack, Path(tmp))
    finally:
        stack.stop()
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    path = args.json or Path(__file__).resolve().parent / "results" / f"compare-{stamp}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(report, indent=2) + "\n")
    print(table(report))
    print(f"JSON: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
