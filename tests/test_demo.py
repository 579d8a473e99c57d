"""`bridge demo`'s code (bridge/demo.py) on the test stack and the tests' Spark session.

The demo's shop workload on two tables goes through the real bridge; one `apply_tables`
streaming query applies both topics to Delta tables; a column added in PostgreSQL while
the query runs reaches the orders table. The Delta tables are read back here and compared
with the rows the workload must leave, written out below, not only with the demo's own
verdict: a multi-table apply or a schema evolution that stops working fails this test.
"""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from schema.live import unique

from bridge.demo import shop_demo

if TYPE_CHECKING:  # pyspark is slow to import: the `spark` fixture imports it when used
    from pyspark.sql import SparkSession

# id, name, email, balance, tags: Linus deleted, Grace's key changed from 3 to 42
CUSTOMERS = {
    (1, "Ada", "ada@example.com", Decimal("15.50"), ("vip",)),
    (42, "Grace", "grace@example.com", Decimal("99.99"), ("vip", "navy")),
}
# id, customer_id, item, quantity, note (the added column)
ORDERS = {
    (1, 1, "keyboard", 2, "gift wrap"),
    (3, 42, "compiler", 2, None),
    (4, 42, "punch cards", 100, "leave at the door"),
}


def _live(spark: SparkSession, path: Path, columns: list[str]) -> set[tuple[Any, ...]]:
    rows = spark.read.format("delta").load(str(path)).where("NOT _deleted").select(*columns)
    return {tuple(tuple(v) if isinstance(v, list) else v for v in r) for r in rows.collect()}


def _deleted(spark: SparkSession, path: Path) -> set[int]:
    rows = spark.read.format("delta").load(str(path)).where("_deleted").select("id").collect()
    return {r["id"] for r in rows}


# The bridge, a Spark streaming query and two micro-batches of MERGEs into two Delta tables:
# almost ten minutes on a 2-core machine shared with other work (load ~24), near the
# suite's 600 s default.
@pytest.mark.timeout(900)
def test_demo_applies_both_tables_and_the_added_column(
    stack: Any, spark: SparkSession, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    dbname, name = unique("shop"), unique("demo")
    lake = tmp_path / "lake"
    try:
        verdicts = shop_demo(stack, spark, str(lake), dbname=dbname, name=name)
    finally:
        stack.drop_database(dbname)
    out = capsys.readouterr().out

    customers, orders = lake / "public" / "customers", lake / "public" / "orders"
    assert _live(spark, customers, ["id", "name", "email", "balance", "tags"]) == CUSTOMERS
    assert _live(spark, orders, ["id", "customer_id", "item", "quantity", "note"]) == ORDERS
    assert _deleted(spark, customers) == {2, 3}  # soft deletes: Linus, Grace's old key
    assert _deleted(spark, orders) == {2}

    # One query applied both topics: its checkpoint's offsets name them both.
    offsets = sorted((lake / "_checkpoint" / "offsets").glob("[0-9]*"), key=lambda p: int(p.name))
    assert offsets, "the streaming query committed no batch"
    last = offsets[-1].read_text()
    assert f"{name}.public.customers" in last and f"{name}.public.orders" in last

    assert sorted(verdicts) == ["customers", "orders"]
    assert all(v.match for v in verdicts.values())
    assert "note" in verdicts["orders"].columns
    assert "customers: MATCH" in out and "orders: MATCH" in out
    assert "MISMATCH" not in out
