"""Fixtures of the Spark tests; their SparkSession is tests/conftest.py's `spark`, shared
with the consumer matrix (tests/consumers). `lake` runs a module's tests once per table
format: Delta tables under a directory, Iceberg tables in a namespace of the session's
Iceberg catalog (tests/conftest.py's `iceberg`: a Hadoop catalog over a temporary
warehouse)."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from delta.tables import DeltaTable
from pyspark.sql import DataFrame, SparkSession

from bridge.spark.formats import FORMATS, ICEBERG_RESERVED, TableFormat, is_path, target_table
from bridge.spark.jars import iceberg_catalog

Commit = tuple[int, str, dict[str, str]]  # id, operation, metrics (Delta) or summary (Iceberg)
MERGED: dict[TableFormat, str] = {"delta": "MERGE", "iceberg": "overwrite"}  # its operation
CHANGED_ROWS = ("numTargetRowsInserted", "numTargetRowsUpdated", "numTargetRowsDeleted")


@pytest.fixture(scope="module")
def spark_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("delta")


@dataclass(frozen=True)
class Lake:
    """Where a test's tables go in one format."""

    spark: SparkSession
    format: TableFormat
    root: Path  # Delta: the directory of the path tables
    namespace: str  # Iceberg: catalog.namespace of the tables

    def target(self, name: str) -> str:
        """A table the apply creates: a Delta path, or an Iceberg catalog table."""
        return str(self.root / name) if self.format == "delta" else f"{self.namespace}.{name}"

    def named(self, name: str) -> str:
        """A table the apply creates by name in the format's catalog."""
        return name if self.format == "delta" else f"{self.namespace}.{name}"

    def conf(self) -> dict[str, str]:
        """What another Spark session (a driver process of its own) needs to reach these
        tables: the Iceberg catalog's settings; a Delta path needs none."""
        if self.format == "delta":
            return {}
        catalog = self.namespace.split(".", 1)[0]
        warehouse = self.spark.conf.get(f"spark.sql.catalog.{catalog}.warehouse")
        assert warehouse is not None
        return iceberg_catalog(catalog, warehouse)

    def fresh(self, target: str) -> str:
        """`target`, its Iceberg table refreshed: the session's Iceberg catalog keeps the
        snapshot it loaded first, while the apply commits in the streaming query's session
        or another driver's."""
        if self.format == "iceberg":
            self.spark.sql(f"REFRESH TABLE {target}")
        return target

    def rows(self, target: str) -> DataFrame:
        """The table as stored, read without the bridge; in Iceberg, the columns stored
        with one more `_` (the soft-delete flag `__deleted`) under the names Delta has."""
        if is_path(target):
            return self.spark.read.format("delta").load(target)
        self.fresh(target)
        table = self.spark.table(target)
        if self.format == "delta":
            return table
        assert not ICEBERG_RESERVED & set(table.columns)
        return table.withColumnsRenamed({f"_{c}": c for c in ICEBERG_RESERVED})

    def commits(self, target: str) -> list[Commit]:
        """The table's commits, oldest first: Delta's history (version, operation,
        operation metrics), Iceberg's snapshots metadata table (snapshot id, operation,
        summary)."""
        if self.format == "delta":
            table = (
                DeltaTable.forPath(self.spark, target)
                if is_path(target)
                else DeltaTable.forName(self.spark, target)
            )
            history = table.history().collect()
            return [
                (h["version"], h["operation"], dict(h["operationMetrics"] or {}))
                for h in reversed(history)
            ]
        snapshots = self.spark.sql(
            f"SELECT snapshot_id, operation, summary FROM {self.fresh(target)}.snapshots "
            "ORDER BY committed_at"
        ).collect()
        return [(s["snapshot_id"], s["operation"], dict(s["summary"])) for s in snapshots]

    def stored(self, target: str, commit: int | None = None) -> DataFrame:
        """Every stored row of the table, the apply's columns included: now, or as of
        `commit` (time travel to a Delta version or an Iceberg snapshot)."""
        table = target_table(self.spark, self.fresh(target), self.format).sql
        as_of = "" if commit is None else f" VERSION AS OF {commit}"
        return self.spark.sql(f"SELECT * FROM {table}{as_of}")

    def unchanged_since(self, target: str, before: list[Commit]) -> None:
        """Asserts that the commits made since `before` (the table's `commits` then) hold
        a MERGE, and that none changed a row. Delta's MERGE metrics count the rows it
        inserted, updated and deleted. An Iceberg MERGE (copy-on-write) rewrites every data
        file holding a matched row, so its snapshot's summary counts as many records added
        as deleted whether it changed a row or not: the table's rows, positions included,
        must be those of its snapshot before (time travel), compared inside Spark."""
        after = self.commits(target)
        assert after[: len(before)] == before
        merges = [c for c in after[len(before) :] if c[1] == MERGED[self.format]]
        assert merges, f"no MERGE since: {after[len(before) :]}"
        for _, _, counts in merges:
            if self.format == "delta":
                assert [int(counts[k]) for k in CHANGED_ROWS] == [0, 0, 0], counts
            else:
                assert counts["added-records"] == counts["deleted-records"], counts
        now, then = self.stored(target), self.stored(target, before[-1][0])
        assert now.exceptAll(then).isEmpty() and then.exceptAll(now).isEmpty()


@pytest.fixture(scope="module", params=FORMATS)
def lake(request: Any, spark: SparkSession, spark_dir: Path) -> Lake:
    table_format: TableFormat = request.param
    namespace = ""
    if table_format == "iceberg":
        namespace = f"{request.getfixturevalue('iceberg')}.t{uuid.uuid4().hex[:8]}"
    root = spark_dir / table_format
    return Lake(spark, table_format, root, namespace)
