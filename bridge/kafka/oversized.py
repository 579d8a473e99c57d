"""Records too large for their topic, and the dead-letter topic, which takes the changes
(or records) of a table whose trouble its policy tolerates (`pipeline.on_error`).

A record's size is judged before producing, in the pipeline thread, against the smallest
of the producer's `message.max.bytes` and the topic's `max.message.bytes` (fetched once
per topic). Sizes are uncompressed, as librdkafka checks them: a row is judged the same
way whatever else shares its batch. Too large is a `RecordTooLargeError`, one of a table's
troubles like a value it cannot encode: the pipeline stops on it, or (dlq) replaces the
record by a small JSON record on the dead-letter topic, produced under the same
transaction handle, so the slot advances past it only once that record is delivered, or
(skip) leaves it out, counted.
"""

from __future__ import annotations

import base64
import io
import json
import logging
import time
from collections.abc import Callable, Iterable, Mapping, MutableMapping
from typing import Any, Final

import fastavro
from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource, ResourceType

from bridge.decode.messages import KIND_TEXT, KIND_UNCHANGED, Relation, TupleData
from bridge.encode.records import TxSource
from bridge.errors import BridgeError, DeliveryError, RecordTooLargeError
from bridge.events.model import Change
from bridge.lsn import LSN
from bridge.record import KafkaRecord

log: Final = logging.getLogger("bridge.oversized")

# A lone record's batch header (61 bytes) plus its own varint framing, rounded up.
RECORD_OVERHEAD: Final = 128
CLIENT_DEFAULT_MAX: Final = 1_000_000  # librdkafka's message.max.bytes default
_KEY_TEXT_MAX: Final = 200


class TopicLimits:
    """The largest key + value each topic accepts, from the broker once per topic.

    A topic not created yet will get the broker's default, so that is used instead. If
    neither can be read (ACLs), only the producer's own limit applies, with a warning:
    the delivery callback then still stops the bridge with an error naming the table.
    No answer at all (the brokers down) is a DeliveryError: a limit guessed during an
    outage would stay for the whole run.
    """

    def __init__(
        self,
        client_config: Mapping[str, Any],
        producer_max: int,
        timeout_s: float,
        admin_factory: Callable[[dict[str, Any]], Any] = AdminClient,
    ) -> None:
        self._client_config = dict(client_config)
        self._producer_max = producer_max
        self._timeout = timeout_s
        self._admin_factory = admin_factory
        self._admin: Any = None
        self._limits: dict[str, int] = {}
        self._broker_max: int | None = None

    def get(self, topic: str) -> int:
        limit = self._limits.get(topic)
        if limit is None:
            limit = min(self._producer_max, self._fetch(topic)) - RECORD_OVERHEAD
            self._limits[topic] = limit
        return limit

    def _fetch(self, topic: str) -> int:
        if self._admin is None:
            self._admin = self._admin_factory(self._client_config)
        try:
            return self._describe(ResourceType.TOPIC, topic, "max.message.bytes")
        except KafkaException as exc:
            if exc.args[0].code() != KafkaError.UNKNOWN_TOPIC_OR_PART:
                return self._unknown(topic, exc.args[0].str())
        try:
            if self._broker_max is None:
                brokers = self._admin.list_topics(timeout=self._timeout).brokers
                broker = str(min(brokers))
                self._broker_max = self._describe(ResourceType.BROKER, broker, "message.max.bytes")
            return self._broker_max
        except (KafkaException, ValueError) as exc:
            cause = exc.args[0].str() if isinstance(exc, KafkaException) else str(exc)
            return self._unknown(topic, cause)

    def _describe(self, kind: ResourceType, name: str, entry: str) -> int:
        futures = self._admin.describe_configs(
            [ConfigResource(kind, name)], request_timeout=self._timeout
        )
        (future,) = futures.values()
        try:
            return int(future.result(timeout=self._timeout)[entry].value)
        except TimeoutError:  # the future's own timeout: no broker answered in time
            raise DeliveryError(
                f"Kafka did not answer within {self._timeout:g} s when asked for {entry} of "
                f"{kind.name.lower()} {name!r} (check that the brokers are up and reachable; "
                "the bridge resumes from the last acknowledged LSN on restart)"
            ) from None

    def _unknown(self, topic: str, cause: str) -> int:
        log.warning(
            "cannot read max.message.bytes of topic %r (%s); checking rows against "
            "the producer's message.max.bytes only",
            topic,
            cause,
        )
        return self._producer_max


def producer_max_bytes(producer_settings: Mapping[str, Any]) -> int:
    """The client-side limit librdkafka enforces at produce()."""
    return int(producer_settings.get("message.max.bytes", CLIENT_DEFAULT_MAX))


