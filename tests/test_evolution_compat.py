"""Which ALTER TABLEs give a schema the registry refuses under BACKWARD, and what the bridge
does then: by default (`registry.on_incompatible: new_subject`) register under
`<subject>-v2` and go on, with one WARNING per move; with `stop`, stop with an
`IncompatibleSchemaError` naming the column and the setting.

The probe builds each table version's schemas exactly as the bridge does (`EncoderCache` over
the live catalog) and registers them in the stack's registry (BACKWARD); the list of
incompatible changes in docs/concepts/schema-evolution.md is this table.
"""

from __future__ import annotations

import logging
from typing import Any

import psycopg
import pytest
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer
from confluent_kafka.serialization import MessageField, SerializationContext
from running import running
from schema.live import Decoders, bridge_config, read_topic, unique

from bridge.build import build_pipeline
from bridge.decode.messages import Relation
from bridge.encode.records import ChangeEncoder
from bridge.encoders import EncoderCache, load_table_details
from bridge.errors import IncompatibleSchemaError
from bridge.kafka.registry import ConfluentClient, Registry
from bridge.schema.catalog import PgCatalog
from bridge.schema.pgtypes import CodecOptions
from bridge.snapshot.catalog import describe_table

# (table, ALTER, subject refused or None, what the error names). A numeric scale change is
# refused by the bridge itself: the registry (Avro's compatibility rules ignore logical types)
# accepts it, and a reader-schema consumer would then read old values scaled wrongly.
CASES = [
    ("id int PRIMARY KEY, a int", "ALTER TABLE t ALTER a TYPE bigint", None, ""),
    ("id int PRIMARY KEY, a bigint", "ALTER TABLE t ALTER a TYPE int", "value", "column a"),
    ("id int PRIMARY KEY, a int", "ALTER TABLE t ALTER a TYPE text", "value", "column a"),
    ("id int PRIMARY KEY, a text", "ALTER TABLE t ALTER a TYPE int USING 0", "value", "column a"),
    ("id int PRIMARY KEY, a real", "ALTER TABLE t ALTER a TYPE float8", None, ""),
    ("id int PRIMARY KEY, a int[]", "ALTER TABLE t ALTER a TYPE int USING 0", "value", "column a"),
    (
        "id int PRIMARY KEY, a numeric(5,2)",
        "ALTER TABLE t ALTER a TYPE numeric(7,3)",
        "value",
        "column a: numeric scale 2 -> 3, precision 5 -> 7",
    ),
    ("id int PRIMARY KEY, a numeric(5,2)", "ALTER TABLE t ALTER a TYPE numeric(9,2)", None, ""),
    ("id int PRIMARY KEY, a varchar(5)", "ALTER TABLE t ALTER a TYPE varchar(9)", None, ""),
    ("id int PRIMARY KEY, a int", "ALTER TABLE t RENAME a TO b", None, ""),
    ("id int PRIMARY KEY, a int", "ALTER TABLE t DROP a", None, ""),
    ("id int PRIMARY KEY, a int", "ALTER TABLE t ADD b int NOT NULL DEFAULT 1", None, ""),
    ("id int PRIMARY KEY, a int", "ALTER TABLE t ALTER id TYPE bigint", None, ""),
    (
        "id int PRIMARY KEY, k int NOT NULL DEFAULT 0",
        "ALTER TABLE t DROP CONSTRAINT t_pkey, ADD PRIMARY KEY (id, k)",
        "key",
        "column k added without a default",
    ),
    (
        "id int PRIMARY KEY, k int NOT NULL DEFAULT 0",
        "ALTER TABLE t DROP CONSTRAINT t_pkey, ADD PRIMARY KEY (k)",
        "key",
        "column k added without a default",
    ),
]


def _relation(conn: psycopg.Connection[Any], oid: int) -> Relation:
    """The table as pgoutput's Relation message describes it."""
    return describe_table(conn, oid).relation


def _cache(conn: psycopg.Connection[Any], registry: Registry, topic: str) -> EncoderCache:
    return EncoderCache(
        registry,
        PgCatalog(conn),
        lambda oid: load_table_details(conn, oid),
        lambda _: topic,
        server_name="probe",
        options=CodecOptions(),
        toast_mode="list",
        tombstones=True,
        binary=False,
    )


def _encode(
    conn: psycopg.Connection[Any], cache: EncoderCache, oid: int
) -> tuple[str, ChangeEncoder]:
    return cache.get(_relation(conn, oid))


