"""Read-only incremental snapshots (`snapshot.read_only`, Debezium's read.only) and snapshot
notifications (`snapshot.notification_topic`) against the real stack.

The bridge runs as a role that may write nothing: LOGIN REPLICATION, SELECT on the captured
tables, `default_transaction_read_only` on, the publication made beforehand by the test's
superuser. Signals come through a Kafka topic; the runs are kept in the state topic.
"""

from __future__ import annotations

import contextlib
import json
import logging
import secrets
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

import psycopg
import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
from delivery.helpers import wait_slot_active
from psycopg import sql
from running import PipelineThread, start
from waiting import wait_for

from bridge.config import Config
from bridge.kafka.eos import read_last_value

from .helpers import TopicReader, Writer, keyed_state, make_table, same_state, table_state

Settings = Callable[..., dict[str, Any]]


@pytest.fixture
def reader_role(pg_conn: psycopg.Connection[Any], topic_prefix: str) -> Iterator[tuple[str, str]]:
    """A role that can read the tables and stream, and write nothing."""
    name, password = f"{topic_prefix}_ro", secrets.token_urlsafe(16)
    ident = sql.Identifier(name)
    pg_conn.execute(
        sql.SQL("CREATE ROLE {} LOGIN REPLICATION PASSWORD {}").format(ident, sql.Literal(password))
    )
    pg_conn.execute(sql.SQL("ALTER ROLE {} SET default_transaction_read_only = on").format(ident))
    try:
        yield name, password
    finally:
        pg_conn.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = %s", (name,)
        )
        pg_conn.execute(sql.SQL("DROP OWNED BY {}").format(ident))
        pg_conn.execute(sql.SQL("DROP ROLE {}").format(ident))


class ReadOnlyBridge:
    """Starts bridges as the read-only role with read-only snapshots and notifications."""

    def __init__(
        self,
        stack: Any,
        make_settings: Settings,
        role: tuple[str, str],
        prefix: str,
        slot: str,
    ) -> None:
        self.stack = stack
        self.signals = f"{prefix}.signals"
        self.notifications = f"{prefix}.notifications"
        self._prefix = prefix
        self._slot = slot
        self._settings = make_settings(
            mode="no_data",
            read_only=True,
            signal_kafka_topic=self.signals,
            signal_kafka_group=f"{prefix}-signals",
            notification_topic=self.notifications,
        )
        user, password = role
        source = self._settings["source"]
        self._settings["source"] = {
            **source,
            "user": user,
            "password": password,
            "publication_mode": "disabled",
        }
        self.started: list[PipelineThread] = []

    def start(self, chunk_size: int) -> PipelineThread:
        settings = dict(self._settings)
        settings["snapshot"] = {**settings["snapshot"], "incremental_chunk_size": chunk_size}
        bridge = start(Config(**settings))
        self.started.append(bridge)
        return bridge

    def signal(self, signal_id: str, kind: str, data: dict[str, Any]) -> None:
        producer = Producer({"bootstrap.servers": self.stack.kafka_bootstrap})
        value = json.dumps({"id": signal_id, "type": kind, "data": data})
        producer.produce(self.signals, key=self._prefix.encode(), value=value.encode())
        assert producer.flush(30) == 0

    def run_state(self, run_id: str) -> dict[str, Any] | None:
        """The run as the state topic holds it (what a restart resumes from)."""
        raw = read_last_value(
            {"bootstrap.servers": self.stack.kafka_bootstrap},
            f"{self._prefix}.bridge_state",
            f"{self._slot}.incremental-snapshots".encode(),
            30,
        )
        runs = [] if raw is None else json.loads(raw)["runs"]
        return next((r for r in runs if r["run_id"] == run_id), None)

    def done(self, run_id: str) -> bool:
        run = self.run_state(run_id)
        return run is not None and run["state"] == "done"


