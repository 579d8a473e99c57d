"""The consumer matrix (live): every supported type and its edge values, streamed by the
real bridge with DEFAULT settings, read back by fastavro, confluent-kafka's
AvroDeserializer, plain PySpark `from_avro`, Debezium's JDBC sink (applying the topic to
a second database, read back with psycopg) and Flink SQL's debezium-avro-confluent format
(PyFlink), each value compared with what PostgreSQL returns (tests/consumers/matrix.py
says how).

The measured matrix must equal tests/consumers/matrix.json, from which the docs' type
table is generated (test_type_table.py), so documentation and behaviour cannot drift. After a
deliberate change: BRIDGE_WRITE_MATRIX=1 rewrites the file, then
`python -m tests.consumers.matrix` the docs page's block. Spark reads the topic once, in the
suite's one SparkSession; the sink runs on the session's Connect worker while Flink's job
(a process of its own) reads the topic.
"""

from __future__ import annotations

import datetime as dt
import io
import json
import os
import struct
from concurrent.futures import ThreadPoolExecutor
from decimal import Decimal
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
from schema.live import bridge_config, read_topic, unique, wait_delivered
from waiting import wait_for

from consumers.connect import jdbc_sink_config
from consumers.flink import FlinkSQL
from consumers.matrix import (
    COLUMNS,
    CONSUMERS,
    FLINK_TYPES,
    MATRIX_FILE,
    ROWS,
    SETUP,
    SINK_ALONE,
    SINK_DIFFERS,
    SINK_REJECTS,
    SINK_SKIPPED,
    Col,
    Expected,
    iso_interval,
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


def _expected(conn: psycopg.Connection[Any], col: Col, rid: int, table: str = TABLE) -> Expected:
    """psycopg's value of one cell; PostgreSQL's text where Python cannot hold it."""
    c = sql.Identifier(col.name)
    text_expr = sql.SQL("CASE WHEN {c} IS NULL THEN NULL ELSE format('%%s', {c}) END").format(c=c)
    query = sql.SQL("SELECT {} FROM {} WHERE id = %s")
    text = conn.execute(query.format(text_expr, sql.Identifier(table)), (rid,)).fetchone()
    assert text is not None
    if col.text:
        return Expected(text[0], text[0])
    expr = sql.SQL(col.select).format(c=c)
    binary = col.sql_type == "interval"
    try:
        with conn.cursor(binary=binary) as cur:
            row = cur.execute(query.format(expr, sql.Identifier(table)), (rid,)).fetchone()
    except psycopg.DataError:  # infinity, BC, year > 9999, 24:00:00
        return Expected(None, text[0], loaded=False)
    assert row is not None
    if isinstance(row[0], dict) and col.sql_type == "interval":
        return Expected(iso_interval(row[0]), text[0])
    return Expected(row[0], text[0])


def _fastavro(registry: SchemaRegistryClient, payload: bytes) -> Any:
    schema_id = _HEADER.unpack(payload[: _HEADER.size])[1]
    schema = json.loads(registry.get_schema(schema_id).schema_str or "")
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


def _sink_tables() -> list[tuple[str, tuple[Col, ...]]]:
    """The JDBC sink's source tables: SINK_ALONE columns each in a table of their own
    (a task the sink kills there leaves the other cells measured), the rest together."""
    rest = tuple(c for c in COLUMNS if c.name not in SINK_ALONE and c.name not in SINK_SKIPPED)
    alone = [(f"{TABLE}_{c.name}", (c,)) for c in COLUMNS if c.name in SINK_ALONE]
    return [(f"{TABLE}_sink", rest), *alone]


def _table_ddl(table: str, cols: tuple[Col, ...]) -> sql.Composed:
    columns = sql.SQL(", ").join(
        sql.SQL("{} {}").format(sql.Identifier(c.name), sql.SQL(c.sql_type)) for c in cols
    )
    return sql.SQL("CREATE TABLE {} (id int PRIMARY KEY, {})").format(
        sql.Identifier(table), columns
    )


def _copy(table: str, cols: tuple[Col, ...]) -> sql.Composed:
    names = sql.SQL(", ").join(sql.Identifier(c.name) for c in cols)
    return sql.SQL("INSERT INTO {} SELECT id, {} FROM {}").format(
        sql.Identifier(table), names, sql.Identifier(TABLE)
    )


def _reading(conn: psycopg.Connection[Any]) -> None:
    """Session settings and loaders under which `_expected` reads a database."""
    conn.execute("SET TimeZone = 'UTC'")
    conn.execute("SET DateStyle = 'ISO'")
    info = TypeInfo.fetch(conn, "hstore")
    assert info is not None
    register_hstore(info, conn)
    conn.adapters.register_loader("interval", _IntervalFields)


def _jdbc_sink(stack: Any, worker: Any, prefix: str) -> tuple[dict[int, Any], dict[str, str]]:
    """Debezium's JDBC sink applies `_sink_tables` to a second database, creating the
    tables itself (`schema.evolution: basic`, as its docs set it up: it binds our strings
    as text, which PostgreSQL does not cast to inet, ranges, numeric ... of a table made
    beforehand); each cell is then read from there as from the source (`_expected`).
    Returns the values by row id and, per column, the cause of a task that died."""
    dbname = unique("matrixsink")
    stack.create_database(dbname)
    tables = _sink_tables()
    connectors = {table: unique("mxsink") for table, _ in tables}
    values: dict[int, dict[str, Any]] = {rid: {} for rid in range(ROWS)}
    died: dict[str, str] = {}
    try:
        with psycopg.connect(stack.dsn(dbname), autocommit=True) as conn:
            conn.execute(SETUP)  # hstore: the sink writes a map as one
            for table, connector in connectors.items():
                topic = rf"{prefix}\.public\.{table}"
                worker.put_connector(connector, jdbc_sink_config(stack, dbname, topic))
            for table, cols in tables:

                def applied(table: str = table) -> bool:
                    worker.task_states(connectors[table])  # raises on a dead task
                    if conn.execute("SELECT to_regclass(%s)", (table,)).fetchone() == (None,):
                        return False  # the sink creates it first
                    query = sql.SQL("SELECT count(*) FROM {}").format(sql.Identifier(table))
                    return conn.execute(query).fetchone() == (ROWS,)

                def seen(table: str = table) -> str:
                    found = conn.execute(
                        "SELECT count(*) FROM pg_class WHERE relname = %s", (table,)
                    ).fetchone()
                    return f"table created: {found == (1,)}; log: {worker.tail(5)}"

                try:
                    wait_for(
                        applied, 180, f"the JDBC sink to apply {table}", every=0.5, detail=seen
                    )
                except Exception as exc:  # the task died: every column of the table
                    died |= {c.name: _cause(exc) for c in cols}
                    continue
                _reading(conn)
                for c in cols:
                    for rid in range(ROWS):
                        cell = _expected(conn, c, rid, table)
                        values[rid][c.name] = cell.value if cell.loaded else cell.text
    finally:
        for connector in connectors.values():
            worker.delete_connector(connector)
        stack.drop_database(dbname)
    return {rid: (after, None) for rid, after in values.items()}, died


def _flink(stack: Any, flink: FlinkSQL, topic: str) -> dict[int, Any]:
    """Flink SQL's debezium-avro-confluent format, the columns declared as FLINK_TYPES."""
    columns = ", ".join(
        [
            "`id` INT NOT NULL",
            *(f"`{c.name}` {FLINK_TYPES[c.name]}" for c in COLUMNS),
        ]
    )
    json_columns = {  # see flink_job.py: read as JSON_STRING (dates cast to text first)
        c.name: "ARRAY<STRING>" if FLINK_TYPES[c.name] == "ARRAY<DATE>" else None
        for c in COLUMNS
        if FLINK_TYPES[c.name].startswith(("ARRAY", "MAP"))
    }
    floats = [c.name for c in COLUMNS if FLINK_TYPES[c.name] in ("FLOAT", "DOUBLE")]
    result = flink.run(
        {
            "bootstrap": stack.kafka_bootstrap,
            "registry": stack.registry_url,
            "topic": topic,
            "group": unique("flink"),
            "columns": columns,
            "key": ["id"],
            "json": json_columns,
            "text": floats,
        }
    )
    names = result["columns"]
    rows = {row[0]: dict(zip(names, row, strict=True)) for row in result["rows"]}
    for after in rows.values():
        for name in json_columns:
            after[name] = _from_json(after[name], FLINK_TYPES[name])
        for name in floats:  # Java's text of the float: NaN, Infinity, 3.4028235E38
            after[name] = None if after[name] is None else float(after[name])
    return {rid: (after, None) for rid, after in rows.items()}


def _from_json(text: str | None, flink_type: str) -> Any:
    """A collection column as Flink's JSON_STRING wrote it (decimals exact, dates parsed)."""
    if text is None:
        return None
    value = json.loads(text, parse_float=Decimal)
    if flink_type == "ARRAY<DATE>":
        return [None if v is None else dt.date.fromisoformat(v) for v in value]
    return value


def _sink_rejection(col: Col, cause: str) -> str:
    """The cell of a column whose sink task died: documented (SINK_REJECTS: a known
    defect of the sink, with its workaround) when the cause is the known one."""
    known = SINK_REJECTS.get(col.name)
    if known is not None and known[0] in cause:
        return f"task dies: {known[1]}"
    return f"FAIL: the sink's task died: {cause}"


def _sink_difference(col: Col, cell: str) -> str:
    """A failed sink cell documented when it is the known difference (SINK_DIFFERS)."""
    known = SINK_DIFFERS.get(col.name)
    if known is not None and cell.startswith("FAIL") and known[0] in cell:
        return f"differs: {known[1]}"
    return cell


def _cause(exc: Exception) -> str:
    """The innermost causes of a Java trace in `exc` (a dead task's, a failed job's), or
    its first line: what a failed cell shows."""
    text = str(exc)
    causes = [
        line.strip(" :")
        for line in text.splitlines()
        if line.startswith(("Caused by:", ": java.", ": org.apache", "java.", "org.apache"))
    ]
    lines = [line for line in text.splitlines() if line.strip()]
    return " / ".join(causes[-2:])[:600] if causes else " / ".join(lines[-2:])[:600]


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
def measured(stack: Any, spark: Any, connect_worker: Any, flink_sql: FlinkSQL) -> dict[str, Any]:
    dbname, prefix = unique("matrix"), unique("mx")
    stack.create_database(dbname)
    topic = f"{prefix}.public.{TABLE}"
    try:
        with psycopg.connect(stack.dsn(dbname), autocommit=True) as conn:
            conn.execute(SETUP)
            conn.execute(_table_ddl(TABLE, COLUMNS))
            for table, cols in _sink_tables():
                conn.execute(_table_ddl(table, cols))
            cfg = bridge_config(stack, dbname, prefix=prefix)  # default settings
            with running(cfg) as bridge:
                with conn.transaction():
                    for rid in range(ROWS):
                        literals = sql.SQL(", ").join(
                            sql.SQL("{}::{}").format(
                                sql.Literal(c.values[rid]), sql.SQL(c.sql_type)
                            )
                            if rid < len(c.values)
                            else sql.SQL("NULL")
                            for c in COLUMNS
                        )
                        conn.execute(
                            sql.SQL("INSERT INTO {} VALUES ({}, {})").format(
                                sql.Identifier(TABLE), rid, literals
                            )
                        )
                    for table, cols in _sink_tables():
                        conn.execute(_copy(table, cols))
                received = read_topic(cfg, topic, ROWS, alive=bridge.alive)
                wait_delivered(bridge, conn, cfg)  # the sink's tables' rows too
            assert len(received) == ROWS
            _reading(conn)
            expected = {
                (c.name, rid): _expected(conn, c, rid) for c in COLUMNS for rid in range(ROWS)
            }
        # The consumers, as their documentation shows them.
        registry = SchemaRegistryClient({"url": cfg.registry.url})
        deserializer = AvroDeserializer(registry)
        ctx = SerializationContext(topic, MessageField.VALUE)
        by_consumer: dict[str, dict[int, Any]] = {c: {} for c in CONSUMERS}
        errors: dict[str, str] = {}

        def by_fastavro(payload: bytes) -> Any:
            return _fastavro(registry, payload)

        def by_deserializer(payload: bytes) -> Any:
            return deserializer(payload, ctx)

        for rec in received:
            assert rec.value is not None
            for name, read in (("fastavro", by_fastavro), ("AvroDeserializer", by_deserializer)):
                try:
                    envelope = read(rec.value)
                except Exception as exc:  # a consumer that raises is a failed cell
                    errors[name] = repr(exc)
                    continue
                after = envelope["after"]
                by_consumer[name][after["id"]] = (after, envelope["special_values"] or {})
        first = received[0].value
        assert first is not None
        schema_id = _HEADER.unpack(first[: _HEADER.size])[1]
        schema_str = registry.get_schema(schema_id).schema_str
        assert schema_str is not None
        try:
            spark_rows = _spark_rows(spark, cfg, topic, schema_str)
            by_consumer["Spark from_avro"] = {
                rid: (after, specials or {}) for rid, (after, specials) in spark_rows.items()
            }
        except Exception as exc:
            errors["Spark from_avro"] = repr(exc)[:500]
        # Flink's job (a process of its own) runs while the sink applies.
        with ThreadPoolExecutor(1) as pool:
            flink = pool.submit(_flink, stack, flink_sql, topic)
            by_consumer["Debezium JDBC sink"], sink_died = _jdbc_sink(stack, connect_worker, prefix)
            try:
                by_consumer["Flink SQL"] = flink.result()
            except Exception as exc:  # a failed job fails every cell
                errors["Flink SQL"] = _cause(exc)
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
            if consumer == "Debezium JDBC sink" and col.name in SINK_SKIPPED:
                cells[consumer] = SINK_SKIPPED[col.name]
                continue
            if consumer == "Debezium JDBC sink" and col.name in sink_died:
                cells[consumer] = _sink_rejection(col, sink_died[col.name])
                continue
            results = []
            for rid in range(ROWS):
                after, specials = by_consumer[consumer][rid]
                if specials is None:  # the sink and Flink keep no envelope: the record's
                    specials = by_consumer["fastavro"][rid][1]
                results.append(judge(col, after[col.name], expected[(col.name, rid)], specials))
            cells[consumer] = merge(results)
            if consumer == "Debezium JDBC sink":
                cells[consumer] = _sink_difference(col, cells[consumer])
        types.append(
            {
                "type": col.sql_type,
                "avro": avro[col.name],
                "flink": FLINK_TYPES[col.name],
                "cells": cells,
            }
        )
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
    """The docs' type table is generated from matrix.json: it must be what this run measured."""
    text = json.dumps(measured, indent=1, ensure_ascii=False) + "\n"
    if os.environ.get("BRIDGE_WRITE_MATRIX") == "1":
        MATRIX_FILE.write_text(text)
    assert MATRIX_FILE.read_text() == text, (
        "the measured matrix differs from tests/consumers/matrix.json: rerun with "
        "BRIDGE_WRITE_MATRIX=1, then python -m tests.consumers.matrix"
    )
