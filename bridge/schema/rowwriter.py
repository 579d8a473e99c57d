"""TupleData → Avro key and row bodies in one pass, by a function generated per table version.

The general path (`TableCodec.row` builds a dict, a compiled writer walks it, the key is a
second dict) costs a dict, a lookup and two closure calls per column. Here one function,
generated when the Relation message arrives, reads each column's wire bytes and appends
its Avro encoding: text types whose wire bytes already are the Avro string's bytes are
copied, integers are parsed with int() and zigzag-encoded, anything else goes through the
column's own converter and compiled writer. Code is generated from column positions
only; no identifier from the database reaches the source text.

Anything unusual (a column count that disagrees with the Relation message, an unchanged
TOASTed value, a NULL key column, a value its schema cannot hold) returns None and the
caller takes the general path, which yields the same bytes or the typed error. Equality
with that path is tested byte for byte (tests/schema/test_rowwriter.py).
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Sequence
from typing import Any, Final

from bridge.decode.messages import KIND_BINARY, KIND_NULL, KIND_TEXT
from bridge.errors import SchemaError
from bridge.schema import textvalues as tv
from bridge.schema.fastwriter import compile_value_writer, write_long
from bridge.schema.pgtypes import ColumnCodec
from bridge.schema.table import TableCodec

RowBodies = tuple[bytes, bytes]  # (key record body, or b"" without a key; row record body)
RowWriter = Callable[[bytes, Sequence[bytes | None]], RowBodies | None]
# What a converter or parser may raise on a value it cannot take (pgtypes._BAD_INPUT).
_FALLBACK_ERRORS: Final = (
    ValueError,
    TypeError,
    ArithmeticError,
    AttributeError,
    IndexError,
    KeyError,
    struct.error,
)
_DOUBLE: Final = struct.Struct("<d").pack


def compile_row_writer(table: TableCodec) -> RowWriter | None:
    """The fused writer for `table`, or None if a column's schema is outside fastwriter's."""
    names: dict[str, Any] = {
        "wl": write_long,
        "dbl": _DOUBLE,
        "tz": tv.wire_timestamptz,
        "_ERRORS": _FALLBACK_ERRORS,
    }
    key_slot = {pos: n for n, pos in enumerate(table.key_positions)}
    lines = [
        "def write_row(kinds, values):",
        f"    if len(kinds) != {len(table.relation.columns)}:",
        "        return None",
        "    out = bytearray()",
        "    a = out.append",
        *(f"    k{n} = bytearray()" for n in range(len(key_slot))),
        "    try:",
    ]
    for pos, (index, codec) in enumerate(zip(table.kept, table.codecs, strict=True)):
        try:
            names[f"W{pos}"] = compile_value_writer(codec.avro_schema)
        except SchemaError:
            return None
        names[f"T{pos}"] = codec.from_text
        names[f"P{pos}"] = codec.text_parse
        if codec.text_shape == "decimal":
            names[f"D{pos}"] = _decimal_text(codec.avro_schema)
        names[f"B{pos}"] = codec.from_binary
        slot = key_slot.get(pos)
        key = None if slot is None else (f"k{slot}", codec.may_be_null)
        lines += [
            f"        k = kinds[{index}]",
            f"        if k == {KIND_TEXT}:",
            f"            v = values[{index}]",
            *_indent(_text_code(pos, codec, key), 12),
            f"        elif k == {KIND_NULL}:",
            "            return None" if key else "            a(0)",
            f"        elif k == {KIND_BINARY}:",
        ]
        if codec.from_binary is None:
            lines.append("            return None")
        else:
            lines += [
                f"            v = values[{index}]",
                *_indent(_value_code(pos, codec.binary_shape, "B", key), 12),
            ]
        lines += ["        else:", "            return None"]
    lines += [
        "    except _ERRORS:",
        "        return None",
        f"    return {_key_expr(len(key_slot))}, bytes(out)",
    ]
    exec(compile("\n".join(lines), f"<row writer {table.namespace}>", "exec"), names)
    writer: RowWriter = names["write_row"]
    return writer


def _text_code(pos: int, codec: ColumnCodec, key: tuple[str, bool] | None) -> list[str]:
    """Code appending one text-format value `v`: shapes the writer handles inline."""
    if codec.text_shape == "double" and not key:
        return ["a(2)", "out += dbl(float(v))"]
    if codec.text_shape == "bool" and not key:
        bool_code = ["if v == b't':", "    a(1)", "elif v == b'f':", "    a(0)"]
        return ["a(2)", *bool_code, "else:", "    return None"]
    if codec.text_shape == "timestamptz":
        return _value_code(pos, None, "tz", key)
    if codec.text_shape in ("double", "bool"):
        return _value_code(pos, None, "T", key)
    if codec.text_shape is None and codec.text_parse is not None:
        return _value_code(pos, None, "P", key)
    return _value_code(pos, codec.text_shape, "T", key)


def _value_code(pos: int, shape: str | None, conv: str, key: tuple[str, bool] | None) -> list[str]:
    """Code appending one non-NULL value `v` to `out` (and to its key buffer)."""
    if shape in ("utf8", "decimal"):
        # a decimal's text becomes its two's-complement bytes, or ValueError (NaN, ...)
        code = ["if not v.isascii():", "    v.decode()"] if shape == "utf8" else [f"v = D{pos}(v)"]
        code += ["a(2)", "n = len(v)", "if n < 64:", "    a(n << 1)", "else:", "    wl(out, n)"]
        code += ["out += v"]
        if key:
            buf, nullable = key
            code += [f"{buf}.append(2)"] * nullable + [f"wl({buf}, n)", f"{buf} += v"]
        return code
    if shape == "int":
        convert = "int(v)"
    elif conv == "P":  # the parser itself, on the decoded text
        convert = f"P{pos}(v.decode())"
    elif conv == "tz":
        convert = "tz(v)"
    else:
        convert = f"{conv}{pos}(v)"
    code = [f"x = {convert}"]
    if shape == "int":
        code += ["a(2)", f"W{pos}(out, x)"]
    else:
        code += ["if x is None:", "    a(0)", "else:", "    a(2)", f"    W{pos}(out, x)"]
    if key:
        buf, nullable = key
        if nullable:
            code += [
                "if x is None:",
                f"    {buf}.append(0)",
                "else:",
                f"    {buf}.append(2)",
                f"    W{pos}({buf}, x)",
            ]
        else:
            code += ["if x is None:", "    return None", f"W{pos}({buf}, x)"]
    return code


def _decimal_text(schema: dict[str, Any]) -> Callable[[bytes], bytes]:
    """PostgreSQL's text of a numeric(p, s) → the Avro decimal's bytes, sized as fastavro
    sizes them; ValueError for NaN, infinities, or more digits than the schema holds."""
    scale, bound = schema.get("scale", 0), 10 ** schema["precision"]

    def convert(text: bytes) -> bytes:
        whole, _, fraction = text.partition(b".")
        if len(fraction) > scale:
            raise ValueError("more fraction digits than the scale")
        unscaled = int(whole + fraction + b"0" * (scale - len(fraction)))
        if not -bound < unscaled < bound:
            raise ValueError("more digits than the precision")
        size = (abs(unscaled).bit_length() + 8) // 8
        return unscaled.to_bytes(size, "big", signed=True)

    return convert


def _indent(code: list[str], width: int) -> list[str]:
    return [" " * width + line for line in code]


def _key_expr(parts: int) -> str:
    if parts == 0:
        return 'b""'
    if parts == 1:
        return "bytes(k0)"
    return "b''.join((" + ", ".join(f"k{n}" for n in range(parts)) + ",))"
