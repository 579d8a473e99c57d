"""What the pipeline calls: the slot with its snapshot decision, the initial snapshot, the hooks.

Order matters for the seam. `ensure_slot` runs where the pipeline used to call
`slots.ensure_slot`; a pending run is recorded before a slot is created, so a crash
between creating the slot and reading it still finds a snapshot to do. Nothing
else may touch the replication connection until `run_initial` has imported the
slot's exported snapshot into every reader; START_REPLICATION comes after it, so the
slot's confirmed position stays at the snapshot's start until the snapshot is done.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Final

from bridge.config import Config
from bridge.decode.messages import Relation
from bridge.encoders import EncoderCache
from bridge.snapshot import modes
from bridge.snapshot.incremental import IncrementalSnapshotter
from bridge.snapshot.initial import InitialSnapshot
from bridge.snapshot.progress import SnapshotProgress
from bridge.snapshot.store import DONE, INITIAL, PENDING, RUNNING, ProgressStore, is_private
from bridge.source import libpq, slots

log = logging.getLogger("bridge.snapshot")


class SnapshotManager:
    def __init__(self, cfg: Config) -> None:
        self.cfg = cfg
        src, snap = cfg.source, cfg.snapshot
        self.progress = SnapshotProgress()  # read by the metrics endpoint
        self.store = ProgressStore(src.conninfo(), snap.progress_schema, src.slot_name)
        self._schema = snap.progress_schema
        self._slot: slots.Slot | None = None
        self._action: str | None = None
        self._incremental: IncrementalSnapshotter | None = None

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
        """Do the snapshot `ensure_slot` decided on; True when the pipeline should stream."""
        mode, slot = self.cfg.snapshot.mode, self._slot
        assert slot is not None, "ensure_slot first"
        action, self._action = self._action, None
        if action is None:
            if not modes.streams_after(mode):
                log.info("snapshot.mode initial_only: no snapshot to do, not streaming")
            return modes.streams_after(mode)
        export: modes.TemporaryExport | None = None
        if action == modes.FRESH:
            assert slot.snapshot_name is not None and slot.consistent_point is not None
            name, lsn = slot.snapshot_name, slot.consistent_point
            self.store.set_state(INITIAL, RUNNING, lsn)
        else:
            export = modes.TemporaryExport(self.cfg.source.conninfo(), slot.name)
            name, lsn = export.snapshot_name, export.lsn
            if action == modes.AGAIN:
                self.store.begin(INITIAL, INITIAL, RUNNING, {"mode": mode})
                self.store.set_state(INITIAL, RUNNING, lsn)
        log.info("%s snapshot for slot %s at %s", _VERB[action], slot.name, lsn)
        try:
            done = InitialSnapshot(
                self.cfg,
                self.store,
                self.progress,
                snapshot_name=name,
                lsn=lsn,
                release=export.close if export is not None else _nothing,
                should_stop=should_stop,
            ).run()
        finally:
            if export is not None:
                export.close()
        if not done:
            log.info("snapshot stopped before its end: the next start resumes it")
            return False
        self.store.set_state(INITIAL, DONE)
        log.info("snapshot complete")
        return modes.streams_after(mode)

    def incremental(
        self, encoders: EncoderCache, relation_of: Callable[[int], Relation | None]
    ) -> IncrementalSnapshotter | None:
        """The streaming hooks, when a signal table is configured."""
        if self.cfg.snapshot.signal_table is None:
            return None
        self._incremental = IncrementalSnapshotter(
            self.cfg, self.store, self.progress, encoders, relation_of
        )
        return self._incremental

    def close(self) -> None:
        if self._incremental is not None:
            self._incremental.close()
        self.store.close()


_VERB: Final = {modes.FRESH: "starting", modes.RESUME: "resuming", modes.AGAIN: "starting (always)"}


def _nothing() -> None:
    return None
