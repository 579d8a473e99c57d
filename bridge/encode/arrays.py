"""Arrays of any supported element type and dimensionality -> nested Avro arrays.

Avro needs a fixed nesting depth, but PostgreSQL does not enforce an array
column's declared dimensions, so each column gets a depth D (pg_attribute.attndims,
at least 1) and every value is reshaped to exactly D levels:
- a value with D dimensions becomes D nested lists (row-major, like PostgreSQL);
- fewer dimensions are wrapped in singleton outer lists ({1,2} at D=2 -> [[1,2]]);
- more dimensions have their outermost levels concatenated ({{1,2},{3,4}} at D=1
  -> [1,2,3,4]); the innermost D-1 levels always keep their shape;
- empty arrays are [] at any depth.
Lower bounds ("[0:2]={...}") are not carried. Elements are nullable.

Arrays written as PostgreSQL's text (avro.array_mode portable, 2+ dimensions) keep the
value's own shape and lower bounds: `binary_array_text` prints array_send's bytes as
array_out does, `map_array_text` re-renders the elements of array_out's text.
"""

from __future__ import annotations

import re
import struct
from collections.abc import Callable
from math import prod
from typing import Any

MAX_DIMS = 6  # PostgreSQL's MAXDIM
_HEAD = struct.Struct(">iiI")
_I32 = struct.Struct(">i")
_HEAD_DIM = struct.Struct(">ii")  # one dimension: size, lower bound
_BACKSLASH = re.compile(r"\\(.)", re.S)
_SKIP = object()
_ARRAY_SPACE = " \t\n\r\v\f"  # array_isspace(); str.strip() would also eat \x1c-\x1f
_NEEDS_QUOTES = frozenset('"\\{}' + _ARRAY_SPACE)  # array_out quotes these (and the delimiter)


def reshape(items: list[Any], dims: int, depth: int) -> list[Any]:
    if dims == 0:
        return []
    while dims > depth:
        items = [item for sub in items for item in sub]
        dims -= 1
    while dims < depth:
        items = [items]
        dims += 1
    return items


def text_array_parser(
    delim: str, elem: Callable[[str], Any], depth: int
) -> Callable[[str], list[Any]]:
    """array_out's text: braces, `delim`-separated elements, "quoted" with backslash escapes,
    unquoted NULL for null elements."""
    d = re.escape(delim)
    token = re.compile(rf'"((?:[^"\\]|\\.)*)"|([{{}}])|({d})|([^"{{}}{d}]+)', re.S)

    def parse(text: str) -> list[Any]:
        if text[0] == "[":  # dimension decoration: [lo:hi][lo:hi]={...}
            text = text[text.index("=") + 1 :]
        if text[0] == "{" and text[-1] == "}" and '"' not in text and text.find("{", 1) == -1:
            inner = text[1:-1]
            if not inner:
                return []
            items = [None if item == "NULL" else elem(item) for item in inner.split(delim)]
            return reshape(items, 1, depth)
        return _parse_general(text, token, elem, depth)

    return parse


# Complex on purpose (C901): one pass over PostgreSQL's array text: quoting, escapes, nesting and
# NULL.
def _parse_general(  # noqa: C901
    text: str, token: re.Pattern[str], elem: Callable[[str], Any], depth: int
) -> list[Any]:
    stack: list[list[Any]] = []
    scalars: list[bool] = []  # per open level: holds elements (PostgreSQL arrays are regular)
    root: list[Any] | None = None
    dims = pos = 0
    for match in token.finditer(text):
        if match.start() != pos or root is not None:
            raise ValueError(f"malformed array text at {pos}")
        pos = match.end()
        quoted, brace, _delim, bare = match.groups()
        if brace == "{":
            if len(stack) == MAX_DIMS:
                raise ValueError(f"array nested deeper than {MAX_DIMS}")
            child: list[Any] = []
            if stack:
                if scalars[-1]:
                    raise ValueError(f"sub-array beside elements at {match.start()}")
                stack[-1].append(child)
            stack.append(child)
            scalars.append(False)
        elif brace == "}":
            done = stack.pop()
            scalars.pop()
            if not stack:
                root = done
        else:
            value = _element(quoted, bare, elem)
            if value is _SKIP:
                continue
            if not stack:
                raise ValueError(f"array element outside braces at {match.start()}")
            if (stack[-1] and not scalars[-1]) or (dims and dims != len(stack)):
                raise ValueError(f"irregular array: element at {match.start()}")
            dims = len(stack)
            scalars[-1] = True
            stack[-1].append(value)
    if root is None or pos != len(text):
        raise ValueError("unterminated array text")
    return reshape(root, dims, depth)


