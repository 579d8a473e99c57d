"""Debezium's handling modes as `avro.*` options (pure unit tests): each record equals the
fastavro oracle byte for byte, in text and binary tuples, and reads back as the mode says.

decimal_mode (decimal.handling.mode), binary_mode (binary.handling.mode),
time_precision_mode (time.precision.mode), interval_mode (interval.handling.mode, plus
our record form), hstore_mode (hstore.handling.mode), wide_decimal_mode.
"""

from __future__ import annotations

import datetime as dt
import struct
from decimal import Decimal
from typing import Any

import pytest

from bridge.decode.messages import KIND_BINARY, KIND_TEXT, Column, Relation
from bridge.encode.temporal import interval_iso
from bridge.schema import CodecOptions, PgType, StaticCatalog
from bridge.schema.table import TableCodec, TableDetails
from encode.support import checked_records, envelope_of, insert, numeric_binary

pytestmark = pytest.mark.usefixtures("frozen_clock")

HSTORE = PgType(90_002, "hstore", "public")
COLUMNS = (
    Column(1, "id", 23, -1),
    Column(0, "b", 17, -1),
    Column(0, "n", 1700, ((12 << 16) | 2) + 4),
    Column(0, "w", 1700, ((40 << 16) | 8) + 4),
    Column(0, "t", 1083, -1),
    Column(0, "t3", 1083, 3),
    Column(0, "ts", 1114, -1),
    Column(0, "ts3", 1114, 3),
    Column(0, "d", 1082, -1),
    Column(0, "iv", 1186, -1),
    Column(0, "h", HSTORE.oid, -1),
)
RELATION = Relation(None, 6, "public", "modes", "d", COLUMNS)
PG_EPOCH_US = 946_684_800_000_000
TEXT = (
    b"1",
    b"\\x00ff10",
    b"12.34",
    b"-1.5",
    b"12:34:56.789012",
    b"12:34:56.789",
    b"2020-01-01 12:34:56.789012",
    b"2020-01-01 12:34:56.789",
    b"2020-02-29",
    b"1 year 2 mons 3 days 04:05:06.78",
    b'"a"=>"1", "b"=>NULL',
)


def _hstore(pairs: list[tuple[str, str | None]]) -> bytes:
    out = struct.pack(">i", len(pairs))
    for key, value in pairs:
        out += struct.pack(">i", len(key)) + key.encode()
        out += (
            struct.pack(">i", -1)
            if value is None
            else struct.pack(">i", len(value)) + value.encode()
        )
    return out


_TIME_US = ((12 * 60 + 34) * 60 + 56) * 1_000_000
_TS_US = 1_577_836_800_000_000 + _TIME_US - PG_EPOCH_US
BINARY = (
    struct.pack(">i", 1),
    b"\x00\xff\x10",
    numeric_binary(1234, 2),
    numeric_binary(-15, 1),
    struct.pack(">q", _TIME_US + 789_012),
    struct.pack(">q", _TIME_US + 789_000),
    struct.pack(">q", _TS_US + 789_012),
    struct.pack(">q", _TS_US + 789_000),
    struct.pack(">i", 7_364),  # 2020-02-29 in days since 2000-01-01
    struct.pack(">qii", 14_706_780_000, 3, 14),
    _hstore([("a", "1"), ("b", None)]),
)
TIME = dt.time(12, 34, 56, 789_012)
TIME3 = dt.time(12, 34, 56, 789_000)
TS = dt.datetime(2020, 1, 1, 12, 34, 56, 789_012)
TS3 = dt.datetime(2020, 1, 1, 12, 34, 56, 789_000)
DEFAULTS = {
    "id": 1,
    "b": b"\x00\xff\x10",
    "n": Decimal("12.34"),
    "w": "-1.5",
    "t": TIME,
    "t3": TIME3,
    "ts": TS,
    "ts3": TS3,
    "d": dt.date(2020, 2, 29),
    "iv": "P1Y2M3DT4H5M6.78S",
    "h": {"a": "1", "b": None},
}
# (options, the fields that differ from DEFAULTS, connect.name of some fields)
CASES: list[tuple[dict[str, str], dict[str, Any], dict[str, str]]] = [
    ({}, {}, {"t": "io.debezium.time.MicroTime", "ts": "io.debezium.time.MicroTimestamp",
              "d": "org.apache.kafka.connect.data.Date",
              "n": "org.apache.kafka.connect.data.Decimal", "iv": "io.debezium.time.Interval"}),
    ({"binary_mode": "base64"}, {"b": "AP8Q"}, {}),
    ({"binary_mode": "hex"}, {"b": "00ff10"}, {}),
    ({"decimal_mode": "double"}, {"n": 12.34, "w": -1.5}, {}),
    ({"decimal_mode": "string"}, {"n": "12.34", "w": "-1.5"}, {}),
    ({"wide_decimal_mode": "decimal"}, {"w": Decimal("-1.50000000")}, {}),
    ({"wide_decimal_mode": "double"}, {"w": -1.5}, {}),
    ({"time_precision_mode": "connect"},
     {"t": TIME3, "ts": TS3},
     {"t": "org.apache.kafka.connect.data.Time", "ts": "org.apache.kafka.connect.data.Timestamp",
      "d": "org.apache.kafka.connect.data.Date"}),
    ({"time_precision_mode": "adaptive"}, {},
     {"t": "io.debezium.time.MicroTime", "t3": "org.apache.kafka.connect.data.Time",
      "ts3": "io.debezium.time.Timestamp"}),
    ({"interval_mode": "record"}, {"iv": {"months": 14, "days": 3, "micros": 14_706_780_000}}, {}),
    ({"interval_mode": "numeric"},
     {"iv": 14 * 2_629_800_000_000 + 3 * 86_400_000_000 + 14_706_780_000},
     {"iv": "io.debezium.time.MicroDuration"}),
    ({"hstore_mode": "json"}, {"h": '{"a":"1","b":null}'}, {"h": "io.debezium.data.Json"}),
]  # fmt: skip


