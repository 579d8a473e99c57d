"""A topic read as verify reads it: every partition from its start (or where an earlier
read stopped) to the end offset it has now, committed records only, merged by commit LSN.

Partitions are read side by side, merged by commit LSN, so the old key of a primary-key
change is folded before the new key's create needs its values. `bridge.verify.run` folds
a table's topic up to the verification point, `bridge.verify.repair` reads on from there
(what changed meanwhile), `bridge.verify.distributed` takes the end offsets it pins.
"""

from __future__ import annotations

import heapq
import time
import uuid
from collections.abc import Iterator
from typing import Any

from confluent_kafka import Consumer, KafkaException, TopicPartition

from bridge.config import Config
from bridge.errors import VerifyError
from bridge.verify.state import Decoder, TopicState, commit_lsn

_BATCH = 500


def _partition_records(
    cfg: Config, topic: str, partition: int, low: int, high: int, deadline: float
) -> Iterator[tuple[int, Any]]:
    """(offset, message) of one partition from `low` to `high` (exclusive)."""
    consumer = Consumer(
        {
            **cfg.kafka.client_config(),
            "group.id": f"bridge-verify-{uuid.uuid4().hex[:12]}",
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
            "enable.partition.eof": False,
        }
    )
    try:
        tp = TopicPartition(topic, partition, low)
        consumer.assign([tp])
        while True:
            got = consumer.consume(_BATCH, 1.0)
            for msg in got:
                if msg.error() is not None:
                    raise VerifyError(
                        f"reading {topic} partition {partition}: {msg.error()}",
                        hint="check Kafka and the verify role's READ permission on the topic",
                    )
                offset = msg.offset()
                assert offset is not None  # a consumed message has one
                if offset >= high:
                    return
                yield offset, msg
            if not got:
                position = consumer.position([tp])[0].offset
                if position >= high:
                    return
                if time.monotonic() > deadline:
                    raise VerifyError(
                        f"reading {topic} partition {partition} stopped at offset {position} "
                        f"before its end {high}",
                        hint="an open Kafka transaction holds read_committed readers back; "
                        "retry, or raise --timeout",
                    )
    finally:
        consumer.close()


def topic_offsets(cfg: Config, topic: str) -> dict[int, tuple[int, int]]:
    """Partition -> (first offset, end offset) now; empty for a topic never produced to."""
    probe = Consumer({**cfg.kafka.client_config(), "group.id": "bridge-verify"})
    try:
        meta = probe.list_topics(topic, timeout=30).topics.get(topic)
        if meta is None or meta.error is not None:
            return {}
        return {
            p: probe.get_watermark_offsets(TopicPartition(topic, p), timeout=30, cached=False)
            for p in sorted(meta.partitions)
        }
    except KafkaException as exc:
        raise VerifyError(f"Kafka metadata for {topic}: {exc}", hint="check Kafka") from None
    finally:
        probe.close()


def read_topic(
    cfg: Config,
    topic: str,
    state: TopicState,
    timeout: float,
    start: dict[int, int] | None = None,
) -> dict[int, int]:
    """Fold every record of `topic` present now, from `start` (partition -> offset) or the
    beginning (see the module docstring); returns the end offsets read up to."""
    ranges = topic_offsets(cfg, topic)
    deadline = time.monotonic() + timeout
    streams = []
    for partition, (low, high) in ranges.items():
        first = max(low, (start or {}).get(partition, low))
        if high > first:
            records = _partition_records(cfg, topic, partition, first, high, deadline)
            streams.append(_with_lsn(state.decoder, topic, records))
    for _, _, where, msg, env, row in heapq.merge(*streams, key=lambda t: t[0]):
        state.fold(where, msg.partition(), msg.key(), env, msg.headers(), row)
    return {p: high for p, (_, high) in ranges.items()}


def _with_lsn(
    decoder: Decoder, topic: str, records: Iterator[tuple[int, Any]]
) -> Iterator[tuple[int, int, str, Any, dict[str, Any] | None, bytes | None]]:
    """Decoded envelopes with their commit LSN (a tombstone takes the previous one) and
    their row's body (`Decoder.envelope_row`)."""
    lsn = 0
    for offset, msg in records:
        where = f"topic {topic} partition {msg.partition()} offset {offset}"
        value = msg.value()
        env, row = (None, None) if value is None else decoder.envelope_row(value, where)
        if env is not None:
            lsn = commit_lsn(env)
        yield lsn, offset, where, msg, env, row
