"""The one outgoing record type: what the size limits count, equality, pickling."""

from __future__ import annotations

import pickle

from bridge.record import ANY_PARTITION, KafkaRecord


def test_size_counts_key_value_and_each_header() -> None:
    assert KafkaRecord("t", None, None).size() == 0
    assert KafkaRecord("t", b"kk", b"vvv").size() == 5
    record = KafkaRecord("t", b"k", None, [("__debezium.oldkey", b"123456")])
    assert record.size() == 1 + len("__debezium.oldkey") + 6


def test_records_compare_and_pickle_by_field() -> None:
    record = KafkaRecord("t", b"k", b"v", [("h", b"x")], 3)
    assert record == KafkaRecord("t", b"k", b"v", [("h", b"x")], 3)
    assert record != KafkaRecord("t", b"k", b"v", [("h", b"x")])
    assert KafkaRecord("t", b"k", b"v").partition == ANY_PARTITION
    assert pickle.loads(pickle.dumps(record)) == record
    assert "topic='t'" in repr(record)
