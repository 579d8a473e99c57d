"""The one encoder against fastavro on the registered schemas, byte for byte (pure unit tests).

Every record (key and value, every Debezium shape, unchanged TOAST in both modes, text
and binary tuples) is compared with `tests.encode.oracle`, which writes the same change
with fastavro; where the oracle raises, the encoder must raise a typed error.
"""

from __future__ import annotations

import datetime
import io
import struct
import uuid
from decimal import Decimal
from typing import Any, Literal

import fastavro
import fastavro.validation
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bridge.decode.messages import (
    KIND_BINARY,
    KIND_NULL,
    KIND_TEXT,
    KIND_UNCHANGED,
    Column,
    Relation,
    TupleData,
)
from bridge.encode.binvalues import numeric_text
from bridge.encode.defaults import missing_defaults, without_key
from bridge.encode.plan import RowPlan
from bridge.encode.records import ChangeEncoder, TxSource
from bridge.errors import BridgeError, ProtocolError, ValueConversionError
from bridge.events.model import Change
from bridge.schema import DEFAULT_OPTIONS, StaticCatalog
from bridge.schema.table import TableCodec, TableDetails
from encode.oracle import Oracle
from encode.support import BLOCK, NUMERIC_NAN, TOPIC, TX, numeric_binary

pytestmark = pytest.mark.usefixtures("frozen_clock")

NUMERIC_12_2 = ((12 << 16) | 2) + 4


def pg_array(items: list[int]) -> str:
    return "{" + ",".join(map(str, items)) + "}"


# (name, type oid, typmod, strategy of PostgreSQL text output)
_TEXT = st.text(st.characters(exclude_categories=["Cs"], exclude_characters="\x00"))
COLUMNS: list[tuple[str, int, int, st.SearchStrategy[str]]] = [
    ("id", 23, -1, st.integers(-(2**31), 2**31 - 1).map(str)),
    ("small", 21, -1, st.integers(-(2**15), 2**15 - 1).map(str)),
    ("big", 20, -1, st.integers(-(2**63), 2**63 - 1).map(str)),
    ("label", 25, -1, _TEXT),
    ("name", 1043, -1, _TEXT),
    (
        "amount",
        1700,
        NUMERIC_12_2,
        st.one_of(
            st.decimals(-(10**11), 10**11, places=2).map(str),  # some beyond numeric(12,2)
            st.decimals(-1, 1, places=1).map(str),  # fewer fraction digits than the scale
            st.sampled_from(["NaN", "Infinity", "-Infinity", "-0.00", "0.5"]),
        ),
    ),
    ("flag", 16, -1, st.sampled_from(["t", "f"])),
    ("ref", 2950, -1, st.uuids().map(str)),
    ("doc", 3802, -1, _TEXT),
    ("ratio", 701, -1, st.floats().map(repr).map(lambda s: s.replace("inf", "Infinity"))),
    ("day", 1082, -1, st.dates(datetime.date(1, 1, 1)).map(str)),
    (
        "at",
        1184,
        -1,
        st.datetimes(timezones=st.just(datetime.UTC)).map(lambda d: d.isoformat(sep=" ")),
    ),
    ("raw", 17, -1, st.binary().map(lambda b: "\\x" + b.hex())),
    ("nums", 1007, -1, st.lists(st.integers(-(2**31), 2**31 - 1)).map(pg_array)),
    ("xid", 5069, -1, st.integers(0, 2**64 - 1).map(str)),
]


def int4_array_binary(items: list[int]) -> bytes:
    if not items:
        return struct.pack(">iiI", 0, 0, 23)
    head = struct.pack(">iiIii", 1, 0, 23, len(items), 1)
    return head + b"".join(struct.pack(">ii", 4, item) for item in items)


