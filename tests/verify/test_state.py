"""The key-based fold of `bridge.verify.state` on hand-made records (pure, no servers), each
rule with the states in memory and spilled to hash partitions on disk (a budget of a few
bytes: every partition holds a key or two)."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import fastavro
import pytest

from bridge.errors import SchemaError
from bridge.verify import scan
from bridge.verify.state import Decoder, TopicState, differing_columns

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
# an older version of the envelope: no `at` column yet
OLD_ROW = {**ROW, "fields": ROW["fields"][:2]}
OLD_ENVELOPE = {
    **ENVELOPE,
    "fields": [
        {"name": "before", "type": ["null", OLD_ROW], "default": None},
        *ENVELOPE["fields"][1:],
    ],
}
SCHEMAS: dict[int, dict[str, Any]] = {1: KEY, 2: ENVELOPE, 3: OLD_ENVELOPE}
POINT = 1000
# bytes of the memory budget: never passed; passed by a key or two in every partition
BUDGETS = {"memory": 1 << 30, "disk": 200}


def framed(schema_id: int, datum: Any) -> bytes:
    out = io.BytesIO()
    out.write(b"\0" + schema_id.to_bytes(4, "big"))
    fastavro.schemaless_writer(out, fastavro.parse_schema(SCHEMAS[schema_id]), datum)
    return out.getvalue()


def key(i: int) -> bytes:
    return framed(1, {"id": i})


def row_body(i: int, body: str | None, at: int | None = None) -> bytes:
    out = io.BytesIO()
    fastavro.schemaless_writer(out, fastavro.parse_schema(ROW), {"id": i, "body": body, "at": at})
    return out.getvalue()


def decoder() -> Decoder:
    return Decoder(KEY, ENVELOPE, lambda i: json.dumps(SCHEMAS[i]))


def columns(i: int, body: str | None, at: int | None = None) -> bytes:
    """The column digests of a row as PostgreSQL's side computes them."""
    return decoder().columns(row_body(i, body, at))


class Topic:
    def __init__(self, budget: str = "memory", directory: Path | None = None) -> None:
        self.decoder = decoder()
        self.state = TopicState(
            self.decoder,
            POINT,
            memory_limit=BUDGETS[budget],
            expected=50,
            directory=None if directory is None else str(directory),
        )
        self.offset = 0

    def add(
        self,
        op: str,
        i: int | None,
        lsn: int,
        body: str | int | None = None,
        unchanged: list[str] | None = None,
        old_key: int | None = None,
        at: int | None = None,
        schema: int = 2,
    ) -> None:
        row = None if i is None else {"id": i, "body": body, "at": at}
        if row is not None and schema == 3:
            del row["at"]
        env = {
            "before": row if op == "d" else None,
            "after": None if op in ("d", "t") else row,
            "source": {"lsn": lsn},
            "op": op,
            "unchanged_fields": unchanged,
        }
        headers: list[tuple[str, bytes | None]] | None = (
            None if old_key is None else [("__debezium.oldkey", key(old_key))]
        )
        self.offset += 1
        self.state.fold(0, self.offset, None if i is None else key(i), framed(schema, env), headers)

    def states(self) -> dict[int, bytes]:
        """Every key's state by id (deleted ones too), from memory or partition by partition
        (on disk, once: the partition files are read once)."""
        store = self.state.keys
        found = (
            [kv for states, _ in store.partitioned() for kv in states.items()]
            if store.on_disk
            else list(store.states())
        )
        out = {}
        for ident, state in found:
            body = scan.body_of(ident)
            assert body is not None  # a small integer key is its own identity
            out[json.loads(self.decoder.show_key(body))["id"]] = state
        return out

    def live(self) -> dict[int, bytes]:
        return {i: s[scan.COLUMNS_AT :] for i, s in self.states().items() if scan.live(s)}


@pytest.fixture(params=list(BUDGETS))
def topic(request: pytest.FixtureRequest, tmp_path: Path) -> Topic:
    made = Topic(request.param, tmp_path)
    assert made.state.keys.on_disk == (request.param == "disk")
    return made


