"""Third-party consumers started once per test session and shared by every module.

`connect_worker`: one Kafka Connect standalone JVM (deploy/local/stack_connect.py) with
Debezium's JDBC sink and Apicurio's Avro converter on its classpath. Tests add their
own connectors to it and delete them after; the JVM and its jars' build are paid once.
`flink_sql`: PyFlink and Flink's Kafka and Debezium-Avro jars (tests/consumers/flink.py),
installed once per machine; each job runs in its own process.
Every test using either is marked `consumers` (and `live`, through the stack fixture).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from consumers.connect import jdbc_sink_worker
from consumers.flink import FlinkSQL


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if {"connect_worker", "flink_sql"} & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.consumers)


@pytest.fixture(scope="session")
def connect_worker(stack: Any) -> Iterator[Any]:
    worker = jdbc_sink_worker(stack, stack.workdir / "connect")
    try:
        worker.start()
        worker.wait_ready()
        yield worker
    finally:
        worker.stop()


@pytest.fixture(scope="session")
def flink_sql(stack: Any) -> FlinkSQL:
    """PyFlink and its jars, installed once per machine; each job is its own process."""
    return FlinkSQL(stack.workdir / "flink")
