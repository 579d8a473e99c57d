"""Debezium's JDBC sink applies the bridge's topics to a second database: it must equal the source.

The real bridge streams a workload (inserts, updates, deletes, primary-key changes,
TRUNCATE) on tables with many column types into Kafka; Kafka Connect with Debezium's
JDBC sink and Apicurio's Avro converter (tests/consumers/connect.py) applies it to
another database of the stack, configured as Debezium's docs configure it for a
Debezium source. Whatever it rejects is a defect in our records.

The sink database holds the same DDL (created here, so the comparison is of values,
not of the sink's type choices); rows are compared as psycopg returns them.

Left out on purpose: `timestamp`, `time`, `interval` and numeric wider than 38 digits,
whose defaults helper "values" is switching (#24): the consumer matrix covers them
through this worker.
"""

from __future__ import annotations

from typing import Any

import psycopg
import pytest
from psycopg import sql
from running import running
from schema.live import bridge_config, unique, wait_delivered
from waiting import wait_for

from consumers.connect import jdbc_sink_config

pytestmark = pytest.mark.consumers

TYPES_DDL = """
CREATE TABLE dz_types (
    id int4 PRIMARY KEY,
    c_int2 int2, c_int8 int8, c_bool bool, c_float4 float4, c_float8 float8,
    c_numeric numeric(12,4), c_text text, c_varchar varchar(40), c_char char(5),
    c_bytea bytea, c_date date, c_timestamptz timestamptz, c_uuid uuid,
    c_jsonb jsonb, c_json json, c_int_arr int4[], c_text_arr text[]
)"""
PK_DDL = "CREATE TABLE dz_pk (id int8 PRIMARY KEY, tag text NOT NULL, n int4)"
COMPOSITE_DDL = "CREATE TABLE dz_comp (a text, b int4, v numeric(6,2), PRIMARY KEY (a, b))"
TRUNC_DDL = "CREATE TABLE dz_trunc (id int4 PRIMARY KEY, v text)"
DDL = (TYPES_DDL, PK_DDL, COMPOSITE_DDL, TRUNC_DDL)
TABLES = ("dz_types", "dz_pk", "dz_comp", "dz_trunc")

TYPES_ROW = """
INSERT INTO dz_types SELECT g, (g %% 30000)::int2, g * 10000000000, g %% 2 = 0, g / 3.0, g / 7.0,
    g * 1.2345, 'text ' || g || ' ünï 😀', 'v' || g, 'c' || (g %% 10), decode(md5(g::text), 'hex'),
    date '2000-01-01' + g, timestamptz '2024-02-29 12:34:56.789012+00' + g * interval '1 hour',
    md5(g::text)::uuid, jsonb_build_object('g', g, 'a', jsonb_build_array(1, 'x')),
    json_build_object('k', g)::json, ARRAY[g, NULL, -g], ARRAY['a' || g, NULL, '']
FROM generate_series(%s::int4, %s::int4) g"""

WORKLOAD = (
    (TYPES_ROW, (1, 40)),
    ("INSERT INTO dz_types (id) VALUES (100)", None),  # every other column NULL
    (
        "UPDATE dz_types SET c_text = 'updated', c_numeric = -0.0001, c_jsonb = '[]', "
        "c_int_arr = '{}', c_bool = NULL WHERE id % 5 = 0",
        None,
    ),
    ("DELETE FROM dz_types WHERE id % 7 = 0", None),
    ("UPDATE dz_types SET id = id + 1000 WHERE id IN (1, 2, 3)", None),  # key changes
    ("INSERT INTO dz_pk SELECT g, 't' || g, g FROM generate_series(1, 30) g", None),
    ("UPDATE dz_pk SET id = -id WHERE id <= 10", None),
    ("UPDATE dz_pk SET n = n * 2 WHERE id > 20", None),
    ("DELETE FROM dz_pk WHERE id = -5", None),
    ("INSERT INTO dz_pk VALUES (5, 'reused', 0)", None),  # the old key back again
    ("INSERT INTO dz_comp SELECT 'k' || (g % 4), g, g / 4.0 FROM generate_series(1, 12) g", None),
    ("UPDATE dz_comp SET b = b + 100 WHERE a = 'k1'", None),
    ("DELETE FROM dz_comp WHERE a = 'k2'", None),
    ("INSERT INTO dz_trunc SELECT g, 'before ' || g FROM generate_series(1, 20) g", None),
    ("TRUNCATE dz_trunc", None),
    ("INSERT INTO dz_trunc SELECT g, 'after ' || g FROM generate_series(15, 25) g", None),
    ("UPDATE dz_trunc SET v = 'last' WHERE id = 20", None),
)


def _rows(conn: psycopg.Connection[Any], table: str) -> list[tuple[Any, ...]]:
    query = sql.SQL("SELECT * FROM {} ORDER BY 1, 2").format(sql.Identifier(table))
    return [tuple(r) for r in conn.execute(query).fetchall()]


@pytest.fixture
def sink_db(stack: Any) -> Any:
    name = unique("sink")
    stack.create_database(name)
    try:
        with psycopg.connect(stack.dsn(name), autocommit=True) as conn:
            for ddl in DDL:
                conn.execute(ddl)
            yield name, conn
    finally:
        stack.drop_database(name)


def test_jdbc_sink_applies_every_change(
    stack: Any,
    pg_db: str,
    pg_conn: psycopg.Connection[Any],
    sink_db: tuple[str, psycopg.Connection[Any]],
    connect_worker: Any,
) -> None:
    sink_name, sink_conn = sink_db
    for ddl in DDL:
        pg_conn.execute(ddl)
    prefix = unique("dz")
    cfg = bridge_config(stack, pg_db, prefix=prefix)
    with running(cfg) as bridge:
        for statement, params in WORKLOAD:
            pg_conn.execute(statement, params)
        wait_delivered(bridge, pg_conn, cfg)
    expected = {t: _rows(pg_conn, t) for t in TABLES}
    assert all(expected.values())

    connector = unique("sink")
    topics = "|".join(TABLES)
    config = jdbc_sink_config(stack, sink_name, rf"{prefix}\.public\.({topics})")
    connect_worker.put_connector(connector, config)
    try:

        def applied() -> bool:
            connect_worker.task_states(connector)  # raises with the sink's trace on failure
            return all(_rows(sink_conn, t) == rows for t, rows in expected.items())

        wait_for(
            applied,
            180,
            "the JDBC sink's tables to equal the source tables",
            every=0.5,
            detail=lambda: _difference(expected, sink_conn) + "\n" + connect_worker.tail(),
        )
    finally:
        connect_worker.delete_connector(connector)


def _difference(expected: dict[str, list[tuple[Any, ...]]], conn: psycopg.Connection[Any]) -> str:
    out = []
    for table, rows in expected.items():
        got = _rows(conn, table)
        if got != rows:
            missing = [r for r in rows if r not in got][:3]
            extra = [r for r in got if r not in rows][:3]
            out.append(
                f"{table}: {len(got)} rows, want {len(rows)}; missing {missing}, extra {extra}"
            )
    return "; ".join(out)
