"""A table with a column of every supported PostgreSQL type, and how to check its Avro values.

Used by tests/test_types_e2e.py. Each `Col` lists input literals (ordinary and edge
values) and says how a psycopg value SELECTed from PostgreSQL maps to the documented
Avro value (docs/concepts/types.md): `RAW` gives the value on the wire with the
temporal logical types as numbers, `PLAIN` what confluent-kafka's AvroDeserializer
returns.
"""

from __future__ import annotations

import datetime as dt
import struct
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NamedTuple

from psycopg import sql
from psycopg.adapt import Buffer, Loader
from psycopg.pq import Format
from psycopg.types.datetime import DateLoader, TimeLoader, TimestampLoader, TimestamptzLoader

SETUP = """
CREATE EXTENSION hstore;
CREATE EXTENSION citext;
CREATE TYPE mood AS ENUM ('sad', 'ok', 'with space', 'q"uote');
CREATE DOMAIN posint AS int4 CHECK (VALUE > 0);
CREATE DOMAIN price AS numeric(8,3);
CREATE DOMAIN intarr AS int4[];
CREATE TYPE pair AS (a int4, b text);
CREATE TYPE floatrange AS RANGE (subtype = float8);
CREATE TYPE textrange AS RANGE (subtype = text, collation = "C");
CREATE TYPE float4range AS RANGE (subtype = float4);
"""
INT32_MAX, INT64_MAX = 2**31 - 1, 2**63 - 1
EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
US = dt.timedelta(microseconds=1)


class Special(NamedTuple):
    """A value Python's datetime cannot hold: the number the bridge writes with
    avro.out_of_range sentinel (`avro`) and by default (`clamped`, with `plain` the
    clamped value as Python reads it), and PostgreSQL's text of it (`text`)."""

    avro: int
    clamped: int
    plain: Any
    text: str


_MAX_DAY, _MIN_DAY = 2_932_896, -719_162  # 9999-12-31, 0001-01-01
_MAX_US, _MIN_US = (_MAX_DAY + 1) * 86_400_000_000 - 1, _MIN_DAY * 86_400_000_000
_DATE_SPECIAL = {
    b"infinity": Special(INT32_MAX, _MAX_DAY, dt.date.max, "infinity"),
    b"-infinity": Special(-INT32_MAX - 1, _MIN_DAY, dt.date.min, "-infinity"),
}
_TS_SPECIAL = {
    b"infinity": Special(INT64_MAX, _MAX_US, dt.datetime.max, "infinity"),
    b"-infinity": Special(-INT64_MAX - 1, _MIN_US, dt.datetime.min, "-infinity"),
}
_MIN_TZ_US, _MAX_TZ_US = _MIN_US + 2 * 86_400_000_000, _MAX_US - 86_400_000_000
_TSTZ_SPECIAL = {
    b"infinity": Special(
        INT64_MAX, _MAX_TZ_US, dt.datetime(9999, 12, 30, 23, 59, 59, 999_999), "infinity"
    ),
    b"-infinity": Special(-INT64_MAX - 1, _MIN_TZ_US, dt.datetime(1, 1, 3), "-infinity"),
}
_TIME_SPECIAL = {b"24:00:00": Special(86_400_000_000, 86_399_999_999, dt.time.max, "24:00:00")}


class _Date(DateLoader):
    def load(self, data: Buffer) -> Any:
        return _DATE_SPECIAL.get(bytes(data)) or super().load(data)


class _Time(TimeLoader):
    def load(self, data: Buffer) -> Any:
        return _TIME_SPECIAL.get(bytes(data)) or super().load(data)


class _Timestamp(TimestampLoader):
    def load(self, data: Buffer) -> Any:
        return _TS_SPECIAL.get(bytes(data)) or super().load(data)


class _Timestamptz(TimestamptzLoader):
    """Values within a day of years 1 and 9999 are clamped further inside (pgtypes)."""

    def load(self, data: Buffer) -> Any:
        special = _TSTZ_SPECIAL.get(bytes(data))
        if special is not None:
            return special
        value = super().load(data)
        us = (value - EPOCH) // US
        if _MIN_TZ_US <= us <= _MAX_TZ_US:
            return value
        clamped = min(max(us, _MIN_TZ_US), _MAX_TZ_US)
        plain = dt.datetime(1970, 1, 1) + dt.timedelta(microseconds=clamped)
        return Special(us, clamped, plain, bytes(data).decode())


