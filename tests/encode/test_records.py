"""ChangeEncoder: Debezium's record shapes and Confluent framing (pure unit tests)."""

from __future__ import annotations

import io
import json
import struct
from typing import Any

import fastavro
import pytest
from hypothesis import given
from hypothesis import strategies as st

from bridge.decode.messages import KIND_NULL, KIND_TEXT, KIND_UNCHANGED, Column, Relation, TupleData
from bridge.encode.records import ChangeEncoder, SourceBlock, ToastMode, TxSource
from bridge.errors import SchemaError, ValueConversionError
from bridge.events.model import Change
from bridge.record import KafkaRecord
from bridge.schema import DEFAULT_OPTIONS, StaticCatalog
from bridge.schema.fixed import load_fixed
from bridge.schema.table import UNAVAILABLE, TableCodec, TableDetails
from encode.support import TOPIC

KEY_ID, VALUE_ID = 7, 8
RELATION = Relation(
    None,
    16384,
    "public",
    "items",
    "d",
    (Column(1, "id", 23, -1), Column(0, "body", 25, -1), Column(0, "x", 5069, -1)),
)
TABLE = TableCodec(RELATION, StaticCatalog(), TableDetails(("id",), {}), DEFAULT_OPTIONS, "srv")
TX = TxSource(SourceBlock("srv", "shop", "9.9"), 731, 0x1_0000_0028, 0)
ENVELOPE = fastavro.parse_schema(TABLE.envelope_schema)
KEY = fastavro.parse_schema(TABLE.key_schema or {})
UNCHANGED = object()  # an unchanged TOASTed value: PostgreSQL does not send it


def tup(*values: object) -> TupleData:
    kinds = bytes(
        KIND_NULL if v is None else KIND_UNCHANGED if v is UNCHANGED else KIND_TEXT for v in values
    )
    return TupleData(kinds, tuple(v if isinstance(v, bytes) else None for v in values))


CHANGE_LSN = 0x1_0000_0010  # the change's own LSN, before its transaction's commit


def change(
    op: str, old: TupleData | None = None, new: TupleData | None = None, kind: str = ""
) -> Change:
    return Change(op, RELATION, kind, old, new, 0, (RELATION,), 0, None, CHANGE_LSN)


def encode(c: Change, toast_mode: ToastMode = "list", tombstones: bool = True) -> list[KafkaRecord]:
    return ChangeEncoder(
        TABLE, KEY_ID, VALUE_ID, toast_mode=toast_mode, tombstones=tombstones, topic=TOPIC
    ).records(c, TX)


def read(payload: bytes | None, schema: Any, schema_id: int) -> Any:
    assert payload is not None
    assert struct.unpack(">bI", payload[:5]) == (0, schema_id)
    return fastavro.schemaless_reader(io.BytesIO(payload[5:]), schema)


def shapes(records: list[KafkaRecord]) -> list[tuple[Any, Any]]:
    """(key, (op, before, after, unchanged_fields)) per record; value None = tombstone."""
    out = []
    for record in records:
        key, value = record.key, record.value
        env = None if value is None else read(value, ENVELOPE, VALUE_ID)
        summary = env and (env["op"], env["before"], env["after"], env["unchanged_fields"])
        out.append((key and read(key, KEY, KEY_ID), summary))
    return out


def row(id_: int, body: str | None, x: int | None = None) -> dict[str, Any]:
    return {"id": id_, "body": body, "x": x}


def test_insert_is_framed_and_carries_the_source_block() -> None:
    (record,) = encode(change("c", new=tup(b"1", b"a", b"5")))
    assert shapes([record]) == [({"id": 1}, ("c", None, row(1, "a", 5), None))]
    source = read(record.value, ENVELOPE, VALUE_ID)["source"]
    assert (source["schema"], source["table"], source["txId"], source["lsn"]) == (
        "public",
        "items",
        731,
        CHANGE_LSN,
    )
    assert source["commit_lsn"] == 0x1_0000_0028
    assert source["sequence"] == f'[null,"{CHANGE_LSN}"]'  # no commit seen before this one


def test_sequence_is_debeziums_last_commit_and_own_lsn() -> None:
    """Debezium's SourceInfo.sequence(): ["<last commit LSN>", "<this LSN>"] as strings."""
    tx = TxSource(SourceBlock("srv", "shop", "9.9"), 731, 0x1_0000_0028, 0, 0x1_0000_0008)
    records = ChangeEncoder(TABLE, KEY_ID, VALUE_ID, topic=TOPIC).records(
        change("c", new=tup(b"1", None, None)), tx
    )
    source = read(records[0].value, ENVELOPE, VALUE_ID)["source"]
    assert json.loads(source["sequence"]) == [str(0x1_0000_0008), str(CHANGE_LSN)]


