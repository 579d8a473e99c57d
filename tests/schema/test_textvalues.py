"""Text-format parsers: encoders that follow the server's output functions, plus edge cases."""

from __future__ import annotations

import datetime
import struct
from collections.abc import Callable
from decimal import Decimal
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bridge.encode import binvalues as bv
from bridge.encode import textvalues as tv
from bridge.encode.temporal import (
    PG_EPOCH_US,
    clamp_us,
    format_offset,
    format_time,
    format_timestamp,
)


def hstore_text(pairs: dict[str, str | None]) -> str:
    """hstore_out: "key"=>"value" joined by ", ", backslash before " and \\, NULL bare."""

    def quote(text: str) -> str:
        return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'

    return ", ".join(f"{quote(k)}=>{'NULL' if v is None else quote(v)}" for k, v in pairs.items())


def hstore_binary(pairs: dict[str, str | None]) -> bytes:
    out = struct.pack(">i", len(pairs))
    for key, value in pairs.items():
        out += struct.pack(">i", len(key.encode())) + key.encode()
        out += (
            struct.pack(">i", -1)
            if value is None
            else struct.pack(">i", len(value.encode())) + value.encode()
        )
    return out


@given(st.dictionaries(st.text(), st.none() | st.text()))
def test_hstore_text_and_binary(pairs: dict[str, str | None]) -> None:
    assert tv.parse_hstore(hstore_text(pairs)) == pairs
    assert bv.parse_hstore(hstore_binary(pairs)) == pairs


def bytea_escape(data: bytes) -> str:
    """byteaout with bytea_output=escape: printable ASCII as is, \\\\ for backslash, else \\ooo."""
    out = []
    for b in data:
        if b == 0x5C:
            out.append("\\\\")
        elif 0x20 <= b < 0x7F:
            out.append(chr(b))
        else:
            out.append(f"\\{b:03o}")
    return "".join(out)


@given(st.binary())
def test_bytea_escape_and_hex_forms(data: bytes) -> None:
    assert tv.parse_bytea(bytea_escape(data)) == data
    assert tv.parse_bytea("\\x" + data.hex()) == data


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("$1,234.56", Decimal("1234.56")),
        ("-$1,234.56", Decimal("-1234.56")),
        ("($0.05)", Decimal("-0.05")),
        ("1.234,56 €", Decimal("1234.56")),
        ("$0.00", Decimal("0.00")),
    ],
)
def test_money_reads_digits_as_cents(text: str, expected: Decimal) -> None:
    got = tv.parse_money(text)
    assert got == expected and got.as_tuple().exponent == -2


def test_interval_infinity_and_units() -> None:
    assert tv.parse_interval("infinity") == bv.parse_interval(
        struct.pack(">qii", 2**63 - 1, 2**31 - 1, 2**31 - 1)
    )
    assert tv.parse_interval("-infinity") == bv.parse_interval(
        struct.pack(">qii", -(2**63), -(2**31), -(2**31))
    )
    assert tv.parse_interval("1 mon -1 days +00:00:00.000001") == {
        "months": 1,
        "days": -1,
        "micros": 1,
    }


@pytest.mark.parametrize(
    ("parser", "text"),
    [
        (tv.parse_interval, "1 fortnight"),
        (tv.parse_interval, "1 year 2"),
        (tv.parse_interval, "00:00:00.1234567"),
        (tv.parse_time, "12:34"),
        (tv.parse_time, "12-34-56"),
        (tv.parse_time, "12:34:56.1234567"),
        (tv.parse_date, "2020/01/01"),
        (tv.parse_timestamp, "2020-01-01"),
        (tv.parse_timestamptz, "2020-01-01 00:00:00"),
        (tv.parse_timestamptz, "2020-01-01 00:00:00+1"),
        (tv.parse_hstore, '"a"=>"b" "c"=>"d"'),
        (tv.parse_hstore, '"a"=>b'),
        (tv.parse_bool, "true"),
        (tv.parse_money, "free"),
    ],
)
def test_malformed_text_raises_value_error(parser: object, text: str) -> None:
    assert callable(parser)
    with pytest.raises((ValueError, IndexError, KeyError)):
        parser(text)


