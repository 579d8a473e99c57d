"""Pure parts of the Spark apply: target names from topics, and which type changes widen."""

from __future__ import annotations

import pytest
from pyspark.sql.types import (
    DataType,
    DecimalType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    ShortType,
    StringType,
)

from bridge.errors import ConfigError
from bridge.spark.apply import _widens
from bridge.spark.tables import target_of


@pytest.mark.parametrize(
    ("template", "topic", "expected"),
    [
        ("/lake/{schema}/{table}", "shop.public.orders", "/lake/public/orders"),
        ("s3://b/{prefix}/{table}", "a.b.sales.items", "s3://b/a.b/items"),
        ("lake.{schema}_{table}", "shop.public.my-table", "lake.public_my_table"),
        ("raw.{topic}", "shop.public.t", "raw.shop_public_t"),
    ],
)
def test_target_templates(template: str, topic: str, expected: str) -> None:
    assert target_of(template, topic) == expected


def test_target_function_and_unfillable_template() -> None:
    assert target_of(lambda t: t.upper(), "a.b.c") == "A.B.C"
    with pytest.raises(ConfigError, match="cannot be filled for topic plain"):
        target_of("/lake/{schema}/{table}", "plain")


@pytest.mark.parametrize(
    ("old", "new", "widens"),
    [
        (IntegerType(), LongType(), True),
        (ShortType(), IntegerType(), True),
        (LongType(), IntegerType(), False),
        (FloatType(), DoubleType(), True),
        (DecimalType(10, 2), DecimalType(14, 2), True),
        (DecimalType(10, 2), DecimalType(12, 4), True),
        (DecimalType(10, 2), DecimalType(10, 3), False),  # one digit fewer before the point
        (IntegerType(), StringType(), False),
    ],
)
def test_widening(old: DataType, new: DataType, widens: bool) -> None:
    assert _widens(old, new) is widens
