"""An active/standby pair on one slot: one bridge streams, the other waits warm and takes over.

Leadership is a lease held in PostgreSQL (`ha.enabled`): a session-level advisory lock,
keyed by the slot name, taken on a regular connection of its own in the source database.
That session runs with `idle_session_timeout = ha.lease_timeout_s`, and the active bridge
renews it (a `SELECT 1`) three times per timeout, but only while its replication loop is
healthy. So the server itself ends the lease of an active that died (its socket closed:
at once), froze (SIGSTOP, a stop-the-world pause), hung, or was cut off (the session is
silent: after the timeout), and the standby, polling `pg_try_advisory_lock`, gets it then.

Taking over, the new active first ends the old active's walsender if the slot is still
streamed (`pg_terminate_backend` of the slot's `active_pid`: a frozen process never
answers the server's wal_sender_timeout on its own), then builds its pipeline as a single
bridge would. Fencing in Kafka is the transactional id (`ha.enabled` requires
`kafka.exactly_once`): the new active's `init_transactions` bumps the producer epoch, which
aborts whatever transaction the old one left open and makes the broker refuse anything it
still sends. That is the only fence the broker enforces: an old active resumed from SIGSTOP
has records in librdkafka's queue whose broker threads send them the moment the process
runs again, before any code of ours could look at a lease, so a check in the bridge alone
could not keep them from landing after the new active's (out of per-key order). The slot
positions in the state topic are fenced the same way, by a transactional id of their own
(`<transactional id>.state`, bridge/slotstate.py's `StateTopic`) that the new active
initialises before it reads them, and so are an initial snapshot's records
(`<transactional id>.snapshot`, a transaction per chunk, bridge/snapshot/initial.py), whose
id the new active initialises before it streams.

The old active's own check (`LeasedPositions`) is the second line: from the moment its lease
may have ended it acknowledges nothing more to PostgreSQL and stops with `LeaseLostError`
(or the `FencedError` of a refused write, whichever it meets first: `Lease.blame`);
restarted, it stands by.
"""

from __future__ import annotations

import hashlib
import logging
import threading
import time
from collections.abc import Callable
from typing import Any, Final, Protocol

import psycopg
from confluent_kafka import Producer as KafkaProducer

from bridge.config import Config, SourceConfig
from bridge.errors import BridgeError, FencedError, SourceError, StopRequestedError
from bridge.kafka.producer import kafka_client_config
from bridge.metrics import Metrics
from bridge.source import libpq

log: Final = logging.getLogger("bridge.standby")
POLL_S: Final = 0.2  # a standby asks for the lease this often (one cheap query)
RETRY_MAX_S: Final = 5.0  # backoff cap while the source cannot be reached
REPEAT_TERMINATE_S: Final = 1.0  # a walsender that outlives its termination is ended again


class LeaseLostError(BridgeError):
    """The active bridge's lease may have ended: another bridge may be streaming now."""


def lease_key(slot: str) -> int:
    """The advisory lock key of `slot`: 64 bits of a hash, signed as `bigint` wants."""
    digest = hashlib.sha256(f"pg-kafka-bridge:{slot}".encode()).digest()
    return int.from_bytes(digest[:8], "big", signed=True)


