"""Randomised bulk checks: thousands of server-produced values, text vs binary vs expected.

Inputs are generated here, PostgreSQL produces both wire forms, and the column codecs
must turn each pair into the same, independently computed, value.
"""

from __future__ import annotations

import random
import struct
from collections.abc import Callable
from decimal import Decimal, localcontext
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bridge.encode.binvalues import numeric_fields, parse_timestamp, signed_be
from bridge.encode.columns import column_codec
from bridge.encode.temporal import INT64_MAX, INT64_MIN, PG_EPOCH_US, clamp_us
from bridge.schema import DEFAULT_OPTIONS, CodecOptions, StaticCatalog

from .helpers import Conn, canon, fetch_column, text_array_literal

DAY_US = 86_400_000_000
MIN_DAY, MAX_DAY = -2_440_550, 106_741_000  # 4713-01-01 BC .. ~294,000 AD (timestamp range)
CATALOG = StaticCatalog()


def _check_all(
    conn: Conn,
    sql: str,
    literals: list[str],
    type_oid: int,
    expected: list[Any],
    typmod: int = -1,
    options: CodecOptions = DEFAULT_OPTIONS,
) -> None:
    param = [text_array_literal(literals)]
    texts = fetch_column(conn, sql, param, binary=False)
    binaries = fetch_column(conn, sql, param, binary=True)
    codec = column_codec(type_oid, typmod, CATALOG, options)
    assert codec.from_binary is not None
    for text, binary, want in zip(texts, binaries, expected, strict=True):
        got = codec.from_text(text)
        assert canon(got) == canon(codec.from_binary(binary)), text
        assert canon(got) == canon(want), text


def _random_decimals(
    rng: random.Random, count: int, max_digits: int, max_scale: int
) -> list[Decimal]:
    values = []
    for _ in range(count):
        scale = rng.randint(0, max_scale)
        digits = rng.randint(
            1, max_digits - (max_scale - scale) if max_digits > max_scale else max_digits
        )
        unscaled = rng.randrange(10 ** (digits - 1), 10**digits) * rng.choice([1, -1])
        if rng.random() < 0.1:
            unscaled = 0
        values.append(Decimal(f"{unscaled}E-{scale}"))
    return values


def test_unconstrained_numeric_in_every_mode(pg_conn: Conn) -> None:
    values = _random_decimals(random.Random(10), 1500, 80, 40)
    literals = [format(v, "f") for v in values]
    sql = "SELECT x::numeric FROM unnest($1::text[]) x"
    _check_all(pg_conn, sql, literals, 1700, literals)
    _check_all(
        pg_conn,
        sql,
        literals,
        1700,
        [float(v) for v in values],
        options=CodecOptions(numeric_mode="double"),
    )
    variable = []
    for v in values:
        sign, digits, exp = v.as_tuple()
        assert isinstance(exp, int)
        unscaled = int("".join(map(str, digits))) * (-1 if sign else 1)
        size = unscaled.bit_length() // 8 + 1
        variable.append({"scale": -exp, "value": unscaled.to_bytes(size, "big", signed=True)})
    _check_all(
        pg_conn, sql, literals, 1700, variable, options=CodecOptions(numeric_mode="variable")
    )


def test_constrained_numeric_keeps_the_column_scale(pg_conn: Conn) -> None:
    values = _random_decimals(random.Random(11), 1500, 30, 12)
    literals = [format(v, "f") for v in values]
    with localcontext() as ctx:
        ctx.prec = 60
        expected = [v.quantize(Decimal(1).scaleb(-12)) for v in values]
    typmod = (30 << 16 | 12) + 4
    _check_all(
        pg_conn,
        "SELECT x::numeric(30,12) FROM unnest($1::text[]) x",
        literals,
        1700,
        expected,
        typmod,
    )


def test_money_reads_cents(pg_conn: Conn) -> None:
    rng = random.Random(12)
    cents = [rng.randint(-(2**63), 2**63 - 1) for _ in range(500)] + [0, 1, -1, 99, -100]
    literals = [format(Decimal(c).scaleb(-2), "f") for c in cents]
    expected = [Decimal(f"{c}E-2") for c in cents]
    _check_all(
        pg_conn, "SELECT x::numeric::money FROM unnest($1::text[]) x", literals, 790, expected
    )


