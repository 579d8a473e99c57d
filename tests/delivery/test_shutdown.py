"""SIGTERM: exit 0 in time, and a final status update that covers what was delivered.

After a graceful stop PostgreSQL must resend nothing that already reached Kafka, not
even the transaction the loop was in the middle of: the stop reads on to its commit
(`Pipeline._finishing_tx`), since a consumer of a table without a key cannot tell a
resent row from a second one.
"""

from __future__ import annotations

import time
from collections import Counter
from typing import Any

import psycopg
import pytest
from waiting import wait_for

from bridge.lsn import LSN

from .helpers import (
    BridgeFactory,
    insert_lsn,
    unacknowledged_transactions,
    wait_slot_active,
    wait_slot_released,
)
from .ledger import (
    LedgerStreamFactory,
    LedgerWriter,
    assert_complete,
    assert_delivered,
    assert_resends_after,
    ledger_occurrences,
    ledger_reader,
    read_every_row,
    stop_bridge,
    warm_up,
)

EXIT_S = 40.0  # shutdown_timeout_s (30 s by default) and then some


def test_sigterm_when_caught_up_confirms_everything(
    pg_conn: psycopg.Connection[Any],
    pg_dsn: str,
    slot_name: str,
    publication_name: str,
    topic_prefix: str,
    kafka_bootstrap: str,
    registry_url: str,
    settings: dict[str, Any],
    bridge_process: BridgeFactory,
) -> None:
    reader = ledger_reader(pg_conn, kafka_bootstrap, registry_url, topic_prefix)
    bridge = bridge_process(settings)
    bridge.start()
    wait_slot_active(pg_conn, slot_name, bridge)
    writer = LedgerWriter(pg_dsn, rows_per_txn=2, limit=300)
    try:
        wait_for(writer.finished, 60, "the writer")
        committed = writer.stop()
        reader.read_until(lambda recs: len(recs) >= 600, 60, "every row in Kafka", watch=bridge)
        bridge.terminate()  # at once: the last transactions are likely not confirmed yet
        assert bridge.wait(EXIT_S) == 0, bridge.log()
        reader.read_to_end()
    finally:
        writer.stop()
        reader.close()
    final = wait_slot_released(pg_conn, slot_name).confirmed_flush
    seen = ledger_occurrences(reader.records)
    assert_complete(committed, seen)
    last_commit = max(r.commit_lsn for r in reader.records)
    assert last_commit < final <= insert_lsn(pg_conn)
    assert unacknowledged_transactions(pg_conn, slot_name, publication_name) == []


def test_sigterm_mid_stream_resends_at_most_the_open_transaction(
    pg_conn: psycopg.Connection[Any],
    slot_name: str,
    publication_name: str,
    settings: dict[str, Any],
    bridge_process: BridgeFactory,
    ledger_stream: LedgerStreamFactory,
) -> None:
    bridge = bridge_process(settings)
    run_starts = [time.time() * 1000]
    with ledger_stream(bridge, rate=150) as stream:
        reader = stream.reader
        warm_up(stream, bridge, 900)
        bridge.terminate()
        assert bridge.wait(EXIT_S) == 0, bridge.log()
        stopped = wait_slot_released(pg_conn, slot_name).confirmed_flush
        resend = set(unacknowledged_transactions(pg_conn, slot_name, publication_name))
        reader.read_to_end()
        in_kafka = {r.commit_lsn for r in reader.records}
        partial = sorted(LSN(lsn) for lsn in resend & in_kafka)
        assert partial == [], f"a graceful stop left {partial} delivered but unconfirmed"

        run_starts.append(time.time() * 1000)
        bridge.start()
        wait_slot_active(pg_conn, slot_name, bridge)
        goal = len(reader.records) + 900
        reader.read_until(lambda recs: len(recs) >= goal, 60, "records of run 1", bridge)
        committed = read_every_row(stream, bridge)
        stop_bridge(bridge, reader, EXIT_S)
    seen = assert_delivered(stream, committed)
    assert_resends_after(seen, run_starts, [stopped])