_PG_EPOCH = datetime.datetime(2000, 1, 1, tzinfo=datetime.UTC)
# The same columns' binary (send) forms, by column name.
BINARY: dict[str, st.SearchStrategy[bytes]] = {
    "id": st.integers(-(2**31), 2**31 - 1).map(struct.Struct(">i").pack),
    "small": st.integers(-(2**15), 2**15 - 1).map(struct.Struct(">h").pack),
    "big": st.integers(-(2**63), 2**63 - 1).map(struct.Struct(">q").pack),
    "label": _TEXT.map(str.encode),
    "name": _TEXT.map(str.encode),
    "amount": st.one_of(
        st.integers(-(10**13), 10**13).map(lambda n: numeric_binary(n, 2)),  # some too big
        st.integers(-10, 10).map(lambda n: numeric_binary(n, 1)),
        st.just(NUMERIC_NAN),
    ),
    "flag": st.sampled_from([b"\x01", b"\x00"]),
    "ref": st.uuids().map(lambda u: u.bytes),
    "doc": _TEXT.map(lambda t: b"\x01" + t.encode()),
    "ratio": st.floats().map(struct.Struct(">d").pack),
    "day": st.one_of(
        st.dates(datetime.date(1, 1, 1)).map(lambda d: (d - _PG_EPOCH.date()).days),
        st.sampled_from([2**31 - 1, -(2**31)]),
    ).map(struct.Struct(">i").pack),
    "at": st.one_of(
        st.datetimes(timezones=st.just(datetime.UTC)).map(
            lambda d: (d - _PG_EPOCH) // datetime.timedelta(microseconds=1)
        ),
        st.sampled_from([2**63 - 1, -(2**63)]),
    ).map(struct.Struct(">q").pack),
    "raw": st.binary(),
    "nums": st.lists(st.integers(-(2**31), 2**31 - 1)).map(int4_array_binary),
    "xid": st.integers(0, 2**64 - 1).map(struct.Struct(">Q").pack),
}
RELATION = Relation(
    None,
    16384,
    "public",
    "wide",
    "d",
    tuple(Column(1 if name == "id" else 0, name, oid, typmod) for name, oid, typmod, _ in COLUMNS),
)
TABLE = TableCodec(RELATION, StaticCatalog(), TableDetails(("id",), {}), DEFAULT_OPTIONS, "srv")
# Each column's value in rows written before it was added (attmissingval): the defaults of
# `with_defaults`, every field but `nums`' (no JSON default form) then [T, "null"].
MISSING = {
    "id": "1",
    "small": "2",
    "big": "3",
    "label": "x",
    "name": "y",
    "amount": "1.50",
    "flag": "t",
    "ref": "00000000-0000-0000-0000-000000000001",
    "doc": '{"a": 1}',
    "ratio": "2.5",
    "day": "2024-02-29",
    "at": "2024-01-02 03:04:05+00",
    "raw": "\\x00ff",
    "nums": "{1,2}",
    "xid": "5",
}


def with_defaults(key: tuple[str, ...]) -> TableCodec:
    """The table with MISSING as its fields' defaults, as the catalog gives them."""
    relation, details = without_key(RELATION, TableDetails(key, {}))
    keyless = TableCodec(relation, StaticCatalog(), details, DEFAULT_OPTIONS, "srv")
    defaults = missing_defaults(keyless, MISSING)
    assert set(defaults) == set(MISSING) - {"nums"}
    return TableCodec(
        RELATION, StaticCatalog(), TableDetails(key, {}), DEFAULT_OPTIONS, "srv", defaults=defaults
    )


DEFAULTED = with_defaults(("id",))


def both(encoder: ChangeEncoder, change: Change) -> tuple[Any, Any]:
    """(the encoder's records or the typed error it raised, fastavro's records or the
    exception the oracle raised); each side on a fresh transaction."""
    try:
        got: Any = encoder.records(change, TxSource(BLOCK, 731, 0x1_0000_0028, 0))
    except BridgeError as exc:
        got = exc
    oracle = Oracle(
        encoder.table,
        7,
        8,
        toast_mode=encoder.toast_mode,
        tombstones=encoder.tombstones,
        topic=TOPIC,
    )
    try:
        want: Any = oracle.records(change, TX)
    except (
        BridgeError,
        ValueError,
        TypeError,
        KeyError,
        OverflowError,
        fastavro.validation.ValidationError,
    ) as exc:
        want = exc
    return got, want


def agree(got: Any, want: Any) -> bool:
    """Same records, or both refused the change (the encoder with a typed error)."""
    if isinstance(want, Exception):
        return isinstance(got, BridgeError)
    return bool(got == want)


cell = st.one_of(st.none(), st.just("unchanged"), st.just("value"))
plain_cell = st.one_of(st.none(), st.just("value"), st.just("value"))  # no unchanged TOAST


