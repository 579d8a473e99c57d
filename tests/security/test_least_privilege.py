"""The bridge as a least-privilege role: LOGIN REPLICATION plus SELECT on the captured tables,
with the publication made beforehand by an administrator (publication_mode: disabled).

The initial snapshot additionally keeps its progress in the bridge's own schema, which needs
CREATE on the database; streaming alone (snapshot.mode: no_data) needs nothing more.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from confluent_kafka.admin import AdminClient
from psycopg import sql
from running import running

from bridge.build import build_pipeline
from bridge.config import Config
from bridge.demo import consume
from bridge.errors import SourceError

pytestmark = pytest.mark.live


@pytest.fixture
def admin(secure_stack: Any, secure_db: str) -> Iterator[psycopg.Connection[Any]]:
    with psycopg.connect(secure_stack.dsn(secure_db), autocommit=True) as conn:
        conn.execute("CREATE TABLE orders (id int PRIMARY KEY, item text)")
        conn.execute("CREATE TABLE salaries (id int PRIMARY KEY, amount int)")
        conn.execute("INSERT INTO orders VALUES (1, 'book')")
        yield conn


@pytest.fixture
def role(admin: psycopg.Connection[Any], names: str) -> Iterator[tuple[str, str]]:
    """The documented set-up (docs/operations/deploy.md, "Least-privilege role"), run by an
    administrator."""
    name, password = f"{names}_role", secrets.token_urlsafe(16)
    ident = sql.Identifier(name)
    admin.execute(
        sql.SQL("CREATE ROLE {} LOGIN REPLICATION PASSWORD {}").format(ident, sql.Literal(password))
    )
    admin.execute(sql.SQL("GRANT SELECT ON orders TO {}").format(ident))
    admin.execute(sql.SQL("CREATE PUBLICATION {} FOR TABLE orders").format(sql.Identifier(names)))
    try:
        yield name, password
    finally:
        admin.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = %s", (name,)
        )
        admin.execute(sql.SQL("DROP OWNED BY {}").format(ident))
        admin.execute(sql.SQL("DROP ROLE {}").format(ident))


def role_config(settings: dict[str, Any], role: tuple[str, str], mode: str) -> Config:
    user, password = role
    source = {**settings["source"], "user": user, "password": password}
    return Config(
        **{
            **settings,
            "source": {**source, "publication_mode": "disabled"},
            "snapshot": {"mode": mode},
        }
    )


def test_the_role_is_neither_superuser_nor_reads_other_tables(
    settings: dict[str, Any], role: tuple[str, str]
) -> None:
    cfg = role_config(settings, role, "no_data")
    with psycopg.connect(**cfg.source.conninfo(), autocommit=True) as conn:
        assert conn.execute(
            "SELECT rolsuper FROM pg_roles WHERE rolname = current_user"
        ).fetchone() == (False,)
        assert conn.execute("SELECT count(*) FROM orders").fetchone() == (1,)
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute("SELECT * FROM salaries")
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute("CREATE PUBLICATION everything FOR ALL TABLES")


@pytest.mark.parametrize("mode", ["no_data", "initial"])
def test_changes_stream_end_to_end_as_the_role(
    secure_stack: Any,
    settings: dict[str, Any],
    secure_db: str,
    names: str,
    admin: psycopg.Connection[Any],
    role: tuple[str, str],
    mode: str,
) -> None:
    if mode == "initial":  # the snapshot's progress tables live in the bridge's own schema
        admin.execute(
            sql.SQL("GRANT CREATE ON DATABASE {} TO {}").format(
                sql.Identifier(secure_db), sql.Identifier(role[0])
            )
        )
    cfg = role_config(settings, role, mode)
    with running(cfg):
        admin.execute("INSERT INTO orders VALUES (2, 'pen')")
        admin.execute("INSERT INTO salaries VALUES (1, 100)")  # not published
        admin.execute("UPDATE orders SET item = 'ink' WHERE id = 2")
        expected = [(2, "c", "pen"), (2, "u", "ink")]
        if mode == "initial":
            expected.insert(0, (1, "r", "book"))
        records = consume(cfg, f"{names}.public.orders", len(expected), timeout=60)
    assert [(k["id"], v["op"], v["after"]["item"]) for k, v in records] == expected
    topics = AdminClient(secure_stack.kafka_client_config()).list_topics(timeout=10).topics
    assert f"{names}.public.salaries" not in topics


def test_the_initial_snapshot_says_what_it_is_missing(
    settings: dict[str, Any], role: tuple[str, str]
) -> None:
    cfg = role_config(settings, role, "initial")
    with pytest.raises(SourceError) as caught:
        build_pipeline(cfg)
    assert "GRANT CREATE ON DATABASE" in str(caught.value)
    assert "snapshot.mode: no_data" in str(caught.value)
