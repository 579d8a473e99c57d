"""The initial snapshot reads the rows PostgreSQL's own table sync would copy: a
publication's row filter applies (also one holding `%`, which psycopg reads as a
placeholder unless told otherwise), and a plain table's inheritance children stay out of
its topic (each child is a table of its own; the stream never sends a child's rows as the
parent's). The bridge's own `snapshot.row_filters` may hold `%` too. The first two were
found by the conformance suite's 028_row_filter (tests/conformance)."""

from __future__ import annotations

from functools import partial
from pathlib import Path
from typing import Any

import psycopg
from running import running
from waiting import wait_for

from bridge.config import Config
from snapshot.helpers import TopicReader, settings


def test_snapshot_reads_what_table_sync_copies(
    stack: Any,
    pg_db: str,
    pg_conn: psycopg.Connection[Any],
    slot_name: str,
    publication_name: str,
    topic_prefix: str,
    tmp_path: Path,
) -> None:
    pg_conn.execute("CREATE TABLE evens (id int PRIMARY KEY, c int)")
    pg_conn.execute("INSERT INTO evens SELECT g, g FROM generate_series(1, 20) g")
    pg_conn.execute("CREATE TABLE parent (id int PRIMARY KEY)")
    pg_conn.execute("CREATE TABLE child (note text) INHERITS (parent)")
    pg_conn.execute("INSERT INTO parent VALUES (1), (2)")
    pg_conn.execute("INSERT INTO child VALUES (10, 'x'), (11, 'y'), (12, 'z')")
    # FOR TABLE parent publishes its inheritance children too, each as itself.
    pg_conn.execute(
        f"CREATE PUBLICATION {publication_name} FOR TABLE evens WHERE (c % 2 = 0), parent"
    )
    config = settings(
        stack, pg_db, slot_name, publication_name, topic_prefix, tmp_path / "spill", mode="initial"
    )
    config["source"]["publication_mode"] = "disabled"
    config["snapshot"]["row_filters"] = {"public.child": "id % 2 = 0"}  # the bridge's own
    readers = {
        t: TopicReader(stack.kafka_bootstrap, stack.registry_url, f"{topic_prefix}.public.{t}")
        for t in ("evens", "parent", "child")
    }

    def ids(table: str) -> list[int]:
        return sorted(r.value["after"]["id"] for r in readers[table].records if r.value)

    def streamed(table: str) -> bool:
        readers[table].read(60)
        return 100 in ids(table)

    try:
        with running(Config(**config)) as bridge:
            # The streamed marker rows come after every snapshot row of their table.
            pg_conn.execute("INSERT INTO evens VALUES (100, 100), (101, 101)")
            pg_conn.execute("INSERT INTO parent VALUES (100)")
            pg_conn.execute("INSERT INTO child VALUES (100, 'streamed')")
            for table in readers:
                wait_for(partial(streamed, table), 60, f"{table}'s streamed row")
            bridge.check()
    finally:
        for reader in readers.values():
            reader.close()
    assert ids("evens") == [*range(2, 21, 2), 100]
    assert ids("parent") == [1, 2, 100]  # FROM ONLY: not the child's 10, 11, 12
    assert ids("child") == [10, 12, 100]
