"""A topic read as verify reads it: every partition from its start (or where an earlier
read stopped) to the end offset it has now, committed records only, merged by commit LSN.

Partitions are read side by side, merged by commit LSN, so the old key of a primary-key
change is folded before the new key's create needs its values (a topic of one partition
is folded as it is read, with no merge). `bridge.verify.run` folds a table's topic up to
the verification point, `bridge.verify.repair` reads on from there (what changed
meanwhile), `bridge.verify.distributed` takes the end offsets it pins.

The consumers' fetch queues are bounded (`_FETCH_QUEUE`, shared by the partitions'
consumers): librdkafka's default lets each consumer queue 64 MiB ahead of a fold that is
slower than the network, which the memory budget (`--memory-limit-mb`) would not see.
So is what one fetch brings of a partition (`_PARTITION_FETCH`): librdkafka holds a
fetched batch decompressed and one queued operation per record until the fold has taken
them, 10 MiB of verify's peak at its default of 1 MiB per partition (bench/README.md,
verify); a quarter of it keeps the fold fed from a broker on the network as well (a
batch larger than it is still fetched whole).
"""

from __future__ import annotations

import heapq
import time
import uuid
from collections.abc import Iterator
from typing import Any, Final

from confluent_kafka import Consumer, KafkaException, TopicPartition

from bridge.config import Config
from bridge.errors import VerifyError
from bridge.verify.state import Entry, TopicState

_BATCH: Final = 500
_FETCH_QUEUE: Final = 16 * 1024  # KiB of fetched records queued, shared by the consumers
_FETCH_MAX: Final = 4 * 1024 * 1024  # bytes of one fetch response
_PARTITION_FETCH: Final = 256 * 1024  # bytes of one partition in a fetch response
_SEEK: Final = 10_000  # records a key fetch reads on rather than seek past


def _consumer(cfg: Config, partitions: int = 1) -> Any:
    """A consumer of committed records only, its fetch queue bounded (module docstring)."""
    return Consumer(
        {
            **cfg.kafka.client_config(),
            "group.id": f"bridge-verify-{uuid.uuid4().hex[:12]}",
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
            "enable.partition.eof": False,
            "queued.max.messages.kbytes": max(1024, _FETCH_QUEUE // max(partitions, 1)),
            "queued.min.messages": 10_000,
            "fetch.max.bytes": _FETCH_MAX,
            "fetch.message.max.bytes": _PARTITION_FETCH,
        }
    )


def _partition_records(
    cfg: Config, topic: str, partition: int, low: int, high: int, deadline: float, shared: int
) -> Iterator[list[Any]]:
    """The messages of one partition from `low` to `high` (exclusive), a batch at a time;
    `shared`: how many partitions are read side by side."""
    consumer = _consumer(cfg, shared)
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
            if got:
                last = got[-1].offset()
                if last >= high - 1:
                    yield [m for m in got if m.offset() < high]
                    return
                yield got
            else:
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
    todo = {}
    for partition, (low, high) in ranges.items():
        first = max(low, (start or {}).get(partition, low))
        if high > first:
            todo[partition] = (first, high)
    state.keys.expect(sum(high - first for first, high in todo.values()))
    if len(todo) == 1:  # folded as read
        ((partition, (first, high)),) = todo.items()
        add = state.add
        for batch in _partition_records(cfg, topic, partition, first, high, deadline, 1):
            for msg in batch:
                add(partition, msg.offset(), msg.key(), msg.value(), msg.headers)
    else:
        streams = [
            _entries(
                state,
                partition,
                _partition_records(cfg, topic, partition, *at, deadline, len(todo)),
            )
            for partition, at in todo.items()
        ]
        put = state.put
        for entry in heapq.merge(*streams, key=_lsn):
            put(entry)
    return {p: high for p, (_, high) in ranges.items()}


def messages(cfg: Config, topic: str, timeout: float) -> Iterator[Any]:
    """Every committed record of `topic` present now, partition after partition, not
    folded (the dead-letter topic, `bridge.verify.deadletters`)."""
    deadline = time.monotonic() + timeout
    for partition, (low, high) in topic_offsets(cfg, topic).items():
        if high > low:
            for batch in _partition_records(cfg, topic, partition, low, high, deadline, 1):
                yield from batch


def _lsn(entry: Entry) -> int:
    return entry.lsn


def _entries(state: TopicState, partition: int, batches: Iterator[list[Any]]) -> Iterator[Entry]:
    """One partition's records as entries, in its order (commit LSNs rise along it)."""
    entry = state.entry
    for batch in batches:
        for msg in batch:
            found = entry(partition, msg.offset(), msg.key(), msg.value(), msg.headers)
            if found is not None:
                yield found


def record_keys(
    cfg: Config, topic: str, positions: list[tuple[int, int]]
) -> dict[tuple[int, int], bytes]:
    """The framed keys of the records at `positions` (partition, offset): each partition
    read on from one position to the next, or sought to it when it is far."""
    out: dict[tuple[int, int], bytes] = {}
    consumer = _consumer(cfg)
    try:
        reading, at = -1, -1  # the partition read and the offset it is at
        for partition, offset in sorted(set(positions)):
            if partition != reading or not at <= offset < at + _SEEK:
                consumer.assign([TopicPartition(topic, partition, offset)])
                reading = partition
            while True:
                msg = consumer.poll(30)
                if msg is None or msg.error() is not None:
                    raise VerifyError(
                        f"cannot read {topic} partition {partition} at offset {offset} "
                        f"({'nothing' if msg is None else msg.error()})",
                        hint="check Kafka, then verify again",
                    )
                found = msg.offset()
                at = found + 1
                if found >= offset:
                    break
            key = msg.key()
            if found != offset or key is None:
                raise VerifyError(
                    f"{topic} partition {partition} has no keyed record at offset {offset}",
                    hint="compaction or retention removed it meanwhile: verify again",
                )
            out[partition, offset] = key
    finally:
        consumer.close()
    return out
