"""Incremental snapshot runs kept in Kafka, for a source the bridge may not write to
(`snapshot.read_only`).

The runs of one slot are one record of the state topic (`kafka.state_topic`, compacted,
the one holding the slot's position), key `<slot>.incremental-snapshots`, value JSON
`{"runs": [{"run_id", "kind", "state", "detail"}, ...]}` oldest first: the same fields
as `ProgressStore`'s `snapshot_run` rows. The whole list is written on every change and
each write waits for Kafka's acknowledgement, so what the snapshotter stores is stored
when the call returns (a run's position is written once per chunk, after the chunk's
records were delivered). The newest `_DONE_KEPT` finished runs stay listed, so a signal
read again after a restart is recognised as done.
"""

from __future__ import annotations

import json
from typing import Any, Final

from confluent_kafka import KafkaError, Message
from confluent_kafka import Producer as KafkaProducer

from bridge.config import Config
from bridge.errors import DeliveryError
from bridge.kafka.eos import ensure_offsets_topic, read_last_value
from bridge.kafka.producer import kafka_client_config
from bridge.lsn import LSN
from bridge.slotstate import state_topic
from bridge.snapshot.store import DONE, Run

_DONE_KEPT: Final = 100


class KafkaRunStore:
    """`store.RunStore` in the state topic; one instance per bridge, on one thread."""

    def __init__(self, cfg: Config) -> None:
        self.topic = state_topic(cfg)
        self._key = f"{cfg.source.slot_name}.incremental-snapshots".encode()
        self._timeout = cfg.kafka.request_timeout_s * 3
        client = kafka_client_config(cfg.kafka)
        ensure_offsets_topic(client, self.topic, self._timeout, what="state topic")
        raw = read_last_value(client, self.topic, self._key, self._timeout)
        self._runs: dict[str, Run] = {}
        for entry in json.loads(raw)["runs"] if raw else []:
            run = Run(entry["run_id"], entry["kind"], entry["state"], None, entry["detail"])
            self._runs[run.run_id] = run
        self._producer = KafkaProducer(
            {**client, "enable.idempotence": True, "acks": "all", "linger.ms": 0}
        )

    def close(self) -> None:
        self._producer.flush(self._timeout)

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
        failure: list[str] = []

        def delivered(err: KafkaError | None, _msg: Message) -> None:
            if err is not None:
                failure.append(err.str())

        value = json.dumps({"runs": runs}).encode()
        self._producer.produce(self.topic, value, self._key, on_delivery=delivered)
        if self._producer.flush(self._timeout) or failure:
            reason = failure[0] if failure else f"no acknowledgement in {self._timeout:.0f}s"
            raise DeliveryError(
                f"could not record the incremental snapshot runs in {self.topic!r}: {reason}",
                hint="check that the bridge may write to the state topic (kafka.state_topic); "
                "the snapshot resumes from its last recorded chunk on restart",
            )
