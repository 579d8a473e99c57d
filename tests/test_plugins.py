"""Output-plugin wiring without a server: a scripted connection stands in for PostgreSQL.

The pglogical bytes are the golden captures of tests/decode/pglogical_golden.py; the
live behaviour is covered by tests/decode/test_live_pglogical.py.
"""

from __future__ import annotations

import logging
import struct
from typing import Any

import psycopg
import pytest
from decode.pglogical_golden import (
    BINARY_OPTIONS,
    BINARY_STREAM,
    INTERNAL_STREAM,
    TEXT_OPTIONS,
    TEXT_STREAM,
)

from bridge.config import Config
from bridge.decode.messages import Begin, Column, Insert, Message, Relation, Startup
from bridge.errors import ConfigError, ProtocolError, SchemaError, SourceError
from bridge.plugins import (
    Pglogical,
    Pgoutput,
    default_proto_version,
    ensure_pglogical,
    node_dsn,
    open_plugin,
    with_column_types,
)

SECRET = "s3cret-pw"
PG15 = 150002


class Result:
    def __init__(self, rows: list[tuple[Any, ...]]) -> None:
        self._rows = rows

    def fetchall(self) -> list[tuple[Any, ...]]:
        return self._rows

    def fetchone(self) -> tuple[Any, ...] | None:
        return self._rows[0] if self._rows else None


class ScriptedConn:
    """Answers each query with the first matching rule: (substring, rows or exception)."""

    def __init__(self, rules: list[tuple[str, Any]]) -> None:
        self.rules = rules
        self.queries: list[tuple[str, Any]] = []

    def execute(self, query: str, params: Any = None) -> Result:
        self.queries.append((query, params))
        for needle, answer in self.rules:
            if needle in query:
                if isinstance(answer, Exception):
                    raise answer
                return Result(answer(query, params) if callable(answer) else answer)
        return Result([])

    def ran(self, needle: str) -> list[Any]:
        return [params for query, params in self.queries if needle in query]


def config(**source: Any) -> Config:
    return Config(source={"password": SECRET, "slot_name": "s1", **source})


def ready_pglogical(sets: tuple[str, ...] = ("default",)) -> list[tuple[str, Any]]:
    """A database where pglogical is fully set up and every table is already in the sets."""
    return [
        ("FROM pg_extension", [(1,)]),
        ("pglogical.local_node l JOIN", [("node",)]),
        ("FROM pglogical.replication_set s", [(s,) for s in sets]),
    ]


def golden_catalog(stream: list[tuple[str, Message]]) -> list[tuple[str, Any]]:
    """pg_attribute answers for the relations of a golden stream (types made up per name)."""
    relations = {m.oid: m for _, m in stream if isinstance(m, Relation)}

    def columns(query: str, params: Any) -> list[tuple[Any, ...]]:
        rel = relations[params[0]]
        return [("d", c.name, 1000 + i, i - 1) for i, c in enumerate(rel.columns)]

    return [("pg_catalog.pg_attribute", columns)]


def pglogical(stream: list[tuple[str, Message]], **source: Any) -> tuple[Pglogical, ScriptedConn]:
    conn = ScriptedConn(ready_pglogical() + golden_catalog(stream))
    plugin = open_plugin(config(plugin="pglogical_output", **source), PG15, conn)
    assert isinstance(plugin, Pglogical)
    return plugin, conn


# -- choosing and configuring ---------------------------------------------------------


def test_plugin_is_chosen_by_configuration() -> None:
    pub = ScriptedConn([("pg_publication", [(True,)])])
    assert isinstance(open_plugin(config(), PG15, pub), Pgoutput)
    plugin, _ = pglogical(TEXT_STREAM)
    assert plugin.options == TEXT_OPTIONS
    assert plugin.describe() == (
        'pglogical_output sets="default" binary=false forward_origins="all"'
    )


def test_default_proto_version_follows_the_server() -> None:
    assert [default_proto_version(v) for v in (130000, 140000, 150002, 160001)] == [1, 2, 3, 4]


def test_pglogical_binary_asks_for_the_server_major_version() -> None:
    plugin, _ = pglogical(BINARY_STREAM, binary=True)
    assert plugin.options == BINARY_OPTIONS


@pytest.mark.parametrize(
    ("origin", "forwarded"), [(None, '"all"'), ("any", '"all"'), ("none", None)]
)
def test_origin_filter_maps_to_forwarding(origin: str | None, forwarded: str | None) -> None:
    plugin, _ = pglogical(TEXT_STREAM, origin=origin)
    assert dict(plugin.options).get("pglogical.forward_origins") == forwarded


