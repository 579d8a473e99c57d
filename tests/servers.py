"""The stack with either PostgreSQL server in it: Debian's 15 (the stack's own) or the 18 of
the `pg_modern` cluster, behind one interface, for tests that run on both.

`Servers` looks like the stack (`pg_host`, `pg_port`, `pg_user`, `pg_password`, `dsn()`,
`create_database()`, `drop_database()`, `kafka_bootstrap`, `registry_url`), so every helper
that builds a configuration from the stack (`delivery.helpers.bridge_settings`,
`decode.live.source_config`) takes it as it is; `major` says which server it is.

The fixtures (`servers`, `server_db`, `server_conn`) reach every test through
tests/conftest.py's `pytest_plugins`; nothing here imports `bridge` (conftest's stale-build
check runs first).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

SERVERS = ("pg15", "pg18")


class Servers:
    """The stack's Kafka and registry with `postgres`, a deploy/local/stack_postgres.py
    `Postgres` (the stack's own or pg_modern's)."""

    def __init__(self, stack: Any, postgres: Any, major: int) -> None:
        self.postgres = postgres
        self.major = major
        self.kafka_bootstrap = stack.kafka_bootstrap
        self.registry_url = stack.registry_url
        self.pg_host = postgres.host
        self.pg_port = postgres.port
        self.pg_user = postgres.user
        self.pg_password = postgres.password

    def dsn(self, dbname: str = "postgres", **params: Any) -> str:
        return str(self.postgres.dsn(dbname, **params))

    def create_database(self, name: str) -> None:
        self.postgres.create_database(name)

    def drop_database(self, name: str) -> None:
        self.postgres.drop_database(name)


def servers_for(request: pytest.FixtureRequest, name: str) -> Servers:
    """`name` ("pg15" or "pg18") as a `Servers`; starts pg_modern on first use."""
    stack = request.getfixturevalue("stack")
    if name == "pg15":
        return Servers(stack, stack.postgres, 15)
    modern = request.getfixturevalue("pg_modern")
    return Servers(stack, modern, int(modern.major))


@pytest.fixture(params=SERVERS)
def servers(request: pytest.FixtureRequest, stack: Any) -> Servers:
    """The stack with PostgreSQL 15, then with PostgreSQL 18 (the test runs once each)."""
    return servers_for(request, request.param)


@pytest.fixture
def server_db(servers: Servers) -> Iterator[str]:
    """A fresh database on `servers`' PostgreSQL, dropped after the test."""
    name = f"db_{uuid.uuid4().hex[:12]}"
    servers.create_database(name)
    try:
        yield name
    finally:
        servers.drop_database(name)


@pytest.fixture
def server_conn(servers: Servers, server_db: str) -> Iterator[psycopg.Connection[Any]]:
    with psycopg.connect(servers.dsn(server_db), autocommit=True) as conn:
        yield conn
