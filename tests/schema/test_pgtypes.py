"""Every supported type, scalar and as arrays, fetched from a real PostgreSQL 15 in text
and in binary format: both converters must agree with each other and with the expected
value, and the value must survive a fastavro round trip with the codec's schema."""

from __future__ import annotations

import struct
from collections.abc import Iterator
from dataclasses import replace
from decimal import Decimal
from typing import Any, NamedTuple

import pytest

from bridge.encode.columns import ColumnCodec, column_codec
from bridge.schema import CodecOptions, PgCatalog
from bridge.schema.pgtypes import Wire

from .helpers import Conn, avro_check, canon, fetch_raw

I32_MAX, I32_MIN, I64_MAX, I64_MIN = 2**31 - 1, -(2**31), 2**63 - 1, -(2**63)
NAN, INF = float("nan"), float("inf")
DAY_US = 86_400_000_000
# Converters keep Debezium's sentinels; the default clamp happens in the encoder
# (tests/encode/test_special_values.py), except inside arrays, tested there too.
SENTINEL = CodecOptions(out_of_range="sentinel")
MICROS = CodecOptions(timestamptz_mode="micros", out_of_range="sentinel")
ISO = CodecOptions(timestamptz_mode="iso")
DOUBLE = CodecOptions(numeric_mode="double")
VARIABLE = CodecOptions(numeric_mode="variable")


def f32(value: float) -> float:
    return float(struct.unpack(">f", struct.pack(">f", value))[0])


def iv(months: int, days: int, micros: int) -> dict[str, int]:
    return {"months": months, "days": days, "micros": micros}


def vsd(scale: int, unscaled: int) -> dict[str, Any]:
    size = unscaled.bit_length() // 8 + 1
    return {"scale": scale, "value": unscaled.to_bytes(size, "big", signed=True)}


class Case(NamedTuple):
    sql_type: str
    values: list[tuple[str, Any]]  # (input literal, expected converted value)
    options: CodecOptions = CodecOptions()
    codec_type: str | None = None  # RowDescription reports a domain's base type
    settings: str = ""


