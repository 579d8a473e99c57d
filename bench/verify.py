"""`bridge verify` throughput on a large table, clean and with scattered mismatches.

    python bench/verify.py [--rows 1000000] [--mismatches 100] [--stack-json FILE]

bench/snapshot.py's table (`id bigint PRIMARY KEY, v int, s text, n numeric(12,2),
ts timestamptz, flag bool`) of `--rows` rows is streamed by the bridge (initial snapshot,
in this process); then, with the bridge still running:
1. verify on the clean table: seconds, rows/s, CPU µs per row of this process and of
   PostgreSQL (the stack's server and its backends), PostgreSQL rows returned,
   and how many rows needed decoding (the others were settled by their Avro bytes);
2. `--mismatches` rows updated while the table is out of the publication (changes Kafka
   never gets), verify again (it must find exactly those), `--repair` them and time it,
   and verify a third time (it must report 0).
Memory: bytes per key the topic-side state holds (tracemalloc over 100,000 keys of this
table's shape) and the process's peak RSS.
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import tempfile
import threading
import time
import tracemalloc
import uuid
from pathlib import Path
from typing import Any

import psycopg

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "bench"))  # bench/snapshot.py before the tests' snapshot package

from snapshot import dsn, prepare, start_stack  # noqa: E402
from waiting import wait_for  # noqa: E402

from bridge.build import build_pipeline  # noqa: E402
from bridge.config import Config  # noqa: E402
from bridge.verify.repair import repair  # noqa: E402
from bridge.verify.run import Verification, verify  # noqa: E402
from bridge.verify.state import DIGEST_SIZE, ROW_DIGEST, Kept  # noqa: E402
from tests.snapshot.helpers import settings  # noqa: E402

DB = "bench_snapshot"  # bench/snapshot.py's prepare() fills it


def returned(conn: psycopg.Connection[Any]) -> int:
    row = conn.execute(
        "SELECT tup_returned FROM pg_stat_database WHERE datname = current_database()"
    ).fetchone()
    return int(row[0]) if row else 0


def postgres_cpu(conn: psycopg.Connection[Any]) -> float:
    """CPU seconds used so far by the stack's PostgreSQL: its postmaster, its live
    processes, and the ones that ended (the postmaster's reaped children's time), so a
    backend that verify opened and closed counts too. Other servers on the machine do not."""
    row = conn.execute("SELECT pg_backend_pid()").fetchone()
    assert row is not None
    status = Path(f"/proc/{row[0]}/status").read_text()
    postmaster = int(next(x for x in status.splitlines() if x.startswith("PPid:")).split()[1])
    total = 0
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:  # the process ended meanwhile
            continue
        pid, parent = int(stat.parent.name), int(fields[1])
        if pid == postmaster:
            total += sum(int(f) for f in fields[11:15])  # utime, stime, cutime, cstime
        elif parent == postmaster:
            total += int(fields[11]) + int(fields[12])
    return total / os.sysconf("SC_CLK_TCK")


def timed(cfg: Config, conn: psycopg.Connection[Any], what: str) -> Verification:
    before, pg_before = returned(conn), postgres_cpu(conn)
    cpu = resource.getrusage(resource.RUSAGE_SELF)
    t0 = time.monotonic()
    result = verify(cfg, timeout=1800)
    seconds = time.monotonic() - t0
    after = resource.getrusage(resource.RUSAGE_SELF)
    used = after.ru_utime + after.ru_stime - cpu.ru_utime - cpu.ru_stime
    pg_used = postgres_cpu(conn) - pg_before
    (t,) = [r for r in result.tables if r.table == "public.t"]
    conn.execute("SELECT pg_stat_clear_snapshot()")
    print(
        f"{what}: {t.rows:,} rows, {t.records:,} records in {seconds:.1f}s = "
        f"{t.rows / seconds:,.0f} rows/s; CPU {used:.1f}s = {used / t.rows * 1e6:.1f} µs/row "
        f"(this process, the idle bridge included); {t.decoded:,} rows decoded; missing "
        f"{t.missing}, ghosts {t.ghosts}, different {t.different}; PostgreSQL tuples returned "
        f"{returned(conn) - before:,}, PostgreSQL CPU {pg_used:.1f}s = "
        f"{pg_used / t.rows * 1e6:.1f} µs/row; load average {os.getloadavg()[0]:.1f}",
        flush=True,
    )
    return result


def bytes_per_key(columns: int) -> float:
    """What one key costs the topic-side state: dict entry, key body (4 bytes, a bigint
    id in Avro), Kept (row digest and column digests)."""
    n = 100_000
    tracemalloc.start()
    start = tracemalloc.get_traced_memory()[0]
    keys = {
        i.to_bytes(4, "big"): Kept(i, False, bytes(ROW_DIGEST + DIGEST_SIZE * columns), 0, bytes(9))
        for i in range(10_000_000, 10_000_000 + n)
    }
    used = tracemalloc.get_traced_memory()[0] - start
    tracemalloc.stop()
    del keys
    return used / n


def released(conn: psycopg.Connection[Any], slot: str) -> bool:
    row = conn.execute(
        "SELECT active FROM pg_replication_slots WHERE slot_name = %s", (slot,)
    ).fetchone()
    return row is not None and not row[0]


def unpublished_updates(
    conn: psycopg.Connection[Any], publication: str, rows: int, count: int
) -> None:
    """`count` scattered rows changed while the table is out of the publication."""
    conn.execute(f"ALTER PUBLICATION {publication} DROP TABLE t")
    step = max(rows // max(count, 1), 1)
    conn.execute(
        "UPDATE t SET v = -v WHERE id IN (SELECT g FROM generate_series(1, %s, %s) g LIMIT %s)",
        (rows, step, count),
    )
    conn.execute(f"ALTER PUBLICATION {publication} ADD TABLE t")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--mismatches", type=int, default=100)
    parser.add_argument("--stack-json", help="connection info of a running local stack")
    args = parser.parse_args()
    stack, owned = start_stack(args.stack_json)
    try:
        prepare(stack, args.rows)
        conn = psycopg.connect(dsn(stack, DB), autocommit=True)
        publication = f"bench_{uuid.uuid4().hex[:8]}"
        conn.execute(f"CREATE PUBLICATION {publication} FOR TABLE t")
        conn.execute("DROP TABLE IF EXISTS signals")
        conn.execute("CREATE TABLE signals (id text PRIMARY KEY, type text NOT NULL, data text)")
        conn.execute(f"ALTER PUBLICATION {publication} ADD TABLE signals")
        workdir = Path(tempfile.mkdtemp(prefix="bench-verify-"))
        slot = f"bench_{uuid.uuid4().hex[:8]}"
        config = settings(stack, DB, slot, publication, f"bv{uuid.uuid4().hex[:8]}", workdir)
        config["source"]["publication_mode"] = "disabled"
        config["snapshot"].update(signal_table="public.signals", progress_bar="never")
        config["log"] = {"level": "WARNING"}
        cfg = Config(**config)
        pipeline = build_pipeline(cfg)
        thread = threading.Thread(target=pipeline.run, name="bridge", daemon=True)
        thread.start()

        def streamed() -> bool:
            tables = pipeline.snapshots.progress.tables()
            return bool(tables) and all(s.done for s in tables)

        wait_for(streamed, 3600, "the initial snapshot", every=0.5)
        try:
            timed(cfg, conn, "clean")
            unpublished_updates(conn, publication, args.rows, args.mismatches)
            found = timed(cfg, conn, f"{args.mismatches} mismatches")
            t0 = time.monotonic()
            done = repair(cfg, found, timeout=1800)
            print(
                f"repair: {done.reread} rows re-emitted in {time.monotonic() - t0:.1f}s", flush=True
            )
            after = timed(cfg, conn, "after repair")
            assert after.ok
        finally:
            pipeline.stop()
            thread.join(120)
            wait_for(lambda: released(conn, slot), 60, "the slot to be released")
            conn.execute("SELECT pg_drop_replication_slot(%s)", (slot,))
            conn.execute(f"DROP PUBLICATION {publication}")
            conn.execute("DROP SCHEMA IF EXISTS bridge CASCADE")
        per_key = bytes_per_key(6)
        print(
            f"topic-side state: {per_key:.0f} bytes per key (6 columns) = "
            f"{per_key * 10_000_000 / 2**30:.1f} GiB for 10M keys; peak RSS of this process "
            f"{resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20:.2f} GiB",
            flush=True,
        )
    finally:
        if owned is not None:
            owned.stop()


if __name__ == "__main__":
    main()