def test_replication_sets_come_from_the_configuration() -> None:
    conn = ScriptedConn(ready_pglogical(("a", "B b")))
    plugin = open_plugin(
        config(plugin="pglogical_output", replication_sets=("a", "B b")), PG15, conn
    )
    assert dict(plugin.options)["pglogical.replication_set_names"] == '"a","B b"'


@pytest.mark.parametrize("source", [{"streaming": "on"}, {"two_phase": True, "proto_version": 3}])
def test_pglogical_refuses_features_it_lacks(source: dict[str, Any]) -> None:
    conn = ScriptedConn(ready_pglogical())
    with pytest.raises(ConfigError, match="neither streaming nor two_phase"):
        open_plugin(config(plugin="pglogical_output", **source), PG15, conn)
    assert conn.queries == []  # refused before touching the server


# -- decoding: startup check and column types -----------------------------------------


@pytest.mark.parametrize("stream", [TEXT_STREAM, BINARY_STREAM], ids=["text", "binary"])
def test_golden_stream_decodes_with_types_filled(stream: list[tuple[str, Message]]) -> None:
    plugin, conn = pglogical(stream, binary=stream is BINARY_STREAM)
    for payload, expected in stream:
        msg = plugin.decode(bytes.fromhex(payload))
        if isinstance(expected, Relation):
            assert isinstance(msg, Relation)
            assert msg.replica_identity == "d"
            assert [(c.type_oid, c.typmod) for c in msg.columns] == [
                (1000 + i, i - 1) for i in range(len(expected.columns))
            ]
            assert msg._replace(replica_identity="", columns=expected.columns) == expected
        else:
            assert msg == expected
    relations = sum(isinstance(m, Relation) for _, m in stream)
    assert len(conn.ran("pg_catalog.pg_attribute")) == relations  # per Relation, not per row


def test_internal_format_startup_is_refused() -> None:
    plugin, _ = pglogical(INTERNAL_STREAM)
    with pytest.raises(ProtocolError, match="internal binary values"):
        plugin.decode(bytes.fromhex(INTERNAL_STREAM[0][0]))


def test_binary_startup_without_asking_is_refused() -> None:
    plugin, _ = pglogical(TEXT_STREAM)  # asked for text
    with pytest.raises(ProtocolError, match="not requested"):
        plugin.decode(bytes.fromhex(BINARY_STREAM[0][0]))


def test_transaction_before_the_startup_message_is_refused() -> None:
    plugin, _ = pglogical(TEXT_STREAM)
    begin = next(h for h, m in TEXT_STREAM if isinstance(m, Begin))
    with pytest.raises(ProtocolError, match="before the startup message"):
        plugin.decode(bytes.fromhex(begin))


def test_rows_pass_through_untouched() -> None:
    plugin, conn = pglogical(TEXT_STREAM)
    startup = plugin.decode(bytes.fromhex(TEXT_STREAM[0][0]))
    assert isinstance(startup, Startup)
    payload, expected = next((h, m) for h, m in TEXT_STREAM if isinstance(m, Insert))
    assert plugin.decode(bytes.fromhex(payload)) == expected
    assert plugin.decode_streamed(bytes.fromhex(payload)) == expected
    assert conn.ran("pg_attribute") == []


RELATION = Relation(None, 42, "app", "t", "", (Column(1, "id", 0, -1), Column(0, "note", 0, -1)))


def test_with_column_types_reads_the_catalog_by_oid_and_name() -> None:
    conn = ScriptedConn(
        [("pg_attribute", [("f", "note", 1043, 24), ("f", "extra", 25, -1), ("f", "id", 20, -1)])]
    )
    typed = with_column_types(conn, RELATION)
    assert typed == RELATION._replace(
        replica_identity="f",
        columns=(Column(1, "id", 20, -1), Column(0, "note", 1043, 24)),
    )
    assert conn.ran("pg_attribute") == [(42,)]


def test_with_column_types_keeps_what_the_plugin_sent() -> None:
    typed = RELATION._replace(
        replica_identity="d", columns=(Column(1, "id", 23, -1), Column(0, "note", 25, -1))
    )
    conn = ScriptedConn([])
    assert with_column_types(conn, typed) is typed
    assert conn.queries == []


def test_dropped_column_or_table_is_a_schema_error() -> None:
    gone = ScriptedConn([("pg_attribute", [("d", "id", 23, -1)])])
    with pytest.raises(SchemaError, match=r"column 'note' of app\.t is no longer") as info:
        with_column_types(gone, RELATION)
    assert "pgoutput" in (info.value.hint or "")
    with pytest.raises(SchemaError, match=r"app.t \(oid 42\) no longer exists"):
        with_column_types(ScriptedConn([]), RELATION)


