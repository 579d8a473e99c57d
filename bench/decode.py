"""Decode throughput and the streamed-transaction memory bound, on a real PostgreSQL 15.

    python bench/decode.py                  # 1M-row transaction: rows/s, text vs binary
    python bench/decode.py --peak-memory    # 10M-row streamed transaction: peak RSS

Without --dsn it boots only the PostgreSQL of the local stack (deploy/local/stack.py,
logical_decoding_work_mem = 64kB) in a throwaway directory. With --dsn it works in
that database (a superuser connection) and drops its table, publication and slots
afterwards.

Throughput: one INSERT ... SELECT of N rows into a 10-column table in ONE
transaction, decoded through two pgoutput slots created before it (text, binary):
the real ReplicationStream + PgoutputDecoder + EventAssembler, every event consumed.
"wall" includes PostgreSQL's own decoding (the walsender replays the transaction
from its spill files after the commit); "client CPU" is this process alone.

--peak-memory: the same with 10M rows and streaming=on, so PostgreSQL streams the
transaction before its commit and the assembler must hold all of it until Stream
Commit: in a spill budget of --memory-limit-mb, the rest on disk. The printed
peak RSS (getrusage) staying near baseline + budget, far below the payload
total, is the proof that a transaction of any size is held in bounded memory.
Run it in its own process (the flag does only that), so the peak is its own.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import resource
import shutil
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psycopg
from psycopg.conninfo import conninfo_to_dict

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from e2e import load_stack  # noqa: E402

from bridge.config import Config  # noqa: E402
from bridge.errors import SourceError  # noqa: E402
from bridge.events.assembler import EventAssembler  # noqa: E402
from bridge.events.model import Change, TxCommit  # noqa: E402
from bridge.lsn import LSN  # noqa: E402
from bridge.plugins import open_plugin  # noqa: E402
from bridge.source import libpq, slots  # noqa: E402
from bridge.source.status import StatusTracker  # noqa: E402
from bridge.source.stream import ReplicationStream  # noqa: E402

TABLE = "bench_decode"
PUBLICATION = "bench_decode_pub"
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
FROM generate_series(1, %s::int) g
"""


@contextmanager
def database(dsn: str | None) -> Iterator[dict[str, Any]]:
    """Source settings of the database to use: --dsn's, or a fresh local PostgreSQL's."""
    if dsn is not None:
        params = conninfo_to_dict(dsn)
        yield {k: params[k] for k in ("host", "port", "dbname", "user", "password") if k in params}
        return
    stack = load_stack().Stack()
    postgres = stack.postgres  # PostgreSQL alone: Kafka and the registry are not needed here
    try:
        postgres.install()
        postgres.init()
        postgres.start()
        postgres.wait_ready()
        stack.create_database("bench")
        yield {
            "host": stack.pg_host,
            "port": stack.pg_port,
            "dbname": "bench",
            "user": stack.pg_user,
            "password": stack.pg_password,
        }
    finally:
        stack.stop()


class Drain:
    """One slot read through the production source, decoder and assembler."""

    def __init__(self, source: dict[str, Any], slot: str, spill_dir: Path, limit: int) -> None:
        self.cfg = Config(source={**source, "slot_name": slot, "publication_name": PUBLICATION})
        src = self.cfg.source
        self.catalog = libpq.connect(src.conninfo(), replication=False)
        self.rc = libpq.ReplicationConnection(libpq.connect(src.conninfo(), replication=True))
        self.plugin = open_plugin(self.cfg, slots.check_prerequisites(self.rc), self.catalog)
        slots.ensure_slot(self.rc, slot, "pgoutput", create=True, two_phase=False)
        self.assembler = EventAssembler(
            decode=self.plugin.decode,
            decode_streamed=self.plugin.decode_streamed,
            spill_dir=spill_dir,
            memory_limit_bytes=limit,
        )
        self.payload_bytes = 0

    def run(self, expected_rows: int, timeout: float) -> tuple[float, float]:
        """Stream until the transaction's TxCommit; returns (wall s, client CPU s)."""
        wall, cpu = time.perf_counter(), time.process_time()
        slots.start_replication(
            self.rc, self.cfg.source.slot_name, LSN(0), self.plugin.options, busy_timeout_s=10
        )
        stream = ReplicationStream(self.rc, StatusTracker(10.0))
        decode, feed = self.plugin.decode, self.assembler.feed
        rows = payload = 0
        deadline = time.monotonic() + timeout
        try:
            while True:
                data = stream.read(1.0)
                if data is None:
                    if time.monotonic() > deadline:
                        raise SystemExit(f"timed out after {timeout:.0f}s with {rows} rows")
                    continue
                raw = data.payload
                payload += len(raw)
                for event in feed(decode(raw), raw, data.wal_start, data.wal_end):
                    if type(event) is Change:
                        rows += 1
                        if not rows & 0xFFF:
                            stream.service()  # a long replay must not starve keepalives
                    elif type(event) is TxCommit:
                        stream.confirm(event.end_lsn)
                        if rows != expected_rows:
                            raise SystemExit(f"decoded {rows} rows, expected {expected_rows}")
                        self.payload_bytes = payload
                        return time.perf_counter() - wall, time.process_time() - cpu
        finally:
            self.assembler.close()
            self.catalog.close()
            with contextlib.suppress(SourceError):  # never hide why the drain stopped
                stream.close()


