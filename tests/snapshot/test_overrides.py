"""`snapshot.select_overrides` and `snapshot.row_filters` (Debezium's
`snapshot.select.statement.overrides`): the initial snapshot reads only the rows chosen,
in chunks, for tables with a key and without one; streaming is not filtered."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import psycopg
import pytest
from delivery.helpers import bridge_settings
from running import running, start
from waiting import wait_for

from bridge.config import Config
from bridge.errors import ConfigError
from snapshot.helpers import TopicReader, values


def _settings(stack: Any, pg_db: str, slot: str, pub: str, prefix: str, tmp: Path) -> Any:
    settings = bridge_settings(stack, pg_db, slot, pub, prefix, tmp / "spill")
    settings["snapshot"] = {"mode": "initial", "chunk_size": 7, "workers": 1}
    return settings


def test_the_initial_snapshot_reads_only_the_chosen_rows(
    stack: Any,
    pg_db: str,
    pg_conn: psycopg.Connection[Any],
    slot_name: str,
    publication_name: str,
    topic_prefix: str,
    tmp_path: Path,
) -> None:
    pg_conn.execute("CREATE TABLE orders (id int PRIMARY KEY, region text, v int)")
    pg_conn.execute("CREATE TABLE events (device int, v int)")  # no key: read by ctid
    pg_conn.execute("CREATE TABLE plain (id int PRIMARY KEY)")
    pg_conn.execute(
        "INSERT INTO orders SELECT g, CASE WHEN g % 3 = 0 THEN 'eu' ELSE 'us' END, g "
        "FROM generate_series(1, 50) g"
    )
    pg_conn.execute("INSERT INTO events SELECT g % 5, g FROM generate_series(1, 40) g")
    pg_conn.execute("INSERT INTO plain SELECT generate_series(1, 10)")
    settings = _settings(stack, pg_db, slot_name, publication_name, topic_prefix, tmp_path)
    settings["snapshot"]["row_filters"] = {"public.orders": "region = 'eu' AND v > 10"}
    settings["snapshot"]["select_overrides"] = {
        "public.events": "SELECT * FROM public.events WHERE device IN (1, 2)"
    }
    readers = {
        t: TopicReader(stack.kafka_bootstrap, stack.registry_url, f"{topic_prefix}.public.{t}")
        for t in ("orders", "events", "plain")
    }
    try:
        with running(Config(**settings)) as bridge:
            wait_for(lambda: len(readers["plain"].read(60)) == 10, 60, "plain table snapshot")
            pg_conn.execute("INSERT INTO orders VALUES (100, 'us', 100)")  # streamed: kept
            wait_for(
                lambda: any(r.value and r.value["op"] == "c" for r in readers["orders"].read(60)),
                60,
                "the streamed insert",
            )
            bridge.check()
            events = readers["events"].read(60)
        orders = values(readers["orders"].records)
        snapshot_ids = sorted(v["after"]["id"] for v in orders if v["op"] == "r")
        assert snapshot_ids == [g for g in range(11, 51) if g % 3 == 0]
        assert [v["after"]["id"] for v in orders if v["op"] == "c"] == [100]
        got = sorted((v["after"]["device"], v["after"]["v"]) for v in values(events))
        assert got == sorted((g % 5, g) for g in range(1, 41) if g % 5 in (1, 2))
        assert all(v["op"] == "r" for v in values(events))
    finally:
        for reader in readers.values():
            reader.close()


@pytest.mark.parametrize(
    ("setting", "text", "problem"),
    [
        ("select_overrides", "SELECT id FROM public.orders", 'column "v" does not exist'),
        ("row_filters", "no_such_column > 1", "no_such_column"),
    ],
)
def test_an_override_that_cannot_be_read_stops_before_any_row(
    stack: Any,
    pg_db: str,
    pg_conn: psycopg.Connection[Any],
    slot_name: str,
    publication_name: str,
    topic_prefix: str,
    tmp_path: Path,
    setting: str,
    text: str,
    problem: str,
) -> None:
    pg_conn.execute("CREATE TABLE orders (id int PRIMARY KEY, v int)")
    pg_conn.execute("INSERT INTO orders VALUES (1, 1)")
    settings = _settings(stack, pg_db, slot_name, publication_name, topic_prefix, tmp_path)
    settings["snapshot"][setting] = {"public.orders": text}
    bridge = start(Config(**settings))
    error = bridge.join()
    assert isinstance(error, ConfigError)
    assert f"snapshot.{setting} of public.orders cannot be read" in str(error)
    assert problem in str(error)


def test_an_override_of_a_table_not_read_is_refused(
    stack: Any,
    pg_db: str,
    pg_conn: psycopg.Connection[Any],
    slot_name: str,
    publication_name: str,
    topic_prefix: str,
    tmp_path: Path,
) -> None:
    pg_conn.execute("CREATE TABLE orders (id int PRIMARY KEY)")
    settings = _settings(stack, pg_db, slot_name, publication_name, topic_prefix, tmp_path)
    settings["snapshot"]["row_filters"] = {"public.missing": "true"}
    error = start(Config(**settings)).join()
    assert isinstance(error, ConfigError)
    assert "public.missing" in str(error)


def test_one_table_cannot_have_both_settings() -> None:
    with pytest.raises(ValueError, match=r"in both snapshot\.select_overrides"):
        Config(snapshot={"select_overrides": {"a.b": "SELECT 1"}, "row_filters": {"a.b": "true"}})