CASES = [
    Case("bool", [("t", True), ("f", False)]),
    Case("int2", [("0", 0), ("-32768", -32768), ("32767", 32767)]),
    Case("int4", [("-2147483648", I32_MIN), ("2147483647", I32_MAX), ("7", 7)]),
    Case("int8", [(str(I64_MIN), I64_MIN), (str(I64_MAX), I64_MAX)]),
    Case("oid", [("0", 0), ("4294967295", 4294967295)]),
    Case("xid", [("0", 0), ("4294967295", 4294967295)]),
    Case("cid", [("4294967295", 4294967295)]),
    Case("xid8", [("0", 0), (str(I64_MAX), I64_MAX)]),
    Case(
        "float4",
        [
            ("1.1", f32(1.1)),
            ("-0", -0.0),
            ("NaN", NAN),
            ("Infinity", INF),
            ("-Infinity", -INF),
            ("3.4028235e38", f32(3.4028235e38)),
            ("1e-45", f32(1e-45)),
        ],
    ),
    Case(
        "float8",
        [
            ("0.1", 0.1),
            ("-0", -0.0),
            ("NaN", NAN),
            ("-Infinity", -INF),
            ("1.7976931348623157e308", 1.7976931348623157e308),
            ("5e-324", 5e-324),
            ("123456789.123456789", 123456789.123456789),
        ],
    ),
    Case(
        "numeric(10,2)",
        [
            ("123.45", Decimal("123.45")),
            ("-99999999.99", Decimal("-99999999.99")),
            ("0", Decimal("0.00")),
            ("1.005", Decimal("1.01")),
            ("NaN", None),
        ],
    ),
    Case("numeric(5,-2)", [("12345", Decimal("12300")), ("-99999", Decimal("-100000"))]),
    Case("numeric(3,5)", [("0.00123", Decimal("0.00123")), ("-0.000001", Decimal("0.00000"))]),
    Case(
        "numeric(38,10)",
        [
            (
                "1234567890123456789012345678.0123456789",
                Decimal("1234567890123456789012345678.0123456789"),
            )
        ],
    ),
    Case(
        "numeric",
        [
            ("123.4500", "123.4500"),
            ("NaN", "NaN"),
            ("Infinity", "Infinity"),
            ("-Infinity", "-Infinity"),
            ("0.000000000", "0.000000000"),
            ("1e-20", "0.00000000000000000001"),
            ("-1e100", "-1" + "0" * 100),
            (
                "12345678901234567890.000000000000000000001",
                "12345678901234567890.000000000000000000001",
            ),
            ("-0.5", "-0.5"),
        ],
    ),
    Case(
        "numeric",
        [
            ("0.1", 0.1),
            ("NaN", NAN),
            ("-Infinity", -INF),
            ("1e-20", 1e-20),
            ("123456789012345678901234567890.5", 123456789012345678901234567890.5),
        ],
        options=DOUBLE,
    ),
    Case(
        "numeric",
        [
            ("123.4500", vsd(4, 1234500)),
            ("-0.5", vsd(1, -5)),
            ("0", vsd(0, 0)),
            ("-128", vsd(0, -128)),
            ("1e30", vsd(0, 10**30)),
            ("NaN", None),
            ("Infinity", None),
        ],
        options=VARIABLE,
    ),
    Case(
        "money",
        [
            ("12.5", Decimal("12.50")),
            ("0", Decimal("0.00")),
            ("-92233720368547758.08", Decimal("-92233720368547758.08")),
            ("92233720368547758.07", Decimal("92233720368547758.07")),
        ],
    ),
    Case(
        "text",
        [
            ("", ""),
            ("héllo 🎉", "héllo 🎉"),
            ('a"b\\c', 'a"b\\c'),
            ("NULL", "NULL"),
            (" spaced { } , ; ", " spaced { } , ; "),
            ("tab\there\nnl", "tab\there\nnl"),
        ],
    ),
    Case("varchar(5)", [("ab", "ab"), ("", "")]),
    Case("bpchar(5)", [("ab", "ab   "), ("abcde", "abcde")]),
    Case("name", [("pg_class", "pg_class"), ("with space", "with space")]),
    Case("citext", [("MiXeD", "MiXeD"), ("", "")]),
    Case('"char"', [("a", "a"), ("\\377", "\\377"), ("", ""), ('"', '"')]),
    Case("bytea", [("\\x", b""), ("\\x00ff5c22", b'\x00\xff\\"')]),
    Case(
        "bytea", [("\\x", b""), ("\\x00ff5c2241", b'\x00\xff\\"A')], settings="bytea_output=escape"
    ),
    Case(
        "uuid",
        [
            ("A0EEBC99-9C0B-4EF8-BB6D-6BB9BD380A11", "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11"),
            ("00000000-0000-0000-0000-000000000000", "00000000-0000-0000-0000-000000000000"),
        ],
    ),
    Case("json", [('{"a": [1, 2]}', '{"a": [1, 2]}'), ('"x\\u00e9"', '"x\\u00e9"')]),
    Case("jsonb", [('{"b": 1, "a": [1, 2.50]}', '{"a": [1, 2.50], "b": 1}'), ("null", "null")]),
    Case(
        "xml",
        [
            ('<a x="1">t</a>', '<a x="1">t</a>'),
            ('<?xml version="1.0"?><r/>', "<r/>"),
            (
                '<?xml version="1.0" standalone="yes"?><r/>',
                '<?xml version="1.0" standalone="yes"?><r/>',
            ),
        ],
    ),
    Case(
        "date",
        [
            ("2020-02-29", 18321),
            ("1970-01-01", 0),
            ("0044-03-15 BC", -735160),
            ("4713-01-01 BC", -2440550),
            ("5874897-12-31", 2145042905),
            ("infinity", I32_MAX),
            ("-infinity", I32_MIN),
        ],
        options=SENTINEL,
    ),
    Case(
        "time",
        [
            ("00:00:00", 0),
            ("23:59:59.999999", 86_399_999_999),
            ("24:00:00", 86_400_000_000),
            ("12:34:56.5", 45_296_500_000),
        ],
        options=SENTINEL,
    ),
    Case(
        "timetz",
        [
            ("12:00:00+05:30", "12:00:00+05:30"),
            ("23:59:59.999999-15:59:59", "23:59:59.999999-15:59:59"),
            ("00:00:00.5+00", "00:00:00.5+00"),
            ("1:2:3-8", "01:02:03-08"),
        ],
    ),
    Case(
        "timestamp",
        [
            ("2020-01-01 12:34:56.789", 1_577_882_096_789_000),
            ("4713-01-01 00:00:00 BC", -210_863_520_000_000_000),
            ("0001-12-31 23:59:59.999999 BC", -62_135_596_800_000_001),
            ("10000-01-01", 2_932_897 * DAY_US),
            ("infinity", I64_MAX),
            ("-infinity", I64_MIN),
            ("294276-12-31 23:59:59.999999", I64_MAX),
        ],
        options=SENTINEL,
    ),
    Case(
        "timestamptz",
        [
            ("2020-01-01 12:00:00+05:30", 1_577_860_200_000_000),
            ("1850-01-01 00:00:00+00", -3_786_825_600_000_000),
            ("0044-03-15 12:00:00+00 BC", -735160 * DAY_US + 43_200_000_000),
            ("infinity", I64_MAX),
            ("-infinity", I64_MIN),
        ],
        options=MICROS,
    ),
    Case(
        "timestamptz",
        [
            ("2020-01-01 12:00:00.5+05:30", "2020-01-01T06:30:00.5Z"),
            ("1850-01-01 00:00:00+00", "1850-01-01T00:00:00Z"),
            ("0001-01-01 00:00:00+00 BC", "0000-01-01T00:00:00Z"),
            ("0044-03-15 12:00:00+00 BC", "-0043-03-15T12:00:00Z"),
            ("10000-01-01 00:00:00+00", "+10000-01-01T00:00:00Z"),
            ("infinity", "infinity"),
        ],
        options=ISO,
    ),
    Case(
        "interval",
        [
            ("1 year 2 mons 3 days 04:05:06.789", iv(14, 3, 14_706_789_000)),
            ("-1 years -2 mons +3 days -04:05:06", iv(-14, 3, -14_706_000_000)),
            ("00:00:00", iv(0, 0, 0)),
            ("1 mon 1 day", iv(1, 1, 0)),
            ("-178000000 years", iv(-2_136_000_000, 0, 0)),
            ("2562047788:00:54.775807", iv(0, 0, I64_MAX)),
            ("-2562047788:00:54.775807", iv(0, 0, -I64_MAX)),
            ("1 day -00:00:01", iv(0, 1, -1_000_000)),
        ],
        options=CodecOptions(interval_mode="record"),  # its fields; the ISO text: test_modes
    ),
    Case("bit(5)", [("10101", "10101"), ("00000", "00000")]),
    Case("varbit", [("", ""), ("1", "1"), ("101010101010101010", "101010101010101010")]),
    Case(
        "inet",
        [
            ("192.168.0.1", "192.168.0.1"),
            ("10.1.2.3/8", "10.1.2.3/8"),
            ("::1", "::1"),
            ("::", "::"),
            ("::ffff:1.2.3.4", "::ffff:1.2.3.4"),
            ("::1.2.3.4", "::1.2.3.4"),
            ("2001:db8::1/64", "2001:db8::1/64"),
            ("1:0:0:1:0:0:0:1", "1:0:0:1::1"),
            ("1:0:0:2:0:0:3:4", "1::2:0:0:3:4"),
            ("1:2:3:4:5:6:7:0", "1:2:3:4:5:6:7:0"),
            ("fe80:0:0:0:0:0:0:0", "fe80::"),
        ],
    ),
    Case(
        "cidr",
        [
            ("10.0.0.0/8", "10.0.0.0/8"),
            ("192.168.1.7/32", "192.168.1.7/32"),
            ("2001:db8::/32", "2001:db8::/32"),
            ("::/0", "::/0"),
        ],
    ),
    Case(
        "macaddr",
        [("08:00:2b:01:02:03", "08:00:2b:01:02:03"), ("08-00-2B-01-02-0F", "08:00:2b:01:02:0f")],
    ),
    Case(
        "macaddr8",
        [
            ("08:00:2b:01:02:03:04:05", "08:00:2b:01:02:03:04:05"),
            ("08:00:2b:01:02:03", "08:00:2b:ff:fe:01:02:03"),
        ],
    ),
    Case(
        "point",
        [
            ("(1.5,-2)", "(1.5,-2)"),
            ("(1e300,-1e-300)", "(1e+300,-1e-300)"),
            ("(NaN,Infinity)", "(NaN,Infinity)"),
            ("(0.1,123456789012345)", "(0.1,123456789012345)"),
            ("(-0,1e15)", "(-0,1e+15)"),
            ("(0.0001,0.00001)", "(0.0001,1e-05)"),
        ],
    ),
    Case("line", [("{1,-1,0}", "{1,-1,0}"), ("{0.5,2,-3.25}", "{0.5,2,-3.25}")]),
    Case("lseg", [("[(0,0),(1,1)]", "[(0,0),(1,1)]")]),
    Case("box", [("(1,1),(0,0)", "(1,1),(0,0)"), ("(0,0),(2.5,1)", "(2.5,1),(0,0)")]),
    Case(
        "path", [("[(0,0),(1,1),(2,0)]", "[(0,0),(1,1),(2,0)]"), ("((0,0),(1,1))", "((0,0),(1,1))")]
    ),
    Case("polygon", [("((0,0),(1,1),(1,0))", "((0,0),(1,1),(1,0))")]),
    Case("circle", [("<(1,2),3>", "<(1,2),3>"), ("<(0.5,-1e20),0.25>", "<(0.5,-1e+20),0.25>")]),
    Case("tid", [("(0,1)", "(0,1)"), ("(4294967295,65535)", "(4294967295,65535)")]),
    Case(
        "pg_lsn",
        [
            ("16/B374D848", "16/B374D848"),
            ("0/0", "0/0"),
            ("FFFFFFFF/FFFFFFFF", "FFFFFFFF/FFFFFFFF"),
        ],
    ),
    Case("mood", [("sad", "sad"), ("with space", "with space"), ('q"uote', 'q"uote')]),
    Case("posint", [("5", 5), ("2147483647", I32_MAX)], codec_type="posint"),
    Case("price", [("1.5", Decimal("1.500")), ("NaN", None)], codec_type="price"),
    Case(
        "intarr",
        [("{1,2}", [1, 2]), ("{{1,NULL},{3,4}}", [1, None, 3, 4]), ("{}", [])],
        codec_type="intarr",
    ),
    Case("int4range", [("[1,10)", "[1,10)"), ("empty", "empty"), ("(,5]", "(,6)"), ("(,)", "(,)")]),
    Case("int8range", [("[-9223372036854775808,0]", "[-9223372036854775808,1)")]),
    Case("numrange", [("[1.5,2.25]", "[1.5,2.25]"), ("(,1e-3)", "(,0.001)")]),
    Case(
        "daterange",
        [
            ("[2020-01-01,infinity)", "[2020-01-01,infinity)"),
            ("[0044-03-15 BC,2020-01-01]", '["0044-03-15 BC",2020-01-02)'),
        ],
    ),
    Case(
        "tsrange",
        [("[2020-01-01,2020-01-02 12:00)", '["2020-01-01 00:00:00","2020-01-02 12:00:00")')],
    ),
    Case(
        "tstzrange",
        [
            ("[2020-01-01 00:00+00,infinity]", '["2020-01-01 00:00:00+00",infinity]'),
            ("[1850-01-01 00:00+00,)", '["1850-01-01 00:00:00+00",)'),
            ("(-infinity,2020-06-01 12:00:00.25+02)", '(-infinity,"2020-06-01 10:00:00.25+00")'),
            ("empty", "empty"),
        ],
    ),
    Case("floatrange", [("[1.5,1e20)", "[1.5,1e+20)"), ("(-0.1,)", "(-0.1,)")]),
    Case(
        "textrange",
        [
            ('["","a b")', '["","a b")'),
            ('["a\\\\b","x""y"]', '["a\\\\b","x""y"]'),
            ("[a,b)", "[a,b)"),
        ],
    ),
    Case("moodrange", [("[sad,happy]", "[sad,happy]")]),
    Case(
        "int4multirange",
        [("{[1,3),[5,7)}", "{[1,3),[5,7)}"), ("{}", "{}"), ("{[1,3), [2,8)}", "{[1,8)}")],
    ),
    Case(
        "tstzmultirange",
        [
            (
                "{[2020-01-01 00:00+00,2020-01-02 00:00+00),[2021-01-01 00:00+00,)}",
                '{["2020-01-01 00:00:00+00","2020-01-02 00:00:00+00"),["2021-01-01 00:00:00+00",)}',
            )
        ],
    ),
    Case("nummultirange", [("{[1.5,2.5],(3,)}", "{[1.5,2.5],(3,)}")]),
    Case("datemultirange", [("{[2020-01-01,2020-02-01)}", "{[2020-01-01,2020-02-01)}")]),
    Case(
        "hstore",
        [
            ('a=>1, "b c"=>NULL, "q\\""=>"\\\\"', {"a": "1", "b c": None, 'q"': "\\"}),
            ("", {}),
            ('"é"=>"ü", ""=>""', {"é": "ü", "": ""}),
        ],
    ),
]


