"""Operational mistakes against the real stack, through `python -m bridge run` and `check`.

Unreachable or unknown hosts, a wrong password, a missing database, a role without
the needed privileges, a missing publication, a slot made by another plugin, an
unreachable registry: `run` exits 1 with ONE `error:` line that names the problem
and ends with what to do in parentheses; `check` exits 1 with a one-line FAIL for
the affected check. Never a traceback.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
import yaml
from psycopg import sql

from badinput.cli import bridge, error_line, fail_line, stack_config

ADVICE_CONNECT = "(check source.host/port/dbname/user/password"


@pytest.fixture
def role(stack: Any, pg_conn: psycopg.Connection[Any]) -> Iterator[str]:
    """A login role without REPLICATION; dropped (with what it owns) after the test."""
    name = f"r_{uuid.uuid4().hex[:12]}"
    pg_conn.execute(sql.SQL("CREATE ROLE {} LOGIN PASSWORD 'pw'").format(sql.Identifier(name)))
    try:
        yield name
    finally:
        pg_conn.execute(sql.SQL("DROP OWNED BY {}").format(sql.Identifier(name)))
        pg_conn.execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(name)))


@pytest.mark.parametrize(
    ("source", "problem"),
    [
        ({"port": 1}, "cannot connect to PostgreSQL at 127.0.0.1:1/"),
        ({"host": "no-such-host.invalid"}, "cannot connect to PostgreSQL at no-such-host.invalid"),
        ({"password": "wrong-password-7"}, "password authentication failed"),
        ({"dbname": "no_such_db"}, 'database "no_such_db" does not exist'),
    ],
    ids=["closed-port", "unknown-host", "wrong-password", "missing-database"],
)
def test_cannot_connect(
    stack: Any, pg_db: str, tmp_path: Path, source: dict[str, Any], problem: str
) -> None:
    path = stack_config(stack, pg_db, tmp_path / "b.yaml", **source)
    line = error_line(bridge("run", "--config", str(path)), 1)
    assert line.startswith("error: cannot connect to PostgreSQL at ")
    assert problem in line and ADVICE_CONNECT in line
    assert "wrong-password-7" not in line
    fail = fail_line(bridge("check", "--config", str(path)), "PostgreSQL reachable")
    assert problem in fail and ADVICE_CONNECT in fail


def test_role_without_replication(stack: Any, pg_db: str, tmp_path: Path, role: str) -> None:
    path = stack_config(stack, pg_db, tmp_path / "b.yaml", user=role, password="pw")
    line = error_line(bridge("run", "--config", str(path)), 1)
    assert "must be superuser or replication role" in line
    fail = fail_line(bridge("check", "--config", str(path)), "PostgreSQL reachable")
    assert "must be superuser or replication role" in fail


def test_replication_role_may_not_create_a_publication(
    stack: Any, pg_db: str, pg_conn: psycopg.Connection[Any], tmp_path: Path, role: str
) -> None:
    pg_conn.execute(sql.SQL("ALTER ROLE {} WITH REPLICATION").format(sql.Identifier(role)))
    path = stack_config(stack, pg_db, tmp_path / "b.yaml", user=role, password="pw")
    line = error_line(bridge("run", "--config", str(path)), 1)
    assert "not allowed to create publication 'bridge' (all_tables)" in line
    assert "publication_mode: disabled" in line


@pytest.mark.parametrize("hostile", [False, True])
def test_missing_publication(
    stack: Any, pg_db: str, tmp_path: Path, publication_name: str, slot_name: str, hostile: bool
) -> None:
    name = f'{publication_name} "; DROP TABLE x; --' if hostile else publication_name
    path = stack_config(
        stack,
        pg_db,
        tmp_path / "b.yaml",
        publication_name=name,
        publication_mode="disabled",
        slot_name=slot_name,
    )
    quoted = '"' + name.replace('"', '""') + '"'  # the advice must be valid SQL
    line = error_line(bridge("run", "--config", str(path)), 1)
    assert f"publication {name!r} does not exist" in line
    assert f"(create it (CREATE PUBLICATION {quoted} FOR TABLE ...)" in line
    fail = fail_line(bridge("check", "--config", str(path)), "publication")
    assert f"{name!r} is missing" in fail and f"CREATE PUBLICATION {quoted} FOR TABLE" in fail


def test_slot_of_another_plugin(
    stack: Any, pg_db: str, pg_conn: psycopg.Connection[Any], tmp_path: Path, slot_name: str
) -> None:
    pg_conn.execute("SELECT pg_create_logical_replication_slot(%s, 'test_decoding')", (slot_name,))
    path = stack_config(stack, pg_db, tmp_path / "b.yaml", slot_name=slot_name)
    line = error_line(bridge("run", "--config", str(path)), 1)
    assert f"replication slot '{slot_name}' uses plugin 'test_decoding'" in line
    assert "(choose another source.slot_name" in line
    fail = fail_line(bridge("check", "--config", str(path)), "replication slot")
    assert "uses plugin 'test_decoding'" in fail and "choose another source.slot_name" in fail


def test_missing_slot_without_create(
    stack: Any, pg_db: str, tmp_path: Path, slot_name: str
) -> None:
    path = stack_config(stack, pg_db, tmp_path / "b.yaml", slot_name=slot_name, create_slot=False)
    line = error_line(bridge("run", "--config", str(path)), 1)
    assert f"replication slot '{slot_name}' does not exist" in line
    assert "set source.create_slot: true" in line


def test_check_names_unreachable_kafka_and_registry(stack: Any, pg_db: str, tmp_path: Path) -> None:
    path = stack_config(stack, pg_db, tmp_path / "b.yaml")
    text = path.read_text().replace(stack.kafka_bootstrap, "127.0.0.1:1")
    path.write_text(text.replace(stack.registry_url, "http://127.0.0.1:1"))
    result = bridge("check", "--config", str(path))
    kafka = fail_line(result, "Kafka reachable")
    assert "cannot use Kafka at 127.0.0.1:1: " in kafka
    assert kafka.endswith(
        "(check kafka.bootstrap_servers, that the brokers run, and the kafka security settings)"
    )
    registry = fail_line(result, "schema registry reachable")
    assert "cannot reach the schema registry at http://127.0.0.1:1: " in registry
    assert registry.endswith("(check registry.url and that the registry runs)")


def test_run_stops_when_the_registry_is_unreachable(
    stack: Any, pg_db: str, pg_conn: psycopg.Connection[Any], tmp_path: Path, slot_name: str
) -> None:
    """The first row needs its schema registered: `run` stops, saying what to check."""
    pg_conn.execute("CREATE TABLE t (id int PRIMARY KEY)")
    pg_conn.execute("INSERT INTO t VALUES (1)")
    path = stack_config(stack, pg_db, tmp_path / "b.yaml", slot_name=slot_name)
    settings = yaml.safe_load(path.read_text())
    settings["registry"]["url"] = "http://127.0.0.1:1"
    settings["snapshot"]["mode"] = "initial"  # the existing row is read at once
    path.write_text(yaml.safe_dump(settings))
    line = error_line(bridge("run", "--config", str(path)), 1)
    # the first registry call for a new table version reads the subject's newest schema
    # (the defaults it carries across a table rewrite), before registering
    assert "schema registry unreachable while reading 'bridge.public.t-value'" in line
    assert "(check registry.url" in line