@st.composite
def tuples(
    draw: st.DrawFn,
    *,
    key_present: bool = False,
    toast: bool = True,
    full: bool = False,
    binary: bool = False,
) -> TupleData:
    """Text tuples, or with `binary` the binary (send) forms, as pgoutput sends them."""
    kinds = bytearray()
    values: list[bytes | None] = []
    for n, (name, _, _, text) in enumerate(COLUMNS):
        present = full or (key_present and n == 0)
        what = "value" if present else draw(cell if toast else plain_cell)
        if what is None:
            kinds.append(KIND_NULL)
            values.append(None)
        elif what == "unchanged":
            kinds.append(KIND_UNCHANGED)
            values.append(None)
        elif binary:
            kinds.append(KIND_BINARY)
            values.append(draw(BINARY[name]))
        else:
            kinds.append(KIND_TEXT)
            values.append(draw(text).encode())
    return TupleData(bytes(kinds), tuple(values))


wire_tuples = st.booleans().flatmap(lambda binary: tuples(binary=binary))


def change(op: str, old: TupleData | None, new: TupleData | None, kind: str = "") -> Change:
    return Change(op, RELATION, kind, old, new, 0, (RELATION,), 0, None)


@pytest.mark.parametrize("table", [TABLE, DEFAULTED], ids=["null_first", "defaults"])
@settings(max_examples=400, deadline=None)
@given(
    op=st.sampled_from(["c", "u", "d", "r", "t"]),
    new=wire_tuples,
    old=st.one_of(st.none(), wire_tuples),
    old_kind=st.sampled_from(["K", "O"]),
    tombstones=st.booleans(),
    toast_mode=st.sampled_from(["list", "placeholder"]),
)
def test_encoder_equals_fastavro(
    table: TableCodec,
    op: str,
    new: TupleData,
    old: TupleData | None,
    old_kind: str,
    tombstones: bool,
    toast_mode: Literal["list", "placeholder"],
) -> None:
    encoder = ChangeEncoder(table, 7, 8, tombstones=tombstones, toast_mode=toast_mode, topic=TOPIC)
    if op in ("c", "r"):  # "r": a snapshot read
        c = change(op, None, new)
    elif op == "u":
        c = change("u", old, new, old_kind if old else "")
    elif op == "t":
        c = change("t", None, None)
    else:
        c = change("d", old or new, None, old_kind)
    got, want = both(encoder, c)
    assert agree(got, want), (got, want)


@settings(max_examples=200, deadline=None)
@given(new=st.one_of(tuples(key_present=True), tuples(key_present=True, toast=False)))
def test_ordinary_rows_are_encoded(new: TupleData) -> None:
    """Every insert with values that fit is encoded, unchanged TOASTed values included;
    the others are refused with the value error."""
    got, want = both(ChangeEncoder(TABLE, 7, 8, topic=TOPIC), change("c", None, new))
    if not fits(new):
        assert isinstance(got, ValueConversionError)
    else:
        assert got == want


# Every column that can be part of a key is one, so each shape's key branch is exercised.
KEY_NAMES = tuple(name for name, *_ in COLUMNS if name not in ("raw", "nums"))
KEYED = TableCodec(RELATION, StaticCatalog(), TableDetails(KEY_NAMES, {}), DEFAULT_OPTIONS, "srv")


@pytest.mark.parametrize("table", [KEYED, with_defaults(KEY_NAMES)], ids=["null_first", "defaults"])
@settings(max_examples=300, deadline=None)
@given(
    op=st.sampled_from(["c", "u", "d"]),
    row=st.one_of(tuples(full=True), tuples(), tuples(full=True, binary=True)),
    old=st.one_of(st.none(), tuples(full=True)),
)
def test_every_column_in_the_key(
    table: TableCodec, op: str, row: TupleData, old: TupleData | None
) -> None:
    """With `old` (REPLICA IDENTITY FULL), an update's unchanged key values come from it."""
    encoder = ChangeEncoder(table, 7, 8, topic=TOPIC)
    if op == "d":
        c = change("d", row, None, "K")
    elif op == "u" and old is not None:
        c = change("u", old, row, "O")
    else:
        c = change(op, None, row)
    got, want = both(encoder, c)
    assert agree(got, want), (got, want)
    written = [t for t in (c.old, c.new) if t is not None]
    if all(KIND_NULL not in t.kinds and KIND_UNCHANGED not in t.kinds and fits(t) for t in written):
        assert got == want, "full rows of values that fit must be encoded"