@pytest.fixture(scope="module")
def catalog(pg_conn: Conn) -> PgCatalog:
    pg_conn.execute("SET TimeZone = 'Europe/Amsterdam'")  # text output must not matter
    return PgCatalog(pg_conn)


@pytest.fixture
def session(pg_conn: Conn, request: pytest.FixtureRequest) -> Iterator[Conn]:
    case: Case = request.getfixturevalue("case")
    if case.settings:
        pg_conn.execute(f"SET {case.settings}")
    yield pg_conn
    if case.settings:
        pg_conn.execute(f"RESET {case.settings.split('=')[0]}")


def _type_oid(conn: Conn, sql_type: str) -> int:
    row = conn.execute("SELECT %s::regtype::oid", (sql_type,)).fetchone()
    assert row is not None
    return int(row[0])


def _check(codec: ColumnCodec, text: bytes | None, binary: bytes | None, expected: Any) -> None:
    assert text is not None and binary is not None
    assert codec.from_binary is not None, f"{codec.pg_type_name} cannot decode binary"
    from_text, from_binary = codec.from_text(text), codec.from_binary(binary)
    assert canon(from_text) == canon(from_binary), (text, binary)
    assert canon(from_text) == canon(expected), text
    avro_check(["null", codec.avro_schema]).assert_roundtrip(from_text)


