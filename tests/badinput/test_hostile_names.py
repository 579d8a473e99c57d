"""Hostile identifiers end to end: quoted everywhere, replicated intact, nothing injected.

Schemas, tables, columns, the publication and the pglogical replication set carry
quotes, spaces, unicode and SQL fragments. The Pipeline creates the publication
(or the pglogical node, set and memberships), snapshots the existing rows and
streams new changes; a plain Avro consumer then checks, per table:

* the topic follows bridge/routing.py: `<prefix>.<schema>.<table>` with every
  character outside [A-Za-z0-9._-] replaced by `_`;
* the Avro field names follow bridge/schema/table.py: outside [A-Za-z0-9_] -> `_`,
  a leading digit gets a `_` prefix, collisions get `_2`, `_3`, ... in column
  order; the PostgreSQL name is kept in `pg.name`;
* the values and operations are those written;
* the table named in every injection attempt (`victim`) still exists, with its row.

Slot names cannot be hostile: PostgreSQL allows [a-z0-9_] only, and the
configuration refuses anything else (test_config_errors.py).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import psycopg
import pytest
from psycopg import sql
from running import running
from schema.live import Decoders, read_topic, unique

from badinput.cli import bridge, stack_config
from bridge.config import Config

INJECTION = '"; DROP TABLE victim; --'
BOBBY = "Robert'); --"
PUBLICATION = f"pub {INJECTION}"
REPLICATION_SET = f"set {BOBBY} {INJECTION}"


@dataclass(frozen=True)
class Table:
    schema: str
    name: str
    columns: tuple[tuple[str, str], ...]  # (PostgreSQL name, type); the first is the key
    first: tuple[Any, ...]  # row present before the bridge starts (snapshot)
    second: tuple[Any, ...]  # row inserted while streaming, then updated
    topic: str  # after the prefix
    fields: tuple[str, ...]  # expected Avro field names

    @property
    def ident(self) -> sql.Identifier:
        return sql.Identifier(self.schema, self.name)


TABLES = [
    Table(
        INJECTION,
        BOBBY,
        (("id", "int"), ("note", "text")),
        (1, "first"),
        (2, "second"),
        "___DROP_TABLE_victim__--.Robert____--",
        ("id", "note"),
    ),
    Table(
        "zürich",
        'a"b',
        (("id", "int"), (INJECTION, "text")),
        (1, "grüezi"),
        (2, "'; DELETE FROM victim; --"),
        "z_rich.a_b",
        ("id", "___DROP_TABLE_victim____"),
    ),
    Table(
        "public",
        "sp ace",
        (
            ("id", "int"),
            ("a b", "text"),
            ("a_b", "int"),
            ("a-b", "text"),
            ('a"b', "text"),
            ("zürich", "text"),
            ("1st", "int"),
            (BOBBY, "text"),
            ("select", "bool"),
        ),
        (1, "x y", 7, "dash", 'quote"d', "ü", 1, "O'Brien", True),
        (2, "", -1, "--", '"', "✓", 2, "'); --", False),
        "public.sp_ace",
        ("id", "a_b", "a_b_2", "a_b_3", "a_b_4", "z_rich", "_1st", "Robert______", "select"),
    ),
    Table(
        "sp ace",
        "1st",
        (("id", "int"), ("Zürich Straße", "text")),
        (1, "a"),
        (2, "b"),
        "sp_ace.1st",
        ("id", "Z_rich_Stra_e"),
    ),
]


def create(conn: psycopg.Connection[Any]) -> None:
    conn.execute("CREATE TABLE victim (id int PRIMARY KEY)")
    conn.execute("INSERT INTO victim VALUES (42)")
    for table in TABLES:
        if table.schema != "public":
            conn.execute(
                sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(sql.Identifier(table.schema))
            )
        columns = sql.SQL(", ").join(
            sql.SQL("{} {}").format(sql.Identifier(name), sql.SQL(kind))
            for name, kind in table.columns
        )
        conn.execute(
            sql.SQL("CREATE TABLE {} ({}, PRIMARY KEY ({}))").format(
                table.ident, columns, sql.Identifier(table.columns[0][0])
            )
        )
        insert(conn, table, table.first)


def insert(conn: psycopg.Connection[Any], table: Table, row: tuple[Any, ...]) -> None:
    conn.execute(
        sql.SQL("INSERT INTO {} VALUES ({})").format(
            table.ident, sql.SQL(", ").join(sql.Placeholder() * len(row))
        ),
        row,
    )


def change(conn: psycopg.Connection[Any], table: Table) -> None:
    """Insert the second row, update its last column, delete the first row."""
    insert(conn, table, table.second)
    key, (last, _) = sql.Identifier(table.columns[0][0]), table.columns[-1]
    conn.execute(
        sql.SQL("UPDATE {} SET {} = NULL WHERE {} = %s").format(
            table.ident, sql.Identifier(last), key
        ),
        (table.second[0],),
    )
    conn.execute(sql.SQL("DELETE FROM {} WHERE {} = %s").format(table.ident, key), (1,))


@dataclass
class Run:
    plugin: str
    cfg: Config
    records: dict[str, list[Any]]  # topic -> decoded values (None = tombstone)
    schemas: dict[str, dict[str, Any]]  # topic -> writer schema of the first value
    victims: list[tuple[Any, ...]]
    tables_left: int


@pytest.fixture(scope="module", params=["pgoutput", "pglogical_output"])
def run(request: pytest.FixtureRequest, stack: Any) -> Iterator[Run]:
    plugin: str = request.param
    dbname, prefix = unique("hostile"), unique("t")
    stack.create_database(dbname)
    try:
        with psycopg.connect(stack.dsn(dbname), autocommit=True) as conn:
            create(conn)
            cfg = Config(
                source={
                    "host": stack.pg_host,
                    "port": stack.pg_port,
                    "dbname": dbname,
                    "user": stack.pg_user,
                    "password": stack.pg_password,
                    "plugin": plugin,
                    "slot_name": unique("slot"),
                    "publication_name": PUBLICATION,
                    "replication_sets": [REPLICATION_SET],
                    "status_interval_s": 1.0,
                },
                kafka={"bootstrap_servers": stack.kafka_bootstrap, "topic_prefix": prefix},
                registry={"url": stack.registry_url},
                snapshot={"mode": "initial"},
                http={"port": 0},
            )
            with running(cfg) as pipeline:
                for table in TABLES:
                    change(conn, table)
                received = {
                    f"{prefix}.{t.topic}": read_topic(
                        cfg, f"{prefix}.{t.topic}", 5, alive=pipeline.alive
                    )
                    for t in TABLES
                }
            victims = conn.execute("SELECT * FROM victim").fetchall()
            (left,) = conn.execute(
                "SELECT count(*) FROM pg_tables WHERE tablename = ANY(%s)",
                (["victim", *(t.name for t in TABLES)],),
            ).fetchone() or (0,)
        decoders = Decoders(cfg)
        records = {
            topic: [decoders.value(topic, r.value) for r in found]
            for topic, found in received.items()
        }
        schemas = {
            topic: decoders.writer_schema(found[0].value)
            for topic, found in received.items()
            if found and found[0].value
        }
        yield Run(plugin, cfg, records, schemas, victims, left)
    finally:
        stack.drop_database(dbname)


def test_nothing_was_injected(run: Run) -> None:
    assert run.victims == [(42,)]
    assert run.tables_left == 1 + len(TABLES)


@pytest.mark.parametrize("table", TABLES, ids=lambda t: t.topic)
def test_topic_names_and_operations(run: Run, table: Table) -> None:
    topic = f"{run.cfg.kafka.topic_prefix}.{table.topic}"
    ops = [None if value is None else value["op"] for value in run.records[topic]]
    assert ops == ["r", "c", "u", "d", None], ops


@pytest.mark.parametrize("table", TABLES, ids=lambda t: t.topic)
def test_field_names_follow_the_rule_and_keep_the_original(run: Run, table: Table) -> None:
    topic = f"{run.cfg.kafka.topic_prefix}.{table.topic}"
    envelope = run.schemas[topic]
    before = next(f for f in envelope["fields"] if f["name"] == "before")
    row = next(branch for branch in before["type"] if isinstance(branch, dict))
    assert tuple(f["name"] for f in row["fields"]) == table.fields
    assert [f["pg.name"] for f in row["fields"]] == [name for name, _ in table.columns]


@pytest.mark.parametrize("table", TABLES, ids=lambda t: t.topic)
def test_values_arrive_intact(run: Run, table: Table) -> None:
    topic = f"{run.cfg.kafka.topic_prefix}.{table.topic}"
    snapshot, created, updated, deleted, _ = run.records[topic]
    first = dict(zip(table.fields, table.first, strict=True))
    second = dict(zip(table.fields, table.second, strict=True))
    assert snapshot["after"] == first
    assert created["after"] == second
    assert updated["after"] == {**second, table.fields[-1]: None}
    assert deleted["before"]["id"] == 1 and deleted["after"] is None


def test_check_passes_with_the_hostile_names(run: Run, stack: Any, tmp_path_factory: Any) -> None:
    src = run.cfg.source
    path = stack_config(
        stack,
        src.dbname,
        tmp_path_factory.mktemp("check") / "b.yaml",
        plugin=src.plugin,
        publication_name=PUBLICATION,
        replication_sets=[REPLICATION_SET],
        slot_name=src.slot_name,
    )
    result = bridge("check", "--config", str(path))
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"ok   replication slot: {src.slot_name!r} exists ({src.plugin}" in result.stdout
    if run.plugin == "pgoutput":
        assert f"ok   publication: {PUBLICATION!r} exists (all tables)" in result.stdout
