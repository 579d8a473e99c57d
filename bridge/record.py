"""The outgoing Kafka record: the one shape every record has from its encoder to Kafka.

A change's encoder (`bridge.encode.records.ChangeEncoder`), the snapshot readers, the
outbox router, the side topics and the dead-letter path all make `KafkaRecord`s; the
pipeline and the producer (`bridge.kafka.producer`) take them; the Spark initial load
reads the ones a load task makes. A base module, below every layer, because all of them
name it and none of them owns it.

Compiled (setup.py): one is built per produced record. A compiled class with its fields
in a C struct, not a tuple: each field read without an index or an unpacking, and the
last one freed kept for the next (`free_list_len`, as the tuple of three it replaced came
from CPython's tuple free list), so the common one-record change allocates nothing
(bench/README.md, "One record type").
"""

from __future__ import annotations

from typing import Any, Final, final

from mypy_extensions import mypyc_attr

# Kafka record headers, as confluent-kafka's produce() takes them (a list, not a tuple).
Headers = list[tuple[str, bytes]]
ANY_PARTITION: Final = -1  # librdkafka's RD_KAFKA_PARTITION_UA: the partitioner chooses


@final
@mypyc_attr(free_list_len=1)
class KafkaRecord:
    """One record for `topic`: `key` and `value` as they go on the wire (Confluent-framed
    Avro, or the bytes of a JSON side record), `value` None for a tombstone, `key` None for
    a record without a key. `headers` is None except where a record carries some (a
    primary-key change's `__debezium.*key`, an outbox event's, a dead-lettered record's),
    so the common record builds nothing for them. `partition` is ANY_PARTITION unless the
    bridge chose one; the producer's partitioner (murmur2, as Java producers hash keys)
    chooses otherwise.

    Fields are set once, in `__init__`: a record is never changed after it is made (the
    dead-letter path makes a new one), so one may be handed to several readers.
    """

    def __init__(
        self,
        topic: str,
        key: bytes | None,
        value: bytes | None,
        headers: Headers | None = None,
        partition: int = ANY_PARTITION,
    ) -> None:
        self.topic = topic
        self.key = key
        self.value = value
        self.headers = headers
        self.partition = partition

    def size(self) -> int:
        """The record's bytes as the size limits count them (bridge.kafka.oversized): key,
        value, and each header's name and value."""
        key, value, headers = self.key, self.value, self.headers
        size = (0 if key is None else len(key)) + (0 if value is None else len(value))
        if headers is not None:
            for name, data in headers:
                size += len(name) + len(data)
        return size

    def fields(self) -> tuple[str, bytes | None, bytes | None, Headers | None, int]:
        return self.topic, self.key, self.value, self.headers, self.partition

    def __eq__(self, other: object) -> bool:
        return isinstance(other, KafkaRecord) and self.fields() == other.fields()

    def __hash__(self) -> int:
        return hash((self.topic, self.key, self.value, self.partition))

    def __repr__(self) -> str:
        return (
            f"KafkaRecord(topic={self.topic!r}, key={self.key!r}, value={self.value!r}, "
            f"headers={self.headers!r}, partition={self.partition})"
        )

    def __reduce__(self) -> tuple[type[KafkaRecord], tuple[Any, ...]]:
        return KafkaRecord, self.fields()
