"""Records beside the table topics, in Debezium's layouts (schemas/*.avsc):

- `<prefix>.transaction`: BEGIN/END records with per-table event counts;
- `<prefix>.message`: logical decoding messages (`pg_logical_emit_message`);
- `__bridge-heartbeat.<prefix>` (`pipeline.heartbeat_topic_prefix`; Debezium's is
  `__debezium-heartbeat`): heartbeat records, one per heartbeat message seen.

Heartbeats are logical decoding messages the bridge writes itself on an interval:
they put WAL into the captured database, so the slot advances even when the
server is busy elsewhere and keepalives alone would lag.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

from bridge.decode.messages import PG_EPOCH_OFFSET_US, LogicalMessage
from bridge.encode.records import framed_writer
from bridge.kafka.registry import Registry, subject_name
from bridge.record import KafkaRecord
from bridge.schema.fixed import load_fixed

HEARTBEAT_PREFIX = "bridge-heartbeat"
log = logging.getLogger("bridge.sidetopics")


class FixedTopic:
    """A topic whose key and value schemas are fixed files, registered on first use."""

    def __init__(self, registry: Registry, topic: str, key_file: str, value_file: str) -> None:
        self.topic = topic
        self._registry = registry
        self._files = (key_file, value_file)
        self._writers: tuple[Callable[[Any], bytes], Callable[[Any], bytes]] | None = None

    def make(self, key: dict[str, Any], value: dict[str, Any]) -> KafkaRecord:
        """The topic's record of `key` and `value` (registers the schemas the first time)."""
        if self._writers is None:
            writers = []
            for is_key, name in zip((True, False), self._files, strict=True):
                schema = load_fixed(name)
                fullname = f"{schema['namespace']}.{schema['name']}"
                subject = subject_name(self._registry.strategy, self.topic, fullname, is_key)
                schema_id = self._registry.register(subject, schema, table=self.topic)
                writers.append(framed_writer(schema, schema_id))
            self._writers = (writers[0], writers[1])
        return KafkaRecord(self.topic, self._writers[0](key), self._writers[1](value))


def tx_id(xid: int | None, commit_lsn: int) -> str:
    return f"{xid}:{commit_lsn}"


class TransactionTopic(FixedTopic):
    def __init__(self, registry: Registry, prefix: str) -> None:
        super().__init__(
            registry, f"{prefix}.transaction", "transaction_key", "transaction_metadata"
        )

    def begin(self, ident: str, commit_ts: int) -> KafkaRecord:
        return self.make(
            {"id": ident},
            {
                "status": "BEGIN",
                "id": ident,
                "event_count": None,
                "data_collections": None,
                "ts_ms": (commit_ts + PG_EPOCH_OFFSET_US) // 1000,
            },
        )

    def end(self, ident: str, commit_ts: int, counts: dict[str, int]) -> KafkaRecord:
        return self.make(
            {"id": ident},
            {
                "status": "END",
                "id": ident,
                "event_count": sum(counts.values()),
                "data_collections": [
                    {"data_collection": table, "event_count": n} for table, n in counts.items()
                ],
                "ts_ms": (commit_ts + PG_EPOCH_OFFSET_US) // 1000,
            },
        )


class MessageTopic(FixedTopic):
    def __init__(self, registry: Registry, prefix: str) -> None:
        super().__init__(registry, f"{prefix}.message", "prefix_key", "message")

    def record(self, msg: LogicalMessage, xid: int | None) -> KafkaRecord:
        return self.make(
            {"prefix": msg.prefix},
            {
                "op": "m",
                "ts_ms": time.time_ns() // 1_000_000,
                "transactional": msg.transactional,
                "lsn": msg.lsn,
                "txId": xid,
                "message": {"prefix": msg.prefix, "content": msg.content},
            },
        )


class Heartbeat(FixedTopic):
    """Writes a heartbeat message every `interval_s`; turns each one seen into a record."""

    def __init__(
        self,
        registry: Registry,
        topic: str,
        prefix: str,
        interval_s: float,
        emit: Callable[[], None],
    ) -> None:
        super().__init__(registry, topic, "heartbeat_key", "heartbeat")
        self._prefix = prefix
        self._interval_s = interval_s
        self._emit = emit
        self._next = time.monotonic()

    def due(self, now: float) -> bool:
        return self._interval_s > 0 and now >= self._next

    def beat(self, now: float) -> None:
        self._next = now + self._interval_s
        self._emit()

    def record(self, lsn: int) -> KafkaRecord:
        return self.make(
            {"serverName": self._prefix}, {"ts_ms": time.time_ns() // 1_000_000, "lsn": lsn}
        )
