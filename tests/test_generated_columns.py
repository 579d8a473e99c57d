"""Generated columns end to end: schema, stream and initial snapshot agree on the columns.

PostgreSQL 18 (the `pg_modern` cluster) publishes stored generated columns when the
publication says `publish_generated_columns = stored` (`source.publish_generated_columns`);
virtual generated columns (18's default kind) are never published, so they are in no schema,
stream record or snapshot row. PostgreSQL 15 (the stack's server) publishes no generated
column, and the option is refused there rather than ignored.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from pydantic import SecretStr
from running import running
from schema.live import Decoders, bridge_config, read_topic, schema_id

from bridge.config import Config
from bridge.errors import SourceError
from bridge.source import slots

TABLE = (
    "CREATE TABLE g (id int PRIMARY KEY, a int, s int GENERATED ALWAYS AS (a * 2) STORED{virtual})"
)
VIRTUAL = ", v int GENERATED ALWAYS AS (a * 3) VIRTUAL"


@pytest.fixture
def modern_db(pg_modern: Any) -> Iterator[str]:
    name = f"gen_{uuid.uuid4().hex[:12]}"
    pg_modern.create_database(name)
    try:
        yield name
    finally:
        pg_modern.drop_database(name)


def _config(stack: Any, pg: Any, dbname: str, prefix: str, *, generated: bool) -> Config:
    cfg = bridge_config(stack, dbname, prefix=prefix)
    source = cfg.source.model_copy(
        update={
            "host": pg.host,
            "port": pg.port,
            "user": pg.user,
            "password": SecretStr(pg.password),
            "publish_generated_columns": generated,
        }
    )
    snapshot = cfg.snapshot.model_copy(update={"mode": "initial"})
    return cfg.model_copy(update={"source": source, "snapshot": snapshot})


def _stream_and_snapshot(
    cfg: Config, conn: psycopg.Connection[Any], topic: str
) -> tuple[list[str], list[tuple[str, dict[str, Any]]], set[int]]:
    """(row fields of the schema, (op, after) of each record, the records' schema ids):
    one row read by the initial snapshot, one insert and one update streamed."""
    conn.execute("INSERT INTO g (id, a) VALUES (1, 10)")
    decoders = Decoders(cfg)
    with running(cfg) as bridge:
        assert len(read_topic(cfg, topic, 1, alive=bridge.alive)) == 1
        conn.execute("INSERT INTO g (id, a) VALUES (2, 20)")
        conn.execute("UPDATE g SET a = 11 WHERE id = 1")
        received = read_topic(cfg, topic, 3, alive=bridge.alive)
    assert len(received) == 3
    values = [decoders.value(topic, r.value) for r in received]
    schema = decoders.writer_schema(received[0].value or b"")
    fields = [f["name"] for f in schema["fields"][0]["type"][1]["fields"]]
    ids = {schema_id(r.value or b"") for r in received}
    return fields, [(v["op"], v["after"]) for v in values], ids


def test_pg18_stored_generated_columns_published(
    stack: Any, pg_modern: Any, modern_db: str, topic_prefix: str
) -> None:
    cfg = _config(stack, pg_modern, modern_db, topic_prefix, generated=True)
    with psycopg.connect(pg_modern.dsn(modern_db), autocommit=True) as conn:
        conn.execute(TABLE.format(virtual=VIRTUAL))
        fields, changes, ids = _stream_and_snapshot(cfg, conn, f"{topic_prefix}.public.g")
        row = conn.execute(
            "SELECT pubgencols::text FROM pg_publication WHERE pubname = %s",
            (cfg.source.publication_name,),
        ).fetchone()
    assert row == ("s",)
    assert fields == ["id", "a", "s"]  # the virtual column is never published
    assert len(ids) == 1  # snapshot and stream: one relation version, one schema
    assert changes == [
        ("r", {"id": 1, "a": 10, "s": 20}),
        ("c", {"id": 2, "a": 20, "s": 40}),
        ("u", {"id": 1, "a": 11, "s": 22}),
    ]


def test_pg18_generated_columns_absent_by_default(
    stack: Any, pg_modern: Any, modern_db: str, topic_prefix: str
) -> None:
    cfg = _config(stack, pg_modern, modern_db, topic_prefix, generated=False)
    with psycopg.connect(pg_modern.dsn(modern_db), autocommit=True) as conn:
        conn.execute(TABLE.format(virtual=VIRTUAL))
        fields, changes, ids = _stream_and_snapshot(cfg, conn, f"{topic_prefix}.public.g")
        # asking for them later, from a publication without them, is an error, not ignored
        publication = cfg.source.publication_name
        with pytest.raises(SourceError, match="publish_generated_columns = stored"):
            slots.ensure_publication(conn, publication, "all_tables", generated=True)
    assert fields == ["id", "a"]
    assert len(ids) == 1
    assert changes == [
        ("r", {"id": 1, "a": 10}),
        ("c", {"id": 2, "a": 20}),
        ("u", {"id": 1, "a": 11}),
    ]


def test_pg15_publishes_no_generated_column(
    stack: Any, pg_db: str, pg_conn: psycopg.Connection[Any], topic_prefix: str
) -> None:
    cfg = bridge_config(stack, pg_db, prefix=topic_prefix)
    cfg = cfg.model_copy(update={"snapshot": cfg.snapshot.model_copy(update={"mode": "initial"})})
    pg_conn.execute(TABLE.format(virtual=""))
    fields, changes, ids = _stream_and_snapshot(cfg, pg_conn, f"{topic_prefix}.public.g")
    assert fields == ["id", "a"]
    assert len(ids) == 1
    assert [after for _, after in changes] == [
        {"id": 1, "a": 10},
        {"id": 2, "a": 20},
        {"id": 1, "a": 11},
    ]
    generated = cfg.model_copy(
        update={"source": cfg.source.model_copy(update={"publish_generated_columns": True})}
    )
    with pytest.raises(SourceError, match="needs PostgreSQL 18"), running(generated):
        pass