BIG_TX_ROWS = 300_000  # a second or more of streaming on any core: the stop lands inside


def test_sigterm_inside_a_transaction_finishes_it_and_resends_nothing(
    pg_conn: psycopg.Connection[Any],
    slot_name: str,
    publication_name: str,
    topic_prefix: str,
    kafka_bootstrap: str,
    registry_url: str,
    settings: dict[str, Any],
    bridge_process: BridgeFactory,
) -> None:
    """SIGTERM once the first records of one big transaction are in Kafka: the bridge
    reads on to its commit, delivers and confirms all of it, so PostgreSQL has nothing to
    send again and the topic holds each row once (it held a prefix of the transaction, and
    the restart sent that prefix twice)."""
    settings["pipeline"] |= {"shutdown_timeout_s": 120.0}  # room for a busy machine
    reader = ledger_reader(pg_conn, kafka_bootstrap, registry_url, topic_prefix)
    bridge = bridge_process(settings)
    bridge.start()
    wait_slot_active(pg_conn, slot_name, bridge)
    try:
        pg_conn.execute(
            "INSERT INTO ledger (txn, row, pad) SELECT 1, g, 'x' FROM generate_series(1, %s) g",
            (BIG_TX_ROWS,),
        )
        reader.read_until(lambda recs: len(recs) > 0, 60, "the transaction's first rows", bridge)
        bridge.terminate()
        assert bridge.wait(EXIT_S * 4) == 0, bridge.log()
        reader.read_to_end()
    finally:
        reader.close()
    final = wait_slot_released(pg_conn, slot_name).confirmed_flush
    assert unacknowledged_transactions(pg_conn, slot_name, publication_name) == []
    rows = Counter(r.value["after"]["row"] for r in reader.records if r.value is not None)
    assert len(rows) == BIG_TX_ROWS and max(rows.values()) == 1, (len(rows), rows.most_common(1))
    assert max(r.commit_lsn for r in reader.records) < final
    assert "reading on to its commit" in bridge.log(), "the stop did not land inside it"


@pytest.mark.fault
def test_sigterm_while_kafka_is_down_exits_in_time(
    stack: Any,
    pg_conn: psycopg.Connection[Any],
    slot_name: str,
    settings: dict[str, Any],
    bridge_process: BridgeFactory,
    ledger_stream: LedgerStreamFactory,
) -> None:
    """Backpressure (in-flight bound reached) must not make the bridge deaf to SIGTERM:
    an orchestrator's grace period is short, and a stuck stop ends in SIGKILL anyway."""
    settings["pipeline"] |= {"max_in_flight_records": 100, "shutdown_timeout_s": 5.0}
    bridge = bridge_process(settings)
    run_starts = [time.time() * 1000]
    with ledger_stream(bridge) as stream:
        reader, writer = stream.reader, stream.writer
        reader.read_until(lambda recs: len(recs) >= 300, 60, "300 records", watch=bridge)
        stack.stop_kafka()
        goal = len(writer.committed) + 100  # 300 records: well past the in-flight bound
        wait_for(lambda: len(writer.committed) >= goal, 30, "writes during the outage")
        bridge.check()
        asked = time.monotonic()
        bridge.terminate()
        code = bridge.wait(5.0 + 15.0)
        took = time.monotonic() - asked
        if code is None:
            bridge.kill9()
        stopped = wait_slot_released(pg_conn, slot_name).confirmed_flush
        stack.start_kafka()
        run_starts.append(time.time() * 1000)
        bridge.start()
        committed = read_every_row(stream, bridge)
        stop_bridge(bridge, reader, EXIT_S)
    seen = assert_delivered(stream, committed)
    assert_resends_after(seen, run_starts, [stopped])
    assert code is not None, (
        f"SIGTERM ignored for {took:.0f}s while Kafka was down (shutdown_timeout_s is 5)"
    )
