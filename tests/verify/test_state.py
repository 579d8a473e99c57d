"""The key-based fold of `bridge.verify.state` on hand-made records (pure, no servers)."""

from __future__ import annotations

import io
import json
from typing import Any

import fastavro
import pytest

from bridge.errors import SchemaError
from bridge.verify.state import NO_ROW, NULL_DIGEST, Decoder, TopicState, digest, row_digest
from bridge.verify.store import DEFAULT_MEMORY_LIMIT, ROW_DIGEST

KEY = {"type": "record", "name": "Key", "namespace": "t", "fields": [{"name": "id", "type": "int"}]}
ROW = {
    "type": "record",
    "name": "Value",
    "namespace": "t",
    "fields": [
        {"name": "id", "type": ["null", "int"], "default": None},
        {"name": "body", "type": ["null", "string"], "default": None},
        {
            "name": "at",
            "type": ["null", {"type": "long", "logicalType": "timestamp-micros"}],
            "default": None,
        },
    ],
}
ENVELOPE = {
    "type": "record",
    "name": "Envelope",
    "namespace": "t",
    "fields": [
        {"name": "before", "type": ["null", ROW], "default": None},
        {"name": "after", "type": ["null", "t.Value"], "default": None},
        {
            "name": "source",
            "type": {
                "type": "record",
                "name": "Source",
                "fields": [{"name": "lsn", "type": ["null", "long"], "default": None}],
            },
        },
        {"name": "op", "type": "string"},
        {
            "name": "unchanged_fields",
            "type": ["null", {"type": "array", "items": "string"}],
            "default": None,
        },
    ],
}
SCHEMAS: dict[int, dict[str, Any]] = {1: KEY, 2: ENVELOPE}
POINT = 1000


def framed(schema_id: int, datum: Any) -> bytes:
    out = io.BytesIO()
    out.write(b"\0" + schema_id.to_bytes(4, "big"))
    fastavro.schemaless_writer(out, fastavro.parse_schema(SCHEMAS[schema_id]), datum)
    return out.getvalue()


def key(i: int) -> bytes:
    return framed(1, {"id": i})


class Topic:
    def __init__(self, memory_limit: int = DEFAULT_MEMORY_LIMIT) -> None:
        self.decoder = Decoder(KEY, ENVELOPE, lambda i: json.dumps(SCHEMAS[i]))
        self.state = TopicState(self.decoder, POINT, memory_limit=memory_limit)

    def add(
        self,
        op: str,
        i: int | None,
        lsn: int,
        body: str | None = None,
        unchanged: list[str] | None = None,
        old_key: int | None = None,
        at: int | None = None,
    ) -> None:
        row = None if i is None else {"id": i, "body": body, "at": at}
        env = {
            "before": row if op == "d" else None,
            "after": None if op in ("d", "t") else row,
            "source": {"lsn": lsn},
            "op": op,
            "unchanged_fields": unchanged,
        }
        value, row_bytes = self.decoder.envelope_row(framed(2, env), "test")
        headers = None if old_key is None else [("__debezium.oldkey", key(old_key))]
        self.state.fold("test", 0, None if i is None else key(i), value, headers, row_bytes)

    def live(self) -> dict[int, bytes]:
        show = self.decoder.show_key
        return {
            json.loads(show(k))["id"]: s.digests
            for k, s in self.state.keys.items()
            if not s.deleted
        }


def columns(i: int, body: str | None, at: int | None = None) -> bytes:
    return digest(i) + digest(body) + digest(at)


def test_unchanged_toast_keeps_the_previous_value() -> None:
    topic = Topic()
    topic.add("c", 1, 10, "big")
    topic.add("u", 1, 20, None, unchanged=["body"])
    assert topic.live() == {1: columns(1, "big")}


def test_key_change_takes_unchanged_values_from_the_old_key() -> None:
    topic = Topic()
    topic.add("c", 1, 10, "big")
    topic.add("d", 1, 20, None)
    topic.add("c", 2, 20, None, unchanged=["body"], old_key=1)
    assert topic.live() == {2: columns(2, "big")}


def test_unchanged_without_any_earlier_value_is_null() -> None:
    topic = Topic()
    topic.add("c", 2, 20, None, unchanged=["body"], old_key=1)
    assert topic.live() == {2: columns(2, None)}
    assert topic.live()[2][8:16] == NULL_DIGEST


