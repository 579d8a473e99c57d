"""Signals from a Kafka topic (`snapshot.signal_kafka_topic`), Debezium's Kafka signal
channel: each record keyed by the connector's name (here `kafka.topic_prefix`) holds
`{"id": ..., "type": ..., "data": {...}}`, the same signals the signal table takes.

Read without blocking from the incremental snapshotter's hook (`poll`), in the consumer
group `snapshot.signal_kafka_group`; offsets are committed as records are read, so a
restart reads each signal once more at most (an `execute-snapshot` id already known is
ignored then). A record with another key, or that is not such JSON, is logged and skipped.
"""

from __future__ import annotations

import json
import logging
from typing import Any, Final, NamedTuple

from confluent_kafka import Consumer

from bridge.config import Config
from bridge.kafka.producer import kafka_client_config

log: Final = logging.getLogger("bridge.snapshot")
_BATCH: Final = 100


class Signal(NamedTuple):
    id: str
    type: str
    data: str | None  # JSON text, as the signal table's `data` column


class KafkaSignals:
    def __init__(self, cfg: Config) -> None:
        topic = cfg.snapshot.signal_kafka_topic
        assert topic is not None
        self._name = cfg.kafka.topic_prefix
        self._consumer = Consumer(
            {
                **kafka_client_config(cfg.kafka),
                "group.id": cfg.snapshot.signal_kafka_group,
                "auto.offset.reset": "earliest",
                "enable.auto.commit": True,
            }
        )
        self._consumer.subscribe([topic])

    def poll(self) -> list[Signal]:
        """The signals that arrived since the last call (none waited for)."""
        out = []
        for msg in self._consumer.consume(_BATCH, 0):
            if msg.error():
                log.warning("signal topic: %s", msg.error())
                continue
            signal = self._parse(msg.key(), msg.value(), msg.offset())
            if signal is not None:
                out.append(signal)
        return out

    def _parse(self, key: bytes | None, value: bytes | None, offset: int | None) -> Signal | None:
        if key is None or key.decode(errors="replace") != self._name:
            log.info("signal at offset %d skipped: its key is not %r", offset, self._name)
            return None
        try:
            doc: Any = json.loads(value or b"")
            signal = Signal(str(doc["id"]), str(doc["type"]), json.dumps(doc.get("data") or {}))
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            log.error("signal at offset %d skipped: not {id, type, data} JSON (%s)", offset, exc)
            return None
        return signal

    def close(self) -> None:
        self._consumer.close()
