"""ALTER TABLE while the bridge streams: schema versions in the registry.

Every change to a table's shape registers a new version of its value subject before
the first row that needs it; consumers read old and new records. A change the
registry refuses stops the Pipeline with an IncompatibleSchemaError, and the slot is not
acknowledged past the last delivered transaction, so a restart (after relaxing the
subject's compatibility) delivers the refused row.
"""

from __future__ import annotations

import json
from typing import Any

import psycopg
from confluent_kafka.schema_registry import Schema
from confluent_kafka.schema_registry.avro import AvroDeserializer
from confluent_kafka.serialization import MessageField, SerializationContext
from running import running
from schema.live import (
    Decoders,
    bridge_config,
    confirmed_flush,
    read_topic,
    schema_id,
    topic_size,
)
from waiting import wait_for

from bridge.errors import IncompatibleSchemaError

CREATE = "CREATE TABLE evo (id int PRIMARY KEY, a int, b text)"
FIRST = "INSERT INTO evo VALUES (1, 1, 'one')"
# (DDL, the first row that needs the new shape, that row's after-image)
STEPS: list[tuple[str, str, dict[str, Any]]] = [
    (
        "ALTER TABLE evo ADD COLUMN c text DEFAULT 'dflt'",
        "INSERT INTO evo VALUES (2, 2, 'two', 'see')",
        {"id": 2, "a": 2, "b": "two", "c": "see"},
    ),
    (
        "ALTER TABLE evo DROP COLUMN b",
        "INSERT INTO evo VALUES (3, 3, 'c3')",
        {"id": 3, "a": 3, "c": "c3"},
    ),
    (
        "ALTER TABLE evo ALTER COLUMN a TYPE bigint",
        "INSERT INTO evo VALUES (4, 1099511627776, 'c4')",
        {"id": 4, "a": 1 << 40, "c": "c4"},
    ),
    (
        "ALTER TABLE evo RENAME COLUMN c TO d",
        "INSERT INTO evo VALUES (5, 5, 'd5')",
        {"id": 5, "a": 5, "d": "d5"},
    ),
]


def _after_fields(schema_str: str) -> list[str]:
    before = json.loads(schema_str)["fields"][0]
    return [f["name"] for f in before["type"][1]["fields"]]


def test_each_alter_registers_a_version_before_its_first_row(
    stack: Any, pg_db: str, pg_conn: psycopg.Connection[Any], topic_prefix: str
) -> None:
    pg_conn.execute(CREATE)
    cfg = bridge_config(stack, pg_db, prefix=topic_prefix)
    topic = f"{topic_prefix}.public.evo"
    subject = f"{topic}-value"
    decoders = Decoders(cfg)
    with running(cfg) as bridge:
        pg_conn.execute(FIRST)
        assert len(read_topic(cfg, topic, 1, alive=bridge.alive)) == 1
        # Nullable fields with defaults: every step must pass a BACKWARD check.
        decoders.client.set_compatibility(subject_name=subject, level="BACKWARD")
        for ddl, insert, _ in STEPS:
            pg_conn.execute(ddl)
            pg_conn.execute(insert)
        received = read_topic(cfg, topic, 1 + len(STEPS), alive=bridge.alive)

    expected = [{"id": 1, "a": 1, "b": "one"}, *(after for _, _, after in STEPS)]
    assert len(received) == len(expected)
    versions = decoders.client.get_versions(subject)
    assert versions == list(range(1, len(expected) + 1))
    registered = [decoders.client.get_version(subject, v) for v in versions]
    assert [schema_id(r.value or b"") for r in received] == [v.schema_id for v in registered]
    for version, after in zip(registered, expected, strict=True):
        assert _after_fields(version.schema.schema_str or "") == list(after)
    assert decoders.client.get_versions(f"{topic}-key") == [1]

    # Each record read with its own (writer) schema ...
    assert [decoders.value(topic, r.value)["after"] for r in received] == expected
    # ... and every one with the newest schema as the reader's: int a reads as long,
    # dropped b and renamed c vanish, d defaults to null.
    latest = registered[-1].schema
    reader = AvroDeserializer(decoders.client, Schema(latest.schema_str, "AVRO"))
    context = SerializationContext(topic, MessageField.VALUE)
    assert [reader(r.value, context)["after"] for r in received] == [
        {"id": e["id"], "a": e["a"], "d": e.get("d")} for e in expected
    ]


