"""Debezium's handling modes through the running bridge (live): `avro.*` set to every
non-default value across two runs, rows read back with confluent-kafka's AvroDeserializer.

Run "a": binary hex, decimal string, time precision connect, interval string, hstore
json. Run "b": binary base64, decimal double, time precision adaptive, interval numeric,
wide decimals as Avro decimals. The unit tests (tests/encode/test_modes.py) cover each
mode against the fastavro oracle; this proves the options reach the encoder.
"""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from typing import Any

import psycopg
import pytest
from running import running
from schema.live import Decoders, bridge_config, read_topic, unique

DDL = """
CREATE EXTENSION hstore;
CREATE TABLE modes (id int PRIMARY KEY, b bytea, n numeric(12,2), w numeric(40,8), t time,
    t3 time(3), ts timestamp, iv interval, h hstore)
"""
INSERT = """
INSERT INTO modes VALUES (1, '\\x00ff10', 12.34, -1.5, '12:34:56.789012', '12:34:56.789',
    '2020-01-01 12:34:56.789012', '1 year 2 mons 3 days 04:05:06.78', 'a=>1, b=>NULL')
"""
RUNS: dict[str, tuple[dict[str, str], dict[str, Any]]] = {
    "a": (
        {"binary_mode": "hex", "decimal_mode": "string", "time_precision_mode": "connect",
         "interval_mode": "string", "hstore_mode": "json"},
        {"b": "00ff10", "n": "12.34", "w": "-1.50000000", "t": dt.time(12, 34, 56, 789_000),
         "t3": dt.time(12, 34, 56, 789_000), "ts": dt.datetime(2020, 1, 1, 12, 34, 56, 789_000),
         "iv": "P1Y2M3DT4H5M6.78S", "h": '{"a":"1","b":null}'},
    ),
    "b": (
        {"binary_mode": "base64", "decimal_mode": "double", "time_precision_mode": "adaptive",
         "interval_mode": "numeric"},
        {"b": "AP8Q", "n": 12.34, "w": -1.5, "t": dt.time(12, 34, 56, 789_012),
         "t3": dt.time(12, 34, 56, 789_000), "ts": dt.datetime(2020, 1, 1, 12, 34, 56, 789_012),
         "iv": 14 * 2_629_800_000_000 + 3 * 86_400_000_000 + 14_706_780_000,
         "h": {"a": "1", "b": None}},
    ),
    "wide": (
        {"wide_decimal_mode": "decimal", "interval_mode": "record"},
        {"b": b"\x00\xff\x10", "n": Decimal("12.34"), "w": Decimal("-1.50000000"),
         "t": dt.time(12, 34, 56, 789_012), "t3": dt.time(12, 34, 56, 789_000),
         "ts": dt.datetime(2020, 1, 1, 12, 34, 56, 789_012),
         "iv": {"months": 14, "days": 3, "micros": 14_706_780_000}, "h": {"a": "1", "b": None}},
    ),
}  # fmt: skip


@pytest.mark.parametrize("run", list(RUNS))
def test_modes_reach_the_records(stack: Any, run: str) -> None:
    avro, want = RUNS[run]
    dbname, prefix = unique("modes"), unique("m")
    stack.create_database(dbname)
    try:
        with psycopg.connect(stack.dsn(dbname), autocommit=True) as conn:
            conn.execute(DDL)
            cfg = bridge_config(stack, dbname, prefix=prefix, avro=avro)
            topic = f"{prefix}.public.modes"
            with running(cfg) as bridge:
                conn.execute(INSERT)
                [record] = read_topic(cfg, topic, 1, alive=bridge.alive)
        value = Decoders(cfg).value(topic, record.value)
        assert value["after"] == {"id": 1, **want}
    finally:
        stack.drop_database(dbname)
