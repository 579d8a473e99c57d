"""Array text and binary parsers against encoders that follow array_out / array_send."""

from __future__ import annotations

import struct
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bridge.encode.arrays import (
    array_literal,
    binary_array_parser,
    binary_array_text,
    map_array_text,
    reshape,
    text_array_parser,
)
from bridge.encode.binvalues import parse_utf8
from bridge.encode.textvalues import identity

_SPECIAL = set('"\\{}') | set(" \t\n\r\v\f")


def encode_text_element(value: str | None, delim: str) -> str:
    """array_out's quoting: quote empty, NULL-lookalike and special-character elements."""
    if value is None:
        return "NULL"
    if value == "" or value.upper() == "NULL" or any(c in _SPECIAL or c == delim for c in value):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return value


def encode_text(value: list[Any], delim: str) -> str:
    parts = (
        encode_text(v, delim) if isinstance(v, list) else encode_text_element(v, delim)
        for v in value
    )
    return "{" + delim.join(parts) + "}"


def shape_of(value: Any) -> list[int]:
    shape = []
    while isinstance(value, list):
        shape.append(len(value))
        value = value[0] if value else None
    return shape


def flatten(value: Any) -> list[Any]:
    return [x for v in value for x in flatten(v)] if isinstance(value, list) else [value]


def encode_binary(value: list[Any]) -> bytes:
    shape = shape_of(value) if value else []
    items = flatten(value) if value else []
    out = struct.pack(">iiI", len(shape), int(None in items), 25)
    for size in shape:
        out += struct.pack(">ii", size, 1)
    for item in items:
        out += (
            struct.pack(">i", -1)
            if item is None
            else struct.pack(">i", len(item.encode())) + item.encode()
        )
    return out


elements = st.one_of(
    st.none(), st.text(), st.sampled_from(["NULL", "null", "", " ", "a,b", "{x}", '"', "\\"])
)


@st.composite
def arrays(draw: st.DrawFn) -> list[Any]:
    shape = draw(st.lists(st.integers(1, 3), min_size=1, max_size=4))

    def build(dims: list[int]) -> list[Any]:
        if len(dims) == 1:
            return [draw(elements) for _ in range(dims[0])]
        return [build(dims[1:]) for _ in range(dims[0])]

    return build(shape)


@given(arrays(), st.sampled_from([",", ";"]), st.integers(1, 4))
def test_text_and_binary_parsers_agree_with_encoders(
    value: list[Any], delim: str, depth: int
) -> None:
    expected = reshape(value, len(shape_of(value)), depth)
    from_text = text_array_parser(delim, identity, depth)(encode_text(value, delim))
    from_binary = binary_array_parser(parse_utf8, depth)(encode_binary(value))
    assert from_text == expected
    assert from_binary == expected


@given(arrays(), st.sampled_from([",", ";"]))
def test_array_text_as_array_out_prints_it(value: list[Any], delim: str) -> None:
    """avro.array_mode portable writes an array as PostgreSQL's text: from binary (the
    elements rendered) and from text with re-rendered elements, shape kept."""
    expected = encode_text(value, delim)
    assert array_literal(value, delim) == expected
    assert binary_array_text(parse_utf8, delim)(encode_binary(value)) == expected
    assert map_array_text(delim, identity)(expected) == expected
    upper = map_array_text(delim, str.upper)(expected)
    assert upper == encode_text(_mapped(value, str.upper), delim)


def _mapped(value: Any, fn: Any) -> Any:
    if isinstance(value, list):
        return [_mapped(v, fn) for v in value]
    return None if value is None else fn(value)


def test_array_text_keeps_lower_bounds() -> None:
    """array_out prints "[lower:upper]" per dimension when a lower bound is not 1."""
    binary = struct.pack(">iiI", 2, 0, 23) + struct.pack(">iiii", 2, 0, 1, 1)
    binary += b"".join(struct.pack(">i4s", 4, n.to_bytes(4, "big")) for n in (7, 8))
    render = binary_array_text(lambda b: str(int.from_bytes(b, "big")), ",")
    assert render(binary) == "[0:1][1:1]={{7},{8}}"
    assert render(struct.pack(">iiI", 0, 0, 23)) == "{}"
    rewrite = map_array_text(",", lambda t: t + "0")
    assert rewrite("[0:1][1:1]={{7},{NULL}}") == "[0:1][1:1]={{70},{NULL}}"


@pytest.mark.parametrize(
    ("dims", "depth", "expected"),
    [
        (0, 2, []),
        (1, 1, [1, 2, 3, 4]),
        (1, 3, [[[1, 2, 3, 4]]]),
        (2, 1, [1, 2, 3, 4]),
    ],
)
def test_reshape(dims: int, depth: int, expected: list[Any]) -> None:
    value: list[Any] = [[1, 2], [3, 4]] if dims == 2 else [1, 2, 3, 4] if dims == 1 else []
    assert reshape(value, dims, depth) == expected


def test_three_dimensions_keep_inner_shape_when_folded() -> None:
    text = "{{{1,2},{3,4}},{{5,6},{7,8}}}"
    assert text_array_parser(",", int, 2)(text) == [[1, 2], [3, 4], [5, 6], [7, 8]]
    binary = struct.pack(">iiI", 3, 0, 23) + struct.pack(">ii", 2, 1) * 3
    binary += b"".join(struct.pack(">ii", 4, n) for n in range(1, 9))
    assert binary_array_parser(lambda b: struct.unpack(">i", b)[0], 2)(binary) == [
        [1, 2],
        [3, 4],
        [5, 6],
        [7, 8],
    ]


def test_dimension_decoration_and_whitespace() -> None:
    parse = text_array_parser(",", int, 1)
    assert parse("[0:2]={1,2,3}") == [1, 2, 3]
    assert parse("[1:2][1:1]={{1},{2}}") == [1, 2]
    assert parse('{ 1 , "2" ,NULL }') == [1, 2, None]


@pytest.mark.parametrize(
    "text",
    ["{1,2", "1,2}", "{1}{2}", '{"1}', "{{{{{{{1}}}}}}}", "{1}x", "}", "{{1},2}x"],
)
def test_malformed_text_raises_value_error(text: str) -> None:
    with pytest.raises((ValueError, IndexError)):
        text_array_parser(",", int, 1)(text)


@pytest.mark.parametrize(
    "data",
    [
        struct.pack(">iiI", 7, 0, 23),
        struct.pack(">iiI", -1, 0, 23),
        struct.pack(">iiIii", 1, 0, 23, 0, 1),
        struct.pack(">iiIiii", 1, 0, 23, 1, 1, 4) + b"\x00\x00",
        struct.pack(">iiIiii", 1, 0, 23, 1, 1, -5),
        struct.pack(">iiIii", 1, 0, 23, 1, 1) + struct.pack(">i", -1) + b"x",
        struct.pack(">iiI", 0, 0, 23) + b"x",
    ],
)
def test_malformed_binary_raises(data: bytes) -> None:
    with pytest.raises((ValueError, struct.error)):
        binary_array_parser(parse_utf8, 1)(data)
