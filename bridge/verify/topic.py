"""A topic read as verify reads it: every partition from its start (or where an earlier
read stopped) to the end offset it has now, committed records only, merged by commit LSN.

Partitions are read side by side, merged by commit LSN, so the old key of a primary-key
change is folded before the new key's create needs its values (a topic of one partition
is folded as it is read, with no merge). `bridge.verify.run` folds a table's topic up to
the verification point, `bridge.verify.repair` reads on from there (what changed
meanwhile), `bridge.verify.distributed` takes the end offsets it pins.

The consumers' fetch queues are bounded by the memory budget (`queue_kib`: an eighth of
`--memory-limit-mb`, at most `_FETCH_QUEUE`, shared by the partitions' consumers), and
so is how many records each keeps fetched ahead of the fold (`_AHEAD` at the full
queue, in proportion below it, at least two batches): librdkafka holds a fetched batch
decompressed and one queued operation per record, in its broker thread's malloc arena,
until the fold has taken them, and glibc keeps that arena's memory for the process
after the read unless it is given back, as `read_topic` does once its consumers are
closed (`bridge.verify.store.give_back`). So is what one fetch brings of a partition
bounded (`_PARTITION_FETCH`, a quarter of librdkafka's 1 MiB default; a batch larger
than it is still fetched whole). The default limit keeps the full queue and 10,000
records ahead: fewer cost the fold CPU per record and wall time waiting for fetches
(bench/README.md, verify). A consumer whose queue is past those bounds fetches again
`_FETCH_BACKOFF_MS` later, not after librdkafka's default second: with a queue that
the fold empties in milliseconds, that second was most of a read's wall time (one
queue's worth of records a second).
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
from bridge.verify.store import give_back

_BATCH: Final = 500
_FETCH_QUEUE: Final = 16 * 1024  # KiB of fetched records queued at most, shared by the consumers
_LEAST_QUEUE: Final = 512  # KiB a consumer may queue, however small the budget
_AHEAD: Final = 10_000  # records a consumer keeps fetched ahead of the fold, at the full queue
_LEAST_AHEAD: Final = 2 * _BATCH  # and however small the queue
_FETCH_MAX: Final = 4 * 1024 * 1024  # bytes of one fetch response
_PARTITION_FETCH: Final = 256 * 1024  # bytes of one partition in a fetch response
_SEEK: Final = 10_000  # records a key fetch reads on rather than seek past
_FETCH_BACKOFF_MS: Final = 10  # wait before fetching again once the queue is past its bounds


def queue_kib(memory_limit: int) -> int:
    """KiB the fetch queues of a topic's read may take under `memory_limit` bytes (module
    docstring)."""
    return max(_LEAST_QUEUE, min(_FETCH_QUEUE, memory_limit // 8 // 1024))


def consumer_config(cfg: Config, partitions: int = 1, queue: int = _FETCH_QUEUE) -> dict[str, Any]:
    """A consumer of committed records only, its fetch queue bounded to its share of
    `queue` KiB and fetched again soon after the fold took from it (module docstring)."""
    return {
        **cfg.kafka.client_config(),
        "group.id": f"bridge-verify-{uuid.uuid4().hex[:12]}",
        "enable.auto.commit": False,
        "isolation.level": "read_committed",
        "enable.partition.eof": False,
        "queued.max.messages.kbytes": max(_LEAST_QUEUE, queue // max(partitions, 1)),
        "queued.min.messages": max(_LEAST_AHEAD, _AHEAD * queue // _FETCH_QUEUE),
        "fetch.max.bytes": _FETCH_MAX,
        "fetch.message.max.bytes": _PARTITION_FETCH,
        "fetch.queue.backoff.ms": _FETCH_BACKOFF_MS,
    }


def _consumer(cfg: Config, partitions: int = 1, queue: int = _FETCH_QUEUE) -> Any:
    """A consumer configured by `consumer_config`."""
    return Consumer(consumer_config(cfg, partitions, queue))


def _partition_records(
    cfg: Config,
    topic: str,
    partition: int,
    low: int,
    high: int,
    deadline: float,
    shared: int,
    queue: int = _FETCH_QUEUE,
) -> Iterator[list[Any]]:
    """The messages of one partition from `low` to `high` (exclusive), a batch at a time;
    `shared`: how many partitions are read side by side, their fetch queues `queue` KiB."""
    consumer = _consumer(cfg, shared, queue)
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
    queue = queue_kib(state.keys.limit)
    if len(todo) == 1:  # folded as read
        ((partition, (first, high)),) = todo.items()
        add = state.add
        for batch in _partition_records(cfg, topic, partition, first, high, deadline, 1, queue):
            for msg in batch:
                add(partition, msg.offset(), msg.key(), msg.value(), msg.headers)
    else:
        streams = [
            _entries(
                state,
                partition,
                _partition_records(cfg, topic, partition, *at, deadline, len(todo), queue),
            )
            for partition, at in todo.items()
        ]
        put = state.put
        for entry in heapq.merge(*streams, key=_lsn):
            put(entry)
    give_back()  # what the consumers held, before the comparison allocates (bridge.verify.store)
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