class _IntervalFields(Loader):
    """The server's own interval fields (binary µs, days, months), which psycopg's
    timedelta would merge."""

    format = Format.BINARY

    def load(self, data: Buffer) -> Any:
        micros, days, months = struct.unpack(">qii", data)
        return {"months": months, "days": days, "micros": micros}


LOADERS: dict[str, type[Loader]] = {
    "date": _Date,
    "time": _Time,
    "timestamp": _Timestamp,
    "timestamptz": _Timestamptz,
    "interval": _IntervalFields,
}


def _float4(v: float) -> float:
    return float(struct.unpack("f", struct.pack("f", v))[0])


def _utc(v: dt.datetime) -> dt.datetime:
    return v if v.tzinfo else v.replace(tzinfo=dt.UTC)


def _temporal(micros: Callable[[Any], int]) -> Callable[[Any], Any]:
    return lambda v: v.avro if isinstance(v, Special) else micros(v)


def _clamped(micros: Callable[[Any], int]) -> Callable[[Any], Any]:
    return lambda v: v.clamped if isinstance(v, Special) else micros(v)


def _plain(convert: Callable[[Any], Any], tz: bool) -> Callable[[Any], Any]:
    def plain(v: Any) -> Any:
        if not isinstance(v, Special):
            return convert(v)
        if tz and isinstance(v.plain, dt.datetime):
            return v.plain.replace(tzinfo=dt.UTC)
        return v.plain

    return plain


def _time_us(v: dt.time) -> int:
    return ((v.hour * 60 + v.minute) * 60 + v.second) * 1_000_000 + v.microsecond


def _same(v: Any) -> Any:
    return v


