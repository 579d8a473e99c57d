"""`outbox.*` (Debezium's outbox event router): an outbox table's inserts become events on
a topic per aggregate type, keyed by aggregate id, the payload column as the value and the
configured columns as headers; updates, deletes and the table's own topic stay empty."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path
from typing import Any

import psycopg
import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer
from confluent_kafka.serialization import MessageField, SerializationContext
from delivery.helpers import bridge_settings
from running import running, start
from waiting import wait_for

from bridge.config import Config, OutboxConfig, java_regex, java_replacement
from bridge.decode.messages import KIND_TEXT, Column, Relation, TupleData
from bridge.errors import ConfigError, RegistryHTTPError, ValueConversionError
from bridge.events.model import Change
from bridge.kafka.registry import Registry
from bridge.outbox import OutboxRouter
from bridge.schema import DEFAULT_OPTIONS, StaticCatalog
from bridge.schema.table import TableCodec, TableDetails

_OUTBOX_DDL = """
CREATE TABLE outboxevent (
    id uuid PRIMARY KEY,
    aggregatetype varchar(255) NOT NULL,
    aggregateid varchar(255) NOT NULL,
    type varchar(255) NOT NULL,
    payload jsonb
)
"""


def test_topic_names_follow_debeziums_regex_router() -> None:
    """route.topic.regex / route.topic.replacement in Java syntax, as Debezium's defaults."""
    cfg = Config().outbox
    match = re.fullmatch(java_regex(cfg.topic_regex), "Order")
    assert match is not None
    assert match.expand(java_replacement(cfg.topic_replacement)) == "outbox.event.Order"
    match = re.fullmatch(java_regex(r"(?<kind>\w+)\.v(\d)"), "Order.v2")
    assert match is not None
    assert match.expand(java_replacement("${kind}-events.$2")) == "Order-events.2"


class _Events:
    """Every record of one routed topic with its headers; key and value decoded."""

    def __init__(self, stack: Any, topic: str) -> None:
        self.topic = topic
        self.records: list[tuple[Any, Any, dict[str, bytes]]] = []
        self._decode = AvroDeserializer(SchemaRegistryClient({"url": stack.registry_url}))
        self._consumer = Consumer(
            {
                "bootstrap.servers": stack.kafka_bootstrap,
                "group.id": f"outbox-{time.time_ns()}",
                "enable.auto.commit": False,
                "topic.metadata.refresh.interval.ms": 500,
            }
        )
        self._consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])

    def read(self) -> list[tuple[Any, Any, dict[str, bytes]]]:
        msg = self._consumer.poll(0.2)
        if msg is not None and not msg.error():
            key = self._field(msg.key(), MessageField.KEY)
            value = self._field(msg.value(), MessageField.VALUE)
            pairs = msg.headers() or []
            assert isinstance(pairs, list)
            headers = {k: v for k, v in pairs if isinstance(v, bytes)}
            assert len(headers) == len(pairs), pairs  # bytes values, each name once
            self.records.append((key, value, headers))
        return self.records

    def _field(self, raw: bytes | None, field: Any) -> Any:
        return None if raw is None else self._decode(raw, SerializationContext(self.topic, field))

    def close(self) -> None:
        self._consumer.close()


def _outbox_settings(stack: Any, pg_db: str, slot: str, pub: str, prefix: str, tmp: Path) -> Any:
    settings = bridge_settings(stack, pg_db, slot, pub, prefix, tmp / "spill")
    settings["outbox"] = {
        "tables": [r"public\.outboxevent"],
        "topic_replacement": prefix + ".outbox.${routedByValue}",
        "headers": {"type": "eventType"},
    }
    return settings


def test_outbox_inserts_become_routed_events(
    stack: Any,
    pg_db: str,
    pg_conn: psycopg.Connection[Any],
    slot_name: str,
    publication_name: str,
    topic_prefix: str,
    tmp_path: Path,
) -> None:
    pg_conn.execute(_OUTBOX_DDL)
    pg_conn.execute("CREATE TABLE orders (id int PRIMARY KEY)")
    settings = _outbox_settings(stack, pg_db, slot_name, publication_name, topic_prefix, tmp_path)
    orders = _Events(stack, f"{topic_prefix}.outbox.Order")
    customers = _Events(stack, f"{topic_prefix}.outbox.Customer_Profile")
    events = [
        ("00000000-0000-0000-0000-000000000001", "Order", "o-1", "Created", '{"n": 1}'),
        ("00000000-0000-0000-0000-000000000002", "Customer Profile", "c-1", "Moved", '{"c": 1}'),
        ("00000000-0000-0000-0000-000000000003", "Order", "o-1", "Shipped", None),
        ("00000000-0000-0000-0000-000000000004", "Order", "o-2", "Created", '{"n": 2}'),
    ]
    try:
        with running(Config(**settings)) as bridge:
            with pg_conn.transaction():
                for event in events:
                    pg_conn.execute("INSERT INTO outboxevent VALUES (%s, %s, %s, %s, %s)", event)
                    if event[1] == "Order":  # Debezium's pattern: delete right after insert
                        pg_conn.execute("DELETE FROM outboxevent WHERE id = %s", (event[0],))
            pg_conn.execute("UPDATE outboxevent SET type = 'Changed'")  # skipped, logged
            pg_conn.execute("INSERT INTO orders VALUES (1)")  # an ordinary table streams on
            pg_conn.execute(
                "INSERT INTO outboxevent VALUES "
                "('00000000-0000-0000-0000-000000000005', 'Order', 'o-2', 'Paid', '[]')"
            )
            wait_for(lambda: len(orders.read()) >= 4, 60, "four Order events", every=0)
            wait_for(customers.read, 60, "the Customer Profile event", every=0)
            bridge.check()
        want_orders = [
            ("o-1", '{"n": 1}', "Created", events[0][0]),
            ("o-1", None, "Shipped", events[2][0]),
            ("o-2", '{"n": 2}', "Created", events[3][0]),
            ("o-2", "[]", "Paid", "00000000-0000-0000-0000-000000000005"),
        ]
        got = [(k, v, h["eventType"].decode(), h["id"].decode()) for k, v, h in orders.records]
        assert got == want_orders
        assert [(k, json.loads(v), h) for k, v, h in customers.records] == [
            ("c-1", {"c": 1}, {"id": events[1][0].encode(), "eventType": b"Moved"})
        ]
        registry = SchemaRegistryClient({"url": stack.registry_url})
        value = json.loads(
            registry.get_latest_version(f"{orders.topic}-value").schema.schema_str or ""
        )
        assert value[0] == "null"
        assert value[1]["type"] == "string"
        assert value[1]["connect.name"] == "io.debezium.data.Json"
        key = json.loads(registry.get_latest_version(f"{orders.topic}-key").schema.schema_str or "")
        assert key[0] == "null"
        assert "string" in (key[1], key[1].get("type") if isinstance(key[1], dict) else None)
        admin = Consumer({"bootstrap.servers": stack.kafka_bootstrap, "group.id": "outbox-meta"})
        try:
            topics = admin.list_topics(timeout=10).topics
        finally:
            admin.close()
        assert f"{topic_prefix}.public.orders" in topics
        assert f"{topic_prefix}.public.outboxevent" not in topics  # the table's own topic
    finally:
        orders.close()
        customers.close()


