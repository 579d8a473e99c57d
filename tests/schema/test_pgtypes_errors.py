"""Malformed value bytes: every converter either returns a value or raises ValueConversionError."""

from __future__ import annotations

import contextlib

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bridge.encode.columns import ColumnCodec, column_codec
from bridge.errors import ConfigError, ValueConversionError
from bridge.schema import BUILTIN_TYPES, CodecOptions, PgType, StaticCatalog

EXTRA = [
    PgType(90001, "citext", "public"),
    PgType(90002, "hstore", "public"),
    PgType(90003, "mood", "public", "e", enum_labels=("a", "b")),
    PgType(90004, "_hstore", "public", "a", elem_oid=90002),
    PgType(90005, "floatrange", "public", "r", range_subtype=701),
    PgType(90006, "posint", "public", "d", base_oid=23),
    PgType(90007, "pair", "public", "c", fields=(23, 25)),
    PgType(90008, "stamped", "public", "c", fields=(23, 1184)),
]
CATALOG = StaticCatalog(EXTRA)
OPTIONS = [
    CodecOptions(),
    CodecOptions(timestamptz_mode="iso", numeric_mode="double"),
    CodecOptions(numeric_mode="variable"),
]


def _codecs() -> list[ColumnCodec]:
    codecs = [column_codec(oid, -1, CATALOG) for oid in sorted(BUILTIN_TYPES)]
    codecs += [column_codec(t.oid, -1, CATALOG) for t in EXTRA]
    codecs += [
        column_codec(oid, -1, CATALOG, o) for o in OPTIONS[1:] for oid in (1184, 1700, 1231, 1185)
    ]
    codecs += [
        column_codec(1700, (10 << 16 | 2) + 4, CATALOG),
        column_codec(1007, -1, CATALOG, ndims=3),
        column_codec(1007, -1, CATALOG, CodecOptions(array_mode="typed"), ndims=3),
    ]
    return codecs


CODECS = _codecs()
IDS = [f"{c.pg_type_name}-{c.avro_schema.get('type')}" for c in CODECS]


@pytest.mark.parametrize("codec", CODECS, ids=IDS)
@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=st.binary(max_size=48))
def test_random_bytes_never_escape_as_other_errors(codec: ColumnCodec, data: bytes) -> None:
    for convert in (codec.from_text, codec.from_binary):
        if convert is None:
            continue
        with contextlib.suppress(ValueConversionError):
            convert(data)


@pytest.mark.parametrize(
    ("oid", "data", "reason"),
    [
        (23, b"\x00\x00\x01", "int4: error"),
        (1700, b"\x00\x01\x00\x00\x00\x00\x00\x00", "numeric: error"),
        (
            1700,
            b"\x00\x01\x00\x00\x12\x34\x00\x00\x00\x01",
            "numeric: ValueError: bad numeric header",
        ),
        (
            1700,
            b"\x00\x01\x00\x00\x00\x00\x00\x00\x27\x10",
            "numeric: ValueError: bad numeric digit",
        ),
        (3802, b"\x02{}", "jsonb: ValueError: unsupported jsonb format version"),
        (2950, b"\x00" * 15, "uuid: ValueError: uuid needs 16 bytes"),
        (25, b"\xff", "text: UnicodeDecodeError"),
        (
            90002,
            b"\x00\x00\x00\x01\x00\x00\x00\x09a",
            "public.hstore: ValueError: bad hstore key length",
        ),
        (90002, b"\xff\xff\xff\xff", "public.hstore: ValueError: negative hstore pair count"),
        (
            1007,
            b"\x00\x00\x00\x09\x00\x00\x00\x00\x00\x00\x00\x17",
            "_int4: ValueError: bad array dimension",
        ),
    ],
)
def test_malformed_binary_names_type_and_reason(oid: int, data: bytes, reason: str) -> None:
    codec = column_codec(oid, -1, CATALOG)
    assert codec.from_binary is not None
    with pytest.raises(ValueConversionError) as caught:
        codec.from_binary(data)
    assert caught.value.value == data
    named = f"{caught.value.pg_type}: {caught.value.reason}"
    assert named.startswith(reason.replace(": error", ":"))


@pytest.mark.parametrize(
    ("oid", "text"),
    [
        (23, b"12x"),
        (701, b"fast"),
        (16, b"yes"),
        (1082, b"2020-13"),
        (1186, b"1 eon"),
        (1007, b"{1,2"),
        (25, b"\xc3"),
    ],
)
def test_malformed_text_is_a_value_error(oid: int, text: bytes) -> None:
    with pytest.raises(ValueConversionError, match=BUILTIN_TYPES[oid].name):
        column_codec(oid, -1, CATALOG).from_text(text)


def test_bad_options_are_config_errors() -> None:
    with pytest.raises(ConfigError, match="timestamptz_mode"):
        CodecOptions(timestamptz_mode="seconds")
    with pytest.raises(ConfigError, match="numeric_mode"):
        CodecOptions(numeric_mode="float")


def test_binary_support_is_reported() -> None:
    assert column_codec(23, -1, CATALOG).supports_binary
    assert column_codec(90007, -1, CATALOG).supports_binary  # record_send, printed
    assert not column_codec(90008, -1, CATALOG).supports_binary  # timestamptz: session text
    assert not column_codec(30, -1, CATALOG).supports_binary  # oidvector: opaque
    assert column_codec(90006, -1, CATALOG).avro_schema == {
        "type": "int",
        "pg.type": "int4",
        "pg.domain": "public.posint",
    }
