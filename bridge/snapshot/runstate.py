"""Incremental snapshot runs kept in Kafka, for a source the bridge may not write to
(`snapshot.read_only`).

The runs of one slot are one record of the state topic (`kafka.state_topic`, compacted,
the one holding the slot's position), key `<slot>.incremental-snapshots`, value JSON
`{"runs": [{"run_id", "kind", "state", "detail"}, ...]}` oldest first: the same fields
as `ProgressStore`'s `snapshot_run` rows. The whole list is written on every change and
each write waits for Kafka's acknowledgement, so what the snapshotter stores is stored
when the call returns (a run's position is written once per chunk, after the chunk's
records were delivered). The writes go through the slot positions' `StateTopic`: in
exactly-once mode each is a Kafka transaction of that topic's fenced transactional id, so
a bridge resumed after another one took over cannot write stale runs over the newer one's.
The newest `_DONE_KEPT` finished runs stay listed, so a signal read again after a restart
is recognised as done.
"""

from __future__ import annotations

import json
from typing import Any, Final

from bridge.config import Config
from bridge.errors import DeliveryError
from bridge.lsn import LSN
from bridge.slotstate import StateTopic
from bridge.snapshot.store import DONE, Run

_DONE_KEPT: Final = 100


class KafkaRunStore:
    """`store.RunStore` in the state topic; one instance per bridge, on one thread."""

    def __init__(self, cfg: Config, state: StateTopic) -> None:
        self.topic = state.topic
        self._state = state
        self._key = f"{cfg.source.slot_name}.incremental-snapshots".encode()
        raw = state.value(self._key)
        self._runs: dict[str, Run] = {}
        for entry in json.loads(raw)["runs"] if raw else []:
            run = Run(entry["run_id"], entry["kind"], entry["state"], None, entry["detail"])
            self._runs[run.run_id] = run

    def run(self, run_id: str) -> Run | None:
        return self._runs.get(run_id)

    def runs(self, kind: str, state: str) -> list[Run]:
        return [r for r in self._runs.values() if r.kind == kind and r.state == state]

    def begin(self, run_id: str, kind: str, state: str, detail: dict[str, Any]) -> None:
        self._runs.pop(run_id, None)  # started afresh: listed as the newest
        self._runs[run_id] = Run(run_id, kind, state, None, detail)
        self._write()

    def set_state(self, run_id: str, state: str, lsn: LSN | None = None) -> None:
        self._runs[run_id] = self._runs[run_id]._replace(state=state)
        done = [r.run_id for r in self._runs.values() if r.state == DONE]
        for old in done[: max(0, len(done) - _DONE_KEPT)]:
            del self._runs[old]
        self._write()

    def set_detail(self, run_id: str, detail: dict[str, Any]) -> None:
        self._runs[run_id] = self._runs[run_id]._replace(detail=detail)
        self._write()

    def _write(self) -> None:
        runs = [
            {"run_id": r.run_id, "kind": r.kind, "state": r.state, "detail": r.detail}
            for r in self._runs.values()
        ]
        failure = self._state.store(self._key, json.dumps({"runs": runs}).encode())
        if failure is not None:
            raise DeliveryError(
                f"could not record the incremental snapshot runs in {self.topic!r}: {failure}",
                hint="check that the bridge may write to the state topic (kafka.state_topic); "
                "the snapshot resumes from its last recorded chunk on restart",
            )
