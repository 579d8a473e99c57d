"""A lost slot is never a silent gap: what the bridge delivered, recorded in Kafka.

The slot's `confirmed_flush_lsn` says where PostgreSQL resumes, but not whether that is
where the bridge stopped: a slot dropped and created again, a slot invalidated by
`max_slot_wal_keep_size`, a promoted standby without the slot, or another cluster
behind the same address all offer a plausible position with changes missing before
it. So the bridge keeps its own record, in a compacted topic (`kafka.state_topic`,
default `<prefix>.bridge_state`), key = slot name, value = JSON
`{"systemid", "timeline", "lsn", "resnapshots", "major", "dboid", "writer"}`:

- Written ahead: PostgreSQL is told a flush position only once a record at or past it
  is in Kafka (`PositionRecorder.admit`: one write in flight, at most one a second
  while changes stream in, at once when the stream is quiet), so a healthy slot is
  never ahead of the record. A slot ahead of it was made after the bridge's last
  delivery: the changes in between are in no slot.
- `systemid` (IDENTIFY_SYSTEM) survives physical replication, so a promoted standby is
  the same system and a different value is a different cluster. The timeline is kept
  for the log only: a failover changes it.
- `major` and `dboid` (the server's major version and the database's OID) recognise a
  `pg_upgrade` to a newer major: it gives the cluster a new system identifier but keeps
  database OIDs and, from PostgreSQL 17 on, the logical slots (it refuses a slot that has
  not consumed all WAL). A new identifier, a newer major, the same database OID and the slot
  there at or past the recorded position: the slot was carried over, nothing is missing
  (`carried_over`). A dump restored elsewhere gets new database OIDs.
- `resnapshots`: Unix times of recent `on_slot_lost: resnapshot` recoveries, so the
  "at most N per hour" bound holds across restarts.
- `writer`: `<host>/<pid>` of the bridge that wrote it, for the operator (which pod of a
  standby pair recorded what).
- Fenced in exactly-once mode (`StateTopic`): a bridge that was paused and resumed after
  another one took over cannot write a stale position over the newer one's.

On start `guard` compares the record with the slot and either passes, raises
`SlotLostError` naming the lost LSN range (`on_slot_lost: fail`), or drops what is
left of the slot so the snapshot manager creates a new one and re-reads the tables
(`resnapshot`). The server ends the stream of a slot it invalidates: the stream's error
is then reported as the slot's loss (`PositionRecorder.lost_slot`), and the next start
takes this same path.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import time
from collections.abc import Callable
from typing import Any, Final, NamedTuple

import psycopg
from confluent_kafka import KafkaException
from confluent_kafka import Producer as KafkaProducer

from bridge.config import Config
from bridge.errors import BridgeError, DeliveryError, SlotLostError
from bridge.kafka.eos import ensure_offsets_topic, read_last_value
from bridge.kafka.producer import (
    is_fenced,
    kafka_client_config,
    nothing_to_service,
    transaction_error,
)
from bridge.lsn import LSN
from bridge.metrics import Metrics
from bridge.source import libpq, slots

log: Final = logging.getLogger("bridge.slotstate")
RECORD_EVERY_S: Final = 1.0
HOUR_S: Final = 3600.0
STATE_ID_SUFFIX: Final = ".state"  # the state producer's transactional id: data id + this
WRITER: Final = f"{socket.gethostname()}/{os.getpid()}"


class Record(NamedTuple):
    systemid: str
    timeline: int
    lsn: int  # at or past the slot's confirmed_flush_lsn whenever the bridge runs
    resnapshots: tuple[float, ...] = ()
    major: int = 0  # the server's major version; 0 in records of older bridges
    dboid: int = 0  # the database's OID; 0 in records of older bridges
    writer: str = ""  # `WRITER` of the bridge that wrote it; "" in records of older bridges

    def encode(self) -> bytes:
        return json.dumps(
            {
                "systemid": self.systemid,
                "timeline": self.timeline,
                "lsn": self.lsn,
                "lsn_text": str(LSN(self.lsn)),
                "resnapshots": list(self.resnapshots),
                "major": self.major,
                "dboid": self.dboid,
                "writer": self.writer,
            }
        ).encode()

    @classmethod
    def decode(cls, raw: bytes) -> Record:
        data = json.loads(raw)
        return cls(
            str(data["systemid"]),
            int(data["timeline"]),
            int(data["lsn"]),
            tuple(float(t) for t in data.get("resnapshots", ())),
            int(data.get("major", 0)),
            int(data.get("dboid", 0)),
            str(data.get("writer", "")),
        )


class Server(NamedTuple):
    """What identifies the database across a pg_upgrade (see `carried_over`)."""

    major: int
    dboid: int


def carried_over(
    record: Record | None, systemid: str, server: Server, slot: slots.SlotInfo | None
) -> bool:
    """Pure: the slot came through a pg_upgrade to a newer major with nothing missing."""
    return (
        record is not None
        and record.systemid != systemid
        and 0 < record.major < server.major
        and record.dboid == server.dboid != 0
        and slot is not None
        and slot.invalidation is None
        and slot.confirmed_flush >= record.lsn
    )


class Loss(NamedTuple):
    what: str  # one sentence: what happened to the slot
    lost_from: int  # changes committed after this LSN ...
    lost_to: int | None  # ... and before this one (None: up to where a new slot starts)

    def describe(self) -> str:
        end = "the new slot's start" if self.lost_to is None else str(LSN(self.lost_to))
        return f"changes between LSN {LSN(self.lost_from)} and {end} are not in Kafka"


def judge(
    record: Record | None,
    systemid: str,
    slot: slots.SlotInfo | None,
    server: Server | None = None,
) -> Loss | None:
    """Pure: what the record and the slot's state say was lost, if anything."""
    if server is not None and carried_over(record, systemid, server, slot):
        return None
    if record is not None and record.systemid != systemid:
        return Loss(
            f"the server is PostgreSQL system {systemid}, but the bridge delivered from system "
            f"{record.systemid} (another cluster, or one restored from a logical dump)",
            record.lsn,
            None,
        )
    if slot is not None and slot.invalidation is not None:
        start = record.lsn if record is not None else slot.confirmed_flush
        return Loss(f"the slot was invalidated ({slot.invalidation})", start, None)
    if record is None:
        return None  # nothing delivered yet, or the record was deleted: a first start
    if slot is None:
        return Loss(
            "the slot does not exist on this server, although the bridge delivered changes "
            "from it (dropped, or this server was promoted from a standby that had no "
            "synchronised copy)",
            record.lsn,
            None,
        )
    if slot.confirmed_flush > record.lsn:
        return Loss(
            "the slot starts after the last position the bridge recorded (it was dropped and "
            "created again while the bridge was away)",
            record.lsn,
            slot.confirmed_flush,
        )
    return None