@pytest.mark.parametrize(
    "case",
    CASES,
    ids=[f"{c.sql_type}-{c.options.timestamptz_mode}-{c.options.numeric_mode}" for c in CASES],
)
def test_scalar_and_array_values(catalog: PgCatalog, session: Conn, case: Case) -> None:
    """Scalars, a 1-D array with a NULL, a 2-D array read at depth 2 and 1, a 1-D array read
    at depth 2 and an empty array — for every type."""
    t = case.sql_type
    n = len(case.values)
    items = ", ".join(f"${i + 1}::{t}" for i in range(n))
    grid = f"ARRAY[[$1::{t}, NULL::{t}], [${n}::{t}, $1::{t}]]"
    sql = (
        f"SELECT {items}, ARRAY[{items}, NULL::{t}], {grid}, {grid}, ARRAY[{items}], '{{}}'::{t}[]"
    )
    params = [literal for literal, _ in case.values]
    texts, types = fetch_raw(session, sql, params, binary=False)
    binaries, _ = fetch_raw(session, sql, params, binary=True)
    expected = [e for _, e in case.values]
    scalar_oid = _type_oid(session, case.codec_type) if case.codec_type else types[0][0]
    first, last = expected[0], expected[-1]
    columns = [
        *[(scalar_oid, 1, e) for e in expected],
        (types[n][0], 1, [*expected, None]),
        (types[n + 1][0], 2, [[first, None], [last, first]]),
        (types[n + 2][0], 1, [first, None, last, first]),
        (types[n + 3][0], 2, [expected]),
        (types[n + 4][0], 3, []),
    ]
    typed = replace(case.options, array_mode="typed")  # nested arrays, decimal elements
    for i, (oid, ndims, want) in enumerate(columns):
        options = case.options if i < n else typed
        codec = column_codec(oid, types[i][1], catalog, options, ndims=ndims)
        _check(codec, texts[i], binaries[i], want)
    # avro.array_mode portable (the default): decimal elements as their text, 2-D as text.
    array = column_codec(types[n][0], types[n][1], catalog, case.options)
    element = column_codec(types[n][0], types[n][1], catalog, typed).type.element
    assert element is not None
    elements: list[Any] = list(expected)
    if element.wire == Wire.DECIMAL:  # PostgreSQL's text, NaN included
        elements = [None if t is None else t.decode() for t in texts[:n]]
    elif element.wire == Wire.MONEY:  # the numeric text, not the locale's
        elements = [str(e) for e in expected]
    _check(array, texts[n], binaries[n], [*elements, None])
    grid_codec = column_codec(types[n + 1][0], types[n + 1][1], catalog, case.options, ndims=2)
    as_is = "bytea_output" not in case.settings  # escape: printed as hex by the bridge
    _check_array_text(grid_codec, texts[n + 1], binaries[n + 1], as_is)