def fits(row: TupleData) -> bool:
    """xid8 within an Avro long; amount within numeric(12,2) or NaN/±Infinity (NULL)."""
    names = [name for name, *_ in COLUMNS]
    at_xid, at_amount = names.index("xid"), names.index("amount")
    xid, amount = row.values[at_xid], row.values[at_amount]
    if row.kinds[at_xid] == KIND_BINARY:
        assert xid is not None
        xid = str(struct.unpack(">Q", xid)[0]).encode()
    if row.kinds[at_amount] == KIND_BINARY:
        assert amount is not None
        amount = numeric_text(amount).encode()
    if xid is not None and int(xid) >= 2**63:
        return False
    if amount is None or not amount[-1:].isdigit():
        return True
    return abs(Decimal(amount.decode())) < 10**10


def test_unchanged_toast_is_encoded_null_key_and_bad_utf8_are_value_errors() -> None:
    encoder = ChangeEncoder(TABLE, 7, 8, topic=TOPIC)
    width = len(COLUMNS)
    unchanged = TupleData(
        bytes([KIND_TEXT] + [KIND_UNCHANGED] * (width - 1)), (b"1",) + (None,) * (width - 1)
    )
    null_key = TupleData(bytes([KIND_NULL] * width), (None,) * width)
    bad_text = TupleData(
        bytes([KIND_TEXT, KIND_NULL, KIND_NULL, KIND_TEXT] + [KIND_NULL] * (width - 4)),
        (b"1", None, None, b"\xff\xfe") + (None,) * (width - 4),
    )
    got, want = both(encoder, change("c", None, unchanged))
    assert got == want
    for tup, column in ((null_key, "id"), (bad_text, "label")):
        got, want = both(encoder, change("c", None, tup))
        assert isinstance(want, Exception)
        assert isinstance(got, ValueConversionError)
        assert (got.table, got.column) == ("public.wide", column)


def test_column_count_mismatch_is_the_protocol_error() -> None:
    short = TupleData(bytes([KIND_TEXT]), (b"1",))
    with pytest.raises(ProtocolError):
        ChangeEncoder(TABLE, 7, 8, topic=TOPIC).records(change("c", None, short), TX)


def small_table(
    columns: tuple[Column, ...], key: tuple[str, ...]
) -> tuple[Relation, TableCodec, ChangeEncoder]:
    relation = Relation(None, 1, "public", "small", "d", columns)
    table = TableCodec(relation, StaticCatalog(), TableDetails(key, {}), DEFAULT_OPTIONS, "srv")
    return relation, table, ChangeEncoder(table, 7, 8, topic=TOPIC)


def test_composite_key_follows_primary_key_order_not_column_order() -> None:
    relation, table, encoder = small_table(
        (Column(1, "a", 25, -1), Column(1, "b", 23, -1), Column(0, "c", 25, -1)), ("b", "a")
    )
    new = TupleData(bytes([KIND_TEXT] * 3), (b"x\xc3\xa9", b"300", b"zzz"))
    c = Change(
        "u",
        relation,
        "K",
        TupleData(bytes([KIND_TEXT, KIND_TEXT, KIND_NULL]), (b"y", b"300", None)),
        new,
        0,
        (relation,),
        0,
        None,
    )
    got, want = both(encoder, c)
    assert got == want
    assert [r.value is None for r in got] == [False, True, False]  # key changed
    bodies = RowPlan(table).write(new.kinds, new.values)
    assert bodies[0] == b"\xd8\x04" + b"\x06x\xc3\xa9"  # b=300 then a="xé"


