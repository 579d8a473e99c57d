"""Pure parts of the Spark apply: target names from topics, and which type changes widen."""

from __future__ import annotations

import pytest
from pyspark.sql.types import (
    ArrayType,
    DataType,
    DecimalType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    ShortType,
    StringType,
    StructField,
    StructType,
)

from bridge.errors import ConfigError
from bridge.spark.formats import sql_type, widens
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
    ("old", "new", "delta", "iceberg"),
    [
        (IntegerType(), LongType(), True, True),
        (ShortType(), IntegerType(), True, True),
        (LongType(), IntegerType(), False, False),
        (FloatType(), DoubleType(), True, True),
        (DecimalType(10, 2), DecimalType(14, 2), True, True),
        (DecimalType(10, 2), DecimalType(12, 4), True, False),  # Iceberg: same scale only
        (DecimalType(10, 2), DecimalType(10, 3), False, False),  # a digit fewer before the point
        (IntegerType(), StringType(), False, False),
    ],
)
def test_widening(old: DataType, new: DataType, delta: bool, iceberg: bool) -> None:
    assert widens(old, new, "delta") is delta
    assert widens(old, new, "iceberg") is iceberg


def test_sql_types_quote_nested_field_names() -> None:
    kind = StructType(
        [StructField("offset", LongType()), StructField("a b", ArrayType(DecimalType(5, 1)))]
    )
    assert sql_type(kind) == "STRUCT<`offset`: bigint, `a b`: ARRAY<decimal(5,1)>>"
