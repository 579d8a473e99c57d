"""Values a schema cannot hold (pure unit tests): clamped by default and named in the
envelope's special_values, Debezium's sentinels with avro.out_of_range sentinel.

Each record is compared byte for byte with the fastavro oracle, then read back by
fastavro with the logical types applied: by default every value is readable (what
confluent-kafka's AvroDeserializer does with it), and PostgreSQL's text of each value
that was clamped or is NaN is in special_values.
"""

from __future__ import annotations

import datetime as dt
import io
import struct
from decimal import Decimal
from typing import Any

import fastavro
import pytest

from bridge.decode.messages import KIND_BINARY, KIND_TEXT, Column, Relation, TupleData
from bridge.schema import CodecOptions, StaticCatalog
from bridge.schema.table import TableCodec, TableDetails
from encode.support import (
    NUMERIC_NAN,
    change,
    checked_records,
    envelope_of,
    insert,
    numeric_binary,
)

pytestmark = pytest.mark.usefixtures("frozen_clock")

NUMERIC_12_2 = ((12 << 16) | 2) + 4
NUMERIC_40_8 = ((40 << 16) | 8) + 4
COLUMNS = (
    Column(1, "id", 23, -1),
    Column(0, "d", 1082, -1),
    Column(0, "t", 1083, -1),
    Column(0, "ts", 1114, -1),
    Column(0, "tz", 1184, -1),
    Column(0, "n", 1700, NUMERIC_12_2),
    Column(0, "da", 1182, -1),
    Column(0, "w", 1700, NUMERIC_40_8),
)
RELATION = Relation(None, 5, "public", "edge", "d", COLUMNS)
I32, I64 = struct.Struct(">i"), struct.Struct(">q")
PG_EPOCH_DAYS = 10_957
UTC = dt.UTC


def _date_array(items: list[int | None]) -> bytes:
    head = struct.pack(">iiIii", 1, 1, 1082, len(items), 1)
    return head + b"".join(
        struct.pack(">i", -1) if i is None else struct.pack(">ii", 4, i) for i in items
    )


# (text tuple, binary tuple) of the same rows
TEXT_ROWS = [
    (
        b"1",
        b"infinity",
        b"24:00:00",
        b"-infinity",
        b"infinity",
        b"NaN",
        b"{2020-01-01,infinity,NULL}",
        b"1.5",
    ),
    (
        b"2",
        b"2020-02-29",
        b"12:00:00",
        b"2020-01-01 00:00:00",
        b"2020-01-01 00:00:00+00",
        b"1.25",
        b"{}",
        b"123456789012345678901234567890.12345678",
    ),
]
BINARY_ROWS = [
    (
        I32.pack(1),
        I32.pack(2**31 - 1),
        I64.pack(86_400_000_000),
        I64.pack(-(2**63)),
        I64.pack(2**63 - 1),
        NUMERIC_NAN,
        _date_array([18_262 - PG_EPOCH_DAYS, 2**31 - 1, None]),
        numeric_binary(15, 1),
    ),
]
CLAMPED_AFTER = {
    "id": 1,
    "d": dt.date(9999, 12, 31),
    "t": dt.time(23, 59, 59, 999_999),
    "ts": dt.datetime(1, 1, 1),
    "tz": dt.datetime(9999, 12, 30, 23, 59, 59, 999_999, tzinfo=UTC),  # a day inside
    "n": None,
    "da": [dt.date(2020, 1, 1), dt.date(9999, 12, 31), None],
    "w": "1.5",
}
SPECIALS = {
    "after.d": "infinity",
    "after.t": "24:00:00",
    "after.ts": "-infinity",
    "after.tz": "infinity",
    "after.n": "NaN",
    "after.da": "{2020-01-01,infinity,NULL}",
}


def table(
    options: CodecOptions, key: tuple[str, ...] = ("id",), relation: Relation = RELATION
) -> TableCodec:
    return TableCodec(relation, StaticCatalog(), TableDetails(key, {}), options, "srv")


def records(t: TableCodec, op: str, old: TupleData | None, new: TupleData | None) -> Any:
    """The encoder's records of a change (REPLICA IDENTITY FULL's old row), checked byte for
    byte against the fastavro oracle."""
    old_kind = "O" if old is not None else ""
    return checked_records(t, change(t.relation, op, old, new, old_kind))


@pytest.mark.parametrize(
    ("kind", "row"), [(KIND_TEXT, TEXT_ROWS[0]), (KIND_BINARY, BINARY_ROWS[0])]
)
def test_default_clamps_and_names_each_special_value(kind: int, row: tuple[bytes, ...]) -> None:
    t = table(CodecOptions())
    (value,) = [r.value for r in checked_records(t, insert(RELATION, kind, row))]
    envelope = envelope_of(t, value)
    assert envelope["after"] == CLAMPED_AFTER
    assert envelope["special_values"] == SPECIALS