def test_registry_refusal_stops_before_the_refused_transaction(
    stack: Any, pg_db: str, pg_conn: psycopg.Connection[Any], topic_prefix: str
) -> None:
    pg_conn.execute(CREATE)
    cfg = bridge_config(stack, pg_db, prefix=topic_prefix)
    cfg = cfg.model_copy(  # the default moves to a new subject instead (test_evolution_compat)
        update={"registry": cfg.registry.model_copy(update={"on_incompatible": "stop"})}
    )
    slot = cfg.source.slot_name
    topic = f"{topic_prefix}.public.evo"
    subject = f"{topic}-value"
    decoders = Decoders(cfg)
    with running(cfg) as bridge:
        pg_conn.execute(FIRST)
        (first,) = read_topic(cfg, topic, 1, alive=bridge.alive)
        delivered_lsn = decoders.raw(first.value or b"")["source"]["commit_lsn"]
        wait_for(
            lambda: confirmed_flush(pg_conn, slot) > delivered_lsn,
            30,
            "the slot to confirm the delivered transaction",
            every=0.1,
        )
        decoders.client.set_compatibility(subject_name=subject, level="BACKWARD")
        pg_conn.execute("ALTER TABLE evo ALTER COLUMN b TYPE int USING length(b)")
        with pg_conn.transaction():
            pg_conn.execute("INSERT INTO evo VALUES (2, 2, 42)")
            lsn = "SELECT (pg_current_wal_insert_lsn() - '0/0')::bigint"
            row = pg_conn.execute(lsn).fetchone()
        assert row is not None
        before_commit = int(row[0])  # the refused transaction's commit record starts here or later
        error = bridge.join()

    assert isinstance(error, IncompatibleSchemaError), repr(error)
    assert "table public.evo (column b: text (string) -> int4 (int))" in error.message
    assert f"subject {subject!r}" in error.message
    reason = error.message.partition(" as incompatible: by the registry: ")[2]
    assert reason.strip(), f"no registry reason in: {error.message}"
    assert error.hint and "compatibility" in error.hint
    assert "registry.on_incompatible: new_subject" in error.hint
    # While idle, the bridge may confirm a keepalive's position: for a logical walsender
    # that is the end of the last record it decoded, which can lie inside the refused
    # transaction (its row decoded, its commit not yet), never past its commit record.
    # PostgreSQL skips on restart only transactions whose commit record starts below the
    # confirmed position, so the refused one is decoded again (checked below).
    confirmed = confirmed_flush(pg_conn, slot)
    assert delivered_lsn < confirmed <= before_commit
    assert topic_size(cfg, topic) == 1
    assert decoders.client.get_versions(subject) == [1]

    # Relaxed, a restart on the same slot delivers the refused row: nothing was lost.
    # The stack's registry reads a subject-level NONE as "no subject rule" and falls back
    # to the global level (BACKWARD), so relax globally for the restart, then restore.
    previous = decoders.client.get_compatibility()
    decoders.client.set_compatibility(subject_name=subject, level="NONE")
    decoders.client.set_compatibility(level="NONE")
    try:
        with running(cfg) as bridge:
            received = read_topic(cfg, topic, 2, alive=bridge.alive)
    finally:
        decoders.client.set_compatibility(level=previous)
    assert [decoders.value(topic, r.value)["after"] for r in received] == [
        {"id": 1, "a": 1, "b": "one"},
        {"id": 2, "a": 2, "b": 42},
    ]