def test_unchanged_toast_keeps_the_previous_value(topic: Topic) -> None:
    topic.add("c", 1, 10, "big")
    topic.add("u", 1, 20, None, unchanged=["body"])
    assert topic.live() == {1: columns(1, "big")}


def test_key_change_takes_unchanged_values_from_the_old_key(topic: Topic) -> None:
    topic.add("c", 1, 10, "big")
    topic.add("d", 1, 20, None)
    topic.add("c", 2, 20, None, unchanged=["body"], old_key=1)
    topic.add("u", 2, 30, "changed", at=5)  # the new key's later changes land with it
    topic.add("d", 2, 40, None)
    topic.add("c", 3, 40, None, unchanged=["body"], old_key=2)  # and it moves on again
    assert topic.live() == {3: columns(3, "changed")}


def test_unchanged_without_any_earlier_value_is_null(topic: Topic) -> None:
    topic.add("c", 2, 20, None, unchanged=["body"], old_key=1)
    assert topic.live() == {2: columns(2, None)}


def test_truncate_removes_older_keys_and_drops_older_changes_read_later(topic: Topic) -> None:
    topic.add("c", 1, 10, "a")
    topic.add("c", 2, 30, "b")
    topic.add("t", None, 30)
    topic.add("c", 3, 20, "older, from another partition")
    assert topic.live() == {2: columns(2, "b")}
    assert topic.state.truncated == 30


def test_records_at_or_after_the_point_are_left_out(topic: Topic) -> None:
    topic.add("c", 1, 10, "a")
    topic.add("u", 1, POINT, "changed at the point")
    topic.add("r", 2, POINT, "read by a snapshot at the point")
    topic.add("r", 3, POINT + 1, "read later")
    assert topic.live() == {1: columns(1, "a"), 2: columns(2, "read by a snapshot at the point")}
    assert topic.state.after_point == 2


def test_a_delete_keeps_the_columns_and_a_tombstone_changes_nothing(topic: Topic) -> None:
    topic.add("c", 1, 10, "a")
    topic.add("d", 1, 20)
    topic.state.fold(0, 99, key(1), None)  # the tombstone
    topic.add("d", 2, 21)  # a key never seen
    states = topic.states()
    assert not scan.live(states[1]) and states[1][scan.COLUMNS_AT :] == columns(1, "a")
    assert not scan.live(states[2]) and states[2][scan.COLUMNS_AT :] == decoder().row_scan.nulls
    assert topic.state.records == 4


def test_the_whole_workload_in_both_storages(tmp_path: Path) -> None:
    """Every rule above at once: the states on disk are the states in memory."""
    topics = [Topic(), Topic("disk", tmp_path)]
    for t in topics:
        t.add("c", 9, 5, "gone")
        t.add("t", None, 8)
        t.add("c", 8, 6, "older than the truncate, read later")
        t.add("c", 1, 10, "big")
        t.add("c", 2, 11, "two")
        t.add("u", 1, 20, None, unchanged=["body"])
        t.add("d", 1, 21, None)
        t.add("c", 4, 21, None, unchanged=["body"], old_key=1)
        t.add("c", 3, 22, "three")
        t.add("d", 2, 23, None)
        t.add("u", 3, POINT, "after the point")
    memory, disk = (t.states() for t in topics)  # on disk: each partition file read once
    assert disk == memory
    live = {i: s[scan.COLUMNS_AT :] for i, s in disk.items() if scan.live(s)}
    assert live == {3: columns(3, "three"), 4: columns(4, "big")}
    assert {i for i, s in disk.items() if not scan.live(s)} == {1, 2}
    for t in topics:
        t.state.close()
    assert list(tmp_path.iterdir()) == []


def test_logical_types_compare_as_wire_values(topic: Topic) -> None:
    """A timestamp beyond datetime's range (the infinity sentinel) is only its bytes."""
    topic.add("c", 1, 10, "a", at=2**63 - 1)
    assert topic.live() == {1: columns(1, "a", 2**63 - 1)}