def test_delete_is_followed_by_a_tombstone_unless_disabled() -> None:
    delete = change("d", old=tup(b"1", None, None), kind="K")
    assert shapes(encode(delete)) == [
        ({"id": 1}, ("d", row(1, None), None, None)),
        ({"id": 1}, None),
    ]
    assert len(encode(delete, tombstones=False)) == 1


def test_a_primary_key_change_is_delete_tombstone_create() -> None:
    update = change("u", old=tup(b"1", None, None), new=tup(b"2", b"a", None), kind="K")
    assert shapes(encode(update)) == [
        ({"id": 1}, ("d", row(1, None), None, None)),
        ({"id": 1}, None),
        ({"id": 2}, ("c", None, row(2, "a"), None)),
    ]


def headers(records: list[KafkaRecord]) -> list[Any]:
    """Per record: None, or its headers as (name, decoded key)."""
    return [
        None if r.headers is None else [(name, read(data, KEY, KEY_ID)) for name, data in r.headers]
        for r in records
    ]


def test_a_primary_key_change_links_both_keys_in_debezium_headers() -> None:
    """Debezium's convention: the delete and its tombstone carry `__debezium.newkey`, the
    create `__debezium.oldkey`; each value is the other side's framed Kafka key."""
    update = change("u", old=tup(b"1", None, None), new=tup(b"2", UNCHANGED, None), kind="K")
    records = encode(update)
    assert headers(records) == [
        [("__debezium.newkey", {"id": 2})],
        [("__debezium.newkey", {"id": 2})],
        [("__debezium.oldkey", {"id": 1})],
    ]
    delete, tombstone, create = records
    assert delete.headers == tombstone.headers == [("__debezium.newkey", create.key)]
    assert create.headers == [("__debezium.oldkey", delete.key)]
    assert shapes(records)[2] == ({"id": 2}, ("c", None, row(2, None), ["body"]))
    full = change("u", old=tup(b"1", b"big", b"3"), new=tup(b"2", UNCHANGED, b"3"), kind="O")
    records = encode(full)  # REPLICA IDENTITY FULL: the create is complete, still linked
    assert headers(records)[::2] == [
        [("__debezium.newkey", {"id": 2})],
        [("__debezium.oldkey", {"id": 1})],
    ]
    assert shapes(records)[2] == ({"id": 2}, ("c", None, row(2, "big", 3), None))
    without_tombstone = encode(update, tombstones=False)
    assert headers(without_tombstone) == [
        [("__debezium.newkey", {"id": 2})],
        [("__debezium.oldkey", {"id": 1})],
    ]


def test_only_a_key_change_carries_headers() -> None:
    """Inserts, updates that keep the key (whatever the old row sent), deletes, their
    tombstones and truncates have none."""
    changes = [
        change("c", new=tup(b"1", b"a", b"5")),
        change("u", new=tup(b"1", UNCHANGED, b"3")),
        change("u", old=tup(b"1", None, None), new=tup(b"1", b"b", None), kind="K"),
        change("u", old=tup(b"1", b"big", b"3"), new=tup(b"1", UNCHANGED, b"4"), kind="O"),
        change("d", old=tup(b"1", None, None), kind="K"),
        change("t"),
    ]
    for c in changes:
        assert all(r.headers is None for r in encode(c)), c.op


def test_unchanged_toast_listed_or_placeholder() -> None:
    update = change("u", new=tup(b"1", UNCHANGED, b"3"))
    assert shapes(encode(update)) == [({"id": 1}, ("u", None, row(1, None, 3), ["body"]))]
    assert shapes(encode(update, toast_mode="placeholder")) == [
        ({"id": 1}, ("u", None, row(1, UNAVAILABLE, 3), ["body"]))
    ]


TOASTED_KEY = Relation(
    None,
    16385,
    "public",
    "toasted_key",
    "d",
    (Column(1, "k", 25, -1), Column(0, "body", 25, -1), Column(0, "note", 25, -1)),
)
TOASTED_TABLE = TableCodec(
    TOASTED_KEY, StaticCatalog(), TableDetails(("k",), {}), DEFAULT_OPTIONS, "srv"
)


