"""Binary -> PostgreSQL text rendering, checked in bulk against the server's own output."""

from __future__ import annotations

import math
import random
import struct

import pytest

from bridge.encode import render as rd

from .helpers import Conn, fetch_column, fetch_raw, text_array_literal


def _server_pairs(conn: Conn, sql: str, literals: list[str]) -> list[tuple[bytes, bytes]]:
    """(text output, binary output) of `sql` for each input literal ($1 is a text[])."""
    param = [text_array_literal(literals)]
    texts = fetch_column(conn, sql, param, binary=False)
    binaries = fetch_column(conn, sql, param, binary=True)
    assert len(texts) == len(literals)
    return list(zip(texts, binaries, strict=True))


def _random_doubles(rng: random.Random, count: int) -> list[float]:
    values = [0.0, -0.0, math.nan, math.inf, -math.inf, 5e-324, 1.7976931348623157e308]
    for exp in range(-7, 18):
        values += [10.0**exp, 9.999999 * 10.0 ** (exp - 1), -(10.0**exp) * 1.5]
    while len(values) < count:
        bits = rng.getrandbits(64)
        value = struct.unpack(">d", bits.to_bytes(8, "big"))[0]
        if rng.random() < 0.3:
            value = round(rng.uniform(-1e6, 1e6), rng.randint(0, 8))
        if not math.isnan(value):
            values.append(value)
    return values


def _literal(value: float) -> str:
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    return repr(value)


def test_float8_text_matches_float8out(pg_conn: Conn) -> None:
    values = _random_doubles(random.Random(1), 3000)
    pairs = _server_pairs(
        pg_conn, "SELECT x::float8 FROM unnest($1::text[]) x", list(map(_literal, values))
    )
    for text, binary in pairs:
        assert rd.render_float8(binary) == text.decode()


def _random_ipv6(rng: random.Random) -> str:
    words = [rng.choice([0, 0, 0, 1, 0xFFFF, rng.getrandbits(16)]) for _ in range(8)]
    if rng.random() < 0.2:
        words[:6] = [0, 0, 0, 0, 0, rng.choice([0, 0xFFFF])]
    return ":".join(f"{w:x}" for w in words)


@pytest.mark.parametrize("cast", ["x::inet", "network(x::inet)"])
def test_inet_and_cidr_match_server_output(pg_conn: Conn, cast: str) -> None:
    rng = random.Random(2)
    literals = []
    for _ in range(1500):
        if rng.random() < 0.3:
            addr = ".".join(str(rng.randint(0, 255)) for _ in range(4))
            literals.append(f"{addr}/{rng.randint(0, 32)}")
        else:
            literals.append(
                f"{_random_ipv6(rng)}/{rng.choice([128, 128, 64, rng.randint(0, 128)])}"
            )
    pairs = _server_pairs(pg_conn, f"SELECT {cast} FROM unnest($1::text[]) x", literals)
    for text, binary in pairs:
        assert rd.render_inet(binary) == text.decode()


def test_bit_strings_match_server_output(pg_conn: Conn) -> None:
    rng = random.Random(3)
    literals = ["".join(rng.choice("01") for _ in range(n)) for n in range(0, 80)]
    for text, binary in _server_pairs(
        pg_conn, "SELECT x::varbit FROM unnest($1::text[]) x", literals
    ):
        assert rd.render_bit(binary) == text.decode()


def test_timetz_tid_and_lsn_match_server_output(pg_conn: Conn) -> None:
    rng = random.Random(4)
    times = []
    for _ in range(500):
        us = rng.randint(0, 86_400_000_000)
        zone = rng.choice([0, 3600, -19800, 20700, rng.randint(-57599, 57599)])
        sign = "-" if zone < 0 else "+"
        hours, rest = divmod(abs(zone), 3600)
        clock = f"{us // 3_600_000_000}:{us // 60_000_000 % 60}:{us // 1_000_000 % 60}"
        times.append(
            f"{clock}.{us % 1_000_000:06d}{sign}{hours:02d}:{rest // 60:02d}:{rest % 60:02d}"
        )
    for text, binary in _server_pairs(pg_conn, "SELECT x::timetz FROM unnest($1::text[]) x", times):
        assert rd.render_timetz(binary) == text.decode()
    tids = [f"({rng.getrandbits(32)},{rng.getrandbits(16)})" for _ in range(200)]
    for text, binary in _server_pairs(pg_conn, "SELECT x::tid FROM unnest($1::text[]) x", tids):
        assert rd.render_tid(binary) == text.decode()
    lsns = [f"{rng.getrandbits(32):x}/{rng.getrandbits(32):X}" for _ in range(200)]
    for text, binary in _server_pairs(pg_conn, "SELECT x::pg_lsn FROM unnest($1::text[]) x", lsns):
        assert rd.render_pg_lsn(binary) == text.decode()