class Lease:
    """The slot's lease: `acquire` waits for it, `keep` renews it on a thread, `valid` says
    whether it may still be held (no longer than `timeout_s` after the last renewal sent)."""

    def __init__(
        self, source: SourceConfig, timeout_s: float, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._conninfo = {
            **source.conninfo(),
            "application_name": f"bridge:{source.slot_name}:lease"[:63],
        }
        self.slot = source.slot_name
        self.key = lease_key(source.slot_name)
        self.timeout_s = timeout_s
        self._clock = clock
        self._conn: psycopg.Connection[Any] | None = None
        self._renewed = float("-inf")
        self._lost: str | None = None
        self._stop = threading.Event()
        self._keeper: threading.Thread | None = None
        self._healthy: Callable[[], bool] = lambda: True

    def _connect(self) -> psycopg.Connection[Any]:
        if self._conn is None:
            conn = libpq.connect(self._conninfo, replication=False)
            try:
                conn.execute(f"SET idle_session_timeout = {int(self.timeout_s * 1000)}")
            except psycopg.Error as exc:
                conn.close()
                raise SourceError(
                    f"cannot hold the slot's lease: {str(exc).strip()}",
                    hint="ha.enabled needs PostgreSQL 14 or later (idle_session_timeout)",
                ) from None
            self._conn = conn
        return self._conn

    def acquire(self, should_stop: Callable[[], bool], metrics: Metrics) -> bool:
        """Wait until this bridge holds the lease (True) or `should_stop()` (False).

        The source going away meanwhile is waited out: a standby keeps standing by."""
        delay, failing = POLL_S, False
        while not should_stop():
            metrics.tick()
            try:
                sent = self._clock()
                cur = self._connect().execute("SELECT pg_try_advisory_lock(%s)", (self.key,))
                row = cur.fetchone()
                held = row is not None and bool(row[0])
            except (psycopg.Error, SourceError) as exc:
                metrics.set_connected("postgres", False)
                self.close()
                if not failing:
                    log.warning("standing by: cannot reach PostgreSQL for the lease: %s", exc)
                failing, delay = True, min(max(delay * 2, 0.5), RETRY_MAX_S)
                self._stop.wait(delay)
                continue
            if failing:
                log.info("standing by: PostgreSQL reachable again")
            metrics.set_connected("postgres", True)
            failing, delay = False, POLL_S
            if held:
                self._renewed = sent
                return True
            self._stop.wait(POLL_S)
        return False

    def evict_stale_walsender(self, should_stop: Callable[[], bool], timeout_s: float) -> None:
        """End the walsender still streaming the slot for the previous holder and wait until
        the slot is free, at most `timeout_s` (SourceError) or until `should_stop()`.

        Only the lease holder streams, so that walsender serves a bridge that lost the
        lease (dead, frozen or cut off) and would otherwise hold the slot until the server's
        wal_sender_timeout. One `pg_terminate_backend` is not always enough: a walsender
        whose client stopped reading (cut off, frozen) with its socket's send buffer full
        takes the signal, then blocks sending its "terminating connection" error to that
        client (wait event ClientWrite), with no deadline but TCP's own (minutes); only a
        second signal, taken during that blocked write, makes it exit without sending. So
        while the slot stays active it is ended again, every `REPEAT_TERMINATE_S`.
        Every query here renews the lease (its session is not idle)."""
        pid = self._slot_holder()
        if pid is None:
            return
        deadline = self._clock() + timeout_s
        signalled: dict[int, int] = {}  # pid: how many times it was ended
        last_signal = float("-inf")
        while pid is not None:
            if pid not in signalled or self._clock() - last_signal >= REPEAT_TERMINATE_S:
                if not self._terminate(pid, signalled.get(pid, 0)):
                    return
                signalled[pid] = signalled.get(pid, 0) + 1
                last_signal = self._clock()
            if self._clock() >= deadline:
                raise SourceError(
                    f"replication slot {self.slot!r} stayed active in walsender {pid} for "
                    f"{timeout_s:.0f}s after it was ended",
                    hint=f"look at pid {pid} in pg_stat_activity on the server (a process "
                    "stuck in the kernel?), or raise source.slot_busy_timeout_s",
                )
            self._stop.wait(POLL_S)
            if should_stop():
                return
            pid = self._slot_holder()

    def _slot_holder(self) -> int | None:
        """The pid of the walsender streaming the slot now, or None (a renewal too)."""
        sent = self._clock()
        row = (
            self._connect()
            .execute(
                "SELECT active_pid FROM pg_replication_slots WHERE slot_name = %s AND active",
                (self.slot,),
            )
            .fetchone()
        )
        self._renewed = sent
        return None if row is None or row[0] is None else int(row[0])

    def _terminate(self, pid: int, times: int) -> bool:
        """Signal walsender `pid` to end (logged the first and second time, `times` before
        this one); False if this role may not."""
        try:
            self._connect().execute("SELECT pg_terminate_backend(%s)", (pid,))
        except psycopg.errors.InsufficientPrivilege:
            log.warning(
                "cannot end walsender %d still streaming slot %s (not allowed); waiting for it",
                pid,
                self.slot,
            )
            return False
        if times == 1:
            log.info(
                "walsender %d still holds slot %s after it was ended (stuck sending to its "
                "unreachable client): ending it again",
                pid,
                self.slot,
            )
        elif times == 0:
            log.info(
                "ended walsender %d, left streaming slot %s by the previous holder",
                pid,
                self.slot,
            )
        return True

    def keep(self) -> None:
        """Renew the lease on a daemon thread until `close`, while `healthy()` holds."""
        self._keeper = threading.Thread(target=self._keep, name="bridge-lease", daemon=True)
        self._keeper.start()

    def watch(self, healthy: Callable[[], bool]) -> None:
        """From now on renew only while `healthy()`: a hung active lets its lease lapse."""
        self._healthy = healthy

    def _keep(self) -> None:
        conn = self._conn
        assert conn is not None
        while not self._stop.wait(self.timeout_s / 3):
            if not self._healthy():
                continue  # the server ends the session once it was silent for timeout_s
            sent = self._clock()
            try:
                conn.execute("SELECT 1")
            except psycopg.Error as exc:
                self._lost = f"the lease's connection failed: {' '.join(str(exc).split())}"
                return
            self._renewed = sent

    def valid(self) -> bool:
        """Whether this bridge may still hold the lease: the server cannot have ended its
        session yet (the idle timer started after the last renewal was sent)."""
        return self._lost is None and self._clock() - self._renewed < self.timeout_s

    def check(self) -> None:
        if not self.valid():
            raise self._lost_error()

    def blame(self, exc: BridgeError) -> None:
        """The error that ended an active's run, once its lease may have ended, is that
        (`LeaseLostError`, naming `exc`): the standby took over, ending this bridge's
        walsender and fencing its transactional ids, which a bridge resumed from a pause
        meets as a lost connection or a refused write."""
        if self.valid() or isinstance(exc, (LeaseLostError, FencedError, StopRequestedError)):
            return
        raise self._lost_error(f"; stopped on: {exc.message}") from exc

    def _lost_error(self, detail: str = "") -> LeaseLostError:
        why = self._lost or f"not renewed for {self.timeout_s:g}s"
        return LeaseLostError(
            f"this bridge lost the lease of slot {self.slot!r} ({why}) and is fenced: the "
            f"standby may be streaming now, so nothing more is acknowledged{detail}",
            hint="nothing to do: restarted, this bridge stands by",
        )

    def close(self) -> None:
        """Release the lease (closing its session); idempotent."""
        self._stop.set()
        if self._keeper is not None and self._keeper is not threading.current_thread():
            self._keeper.join(self.timeout_s)
        if self._conn is not None:
            try:
                self._conn.close()
            finally:
                self._conn = None


class Positions(Protocol):
    """`bridge.slotstate.PositionRecorder`, as the pipeline uses it."""

    def admit(self, lsn: int, quiet: bool = False) -> int: ...

    def settle(self, timeout: float) -> None: ...

    def lost_slot(self) -> BridgeError | None: ...


class LeasedPositions:
    """Positions admitted to PostgreSQL only while the lease may be held: an active that
    lost it stops (`LeaseLostError`) before acknowledging anything more."""

    def __init__(self, positions: Positions, lease: Lease) -> None:
        self._positions = positions
        self._lease = lease

    def admit(self, lsn: int, quiet: bool = False) -> int:
        self._lease.check()
        return self._positions.admit(lsn, quiet)

    def settle(self, timeout: float) -> None:
        if self._lease.valid():
            self._positions.settle(timeout)

    def lost_slot(self) -> BridgeError | None:
        """Not once the lease may have ended: the new active moving the slot on is no loss."""
        return self._positions.lost_slot() if self._lease.valid() else None


class _WarmKafka:
    """A plain producer kept connected while standing by: Kafka's reachability (its
    statistics feed `bridge_connected{dependency="kafka"}` and readiness), metadata and
    broker connections ready before a takeover."""

    def __init__(self, cfg: Config, metrics: Metrics) -> None:
        self._producer = KafkaProducer(
            {**kafka_client_config(cfg.kafka), **metrics.kafka_callbacks()}
        )
        self._timeout = cfg.kafka.request_timeout_s

    def start(self) -> None:
        try:
            self._producer.list_topics(timeout=self._timeout)
        except Exception as exc:  # reachability is reported, not required, while standing by
            log.warning("standing by: Kafka not reachable yet: %s", exc)

    def poll(self) -> None:
        self._producer.poll(0)

    def close(self) -> None:
        self._producer.flush(0)


def stand_by(cfg: Config, metrics: Metrics, should_stop: Callable[[], bool]) -> Lease | None:
    """Wait warm until this bridge holds the slot's lease; the lease, renewed from now on,
    or None if stopped first. The caller closes it after its pipeline."""
    lease = Lease(cfg.source, cfg.ha.lease_timeout_s)
    metrics.role = "standby"
    warm = _WarmKafka(cfg, metrics)
    log.info("standing by for slot %s (another bridge may be streaming it)", cfg.source.slot_name)
    started = time.monotonic()
    try:
        warm.start()

        def stop_or_poll() -> bool:
            warm.poll()
            return should_stop()

        if not lease.acquire(stop_or_poll, metrics):
            lease.close()
            return None
    finally:
        warm.close()
    try:
        lease.evict_stale_walsender(should_stop, cfg.source.slot_busy_timeout_s)
    except psycopg.Error as exc:  # START_REPLICATION waits for a busy slot anyway
        log.warning("cannot look for a walsender left streaming slot %s: %s", lease.slot, exc)
    except BaseException:
        lease.close()
        raise
    if should_stop():
        lease.close()
        return None
    lease.keep()
    metrics.role = "active"
    metrics.takeovers += 1
    log.info(
        "holding the lease of slot %s after %.1fs standing by: taking over",
        cfg.source.slot_name,
        time.monotonic() - started,
    )
    return lease
