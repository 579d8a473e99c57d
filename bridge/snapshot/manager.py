"""What the pipeline calls: the slot with its snapshot decision, the initial snapshot, the hooks.

Order matters for the seam. `ensure_slot` runs where the pipeline used to call
`slots.ensure_slot`; a pending run is recorded before a slot is created, so a crash
between creating the slot and reading it still finds a snapshot to do. Nothing
else may touch the replication connection until `run_initial` has imported the
slot's exported snapshot into every reader; START_REPLICATION comes after it, so the
slot's confirmed position stays at the snapshot's start until the snapshot is done.
A resumed (or `always`) snapshot is the other way round: streaming starts first and
`read_pending` reads the rows once the stream is at the snapshot's LSN (`modes`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Final

from bridge.config import Config
from bridge.decode.messages import Relation
from bridge.encoders import EncoderCache
from bridge.errors import SourceError
from bridge.lsn import LSN
from bridge.slotstate import StateTopic
from bridge.snapshot import external, modes, notify
from bridge.snapshot.incremental import IncrementalSnapshotter, Routes, open_source
from bridge.snapshot.initial import InitialSnapshot, fence
from bridge.snapshot.notify import Notifier
from bridge.snapshot.progress import SnapshotProgress
from bridge.snapshot.runstate import KafkaRunStore
from bridge.snapshot.signals import KafkaSignals
from bridge.snapshot.store import (
    DONE,
    EXTERNAL,
    INITIAL,
    PENDING,
    RUNNING,
    ProgressStore,
    is_private,
)
from bridge.source import libpq, slots

log = logging.getLogger("bridge.snapshot")


class SnapshotManager:
    def __init__(self, cfg: Config, state: StateTopic, notifier: Notifier | None = None) -> None:
        self.cfg = cfg
        src, snap = cfg.source, cfg.snapshot
        self.notifier = notifier  # snapshot.notification_topic
        self._state = state  # read-only runs are kept there
        # read by the metrics endpoint
        self.progress = SnapshotProgress(
            on_table=None if notifier is None else notifier.initial_table
        )
        self.store = ProgressStore(src.conninfo(), snap.progress_schema, src.slot_name)
        self._schema = snap.progress_schema
        self._slot: slots.Slot | None = None
        self._action: str | None = None
        self._incremental: IncrementalSnapshotter | None = None
        self._runs: KafkaRunStore | None = None  # snapshot.read_only
        self._pending: modes.TemporaryExport | None = None  # read after the stream reaches it
        self._hold: external.SnapshotHold | None = None  # snapshot.mode external

    def is_private(self, relation: Relation) -> bool:
        """The bridge's own progress tables: never published to Kafka."""
        # the namespace test first: it settles every other table without a call
        schema = self._schema
        return relation.namespace == schema and is_private(schema, schema, relation.name)

    def ensure_slot(self, rc: libpq.ReplicationConnection) -> slots.Slot:
        src, mode = self.cfg.source, self.cfg.snapshot.mode
        if modes.wants_snapshot(mode):
            status = modes.slot_status(rc, src.slot_name)
            if modes.needs_new_slot(mode, status):
                log.warning(
                    "slot %s lost its WAL (wal_status 'lost'): dropping and creating it again, "
                    "then snapshotting (snapshot.mode when_needed)",
                    src.slot_name,
                )
                slots.drop_slot(rc, src.slot_name)
                status = modes.SlotStatus(False, False)
            if not status.exists and src.create_slot:
                self.store.begin(INITIAL, INITIAL, PENDING, {"mode": mode})
        slot = slots.ensure_slot(
            rc,
            src.slot_name,
            src.plugin,
            create=src.create_slot,
            two_phase=src.two_phase,
            failover=src.failover_slot,
        )
        run = self.store.run(INITIAL) if modes.wants_snapshot(mode) else None
        self._action = modes.decide(mode, slot.created, None if run is None else run.state)
        self._slot = slot
        return slot

    def run_initial(self, should_stop: Callable[[], bool]) -> bool:
        """Do the snapshot `ensure_slot` decided on; True when the pipeline should stream.

        A fresh slot's own export is read here, before streaming starts. Any other
        snapshot (a resume, `always`) is taken here from a temporary export at L but,
        when a stream follows, read only later by `read_pending`: first the stream
        delivers every transaction committed before L (see `modes`), so in exactly-once
        mode the snapshot's transactional id is fenced here, before it streams
        (`initial.fence`).
        """
        mode, slot = self.cfg.snapshot.mode, self._slot
        assert slot is not None, "ensure_slot first"
        action, self._action = self._action, None
        if action is None:
            if not modes.streams_after(mode):
                log.info("snapshot.mode initial_only: no snapshot to do, not streaming")
            return modes.streams_after(mode)
        if mode == EXTERNAL:
            self._hold_for_load(action, slot)
            return True
        if action == modes.FRESH:
            assert slot.snapshot_name is not None and slot.consistent_point is not None
            name, lsn = slot.snapshot_name, slot.consistent_point
            self.store.set_state(INITIAL, RUNNING, lsn)
            log.info("starting snapshot for slot %s at %s", slot.name, lsn)
            done = self._read(name, lsn, _nothing, should_stop, _nothing)
            return done and modes.streams_after(mode)
        export = modes.TemporaryExport(self.cfg.source.conninfo(), slot.name)
        if action == modes.AGAIN:
            self.store.begin(INITIAL, INITIAL, RUNNING, {"mode": mode})
            self.store.set_state(INITIAL, RUNNING, export.lsn)
        if not modes.streams_after(mode):  # initial_only: no stream to put first
            log.info("%s snapshot for slot %s at %s", _VERB[action], slot.name, export.lsn)
            try:
                self._read(export.snapshot_name, export.lsn, export.close, should_stop, _nothing)
            finally:
                export.close()
            return False
        log.info(
            "%s snapshot for slot %s at %s, once the stream has delivered the changes "
            "committed before it (from %s)",
            _VERB[action],
            slot.name,
            export.lsn,
            slot.confirmed_flush,
        )
        self._pending = export
        # The stream goes first: fence an old active's snapshot records before it does.
        fence(self.cfg)
        return True

    def _hold_for_load(self, action: str, slot: slots.Slot) -> None:
        """snapshot.mode external: hold the fresh slot's snapshot, or after a restart a new
        one from a temporary slot, for the load job (`external`); the stream starts now."""
        if action == modes.FRESH:
            assert slot.snapshot_name is not None and slot.consistent_point is not None
            self._hold = external.hold_snapshot(
                self.cfg, self.store, slot.snapshot_name, slot.consistent_point
            )
            return
        export = modes.TemporaryExport(self.cfg.source.conninfo(), slot.name)
        try:
            log.warning(
                "the external load of slot %s was not done when the bridge stopped: its "
                "snapshot is gone, a new one is held at %s (run the load again)",
                slot.name,
                export.lsn,
            )
            self._hold = external.hold_snapshot(
                self.cfg, self.store, export.snapshot_name, export.lsn
            )
        finally:
            export.close()

    def pending_lsn(self) -> int | None:
        """L of the snapshot `run_initial` left to `read_pending`: the stream delivers the
        transactions whose commit record starts below L, then the snapshot is read."""
        return None if self._pending is None else self._pending.lsn

    def read_pending(
        self, flushed: int, should_stop: Callable[[], bool], keep_alive: Callable[[], None]
    ) -> bool:
        """Read the pending snapshot; True once it is complete, False if stopped first.

        `flushed` is the position the stream reported after delivering every
        transaction committed before the snapshot's LSN. No row is read before the
        slot shows it as confirmed: a crash from then on restarts the stream past
        those transactions, so none of them comes again after these rows (a status
        update still in the socket when the process dies may never reach the server).
        `keep_alive` answers the paused stream's keepalives meanwhile.
        """
        export, self._pending = self._pending, None
        assert export is not None, "run_initial left no snapshot pending"
        try:
            if not self._await_confirmed(flushed, should_stop, keep_alive):
                return False
            log.info("the stream reached %s: reading the snapshot", export.lsn)
            return self._read(
                export.snapshot_name, export.lsn, export.close, should_stop, keep_alive
            )
        finally:
            export.close()

    def _await_confirmed(
        self, lsn: int, should_stop: Callable[[], bool], keep_alive: Callable[[], None]
    ) -> bool:
        name = self.cfg.source.slot_name
        conn = libpq.connect(self.cfg.source.conninfo(), replication=False)
        try:
            deadline = time.monotonic() + _CONFIRM_TIMEOUT_S
            while True:
                info = slots.slot_info(conn, name)
                confirmed = LSN(0) if info is None else info.confirmed_flush
                if confirmed >= lsn:
                    return True
                if should_stop():
                    return False
                if time.monotonic() > deadline:
                    raise SourceError(
                        f"slot {name} still shows {confirmed} as confirmed, "
                        f"{_CONFIRM_TIMEOUT_S:.0f}s after the bridge reported {LSN(lsn)}",
                        hint="check PostgreSQL's log for this slot's walsender; restart the "
                        "bridge: the snapshot resumes",
                    )
                keep_alive()
                time.sleep(_CONFIRM_POLL_S)
        finally:
            conn.close()

    def _read(
        self,
        name: str,
        lsn: int,
        release: Callable[[], None],
        should_stop: Callable[[], bool],
        keep_alive: Callable[[], None],
    ) -> bool:
        """Read the snapshot `name` at `lsn`; True once complete and recorded as done."""
        self._notify(notify.STARTED)
        done = False
        try:
            done = InitialSnapshot(
                self.cfg,
                self.store,
                self.progress,
                snapshot_name=name,
                lsn=lsn,
                release=release,
                should_stop=should_stop,
                keep_alive=keep_alive,
            ).run()
        finally:
            if not done:
                self._notify(notify.ABORTED)
        if not done:
            log.info("snapshot stopped before its end: the next start resumes it")
            return False
        self.store.set_state(INITIAL, DONE)
        log.info("snapshot complete")
        self._notify(notify.COMPLETED)
        return True

    def _notify(self, kind: str) -> None:
        if self.notifier is not None:
            self.notifier.send(notify.INITIAL, kind, {})

    def incremental(
        self,
        encoders: EncoderCache,
        relation_of: Callable[[int], Relation | None],
        routes: Routes,
    ) -> IncrementalSnapshotter | None:
        """The streaming hooks, when a signal table or snapshot.read_only is configured,
        with their collaborators opened here: the chunk queries' connection (checked), the
        run store (read-only runs in the state topic, the others in the progress tables),
        the Kafka signal topic."""
        snap = self.cfg.snapshot
        if snap.signal_table is None and not snap.read_only:
            return None
        if snap.read_only:
            self._runs = KafkaRunStore(self.cfg, self._state)
        chunks = open_source(self.cfg)
        try:
            signals = None if snap.signal_kafka_topic is None else KafkaSignals(self.cfg)
        except BaseException:
            chunks.close()
            raise
        self._incremental = IncrementalSnapshotter(
            self.cfg,
            chunks,
            routes,
            self._runs or self.store,
            self.progress,
            encoders,
            relation_of,
            signals,
            self.notifier,
        )
        return self._incremental

    def close(self) -> None:
        if self._hold is not None:
            self._hold.close()
        if self._pending is not None:
            self._pending.close()
        if self._incremental is not None:
            self._incremental.close()
        self.store.close()


_VERB: Final = {modes.RESUME: "resuming", modes.AGAIN: "starting (always)"}
# How long the slot may take to show a position the bridge reported (it reads the status
# update within milliseconds), and how often to look.
_CONFIRM_TIMEOUT_S: Final = 60.0
_CONFIRM_POLL_S: Final = 0.05


def _nothing() -> None:
    return None