def state_topic(cfg: Config) -> str:
    """The compacted topic of the bridge's own state (`kafka.state_topic`): slot positions
    here, read-only incremental snapshot runs (`bridge.snapshot.runstate`)."""
    return cfg.kafka.state_topic or f"{cfg.kafka.topic_prefix}.bridge_state"


class StateTopic:
    """The state topic's one writer in this bridge (slot positions, read-only snapshot runs),
    on a producer of its own so its records never wait for a data transaction. Build it with
    `open`.

    In exactly-once mode that producer is transactional, its id the data producer's with
    `.state` appended, and `open` initialises it before anything is read: a bridge that
    starts (a standby taking over) fences every older instance's state writes, whatever they
    had queued, sent or left open, as the data producer's id fences its records. A bridge
    frozen while a write was under way and resumed later (SIGSTOP, a stop-the-world pause, a
    partition healed) could otherwise land a stale position after the newer bridge's, which
    a restart would take for a slot created again. Each write is then a Kafka transaction of
    its own, counted as written once committed (every reader uses read_committed), and a
    fenced one raises `FencedError`: never retried. Otherwise (at-least-once) a plain
    idempotent producer whose writes are reported by its delivery callbacks."""

    def __init__(
        self, topic: str, key: bytes, client: dict[str, Any], producer: Any, timeout: float
    ) -> None:
        self.topic = topic
        self.key = key
        self.timeout = timeout
        self._client = client
        self.producer = producer
        self.transactional = False
        # What a transactional write runs while it waits for Kafka (the pipeline sets its
        # stream's service: PostgreSQL keeps being answered).
        self.while_blocked: Callable[[], None] = nothing_to_service

    @classmethod
    def open(cls, cfg: Config) -> StateTopic:
        """Create the topic if needed; in exactly-once mode fence older instances first."""
        kafka = cfg.kafka
        client = kafka_client_config(kafka)  # a refused login stops the bridge
        topic, timeout = state_topic(cfg), kafka.request_timeout_s * 3
        ensure_offsets_topic(client, topic, timeout, what="state topic")
        settings = {**client, "enable.idempotence": True, "acks": "all", "linger.ms": 0}
        if kafka.exactly_once:
            settings["transactional.id"] = cfg.transactional_id() + STATE_ID_SUFFIX
        state = cls(topic, cfg.source.slot_name.encode(), client, KafkaProducer(settings), timeout)
        if kafka.exactly_once:
            state._transactional(state.producer.init_transactions, timeout)
            state.transactional = True
        return state

    def read(self) -> Record | None:
        raw = self.value(self.key)
        return None if raw is None else Record.decode(raw)

    def value(self, key: bytes) -> bytes | None:
        """The newest committed value of `key` (None: absent or deleted)."""
        return read_last_value(self._client, self.topic, key, self.timeout)

    def write(self, record: Record, on_done: Callable[[str | None], None]) -> None:
        """Write the slot's record; `on_done(None)` once Kafka has it, `on_done(reason)` if
        not. Transactional: returns after the commit (or its failure); otherwise at once,
        `on_done` called from a later `poll` or `flush`."""
        if self.transactional:
            on_done(self._commit(self.key, record.encode()))
            return
        self.producer.produce(
            self.topic,
            record.encode(),
            self.key,
            on_delivery=lambda err, _msg: on_done(None if err is None else err.str()),
        )
        self.producer.poll(0)

    def store(self, key: bytes, value: bytes) -> str | None:
        """Write `value` and wait for Kafka: None once it has it, else why not."""
        if self.transactional:
            return self._commit(key, value)
        failed: list[str] = []
        self.producer.produce(
            self.topic,
            value,
            key,
            on_delivery=lambda err, _msg: failed.append(err.str()) if err is not None else None,
        )
        if self.producer.flush(self.timeout):
            return f"no acknowledgement in {self.timeout:.0f}s"
        return failed[0] if failed else None

    def poll(self) -> None:
        self.producer.poll(0)

    def flush(self, timeout: float) -> None:
        self.producer.flush(timeout)

    def close(self) -> None:
        """Drop what is still unsent: an unrecorded position was never confirmed."""
        self.producer.purge()
        self.producer.flush(0)

    def _commit(self, key: bytes, value: bytes) -> str | None:
        """One record in a Kafka transaction of its own; None once committed, else why it
        was not (the transaction aborted). `FencedError` when another instance holds the id."""
        producer = self.producer
        self._transactional(producer.begin_transaction)
        try:
            producer.produce(self.topic, value, key)
            deadline = time.monotonic() + self.timeout
            while producer.flush(0.1):
                if time.monotonic() >= deadline:
                    self._transactional(producer.abort_transaction, self.timeout)
                    return f"no acknowledgement in {self.timeout:.0f}s"
                self.while_blocked()
            producer.commit_transaction(self.timeout)
            return None
        except KafkaException as exc:
            err = exc.args[0]
            if is_fenced(err) or err.fatal():
                raise transaction_error(exc, "state topic write") from None
            self._transactional(producer.abort_transaction, self.timeout)
            return str(err.str())

    def _transactional(self, call: Callable[..., None], *args: Any) -> None:
        try:
            call(*args)
        except KafkaException as exc:
            raise transaction_error(exc, "state topic write") from None