def test_ordinary_rows_have_no_special_values() -> None:
    t = table(CodecOptions())
    row = TEXT_ROWS[1]
    (value,) = [r.value for r in checked_records(t, insert(t.relation, KIND_TEXT, row))]
    envelope = envelope_of(t, value)
    assert envelope["special_values"] is None
    assert envelope["after"]["ts"] == dt.datetime(2020, 1, 1)  # local-timestamp-micros: naive
    assert envelope["after"]["w"] == "123456789012345678901234567890.12345678"


def test_bc_and_far_future_values_clamp_with_their_text() -> None:
    t = table(CodecOptions())
    row = (b"3", b"4713-01-01 BC", b"00:00:00", b"12000-01-01 00:00:00",
           b"0044-03-15 12:00:00+00 BC", b"-Infinity", b"{0001-01-01}", b"NaN")  # fmt: skip
    (value,) = [r.value for r in checked_records(t, insert(t.relation, KIND_TEXT, row))]
    envelope = envelope_of(t, value)
    assert envelope["after"]["d"] == dt.date(1, 1, 1)
    assert envelope["after"]["ts"] == dt.datetime(9999, 12, 31, 23, 59, 59, 999_999)
    assert envelope["after"]["tz"] == dt.datetime(1, 1, 3, tzinfo=UTC)
    assert envelope["after"]["w"] == "NaN"  # the wide numeric's string keeps NaN itself
    assert envelope["special_values"] == {
        "after.d": "4713-01-01 BC",
        "after.ts": "12000-01-01 00:00:00",
        "after.tz": "0044-03-15 12:00:00+00 BC",
        "after.n": "-Infinity",
    }


def test_timestamptz_keeps_a_day_inside_for_local_time_conversions() -> None:
    """0001-01-01 UTC is valid, but a consumer converting it to local time (Spark's
    collect()) leaves year 1: timestamptz is clamped one day further inside."""
    t = table(CodecOptions())
    row = (b"4", b"0001-01-01", b"00:00:00", b"0001-01-01 00:00:00", b"0001-01-02 12:00:00+00",
           b"1", b"{}", b"1")  # fmt: skip
    (value,) = [r.value for r in checked_records(t, insert(t.relation, KIND_TEXT, row))]
    envelope = envelope_of(t, value)
    assert envelope["after"]["d"] == dt.date(1, 1, 1)
    assert envelope["after"]["ts"] == dt.datetime(1, 1, 1)
    assert envelope["after"]["tz"] == dt.datetime(1, 1, 3, tzinfo=UTC)
    assert envelope["special_values"] == {"after.tz": "0001-01-02 12:00:00+00"}


def test_update_and_delete_name_before_and_after() -> None:
    t = table(CodecOptions())
    kinds = bytes([KIND_TEXT] * 8)
    old, new = TupleData(kinds, TEXT_ROWS[0]), TupleData(kinds, (b"1", *TEXT_ROWS[1][1:]))
    (update,) = [r.value for r in records(t, "u", old, new)]
    assert envelope_of(t, update)["special_values"] == {
        "before." + k.removeprefix("after."): v for k, v in SPECIALS.items()
    }
    delete = records(t, "d", old, None)
    assert envelope_of(t, delete[0].value)["special_values"] == {
        "before." + k.removeprefix("after."): v for k, v in SPECIALS.items()
    }


def test_key_change_splits_before_and_after_specials() -> None:
    t = table(CodecOptions())
    kinds = bytes([KIND_TEXT] * 8)
    old = TupleData(kinds, TEXT_ROWS[0])
    new = TupleData(kinds, (b"9", *TEXT_ROWS[0][1:]))
    out = records(t, "u", old, new)
    assert [envelope_of(t, r.value)["special_values"] for r in out if r.value is not None] == [
        {"before." + k.removeprefix("after."): v for k, v in SPECIALS.items()},
        SPECIALS,
    ]


def test_clamped_date_in_the_key() -> None:
    t = table(CodecOptions(), key=("d",))
    row = TEXT_ROWS[0]
    (key,) = [r.key for r in checked_records(t, insert(t.relation, KIND_TEXT, row))]
    assert key is not None and t.key_schema is not None
    assert fastavro.schemaless_reader(io.BytesIO(key[5:]), t.key_schema) == {
        "d": dt.date(9999, 12, 31)
    }