def key_text(key: bytes | None, key_schema: Mapping[str, Any] | None) -> str:
    """The key as its Avro record when it decodes, else hex; truncated for log lines."""
    if key is None:
        return "<no key>"
    text = key.hex()
    if key_schema is not None and len(key) > 5:
        try:
            parsed = fastavro.parse_schema(dict(key_schema))
            text = repr(fastavro.schemaless_reader(io.BytesIO(key[5:]), parsed, None))
        except Exception:  # a key that will not decode is shown as hex
            text = key.hex()
    return text if len(text) <= _KEY_TEXT_MAX else text[: _KEY_TEXT_MAX - 3] + "..."


class OversizedPolicy:
    """Records over their topic's limit, and the dead-letter records of a table's troubles
    (`pipeline.on_error`, `pipeline.oversized`: the pipeline decides which table stops).

    `tables` (topic -> "schema.table") is shared with the ack tracker, so a size failure
    that still reaches a delivery callback names the table too.
    """

    def __init__(
        self,
        dead_letter_topic: str,
        limits: TopicLimits,
        tables: MutableMapping[str, str],
    ) -> None:
        self.dead_letter_topic = dead_letter_topic
        self._limits = limits
        self._tables = tables
        self.diverted = 0  # records sent to the dead-letter topic

    def limit(self, topic: str, relation: Relation) -> int:
        """Per change, not per record: one dict lookup on the hot path."""
        if topic not in self._tables:
            self._tables[topic] = f"{relation.namespace}.{relation.name}"
        return self._limits.get(topic)

    def too_large(
        self,
        record: KafkaRecord,
        relation: Relation,
        key_schema: Mapping[str, Any] | None,
        source: TxSource,
    ) -> RecordTooLargeError:
        """The error of `record`, a record of `relation` over its topic's limit: raised
        by a table that stops on it, the dead letter's `error` otherwise."""
        limit = self._limits.get(record.topic) + RECORD_OVERHEAD
        return RecordTooLargeError(
            f"a row of table {relation.namespace}.{relation.name} with key "
            f"{key_text(record.key, key_schema)} is {record.size()} bytes, over the "
            f"{limit}-byte record limit of topic {record.topic!r} (commit LSN "
            f"{LSN(source.base['commit_lsn'])})",
            hint="raise the topic's max.message.bytes (and kafka.producer "
            "message.max.bytes), or set pipeline.oversized: dead_letter (or the table's "
            f"pipeline.on_error_tables entry: dlq) to send such rows to "
            f"{self.dead_letter_topic!r}; nothing from this transaction on was "
            "acknowledged to PostgreSQL",
        )

    def park(
        self,
        relation: Relation,
        change: Change,
        error: BridgeError,
        source: TxSource,
        record: KafkaRecord | None = None,
        key_schema: Mapping[str, Any] | None = None,
    ) -> KafkaRecord:
        """The one way a dead letter is made: JSON on the dead-letter topic, counted, in
        place of a change of `relation` the bridge could not encode or register a schema
        for, or of its `record` over the topic's limit (`RecordTooLargeError`).

        Every letter holds the change's coordinates and the error. One of a change holds
        the change's values as PostgreSQL sent them (text as text, binary as base64); one
        of an oversized record holds its key (Kafka's key, base64, and as text), size and
        limit instead of the row (which would not fit either), and keeps the record's key
        and headers (a primary-key change's link to the other key), as Kafka Connect's
        dead-letter queue keeps a record's headers."""
        letter: dict[str, Any] = {
            "topic": None,
            "partition": None,  # decided before producing: never assigned one
            "table": f"{relation.namespace}.{relation.name}",
            "op": change.op,
            "reason": "change the bridge cannot encode or register a schema for",
            "error": error.message,  # its hint is for a stop
            "error_type": type(error).__name__,
            "lsn": change.lsn,
            "commit_lsn": source.base["commit_lsn"],
            "txId": source.base["txId"],
        }
        if record is None:
            names = [column.name for column in relation.columns]
            letter["before"] = _raw_row(names, change.old)
            letter["after"] = _raw_row(names, change.new)
            key, headers = None, None
        else:
            key, headers = record.key, record.headers
            letter.update(
                topic=record.topic,
                reason="record larger than the topic's max.message.bytes or the producer's "
                "message.max.bytes",
                key=None if key is None else base64.b64encode(key).decode("ascii"),
                key_text=key_text(key, key_schema),
                size=record.size(),
                limit=self._limits.get(record.topic) + RECORD_OVERHEAD,
            )
        self.diverted += 1
        return KafkaRecord(self.dead_letter_topic, key, json.dumps(letter).encode(), headers)