class Guard:
    """The start-up verdict; `recorder()` once the slot to stream from is settled."""

    def __init__(
        self,
        state: StateTopic,
        record: Record | None,
        info: slots.SystemInfo,
        resnapshots: tuple[float, ...],
        replaced: bool,
        server: Server,
    ) -> None:
        self.state = state
        self.record = record
        self.info = info
        self.server = server
        self.resnapshots = resnapshots
        self.replaced = replaced  # the old slot was dropped: the new one starts a new record

    def recorder(
        self, slot: slots.Slot, probe: Callable[[], slots.SlotInfo | None], on_lost: str
    ) -> PositionRecorder:
        start = int(slot.confirmed_flush or slot.consistent_point or 0)
        previous = self.record
        if previous is not None and not self.replaced and not slot.created:
            start = max(start, previous.lsn)  # a synchronised copy may lag the record
        info, server = self.info, self.server
        record = Record(
            info.systemid,
            info.timeline,
            start,
            self.resnapshots,
            server.major,
            server.dboid,
            WRITER,
        )
        recorder = PositionRecorder(self.state, record, probe, on_lost)
        recorder.write_now(start)
        return recorder


def guard(
    cfg: Config,
    rc: libpq.ReplicationConnection,
    catalog: psycopg.Connection[Any],
    metrics: Metrics,
    *,
    clock: Callable[[], float] = time.time,
) -> Guard:
    """Compare the record with the slot; raise, or prepare a resnapshot, or pass."""
    src = cfg.source
    state = StateTopic.open(cfg)  # exactly-once: older instances fenced before the read
    record = state.read()
    info = slots.identify_system(rc)
    slot = slots.slot_info(catalog, src.slot_name)
    server = _server(catalog)
    loss = judge(record, info.systemid, slot, server)
    resnapshots = record.resnapshots if record is not None else ()
    if loss is None:
        if record is not None and carried_over(record, info.systemid, server, slot):
            log.info(
                "slot %r came through pg_upgrade from PostgreSQL %d (system %s) to %d "
                "(system %s): resuming from it",
                src.slot_name,
                record.major,
                record.systemid,
                server.major,
                info.systemid,
            )
        return Guard(state, record, info, resnapshots, replaced=False, server=server)
    now = clock()
    recent = tuple(t for t in resnapshots if now - t < HOUR_S)
    where = f"slot {src.slot_name!r} on system {info.systemid} (timeline {info.timeline})"
    if (
        src.on_slot_lost == "fail"
        and cfg.snapshot.mode == "when_needed"
        and slot is not None
        and slot.invalidation is not None
    ):
        # snapshot.mode when_needed has always replaced an invalidated slot (manager.py)
        _count(metrics, loss, info)
        log.warning(
            "%s: %s; %s (snapshot.mode when_needed re-reads the tables)",
            where,
            loss.what,
            loss.describe(),
        )
        return Guard(state, None, info, resnapshots, replaced=True, server=server)
    if src.on_slot_lost == "fail":
        raise SlotLostError(
            f"{where}: {loss.what}; {loss.describe()}",
            hint=_FAIL_HINT.format(topic=state.topic, slot=src.slot_name),
        )
    if len(recent) >= src.resnapshots_per_hour:
        raise SlotLostError(
            f"{where}: {loss.what}; {loss.describe()}; already re-snapshotted {len(recent)} "
            "time(s) in the last hour (source.resnapshots_per_hour)",
            hint="the slot keeps getting lost: raise max_slot_wal_keep_size or fix what drops "
            "it, then restart (or raise source.resnapshots_per_hour)",
        )
    if slot is not None:
        slots.drop_slot(rc, src.slot_name)
    _count(metrics, loss, info)
    log.warning(
        "%s: %s; %s. on_slot_lost resnapshot: creating the slot again and re-reading the "
        "captured tables (%d of %d this hour)",
        where,
        loss.what,
        loss.describe(),
        len(recent) + 1,
        src.resnapshots_per_hour,
    )
    return Guard(state, None, info, (*recent, now), replaced=True, server=server)