def test_char_renders_every_byte(pg_conn: Conn) -> None:
    """ASCII as itself, NUL as "", bytes >= 0x80 as \\ooo (PostgreSQL 15's charout)."""
    sql = 'SELECT (b::int4)::"char" FROM generate_series(-128, 127) b'
    texts = fetch_column(pg_conn, sql, [], binary=False)
    binaries = fetch_column(pg_conn, sql, [], binary=True)
    assert len(texts) == 256
    for text, binary in zip(texts, binaries, strict=True):
        assert rd.render_char(binary) == text.decode()


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"\x02\x20\x00\x04\x01\x02\x03\x04\x05", "inet address length"),
        (b"\x09\x20\x00\x04\x01\x02\x03\x04", "bad inet family"),
        (b"\x00\x00\x00\x09\xff", "bit string of 9 bits"),
        (b"\x01\x00\x00\x00\x02" + b"\x00" * 16, "2 points need"),
        (b"ab", '"char" needs at most 1 byte'),
    ],
)
def test_render_rejects_inconsistent_lengths(data: bytes, message: str) -> None:
    renderer = {
        "inet": rd.render_inet,
        "bad ": rd.render_inet,
        "bit ": rd.render_bit,
        "2 po": rd.render_path,
        '"cha': rd.render_char,
    }[message[:4]]
    with pytest.raises(ValueError, match=message):
        renderer(data)


# A schema of its own: the module's database has its own `mood` already.
COMPOSITE_TYPES = """
CREATE SCHEMA rec;
CREATE TYPE rec.mood AS ENUM ('sad', 'o k');
CREATE TYPE rec.inner_t AS (f float8, t text, n numeric, b bool);
CREATE TYPE rec.outer_t AS (i rec.inner_t, arr rec.inner_t[], e rec.mood, es rec.mood[],
                            r int4range, d date, ts timestamp, x bytea, j jsonb, u uuid);
CREATE TYPE rec.dropped_t AS (a int, gone text, c text);
ALTER TYPE rec.dropped_t DROP ATTRIBUTE gone;
CREATE TYPE rec.tz_t AS (a int, at timestamptz);
"""
COMPOSITE_VALUES = [
    (
        "rec.outer_t",
        "ROW(ROW(1.5, 'a', 1.50, true), ARRAY[ROW(NULL, '', 0, false)::rec.inner_t, "
        "NULL], 'o k', '{sad,\"o k\"}', '[1,5)', '2020-01-02', '2020-01-02 03:04:05.5', "
        "'\\x00ff', '{\"k\": [1, \"x\"]}', 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11')::rec.outer_t",
    ),
    (
        "rec.outer_t",
        "ROW(ROW(-0.0, 'quote \" back \\ (par), comma', 'NaN', NULL), '{}', NULL, "
        "NULL, 'empty', 'infinity', '-infinity', '', 'null', NULL)::rec.outer_t",
    ),
    ("rec.outer_t", "ROW(NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL)::rec.outer_t"),
    ("rec.inner_t", "ROW(1e300, E'tab\\there\\nnewline', 123456789.000100, true)::rec.inner_t"),
    ("rec.dropped_t", "ROW(7, 'kept')::rec.dropped_t"),
]


def test_composites_print_as_record_out(pg_conn: Conn) -> None:
    """A composite's binary form (record_send) printed as record_out prints it, through the
    column codec the encoder uses: nested composites, arrays of them, enums, ranges, NULLs,
    quoting, a dropped attribute. A timestamptz attribute (session-dependent text) leaves
    the type without a binary form."""
    from bridge.encode.columns import column_codec  # noqa: PLC0415
    from bridge.schema.catalog import PgCatalog  # noqa: PLC0415

    pg_conn.execute(COMPOSITE_TYPES)
    catalog = PgCatalog(pg_conn)
    for type_name, literal in COMPOSITE_VALUES:
        text = fetch_raw(pg_conn, f"SELECT {literal}", [], False)[0][0]
        binary = fetch_raw(pg_conn, f"SELECT {literal}", [], True)[0][0]
        oid = pg_conn.execute("SELECT %s::regtype::oid", (type_name,)).fetchone()
        assert oid is not None and text is not None and binary is not None
        codec = column_codec(int(oid[0]), -1, catalog)
        assert codec.supports_binary, type_name
        assert codec.from_binary(binary) == text.decode() == codec.from_text(text), literal
    tz = pg_conn.execute("SELECT 'rec.tz_t'::regtype::oid").fetchone()
    assert tz is not None
    assert not column_codec(int(tz[0]), -1, catalog).supports_binary
