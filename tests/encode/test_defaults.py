"""Missing values as Avro field defaults: the JSON form, the [T, "null"] union, and rows
written with it read back by fastavro, alone and through schema resolution."""

from __future__ import annotations

import datetime
import io
from decimal import Decimal
from typing import Any

import fastavro
import pytest

from bridge.decode.messages import KIND_NULL, KIND_TEXT, KIND_UNCHANGED, Column, Relation
from bridge.encode.defaults import missing_defaults, without_key
from bridge.encode.plan import RowPlan, Toast
from bridge.schema import CodecOptions, StaticCatalog
from bridge.schema.table import ColumnDetails, TableCodec, TableDetails

NUMERIC_5_2 = ((5 << 16) | 2) + 4
# (name, type oid, typmod, missing value text, what fastavro reads back for it)
COLUMNS: list[tuple[str, int, int, str | None, Any]] = [
    ("id", 23, -1, None, None),
    ("w", 25, -1, "dflt", "dflt"),
    ("n", 1700, NUMERIC_5_2, "1.50", Decimal("1.50")),
    ("i", 23, -1, "-7", -7),
    ("big", 20, -1, "1099511627776", 1 << 40),
    ("ok", 16, -1, "t", True),
    ("day", 1082, -1, "2024-02-29", datetime.date(2024, 2, 29)),
    (
        "at",
        1184,
        -1,
        "2024-01-02 03:04:05.123456+00",
        datetime.datetime(2024, 1, 2, 3, 4, 5, 123456, tzinfo=datetime.UTC),
    ),
    ("raw", 17, -1, "\\x00ff", b"\x00\xff"),
    ("f", 701, -1, "2.5", 2.5),
    ("nan", 701, -1, "NaN", None),  # JSON has no NaN: no default
    ("nnan", 1700, NUMERIC_5_2, "NaN", None),  # written as null: no default
    ("arr", 1007, -1, "{1,2}", None),  # items are ["null", int]: no default
    ("plain", 25, -1, None, None),
]
RELATION = Relation(
    None, 7, "public", "evo", "d", tuple(Column(0, n, oid, tm) for n, oid, tm, _, _ in COLUMNS)
)
DETAILS = TableDetails(("id",), {n: ColumnDetails(1, m) for n, _, _, m, _ in COLUMNS})
MISSING = {n: m for n, _, _, m, _ in COLUMNS if m is not None}


def _table(defaults: dict[str, Any] | None = None) -> TableCodec:
    return TableCodec(RELATION, StaticCatalog(), DETAILS, CodecOptions(), "srv", defaults=defaults)


def _defaults() -> dict[str, Any]:
    relation, details = without_key(RELATION, DETAILS)
    keyless = TableCodec(relation, StaticCatalog(), details, CodecOptions(), "srv")
    return missing_defaults(keyless, MISSING)


def _row_schema(table: TableCodec) -> Any:
    return table.envelope_schema["fields"][0]["type"][1]


def _read(body: bytes, writer: Any, reader: Any | None = None) -> dict[str, Any]:
    out = fastavro.schemaless_reader(
        io.BytesIO(body),
        fastavro.parse_schema(writer),
        None if reader is None else fastavro.parse_schema(reader),
    )
    assert isinstance(out, dict)
    return out


def test_json_defaults_of_each_type() -> None:
    defaults = _defaults()
    assert defaults == {
        "w": "dflt",
        "n": "\x00\x96",  # unscaled 150, big-endian two's complement, as code points
        "i": -7,
        "big": 1 << 40,
        "ok": True,
        "day": 19782,
        "at": 1704164645123456,
        "raw": "\x00\xff",
        "f": 2.5,
    }


def test_defaulted_fields_list_the_value_branch_first() -> None:
    table = _table(_defaults())
    fields = {f["name"]: f for f in _row_schema(table)["fields"]}
    assert fields["w"]["type"] == [{"type": "string", "pg.type": "text"}, "null"]
    assert fields["w"]["default"] == "dflt"
    assert fields["plain"]["type"] == ["null", {"type": "string", "pg.type": "text"}]
    assert fields["plain"]["default"] is None
    assert fields["nan"]["default"] is None
    fastavro.parse_schema(table.envelope_schema)  # a valid schema, defaults included


def test_rows_with_flipped_unions_read_back() -> None:
    table = _table(_defaults())
    plan = RowPlan(table)
    width = len(COLUMNS)
    kinds = bytes([KIND_TEXT] * width)
    text = {"id": "1", "arr": "{1,2}"}
    values = tuple(text.get(n, m or "x").encode() for n, _, _, m, _ in COLUMNS)
    _, body = plan.write(kinds, values)
    row = _read(body, _row_schema(table))
    assert row["w"] == "dflt" and row["n"] == Decimal("1.50") and row["ok"] is True
    assert row["arr"] == [1, 2]
    # NULLs, and an unchanged TOASTed value, in flipped columns
    nulls = bytes([KIND_TEXT] + [KIND_NULL] * (width - 2) + [KIND_UNCHANGED])
    _, body = plan.write(nulls, (b"1",) + (None,) * (width - 1), Toast(None, False))
    assert set(_read(body, _row_schema(table)).values()) == {1, None}
    # an old row's columns (write_columns): joined, its body; they fill a new row's unchanged ones
    full = plan.write(kinds, values)[1]
    _, fill = plan.write_columns(kinds, values)
    assert b"".join(fill) == full
    toast = Toast(fill, False)
    changed = bytes([KIND_TEXT] + [KIND_UNCHANGED] * (width - 1))
    _, body = plan.write(changed, (b"1",) + (None,) * (width - 1), toast)
    assert body == full


def test_old_rows_read_the_default_through_schema_resolution() -> None:
    """A row written before the columns existed, read with the newer schema: each defaulted
    field reads as PostgreSQL reads that row. fastavro hands a default over in Avro's JSON
    form without converting it (fastavro issues #869, #814): bytes as a str of code points,
    logical types as their underlying number or bytes (docs/concepts/schema-evolution.md: one
    line converts them)."""
    old = Relation(None, 7, "public", "evo", "d", (Column(0, "id", 23, -1),))
    old_table = TableCodec(old, StaticCatalog(), DETAILS, CodecOptions(), "srv")
    _, body = RowPlan(old_table).write(bytes([KIND_TEXT]), (b"1",))
    defaults = _defaults()
    row = _read(body, _row_schema(old_table), _row_schema(_table(defaults)))
    json_form = {"n", "raw", "day", "at"}
    expected = {n: value for n, _, _, _, value in COLUMNS if n not in json_form}
    assert {k: v for k, v in row.items() if k not in json_form} == {**expected, "id": 1}
    assert {k: row[k] for k in json_form} == {k: defaults[k] for k in json_form}
    assert row["raw"].encode("latin-1") == b"\x00\xff"
    assert Decimal(int.from_bytes(row["n"].encode("latin-1"), "big", signed=True)).scaleb(
        -2
    ) == Decimal("1.50")


@pytest.mark.parametrize("name", ["nan", "nnan", "arr"])
def test_values_without_a_json_form_keep_a_null_default(name: str) -> None:
    assert name not in _defaults()