def _field_types(t: TableCodec) -> dict[str, Any]:
    row = t.envelope_schema["fields"][0]["type"][1]
    return {f["name"]: f["type"][1] for f in row["fields"]}


@pytest.mark.parametrize(("kind", "row"), [(KIND_TEXT, TEXT), (KIND_BINARY, BINARY)])
@pytest.mark.parametrize(("options", "changed", "names"), CASES, ids=[str(c[0]) for c in CASES])
def test_mode_reads_back_as_documented(
    kind: int,
    row: tuple[bytes, ...],
    options: dict[str, str],
    changed: dict[str, Any],
    names: dict[str, str],
) -> None:
    t = TableCodec(
        RELATION, StaticCatalog([HSTORE]), TableDetails(("id",), {}), CodecOptions(**options), "srv"
    )
    (value,) = [r.value for r in checked_records(t, insert(RELATION, kind, row))]
    envelope = envelope_of(t, value)
    assert envelope["after"] == {**DEFAULTS, **changed}
    assert envelope["special_values"] is None
    types = _field_types(t)
    assert {f: types[f]["connect.name"] for f in names} == names


def test_interval_iso_text_follows_debezium_signs() -> None:
    assert interval_iso({"months": -14, "days": 3, "micros": -14_706_000_001}) == (
        "P-1Y-2M3DT-4H-5M-6.000001S"
    )
    assert interval_iso({"months": 0, "days": 0, "micros": -500_000}) == "P0Y0M0DT0H0M-0.5S"
    assert interval_iso({"months": 0, "days": 0, "micros": 0}) == "P0Y0M0DT0H0M0S"


@pytest.mark.parametrize(
    ("typmod", "options", "text", "expected"),
    [
        # numeric(38,0) far beyond int64: a checked column, but not a bounded one
        (((38 << 16) | 0) + 4, {}, b"-" + b"9" * 38, Decimal("-" + "9" * 38)),
        (((38 << 16) | 0) + 4, {}, b"9" * 38, Decimal("9" * 38)),
        # numeric without typmod as Debezium's VariableScaleDecimal record (a dict)
        (-1, {"numeric_mode": "variable"}, b"3.14159", {"scale": 5, "value": b"\x04\xcb\x2f"}),
    ],
)
def test_wide_numerics_are_written_unclamped(
    typmod: int, options: dict[str, str], text: bytes, expected: Any
) -> None:
    relation = Relation(None, 7, "public", "wide", "d", (COLUMNS[0], Column(0, "v", 1700, typmod)))
    t = TableCodec(
        relation, StaticCatalog([]), TableDetails(("id",), {}), CodecOptions(**options), "srv"
    )
    (value,) = [r.value for r in checked_records(t, insert(relation, KIND_TEXT, (b"1", text)))]
    envelope = envelope_of(t, value)
    assert envelope["after"] == {"id": 1, "v": expected}
    assert envelope["special_values"] is None
