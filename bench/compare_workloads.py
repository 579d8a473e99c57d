"""The workloads of bench/compare.py and the readers' timing, apart from the orchestration.

A backlog is written by one session calling a PL/pgSQL procedure that COMMITs after
every `txn_rows` rows: each COMMIT ends a real transaction (its own xid and commit
record, as one client round trip per transaction would give), but a million
single-row transactions take a minute instead of a million round trips.
"""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path
from typing import Any, NamedTuple, Protocol

import e2e
import psycopg

from bridge.config import SourceConfig
from bridge.decode.pgoutput_options import pgoutput_options
from bridge.plugins import default_proto_version

TABLE = "compare_rows"
OPS = ("insert", "update")
PG_BIN = Path("/usr/lib/postgresql/15/bin")
# autovacuum off: a vacuum of the fresh rows would compete with the reader being timed;
# compare.py vacuums the table itself between the insert and the update phase.
CREATE_TABLE = f"""
CREATE TABLE {TABLE} (id int PRIMARY KEY, big bigint, label text, amount numeric(12,2),
  at timestamptz, flag bool, doc jsonb, uid uuid, ratio float8, day date)
  WITH (autovacuum_enabled = off)
"""
CREATE_PROCEDURE = f"""
CREATE OR REPLACE PROCEDURE compare_load(op text, first_id int, last_id int, txn_rows int)
LANGUAGE plpgsql AS $$
DECLARE
  lo int := first_id;
  hi int;
BEGIN
  WHILE lo <= last_id LOOP
    hi := least(lo + txn_rows - 1, last_id);
    IF op = 'insert' THEN
      INSERT INTO {TABLE}
      SELECT g, g::bigint * 1000003, 'row number ' || g, (g % 100000) / 100.0,
             '2024-01-01 00:00:00+00'::timestamptz + g * interval '1 second', g % 2 = 0,
             jsonb_build_object('g', g, 'tag', 'x'), md5(g::text)::uuid, g / 7.0,
             DATE '2000-01-01' + g % 10000
      FROM generate_series(lo, hi) g;
    ELSE
      UPDATE {TABLE} SET big = big + 1, label = 'updated row ' || id
      WHERE id BETWEEN lo AND hi;
    END IF;
    COMMIT;
    lo := hi + 1;
  END LOOP;
END $$
"""


class Backlog(NamedTuple):
    """WAL positions of one load: a reader has seen its last commit once its confirmed
    position is past `last_start`; `end` is pg_recvlogical's --endpos."""

    first: int
    last_start: int
    end: int
    seconds: float


class Reader(Protocol):
    @property
    def proc(self) -> subprocess.Popen[bytes] | None: ...

    def start(self) -> None: ...

    def check(self) -> None: ...

    def stop(self) -> None: ...


def flush_lsn(conn: psycopg.Connection[Any]) -> int:
    row = conn.execute("SELECT pg_current_wal_flush_lsn()::text").fetchone()
    assert row is not None
    return e2e.lsn(row[0])


def prepare(conn: psycopg.Connection[Any]) -> None:
    """A fresh, empty table and the load procedure."""
    conn.execute(f"DROP TABLE IF EXISTS {TABLE}")
    conn.execute(CREATE_TABLE)
    conn.execute(CREATE_PROCEDURE)


def load(dsn: str, op: str, rows: int, txn_rows: int) -> Backlog:
    """Insert rows 1..`rows`, or update each of them, in transactions of `txn_rows`.

    The last transaction gets its own CALL so that the WAL position before it is
    known. synchronous_commit is off (no WAL flush per commit: the loader is not
    what is measured); the WAL is flushed before returning since walsenders send
    flushed WAL only.
    """
    last_first_id = (rows - 1) // txn_rows * txn_rows + 1
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("SET synchronous_commit = off")
        t0 = time.monotonic()
        first = e2e.insert_lsn(conn)
        if last_first_id > 1:
            conn.execute("CALL compare_load(%s, 1, %s, %s)", (op, last_first_id - 1, txn_rows))
        last_start = e2e.insert_lsn(conn)
        conn.execute("CALL compare_load(%s, %s, %s, %s)", (op, last_first_id, rows, txn_rows))
        end = e2e.insert_lsn(conn)
        seconds = time.monotonic() - t0
        e2e.wait(lambda: flush_lsn(conn) >= end, 60, "the WAL flush", lambda: None)
    return Backlog(first, last_start, end, seconds)