def _raw_row(names: list[str], row: TupleData | None) -> dict[str, Any] | None:
    """A row's values as sent: text decoded (invalid UTF-8 as base64), binary as base64,
    NULL as None, an unchanged TOASTed value as the marker below."""
    if row is None:
        return None
    out: dict[str, Any] = {}
    for name, kind, value in zip(names, row.kinds, row.values, strict=False):
        if kind == KIND_UNCHANGED:
            out[name] = {"unchanged_toast": True}
        elif value is None:
            out[name] = None
        elif kind == KIND_TEXT:
            try:
                out[name] = value.decode("utf-8")
            except UnicodeDecodeError:
                out[name] = {"base64": base64.b64encode(value).decode("ascii")}
        else:
            out[name] = {"base64": base64.b64encode(value).decode("ascii")}
    return out


# what identifies a dead letter across a transaction PostgreSQL sends again: its table,
# the change's LSN, its commit LSN and the error (which names an oversized record's key)
LetterId = tuple[str, int, int, str]


def letter_id(table: str, lsn: int, commit_lsn: int, error: str) -> LetterId:
    return (table, lsn, commit_lsn, error)


def parse_letter(value: bytes | None) -> dict[str, Any] | None:
    """A dead letter (`OversizedPolicy.park`) from its record's value, its `commit_lsn`
    filled in for a letter written before that field existed (an oversized row's: its
    `lsn` was the commit's); None for a record that is no letter of the bridge's. What the
    bridge's start (`tally`) and `bridge verify` (`bridge.verify.deadletters`) read."""
    try:
        letter = json.loads(value or b"")
    except ValueError:
        return None
    if not (
        isinstance(letter, dict)
        and isinstance(letter.get("table"), str)
        and isinstance(letter.get("lsn"), int)
    ):
        return None
    letter.setdefault("commit_lsn", letter["lsn"])
    return letter if isinstance(letter["commit_lsn"], int) else None


def tally(values: Iterable[bytes | None], start_lsn: int) -> tuple[dict[str, int], set[LetterId]]:
    """The dead letters among `values`, by table, each counted once (a transaction sent
    again after a crash wrote its letters twice), and the ids of those whose transaction
    the slot has not confirmed (commit LSN at or past `start_lsn`, where it resumes):
    PostgreSQL sends them again, so the pipeline must not count them a second time."""
    seen: set[LetterId] = set()
    counts: dict[str, int] = {}
    pending: set[LetterId] = set()
    for value in values:
        letter = parse_letter(value)
        if letter is None:
            continue
        table, commit = letter["table"], letter["commit_lsn"]
        ident = letter_id(table, letter["lsn"], commit, str(letter.get("error", "")))
        if ident in seen:
            continue
        seen.add(ident)
        counts[table] = counts.get(table, 0) + 1
        if commit >= start_lsn:
            pending.add(ident)
    return counts, pending


def letters_so_far(
    client_config: Mapping[str, Any], topic: str, start_lsn: int, timeout: float
) -> tuple[dict[str, int], set[LetterId]]:
    """`tally` of the dead-letter topic as it is at the start (committed records): what
    `bridge_dead_lettered_total` and the degraded tables start from, so a restart does not
    make a degraded table look healthy. Unreadable (no READ permission, the brokers slow
    beyond `timeout`): a warning, and the counts start at zero."""
    consumer = Consumer(
        {
            **client_config,
            "group.id": f"bridge-dead-letters-{time.time_ns()}",
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
            "enable.partition.eof": False,
        }
    )
    try:
        return tally(_values(consumer, topic, time.monotonic() + timeout), start_lsn)
    except (KafkaException, TimeoutError) as exc:
        log.warning(
            "cannot read dead-letter topic %r to its end (%s): dead-letter counts start at zero",
            topic,
            exc,
        )
        return {}, set()
    finally:
        consumer.close()


def _values(consumer: Any, topic: str, deadline: float) -> Iterable[bytes | None]:
    """The values of every partition of `topic` up to its end offset now."""
    ends = _ends(consumer, topic, deadline)
    if ends:
        consumer.assign([TopicPartition(topic, p, 0) for p in ends])
    while ends:
        if time.monotonic() > deadline:
            raise TimeoutError(f"{len(ends)} partition(s) unread")
        for msg in consumer.consume(500, 0.5):
            if msg.error() is None and msg.offset() < ends.get(msg.partition(), 0):
                yield msg.value()
        for tp in consumer.position([TopicPartition(topic, p) for p in list(ends)]):
            if tp.offset >= ends[tp.partition]:
                del ends[tp.partition]


def _ends(consumer: Any, topic: str, deadline: float) -> dict[int, int]:
    """Partition -> end offset of the partitions of `topic` holding records; none for a
    topic never written to (or one this role may not see: nothing to count)."""
    meta = consumer.list_topics(topic, timeout=max(deadline - time.monotonic(), 0.1))
    found = meta.topics.get(topic)
    if found is None or found.error is not None:
        return {}
    ends = {}
    for partition in found.partitions:
        low, high = consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=5)
        if high > low:
            ends[partition] = high
    return ends
