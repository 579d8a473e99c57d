"""Initial snapshot throughput with 1 and N reader processes, on the real local stack.

    python bench/snapshot.py [--rows 1000000] [--workers 1,4] [--chunk-size 10000]
                             [--table compare|writes] [--writes] [--verify]
                             [--exactly-once] [--stream] [--stack-json FILE]

One table of `--rows` rows, vacuumed and analyzed: by default bench/compare.py's
10-column table (int, bigint, text, numeric, timestamptz, bool, jsonb, uuid, float8,
date; its rows written by the same procedure), so the snapshot's rate can be set beside
the streaming rate; `--table writes` is `id bigint PRIMARY KEY, v int, s text,
n numeric(12,2), ts timestamptz, flag bool`, the table `--writes` changes. For each
worker count a fresh slot (so a fresh exported snapshot) and topic prefix; the bridge
runs in this process (`Pipeline` on a thread, mode `initial`). Reported per run:
seconds from `Pipeline.run()` until every snapshot chunk is delivered and recorded
(reader start-up included), the rows/s that makes, and the CPU time per row of the
bridge (this process, which produces, plus its reader processes) and of PostgreSQL's
backends connected to the bench database (the readers' COPY work, mostly), and how long
after `Pipeline.run()` the first chunk was confirmed (start-up: the slot, the readers'
start, the first chunk's round trip).

`--writes` keeps a session updating, deleting and inserting random rows in small
transactions during the snapshot; `--verify` then stops the writes and checks that
the keyed state in Kafka (last record per key, deletes and tombstones remove it)
equals the table, row for row — the 1-million-row version of
tests/snapshot/test_initial.py. `--exactly-once` runs the bridge with
`kafka.exactly_once` (what a standby pair needs). `--stream` sets the stream beside the
snapshots in the same run: bench/compare.py's cell of `--rows` inserts in 100-row
transactions (drain, pg_recvlogical, the bridge over one backlog) before the snapshots
and again after them, and each snapshot's rows/s over the mean of the two bridge
drains. Without `--stack-json` (the JSON line
printed by `python deploy/local/stack.py up`) the local stack is started and stopped here.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import psycopg

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))  # the test helpers import their siblings by name

import compare  # noqa: E402
from compare_workloads import TABLE as COMPARE_TABLE  # noqa: E402
from compare_workloads import build_drain, load  # noqa: E402
from compare_workloads import prepare as prepare_compare  # noqa: E402
from e2e import DB as STREAM_DB  # noqa: E402
from e2e import load_stack  # noqa: E402

from bridge.build import build_pipeline  # noqa: E402
from bridge.config import Config  # noqa: E402
from tests.snapshot.helpers import (  # noqa: E402
    TopicReader,
    Writer,
    keyed_state,
    settings,
    snapshot_tables,
    table_state,
)
from tests.waiting import wait_for  # noqa: E402

DB = "bench_snapshot"
TABLE = (
    "CREATE TABLE t (id bigint PRIMARY KEY, v int, s text, n numeric(12,2), "
    "ts timestamptz, flag bool)"
)
FILL = (
    "INSERT INTO t SELECT g, g %% 1000, 'row ' || g || ' ' || md5(g::text), g / 7.0, "
    "now() - g * interval '1 second', g %% 2 = 0 FROM generate_series(1, %s) g"
)


def start_stack(stack_json: str | None) -> tuple[Any, Any]:
    """(connection info, the stack to stop or None) from a JSON file or a fresh stack."""
    if stack_json:
        info = json.loads(Path(stack_json).read_text().splitlines()[0])
        return SimpleNamespace(**info), None
    stack = load_stack().Stack()
    stack.start()
    return stack, stack


def dsn(stack: Any, dbname: str) -> str:
    return (
        f"host={stack.pg_host} port={stack.pg_port} user={stack.pg_user} "
        f"password={stack.pg_password} dbname={dbname}"
    )


def prepare(stack: Any, rows: int, table: str = "t") -> None:
    with psycopg.connect(dsn(stack, "postgres"), autocommit=True) as admin:
        exists = admin.execute("SELECT 1 FROM pg_database WHERE datname = %s", (DB,)).fetchone()
        if not exists:
            admin.execute(f"CREATE DATABASE {DB}")
    with psycopg.connect(dsn(stack, DB), autocommit=True) as conn:
        conn.execute(f"DROP TABLE IF EXISTS {table}")
        conn.execute("DROP SCHEMA IF EXISTS bridge CASCADE")
        t0 = time.monotonic()
        if table == COMPARE_TABLE:
            prepare_compare(conn)
            load(dsn(stack, DB), "insert", rows, 100_000)
        else:
            conn.execute(TABLE)
            conn.execute(FILL, (rows,))
        conn.execute(f"VACUUM ANALYZE {table}")
        print(f"table {table}: {rows:,} rows loaded in {time.monotonic() - t0:.1f}s", flush=True)


def cpu_seconds(db: str = DB) -> tuple[float, float, dict[str, float]]:
    """CPU seconds of this process, of its snapshot reader processes (they live until
    the snapshot is done) and of each PostgreSQL backend connected to database `db`, by
    pid (the readers' COPY work). The local stack's servers are children too, and not
    counted."""
    times = os.times()
    readers = 0.0
    backends: dict[str, float] = {}
    tick = os.sysconf("SC_CLK_TCK")
    me = str(os.getpid())
    for proc in Path("/proc").glob("[0-9]*"):
        try:
            fields = (proc / "stat").read_text().rsplit(")", 1)[1].split()
            command = (proc / "cmdline").read_bytes()
        except (FileNotFoundError, ProcessLookupError):
            continue  # ended meanwhile
        cpu = (int(fields[11]) + int(fields[12])) / tick  # utime, stime
        if fields[1] == me and b"bridge.snapshot.worker" in command:
            readers += cpu
        elif command.startswith(b"postgres: ") and f" {db} ".encode() in command:
            backends[proc.name] = cpu
    return times.user + times.system, readers, backends


def run(
    stack: Any,
    table: str,
    workers: int,
    chunk_size: int,
    copy_format: str | None,
    writes: bool,
    verify: bool,
    exactly_once: bool,
    db: str = DB,
) -> tuple[float, float, float]:
    """One snapshot of `table` in database `db` (bench/spark_load.py snapshots its own
    table in its own database): (rows/s, bridge CPU-µs/row, PostgreSQL CPU-µs/row)."""
    slot = f"bench_{uuid.uuid4().hex[:8]}"
    prefix = f"bench{uuid.uuid4().hex[:8]}"
    workdir = Path(tempfile.mkdtemp(prefix="bench-snapshot-"))
    config = settings(
        stack, db, slot, "bench", prefix, workdir, workers=workers, chunk_size=chunk_size
    )
    config["log"] = {"level": "WARNING"}
    config["snapshot"]["progress_bar"] = "auto"
    if copy_format is not None:
        config["snapshot"]["copy_format"] = copy_format
    config["kafka"]["exactly_once"] = exactly_once
    conn = psycopg.connect(dsn(stack, db), autocommit=True)
    rows = conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0]  # type: ignore[index]
    writer = Writer(dsn(stack, db), table, rows).start() if writes else None
    pipeline = build_pipeline(Config(**config))
    thread = threading.Thread(target=pipeline.run, name="bridge", daemon=True)
    own0, readers0, backends0 = cpu_seconds(db)
    t0 = time.monotonic()
    thread.start()

    first: list[float] = []  # when the first chunk was confirmed: start-up, fixed per run

    def finished() -> bool:
        tables = snapshot_tables(pipeline)
        if not first and any(s.rows_done for s in tables):
            first.append(time.monotonic() - t0)
        return bool(tables) and all(s.done for s in tables)

    wait_for(finished, 3600, "the snapshot", every=0.02)
    seconds = time.monotonic() - t0
    own1, readers1, backends1 = cpu_seconds(db)
    read = sum(s.rows_done for s in snapshot_tables(pipeline))
    own_us = (own1 - own0) * 1e6 / read
    readers_us = (readers1 - readers0) * 1e6 / read
    cpu_us = own_us + readers_us
    pg_us = sum(cpu - backends0.get(pid, 0.0) for pid, cpu in backends1.items()) * 1e6 / read
    print(
        f"workers={workers}: {read:,} rows in {seconds:.1f}s = {read / seconds:,.0f} rows/s, "
        f"bridge {cpu_us:.1f} CPU-µs/row (producing process {own_us:.1f}, readers "
        f"{readers_us:.1f}), PostgreSQL {pg_us:.1f}; first chunk confirmed after "
        f"{first[0] if first else seconds:.2f}s (load {os.getloadavg()[0]:.2f})",
        flush=True,
    )
    if writer is not None:
        writer.stop()
        print(f"  {writer.transactions} write transactions ran during the snapshot", flush=True)
    if verify:
        reader = TopicReader(stack.kafka_bootstrap, stack.registry_url, f"{prefix}.public.{table}")
        expected = table_state(conn, table)
        t1 = time.monotonic()
        wait_for(lambda: keyed_state(reader.read(600)) == expected, 900, "Kafka = table", every=1.0)
        print(
            f"  verified: Kafka's keyed state equals the table ({len(expected):,} rows, "
            f"{len(reader.records):,} records read in {time.monotonic() - t1:.0f}s)",
            flush=True,
        )
        reader.close()
    pipeline.stop()
    thread.join(120)
    forget(conn, slot)
    conn.close()
    shutil.rmtree(workdir, ignore_errors=True)
    return read / seconds, cpu_us, pg_us


def forget(conn: psycopg.Connection[Any], slot: str) -> None:
    """Drop the stopped bridge's slot, once released, and its state (schema `bridge`), so
    that the next run in the database snapshots again and no slot holds WAL back."""

    def released() -> bool:
        row = conn.execute(
            "SELECT active FROM pg_replication_slots WHERE slot_name = %s", (slot,)
        ).fetchone()
        return row is not None and not row[0]

    wait_for(released, 60, "the slot to be released")
    conn.execute("SELECT pg_drop_replication_slot(%s)", (slot,))
    conn.execute("DROP SCHEMA bridge CASCADE")


def stream(stack: Any, rows: int, client: Path, workdir: Path) -> tuple[float, float]:
    """bench/compare.py's cell of `rows` inserts in 100-row transactions, in its own
    database on a fresh table: (the bridge's rows/s, its CPU-µs/row)."""
    with psycopg.connect(str(stack.dsn(STREAM_DB)), autocommit=True) as conn:
        prepare_compare(conn)
    args = argparse.Namespace(rows=rows, skip_debezium=True, binary=False, schemas=False)
    cell = compare.cell(args, stack, workdir, "insert", 100, client)
    bridge = cell["bridge"]
    cpu_us = bridge["cpu_s"] * 1e6 / rows
    print(
        f"stream: {rows:,} inserts in 100-row transactions: drain "
        f"{cell['drain']['rows_per_s']:,} rows/s, pg_recvlogical {cell['limit']['rows_per_s']:,}, "
        f"bridge {bridge['rows_per_s']:,} rows/s at {cpu_us:.1f} CPU-µs/row "
        f"(load {os.getloadavg()[0]:.2f})",
        flush=True,
    )
    return bridge["rows_per_s"], cpu_us


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--workers", default="1,4", help="comma-separated reader counts")
    parser.add_argument("--chunk-size", type=int, default=10_000)
    parser.add_argument(
        "--table", choices=("compare", "writes"), default="compare", help="see above"
    )
    parser.add_argument(
        "--copy-format", choices=("text", "binary"), help="snapshot.copy_format (default: its)"
    )
    parser.add_argument("--writes", action="store_true", help="write during the snapshot")
    parser.add_argument("--verify", action="store_true", help="check Kafka's final state")
    parser.add_argument("--exactly-once", action="store_true", help="kafka.exactly_once")
    parser.add_argument(
        "--stream", action="store_true", help="the stream's 100-row insert cell before and after"
    )
    parser.add_argument("--stack-json", help="connection info of a running local stack")
    args = parser.parse_args()
    if args.writes and args.table != "writes":
        parser.error("--writes changes the columns of --table writes")
    if args.stream and args.stack_json:
        parser.error("--stream runs bench/compare.py's cell, on a stack started here")
    table = COMPARE_TABLE if args.table == "compare" else "t"
    stack, owned = start_stack(args.stack_json)
    try:
        streams = []
        if args.stream:
            stack.create_database(STREAM_DB)
            workdir = Path(tempfile.mkdtemp(prefix="bench-snapshot-stream-"))
            client = build_drain(workdir)
            streams.append(stream(stack, args.rows, client, workdir))
        prepare(stack, args.rows, table)
        flags = args.writes, args.verify, args.exactly_once
        results = [
            (workers, *run(stack, table, workers, args.chunk_size, args.copy_format, *flags))
            for workers in (int(w) for w in args.workers.split(","))
        ]
        if args.stream:
            streams.append(stream(stack, args.rows, client, workdir))
            shutil.rmtree(workdir, ignore_errors=True)
        base = results[0][1]
        print("| readers | rows/s | bridge CPU-µs/row | PostgreSQL CPU-µs/row | vs first run |")
        for workers, rate, cpu, pg in results:
            print(f"| {workers} | {rate:,.0f} | {cpu:.1f} | {pg:.1f} | x{rate / base:.2f} |")
        if streams:
            mean = sum(rate for rate, _ in streams) / len(streams)
            print(
                "stream (bridge, 100-row inserts) before / after: "
                + " / ".join(f"{rate:,.0f} rows/s at {cpu:.1f} CPU-µs/row" for rate, cpu in streams)
                + "; snapshot rows/s over their mean: "
                + ", ".join(f"readers={w} x{rate / mean:.2f}" for w, rate, _, _ in results)
            )
    finally:
        if owned is not None:
            owned.stop()


if __name__ == "__main__":
    main()