@pytest.mark.parametrize(
    ("change", "error"), [("missing column", "has no column 'aggregatetype'"), ("fatal", "updated")]
)
def test_outbox_errors_stop_the_bridge(
    stack: Any,
    pg_db: str,
    pg_conn: psycopg.Connection[Any],
    slot_name: str,
    publication_name: str,
    topic_prefix: str,
    tmp_path: Path,
    change: str,
    error: str,
) -> None:
    pg_conn.execute(_OUTBOX_DDL)
    settings = _outbox_settings(stack, pg_db, slot_name, publication_name, topic_prefix, tmp_path)
    if change == "missing column":
        pg_conn.execute("ALTER TABLE outboxevent RENAME aggregatetype TO kind")
    else:
        settings["outbox"]["on_update"] = "fatal"
        pg_conn.execute(
            "INSERT INTO outboxevent VALUES "
            "('00000000-0000-0000-0000-000000000001', 'Order', 'o-1', 'Created', '{}')"
        )
    bridge = start(Config(**settings))
    if change == "missing column":
        pg_conn.execute(
            "INSERT INTO outboxevent VALUES "
            "('00000000-0000-0000-0000-000000000001', 'Order', 'o-1', 'Created', '{}')"
        )
    else:
        pg_conn.execute("UPDATE outboxevent SET type = 'Changed'")
    failure = bridge.join()
    assert isinstance(failure, ConfigError)
    assert error in str(failure)


class _Client:
    """A registry without subjects that gives every schema id 1 (the unit test below
    needs no registry server)."""

    def get_latest_version(self, subject_name: str) -> str:
        raise RegistryHTTPError(404, f"subject {subject_name!r} not found")

    def register_schema(self, subject_name: str, schema: str) -> int:
        return 1


NUMERIC_5_2 = ((5 << 16) | 2) + 4
_OUTBOX_COLUMNS = (
    ("id", 2950, -1),
    ("aggregatetype", 1043, -1),
    ("aggregateid", 1043, -1),
    ("type", 1043, -1),
    ("payload", 1700, NUMERIC_5_2),
)
_OUTBOX = Relation(
    None,
    9,
    "public",
    "outboxevent",
    "d",
    tuple(Column(int(n == "id"), n, oid, typmod) for n, oid, typmod in _OUTBOX_COLUMNS),
)
_EVENT_ID = b"00000000-0000-0000-0000-000000000001"


@pytest.mark.parametrize(
    ("values", "column", "pg_type"),
    [
        ((_EVENT_ID, b"\xff", b"o-1", b"Created", b"1.50"), "aggregatetype", "varchar"),
        ((_EVENT_ID, b"Order", b"o-\xff", b"Created", b"1.50"), "aggregateid", "varchar"),
        # converted, but beyond numeric(5,2): its writer refuses it
        ((_EVENT_ID, b"Order", b"o-1", b"Created", b"12345.67"), "payload", "numeric"),
    ],
)
def test_an_outbox_value_that_cannot_be_written_names_table_column_and_type(
    values: tuple[bytes, ...], column: str, pg_type: str
) -> None:
    def codec_for(relation: Relation) -> TableCodec:
        return TableCodec(
            relation, StaticCatalog(), TableDetails(("id",), {}), DEFAULT_OPTIONS, "srv"
        )

    cfg = OutboxConfig(tables=[r"public\.outboxevent"], headers={"type": "eventType"})
    router = OutboxRouter(cfg, codec_for, Registry(_Client()), lambda topic: None)
    row = TupleData(bytes([KIND_TEXT] * len(values)), values)
    with pytest.raises(ValueConversionError) as raised:
        router.route(Change("c", _OUTBOX, "", None, row, 0, (_OUTBOX,), 0, None))
    error = raised.value
    assert (error.table, error.column, error.pg_type) == ("public.outboxevent", column, pg_type)
    assert f"public.outboxevent.{column} ({pg_type}): cannot encode the value" in str(error)
