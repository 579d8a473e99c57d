"""A slot invalidated by max_slot_wal_keep_size while the bridge is stopped is never a silent
gap: `on_slot_lost: fail` stops with the lost LSN range, `resnapshot` makes a new slot and
re-reads the table, after which the topic's state equals the table."""

from __future__ import annotations

import os
import signal
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psycopg
import pytest
from delivery.helpers import BridgeProcess, wait_slot_active
from delivery.kafka_io import Rec, TopicReader, create_topics
from faults.checker import Summary, print_table
from waiting import wait_for

from .pair import Pair, pair_settings

pytestmark = [pytest.mark.failover, pytest.mark.live]


def _topic_state(records: list[Rec]) -> dict[int, str]:
    state: dict[int, str] = {}
    for rec in records:
        assert rec.key is not None
        if rec.value is None or rec.value["after"] is None:
            state.pop(int(rec.key["id"]), None)
        else:
            state[int(rec.key["id"])] = rec.value["after"]["v"]
    return state


def _table(conn: psycopg.Connection[Any]) -> dict[int, str]:
    return dict(conn.execute("SELECT id, v FROM items").fetchall())


def _invalidate(conn: psycopg.Connection[Any], slot: str) -> None:
    """Write and switch WAL segments past max_slot_wal_keep_size (1MB); a checkpoint then
    removes the WAL the slot needs and invalidates it."""

    def lost() -> bool:
        conn.execute("INSERT INTO burn SELECT repeat('w', 1000) FROM generate_series(1, 2000)")
        conn.execute("SELECT pg_switch_wal()")
        conn.execute("CHECKPOINT")
        row = conn.execute(
            "SELECT wal_status, invalidation_reason FROM pg_replication_slots WHERE slot_name = %s",
            (slot,),
        ).fetchone()
        assert row is not None, "slot vanished"
        return bool(row[0] == "lost" and row[1] == "wal_removed")

    wait_for(lost, 120, f"slot {slot} to be invalidated", every=0.1)


@pytest.mark.parametrize("on_lost", ["fail", "resnapshot"])
def test_slot_invalidated_while_stopped(
    stack: Any,
    primary_only: Pair,
    slot_name: str,
    topic_prefix: str,
    kafka_bootstrap: str,
    registry_url: str,
    tmp_path: Path,
    bridge_process: Callable[[dict[str, Any]], BridgeProcess],
    on_lost: str,
) -> None:
    server = primary_only.primary
    dsn = server.create_database("items")
    settings = pair_settings(
        stack,
        primary_only,
        "items",
        slot_name,
        topic_prefix,
        tmp_path / "spill",
        on_slot_lost=on_lost,
    )
    settings["source"]["host"] = f"{server.host}:{server.port}"
    settings["snapshot"] = {"mode": "initial"}
    reader = TopicReader(
        kafka_bootstrap,
        registry_url,
        create_topics(kafka_bootstrap, [f"{topic_prefix}.public.items"]),
    )
    bridge = bridge_process(settings)
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("CREATE TABLE items (id int PRIMARY KEY, v text NOT NULL)")
        conn.execute("CREATE TABLE burn (pad text)")
        conn.execute("INSERT INTO items SELECT g, 'v0' FROM generate_series(1, 50) g")
        bridge.start()
        conn.execute("UPDATE items SET v = 'v1' WHERE id <= 20")
        reader.read_until(lambda r: _topic_state(r) == _table(conn), 90, "the table", bridge)
        bridge.terminate()
        assert bridge.wait(60) == 0, bridge.log()
        # changes only the lost WAL holds
        conn.execute("UPDATE items SET v = 'gap' WHERE id <= 10")
        conn.execute("INSERT INTO items SELECT g, 'gap' FROM generate_series(51, 60) g")
        _invalidate(conn, slot_name)
        bridge.start()
        if on_lost == "fail":
            code = bridge.wait(120)
            log = bridge.log().split("--- run 1 ---")[1]
            assert code == 1, log
            assert "Traceback" not in log, log
            assert "invalidated (wal_removed)" in log and "changes between LSN" in log, log
            assert "source.on_slot_lost: resnapshot" in log, log
            kept = conn.execute(
                "SELECT count(*) FROM pg_replication_slots WHERE slot_name = %s", (slot_name,)
            ).fetchone()
            assert kept == (1,), "on_slot_lost fail must leave the slot for inspection"
        else:
            reader.read_until(
                lambda r: _topic_state(r) == _table(conn),
                120,
                "the table after the resnapshot",
                bridge,
            )
            conn.execute("UPDATE items SET v = 'after' WHERE id > 40")  # streaming again
            reader.read_until(lambda r: _topic_state(r) == _table(conn), 60, "the table", bridge)
            bridge.terminate()
            assert bridge.wait(60) == 0, bridge.log()
            log = bridge.log()
            assert "on_slot_lost resnapshot" in log and "wal_removed" in log, log
            assert "(1 of 3 this hour)" in log, log
            table = _table(conn)
            state = _topic_state(reader.records)
            lost = sum(state.get(k) != v for k, v in table.items()) + len(state.keys() - table)
            print_table([Summary("slot invalidated, resnapshot", 1, len(table), lost, 0, 0, 0)])
            assert lost == 0
    reader.close()


def test_slot_invalidated_while_streaming(
    stack: Any,
    primary_only: Pair,
    slot_name: str,
    topic_prefix: str,
    tmp_path: Path,
    bridge_process: Callable[[dict[str, Any]], BridgeProcess],
) -> None:
    """The server ends the walsender of a slot it invalidates. The bridge, frozen while its
    slot fell behind max_slot_wal_keep_size, must then say that the slot is lost and
    which changes, not report a dropped connection that a restart would 'heal'."""
    server = primary_only.primary
    dsn = server.create_database("items")
    settings = pair_settings(
        stack, primary_only, "items", slot_name, topic_prefix, tmp_path / "spill"
    )
    settings["source"]["host"] = f"{server.host}:{server.port}"
    bridge = bridge_process(settings)
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("CREATE TABLE items (id int PRIMARY KEY, v text NOT NULL)")
        conn.execute("CREATE TABLE burn (pad text)")
        bridge.start()
        wait_slot_active(conn, slot_name, bridge)
        os.kill(bridge.pid, signal.SIGSTOP)  # it reads nothing more: the slot falls behind
        try:
            conn.execute("INSERT INTO items SELECT g, 'lost' FROM generate_series(1, 10) g")
            _invalidate(conn, slot_name)
        finally:
            os.kill(bridge.pid, signal.SIGCONT)
        code = bridge.wait(120)
    log = bridge.log()
    assert code == 1, log
    assert "Traceback" not in log, log
    assert "while streaming: the slot was invalidated (wal_removed)" in log, log
    assert "changes between LSN" in log, log
