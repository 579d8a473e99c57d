"""TableCodec: relation → key/row/envelope schemas and row conversion (pure unit tests)."""

from __future__ import annotations

import io
import re
from typing import Any

import fastavro
import pytest

from bridge.decode.messages import KIND_BINARY, KIND_NULL, KIND_TEXT, KIND_UNCHANGED, Column
from bridge.decode.messages import Relation as Rel
from bridge.encode.plan import RowPlan, Toast, check_binary
from bridge.errors import ProtocolError, SchemaError
from bridge.schema import DEFAULT_OPTIONS, CodecOptions, StaticCatalog
from bridge.schema.catalog import PgType
from bridge.schema.table import UNAVAILABLE, TableCodec, TableDetails, unique_names

NUMERIC_12_2 = ((12 << 16) | 2) + 4
OPAQUE = PgType(90001, "tsvector_like", "public")  # unknown type: text only
SENDLESS = PgType(90002, "no_send", "public", has_send=False)  # sent as text in binary mode


def rel(
    *columns: tuple[str, int],
    key: tuple[str, ...] = (),
    identity: str = "d",
    typmods: dict[str, int] | None = None,
) -> Rel:
    cols = tuple(
        Column(1 if name in key else 0, name, oid, (typmods or {}).get(name, -1))
        for name, oid in columns
    )
    return Rel(None, 16384, "public", "items", identity, cols)


def encoded(
    table: TableCodec,
    kinds: bytes,
    values: tuple[bytes | None, ...],
    unchanged: list[str] | None = None,
) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """(row, key) as the encoder writes them, read back with fastavro; the names of
    unchanged TOASTed columns go to `unchanged`."""
    toast = None if unchanged is None else Toast(None, placeholders=False)
    key, body = RowPlan(table).write(kinds, values, toast)
    if toast is not None and unchanged is not None:
        unchanged += toast.unchanged
    row_schema = fastavro.parse_schema(table.envelope_schema["fields"][0]["type"][1])
    row: Any = fastavro.schemaless_reader(io.BytesIO(body), row_schema, None)
    if table.key_schema is None:
        return row, None
    key_schema = fastavro.parse_schema(table.key_schema)
    return row, fastavro.schemaless_reader(io.BytesIO(key), key_schema, None)  # type: ignore[return-value]


def codec(
    relation: Rel, pk: tuple[str, ...] = (), options: CodecOptions = DEFAULT_OPTIONS
) -> TableCodec:
    return TableCodec(
        relation, StaticCatalog([OPAQUE, SENDLESS]), TableDetails(pk, {}), options, "srv"
    )


def test_names_are_sanitised_deterministically_and_keep_the_original() -> None:
    assert unique_names(["a b", "a_b", "1x", "ü", "a-b"]) == ["a_b", "a_b_2", "_1x", "_", "a_b_3"]
    table = codec(rel(("a b", 23), ("a_b", 23)))
    before = table.envelope_schema["fields"][0]["type"][1]
    assert [(f["name"], f["pg.name"]) for f in before["fields"]] == [
        ("a_b", "a b"),
        ("a_b_2", "a_b"),
    ]
    assert table.namespace == "srv.public.items"


def test_primary_key_wins_over_replica_identity_flags() -> None:
    relation = rel(("id", 23), ("code", 25), key=("code",))
    assert codec(relation, pk=("id",)).key_index == (0,)
    assert codec(relation).key_index == (1,)  # no PK: the replica identity index
    assert codec(relation, pk=("renamed",)).key_index == (1,)  # stale catalog: flags
    full = rel(("id", 23), ("v", 25), key=("id", "v"), identity="f")
    assert codec(full).key_schema is None  # FULL flags every column: no usable key
    assert codec(full, pk=("id",)).key_index == (0,)


def test_a_nan_numeric_key_fits_the_key_schema() -> None:
    relation = rel(("id", 1700), ("v", 25), key=("id",), typmods={"id": NUMERIC_12_2})
    table = codec(relation, pk=("id",))
    assert table.key_schema is not None
    (field,) = table.key_schema["fields"]
    assert field["type"][0] == "null"
    _row, key = encoded(table, bytes([KIND_TEXT, KIND_NULL]), (b"NaN", None))
    parsed = fastavro.parse_schema(table.key_schema)
    assert key == {"id": None}
    assert fastavro.validate(key, parsed, raise_errors=False)


def test_row_conversion_kinds() -> None:
    table = codec(rel(("id", 23), ("body", 25), ("n", 23)))
    unchanged: list[str] = []
    kinds = bytes([KIND_BINARY, KIND_UNCHANGED, KIND_NULL])
    row, _key = encoded(table, kinds, (b"\x00\x00\x00\x07", None, None), unchanged)
    assert row == {"id": 7, "body": None, "n": None}
    assert unchanged == ["body"]
    with pytest.raises(ProtocolError, match=r"2 columns for public\.items"):
        encoded(table, bytes([KIND_TEXT, KIND_TEXT]), (b"1", b"x"))