def test_a_record_of_an_older_schema_compares_in_the_current_one(topic: Topic) -> None:
    topic.add("c", 1, 10, "old", schema=3)
    topic.add("c", 2, 11, "new")
    states = topic.states()
    assert states[1][scan.COLUMNS_AT :] == columns(1, "old")  # `at` read as its default
    assert scan.flags_of(states[1]) & scan.NO_ROW  # compared column by column
    assert not scan.flags_of(states[2]) & scan.NO_ROW


def test_a_record_not_in_the_bridge_framing_is_a_typed_error() -> None:
    state = TopicState(decoder(), POINT, topic="t")
    with pytest.raises(SchemaError, match="not Confluent-framed"):
        state.fold(0, 7, key(1), b"{}")
    with pytest.raises(SchemaError, match="offset 8: record does not fit"):
        state.fold(0, 8, key(1), b"\0\0\0\0\2\2")


def test_row_digest_of_rows_written_whole() -> None:
    """A row sent whole keeps the digest of its Avro body (what PostgreSQL's row encoded
    by the bridge is compared with first); one completed by carried values has none."""
    topic = Topic()
    topic.add("c", 1, 10, "big")
    topic.add("c", 2, 10, "big")
    topic.add("u", 2, 20, None, unchanged=["body"])
    states = topic.states()
    assert scan.settled(states[1], hash(row_body(1, "big")))
    assert not scan.settled(states[2], hash(row_body(2, "big")))
    assert states[2][scan.COLUMNS_AT :] == columns(2, "big")


def test_a_row_with_a_before_image_keeps_its_row_digest() -> None:
    topic = Topic()
    row = {"id": 1, "body": "b", "at": None}
    env = {"before": row, "after": row, "source": {"lsn": 1}, "op": "u", "unchanged_fields": None}
    topic.state.fold(0, 1, key(1), framed(2, env))
    assert scan.settled(topic.states()[1], hash(row_body(1, "b")))


def test_long_keys_are_hashed_short_ones_kept() -> None:
    short, long = b"\x02", b"x" * 40
    assert scan.body_of(scan.ident(short)) == short
    assert scan.body_of(scan.ident(long)) is None
    assert scan.ident(long) != scan.ident(long + b"y")
    assert len({scan.ident(bytes([n])) for n in range(256)}) == 256
    assert all(len(scan.ident(b"k" * n)) == scan.IDENT for n in range(1, 40))


# Two versions of one table in one topic: `body` retyped string -> long (a value schema
# Avro's resolution refuses), and the key moved from `id` to `body` (a key schema it
# refuses: the new key's field has no default in the old one).
RETYPED_ROW: dict[str, Any] = json.loads(json.dumps(ROW))
RETYPED_ROW["fields"][1]["type"] = ["null", "long"]
RETYPED_ENVELOPE = {
    **ENVELOPE,
    "fields": [
        {"name": "before", "type": ["null", RETYPED_ROW], "default": None},
        *ENVELOPE["fields"][1:],
    ],
}
BODY_KEY = {**KEY, "fields": [{"name": "body", "type": "string"}]}
SCHEMAS.update({4: RETYPED_ENVELOPE, 5: BODY_KEY})


def test_a_column_retyped_since_differs_and_the_others_compare_by_name(topic: Topic) -> None:
    """Records of `body` as a long, the table's current schema having it as a string: the
    records are read with their own schema, `id` and `at` compare by name, and the old
    `body` equals no value of the current type (PostgreSQL's rewritten row differs there,
    as a consumer reading by column name holds the old one)."""
    topic.add("c", 1, 10, 7, schema=4)  # body 7: a long
    topic.add("c", 2, 11, "7")
    topic.add("c", 3, 12, None, at=5, schema=4)  # a null fits any type
    states = topic.states()  # on disk: read once
    live = {i: s[scan.COLUMNS_AT :] for i, s in states.items()}
    fields = topic.decoder.fields
    assert differing_columns(fields, live[1], columns(1, "7")) == ["body"]
    assert differing_columns(fields, live[1], columns(1, None)) == ["body"]
    assert live[2] == columns(2, "7")
    assert live[3] == columns(3, None, 5)
    assert scan.flags_of(states[1]) & scan.NO_ROW


