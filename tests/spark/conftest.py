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
from pyspark.sql import DataFrame, SparkSession

from bridge.spark.formats import FORMATS, ICEBERG_RESERVED, TableFormat, is_path


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

    def rows(self, target: str) -> DataFrame:
        """The table as stored, read without the bridge; in Iceberg, the columns stored
        with one more `_` (the soft-delete flag `__deleted`) under the names Delta has."""
        if is_path(target):
            return self.spark.read.format("delta").load(target)
        table = self.spark.table(target)
        if self.format == "delta":
            return table
        assert not ICEBERG_RESERVED & set(table.columns)
        return table.withColumnsRenamed({f"_{c}": c for c in ICEBERG_RESERVED})


@pytest.fixture(scope="module", params=FORMATS)
def lake(request: Any, spark: SparkSession, spark_dir: Path) -> Lake:
    table_format: TableFormat = request.param
    namespace = ""
    if table_format == "iceberg":
        namespace = f"{request.getfixturevalue('iceberg')}.t{uuid.uuid4().hex[:8]}"
    root = spark_dir / table_format
    return Lake(spark, table_format, root, namespace)