def limit_options(
    publication: str, server_version: int, binary: bool = False
) -> list[tuple[str, str]]:
    """The START_REPLICATION options the bridge sends with its default configuration
    (and `binary`, its source.binary)."""
    src = SourceConfig(publication_name=publication, binary=binary)
    return pgoutput_options(
        src.proto_version or default_proto_version(server_version),
        [publication],
        binary=src.binary,
        messages=src.messages,
        streaming=src.streaming,
        two_phase=src.two_phase,
        origin=src.origin,
    )


def _lsn_text(lsn: int) -> str:
    return f"{lsn >> 32:X}/{lsn & 0xFFFFFFFF:X}"


def _timed(what: str, argv: list[str], password: str) -> tuple[float, bytes]:
    """Run a client to its end: its wall time, start-up (connecting) included, and output."""
    env = {**os.environ, "PGPASSWORD": password}
    t0 = time.monotonic()
    with subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE) as proc:
        out, err = proc.communicate(timeout=3600)
    wall = time.monotonic() - t0
    if proc.returncode != 0:
        raise SystemExit(f"{what} failed ({proc.returncode}): {err.decode()}")
    return wall, out


def run_limit(
    stack: Any, dbname: str, slot: str, options: list[tuple[str, str]], end: int
) -> dict[str, Any]:
    """pg_recvlogical to /dev/null until `end`: the walsender with a client doing nothing."""
    argv = [
        str(PG_BIN / "pg_recvlogical"),
        "-h", stack.pg_host, "-p", str(stack.pg_port), "-U", stack.pg_user, "-d", dbname,
        "-S", slot, "--start", "--no-loop", "-f", "/dev/null", f"--endpos={_lsn_text(end)}",
        *(arg for name, value in options for arg in ("-o", f"{name}={value}")),
    ]  # fmt: skip
    return {"seconds": _timed("pg_recvlogical", argv, stack.pg_password)[0]}


def build_drain(workdir: Path) -> Path:
    """bench/drain.c compiled against the system's libpq, into `workdir`."""
    binary = workdir / "drain"
    include = subprocess.run(
        [str(PG_BIN / "pg_config"), "--includedir"], capture_output=True, text=True, check=True
    ).stdout.strip()
    source = Path(__file__).resolve().parent / "drain.c"
    command = ["cc", "-O2", "-Wall", "-o", str(binary), str(source), f"-I{include}", "-lpq"]
    subprocess.run(command, check=True)
    return binary


def run_drain(
    binary: Path, stack: Any, dbname: str, slot: str, options: list[tuple[str, str]], end: int
) -> dict[str, Any]:
    """bench/drain.c until `end`: the walsender with a client that drops every message
    (pg_recvlogical writes each to its output file)."""
    conninfo = (
        f"host={stack.pg_host} port={stack.pg_port} user={stack.pg_user} dbname={dbname} "
        "replication=database"
    )
    literal = {name: "'" + value.replace("'", "''") + "'" for name, value in options}
    rendered = ", ".join(f'"{name}" {value}' for name, value in literal.items())
    argv = [str(binary), conninfo, slot, _lsn_text(end), f"({rendered})"]
    seconds, out = _timed("drain", argv, stack.pg_password)
    return {"seconds": seconds, "messages": int(out)}


def proc_peak_rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return 0.0


def drain(
    reader: Reader, slot: e2e.Slot, visible: e2e.Visible, rows: int, last_start: int
) -> dict[str, Any]:
    """Start `reader`, time it from its slot turning active until the topic holds every
    row (`in_topic_s`: commit -> broker ack) and until the slot's confirmed position is
    past the last commit as well (`seconds`: the reader reports it once a second).
    """
    t_start = time.monotonic()
    reader.start()
    e2e.wait(lambda: slot.state()[0], 300, f"slot {slot.name} active", reader.check)
    assert reader.proc is not None
    pid = reader.proc.pid
    t0 = time.monotonic()
    cpu0 = e2e.proc_cpu_s(pid)
    e2e.wait(lambda: visible() >= rows, 3600, "the records", reader.check)
    in_topic = time.monotonic() - t0  # every row broker-acknowledged (high watermarks)
    e2e.wait(lambda: slot.state()[1] > last_start, 600, "the acknowledgement", reader.check)
    seconds = time.monotonic() - t0  # ... and confirmed to the slot, reported once a second
    cpu = e2e.proc_cpu_s(pid) - cpu0
    rss = proc_peak_rss_mib(pid)
    reader.stop()
    return {
        "seconds": seconds,
        "in_topic_s": in_topic,
        "startup_s": round(t0 - t_start, 2),
        "cpu_s": round(cpu, 2),
        "rows_per_cpu_s": round(rows / cpu) if cpu else None,
        "peak_rss_mib": round(rss, 1),
    }
