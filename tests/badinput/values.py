"""Value-converter campaign: every built-in type's `from_text` and `from_binary` on bad bytes.

Codecs cover every OID of `BUILTIN_TYPES` (scalars, arrays, ranges, multiranges)
with default options, plus the option- and typmod-dependent variants (timestamptz
iso, numeric double/variable, numeric(p,s) with negative and oversized scale,
multi-dimensional arrays, arrays under avro.array_mode typed). Inputs mutate real wire
values of the same type (`value_seeds.SEEDS`), values of another type, or are random bytes.

Each converted value then goes through the serializer's writer for its Avro type,
as in the pipeline: the acceptable outcomes are Avro bytes, `ValueConversionError` (the
converter refused the bytes) or `SchemaError` (the value does not fit its Avro
type, e.g. a corrupt date beyond int32 days).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any, NamedTuple

from badinput.harness import Recorder, Report
from badinput.mutate import Mutator
from badinput.value_seeds import SEEDS
from bridge.encode.columns import ColumnCodec, column_codec
from bridge.encode.records import framed_writer
from bridge.errors import BridgeError, SchemaError, ValueConversionError
from bridge.schema import BUILTIN_TYPES, CodecOptions, StaticCatalog

Converter = Callable[[bytes], object]

_CATALOG = StaticCatalog()
_OPTION_VARIANTS = (
    CodecOptions(timestamptz_mode="iso", numeric_mode="double"),
    CodecOptions(numeric_mode="variable"),
)
_TYPED = CodecOptions(array_mode="typed")  # nested arrays, decimal elements
_OPTION_DEPENDENT = (1184, 1185, 3910, 3911, 4534, 6153, 1700, 1231, 3906, 4532)


def _typmod(precision: int, scale: int) -> int:
    return (precision << 16 | (scale & 0x7FF)) + 4


# Pieces of PostgreSQL's value syntax; exponents stay small (see test_values.py).
TOKENS = (
    *(b"infinity", b"-infinity", b"NaN", b"Infinity", b" BC", b"e99", b"E-99", b"24:00:00"),
    *(b"-", b"+", b".", b":", b",", b"{", b"}", b"[", b"]", b"(", b")", b'"', b"\\", b" "),
    *(b"NULL", b"=>", b"99999999999999999999", b"\xff", b"\xc3", b"\xc3\xbc", b"year", b"@"),
)


class Side(NamedTuple):
    name: str
    convert: Converter
    seeds: tuple[bytes, ...]


def _through_writer(convert: Converter, schema: dict[str, Any], label: str) -> Converter:
    """Converter plus the serializer's writer: a value must also fit its Avro type."""
    record = {"type": "record", "name": "Row", "fields": [{"name": "v", "type": ["null", schema]}]}
    write = framed_writer(record, 1, label)

    def convert_and_write(raw: bytes) -> object:
        return write({"v": convert(raw)})

    return convert_and_write


def _codecs() -> list[tuple[int, str, ColumnCodec]]:
    """(type OID, label, codec) for every built-in type and the variants options make."""
    codecs = [(oid, t.name, column_codec(oid, -1, _CATALOG)) for oid, t in BUILTIN_TYPES.items()]
    for options in _OPTION_VARIANTS:
        variant = f"{options.timestamptz_mode},{options.numeric_mode}"
        for oid in _OPTION_DEPENDENT:
            label = f"{BUILTIN_TYPES[oid].name}/{variant}"
            codecs.append((oid, label, column_codec(oid, -1, _CATALOG, options)))
    for precision, scale in ((12, 2), (5, -2), (3, 5), (1000, 0)):
        typmod = _typmod(precision, scale)
        label = f"numeric({precision},{scale})"
        codecs.append((1700, label, column_codec(1700, typmod, _CATALOG)))
        codecs.append((1231, label + "[]", column_codec(1231, typmod, _CATALOG)))
        codecs.append((1231, label + "[] typed", column_codec(1231, typmod, _CATALOG, _TYPED)))
    for ndims in (2, 3):
        for oid in (1007, 1009, 1231, 1185, 3905):
            label = f"{BUILTIN_TYPES[oid].name} ndims={ndims}"
            codecs.append((oid, label, column_codec(oid, -1, _CATALOG, ndims=ndims)))
            codec = column_codec(oid, -1, _CATALOG, _TYPED, ndims=ndims)
            codecs.append((oid, label + " typed", codec))
    return codecs


def value_sides(*, through_writer: bool) -> list[Side]:
    """One entry per (codec, wire format), each with that type's seeds in that format.

    `through_writer` adds the serializer's Avro writer after each converter.
    """
    sides = []
    for oid, label, codec in _codecs():
        seeds = SEEDS.get(oid, [])
        text: Converter = codec.from_text
        binary: Converter = codec.from_binary
        if through_writer:
            text = _through_writer(text, codec.avro_schema, label)
            binary = _through_writer(binary, codec.avro_schema, label)
        sides.append(Side(f"{label} text", text, tuple(t for t, _ in seeds)))
        sides.append(Side(f"{label} binary", binary, tuple(bytes.fromhex(b) for _, b in seeds)))
    return sides


WRITER_ERRORS = (ValueConversionError, SchemaError)


def run_values(
    sides: list[Side],
    inputs: int,
    seed: int,
    hang_limit_s: float = 2.0,
    accepted: tuple[type[BridgeError], ...] = (ValueConversionError,),
) -> Report:
    """Round robin over `sides`: 75% own seeds mutated, 10% another type's, 15% random.

    Pass `accepted=WRITER_ERRORS` for sides made `through_writer`.
    """
    rng = random.Random(seed)
    mutator = Mutator(rng, b'{[("-0\\', TOKENS)
    every = [s for side in sides for s in side.seeds]
    with Recorder(hang_limit_s, accepted) as recorder:
        for n in range(inputs):
            side = sides[n % len(sides)]
            roll = rng.random()
            if roll < 0.15:
                data = mutator.random_bytes()
            elif roll < 0.25 or not side.seeds:
                data = mutator.mutate(rng.choice(every), every)
            else:
                data = mutator.mutate(rng.choice(side.seeds), side.seeds)
            recorder.run(side.name, side.convert, data)
    return recorder.report
