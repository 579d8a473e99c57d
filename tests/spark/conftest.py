"""One SparkSession (with the Kafka, Avro and Delta jars) for every Spark test: it takes
seconds to start on two cores, so it is started once, lazily, and stopped at session end."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from bridge.spark.jars import spark_session


@pytest.fixture(scope="session")
def spark(stack: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[SparkSession]:
    """Requests `stack` first: its installer provides the JDK and Maven the jars need."""
    warehouse = tmp_path_factory.mktemp("spark-warehouse")
    session = spark_session("bridge-tests", extra_conf={"spark.sql.warehouse.dir": str(warehouse)})
    try:
        yield session
    finally:
        session.stop()


@pytest.fixture(scope="module")
def spark_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("delta")
