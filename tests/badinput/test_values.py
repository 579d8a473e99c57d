"""Seeded campaigns against every built-in type's value converters, alone and with the writer.

The converters alone must raise nothing but ValueConversionError. Followed by the
serializer's Avro writer (as in the pipeline), a corrupt value must end as
ValueConversionError or SchemaError, never as another exception, a hang or silently
written out of its type's range. (This campaign found irregular array text
escaping the parser and decimals beyond their precision reaching the writer.)
"""

from __future__ import annotations

from decimal import Decimal

import pytest

from badinput.harness import Recorder
from badinput.value_seeds import SEEDS
from badinput.values import WRITER_ERRORS, run_values, value_sides
from bridge.encode.columns import column_codec
from bridge.errors import ValueConversionError
from bridge.schema import BUILTIN_TYPES, CodecOptions, StaticCatalog

MAX_CPU_NS_PER_INPUT = 1_000_000_000  # a hang guard, not a speed check: a GC pause once took 105 ms
CATALOG = StaticCatalog()
NUMERIC_12_2 = (12 << 16 | 2) + 4


def test_every_builtin_type_has_seeds_in_both_formats() -> None:
    scalars = [oid for oid, t in BUILTIN_TYPES.items() if t.kind != "a"]
    assert all(SEEDS.get(oid) for oid in scalars)
    assert len(SEEDS) >= len(BUILTIN_TYPES) - 4  # int2vector[]/oidvector[] aside


def test_converters_survive_a_seeded_campaign() -> None:
    sides = value_sides(through_writer=False)
    report = run_values(sides, 30_000, seed=20240603)
    assert not report.crashes, "\n".join(report.crash_lines())
    assert report.max_ns < MAX_CPU_NS_PER_INPUT, report.summary()
    assert report.outcomes["returned"] and report.outcomes["ValueConversionError"], report.summary()
    assert len(report.per_target) == len(sides)


def test_converted_values_survive_the_avro_writer() -> None:
    report = run_values(
        value_sides(through_writer=True), 30_000, seed=20240604, accepted=WRITER_ERRORS
    )
    assert not report.crashes, "\n".join(report.crash_lines())
    assert report.max_ns < MAX_CPU_NS_PER_INPUT, report.summary()


@pytest.mark.parametrize(
    ("oid", "text", "ndims"),
    [
        (1007, b"{1,{}}", 1),
        (1007, b"{1,{}}", 2),
        (1007, b"{{1},2}", 2),
        (1009, b"{a,{b}}", 1),
        (1009, b"{a,{b}}", 2),
        (1009, b"{{a},b}", 1),
        (1009, b"{{a},b}", 2),
    ],
)
def test_elements_and_subarrays_on_one_level_are_refused(oid: int, text: bytes, ndims: int) -> None:
    """The nested array parser (avro.array_mode typed; the portable default keeps 2-D
    arrays as PostgreSQL's text, as it does composites)."""
    typed = CodecOptions(array_mode="typed")
    with pytest.raises(ValueConversionError):
        column_codec(oid, -1, CATALOG, typed, ndims=ndims).from_text(text)


def _written_numeric_12_2(text: bytes) -> object:
    sides = value_sides(through_writer=True)
    side = next(s for s in sides if s.name == "numeric(12,2) text")
    return side.convert(text)


def test_numeric_within_its_precision_is_written() -> None:
    codec = column_codec(1700, NUMERIC_12_2, CATALOG)
    assert codec.from_text(b"9999999999.99") == Decimal("9999999999.99")
    assert _written_numeric_12_2(b"9999999999.99")


@pytest.mark.parametrize("text", [b"1e20", b"12345678901.5", b"-1E+10"])
def test_numeric_beyond_its_precision_is_refused(text: bytes) -> None:
    with pytest.raises(WRITER_ERRORS):
        _written_numeric_12_2(text)


def test_a_huge_numeric_exponent_is_refused_at_once() -> None:
    with Recorder(hang_limit_s=1.0, accepted=WRITER_ERRORS) as recorder:
        recorder.run("numeric(12,2)", _written_numeric_12_2, b"1e999999999")
    assert recorder.report.outcomes["hang"] == 0, recorder.report.crash_lines()
