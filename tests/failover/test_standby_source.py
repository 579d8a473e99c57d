"""Logical decoding on a hot standby (PostgreSQL 16+): the slot lives on the standby, the
changes are written on the primary, and they reach Kafka through the standby's slot.

The publication is created on the primary (a standby is read-only, so
`publication_mode: disabled`); the slot is created on the standby, which needs a
running-transactions record from the primary before it is consistent
(`pg_log_standby_snapshot()` makes one at once instead of within 15 s).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psycopg
import pytest
from delivery.helpers import BridgeProcess, wait_slot_active
from delivery.kafka_io import TopicReader, create_topics
from delivery.ledger import LEDGER_DDL, LedgerWriter, ledger_occurrences, stop_bridge
from faults.checker import assert_clean, check, committed_rows
from waiting import wait_for

from .pair import Pair, pair_settings

pytestmark = [pytest.mark.failover, pytest.mark.live]


def test_changes_on_the_primary_arrive_through_the_standbys_slot(
    stack: Any,
    pair: Pair,
    slot_name: str,
    topic_prefix: str,
    kafka_bootstrap: str,
    registry_url: str,
    tmp_path: Path,
    bridge_process: Callable[[dict[str, Any]], BridgeProcess],
) -> None:
    primary_dsn = pair.primary.create_database("ledger")
    publication = f"pub_{slot_name}"
    with psycopg.connect(primary_dsn, autocommit=True) as conn:
        conn.execute(LEDGER_DDL)
        conn.execute(f"CREATE PUBLICATION {publication} FOR TABLE ledger")
    settings = pair_settings(
        stack,
        pair,
        "ledger",
        slot_name,
        topic_prefix,
        tmp_path / "spill",
        publication_mode="disabled",
    )
    settings["source"]["host"] = f"{pair.standby.host}:{pair.standby.port}"
    reader = TopicReader(
        kafka_bootstrap,
        registry_url,
        create_topics(kafka_bootstrap, [f"{topic_prefix}.public.ledger"]),
    )
    bridge = bridge_process(settings)
    standby_dsn = pair.standby.dsn("ledger")
    # the database, table and publication must have reached the standby before the bridge
    # looks; until the standby replays CREATE DATABASE, connecting to it fails
    with psycopg.connect(pair.standby.dsn(), autocommit=True) as conn:
        query = "SELECT count(*) FROM pg_database WHERE datname = 'ledger'"
        wait_for(
            lambda: conn.execute(query).fetchone() == (1,),
            60,
            "the database on the standby",
            every=0.2,
        )
    with psycopg.connect(standby_dsn, autocommit=True) as conn:
        query = "SELECT count(*) FROM pg_publication WHERE pubname = %s"
        wait_for(
            lambda: conn.execute(query, (publication,)).fetchone() == (1,),
            60,
            "the publication on the standby",
            every=0.2,
        )
    bridge.start()
    stop = threading.Event()

    def nudge() -> None:  # until the standby's slot is consistent
        with psycopg.connect(pair.primary.dsn(), autocommit=True) as conn:
            while not stop.wait(0.5):
                conn.execute("SELECT pg_log_standby_snapshot()")

    nudger = threading.Thread(target=nudge, daemon=True)
    nudger.start()
    try:
        with psycopg.connect(standby_dsn, autocommit=True) as conn:
            wait_slot_active(conn, slot_name, bridge, timeout=120)
    finally:
        stop.set()
        nudger.join(10)
    writer = LedgerWriter(primary_dsn, rows_per_txn=3, rate=100, limit=300)
    wait_for(writer.finished, 60, "the writer")
    writer.stop()
    with psycopg.connect(primary_dsn, autocommit=True) as conn:
        rows = committed_rows(conn)
    reader.read_until(
        lambda recs: rows <= ledger_occurrences(recs).keys(), 120, "every committed row", bridge
    )
    stop_bridge(bridge, reader)
    reader.close()
    assert "Traceback" not in bridge.log(), bridge.log()
    assert_clean(check("read from a standby", rows, reader.records, [], exactly_once=True))
