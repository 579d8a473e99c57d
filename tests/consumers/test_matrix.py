"""The consumer matrix (live): every supported type and its edge values, streamed by the
real bridge with DEFAULT settings, read back by fastavro, confluent-kafka's
AvroDeserializer and plain PySpark `from_avro`, each value compared with what PostgreSQL
returns (tests/consumers/matrix.py says how).

The measured matrix must equal tests/consumers/matrix.json, from which README's type
table is generated (test_readme.py), so documentation and behaviour cannot drift. After a
deliberate change: BRIDGE_WRITE_MATRIX=1 rewrites the file, then
`python -m tests.consumers.matrix` the README block. Spark reads the topic once, in the
suite's one SparkSession.
"""

from __future__ import annotations

import io
import json
import os
import struct
from typing import Any

import fastavro
import psycopg
import pytest
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer
from confluent_kafka.serialization import MessageField, SerializationContext
from psycopg import sql
from psycopg.adapt import Buffer, Loader
from psycopg.pq import Format
from psycopg.types import TypeInfo
from psycopg.types.hstore import register_hstore
from pyspark.sql.avro.functions import from_avro
from pyspark.sql.functions import expr
from running import running
from schema.live import bridge_config, read_topic, unique

from tests.consumers.matrix import (
    COLUMNS,
    CONSUMERS,
    MATRIX_FILE,
    ROWS,
    SETUP,
    Col,
    Expected,
    judge,
    merge,
)

pytestmark = [pytest.mark.consumers, pytest.mark.live]
TABLE = "matrix"
_HEADER = struct.Struct(">bI")


class _IntervalFields(Loader):
    """The server's interval fields, as the bridge's record carries them (psycopg's
    timedelta would merge months into days)."""

    format = Format.BINARY

    def load(self, data: Buffer) -> Any:
        micros, days, months = struct.unpack(">qii", data)
        return {"months": months, "days": days, "micros": micros}


def _expected(conn: psycopg.Connection[Any], col: Col, rid: int) -> Expected:
    """psycopg's value of one cell; PostgreSQL's text where Python cannot hold it."""
    c = sql.Identifier(col.name)
    text_expr = sql.SQL("CASE WHEN {c} IS NULL THEN NULL ELSE format('%%s', {c}) END").format(c=c)
    query = sql.SQL("SELECT {} FROM {} WHERE id = %s")
    text = conn.execute(query.format(text_expr, sql.Identifier(TABLE)), (rid,)).fetchone()
    assert text is not None
    if col.text:
        return Expected(text[0], text[0])
    expr = sql.SQL(col.select).format(c=c)
    binary = col.sql_type == "interval"
    try:
        with conn.cursor(binary=binary) as cur:
            row = cur.execute(query.format(expr, sql.Identifier(TABLE)), (rid,)).fetchone()
    except psycopg.DataError:  # infinity, BC, year > 9999, 24:00:00
        return Expected(None, text[0], loaded=False)
    assert row is not None
    return Expected(row[0], text[0])


def _fastavro(registry: SchemaRegistryClient, payload: bytes) -> Any:
    schema_id = _HEADER.unpack(payload[: _HEADER.size])[1]
    schema = json.loads(registry.get_schema(schema_id).schema_str)
    return fastavro.schemaless_reader(
        io.BytesIO(payload[_HEADER.size :]), fastavro.parse_schema(schema)
    )


def _spark_rows(spark: Any, cfg: Any, topic: str, schema_str: str) -> dict[int, Any]:
    """Plain PySpark: the topic read once, the body after the 5-byte Confluent header
    decoded by from_avro with the registered schema, then collect()."""
    frame = (
        spark.read.format("kafka")
        .option("kafka.bootstrap.servers", cfg.kafka.bootstrap_servers)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .load()
    )
    decoded = frame.select(from_avro(expr("substring(value, 6)"), schema_str).alias("e"))
    rows = decoded.select("e.after", "e.special_values").collect()
    return {row["after"]["id"]: (row["after"], row["special_values"]) for row in rows}


def _avro_type(field_type: Any) -> str:
    t = field_type[1] if isinstance(field_type, list) else field_type
    if isinstance(t, str):
        return t
    if t.get("type") == "array":
        return f"array<{_avro_type(t['items'])}>"
    if t.get("type") == "record":
        return f"record {t['name']}"
    if t.get("type") == "map":
        return "map<string>"
    logical = t.get("logicalType")
    if logical == "decimal":
        return f"decimal({t['precision']},{t['scale']})"
    return f"{t['type']} ({logical})" if logical else str(t["type"])