@pytest.mark.parametrize(
    ("kind", "row"), [(KIND_TEXT, TEXT_ROWS[0]), (KIND_BINARY, BINARY_ROWS[0])]
)
def test_sentinel_mode_keeps_debeziums_extremes(kind: int, row: tuple[bytes, ...]) -> None:
    """avro.out_of_range sentinel: int32/int64 extremes and 24:00:00 as written before;
    NaN stays listed (it is null in the decimal either way)."""
    t = table(CodecOptions(out_of_range="sentinel", timestamp_mode="instant"))
    (value,) = [r.value for r in checked_records(t, insert(t.relation, kind, row))]
    assert value is not None
    raw_schema = {**t.envelope_schema}
    envelope = fastavro.schemaless_reader(
        io.BytesIO(value[5:]), fastavro.parse_schema(_no_logical(raw_schema))
    )
    assert isinstance(envelope, dict)
    after = envelope["after"]
    assert (after["d"], after["t"], after["ts"], after["tz"]) == (
        2**31 - 1,
        86_400_000_000,
        -(2**63),
        2**63 - 1,
    )
    assert after["da"] == [18_262, 2**31 - 1, None]
    assert envelope["special_values"] == {"after.n": "NaN"}
    ts_schema = next(
        f for f in t.envelope_schema["fields"][0]["type"][1]["fields"] if f["name"] == "ts"
    )
    assert ts_schema["type"][1]["logicalType"] == "timestamp-micros"


def _no_logical(schema: Any) -> Any:
    if isinstance(schema, list):
        return [_no_logical(s) for s in schema]
    if isinstance(schema, dict):
        return {k: _no_logical(v) for k, v in schema.items() if k != "logicalType"}
    return schema


TYPED_ARRAYS = CodecOptions(array_mode="typed")
NUMERIC_ARRAY = Relation(
    None, 6, "public", "nums", "d", (Column(1, "id", 23, -1), Column(0, "na", 1231, NUMERIC_12_2))
)


def _numeric_array(items: list[bytes | None]) -> bytes:
    head = struct.pack(">iiIii", 1, 1, 1700, len(items), 1)
    return head + b"".join(
        struct.pack(">i", -1) if i is None else struct.pack(">i", len(i)) + i for i in items
    )


@pytest.mark.parametrize(
    ("kind", "row"),
    [
        (KIND_TEXT, (b"1", b"{1.50,NaN,NULL}")),
        (KIND_BINARY, (I32.pack(1), _numeric_array([numeric_binary(150, 2), NUMERIC_NAN, None]))),
    ],
)
def test_nan_in_a_numeric_array_is_named(kind: int, row: tuple[bytes, bytes]) -> None:
    """With decimal elements (avro.array_mode typed), a NaN element of numeric(p,s)[] is a
    null element, as a scalar NaN is null: the array's text in special_values tells it
    from the NULL beside it."""
    t = table(TYPED_ARRAYS, relation=NUMERIC_ARRAY)
    (value,) = [r.value for r in checked_records(t, insert(t.relation, kind, row))]
    envelope = envelope_of(t, value)
    assert envelope["after"]["na"] == [Decimal("1.50"), None, None]
    assert envelope["special_values"] == {"after.na": "{1.50,NaN,NULL}"}


def test_numeric_array_without_nan_has_no_special_values() -> None:
    t = table(TYPED_ARRAYS, relation=NUMERIC_ARRAY)
    row = (b"1", b"{1.5,NULL}")
    (value,) = [r.value for r in checked_records(t, insert(t.relation, KIND_TEXT, row))]
    envelope = envelope_of(t, value)
    assert envelope["after"]["na"] == [Decimal("1.50"), None]
    assert envelope["special_values"] is None


@pytest.mark.parametrize(
    ("kind", "row"),
    [
        (KIND_TEXT, (b"1", b"{1.50,NaN,NULL}")),
        (KIND_BINARY, (I32.pack(1), _numeric_array([numeric_binary(150, 2), NUMERIC_NAN, None]))),
    ],
)
def test_numeric_array_elements_are_text_by_default(kind: int, row: tuple[bytes, bytes]) -> None:
    """avro.array_mode portable: numeric(p,s) elements are their exact text (the form
    Debezium's JDBC sink can bind), so NaN needs no special_values entry."""
    t = table(CodecOptions(), relation=NUMERIC_ARRAY)
    (value,) = [r.value for r in checked_records(t, insert(t.relation, kind, row))]
    envelope = envelope_of(t, value)
    assert envelope["after"]["na"] == ["1.50", "NaN", None]
    assert envelope["special_values"] is None
