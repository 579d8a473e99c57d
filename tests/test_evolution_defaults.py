"""ADD COLUMN ... DEFAULT while the bridge streams: rows written before read the default.

PostgreSQL answers the constant default (pg_attribute.attmissingval) for every row written
before the ALTER; their records lack the field, so a consumer reading them with the newest
schema gets the field's Avro default, which the bridge makes that value. Checked against the
registry in BACKWARD mode (the stack's), with fastavro and confluent-kafka's AvroDeserializer
as reader-schema consumers, and against what PostgreSQL itself returns for the old row.
"""

from __future__ import annotations

import datetime
import io
import json
from decimal import Decimal
from typing import Any

import fastavro
import psycopg
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer
from confluent_kafka.serialization import MessageField, SerializationContext
from running import running
from schema.live import Decoders, bridge_config, read_topic, schema_id, unique

ADD = (
    "ALTER TABLE evo ADD COLUMN w text DEFAULT 'dflt', "
    "ADD COLUMN n numeric(6,2) DEFAULT 12.5, ADD COLUMN day date DEFAULT '2024-02-29', "
    "ADD COLUMN at timestamptz DEFAULT now(), ADD COLUMN ok boolean DEFAULT true, "
    "ADD COLUMN plain int"
)


def _row_schema(schema_str: str) -> dict[str, Any]:
    before = json.loads(schema_str)["fields"][0]
    row: dict[str, Any] = before["type"][1]
    return row


def _after(reader: Any, writer: Any, payload: bytes) -> dict[str, Any]:
    out = fastavro.schemaless_reader(io.BytesIO(payload[5:]), writer, reader)
    assert isinstance(out, dict)
    after: dict[str, Any] = out["after"]
    return after


def _converted(after: dict[str, Any]) -> dict[str, Any]:
    """The documented one-line conversions of a default fastavro hands over in Avro's JSON
    form (fastavro converts neither bytes nor logical types of defaults)."""
    unscaled = int.from_bytes(after["n"].encode("latin-1"), "big", signed=True)
    return {
        **after,
        "n": Decimal(unscaled).scaleb(-2),
        "day": datetime.date(1970, 1, 1) + datetime.timedelta(days=after["day"]),
        "at": datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)
        + datetime.timedelta(microseconds=after["at"]),
    }


def test_rows_before_add_column_read_its_default(
    stack: Any, pg_db: str, pg_conn: psycopg.Connection[Any], topic_prefix: str
) -> None:
    pg_conn.execute("CREATE TABLE evo (id int PRIMARY KEY, a int)")
    cfg = bridge_config(stack, pg_db, prefix=topic_prefix)
    topic = f"{topic_prefix}.public.evo"
    subject = f"{topic}-value"
    decoders = Decoders(cfg)
    with running(cfg) as bridge:
        pg_conn.execute("INSERT INTO evo VALUES (1, 1)")
        assert len(read_topic(cfg, topic, 1, alive=bridge.alive)) == 1
        decoders.client.set_compatibility(subject_name=subject, level="BACKWARD")
        pg_conn.execute(ADD)
        pg_conn.execute("INSERT INTO evo (id, a, w) VALUES (2, 2, 'two')")
        # The bridge reads the missing values from the catalog as it is when it decodes the
        # ALTER's first row: wait for that, as a rewrite before it would clear them
        # (docs/concepts/schema-evolution.md).
        assert len(read_topic(cfg, topic, 2, alive=bridge.alive)) == 2
        # A volatile default rewrites the table: every row gets its own value, which logical
        # decoding never sends, and the catalog forgets the missing values above.
        pg_conn.execute("ALTER TABLE evo ADD COLUMN r float8 DEFAULT random()")
        pg_conn.execute("INSERT INTO evo (id, a) VALUES (3, 3)")
        received = read_topic(cfg, topic, 3, alive=bridge.alive)

    assert len(received) == 3
    versions = decoders.client.get_versions(subject)
    assert versions == [1, 2, 3]  # each accepted under BACKWARD
    registered = [decoders.client.get_version(subject, v) for v in versions]
    assert [schema_id(r.value or b"") for r in received] == [v.schema_id for v in registered]
    rows = [_row_schema(v.schema.schema_str or "") for v in registered]
    fields = {f["name"]: f for f in rows[1]["fields"]}
    assert fields["w"]["type"][1:] == ["null"] and fields["w"]["default"] == "dflt"
    assert fields["ok"]["default"] is True
    assert fields["plain"]["type"][0] == "null" and fields["plain"]["default"] is None
    latest = {f["name"]: f for f in rows[2]["fields"]}
    assert latest["r"]["default"] is None  # volatile: no value to give
    # kept through the rewrite that cleared the catalog's missing values
    assert {k: latest[k]["default"] for k in fields} == {k: fields[k]["default"] for k in fields}

    row = pg_conn.execute("SELECT w, n, day, at, ok, plain, r FROM evo WHERE id = 1").fetchone()
    assert row is not None
    in_pg = dict(zip(("w", "n", "day", "at", "ok", "plain"), row[:6], strict=True))
    assert isinstance(row[6], float)  # PostgreSQL has a random value; consumers read null

    writer = fastavro.parse_schema(json.loads(registered[0].schema.schema_str or ""))
    reader = fastavro.parse_schema(json.loads(registered[2].schema.schema_str or ""))
    old = received[0].value or b""
    after = _after(reader, writer, old)
    assert after["r"] is None
    assert after["w"] == "dflt" and after["ok"] is True and after["plain"] is None
    assert {k: v for k, v in _converted(after).items() if k in in_pg} == in_pg

    deserializer = AvroDeserializer(
        decoders.client, Schema(registered[2].schema.schema_str or "", "AVRO")
    )
    context = SerializationContext(topic, MessageField.VALUE)
    via_client = deserializer(old, context)
    assert via_client is not None
    assert {k: v for k, v in _converted(via_client["after"]).items() if k in in_pg} == in_pg
    # records written after the ALTER carry their own values
    assert deserializer(received[1].value, context)["after"]["w"] == "two"


def test_reordered_union_is_backward_compatible(stack: Any, registry_url: str) -> None:
    """A field that a bridge before this change registered as ["null", T] default null gets
    [T, "null"] with a default now: the registry accepts that under BACKWARD."""
    client = SchemaRegistryClient({"url": registry_url})
    subject = unique("reorder") + "-value"

    def schema(field_type: Any, default: Any, doc: str = "") -> Schema:
        record = {
            "doc": doc,
            "type": "record",
            "name": "Value",
            "namespace": "t.public.evo",
            "fields": [
                {"name": "id", "type": ["null", "int"], "default": None},
                {"name": "w", "type": field_type, "default": default},
            ],
        }
        return Schema(json.dumps(record), "AVRO")

    client.set_compatibility(subject_name=subject, level="BACKWARD")
    client.register_schema(subject, schema(["null", "string"], None))
    client.register_schema(subject, schema(["string", "null"], "dflt"))
    client.register_schema(subject, schema(["null", "string"], None, doc="back"))  # and back
    assert client.get_versions(subject) == [1, 2, 3]