def _element(quoted: str | None, bare: str | None, elem: Callable[[str], Any]) -> Any:
    """The converted element, or _SKIP for a delimiter or whitespace between tokens."""
    if quoted is not None:
        return elem(_BACKSLASH.sub(r"\1", quoted) if "\\" in quoted else quoted)
    value = bare.strip(_ARRAY_SPACE) if bare is not None else ""
    if not value:
        return _SKIP
    return None if value == "NULL" else elem(value)


# Complex on purpose (C901): array_recv's header checks, each a distinct malformed-input error.
def binary_array_parser(elem: Callable[[bytes], Any], depth: int) -> Callable[[bytes], list[Any]]:  # noqa: C901
    """array_send: int32 ndim, int32 has-nulls, uint32 element OID, (int32 size, int32 lower
    bound) per dimension, then int32-length-prefixed elements (-1 = NULL) in row-major order."""

    def parse(data: bytes) -> list[Any]:
        ndim, _, _ = _HEAD.unpack_from(data)
        end = len(data)
        if ndim == 0 and end == 12:
            return []
        if not 0 < ndim <= MAX_DIMS:
            raise ValueError(f"bad array dimension count {ndim}")
        sizes = [_I32.unpack_from(data, 12 + 8 * i)[0] for i in range(ndim)]
        if min(sizes) < 1:
            raise ValueError(f"bad array dimensions {sizes}")
        pos = 12 + 8 * ndim
        items: list[Any] = []
        for _ in range(prod(sizes)):
            (length,) = _I32.unpack_from(data, pos)
            pos += 4
            if length == -1:
                items.append(None)
                continue
            if length < 0 or pos + length > end:
                raise ValueError(f"bad array element length {length} at {pos - 4}")
            items.append(elem(data[pos : pos + length]))
            pos += length
        if pos != end:
            raise ValueError(f"{end - pos} trailing bytes after array")
        if ndim > depth:
            sizes = [prod(sizes[: ndim - depth + 1]), *sizes[ndim - depth + 1 :]]
        for size in reversed(sizes[1:]):
            items = [items[i : i + size] for i in range(0, len(items), size)]
        return reshape(items, len(sizes), depth)

    return parse


def element_literal(item: str, delim: str) -> str:
    """array_out's form of one element's text: quoted (with backslash escapes) when empty,
    "NULL" in any case, or holding a quote, backslash, brace, space or the delimiter."""
    if item and item.upper() != "NULL" and not any(c in _NEEDS_QUOTES or c == delim for c in item):
        return item
    return '"' + item.replace("\\", "\\\\").replace('"', '\\"') + '"'


def array_literal(items: list[Any], delim: str = ",") -> str:
    """array_out's text of nested lists of element texts (None: NULL)."""
    out = []
    for item in items:
        if isinstance(item, list):
            out.append(array_literal(item, delim))
        else:
            out.append("NULL" if item is None else element_literal(item, delim))
    return "{" + delim.join(out) + "}"


def binary_array_text(render: Callable[[bytes], str], delim: str) -> Callable[[bytes], str]:
    """array_send's bytes -> array_out's text, each element printed by `render`; the
    dimension decoration ("[0:1][1:2]=") when a lower bound is not 1, as array_out."""
    parsers = [binary_array_parser(render, depth) for depth in range(1, MAX_DIMS + 1)]

    def text(data: bytes) -> str:
        (ndim,) = _I32.unpack_from(data)
        items = parsers[min(max(ndim, 1), MAX_DIMS) - 1](data)  # checks the header
        body = array_literal(items, delim)
        bounds = [_HEAD_DIM.unpack_from(data, 12 + 8 * i) for i in range(max(ndim, 0))]
        if all(lower == 1 for _, lower in bounds):
            return body
        return "".join(f"[{lower}:{lower + size - 1}]" for size, lower in bounds) + "=" + body

    return text


def map_array_text(delim: str, fn: Callable[[str], str]) -> Callable[[str], str]:
    """array_out's text with every non-NULL element replaced by `fn` of its text and
    quoted again as array_out would; shape and dimension decoration kept."""
    d = re.escape(delim)
    token = re.compile(rf'"((?:[^"\\]|\\.)*)"|([^"{{}}{d}]+)', re.S)

    def element(match: re.Match[str]) -> str:
        quoted, bare = match.groups()
        if quoted is None:
            value = bare.strip(_ARRAY_SPACE)
            if not value or value == "NULL":
                return bare
        else:
            value = _BACKSLASH.sub(r"\1", quoted) if "\\" in quoted else quoted
        return element_literal(fn(value), delim)

    def rewrite(text: str) -> str:
        start = text.index("=") + 1 if text[0] == "[" else 0
        return text[:start] + token.sub(element, text[start:])

    return rewrite