def test_binary_mode_names_the_column_without_a_binary_decoder() -> None:
    """A type the bridge has no binary decoder for is refused for binary tuples, naming
    the column; a binary value of it (sent all the same) says what to set."""
    table = codec(rel(("id", 23), ("doc", OPAQUE.oid)))
    with pytest.raises(
        SchemaError, match=r"public\.items\.doc \(public\.tsvector_like, oid 90001\)"
    ):
        check_binary(table)
    with pytest.raises(SchemaError, match=r"source\.binary: false"):
        encoded(table, bytes([KIND_TEXT, KIND_BINARY]), (b"1", b"\x00"))
    assert encoded(table, bytes([KIND_TEXT, KIND_TEXT]), (b"1", b"'a'"))[0]["doc"] == "'a'"


def test_a_type_without_a_send_function_streams_in_binary_mode() -> None:
    """pgoutput sends a type without a send function as text in binary mode too: the
    stream's check passes it and its text reads; binary COPY (every column in binary,
    which the server refuses for such a type) does not."""
    table = codec(rel(("id", 23), ("doc", SENDLESS.oid)))
    check_binary(table)
    with pytest.raises(SchemaError, match=r"public\.items\.doc \(public\.no_send"):
        RowPlan(table).check_binary(every_column=True)
    assert encoded(table, bytes([KIND_BINARY, KIND_TEXT]), (b"\0\0\0\1", b"x"))[0]["doc"] == "x"


def test_placeholders_only_where_the_type_allows_one() -> None:
    table = codec(rel(("t", 25), ("b", 17), ("u", 2950), ("i", 23), ("j", 3802)))
    assert [table.placeholder(n) for n in ("t", "b", "u", "i", "j")] == [
        UNAVAILABLE,
        UNAVAILABLE.encode(),
        None,
        None,
        UNAVAILABLE,
    ]


def test_shared_named_types_are_defined_once() -> None:
    table = codec(rel(("a", 1186), ("b", 1186), ("c", 1187), ("n", 1700)))
    parsed = fastavro.parse_schema(table.envelope_schema)  # raises on a redefinition
    assert isinstance(parsed, dict) and parsed["name"] == "srv.public.items.Envelope"
    variable = codec(rel(("n", 1700), ("m", 1231)), options=CodecOptions(numeric_mode="variable"))
    fastavro.parse_schema(variable.envelope_schema)


def excluding(relation: Rel, *patterns: str, pk: tuple[str, ...] = ()) -> TableCodec:
    exclude = [re.compile(p) for p in patterns]
    details = TableDetails(pk, {})
    return TableCodec(
        relation, StaticCatalog([OPAQUE]), details, DEFAULT_OPTIONS, "srv", exclude_columns=exclude
    )


def test_excluded_columns_leave_the_row_schema_and_the_rows() -> None:
    relation = rel(("id", 23), ("secret", 25), ("n", 23), ("secret2", OPAQUE.oid))
    table = excluding(relation, r"public\.items\.secret.*", pk=("id",))
    row_schema = table.envelope_schema["fields"][0]["type"][1]
    assert [f["name"] for f in row_schema["fields"]] == ["id", "n"]
    kinds = bytes([KIND_TEXT, KIND_TEXT, KIND_UNCHANGED, KIND_BINARY])
    unchanged: list[str] = []
    row, key = encoded(table, kinds, (b"7", b"hidden", None, b"\x00"), unchanged)
    assert row == {"id": 7, "n": None} and unchanged == ["n"]
    assert key == {"id": 7}
    check_binary(table)  # the excluded column's missing binary decoder does not matter
    with pytest.raises(ProtocolError, match="whose Relation message has 4"):
        encoded(table, bytes([KIND_TEXT, KIND_TEXT]), (b"7", b"x"))
    fastavro.parse_schema(table.envelope_schema)


def test_exclusion_is_a_full_match_and_renaming_follows_the_kept_columns() -> None:
    relation = rel(("a b", 23), ("a_b", 23), ("id", 23), key=("id",))
    table = excluding(relation, r"public\.items\.a b", r"items\.id", r"public\.items\.i")
    assert table.field_names == ("a_b", "id")  # no `_2`: the colliding column is gone
    row, key = encoded(table, bytes([KIND_TEXT, KIND_TEXT, KIND_TEXT]), (b"1", b"2", b"3"))
    assert row == {"a_b": 2, "id": 3} and key == {"id": 3}
    assert table.key_index == (2,)


@pytest.mark.parametrize("pk", [("id",), ()])
def test_a_key_column_cannot_be_excluded(pk: tuple[str, ...]) -> None:
    relation = rel(("id", 23), ("v", 25), key=("id",))
    with pytest.raises(SchemaError, match=r"excludes public\.items\.id, a key column") as exc:
        excluding(relation, r".*\.id", pk=pk)
    assert exc.value.hint is not None and "primary-key" in exc.value.hint