def test_float4_text_rounds_to_single_precision() -> None:
    assert tv.parse_float4("1.1") == bv.parse_float4(struct.pack(">f", 1.1))
    assert tv.parse_float4("Infinity") == float("inf")


def test_decimal_special_values() -> None:
    assert tv.parse_decimal("NaN") is None
    assert tv.parse_decimal("-Infinity") is None
    assert tv.parse_variable_decimal("Infinity") is None
    assert tv.parse_variable_decimal("-1.50") == {
        "scale": 2,
        "value": (-150).to_bytes(2, "big", signed=True),
    }


@given(
    st.integers(-(2**62), 2**62),
    st.integers(-57599, 57599) | st.sampled_from([0, 3600, -19800, 1172]),
)
def test_fast_and_general_timestamp_paths_agree(pg_us: int, east: int) -> None:
    """PostgreSQL-formatted timestamps (any year, BC, offsets with seconds) parse identically
    whether or not they take the fromisoformat shortcut."""
    local = format_timestamp(pg_us, utc=False)
    assert tv.parse_timestamp(local) == tv._parse_timestamp_general(local) == pg_us + PG_EPOCH_US
    date, bc, _ = local.partition(" BC")
    zoned = date + format_offset(east) + (" BC" if bc else "")
    expected = pg_us + PG_EPOCH_US - east * 1_000_000
    assert tv.parse_timestamptz(zoned) == tv.timestamptz_us(zoned) == expected


@given(st.integers(0, 86_400_000_000))
def test_fast_and_exact_time_paths_agree(micros: int) -> None:
    text = format_time(micros)
    assert tv.parse_time(text) == tv._parse_time_exact(text) == micros


@given(
    st.datetimes(datetime.datetime(1, 1, 2), datetime.datetime(9999, 12, 30)),
    st.integers(-57599, 57599) | st.sampled_from([0, 3600, -19800, 1172]),
)
def test_digit_by_digit_timestamptz_agrees_with_the_general_parser(
    moment: datetime.datetime, east: int
) -> None:
    """wire_timestamptz reads the common shape from the bytes; it must agree with the
    general parser on every shape the server prints, fraction lengths and offsets too."""
    pg_us = (moment - datetime.datetime(2000, 1, 1)) // datetime.timedelta(microseconds=1)
    zoned = format_timestamp(pg_us, utc=False) + format_offset(east)
    assert tv.wire_timestamptz(zoned.encode()) == clamp_us(tv.timestamptz_us(zoned))


@pytest.mark.parametrize(
    "text",
    [
        "2023-02-29 00:00:00+00",  # no such day
        "2024-13-01 00:00:00+00",
        "2024-01-01 24:00:00+00",
        "2024-01-01 00:00:00.+00",
        "2024-01-01 00:00:00+0",
        "2024-01-01 00:00:00+00:6",
        "2024-01-01 00:00:00+00:60",
        "2024-01-01 00:00:00.1234567+00",
        "2024-01-01 00:00:00 BC+00",
        "2024-01-01T00:00:00+00",
        "2024-0a-01 00:00:00+00",
    ],
)
def test_digit_by_digit_timestamptz_leaves_other_text_to_the_general_parser(text: str) -> None:
    assert _outcome(tv.wire_timestamptz, text.encode()) == _outcome(tv.parse_timestamptz, text)


def _outcome(parse: Callable[..., int], *args: Any) -> object:
    """The parsed value, or the type of the error the parser raised."""
    try:
        return parse(*args)
    except (ValueError, IndexError, KeyError) as exc:
        return type(exc)


@given(st.dates(datetime.date(1, 1, 1), datetime.date(9999, 12, 31)))
def test_digit_by_digit_date_agrees_with_the_general_parser(day: datetime.date) -> None:
    text = day.isoformat()
    assert tv.wire_date(text.encode()) == tv.parse_date(text)
    assert tv.wire_date(text.encode()) == (day - datetime.date(1970, 1, 1)).days