@pytest.mark.parametrize(("table", "alter", "refused", "names"), CASES)
def test_which_alters_the_registry_refuses(
    pg_conn: psycopg.Connection[Any],
    registry_url: str,
    table: str,
    alter: str,
    refused: str | None,
    names: str,
) -> None:
    pg_conn.execute(f"CREATE TABLE t ({table})")
    row = pg_conn.execute("SELECT 't'::regclass::oid").fetchone()
    assert row is not None
    oid = int(row[0])
    client = SchemaRegistryClient({"url": registry_url})
    topic = unique("probe")
    for kind in ("key", "value"):
        client.set_compatibility(subject_name=f"{topic}-{kind}", level="BACKWARD")
    _encode(pg_conn, _cache(pg_conn, Registry(ConfluentClient({"url": registry_url})), topic), oid)
    pg_conn.execute(alter)
    stopping = Registry(ConfluentClient({"url": registry_url}), on_incompatible="stop")
    cache = _cache(pg_conn, stopping, topic)  # a restarted bridge: nothing cached
    if refused is None:
        _encode(pg_conn, cache, oid)
        # no new version where the ALTER left the schema as it was (a varchar's length)
        expected = [1] if "varchar" in alter else [1, 2]
        assert client.get_versions(f"{topic}-value") == expected
        return
    with pytest.raises(IncompatibleSchemaError) as caught:
        _encode(pg_conn, cache, oid)
    message = caught.value.message
    assert f"subject '{topic}-{refused}'" in message
    assert "table public.t" in message and names in message
    assert "registry.on_incompatible: new_subject" in (caught.value.hint or "")
    assert client.get_versions(f"{topic}-{refused}") == [1]
    # By default the same version goes to the subject's second generation.
    moved = _cache(pg_conn, Registry(ConfluentClient({"url": registry_url})), topic)
    _encode(pg_conn, moved, oid)
    assert client.get_versions(f"{topic}-{refused}-v2") == [1]
    assert client.get_versions(f"{topic}-{refused}") == [1]


def test_by_default_a_refused_version_moves_to_a_new_subject_with_one_warning(
    stack: Any,
    pg_db: str,
    pg_conn: psycopg.Connection[Any],
    topic_prefix: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    pg_conn.execute("CREATE TABLE evo (id int PRIMARY KEY, b text)")
    cfg = bridge_config(stack, pg_db, prefix=topic_prefix)
    assert cfg.registry.on_incompatible == "new_subject"
    topic = f"{topic_prefix}.public.evo"
    subject = f"{topic}-value"
    decoders = Decoders(cfg)
    caplog.set_level(logging.WARNING, logger="bridge.registry")
    pipeline = build_pipeline(cfg)
    with running(pipeline) as bridge:
        pg_conn.execute("INSERT INTO evo VALUES (1, 'one')")
        assert len(read_topic(cfg, topic, 1, alive=bridge.alive)) == 1
        decoders.client.set_compatibility(subject_name=subject, level="BACKWARD")
        pg_conn.execute("ALTER TABLE evo ALTER COLUMN b TYPE int USING length(b)")
        pg_conn.execute("INSERT INTO evo VALUES (2, 42)")
        pg_conn.execute("INSERT INTO evo VALUES (3, 43)")
        received = read_topic(cfg, topic, 3, alive=bridge.alive)
    assert decoders.client.get_versions(subject) == [1]
    assert decoders.client.get_versions(f"{subject}-v2") == [1]
    deserializer = AvroDeserializer(decoders.client)
    context = SerializationContext(topic, MessageField.VALUE)
    assert [deserializer(r.value, context)["after"] for r in received] == [
        {"id": 1, "b": "one"},
        {"id": 2, "b": 42},
        {"id": 3, "b": 43},
    ]
    (warning,) = [r.getMessage() for r in caplog.records if r.name == "bridge.registry"]
    assert "table public.evo (column b: text (string) -> int4 (int))" in warning
    assert f"under subject {subject!r} was refused" in warning
    assert f"registered under the new subject '{subject}-v2'" in warning
    assert "looks schemas up by subject" in warning
    assert pipeline.metrics.subject_moves == {"public.evo": 1}

    # A restart registers the version again where it is: no new move, no warning.
    caplog.clear()
    restarted = build_pipeline(cfg)
    with running(restarted) as bridge:
        pg_conn.execute("INSERT INTO evo VALUES (4, 44)")
        assert len(read_topic(cfg, topic, 4, alive=bridge.alive)) == 4
    assert decoders.client.get_versions(f"{subject}-v2") == [1]
    assert not [r for r in caplog.records if r.name == "bridge.registry"]
    assert restarted.metrics.subject_moves == {}