class Rekeyed:
    """A topic of the table whose key moved from `id` to `body`, folded as read (`add`) or
    through entries (`entry`, `put`: how a topic of several partitions is folded)."""

    def __init__(self, budget: str, entries: bool, directory: Path) -> None:
        self.decoder = Decoder(BODY_KEY, ENVELOPE, lambda i: json.dumps(SCHEMAS[i]))
        self.state = TopicState(
            self.decoder,
            POINT,
            memory_limit=BUDGETS[budget],
            expected=50,
            directory=str(directory),
        )
        assert self.state.keys.on_disk == (budget == "disk")
        self.entries = entries
        self.offset = 0

    def add(
        self, op: str, key: bytes, lsn: int, row: dict[str, Any], old: bytes | None = None
    ) -> None:
        self.offset += 1
        env = {
            "before": row if op == "d" else None,
            "after": None if op == "d" else row,
            "source": {"lsn": lsn},
            "op": op,
            "unchanged_fields": ["at"] if old is not None else None,
        }
        headers: list[tuple[str, bytes | None]] | None = (
            None if old is None else [("__debezium.oldkey", old)]
        )
        if not self.entries:
            self.state.fold(0, self.offset, key, framed(2, env), headers)
            return
        found = self.state.entry(0, self.offset, key, framed(2, env), lambda: headers)
        assert found is not None
        self.state.put(found)

    def live(self) -> dict[str, bytes]:
        """The live keys (as JSON) and their column digests."""
        store = self.state.keys
        found = (
            [kv for states, _ in store.partitioned() for kv in states.items()]
            if store.on_disk
            else list(store.states())
        )
        placed = self.state.placed
        return {
            self.decoder.show_key(placed.get(k) or scan.body_of(k) or b""): s[scan.COLUMNS_AT :]
            for k, s in found
            if scan.live(s)
        }


@pytest.mark.parametrize("entries", [False, True], ids=["add", "entry-put"])
@pytest.mark.parametrize("budget", list(BUDGETS))
def test_records_keyed_by_an_earlier_key_are_placed_at_their_rows_current_key(
    budget: str, entries: bool, tmp_path: Path
) -> None:
    """The key moved from `id` to `body` (a new key subject's schema): records keyed by
    `id` land at the current key of their row (`body`), a row whose `body` changes under
    the old key moves there, and deletes and key changes under the new key find them: the
    live state is PostgreSQL's one row, its unsent `at` carried over the key change."""
    topic = Rekeyed(budget, entries, tmp_path)
    topic.add("c", framed(1, {"id": 1}), 10, {"id": 1, "body": "x", "at": 3})
    topic.add("c", framed(1, {"id": 2}), 11, {"id": 2, "body": "y", "at": None})
    topic.add("u", framed(1, {"id": 1}), 12, {"id": 1, "body": "z", "at": 3})  # moves
    # the primary key is `body` from here: PostgreSQL's old key is the new key's
    topic.add("d", framed(5, {"body": "y"}), 20, {"id": None, "body": "y", "at": None})
    topic.add("d", framed(5, {"body": "z"}), 21, {"id": None, "body": "z", "at": None})
    old = framed(5, {"body": "z"})
    topic.add("c", framed(5, {"body": "w"}), 21, {"id": 1, "body": "w", "at": None}, old)
    row = io.BytesIO()
    fastavro.schemaless_writer(row, fastavro.parse_schema(ROW), {"id": 1, "body": "w", "at": 3})
    assert topic.live() == {'{"body": "w"}': topic.decoder.columns(row.getvalue())}
    topic.state.close()
