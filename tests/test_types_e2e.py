"""Every supported PostgreSQL type through the whole Pipeline, in text and in binary mode.

One table holds a column of each type and an array column of each
(tests/schema/every_type.py); its rows carry ordinary, edge and NULL values. The
bridge streams their inserts, then their deletes (REPLICA IDENTITY FULL: the
before-image has every column), into Kafka; a plain consumer reads them back and
each value is compared with what PostgreSQL's SELECT returns, mapped to the
documented Avro representation. One Pipeline run per mode. The database sets a
non-UTC TimeZone and non-default output styles (HOSTILE_SETTINGS).

Values are compared as written on the wire, temporal logical types left as numbers
(`Decoders.raw`), and as confluent-kafka's AvroDeserializer returns them. By default
±infinity and 24:00:00 are clamped (listed in the envelope's special_values) and every
row is readable there; a third run keeps Debezium's sentinels (avro.out_of_range
sentinel) and timestamp-micros for timestamp (avro.timestamp_mode instant): a consumer
that applies the logical types cannot represent those sentinels, so the AvroDeserializer
check covers the other rows there.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

import psycopg
import pytest
from psycopg import sql
from psycopg.types import TypeInfo
from psycopg.types.hstore import register_hstore
from running import running
from schema.every_type import (
    INSTANT_PLAIN,
    LOADERS,
    PLAIN,
    RAW,
    ROWS,
    SENTINEL_RAW,
    SETUP,
    Field,
    cell,
    column_ddl,
    deep,
    expected_expr,
    fields,
    has_special,
    specials,
    tag,
)
from schema.helpers import canon
from schema.live import Decoders, Received, bridge_config, read_topic, unique

TABLE = "every_type"
# Session settings that change text output: the walsender must not let them reach the
# values (a non-UTC TimeZone does reach timestamptz text, with its offset).
HOSTILE_SETTINGS = (
    "TimeZone = 'Asia/Kolkata'",
    "DateStyle = 'SQL, DMY'",
    "IntervalStyle = 'sql_standard'",
    "extra_float_digits = 0",
    "bytea_output = 'escape'",
)


# (wire format, avro settings): the defaults in both formats, then the old forms. interval
# as the exact {months, days, micros} record, which every_type compares field by field,
# arrays nested with decimal elements (avro.array_mode typed), which it compares element
# by element (the default ISO 8601 string and portable arrays are the consumer matrix's,
# tests/consumers, and tests/schema/test_pgtypes.py's).
RECORD = {"interval_mode": "record", "array_mode": "typed"}
OLD_FORMS = {"out_of_range": "sentinel", "timestamp_mode": "instant", **RECORD}
RUNS = {
    "text": ("text", RECORD),
    "binary": ("binary", RECORD),
    "text-sentinel": ("text", OLD_FORMS),
}


@dataclass
class Outcome:
    mode: str
    sentinel: bool
    fields: list[Field]
    selected: dict[int, dict[str, Any]]  # id -> field -> psycopg value
    received: list[Received]
    raw: list[tuple[Any, Any]]  # (key, value) read raw
    decoders: Decoders
    topic: str


def _select(conn: psycopg.Connection[Any], flds: list[Field]) -> dict[int, dict[str, Any]]:
    for setting in HOSTILE_SETTINGS:  # back to the defaults; the bridge writes UTC
        conn.execute(f"RESET {setting.split()[0]}")
    conn.execute("SET TimeZone = 'UTC'")
    for name, loader in LOADERS.items():
        conn.adapters.register_loader(name, loader)
    info = TypeInfo.fetch(conn, "hstore")
    assert info is not None
    register_hstore(info, conn)
    names = [f.name for f in flds]
    query = sql.SQL("SELECT id, {} FROM {} ORDER BY id").format(
        sql.SQL(", ").join(expected_expr(f) for f in flds), sql.Identifier(TABLE)
    )
    out = {row[0]: dict(zip(names, row[1:], strict=True)) for row in conn.execute(query)}
    intervals = [f.name for f in flds if f.col.kind == "interval"]
    query = sql.SQL("SELECT id, {} FROM {}").format(
        sql.SQL(", ").join(map(sql.Identifier, intervals)), sql.Identifier(TABLE)
    )
    for row in conn.cursor(binary=True).execute(query):
        out[row[0]].update(zip(intervals, row[1:], strict=True))
    return out


@pytest.fixture(scope="module", params=list(RUNS))
def outcome(request: pytest.FixtureRequest, stack: Any) -> Iterator[Outcome]:
    mode, avro = RUNS[request.param]
    dbname, prefix = unique("types"), unique("t")
    flds = fields(binary=mode == "binary")
    topic = f"{prefix}.public.{TABLE}"
    stack.create_database(dbname)
    try:
        with psycopg.connect(stack.dsn(dbname), autocommit=True) as conn:
            conn.execute(SETUP)
            for setting in HOSTILE_SETTINGS:
                conn.execute(f"ALTER DATABASE {dbname} SET {setting}")
            conn.execute(
                sql.SQL("CREATE TABLE {} (id int PRIMARY KEY, {})").format(
                    sql.Identifier(TABLE), sql.SQL(", ").join(map(column_ddl, flds))
                )
            )
            conn.execute(f"ALTER TABLE {TABLE} REPLICA IDENTITY FULL")
            cfg = bridge_config(stack, dbname, prefix=prefix, binary=mode == "binary", avro=avro)
            with running(cfg) as bridge:
                with conn.transaction():
                    for row in range(ROWS):
                        values = sql.SQL(", ").join(cell(f, row) for f in flds)
                        conn.execute(
                            sql.SQL("INSERT INTO {} VALUES ({}, {})").format(
                                sql.Identifier(TABLE), row, values
                            )
                        )
                selected = _select(conn, flds)
                conn.execute(f"DELETE FROM {TABLE}")
                received = read_topic(cfg, topic, 3 * ROWS, alive=bridge.alive)
        assert len(received) == 3 * ROWS, f"{mode}: read {len(received)} of {3 * ROWS} records"
        decoders = Decoders(cfg)
        raw = [
            (decoders.raw(r.key) if r.key else None, decoders.raw(r.value) if r.value else None)
            for r in received
        ]
        sentinel = avro.get("out_of_range") == "sentinel"  # the old forms
        yield Outcome(mode, sentinel, flds, selected, received, raw, decoders, topic)
    finally:
        stack.drop_database(dbname)


def _mismatches(
    row: dict[str, Any], outcome: Outcome, rid: int, kinds: dict[str, Callable[[Any], Any]]
) -> list[str]:
    problems = []
    for f in outcome.fields:
        want = deep(kinds[f.col.kind], outcome.selected[rid][f.name])
        if canon(row[f.name]) != canon(want):
            problems.append(f"row {rid} {f.name}: got {row[f.name]!r}, want {want!r}")
    return problems


def test_registered_schema_maps_every_type(outcome: Outcome) -> None:
    payload = outcome.received[0].value
    assert payload is not None
    before = outcome.decoders.writer_schema(payload)["fields"][0]
    assert before["name"] == "before"
    got = {f["name"]: tag(f["type"]) for f in before["type"][1]["fields"]}
    want = {f.name: f"array<{f.col.avro}>" if f.is_array else f.col.avro for f in outcome.fields}
    if outcome.sentinel:  # avro.timestamp_mode instant
        want = {k: v.replace("local-timestamp", "timestamp") for k, v in want.items()}
    assert got == {"id": "int", **want}


def test_inserts_carry_what_select_returns(outcome: Outcome) -> None:
    creates = outcome.raw[:ROWS]
    assert [value["op"] for _, value in creates] == ["c"] * ROWS
    assert [key for key, _ in creates] == [{"id": i} for i in range(ROWS)]
    problems = [
        problem
        for key, value in creates
        for problem in _mismatches(value["after"], outcome, key["id"], _raw(outcome))
    ]
    assert not problems, f"{outcome.mode} mode:\n" + "\n".join(problems)


def test_deletes_carry_the_full_before_image(outcome: Outcome) -> None:
    deletes = outcome.raw[ROWS:]
    assert [value["op"] if value else None for _, value in deletes] == ["d", None] * ROWS
    problems = []
    for key, value in deletes[::2]:
        assert value["after"] is None
        problems += _mismatches(value["before"], outcome, key["id"], _raw(outcome))
    assert not problems, f"{outcome.mode} mode:\n" + "\n".join(problems)


def _raw(outcome: Outcome) -> dict[str, Callable[[Any], Any]]:
    return SENTINEL_RAW if outcome.sentinel else RAW


def test_special_values_name_each_clamped_value(outcome: Outcome) -> None:
    """By default each clamped value (scalar, or an array holding one) and each NaN
    numeric(p,s) (scalar, or an array holding one) is listed with PostgreSQL's text; with
    sentinels only NaN is."""
    for key, value in outcome.raw[:ROWS]:
        row = outcome.selected[key["id"]]
        want: dict[str, str] = {}
        for f in outcome.fields:
            texts = [] if outcome.sentinel else specials(row[f.name])
            if texts:
                want[f"after.{f.name}"] = texts[0] if not f.is_array else "<array>"
            selected = row[f.name]
            if not f.is_array and isinstance(selected, Decimal) and selected.is_nan():
                want[f"after.{f.name}"] = "NaN"
            elif f.is_array and f.col.avro == "decimal" and any(map(_is_nan, selected or ())):
                want[f"after.{f.name}"] = "<array with NaN>"
        got = dict(value["special_values"] or {})
        for name, text in want.items():
            if name not in got:
                continue
            if name.startswith("after.c_tstz"):
                got[name] = text  # the text in the walsender's TimeZone, not this session's
            elif text == "<array>":  # the array's text: its elements' texts
                assert all(t in got[name] for t in specials(row[name[6:]])), got[name]
                got[name] = text
            elif text == "<array with NaN>":  # the array's text, NaN element included
                assert "NaN" in got[name], got[name]
                got[name] = text
        assert got == want, key


def _is_nan(value: Any) -> bool:
    return isinstance(value, Decimal) and value.is_nan()


def test_avro_deserializer_reads_the_rows_python_can_hold(outcome: Outcome) -> None:
    """By default every row; with sentinels the rows without one."""
    safe = {
        rid
        for rid, row in outcome.selected.items()
        if not (outcome.sentinel and any(map(has_special, row.values())))
    }
    assert len(safe) >= 3  # the edge rows are few: most rows must be checked here
    problems = []
    plain = INSTANT_PLAIN if outcome.sentinel else PLAIN
    for received in outcome.received[:ROWS]:
        assert received.key is not None and received.value is not None
        rid = outcome.decoders.key(outcome.topic, received.key)["id"]
        if rid in safe:
            value = outcome.decoders.value(outcome.topic, received.value)
            problems += _mismatches(value["after"], outcome, rid, plain)
    assert not problems, f"{outcome.mode} mode:\n" + "\n".join(problems)


def test_decimals_keep_the_column_scale(outcome: Outcome) -> None:
    """canon() already tells 1.5 from 1.50; this states the contract on one value."""
    after = outcome.raw[4][1]["after"]
    assert isinstance(after["c_dec"], Decimal) and str(after["c_dec"]) == "1.50"