def insert(conn: psycopg.Connection[Any], rows: int) -> float:
    started = time.perf_counter()
    conn.execute(INSERT, (rows,))  # autocommit: one statement, one transaction
    return time.perf_counter() - started


def rss_mib() -> float:
    """Current resident set size."""
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def throughput(conn: psycopg.Connection[Any], source: dict[str, Any], args: Any) -> None:
    spill = Path(tempfile.mkdtemp(prefix="bench-decode-"))
    try:
        modes = {
            binary: Drain(
                {**source, "binary": binary},
                f"bench_decode_{'binary' if binary else 'text'}",
                spill,
                256 << 20,
            )
            for binary in (False, True)
        }
        took = insert(conn, args.rows)
        print(f"inserted {args.rows:,} rows in one transaction in {took:.1f}s", flush=True)
        for binary, drain in modes.items():
            wall, cpu = drain.run(args.rows, args.timeout)
            print(
                f"{'binary' if binary else 'text':6} {drain.plugin.describe()}: "
                f"{args.rows / wall:,.0f} rows/s wall ({wall:.1f}s), "
                f"{args.rows / cpu:,.0f} rows/s client CPU ({cpu:.1f}s), "
                f"{drain.payload_bytes / 2**20:,.0f} MiB of payloads",
                flush=True,
            )
    finally:
        shutil.rmtree(spill, ignore_errors=True)


def peak_memory(conn: psycopg.Connection[Any], source: dict[str, Any], args: Any) -> None:
    spill = Path(tempfile.mkdtemp(prefix="bench-decode-"))
    limit = args.memory_limit_mb << 20
    try:
        drain = Drain({**source, "streaming": "on"}, "bench_decode_peak", spill, limit)
        took = insert(conn, args.peak_rows)
        print(f"inserted {args.peak_rows:,} rows in one transaction in {took:.1f}s", flush=True)
        baseline = rss_mib()
        wall, cpu = drain.run(args.peak_rows, args.timeout)
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux
        pool = drain.assembler.pool
        print(
            f"streamed {drain.plugin.describe()}: {args.peak_rows:,} rows in {wall:.1f}s "
            f"({args.peak_rows / wall:,.0f} rows/s wall, {cpu:.1f}s client CPU)\n"
            f"payloads {drain.payload_bytes / 2**20:,.0f} MiB; spill budget "
            f"{args.memory_limit_mb} MiB, peak in memory {pool.peak_in_memory_bytes / 2**20:.1f}"
            f" MiB, {pool.spill_file_count} spill file(s)\n"
            f"RSS before draining {baseline:.0f} MiB, peak RSS {peak:.0f} MiB",
            flush=True,
        )
    finally:
        shutil.rmtree(spill, ignore_errors=True)


def cleanup(conn: psycopg.Connection[Any], timeout: float = 60.0) -> None:
    """Drop what the run created; a slot stays active until its walsender has exited."""
    deadline = time.monotonic() + timeout
    while True:
        left = conn.execute(
            "SELECT slot_name, active FROM pg_replication_slots "
            "WHERE slot_name LIKE 'bench\\_decode\\_%' AND database = current_database()"
        ).fetchall()
        for slot, active in left:
            if not active:
                conn.execute("SELECT pg_drop_replication_slot(%s)", (slot,))
        if all(not active for _, active in left):
            break
        if time.monotonic() > deadline:
            raise SystemExit(f"slots still active after {timeout:.0f}s: {left}")
        time.sleep(0.2)
    conn.execute(f"DROP PUBLICATION IF EXISTS {PUBLICATION}")
    conn.execute(f"DROP TABLE IF EXISTS {TABLE}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dsn", help="use this database instead of a local PostgreSQL")
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--peak-memory", action="store_true", help="run the streamed case only")
    parser.add_argument("--peak-rows", type=int, default=10_000_000)
    parser.add_argument("--memory-limit-mb", type=int, default=64, help="assembler spill budget")
    parser.add_argument("--timeout", type=float, default=1800, help="seconds per drain")
    args = parser.parse_args()
    with database(args.dsn) as source:
        conn = psycopg.connect(**source, autocommit=True)
        try:
            cleanup(conn)
            conn.execute(CREATE_TABLE)
            conn.execute(f"CREATE PUBLICATION {PUBLICATION} FOR TABLE {TABLE}")
            (version,) = conn.execute("SELECT version()").fetchone() or ("?",)
            print(f"{version}; client Python {sys.version.split()[0]}", flush=True)
            if args.peak_memory:
                peak_memory(conn, source, args)
            else:
                throughput(conn, source, args)
        finally:
            cleanup(conn)
            conn.close()


if __name__ == "__main__":
    main()
