"""A database per test module on the shared session stack (the live type round-trip tests).

Module scope, not the function-scoped `pg_db` of tests/conftest.py: the type tests
only read values back, so one database with the extensions and user types below
serves a whole module, and a module that alters a type (test_catalog) cannot leak
that into another.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

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


@pytest.fixture(scope="module")
def pg_dsn(stack: Any) -> Iterator[str]:
    name = f"types_{uuid.uuid4().hex[:12]}"
    stack.create_database(name)
    try:
        dsn = str(stack.dsn(name))
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(SETUP_SQL)
        yield dsn
    finally:
        stack.ensure_running()
        stack.drop_database(name)


@pytest.fixture(scope="module")
def pg_conn(pg_dsn: str) -> Iterator[psycopg.Connection[tuple[object, ...]]]:
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        yield conn
