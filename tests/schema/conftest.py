"""A throwaway PostgreSQL 15 cluster per test module (the live type round-trip tests).

Kept small and self-contained on purpose: it is meant to be swapped for the
shared stack fixture later.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

PG_BIN = Path("/usr/lib/postgresql/15/bin")
ROOT = Path("/tmp/pgtypes-pg")
DATA = ROOT / "data"
PORT = 55434
DSN = f"host=127.0.0.1 port={PORT} user=postgres dbname=postgres connect_timeout=10"

SETUP_SQL = """
CREATE EXTENSION hstore;
CREATE EXTENSION citext;
CREATE TYPE mood AS ENUM ('sad', 'ok', 'happy', 'with space', 'q"uote');
CREATE DOMAIN posint AS int4 CHECK (VALUE > 0);
CREATE DOMAIN price AS numeric(8,3);
CREATE DOMAIN intarr AS int4[];
CREATE TYPE pair AS (a int4, b text);
CREATE TYPE floatrange AS RANGE (subtype = float8);
CREATE TYPE textrange AS RANGE (subtype = text, collation = "C");
CREATE TYPE float4range AS RANGE (subtype = float4);
CREATE TYPE moodrange AS RANGE (subtype = mood);
"""


def _as_postgres(*args: str) -> None:
    prefix = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
    subprocess.run([*prefix, *args], check=True, capture_output=True, timeout=120)


def _pg_ctl(*args: str) -> None:
    _as_postgres(str(PG_BIN / "pg_ctl"), "-D", str(DATA), *args)


@pytest.fixture(scope="module")
def pg_dsn() -> Iterator[str]:
    if not (PG_BIN / "initdb").exists():
        pytest.skip("PostgreSQL 15 server binaries are not installed")
    if (DATA / "postmaster.pid").exists():  # left over by an interrupted run
        _pg_ctl("stop", "-m", "immediate", "-w")
    shutil.rmtree(ROOT, ignore_errors=True)
    ROOT.mkdir()
    if os.geteuid() == 0:
        shutil.chown(ROOT, "postgres", "postgres")
    _as_postgres(
        str(PG_BIN / "initdb"), "-D", str(DATA), "-U", "postgres", "--auth=trust",
        "-E", "UTF8", "--locale=C.UTF-8",
    )  # fmt: skip
    options = f"-p {PORT} -k {ROOT} -c listen_addresses=127.0.0.1 -c fsync=off"
    _pg_ctl("start", "-w", "-t", "60", "-l", str(ROOT / "log"), "-o", options)
    try:
        with psycopg.connect(DSN, autocommit=True) as conn:
            conn.execute(SETUP_SQL)
        yield DSN
    finally:
        _pg_ctl("stop", "-m", "fast", "-w")


@pytest.fixture(scope="module")
def pg_conn(pg_dsn: str) -> Iterator[psycopg.Connection[tuple[object, ...]]]:
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        yield conn
