"""A snapshot reader's work per row, without processes, pipes or Kafka: CPU per row.

    python bench/snapshot_reader.py [--rows 200000] [--stack-json FILE]

bench/compare.py's 10-column table of `--rows` rows (bench/snapshot.py's `prepare`),
planned into chunks of 10,000 rows and read chunk by chunk inside one transaction, as
a reader does, three ways: a cursor fetching the server's text output as raw bytes
then `encode_rows` (the readers before issue 22, still the incremental snapshot's and
`bridge verify`'s path), binary COPY and text COPY encoded as they arrive (`read_records`).
Reported per way (best of three): rows/s, this process's CPU-µs per row and the
PostgreSQL backend's.
The encoder is built from the table's catalog description without a registry.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psycopg

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))  # bench/snapshot.py imports the test helpers
sys.path.insert(0, str(ROOT / "bench"))  # bench/snapshot.py before the tests' snapshot package

from compare_workloads import TABLE  # noqa: E402
from snapshot import DB, dsn, prepare, start_stack  # noqa: E402

from bridge.encode.records import ChangeEncoder  # noqa: E402
from bridge.schema import DEFAULT_OPTIONS, StaticCatalog  # noqa: E402
from bridge.schema.table import TableCodec, TableDetails  # noqa: E402
from bridge.snapshot import catalog, chunks, reader  # noqa: E402

ReadChunk = Callable[[psycopg.Connection[Any], chunks.Chunk], int]


def backend_cpu(conn: psycopg.Connection[Any]) -> float:
    row = conn.execute("SELECT pg_backend_pid()::text").fetchone()
    assert row is not None
    fields = Path(f"/proc/{int(row[0])}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--stack-json", help="connection info of a running local stack")
    args = parser.parse_args()
    stack, owned = start_stack(args.stack_json)
    try:
        prepare(stack, args.rows, TABLE)
        conninfo = dict(p.split("=", 1) for p in dsn(stack, DB).split())
        admin = psycopg.connect(dsn(stack, DB), autocommit=True)
        row = admin.execute(f"SELECT '{TABLE}'::regclass::oid").fetchone()
        assert row is not None
        table = catalog.describe_table(admin, row[0])
        codec = TableCodec(
            table.relation, StaticCatalog(), TableDetails(("id",), {}), DEFAULT_OPTIONS, "srv"
        )
        encoder = ChangeEncoder(codec, 1, 2, topic="bench")
        planned = list(chunks.plan(admin, table, 10_000, None, 0))
        source = reader.snapshot_source("srv", DB, 1, "true")
        job = reader.TableJob(table, TABLE, encoder)

        def cursor(conn: psycopg.Connection[Any], chunk: chunks.Chunk) -> int:
            query, params = chunks.chunk_query(table, chunk)
            records, _ = reader.encode_rows(conn.execute(query, params).fetchall(), job, source)
            return len(records)

        def copy(binary: bool) -> ReadChunk:
            def read(conn: psycopg.Connection[Any], chunk: chunks.Chunk) -> int:
                copy_job = job._replace(binary=binary)
                _, sizes = reader.read_records(conn, copy_job, chunk, source)[0]
                return len(sizes) // 2  # a key's and a value's size per record

            return read

        print(f"{args.rows:,} rows; load average {os.getloadavg()[0]:.2f}")
        print("| reader path | rows/s | reader CPU-µs/row | PostgreSQL backend CPU-µs/row |")
        ways = [("cursor + encode_rows", cursor), ("binary COPY", copy(True))]
        for name, read in [*ways, ("text COPY", copy(False))]:
            best: tuple[float, float, float] | None = None
            for _ in range(3):
                conn = reader.connect(conninfo, {c.type_oid for c in table.relation.columns})
                conn.autocommit = False
                server0, client0 = backend_cpu(conn), time.process_time()
                wall0 = time.monotonic()
                count = sum(read(conn, chunk) for chunk in planned)
                wall = time.monotonic() - wall0
                client, server = time.process_time() - client0, backend_cpu(conn) - server0
                conn.close()
                assert count == args.rows, count
                if best is None or client + server < best[0] + best[1]:
                    best = client, server, wall
            assert best is not None
            client_us, server_us = (s * 1e6 / args.rows for s in best[:2])
            rate = args.rows / best[2]
            print(f"| {name} | {rate:,.0f} | {client_us:.2f} | {server_us:.2f} |", flush=True)
        admin.close()
    finally:
        if owned is not None:
            owned.stop()


if __name__ == "__main__":
    main()
