"""Fixtures of the Spark tests; their SparkSession is tests/conftest.py's `spark`, shared
with the consumer matrix (tests/consumers)."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(scope="module")
def spark_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("delta")