def test_binary_tuples() -> None:
    relation = Relation(
        None,
        2,
        "public",
        "bin",
        "d",
        (
            Column(1, "id", 23, -1),
            Column(0, "t", 25, -1),
            Column(0, "j", 3802, -1),
            Column(0, "u", 2950, -1),
            Column(0, "n", 1700, NUMERIC_12_2),
        ),
    )
    table = TableCodec(relation, StaticCatalog(), TableDetails(("id",), {}), DEFAULT_OPTIONS, "srv")
    ref = uuid.UUID(int=12345)
    values = (
        struct.pack(">i", -7),
        "grüße".encode(),
        b'\x01{"a": 1}',
        ref.bytes,
        struct.pack(">hhhh", 1, 0, 0, 2) + struct.pack(">h", 42),
    )
    new = TupleData(bytes([KIND_BINARY] * 5), values)
    got, want = both(ChangeEncoder(table, 7, 8, topic=TOPIC), change_of(relation, new))
    assert got == want


@pytest.mark.parametrize(
    ("column", "value"),
    [
        ("big", b"\x00" * 7),  # int8: 8 bytes
        ("ratio", b"\x00" * 9),  # float8: 8 bytes
        ("flag", b"\x02"),
        ("at", b"\x00" * 4),  # timestamptz: 8 bytes
        ("day", b"\x00" * 8),  # date: 4 bytes
        ("ref", b"\x00" * 15),  # uuid: 16 bytes
        ("doc", b'\x02{"a": 1}'),  # jsonb: format version 1
        ("doc", b"\x01\xff"),  # jsonb: UTF-8 text
        ("amount", b"\x00\x01\x00\x00\x00\x00\x00\x02\x27\x10"),  # digit 10000
        ("amount", b"\x00\x02\x00\x00\x00\x00\x00\x02\x00\x01"),  # 1 digit of 2
        ("amount", struct.pack(">hhhhh", 1, 0, 0, 3, 5)),  # scale 3 in numeric(12, 2)
        ("amount", struct.pack(">hhhhhh", 2, 3, 0, 2, 1, 0)),  # 10**12: over the precision
    ],
)
def test_malformed_binary_values_are_value_errors(column: str, value: bytes) -> None:
    """Each binary shape the plan writes inline checks its bytes as its converter does."""
    names = [name for name, _, _, _ in COLUMNS]
    kinds = bytearray([KIND_NULL] * len(names))
    values: list[bytes | None] = [None] * len(names)
    kinds[0], values[0] = KIND_BINARY, struct.pack(">i", 1)
    at = names.index(column)
    kinds[at], values[at] = KIND_BINARY, value
    got, want = both(
        ChangeEncoder(TABLE, 7, 8, topic=TOPIC),
        change("c", None, TupleData(bytes(kinds), tuple(values))),
    )
    assert isinstance(want, Exception)
    assert isinstance(got, ValueConversionError)
    assert (got.table, got.column) == ("public.wide", column)


def change_of(relation: Relation, new: TupleData) -> Change:
    return Change("c", relation, "", None, new, 0, (relation,), 0, None)


def test_decimal_value_in_the_row() -> None:
    """A sanity anchor outside hypothesis: the numeric column decodes back to its value."""
    width = len(COLUMNS)
    kinds = bytes([KIND_TEXT] + [KIND_NULL] * 4 + [KIND_TEXT] + [KIND_NULL] * (width - 6))
    values = (b"5", None, None, None, None, b"12.34") + (None,) * (width - 6)
    encoder = ChangeEncoder(TABLE, 7, 8, topic=TOPIC)
    (value,) = [r.value for r in encoder.records(change("c", None, TupleData(kinds, values)), TX)]
    assert value is not None
    row: Any = fastavro.schemaless_reader(
        io.BytesIO(value[5:]), fastavro.parse_schema(TABLE.envelope_schema)
    )
    assert row["after"]["amount"] == Decimal("12.34") and row["after"]["id"] == 5


@given(st.dates(datetime.date(1, 1, 1)), st.integers(-(2**31), 2**31 - 1), st.booleans())
def test_date_in_the_key_and_the_row(day: datetime.date, n: int, nullable_other: bool) -> None:
    relation, _table, encoder = small_table(
        (Column(1, "day", 1082, -1), Column(1, "n", 23, -1), Column(0, "other", 1082, -1)),
        ("day", "n"),
    )
    other = None if nullable_other else str(day).encode()
    kinds = bytes([KIND_TEXT, KIND_TEXT, KIND_NULL if other is None else KIND_TEXT])
    new = TupleData(kinds, (str(day).encode(), str(n).encode(), other))
    got, want = both(encoder, Change("c", relation, "", None, new, 0, (relation,), 0, None))
    assert got == want