def test_an_unchanged_toasted_key_comes_from_the_old_key() -> None:
    """test_decoding/toast.sql's `UPDATE toasted_key SET toasted_col2 = toasted_col1`: the
    primary key is a TOASTed value left alone, which the new tuple has only as unchanged;
    PostgreSQL sends the old key for it (kind K), and the record's key and the key column
    of `after` come from there. The other unchanged value stays listed."""
    big = b"1234567890" * 200
    update = Change(
        "u",
        TOASTED_KEY,
        "K",
        tup(big, None, None),
        tup(UNCHANGED, UNCHANGED, b"n"),
        0,
        (TOASTED_KEY,),
        0,
        None,
        CHANGE_LSN,
    )
    (record,) = ChangeEncoder(TOASTED_TABLE, KEY_ID, VALUE_ID, topic=TOPIC).records(update, TX)
    key_schema = fastavro.parse_schema(TOASTED_TABLE.key_schema or {})
    assert read(record.key, key_schema, KEY_ID) == {"k": big.decode()}
    env = read(record.value, fastavro.parse_schema(TOASTED_TABLE.envelope_schema), VALUE_ID)
    assert env["op"] == "u"
    assert env["after"] == {"k": big.decode(), "body": None, "note": "n"}
    assert env["unchanged_fields"] == ["body"]


def test_a_full_old_row_supplies_the_unchanged_value() -> None:
    update = change("u", old=tup(b"1", b"big", b"3"), new=tup(b"1", UNCHANGED, b"4"), kind="O")
    assert shapes(encode(update)) == [({"id": 1}, ("u", row(1, "big", 3), row(1, "big", 4), None))]


def test_truncate_has_no_key() -> None:
    assert shapes(encode(change("t"))) == [(None, ("t", None, None, None))]


def test_a_value_outside_the_avro_type_is_a_value_error() -> None:
    with pytest.raises(ValueConversionError, match=r"public\.items\.x \(.*xid8\): cannot encode"):
        encode(change("c", new=tup(b"1", b"a", str(2**64 - 1).encode())))


_SOURCE_SCHEMA = fastavro.parse_schema(load_fixed("source"))
_names = st.text(st.characters(exclude_categories=["Cs"]), max_size=70)
_longs = st.integers(-(2**63), 2**63 - 1)


@given(
    server=_names,
    db=_names,
    xid=st.none() | _longs,
    lsn=_longs,
    change_lsns=st.lists(_longs, min_size=1, max_size=4),
    last_commit=st.none() | _longs,
    commit_ts=st.integers(-(2**62), 2**62),
    version=_names,
    snapshot=st.sampled_from(["false", "true", "last", "incremental"]),
    schema=_names,
    tables=st.lists(_names, min_size=1, max_size=2),
)
def test_source_block_parts_equal_fastavro(
    server: str,
    db: str,
    xid: int | None,
    lsn: int,
    change_lsns: list[int],
    last_commit: int | None,
    commit_ts: int,
    version: str,
    snapshot: str,
    schema: str,
    tables: list[str],
) -> None:
    """The pre-encoded source block is byte for byte what fastavro writes for its dict,
    for every change of one transaction, the changes taking the tables in turn (the
    pieces kept between changes: the head while the LSNs have as many digits, the
    middle while the table stays)."""
    tx = TxSource(SourceBlock(server, db, version, snapshot), xid, lsn, commit_ts, last_commit)
    fields = {}
    for table in tables:
        encoded = bytearray()
        for name in (schema, table):
            fastavro.schemaless_writer(fields_buf := io.BytesIO(), "string", name)
            encoded += fields_buf.getvalue()
        fields[table] = bytes(encoded)
    for i, change_lsn in enumerate(change_lsns * 2):
        table = tables[i % len(tables)]
        buf = io.BytesIO()
        sequence = json.dumps([None if last_commit is None else str(last_commit), str(change_lsn)])
        datum = {**tx.base, "schema": schema, "table": table, "lsn": change_lsn}
        datum["sequence"] = sequence.replace(", ", ",")
        fastavro.schemaless_writer(buf, _SOURCE_SCHEMA, datum)
        assert tx.block_for(fields[table], change_lsn) == buf.getvalue()


def test_source_block_refuses_values_outside_the_schema() -> None:
    """An xid beyond Avro's long is a SchemaError naming the table."""
    tx = TxSource(SourceBlock("srv", "db", "v"), 2**64, 1, 0)
    with pytest.raises(ValueError):
        tx.block_for(b"", 1)
    with pytest.raises(SchemaError, match=r"public\.items: the source block"):
        ChangeEncoder(TABLE, KEY_ID, VALUE_ID, topic=TOPIC)._source_block(tx, 1)
    with pytest.raises(SchemaError):
        ChangeEncoder(TABLE, KEY_ID, VALUE_ID, topic=TOPIC).records(
            change("c", new=tup(b"1", b"a", None)), tx
        )