def test_catalog_failure_is_a_source_error() -> None:
    broken = ScriptedConn([("pg_attribute", psycopg.OperationalError("connection lost"))])
    with pytest.raises(SourceError, match=r"cannot read the column types of app\.t"):
        with_column_types(broken, RELATION)


# -- server set-up --------------------------------------------------------------------


def test_node_dsn_never_holds_the_password() -> None:
    dsn = node_dsn(config(host="db.internal", port=6543, dbname="shop", user="cdc").source)
    assert SECRET not in dsn and "password" not in dsn
    assert dsn == "host=db.internal port=6543 dbname=shop user=cdc sslmode=prefer"


def test_all_tables_mode_creates_what_is_missing(caplog: pytest.LogCaptureFixture) -> None:
    def add_table(query: str, params: Any) -> list[tuple[Any, ...]]:
        if params[1] == 2:
            raise psycopg.errors.InvalidParameterValue("table b cannot be added")
        return [(True,)]

    conn = ScriptedConn(
        [
            ("replication_set_add_table", add_table),
            ("pg_catalog.pg_class c", [(1, "a"), (2, "b"), (3, "app.c")]),
        ]
    )
    src = config(plugin="pglogical_output", replication_sets=("default", "mine")).source
    with caplog.at_level(logging.WARNING, logger="bridge.plugins"):
        ensure_pglogical(conn, src)
    assert conn.ran("CREATE EXTENSION IF NOT EXISTS pglogical") == [None]
    ((node, dsn),) = conn.ran("pglogical.create_node")
    assert node == "bridge_s1" and SECRET not in dsn
    assert conn.ran("create_replication_set") == [("default",), ("mine",)]
    added = conn.ran("replication_set_add_table")
    assert added == [(s, relid) for s in ("default", "mine") for relid in (1, 2, 3)]
    assert "table b cannot be added" in caplog.text and "'mine'" in caplog.text
    assert SECRET not in caplog.text


def test_all_tables_mode_leaves_a_ready_database_alone() -> None:
    conn = ScriptedConn(ready_pglogical())
    ensure_pglogical(conn, config(plugin="pglogical_output").source)
    writes = ("CREATE EXTENSION", "create_node", "create_replication_set", "add_table")
    assert not [q for q, _ in conn.queries if any(w in q for w in writes)]


@pytest.mark.parametrize(
    ("rules", "match"),
    [
        ([], "extension pglogical is not installed"),
        ([("FROM pg_extension", [(1,)])], "not a pglogical node"),
        (ready_pglogical()[:2], r"set\(s\) \['default'\] do not exist"),
    ],
)
def test_disabled_mode_requires_the_set_up(rules: list[tuple[str, Any]], match: str) -> None:
    conn = ScriptedConn(rules)
    src = config(plugin="pglogical_output", publication_mode="disabled").source
    with pytest.raises(SourceError, match=match) as info:
        ensure_pglogical(conn, src)
    assert "publication_mode: all_tables" in (info.value.hint or "")
    assert not conn.ran("CREATE") and not conn.ran("create_")


def test_missing_privilege_says_who_can_set_up() -> None:
    denied = psycopg.errors.InsufficientPrivilege("permission denied to create extension")
    conn = ScriptedConn([("CREATE EXTENSION", denied)])
    with pytest.raises(SourceError, match="creating extension pglogical: not allowed") as info:
        ensure_pglogical(conn, config(plugin="pglogical_output").source)
    assert "superuser" in (info.value.hint or "")
    assert SECRET not in str(info.value)


def test_missing_extension_files_say_what_to_install() -> None:
    missing = psycopg.errors.UndefinedFile('extension "pglogical" is not available')
    conn = ScriptedConn([("CREATE EXTENSION", missing)])
    with pytest.raises(SourceError, match="is not available") as info:
        ensure_pglogical(conn, config(plugin="pglogical_output").source)
    assert "shared_preload_libraries" in (info.value.hint or "")


def test_pgoutput_stream_decoder_reads_the_xid_prefix() -> None:
    pub = ScriptedConn([("pg_publication", [(True,)])])
    plugin = open_plugin(config(proto_version=2, streaming="on"), PG15, pub)
    body = (
        struct.pack(">IIB", 777, 16384, ord("N"))
        + struct.pack(">H", 1)
        + b"t"
        + (struct.pack(">I", 1) + b"7")
    )
    msg = plugin.decode_streamed(b"I" + body)
    assert isinstance(msg, Insert) and msg.xid == 777 and msg.new.values == (b"7",)
