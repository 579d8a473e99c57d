"""The active bridge cut off from PostgreSQL (a partition of its own link) while it can still
reach Kafka: the standby takes over and the old active, still producing what it had read,
is fenced; once the link is back it stops on its lost lease.

The active runs in a network namespace (tests/faults/netns.py) and reaches PostgreSQL and
Kafka over links of their own; the standby runs beside the test, in the root namespace,
which no cut touches. The servers are this module's stack, listening on those links.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import subprocess
import time
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

import psycopg
import pytest
from delivery.helpers import BridgeFactory, wait_slot_active
from delivery.kafka_io import Rec, TopicReader, create_topics
from delivery.ledger import LedgerStreamFactory, stop_bridge
from faults.checker import Fault, assert_clean, check
from faults.harness import drain
from faults.netns import Netns
from waiting import checked, wait_for

from bridge.config import SourceConfig
from bridge.lsn import LSN
from bridge.metrics import Metrics
from bridge.standby import Lease

from .pair import (
    pair_settings,
    slot_records,
    state_topic_of,
    unacked_bytes,
    wait_standing_by,
    wait_taking_over,
)
from .test_standby import _more_records, _no_traceback

pytestmark = pytest.mark.fault


@pytest.fixture(scope="module")
def stack(netns_stack: Any) -> Any:
    return netns_stack


@pytest.fixture(scope="module")
def kafka_bootstrap(stack: Any) -> str:
    return str(stack.kafka_bootstrap)


@pytest.fixture(scope="module")
def registry_url(stack: Any) -> str:
    return str(stack.registry_url)


def test_active_cut_off_from_postgres_is_replaced_and_fenced(
    pg_conn: psycopg.Connection[Any],
    slot_name: str,
    settings: dict[str, Any],
    bridge_process: BridgeFactory,
    ledger_stream: LedgerStreamFactory,
    bridge_netns: Netns,
) -> None:
    paired = pair_settings(settings)
    old = bridge_process(paired, bridge_netns.exec_prefix)
    new = bridge_process(paired)
    with ledger_stream(old, rate=200) as stream:
        new.start()
        wait_standing_by(new, 0)
        _more_records(stream, old, 300)
        fault = Fault(time.time() * 1000, stream.monitor.flushed(), "active cut off from PG")
        bridge_netns.cut("postgres")
        try:
            wait_taking_over(new, 0)
            wait_slot_active(pg_conn, slot_name, new)
            _more_records(stream, new, 300)
        finally:
            bridge_netns.restore("postgres")
        code = old.wait(90)
        log = old.log()
        assert code not in (None, 0), f"the old active went on after the partition:\n{log}"
        assert "lost the lease" in log or "fenced" in log.lower(), log
        rows = drain(stream.dsn, stream.reader, stream.writer, new)
        stop_bridge(new, stream.reader)
    _no_traceback(old)
    _no_traceback(new)
    summary = check("standby: active cut off", rows, stream.reader.records, [fault], True)
    assert_clean(summary)


def test_a_position_write_held_up_in_a_frozen_active_never_lands_after_the_takeover(
    pg_conn: psycopg.Connection[Any],
    slot_name: str,
    settings: dict[str, Any],
    kafka_bootstrap: str,
    bridge_process: BridgeFactory,
    ledger_stream: LedgerStreamFactory,
    bridge_netns: Netns,
) -> None:
    """The old active is caught with a slot-position write sent and not yet acknowledged,
    then frozen; its kernel delivers the write after the standby took over and recorded
    newer positions. Kafka is cut off from the old active (its kernel retransmits into
    silence) while the stream is quiet and WAL moves on, so it records the newer position
    at once; frozen there (SIGSTOP) it loses its lease, the standby takes over and streams
    while DML goes on; the link comes back with the old active still frozen, and once its
    kernel has nothing left to send it is thawed. Without the state producer's fenced
    transactional id (`<transactional id>.state`, initialised by the new active) the stale
    write lands after the new active's: the slot's record goes backwards, and a restart
    would take the slot for one created again (a false SlotLostError, or a re-snapshot).
    With it the broker refuses the write; thawed, the old active stops as fenced."""
    paired = pair_settings(settings)
    paired["filters"] = {"exclude_tables": ["public.fence_noise"]}
    pg_conn.execute("CREATE TABLE fence_noise (v int)")
    topic = state_topic_of(paired)
    old = bridge_process(paired, bridge_netns.exec_prefix)
    new = bridge_process(paired)
    with ledger_stream(old, rate=200) as stream:
        new.start()
        wait_standing_by(new, 0)
        _more_records(stream, old, 300)
        stream.writer.pause()
        quiet = _noise(pg_conn)
        wait_for(
            lambda: stream.monitor.flushed() >= quiet,
            60,
            "the old active confirming the quiet stream",
            detail=old.log,
        )
        with _frozen_holding_kafka_bytes(
            bridge_netns,
            old,
            "the old active's position write held up by the cut",
            # the quiet stream passes it: its position is recorded at once
            after_cut=lambda: _noise(pg_conn),
        ):
            fault = Fault(time.time() * 1000, stream.monitor.flushed(), "frozen mid-write")
            wait_taking_over(new, 0)
            wait_slot_active(pg_conn, slot_name, new)
            stream.writer.resume()
            _more_records(stream, new, 300)  # the new active recorded newer positions
        code = old.wait(90)
        log = old.log()
        assert code not in (None, 0), f"the resumed old active went on (exit {code}):\n{log}"
        assert "fenced" in log, log
        rows = drain(stream.dsn, stream.reader, stream.writer, new)
        stop_bridge(new, stream.reader)
    _no_traceback(old)
    _no_traceback(new)
    records = slot_records(kafka_bootstrap, topic, slot_name)
    first = records[0].writer
    took_over = next(i for i, r in enumerate(records) if r.writer != first)
    late = [r for r in records[took_over:] if r.writer == first]
    assert not late, f"the old active ({first}) recorded after the takeover: {late}"
    lsns = [r.lsn for r in records]
    assert lsns == sorted(lsns), f"the slot's recorded position went backwards: {lsns}"
    summary = check("standby: frozen mid-write", rows, stream.reader.records, [fault], True)
    assert_clean(summary)
    assert _rebuilt(stream.reader.records) == _table(pg_conn)


@contextlib.contextmanager
def _frozen_holding_kafka_bytes(
    netns: Netns,
    old: Any,
    held: str,
    *,
    after_cut: Callable[[], object] | None = None,
    slowed: bool = False,
) -> Iterator[None]:
    """Cut the old active's Kafka link, wait until its kernel holds bytes for the broker that
    the broker has not acknowledged (`held` says what they are), and keep the old active
    frozen for the block, where the standby takes over. Afterwards the link comes back
    (unthrottled too if `slowed`) and, with the old active still frozen, its kernel delivers
    what it held; only then is it thawed. So whatever the old active had under way reaches
    the broker after the take-over, which is what the freeze tests are about."""
    netns.cut("kafka")
    try:
        if after_cut is not None:
            after_cut()
        wait_for(lambda: unacked_bytes(netns, "kafka") > 0, 60, held, detail=old.log)
        old.freeze()
        try:
            yield
        finally:
            if slowed:
                netns.unslow("kafka")
            netns.restore("kafka")
        wait_for(
            lambda: unacked_bytes(netns, "kafka") == 0,
            120,
            "the frozen active's kernel delivering what it held",
        )
    finally:
        old.thaw()


def _noise(conn: psycopg.Connection[Any]) -> LSN:
    """A transaction of an excluded table: no Kafka record (no Kafka transaction either),
    WAL the slot passes. Returns a position below its commit record."""
    with conn.transaction():
        conn.execute("INSERT INTO fence_noise VALUES (1)")
        row = conn.execute("SELECT pg_current_wal_insert_lsn()::text").fetchone()
    assert row is not None
    return LSN.parse(str(row[0]))


def _rebuilt(records: list[Rec]) -> dict[int, tuple[int, int]]:
    """The ledger as a consumer rebuilding it by key holds it (the last value per key)."""
    table: dict[int, tuple[int, int]] = {}
    for rec in records:
        assert rec.key is not None
        if rec.value is None or rec.value["after"] is None:
            table.pop(int(rec.key["id"]), None)
        else:
            after = rec.value["after"]
            table[int(rec.key["id"])] = (int(after["txn"]), int(after["row"]))
    return table


def _table(conn: psycopg.Connection[Any]) -> dict[int, tuple[int, int]]:
    return {i: (t, r) for i, t, r in conn.execute("SELECT id, txn, row FROM ledger").fetchall()}


SNAPSHOT_ROWS = 6_000
SNAPSHOT_CHUNK = 200
SNAPSHOT_LINK_KBIT = 256  # a chunk takes the old active a second: it is caught in the middle


def test_snapshot_records_held_up_in_a_frozen_active_never_land_after_the_takeover(
    pg_conn: psycopg.Connection[Any],
    settings: dict[str, Any],
    kafka_bootstrap: str,
    registry_url: str,
    topic_prefix: str,
    bridge_process: BridgeFactory,
    bridge_netns: Netns,
) -> None:
    """The old active is frozen in the middle of its initial snapshot with a chunk's
    records sent and not yet acknowledged (its Kafka link slowed, then cut: they wait in
    its kernel). Every row is updated (v = 1); the standby takes over, resumes the
    snapshot (streaming that update first, then reading the chunks the old one had not
    finished) and streams a second update of every row (v = 2). The link comes back while
    the old active is still frozen, its kernel sends what it held, and it is thawed. Without
    the snapshot's own fenced transactional id (`<transactional id>.snapshot`, initialised
    by the new active before it streams) those old row images (v = 0) land after the new
    active's changes of the same keys, and so does the rest of its snapshot, which the thawed
    old active goes on reading and sending: the topic rebuilt by key has stale rows. With it
    the broker refuses them (or aborts their transaction); thawed, the old active stops as
    fenced."""
    paired = pair_settings(settings)
    paired["snapshot"] = {
        "mode": "initial",
        "chunk_size": SNAPSHOT_CHUNK,
        "workers": 1,
        "progress_bar": "never",
    }
    pg_conn.execute("CREATE TABLE snap_rows (id int PRIMARY KEY, v int NOT NULL, pad text)")
    pg_conn.execute(
        "INSERT INTO snap_rows SELECT g, 0, md5(g::text) || md5((-g)::text) || md5((g*7)::text) "
        "FROM generate_series(1, %s) g",
        (SNAPSHOT_ROWS,),
    )
    topics = create_topics(kafka_bootstrap, [f"{topic_prefix}.public.snap_rows"])
    reader = TopicReader(kafka_bootstrap, registry_url, topics)
    old = bridge_process(paired, bridge_netns.exec_prefix)
    new = bridge_process(paired)
    try:
        bridge_netns.slow("kafka", SNAPSHOT_LINK_KBIT)
        old.start()
        wait_taking_over(old, 0)
        new.start()
        wait_standing_by(new, 0)
        wait_for(
            checked(old.check, lambda: _chunks_done(pg_conn) >= 1),
            120,
            "the old active's first chunk recorded",
            detail=old.log,
        )
        with _frozen_holding_kafka_bytes(
            bridge_netns, old, "snapshot records held up by the cut", slowed=True
        ):
            assert _snapshot_state(pg_conn) == "running", "the snapshot ended before"
            assert _chunks_done(pg_conn) < SNAPSHOT_ROWS // SNAPSHOT_CHUNK
            pg_conn.execute("UPDATE snap_rows SET v = 1")
            wait_taking_over(new, 0)

            def snapshot_done() -> bool:
                new.check()
                reader.poll(0.2)  # decoding is slow: read as it comes
                return _snapshot_state(pg_conn) == "done"

            wait_for(
                snapshot_done,
                180,
                "the new active finishing the snapshot",
                every=0,
                detail=lambda: new.log()[-3000:],
            )
            pg_conn.execute("UPDATE snap_rows SET v = 2")
            updated = dict.fromkeys(range(1, SNAPSHOT_ROWS + 1), 2)

            def caught_up() -> bool:
                new.check()
                reader.poll(0.2)
                return _rebuilt_v(reader.records) == updated

            wait_for(
                caught_up,
                300,
                "the new active's second update of every row",
                every=0,
                detail=lambda: _summary(reader.records, None),
            )
        code = old.wait(90)
        new.terminate()
        assert new.wait(60) == 0, new.log()
        reader.poll(2.0)  # whatever the old active sent has landed: its client is gone
        records = list(reader.records)
    finally:
        reader.close()
    assert "resuming snapshot" in new.log()
    found = re.search(r"starting snapshot for slot \S+ at (\S+)", old.log())
    assert found is not None, old.log()
    old_lsn = int(LSN.parse(found.group(1)))
    late = _late_snapshot_records(records, old_lsn)
    assert not late, (
        f"{len(late)} snapshot record(s) of the old active landed after the new active's "
        f"first record ({_summary(records, old_lsn)}), e.g. {late[:3]}"
    )
    rebuilt = _rebuilt_v(records)
    stale = {k: v for k, v in rebuilt.items() if v != 2}
    assert not stale, (
        f"{len(stale)} key(s) rebuilt from the topic hold an old value (PostgreSQL has v = 2), "
        f"e.g. {sorted(stale.items())[:5]}"
    )
    assert rebuilt == dict(pg_conn.execute("SELECT id, v FROM snap_rows").fetchall())
    log = old.log()
    assert code not in (None, 0), f"the resumed old active went on (exit {code}):\n{log}"
    assert "fenced" in log, log
    _no_traceback(old)
    _no_traceback(new)


def _summary(records: list[Rec], old_lsn: int | None) -> str:
    """What the topic holds, for a failure's message: records by op (snapshot records by
    whose snapshot) and the rebuilt rows by value."""
    kinds: Counter[str] = Counter()
    for rec in records:
        assert rec.value is not None
        op = rec.value["op"]
        if op == "r" and old_lsn is not None:
            op = "r old" if rec.commit_lsn == old_lsn else "r new"
        kinds[op] += 1
    values = Counter(_rebuilt_v(records).values())
    return f"{len(records)} records {dict(kinds)}; rebuilt rows by v {dict(values)}"


def _chunks_done(conn: psycopg.Connection[Any]) -> int:
    try:
        row = conn.execute("SELECT count(rows) FROM bridge.snapshot_chunk").fetchone()
    except psycopg.errors.UndefinedTable:
        return 0
    return int(row[0]) if row else 0


def _snapshot_state(conn: psycopg.Connection[Any]) -> str | None:
    row = conn.execute("SELECT state FROM bridge.snapshot_run").fetchone()
    return None if row is None else str(row[0])


def _rebuilt_v(records: list[Rec]) -> dict[int, int]:
    """snap_rows as a consumer rebuilding it by key holds it: id -> v."""
    table: dict[int, int] = {}
    for rec in records:
        assert rec.key is not None
        if rec.value is None or rec.value["after"] is None:
            table.pop(int(rec.key["id"]), None)
        else:
            table[int(rec.key["id"])] = int(rec.value["after"]["v"])
    return table


def _late_snapshot_records(records: list[Rec], old_lsn: int) -> list[Rec]:
    """Records of the old active's snapshot (op "r" at its snapshot's LSN) that follow, in
    their partition, a record the new active wrote (anything else)."""
    late: list[Rec] = []
    taken_over: set[int] = set()
    for rec in sorted(records, key=lambda r: (r.partition, r.offset)):
        assert rec.value is not None
        if rec.value["op"] == "r" and rec.commit_lsn == old_lsn:
            if rec.partition in taken_over:
                late.append(rec)
        else:
            taken_over.add(rec.partition)
    return late


def test_a_walsender_stuck_on_its_cut_off_client_is_ended(
    pg_conn: psycopg.Connection[Any],
    slot_name: str,
    settings: dict[str, Any],
    stack: Any,
    bridge_netns: Netns,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """What the takeover above meets when the old active was cut off with a full socket:
    its walsender takes the first pg_terminate_backend, then blocks sending its
    "terminating connection" error to the unreachable client (ClientWrite) and keeps the
    slot until TCP gives up (minutes). The new lease holder ends it again until the slot
    is free. The client here is pg_recvlogical in the namespace, the cut is the link's."""
    slot = f"{slot_name}_stuck"
    pg_conn.execute("CREATE TABLE stuck_rows (v text)")
    pg_conn.execute("SELECT pg_create_logical_replication_slot(%s, 'test_decoding')", (slot,))
    client = psycopg.conninfo.make_conninfo(
        host=stack.pg_host,
        port=stack.pg_port,
        user=stack.pg_user,
        dbname=settings["source"]["dbname"],
    )
    recvlogical = [str(stack.postgres.bin_dir / "pg_recvlogical"), "-d", client, "--slot", slot]
    recv = subprocess.Popen(
        [*bridge_netns.exec_prefix, *recvlogical, "--start", "-f", "/dev/null"],
        env={**os.environ, "PGPASSWORD": stack.pg_password},
    )
    try:
        wait_for(lambda: _slot_holder(pg_conn, slot) is not None, 30, "pg_recvlogical streaming")
        walsender = _slot_holder(pg_conn, slot)
        bridge_netns.cut("postgres")
        try:

            def blocked_on_client() -> bool:  # its socket's send buffer is full
                pg_conn.execute(
                    "INSERT INTO stuck_rows SELECT repeat('x', 500) FROM generate_series(1, 2000)"
                )
                row = pg_conn.execute(
                    "SELECT wait_event FROM pg_stat_activity WHERE pid = %s", (walsender,)
                ).fetchone()
                return row is not None and row[0] == "WalSenderWriteData"

            wait_for(blocked_on_client, 60, "the walsender blocked on its cut-off client")
            lease = Lease(SourceConfig(**{**settings["source"], "slot_name": slot}), 3.0)
            try:
                assert lease.acquire(lambda: False, Metrics())
                with caplog.at_level(logging.INFO, logger="bridge.standby"):
                    lease.evict_stale_walsender(lambda: False, 30.0)
            finally:
                lease.close()
            assert _slot_holder(pg_conn, slot) is None
            assert "ending it again" in caplog.text, "the first termination was enough"
        finally:
            bridge_netns.restore("postgres")
    finally:
        recv.kill()
        recv.wait(10)


def _slot_holder(conn: psycopg.Connection[Any], slot: str) -> int | None:
    row = conn.execute(
        "SELECT active_pid FROM pg_replication_slots WHERE slot_name = %s", (slot,)
    ).fetchone()
    return None if row is None else row[0]