@pytest.mark.parametrize(
    "text",
    [
        "2023-02-29",  # no such day: the general parser decides
        "2024-13-01",
        "2024-00-10",
        "0000-01-01",
        "2024-1-01",
        "2024/01/01",
        "2024-0a-01",
        "0044-03-15 BC",
        "12345-01-01",
        "infinity",
        "-infinity",
        "",
    ],
)
def test_digit_by_digit_date_leaves_other_text_to_the_general_parser(text: str) -> None:
    assert _outcome(tv.wire_date, text.encode()) == _outcome(tv.parse_date, text)


@given(st.integers(-(10**40), 10**40))
def test_digit_by_digit_int_agrees_with_int(value: int) -> None:
    """What the server prints for int2/4/8, oid, xid8 and numeric's unscaled digits,
    either side of the 18 digits read natively."""
    assert tv.parse_int(str(value).encode()) == value


@given(st.binary(max_size=24) | st.text("-+ _0123456789\u0663", max_size=24).map(str.encode))
def test_digit_by_digit_int_leaves_other_text_to_int(text: bytes) -> None:
    assert _outcome(tv.parse_int, text) == _outcome(int, text)


_I64_EDGES = [str(v).encode() for v in (2**63 - 1, 2**63, -(2**63), -(2**63) - 1, 10**18)]


@pytest.mark.parametrize(
    "text",
    [
        b"",
        b"-",
        b"+5",
        b" 7",
        b"7 ",
        b"1_000",
        b"--1",
        b"12a",
        b"9" * 18,
        b"9" * 19,
        b"-" + b"9" * 19,
        b"922337203685477580a",
        b"92233720368547758a7",
        *_I64_EDGES,
    ],
)
def test_int_text_edges(text: bytes) -> None:
    """Either side of the 18 and 19 digits read natively and of the i64's bounds."""
    assert _outcome(tv.parse_int, text) == _outcome(int, text)


def _unscaled_by_splitting(raw: bytes, scale: int) -> int:
    """numeric text times 10**scale, the plain way parse_unscaled must agree with."""
    whole, _, rest = raw.partition(b".")
    if len(rest) > scale:
        raise ValueError("more fraction digits than the scale")
    return int(whole + rest + b"0" * (scale - len(rest)))


_NUMERIC_TEXT = st.builds(
    lambda sign, whole, point, fraction: sign + whole + point + fraction,
    st.sampled_from(["", "-"]),
    st.text("0123456789", max_size=21),
    st.sampled_from(["", "."]),
    st.text("0123456789", max_size=8),
).map(str.encode)


_OTHER_TEXT = st.text("-+.0123456789 _aNIf", max_size=22).map(str.encode)


@given(_NUMERIC_TEXT | _OTHER_TEXT, st.integers(0, 20))
def test_unscaled_numeric_agrees_with_splitting_at_the_point(text: bytes, scale: int) -> None:
    """What the server prints for numeric(p, s), within and past the 18 digits read
    natively, and text it never prints (left to int(), error included)."""
    assert _outcome(tv.parse_unscaled, text, scale) == _outcome(_unscaled_by_splitting, text, scale)


@pytest.mark.parametrize(
    ("text", "scale"),
    [
        (b"1.", 2),
        (b".5", 2),
        (b"-.5", 1),
        (b"-", 2),
        (b".", 2),
        (b"1.2.3", 4),
        (b"NaN", 2),
        (b"-Infinity", 0),
        (b"1.5", 0),
        (b"123456789012345678", 0),
        (b"123456789012345678", 1),
        (b"12345678901234567.8", 1),
        (b"1234567890123456789", 0),
        (b"0.000000000000000001", 18),
        (b"1", 18),
        (b"1", 19),
    ],
)
def test_unscaled_numeric_edges(text: bytes, scale: int) -> None:
    assert _outcome(tv.parse_unscaled, text, scale) == _outcome(_unscaled_by_splitting, text, scale)


@pytest.mark.parametrize("year", [1, 4, 100, 400, 1900, 2000, 2023, 2024, 9999])
def test_valid_date_matches_the_calendar(year: int) -> None:
    for month in range(0, 14):
        for day in range(0, 33):
            try:
                datetime.date(year, month, day)
                real = True
            except ValueError:
                real = False
            assert tv._valid_date(year, month, day) is real, (year, month, day)