# How values are written with avro.out_of_range sentinel (Debezium's int32/int64 extremes).
SENTINEL_RAW: dict[str, Callable[[Any], Any]] = {
    "same": _same,
    "text": _same,  # selected as the type's text output
    "interval": _same,  # selected as {months, days, micros}
    "money": _same,  # selected as numeric
    "xint": int,  # xid, cid, xid8: psycopg returns their text
    "float4": _float4,
    "decimal": lambda v: None if v.is_nan() else v,
    "date": _temporal(lambda v: (v - dt.date(1970, 1, 1)).days),
    "time": _temporal(_time_us),
    "timestamp": _temporal(lambda v: (_utc(v) - EPOCH) // US),
    "local": _temporal(lambda v: (_utc(v) - EPOCH) // US),
}
# By default (avro.out_of_range clamp): values outside 0001..9999 and 24:00 clamped.
RAW: dict[str, Callable[[Any], Any]] = {
    **SENTINEL_RAW,
    "date": _clamped(lambda v: (v - dt.date(1970, 1, 1)).days),
    "time": _clamped(_time_us),
    "timestamp": _clamped(lambda v: (_utc(v) - EPOCH) // US),
    "local": _clamped(lambda v: (_utc(v) - EPOCH) // US),
}
# What confluent-kafka's AvroDeserializer returns, by default (timestamp: a naive
# local-timestamp-micros) and with avro.timestamp_mode instant (`INSTANT_PLAIN`).
PLAIN: dict[str, Callable[[Any], Any]] = {
    **RAW,
    "date": _plain(_same, False),
    "time": _plain(_same, False),
    "timestamp": _plain(_utc, True),
    "local": _plain(_same, False),
}
INSTANT_PLAIN: dict[str, Callable[[Any], Any]] = {**PLAIN, "local": _plain(_utc, True)}


@dataclass(frozen=True)
class Col:
    name: str
    sql_type: str
    values: tuple[str, ...]  # input literals, all non-NULL
    kind: str  # key of RAW/PLAIN
    avro: str  # the field's non-null Avro type: logicalType, else type or record name
    binary: bool = True  # has a binary decoder
    array: bool = True  # also a column `<name>_arr` of `<sql_type>[]`
    base: str = ""  # a domain's base type: psycopg reads arrays of domains as plain text


_TS = ("1970-01-01 00:00:00", "1969-12-31 23:59:59.999999", "2000-02-29 12:34:56.123456",
       "0001-01-01 00:00:00", "9999-12-31 23:59:59.999999")  # fmt: skip
_INF = ("infinity", "-infinity")
# fmt: off
COLUMNS = (
    Col("c_bool", "bool", ("true", "false"), "same", "boolean"),
    Col("c_int2", "int2", ("0", "-32768", "32767"), "same", "int"),
    Col("c_int4", "int4", ("0", "-2147483648", "2147483647"), "same", "int"),
    Col("c_int8", "int8", ("0", "-9223372036854775808", "9223372036854775807"), "same", "long"),
    Col("c_float4", "float4", ("0", "-0", "1.5", "3.4028235e38", "1e-45", "0.1", "NaN",
        "Infinity", "-Infinity"), "float4", "float"),
    Col("c_float8", "float8", ("0", "-0", "0.1", "1.7976931348623157e308", "5e-324",
        "-2.5e-300", "NaN", "Infinity", "-Infinity"), "same", "double"),
    Col("c_dec", "numeric(12,2)", ("0", "-0.01", "9999999999.99", "-9999999999.99", "1.5",
        "NaN"), "decimal", "decimal"),
    Col("c_dec_neg", "numeric(5,-2)", ("12300", "-9999900"), "decimal", "decimal"),
    Col("c_dec_small", "numeric(3,5)", ("0.00123", "-0.00999"), "decimal", "decimal"),
    Col("c_num", "numeric", ("0", "-1.5", "0.00000000000000000001", "NaN", "Infinity",
        "-Infinity", "123456789012345678901234567890.123456789"), "text", "string"),
    Col("c_money", "money", ("0", "1.5", "-92233720368547758.08", "92233720368547758.07"),
        "money", "decimal"),
    Col("c_text", "text", ("", "plain", "ünïcødé ✓ 😀", "quote \" ' \\ backslash",
        "line\nbreak\ttab", "NULL", "{a,b}"), "text", "string"),
    Col("c_varchar", "varchar(20)", ("", "abc", "ü✓"), "text", "string"),
    Col("c_bpchar", "char(5)", ("ab", "", "abcde", "ü"), "text", "string"),
    Col("c_name", "name", ("pg_class", "with space"), "text", "string"),
    Col("c_citext", "citext", ("MiXeD", ""), "text", "string"),
    Col("c_char", '"char"', ("a", '"', ""), "text", "string"),
    Col("c_bytea", "bytea", ("\\x", "\\x00ff", "\\x" + bytes(range(256)).hex(), "plain"),
        "same", "bytes"),
    Col("c_uuid", "uuid", ("00000000-0000-0000-0000-000000000000",
        "FFFFFFFF-FFFF-FFFF-FFFF-FFFFFFFFFFFF", "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11"),
        "same", "uuid"),
    Col("c_json", "json", ('{"a": [1, 2.50, "x"]}', "null", '"ü ✓"', "[]", ' {"s" : true} '),
        "text", "string"),
    Col("c_jsonb", "jsonb", ('{"b": 1, "a": [true, null]}', "null", '"ü ✓"', "{}", "1e40"),
        "text", "string"),
    Col("c_xml", "xml", ('<a x="1">t&amp;</a>', "text only", ""), "text", "string"),
    Col("c_date", "date", ("2024-02-29", "1970-01-01", "1969-12-31", "0001-01-01",
        "9999-12-31", *_INF), "date", "date"),
    Col("c_time", "time", ("00:00:00", "23:59:59.999999", "12:34:56.5", "24:00:00"),
        "time", "time-micros"),
    Col("c_timetz", "timetz", ("00:00:00+00", "23:59:59.999999-15:59", "12:00:00+05:30",
        "24:00:00-15:59"), "text", "string"),
    Col("c_ts", "timestamp", (*_TS, *_INF), "local", "local-timestamp-micros"),
    Col("c_tstz", "timestamptz", (*(f"{t}+00" for t in _TS), "2020-06-01 12:00:00+02", *_INF),
        "timestamp", "timestamp-micros"),
    Col("c_interval", "interval", ("0", "1 year 2 mons 3 days 04:05:06.789",
        "-1 years -2 mons +3 days -04:05:06", "178000000 years", "-178000000 years",
        "1 day -00:00:00.000001", "2562047788:00:54.775807", "-2562047788:00:54.775807"),
        "interval", "bridge.pg.Interval"),
    Col("c_inet", "inet", ("192.168.0.1", "192.168.0.1/24", "::1", "2001:db8::ff00:42:8329/64",
        "::ffff:1.2.3.4", "0.0.0.0/0"), "text", "string"),
    Col("c_cidr", "cidr", ("10.0.0.0/8", "2001:db8::/32", "0.0.0.0/0", "192.168.1.128/25"),
        "text", "string"),
    Col("c_macaddr", "macaddr", ("08:00:2b:01:02:03", "ff:ff:ff:ff:ff:ff"), "text", "string"),
    Col("c_macaddr8", "macaddr8", ("08:00:2b:01:02:03:04:05", "08:00:2b:01:02:03"),
        "text", "string"),
    Col("c_bit", "bit(4)", ("1010", "0000"), "text", "string"),
    Col("c_varbit", "varbit", ("", "1", "101010101010101010101"), "text", "string"),
    Col("c_mood", "mood", ("sad", "with space", 'q"uote'), "text", "string"),
    Col("c_posint", "posint", ("1", "2147483647"), "same", "int", base="int4"),
    Col("c_price", "price", ("12345.678", "-0.001", "0"), "decimal", "decimal",
        base="numeric"),
    Col("c_int4range", "int4range", ("[1,10)", "empty", "(,5]", "(,)"), "text", "string"),
    Col("c_int8range", "int8range", ("[-9223372036854775808,9223372036854775807)", "empty"),
        "text", "string"),
    Col("c_numrange", "numrange", ("[1.5,2.5]", "(,)", "(-Infinity,Infinity)"), "text", "string"),
    Col("c_tsrange", "tsrange", ('["2020-01-01 00:00:00",infinity)', "empty"), "text", "string"),
    Col("c_tstzrange", "tstzrange", ("[2020-01-01 00:00:00+05:30,2020-01-02 00:00:00+00)",
        "(,infinity]", "[-infinity,1970-01-01 00:00:00.000001+00]"), "text", "string"),
    Col("c_daterange", "daterange", ("[2020-01-01,2020-02-01)", "[2020-01-01,2020-01-01]",
        "(-infinity,infinity)"), "text", "string"),
    Col("c_floatrange", "floatrange", ("[-1.5,2.25]", "(,Infinity)"), "text", "string"),
    Col("c_textrange", "textrange", ('["a b","c,d"]', '(,"")', "[\\\\,z]"), "text", "string"),
    Col("c_int4multi", "int4multirange", ("{}", "{[1,3), [5,7)}", "{(,)}"), "text", "string"),
    Col("c_nummulti", "nummultirange", ("{[1.5,2.5]}",), "text", "string"),
    Col("c_tstzmulti", "tstzmultirange", ("{[2020-01-01 00:00:00+00,2020-01-02 00:00:00+03)}",),
        "text", "string"),
    Col("c_datemulti", "datemultirange", ("{[2020-01-01,2020-02-01), [2021-01-01,infinity)}",),
        "text", "string"),
    Col("c_hstore", "hstore", ('a=>1, "b c"=>NULL, "q\\"uote"=>"x,y"', ""), "same", "map"),
    Col("c_point", "point", ("(1.5,-2)", "(0,0)", "(1e+300,-1e-300)"), "text", "string"),
    Col("c_line", "line", ("{1,-1,0}", "{0,1,-2.5}"), "text", "string"),
    Col("c_lseg", "lseg", ("[(0,0),(1,1)]",), "text", "string"),
    Col("c_box", "box", ("(1,1),(0,0)", "(2.5,3),(-1,-1)"), "text", "string"),
    Col("c_path", "path", ("[(0,0),(1,1),(2,0)]", "((0,0),(1,1))"), "text", "string"),
    Col("c_polygon", "polygon", ("((0,0),(1,0),(1,1))",), "text", "string"),
    Col("c_circle", "circle", ("<(0,0),1.5>",), "text", "string"),
    Col("c_oid", "oid", ("0", "4294967295"), "same", "long"),
    Col("c_xid", "xid", ("0", "4294967295"), "xint", "long"),
    Col("c_cid", "cid", ("0", "4294967295"), "xint", "long"),
    Col("c_xid8", "xid8", ("0", "9223372036854775807"), "xint", "long"),
    Col("c_pg_lsn", "pg_lsn", ("0/0", "FFFFFFFF/FFFFFFFF", "16/B374D848"), "text", "string"),
    Col("c_tid", "tid", ("(0,1)", "(4294967295,65535)"), "text", "string"),
    Col("c_int4_2d", "int4[][]", ("{{1,NULL},{3,4}}", "{}", "{{-2147483648}}"), "same",
        "array<array<int>>", array=False),
    Col("c_text_2d", "text[][]", ('{{"a,b",NULL},{"","\\"q\\""}}', '{{"NULL"}}'), "same",
        "array<array<string>>", array=False),
    Col("c_intarr", "intarr", ("{1,NULL,3}", "{}"), "same", "array<int>", array=False),
    Col("c_pair", "pair", ("(1,x)", '(,"a b")'), "text", "string"),
    # text mode only: no binary decoder, as documented
    Col("c_tsvector", "tsvector", ("'a' 'b':1",), "text", "string", binary=False),
    Col("c_float4range", "float4range", ("[1.5,2.5)",), "text", "string", binary=False),
)
# fmt: on
ROWS = max(len(c.values) for c in COLUMNS) + 1  # the last row is all NULL


class Field(NamedTuple):
    name: str
    col: Col
    is_array: bool


def fields(binary: bool) -> list[Field]:
    out = []
    for col in COLUMNS:
        if col.binary or not binary:
            out.append(Field(col.name, col, False))
            if col.array:
                out.append(Field(f"{col.name}_arr", col, True))
    return out


def _lit(value: str, sql_type: str) -> sql.Composable:
    return sql.SQL("{}::{}").format(sql.Literal(value), sql.SQL(sql_type))


def column_ddl(field: Field) -> sql.Composable:
    suffix = "[]" if field.is_array else ""
    return sql.SQL("{} {}").format(sql.Identifier(field.name), sql.SQL(field.col.sql_type + suffix))


def cell(field: Field, row: int) -> sql.Composable:
    """A scalar column's row n is its n-th value; an array column holds the first half of
    the values and a NULL in row 0, the rest in row 1, nothing in row 2, then NULL."""
    values, sql_type = field.col.values, field.col.sql_type
    if not field.is_array:
        return _lit(values[row], sql_type) if row < len(values) else sql.SQL("NULL")
    if row > 2:
        return sql.SQL("NULL")
    half = (len(values) + 1) // 2
    rows: list[list[str | None]] = [[*values[:half], None], list(values[half:]), []]
    items = rows[row]
    if not items:
        return _lit("{}", sql_type + "[]")
    elems = [sql.SQL("NULL") if v is None else _lit(v, sql_type) for v in items]
    return sql.SQL("ARRAY[{}]::{}").format(sql.SQL(", ").join(elems), sql.SQL(sql_type + "[]"))


def expected_expr(field: Field) -> sql.Composable:
    """SELECT expression whose psycopg value maps through RAW/PLAIN to the field's value.

    Text-mapped types use format('%s', x), which is the type's output function (a ::text
    cast is not: it trims bpchar and adds the netmask to inet)."""
    c, kind = sql.Identifier(field.name), field.col.kind
    base_array = field.is_array and field.col.base
    if kind == "interval":
        return sql.SQL("NULL")  # read with the binary loader, in a second query
    if kind == "money":
        return sql.SQL("{}::numeric" + ("[]" if field.is_array else "")).format(c)
    if kind != "text":
        return sql.SQL("{}::{}[]").format(c, sql.SQL(field.col.base)) if base_array else c
    if not field.is_array:
        return sql.SQL("CASE WHEN {c} IS NULL THEN NULL ELSE format('%s', {c}) END").format(c=c)
    return sql.SQL(  # subscripts, not unnest(): unnest() spreads a composite into columns
        "CASE WHEN {c} IS NULL THEN NULL ELSE COALESCE((SELECT array_agg(CASE WHEN {c}[i] "
        "IS NULL THEN NULL ELSE format('%s', {c}[i]) END ORDER BY i) "
        "FROM generate_subscripts({c}, 1) AS i), '{{}}') END"
    ).format(c=c)


def deep(fn: Callable[[Any], Any], value: Any) -> Any:
    if value is None:
        return None
    if isinstance(value, list):
        return [deep(fn, v) for v in value]
    return fn(value)


def specials(value: Any) -> list[str]:
    """PostgreSQL's text of each special value in a selected value (arrays: all)."""
    if isinstance(value, list):
        return [t for v in value for t in specials(v)]
    return [value.text] if isinstance(value, Special) else []


def has_special(value: Any) -> bool:
    if isinstance(value, list):
        return any(has_special(v) for v in value)
    return isinstance(value, Special)


def tag(schema: Any) -> str:
    """A short name of an Avro schema's non-null branch, e.g. "array<timestamp-micros>"."""
    if isinstance(schema, list):
        return tag(next(s for s in schema if s != "null"))
    if isinstance(schema, str):
        return schema
    kind = schema["type"]
    if kind == "array":
        return f"array<{tag(schema['items'])}>"
    if kind == "record":
        return f"{schema['namespace']}.{schema['name']}"
    return str(schema.get("logicalType", kind))