@pytest.fixture
def read_only(
    stack: Any,
    pg_conn: psycopg.Connection[Any],
    make_settings: Settings,
    reader_role: tuple[str, str],
    topic_prefix: str,
    slot_name: str,
    publication_name: str,
) -> Iterator[ReadOnlyBridge]:
    make_table(pg_conn, "t", 2_000)
    make_table(pg_conn, "a", 250)
    pg_conn.execute(sql.SQL("GRANT SELECT ON t, a TO {}").format(sql.Identifier(reader_role[0])))
    pg_conn.execute(
        sql.SQL("CREATE PUBLICATION {} FOR TABLE t, a").format(sql.Identifier(publication_name))
    )
    bridges = ReadOnlyBridge(stack, make_settings, reader_role, topic_prefix, slot_name)
    yield bridges
    for bridge in bridges.started:
        if bridge.alive():
            bridge.stop()


class JsonTopic:
    """Every record of a one-partition topic of JSON values, from the beginning."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        self._topic = topic
        self._consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": f"{topic}-reader",
                "enable.auto.commit": False,
            }
        )
        self._assigned = False
        self.values: list[dict[str, Any]] = []

    def read_until(self, last_type: str, timeout: float = 60.0) -> list[dict[str, Any]]:
        """Read on until a notification of `last_type` is the newest one."""

        def arrived() -> bool:
            if not self._assigned:
                self._assign()
                return False
            msg = self._consumer.poll(0.2)
            if msg is not None and msg.error() is None:
                value = json.loads(msg.value() or b"")
                assert json.loads(msg.key() or b"") == {"id": value["id"]}
                self.values.append(value)
            return bool(self.values) and self.values[-1]["type"] == last_type

        wait_for(arrived, timeout, f"a {last_type} notification", every=0)
        return self.values

    def _assign(self) -> None:
        """Once the topic has a leader (the bridge's first notification makes it)."""
        found = self._consumer.list_topics(self._topic, timeout=10).topics.get(self._topic)
        if found is None or found.error is not None or not found.partitions:
            return
        if found.partitions[0].leader >= 0:
            self._consumer.assign([TopicPartition(self._topic, 0, OFFSET_BEGINNING)])
            self._assigned = True

    def close(self) -> None:
        self._consumer.close()


def _differences(reader: TopicReader, conn: psycopg.Connection[Any], table: str) -> object:
    """The keys whose state differs, each with its table row and its records' history."""
    kept, rows = keyed_state(reader.records), table_state(conn, table)
    keys = sorted(k for k in kept.keys() | rows.keys() if kept.get(k) != rows.get(k))
    history = {
        key: [
            (r.value["op"], r.value["source"]["txId"], (r.value["after"] or {}).get("v"))
            if r.value
            else None
            for r in reader.records
            if r.key and r.key["id"] == key
        ]
        for key in keys[:5]
    }
    return {"differing": len(keys), "rows": {k: rows.get(k) for k in keys[:5]}, "history": history}


def _reads(reader: TopicReader) -> Counter[int]:
    return Counter(r.key["id"] for r in reader.read() if r.key and r.value and r.value["op"] == "r")


def test_read_only_snapshot_during_writes(
    stack: Any,
    pg_conn: psycopg.Connection[Any],
    pg_dsn: str,
    read_only: ReadOnlyBridge,
    reader_role: tuple[str, str],
    topic: Any,
    slot_name: str,
) -> None:
    bridge = read_only.start(chunk_size=100)
    wait_slot_active(pg_conn, slot_name, bridge)
    user, password = reader_role
    with (
        psycopg.connect(pg_dsn, user=user, password=password, autocommit=True) as role_conn,
        pytest.raises(psycopg.errors.ReadOnlySqlTransaction),
    ):
        role_conn.execute("CREATE TABLE written (id int)")
    notes = JsonTopic(stack.kafka_bootstrap, read_only.notifications)
    read_only.signal("p-1", "pause-snapshot", {})
    notes.read_until("PAUSED")  # held: the run below waits for the resume
    writer = Writer(pg_dsn, "t", 2_000).start()
    writer.wait_transactions(20)
    read_only.signal("ro-1", "execute-snapshot", {"data-collections": ["public.t"]})
    notes.read_until("STARTED")
    assert read_only.run_state("ro-1") is not None
    reader = topic("public.t")
    assert not _reads(reader)  # paused: no chunk was read
    read_only.signal("r-1", "resume-snapshot", {})
    wait_for(lambda: read_only.done("ro-1"), 120, "the read-only snapshot to finish")
    writer.wait_transactions(20)
    writer.stop()
    wait_for(
        lambda: same_state(reader, pg_conn, "t"),
        60,
        "Kafka to hold the table's state",
        detail=lambda: _differences(reader, pg_conn, "t"),
    )
    reads = _reads(reader)
    assert reads and max(reads.values()) == 1
    records = [r for r in reader.read() if r.value and r.value["op"] == "r"]
    assert all(r.value and r.value["source"]["snapshot"] == "incremental" for r in records)
    # nothing of the bridge's in the source: no signal table, no progress tables
    assert pg_conn.execute("SELECT to_regnamespace('bridge') IS NULL").fetchone() == (True,)
    values = notes.read_until("COMPLETED")
    notes.close()
    assert {v["aggregate_type"] for v in values} == {"Incremental Snapshot"}
    assert all(v["additional_data"]["connector_name"] for v in values)
    kinds = [v["type"] for v in values if v["type"] != "IN_PROGRESS"]
    assert kinds == ["PAUSED", "STARTED", "RESUMED", "TABLE_SCAN_COMPLETED", "COMPLETED"]
    assert {v["id"] for v in values if v["type"] != "PAUSED"} == {"ro-1"}
    completed = next(v for v in values if v["type"] == "TABLE_SCAN_COMPLETED")["additional_data"]
    assert completed["scanned_collection"] == "public.t" and completed["status"] == "SUCCEEDED"
    assert int(completed["total_rows_scanned"]) == sum(reads.values())
    progress = [v["additional_data"] for v in values if v["type"] == "IN_PROGRESS"]
    assert len(progress) > 10  # one per chunk, each further on, none past the maximum
    last_keys = [int(p["last_processed_key"]) for p in progress]
    assert last_keys == sorted(set(last_keys)) and last_keys[-1] <= int(progress[-1]["maximum_key"])
    bridge.stop()


def test_read_only_snapshot_resumes_after_a_restart(
    pg_conn: psycopg.Connection[Any],
    pg_dsn: str,
    read_only: ReadOnlyBridge,
    topic: Any,
    slot_name: str,
) -> None:
    first = read_only.start(chunk_size=50)
    wait_slot_active(pg_conn, slot_name, first)
    # A lock on t holds the snapshot at its second table: a deterministic stop point.
    with psycopg.connect(pg_dsn) as locker:
        locker.execute("LOCK TABLE t IN ACCESS EXCLUSIVE MODE")
        read_only.signal("ro-2", "execute-snapshot", {"data-collections": ["public.a", "public.t"]})
        wait_for(lambda: _waiting_for_a_lock(pg_conn), 60, "the snapshot to reach table t")
        first.pipeline.stop()
        locker.rollback()
    first.stop()
    run = read_only.run_state("ro-2")
    assert run is not None and run["state"] == "running", run
    # Stored: the position after the last chunk Kafka confirmed (the stream was idle, so
    # every window closed between transactions).
    detail = run["detail"]
    acknowledged = 250 if detail["index"] >= 1 else int((detail["last_key"] or ["0"])[0])
    assert acknowledged >= 50
    second = read_only.start(chunk_size=50)
    wait_for(lambda: read_only.done("ro-2"), 120, "the resumed snapshot to finish")
    second.stop()
    reads_a = _reads(topic("public.a"))
    assert sorted(reads_a) == list(range(1, 251))
    assert all(reads_a[k] == 1 for k in range(1, acknowledged + 1)), "confirmed chunk re-read"
    assert set(_reads(topic("public.t"))) == set(range(1, 2001))


def _waiting_for_a_lock(conn: psycopg.Connection[Any]) -> bool:
    row = conn.execute(
        "SELECT count(*) FROM pg_locks l JOIN pg_class c ON c.oid = l.relation "
        "WHERE c.relname = 't' AND NOT l.granted"
    ).fetchone()
    return row is not None and row[0] > 0


def test_initial_snapshot_notifications(
    stack: Any,
    pg_conn: psycopg.Connection[Any],
    make_settings: Settings,
    topic_prefix: str,
) -> None:
    make_table(pg_conn, "t", 300)
    make_table(pg_conn, "e", 0)
    notifications = f"{topic_prefix}.notifications"
    bridge = start(
        Config(**make_settings(mode="initial", chunk_size=100, notification_topic=notifications))
    )
    try:
        notes = JsonTopic(stack.kafka_bootstrap, notifications)
        values = notes.read_until("COMPLETED")
        notes.close()
    finally:
        bridge.stop()
    assert {v["aggregate_type"] for v in values} == {"Initial Snapshot"}
    assert len({v["id"] for v in values}) == len(values)  # a fresh id each, as Debezium's
    kinds = [v["type"] for v in values]
    assert kinds[0] == "STARTED" and kinds[-1] == "COMPLETED"
    tables = {
        v["additional_data"]["scanned_collection"]: v["additional_data"]
        for v in values
        if v["type"] == "TABLE_SCAN_COMPLETED"
    }
    assert {name: data["total_rows_scanned"] for name, data in tables.items()} == {
        "public.t": "300",
        "public.e": "0",
    }
    started = {
        v["additional_data"]["current_collection_in_progress"]: i
        for i, v in enumerate(values)
        if v["type"] == "IN_PROGRESS"
    }
    assert sorted(started) == ["public.e", "public.t"]
    for i, value in enumerate(values):  # a table's scan starts before it completes
        if value["type"] == "TABLE_SCAN_COMPLETED":
            assert started[value["additional_data"]["scanned_collection"]] < i


@contextlib.contextmanager
def _synchronous(conn: psycopg.Connection[Any], slot: str) -> Iterator[None]:
    """The bridge as the synchronous standby: a commit waits for its confirmation, and stays
    in progress for every snapshot meanwhile, though the bridge has streamed it."""
    conn.execute(
        sql.SQL("ALTER SYSTEM SET synchronous_standby_names = {}").format(
            sql.Literal(f'"bridge:{slot}"')
        )
    )
    conn.execute("SELECT pg_reload_conf()")
    try:
        yield
    finally:  # every later commit of the cluster would wait for this bridge
        conn.execute("ALTER SYSTEM RESET synchronous_standby_names")
        conn.execute("SELECT pg_reload_conf()")


def test_changes_delivered_but_not_yet_visible_win_over_the_chunk(
    stack: Any,
    pg_db: str,
    pg_conn: psycopg.Connection[Any],
    read_only: ReadOnlyBridge,
    topic: Any,
    slot_name: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    bridge = read_only.start(chunk_size=50)
    wait_slot_active(pg_conn, slot_name, bridge)
    with caplog.at_level(logging.DEBUG, "bridge.snapshot"), _synchronous(pg_conn, slot_name):
        # the stack runs with synchronous_commit off: on for the writer, so its commits wait
        writer = Writer(stack.dsn(pg_db, options="-c synchronous_commit=on"), "a", 250).start()
        writer.wait_transactions(3)
        state = pg_conn.execute("SELECT sync_state FROM pg_stat_replication").fetchall()
        assert state == [("sync",)]
        read_only.signal("ro-3", "execute-snapshot", {"data-collections": ["public.a"]})
        wait_for(lambda: read_only.done("ro-3"), 120, "the snapshot to finish")
        writer.stop()
    reader = topic("public.a")
    wait_for(
        lambda: same_state(reader, pg_conn, "a"),
        60,
        "Kafka to hold the table's state",
        detail=lambda: _differences(reader, pg_conn, "a"),
    )
    assert max(_reads(reader).values()) == 1
    assert "key(s) changed by streamed transactions" in caplog.text
    bridge.stop()