def _moments(rng: random.Random, count: int) -> list[tuple[int, int]]:
    """(days since 1970, µs in day) spread over the whole timestamp range."""
    moments = [(rng.randint(MIN_DAY, MAX_DAY), rng.randrange(DAY_US)) for _ in range(count)]
    moments += [
        (rng.randint(-800_000, 30_000), rng.choice([0, 1, DAY_US - 1])) for _ in range(count // 4)
    ]
    return moments


# Arithmetic on timestamp (no zone), so DST rules cannot shift the expected instant.
_MOMENT = (
    "('1970-01-01 00:00:00'::timestamp + (split_part(x, ' ', 1) || ' days')::interval"
    " + (split_part(x, ' ', 2) || ' microseconds')::interval)"
)


@pytest.mark.parametrize(
    ("expr", "oid", "expect"),
    [
        ("{}", 1114, lambda d, u: d * DAY_US + u),
        ("{} AT TIME ZONE 'UTC'", 1184, lambda d, u: d * DAY_US + u),
        ("{}::date", 1082, lambda d, u: d),
    ],
)
def test_datetimes_over_the_whole_range(
    pg_conn: Conn, expr: str, oid: int, expect: Callable[[int, int], int]
) -> None:
    """timestamptz text comes in a zone with historical LMT offsets (seconds included)."""
    pg_conn.execute("SET TimeZone = 'Europe/Amsterdam'")
    moments = _moments(random.Random(13), 1200)
    literals = [f"{d} {u}" for d, u in moments]
    sql = f"SELECT {expr.format(_MOMENT)} FROM unnest($1::text[]) x"
    _check_all(pg_conn, sql, literals, oid, [expect(d, u) for d, u in moments])


def test_timestamptz_iso_mode_over_the_whole_range(pg_conn: Conn) -> None:
    pg_conn.execute("SET TimeZone = 'Asia/Kolkata'")
    moments = _moments(random.Random(14), 800)
    literals = [f"{d} {u}" for d, u in moments]
    sql = f"SELECT {_MOMENT} AT TIME ZONE 'UTC' FROM unnest($1::text[]) x"
    iso = CodecOptions(timestamptz_mode="iso")
    param = [text_array_literal(literals)]
    texts = fetch_column(pg_conn, sql, param, binary=False)
    binaries = fetch_column(pg_conn, sql, param, binary=True)
    codec = column_codec(1184, -1, CATALOG, iso)
    assert codec.from_binary is not None
    for text, binary in zip(texts, binaries, strict=True):
        got = codec.from_text(text)
        assert got == codec.from_binary(binary)
        assert got.endswith("Z") and "T" in got


def test_intervals(pg_conn: Conn) -> None:
    rng = random.Random(15)
    parts = [
        (
            rng.randint(-(2**31) + 1, 2**31 - 1),
            rng.randint(-(2**31) + 1, 2**31 - 1),
            rng.randint(-(2**50), 2**50),
        )
        for _ in range(1000)
    ]
    parts += [
        (0, 0, 0),
        (1, 0, 0),
        (0, 1, 0),
        (0, 0, 1),
        (-1, -1, -1),
        (12, 0, 0),
        (13, 0, 500_000),
    ]
    literals = [f"{m} mons {d} days {u} microseconds" for m, d, u in parts]
    expected = [{"months": m, "days": d, "micros": u} for m, d, u in parts]
    _check_all(
        pg_conn,
        "SELECT x::interval FROM unnest($1::text[]) x",
        literals,
        1186,
        expected,
        options=CodecOptions(interval_mode="record"),  # its fields, not the ISO text
    )


def test_numeric_fields_of_special_values() -> None:
    assert numeric_fields(b"\x00\x00\x00\x00\xc0\x00\x00\x00") == "NaN"
    assert numeric_fields(b"\x00\x00\x00\x00\xd0\x00\x00\x00") == "Infinity"
    assert numeric_fields(b"\x00\x00\x00\x00\xf0\x00\x00\x00") == "-Infinity"


def test_dates_over_the_whole_date_range(pg_conn: Conn) -> None:
    rng = random.Random(16)
    days = [rng.randint(MIN_DAY, 2_145_042_905) for _ in range(1500)] + [MIN_DAY, 2_145_042_905]
    sql = "SELECT '1970-01-01'::date + x::int4 FROM unnest($1::text[]) x"
    _check_all(pg_conn, sql, [str(d) for d in days], 1082, days)


@given(
    st.one_of(
        st.integers(-(2**63), 2**63 - 1),
        st.integers(2**63 - 1 - PG_EPOCH_US - 2, 2**63 - 1),  # where the sum leaves the i64
    )
)
def test_binary_timestamps_are_clamped_as_the_text_ones(pg_us: int) -> None:
    """parse_timestamp's i64 arithmetic against the unbounded sum, clamped."""
    sentinel = pg_us in (INT64_MAX, INT64_MIN)
    want = pg_us if sentinel else clamp_us(pg_us + PG_EPOCH_US)
    assert parse_timestamp(struct.pack(">q", pg_us)) == want


@given(st.integers(-(2**63), 2**63 - 1), st.sampled_from([2, 4, 8]))
def test_signed_be_reads_what_struct_packs(n: int, size: int) -> None:
    n = n >> (64 - 8 * size)  # into the size's range
    assert signed_be(struct.pack({2: ">h", 4: ">i", 8: ">q"}[size], n), size) == n
    with pytest.raises(ValueError, match=f"{size} bytes expected"):
        signed_be(b"\x00" * (size + 1), size)