def test_truncate_removes_older_keys_and_drops_older_changes_read_later() -> None:
    topic = Topic()
    topic.add("c", 1, 10, "a")
    topic.add("c", 2, 30, "b")
    topic.add("t", None, 30)
    topic.add("c", 3, 20, "older, from another partition")
    assert topic.live() == {2: columns(2, "b")}


def test_records_at_or_after_the_point_are_left_out() -> None:
    topic = Topic()
    topic.add("c", 1, 10, "a")
    topic.add("u", 1, POINT, "changed at the point")
    topic.add("r", 2, POINT, "read by a snapshot at the point")
    topic.add("r", 3, POINT + 1, "read later")
    assert topic.live() == {1: columns(1, "a"), 2: columns(2, "read by a snapshot at the point")}
    assert topic.state.after_point == 2


@pytest.mark.parametrize("limit", [0, 700])
def test_the_fold_on_disk_keeps_the_same_states(limit: int) -> None:
    """Every rule above with the key store spilled to SQLite (from the first key, or after
    two, the dict then buffering writes): the states of the dict."""
    topics = [Topic(), Topic(limit)]
    for topic in topics:
        topic.add("c", 9, 5, "gone")
        topic.add("t", None, 8)
        topic.add("c", 8, 6, "older than the truncate, read later")
        topic.add("c", 1, 10, "big")
        topic.add("c", 2, 11, "two")
        topic.add("u", 1, 20, None, unchanged=["body"])
        topic.add("d", 1, 21, None)
        topic.add("c", 4, 21, None, unchanged=["body"], old_key=1)
        topic.add("c", 3, 22, "three")
        topic.add("d", 2, 23, None)
        topic.add("u", 3, POINT, "after the point")
    memory, disk = (t.state.keys for t in topics)
    assert disk.on_disk and not memory.on_disk
    assert sorted(disk.items()) == sorted(memory.items())
    assert topics[1].live() == {3: columns(3, "three"), 4: columns(4, "big")}
    show = topics[1].decoder.show_key
    deleted = {json.loads(show(k))["id"] for k, s in disk.items() if s.deleted}
    assert deleted == {1, 2}
    for topic in topics:
        topic.state.close()


def test_logical_types_compare_as_wire_values() -> None:
    """A timestamp beyond datetime's range (the infinity sentinel) still decodes."""
    topic = Topic()
    topic.add("c", 1, 10, "a", at=2**63 - 1)
    assert topic.live() == {1: columns(1, "a", 2**63 - 1)}


def test_a_record_not_in_the_bridge_framing_is_a_typed_error() -> None:
    decoder = Decoder(KEY, ENVELOPE, lambda i: json.dumps(SCHEMAS[i]))
    with pytest.raises(SchemaError, match="not Confluent-framed"):
        decoder.envelope(b"{}", "topic t partition 0 offset 7")


def row_body(i: int, body: str | None) -> bytes:
    out = io.BytesIO()
    fastavro.schemaless_writer(out, fastavro.parse_schema(ROW), {"id": i, "body": body, "at": None})
    return out.getvalue()


def test_row_digest_of_rows_written_whole() -> None:
    """A row sent whole keeps the digest of its Avro body (what PostgreSQL's row encoded
    by the bridge is compared with first); one completed by carried values has none."""
    topic = Topic()
    topic.add("c", 1, 10, "big")
    topic.add("c", 2, 10, "big")
    topic.add("u", 2, 20, None, unchanged=["body"])
    kept = {json.loads(topic.decoder.show_key(k))["id"]: s for k, s in topic.state.keys.items()}
    assert kept[1].columns[:ROW_DIGEST] == row_digest(row_body(1, "big"))
    assert kept[2].columns[:ROW_DIGEST] == NO_ROW
    assert kept[2].digests == columns(2, "big")


def test_no_row_body_from_a_record_with_a_before_image() -> None:
    decoder = Decoder(KEY, ENVELOPE, lambda i: json.dumps(SCHEMAS[i]))
    row = {"id": 1, "body": "b", "at": None}
    env = {"before": row, "after": row, "source": {"lsn": 1}, "op": "u", "unchanged_fields": None}
    decoded, body = decoder.envelope_row(framed(2, env), "test")
    assert body is None and decoded == decoder.envelope(framed(2, env), "test")
    env["before"] = None
    decoded, body = decoder.envelope_row(framed(2, env), "test")
    assert body == row_body(1, "b") and decoded == decoder.envelope(framed(2, env), "test")
