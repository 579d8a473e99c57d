"""Range text quoting/parsing and the binary range renderer."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bridge.encode.binvalues import parse_utf8
from bridge.encode.ranges import (
    bound_escape,
    map_multirange_text,
    map_range_text,
    multirange_renderer,
    range_renderer,
    tstz_bound_utc,
)

bounds = st.none() | st.text(alphabet=st.characters(codec="utf-8", exclude_characters="\x00"))


def range_binary(lower: str | None, upper: str | None, lower_inc: bool, upper_inc: bool) -> bytes:
    flags = (0x02 if lower_inc else 0) | (0x04 if upper_inc else 0)
    flags |= (0x08 if lower is None else 0) | (0x10 if upper is None else 0)
    out = bytes([flags])
    for bound in (lower, upper):
        if bound is not None:
            out += struct.pack(">i", len(bound.encode())) + bound.encode()
    return out


@given(bounds, bounds, st.booleans(), st.booleans())
def test_binary_render_and_text_parse_agree(
    lower: str | None, upper: str | None, lower_inc: bool, upper_inc: bool
) -> None:
    text = range_renderer(parse_utf8)(range_binary(lower, upper, lower_inc, upper_inc))
    seen: list[str] = []

    def record(bound: str) -> str:
        seen.append(bound)
        return bound

    assert map_range_text(record)(text) == text
    assert seen == [b for b in (lower, upper) if b is not None]
    assert text[0] == ("[" if lower_inc else "(") and text[-1] == ("]" if upper_inc else ")")


@given(st.lists(st.tuples(bounds, bounds), max_size=4))
def test_multirange_render_and_parse_agree(ranges: list[tuple[str | None, str | None]]) -> None:
    parts = [range_binary(lo, hi, True, False) for lo, hi in ranges]
    data = struct.pack(">i", len(parts)) + b"".join(struct.pack(">i", len(p)) + p for p in parts)
    text = multirange_renderer(parse_utf8)(data)
    assert map_multirange_text(lambda b: b)(text) == text


@pytest.mark.parametrize(
    ("text", "escaped"),
    [
        ("", '""'),
        ("a", "a"),
        ("a b", '"a b"'),
        ('x"y', '"x""y"'),
        ("a\\b", '"a\\\\b"'),
        ("(", '"("'),
    ],
)
def test_bound_escape(text: str, escaped: str) -> None:
    assert bound_escape(text) == escaped


def test_empty_and_backslash_escaped_bounds() -> None:
    assert range_renderer(parse_utf8)(b"\x01") == "empty"
    assert map_range_text(str.upper)("[a\\,b,c)") == '["A,B",C)'


def test_tstz_bounds_are_rendered_in_utc() -> None:
    assert tstz_bound_utc("2020-06-01 12:00:00.25+02") == "2020-06-01 10:00:00.25+00"
    assert tstz_bound_utc("-infinity") == "-infinity"
    rewrite = map_range_text(tstz_bound_utc)
    assert rewrite('["2020-01-01 01:00:00+01",)') == '["2020-01-01 00:00:00+00",)'


@pytest.mark.parametrize(
    "text", ["[1,2", "1,2)", "[1 2)", "[1,2)x", "{[1,2)", "{[1,2)[3,4)}", "{[1,2)}x"]
)
def test_malformed_range_text(text: str) -> None:
    parse = map_multirange_text(str) if text.startswith("{") else map_range_text(str)
    with pytest.raises((ValueError, IndexError)):
        parse(text)


@pytest.mark.parametrize(
    "data",
    [
        b"\x01\x00",
        b"\x02\x00\x00\x00\x09abc",
        b"\x18\x00",
        b"\x00\x00\x00\x00\x01a\x00\x00\x00\x01",
    ],
)
def test_malformed_range_binary(data: bytes) -> None:
    with pytest.raises((ValueError, struct.error)):
        range_renderer(parse_utf8)(data)


@pytest.mark.parametrize(
    "data",
    [b"\xff\xff\xff\xff", b"\x00\x00\x00\x01\x00\x00\x00\x00", b"\x00\x00\x00\x00x"],
)
def test_malformed_multirange_binary(data: bytes) -> None:
    with pytest.raises((ValueError, struct.error)):
        multirange_renderer(parse_utf8)(data)
