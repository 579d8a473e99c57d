"""`avro.column_rules`: masked, truncated and hashed text columns, in the compiled plan."""

from __future__ import annotations

import hashlib
import io
import re
from typing import Any

import pytest
from fastavro import parse_schema, schemaless_reader

from bridge.config import ColumnRule
from bridge.decode.messages import KIND_BINARY, KIND_NULL, KIND_TEXT, Column, Relation
from bridge.encode.plan import _CONVERT, _UTF8, RowPlan
from bridge.errors import SchemaError
from bridge.schema import CodecOptions, StaticCatalog
from bridge.schema.table import ColumnDetails, TableCodec, TableDetails

COLUMNS = [("id", 23), ("email", 25), ("notes", 1043), ("phone", 25), ("n", 23), ("plain", 25)]
RELATION = Relation(
    None, 1, "public", "customers", "d", tuple(Column(0, n, oid, -1) for n, oid in COLUMNS)
)
DETAILS = TableDetails(("id",), {n: ColumnDetails(1) for n, _ in COLUMNS})
RULES = [
    ColumnRule(match=r"public\.customers\.email", action="mask", length=8),
    ColumnRule(match=r"public\.customers\.notes", action="truncate", length=5),
    ColumnRule(match=r"public\.customers\.phone", action="hash", algorithm="SHA-256", salt="s"),
    ColumnRule(match=r"public\.customers\.phone", action="truncate", length=12),
]


def codec(rules: list[ColumnRule]) -> TableCodec:
    return TableCodec(
        RELATION,
        StaticCatalog([]),
        DETAILS,
        CodecOptions(),
        "srv",
        column_rules=[(re.compile(r.match), r) for r in rules],
    )


def row(table: TableCodec, kinds: bytes, values: tuple[bytes | None, ...]) -> dict[str, Any]:
    _, body = RowPlan(table).write(kinds, values)
    envelope = parse_schema(table.envelope_schema)
    assert isinstance(envelope, dict)
    result = schemaless_reader(io.BytesIO(body), envelope["fields"][0]["type"][1])
    assert isinstance(result, dict)
    return result


@pytest.mark.parametrize("kind", [KIND_TEXT, KIND_BINARY])
def test_rules_rewrite_only_their_columns(kind: int) -> None:
    values = (b"1", b"a@b.example", "crème brûlée".encode(), b"+1 555 0100", b"7", b"kept")
    kinds = bytes([KIND_TEXT, kind, kind, kind, KIND_TEXT, kind])
    got = row(codec(RULES), kinds, values)
    salted = hashlib.sha256(b"s" + b"+1 555 0100").hexdigest()
    assert got == {
        "id": 1,
        "email": "********",
        "notes": "crème",
        "phone": salted[:12],
        "n": 7,
        "plain": "kept",
    }


def test_null_stays_null_and_other_columns_keep_their_fast_path() -> None:
    kinds = bytes([KIND_TEXT, KIND_NULL, KIND_NULL, KIND_NULL, KIND_NULL, KIND_NULL])
    values = (b"1", None, None, None, None, None)
    assert row(codec(RULES), kinds, values)["email"] is None
    # A column without a rule keeps the loop's direct text copy (no converter call).
    shapes = [c.text_shape for c in RowPlan(codec(RULES)).columns]
    assert shapes[5] == _UTF8 and shapes[1] == shapes[2] == shapes[3] == _CONVERT
    assert [c.text_shape for c in RowPlan(codec([])).columns][1:4] == [_UTF8] * 3


@pytest.mark.parametrize(
    ("pattern", "what"), [(r"public\.customers\.id", "a key column"), (r".*\.n", "not a text")]
)
def test_rules_refuse_keys_and_other_types(pattern: str, what: str) -> None:
    with pytest.raises(SchemaError, match=what):
        codec([ColumnRule(match=pattern, action="mask", length=3)])


def test_a_rule_is_complete() -> None:
    with pytest.raises(ValueError, match="needs length"):
        ColumnRule(match="x", action="truncate")
    with pytest.raises(ValueError, match="unknown hash algorithm"):
        ColumnRule(match="x", action="hash", algorithm="SHA-999")