_RESTART_HINT: Final = (
    "start the bridge again: with source.on_slot_lost resnapshot it then creates the slot "
    "again and re-reads the captured tables"
)
_FAIL_HINT: Final = (
    "nothing was streamed from a new slot. If a standby was promoted, use a failover slot "
    "next time (source.failover_slot, PostgreSQL 17+, docs: operations/high-availability). "
    "To go on, "
    "either set source.on_slot_lost: resnapshot (a new slot and a snapshot of the captured "
    "tables; rows deleted in the gap stay in Kafka), or, having repaired the gap yourself, "
    "delete key {slot!r} from topic {topic!r} (a tombstone) and start again"
)


def _server(catalog: psycopg.Connection[Any]) -> Server:
    row = catalog.execute(
        "SELECT oid FROM pg_database WHERE datname = current_database()"
    ).fetchone()
    return Server(catalog.info.server_version // 10000, int(row[0]) if row else 0)


def _count(metrics: Metrics, loss: Loss, info: slots.SystemInfo) -> None:
    metrics.slot_losses += 1
    end = loss.lost_to if loss.lost_to is not None else int(info.xlogpos)
    metrics.slot_gap_bytes += max(0, end - loss.lost_from)


class PositionRecorder:
    """Write-ahead of the flush position: `admit` caps what PostgreSQL may be told at the
    last position recorded in Kafka, and records newer ones (one write in flight).

    While changes stream in, at most one write a second: the position moves with every
    commit and a write per commit would double the broker's work for a one-commit
    workload. When the stream is quiet (`quiet`: the loop's idle turn) a newer position
    is written at once, so the slot confirms the last delivered transaction a Kafka
    round trip after its delivery instead of up to a second later (WAL is released
    sooner, and a restart re-sends less)."""

    def __init__(
        self,
        state: StateTopic,
        record: Record,
        probe: Callable[[], slots.SlotInfo | None],
        on_lost: str = "fail",
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._state = state
        self._record = record
        self._probe = probe
        self._on_lost = on_lost
        self._clock = clock
        self.recorded = 0
        self._wanted = 0
        self._in_flight = False
        self._next = 0.0

    def lost_slot(self) -> SlotLostError | None:
        """After the stream failed: was it because the slot is lost? (The server
        terminates the walsender of a slot it invalidates.) None when the slot is fine or
        cannot be asked: the stream's own error then stands."""
        try:
            slot = self._probe()
        except (psycopg.Error, BridgeError):
            return None
        record = self._record
        loss = judge(record, record.systemid, slot)
        if loss is None:
            return None
        hint = (
            _RESTART_HINT
            if self._on_lost == "resnapshot"
            else _FAIL_HINT.format(topic=self._state.topic, slot=self._state.key.decode())
        )
        return SlotLostError(f"while streaming: {loss.what}; {loss.describe()}", hint=hint)

    def write_now(self, lsn: int) -> None:
        """Record `lsn` and wait for Kafka's acknowledgement."""
        self._write(lsn)
        self._state.flush(self._state.timeout)
        if self._in_flight or self.recorded < lsn:
            raise DeliveryError(
                f"could not record the slot position in {self._state.topic!r}",
                hint="check that the bridge may write to the state topic (kafka.state_topic)",
            )

    def admit(self, lsn: int, quiet: bool = False) -> int:
        self._state.poll()
        self._wanted = max(self._wanted, lsn)
        if lsn > self.recorded and not self._in_flight and (quiet or self._clock() >= self._next):
            self._next = self._clock() + RECORD_EVERY_S
            self._write(lsn)
        return min(lsn, self.recorded)

    def settle(self, timeout: float) -> None:
        """Graceful stop: record the newest position asked for, so it can be confirmed.

        Best effort within `timeout` (Kafka may be down: then the position stays
        unconfirmed and the next start resends from the slot, as after a crash)."""
        self._state.poll()
        if self._wanted > self.recorded and not self._in_flight:
            self._write(self._wanted)
        self._state.flush(timeout)

    def close(self) -> None:
        """Drop what is still unsent: an unrecorded position was never confirmed."""
        self._state.close()

    def _write(self, lsn: int) -> None:
        self._in_flight = True
        record = self._record._replace(lsn=lsn)

        def delivered(failure: str | None) -> None:
            self._in_flight = False
            if failure is not None:
                log.warning("recording the slot position %s failed: %s", LSN(lsn), failure)
                return
            self._record = record
            self.recorded = max(self.recorded, lsn)

        self._state.write(record, delivered)