# Elements whose PostgreSQL text depends on the session (TimeZone, bytea_output): the
# bridge prints them as with TimeZone=UTC and bytea_output=hex.
_SESSION_TEXT = (Wire.TIMESTAMPTZ, Wire.TIMESTAMPTZ_ISO, Wire.RANGE_UTC, Wire.MULTIRANGE_UTC)


def _check_array_text(
    codec: ColumnCodec, text: bytes | None, binary: bytes | None, as_is: bool
) -> None:
    """A 2-D array under array_mode portable: PostgreSQL's text of it, from text (as it
    arrives, or re-rendered for session-dependent elements) and from binary alike."""
    assert text is not None and binary is not None
    assert codec.avro_schema == {"type": "string", "pg.type": codec.pg_type_name}
    element = codec.type.element
    assert element is not None
    from_text = codec.from_text(text)
    if as_is and element.wire not in _SESSION_TEXT:
        assert from_text == text.decode()
    if codec.supports_binary:
        assert from_text == codec.from_binary(binary), (text, binary)
    avro_check(["null", codec.avro_schema]).assert_roundtrip(from_text)


@pytest.mark.parametrize(
    ("sql_type", "literal"),
    [
        ("regclass", "pg_class"),
        ("tsvector", "a fat:2 cat"),
        ("float4range", "[1.5,2)"),
        ("int2vector", "1 2 3"),
    ],
)
def test_types_without_binary_decoder_keep_text(
    catalog: PgCatalog, pg_conn: Conn, sql_type: str, literal: str
) -> None:
    """Unknown types travel as their text form; the codec says binary cannot be decoded."""
    sql = f"SELECT $1::{sql_type}, ARRAY[$1::{sql_type}, NULL]"
    (text, array_text), types = fetch_raw(pg_conn, sql, [literal], binary=False)
    codec = column_codec(_type_oid(pg_conn, sql_type), -1, catalog)
    array_codec = column_codec(types[1][0], -1, catalog)
    assert not codec.supports_binary and not array_codec.supports_binary
    assert text is not None and array_text is not None
    assert codec.from_text(text) == text.decode()
    assert array_codec.from_text(array_text) == [text.decode(), None]
    assert codec.avro_schema["type"] == "string"
    assert codec.avro_schema["pg.type"] == codec.pg_type_name
    avro_check(["null", codec.avro_schema]).assert_roundtrip(text.decode())