@pytest.fixture(scope="module")
def measured(stack: Any, spark: Any) -> dict[str, Any]:
    dbname, prefix = unique("matrix"), unique("mx")
    stack.create_database(dbname)
    topic = f"{prefix}.public.{TABLE}"
    try:
        with psycopg.connect(stack.dsn(dbname), autocommit=True) as conn:
            conn.execute(SETUP)
            columns = sql.SQL(", ").join(
                sql.SQL("{} {}").format(sql.Identifier(c.name), sql.SQL(c.sql_type))
                for c in COLUMNS
            )
            conn.execute(sql.SQL("CREATE TABLE {} (id int PRIMARY KEY, {})").format(
                sql.Identifier(TABLE), columns
            ))  # fmt: skip
            cfg = bridge_config(stack, dbname, prefix=prefix)  # default settings
            with running(cfg) as bridge:
                with conn.transaction():
                    for rid in range(ROWS):
                        cells = sql.SQL(", ").join(
                            sql.SQL("{}::{}").format(
                                sql.Literal(c.values[rid]), sql.SQL(c.sql_type)
                            )
                            if rid < len(c.values)
                            else sql.SQL("NULL")
                            for c in COLUMNS
                        )
                        conn.execute(
                            sql.SQL("INSERT INTO {} VALUES ({}, {})").format(
                                sql.Identifier(TABLE), rid, cells
                            )
                        )
                received = read_topic(cfg, topic, ROWS, alive=bridge.alive)
            assert len(received) == ROWS
            conn.execute("SET TimeZone = 'UTC'")
            conn.execute("SET DateStyle = 'ISO'")
            info = TypeInfo.fetch(conn, "hstore")
            assert info is not None
            register_hstore(info, conn)
            conn.adapters.register_loader("interval", _IntervalFields)
            expected = {
                (c.name, rid): _expected(conn, c, rid) for c in COLUMNS for rid in range(ROWS)
            }
        # The consumers, as their documentation shows them.
        registry = SchemaRegistryClient({"url": cfg.registry.url})
        deserializer = AvroDeserializer(registry)
        ctx = SerializationContext(topic, MessageField.VALUE)
        by_consumer: dict[str, dict[int, Any]] = {c: {} for c in CONSUMERS}
        errors: dict[str, str] = {}
        for rec in received:
            assert rec.value is not None
            for name, read in (
                ("fastavro", lambda p: _fastavro(registry, p)),
                ("AvroDeserializer", lambda p: deserializer(p, ctx)),
            ):
                try:
                    envelope = read(rec.value)
                except Exception as exc:  # a consumer that raises is a failed cell
                    errors[name] = repr(exc)
                    continue
                after = envelope["after"]
                by_consumer[name][after["id"]] = (after, envelope["special_values"] or {})
        schema_id = _HEADER.unpack(received[0].value[: _HEADER.size])[1]
        schema_str = registry.get_schema(schema_id).schema_str
        try:
            spark_rows = _spark_rows(spark, cfg, topic, schema_str)
            by_consumer["Spark from_avro"] = {
                rid: (after, specials or {}) for rid, (after, specials) in spark_rows.items()
            }
        except Exception as exc:
            errors["Spark from_avro"] = repr(exc)[:500]
        schema = json.loads(schema_str)
        row_fields = schema["fields"][0]["type"][1]["fields"]
        avro = {f["name"]: _avro_type(f["type"]) for f in row_fields}
    finally:
        stack.drop_database(dbname)
    types = []
    for col in COLUMNS:
        cells = {}
        for consumer in CONSUMERS:
            if consumer in errors:
                cells[consumer] = f"FAIL: {errors[consumer]}"
                continue
            results = []
            for rid in range(ROWS):
                after, specials = by_consumer[consumer][rid]
                results.append(judge(col, after[col.name], expected[(col.name, rid)], specials))
            cells[consumer] = merge(results)
        types.append({"type": col.sql_type, "avro": avro[col.name], "cells": cells})
    return {"types": types}


def test_every_cell_is_equal_or_documented(measured: dict[str, Any]) -> None:
    failures = [
        f"{row['type']} / {consumer}: {cell}"
        for row in measured["types"]
        for consumer, cell in row["cells"].items()
        if cell.startswith("FAIL")
    ]
    assert not failures, "\n".join(failures)


def test_matrix_file_is_what_was_measured(measured: dict[str, Any]) -> None:
    """README's table is generated from matrix.json: it must be what this run measured."""
    text = json.dumps(measured, indent=1, ensure_ascii=False) + "\n"
    if os.environ.get("BRIDGE_WRITE_MATRIX") == "1":
        MATRIX_FILE.write_text(text)
    assert MATRIX_FILE.read_text() == text, (
        "the measured matrix differs from tests/consumers/matrix.json: rerun with "
        "BRIDGE_WRITE_MATRIX=1, then python -m tests.consumers.matrix"
    )