def test_a_composite_reads_the_same_in_binary_as_in_text(catalog: PgCatalog, pg_conn: Conn) -> None:
    """A composite's record_send bytes are printed as record_out prints them (test_render has
    the shapes), so a composite column no longer has to travel as text."""
    sql = "SELECT $1::pair"
    (text,), _ = fetch_raw(pg_conn, sql, ['(1,"x y")'], binary=False)
    (raw,), _ = fetch_raw(pg_conn, sql, ['(1,"x y")'], binary=True)
    codec = column_codec(_type_oid(pg_conn, "pair"), -1, catalog)
    assert codec.supports_binary and text is not None and raw is not None
    assert codec.from_binary(raw) == codec.from_text(text) == text.decode()


def test_enum_schema_lists_labels(catalog: PgCatalog, pg_conn: Conn) -> None:
    codec = column_codec(_type_oid(pg_conn, "mood"), -1, catalog)
    assert codec.avro_schema == {
        "type": "string",
        "pg.type": "public.mood",
        "connect.name": "io.debezium.data.Enum",
        "connect.version": 1,
        "connect.parameters": {"allowed": 'sad,ok,happy,with space,q"uote'},
        "pg.enum.labels": ["sad", "ok", "happy", "with space", 'q"uote'],
    }


def test_domain_schema_names_base_and_domain(catalog: PgCatalog, pg_conn: Conn) -> None:
    codec = column_codec(_type_oid(pg_conn, "price"), -1, catalog)
    assert codec.avro_schema == {
        "type": "bytes",
        "logicalType": "decimal",
        "precision": 8,
        "scale": 3,
        "connect.name": "org.apache.kafka.connect.data.Decimal",
        "connect.version": 1,
        "connect.parameters": {"scale": "3", "connect.decimal.precision": "8"},
        "pg.type": "numeric",
        "pg.domain": "public.price",
    }
    assert codec.may_be_null


def test_multidimensional_schema_nests_arrays(catalog: PgCatalog) -> None:
    codec = column_codec(1007, -1, catalog, CodecOptions(array_mode="typed"), ndims=3)
    assert codec.avro_schema == {
        "type": "array",
        "items": {
            "type": "array",
            "items": {"type": "array", "items": ["null", {"type": "int", "pg.type": "int4"}]},
        },
        "pg.type": "_int4",
    }
