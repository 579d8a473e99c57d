"""Shared fixtures: one real local stack per session, and per-test isolation on top of it.

Session scope (started lazily, only if a selected test needs it; stopped at session end):
    stack            deploy/local/stack.py `Stack`: pg_host/pg_port/pg_user/pg_password,
                     dsn(dbname, **params), kafka_bootstrap, registry_url, workdir,
                     stop_/start_/restart_ components, create_database/drop_database.
    kafka_bootstrap  "127.0.0.1:<port>" for confluent-kafka `bootstrap.servers`.
    registry_url     Confluent-compatible registry base URL for SchemaRegistryClient.
    pg_modern        a second PostgreSQL cluster of a newer major (npm build, no pglogical:
                     deploy/local/stack_pg_npm.py) for protocol features 15 lacks; same API as
                     the stack's Postgres: host/port/user/password, dsn(), create_database(),
                     drop_database(), plus major and server_version.

Function scope (unique per test, so tests run in any order and never see each other's data):
    pg_db            name of a fresh, empty database; dropped after the test, its replication
                     slots (and their walsenders) first.
    pg_dsn           libpq DSN for pg_db as the superuser (password auth over TCP).
    pg_conn          autocommit psycopg connection to pg_db, closed after the test.
    slot_name        unique replication slot name (not created).
    publication_name unique publication name (not created).
    topic_prefix     unique Kafka topic prefix; topics are auto-created on first produce.

A component a test stopped (fault tests) is started again after the test, so later tests get a
whole stack.

Markers (declared in pyproject.toml), so that `pytest -m "not live"` runs the fast unit tests
alone; the full suite runs them all:
    live         set here on any test that uses the stack (directly or through these fixtures),
                 and on every slow_build test.
    slow_build   builds something from source, minutes on a 2-core machine: set here on the tests
                 that use tests/deploy's `helm` fixture (helm from its Go module, once, cached),
                 and by hand on tests that build the compiled wheel.
    fault        fault-injection tests (a server stopped, killed or cut off); set by the test
                 modules themselves.
"""

from __future__ import annotations

import importlib.util
import uuid
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import psycopg
import pytest
from compiled import ROOT, stale_build_message
from hypothesis import HealthCheck, settings
from stack_module import load_stack_module

if TYPE_CHECKING:
    from snapshot.helpers import TopicReader

# `servers`, `server_db`, `server_conn`: a test run on PostgreSQL 15 and on 18 (tests/servers.py)
pytest_plugins = ("servers",)

# No test asserts a time: hypothesis's per-example deadline and its
# too-slow health check are clocks, and on a loaded 2-core machine they fail tests whose
# properties hold. Every property test runs under this profile unless it sets its own.
settings.register_profile("no_clock", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("no_clock")

STACK_FIXTURES = {
    "stack",
    "kafka_bootstrap",
    "registry_url",
    "pg_db",
    "pg_dsn",
    "pg_conn",
    "pg_modern",
}

ICEBERG_CATALOG = "lake"  # the `iceberg` fixture's catalog


def _unique(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:12]}"


SLOW_BUILD_FIXTURES = {"helm"}


def pytest_sessionstart(session: pytest.Session) -> None:
    """Refuse to test a compiled build older than its sources (tests/compiled.py)."""
    message = stale_build_message(ROOT)
    if message is not None:
        raise pytest.UsageError(message)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        fixtures = set(getattr(item, "fixturenames", ()))
        if SLOW_BUILD_FIXTURES & fixtures:
            item.add_marker(pytest.mark.slow_build)
        if STACK_FIXTURES & fixtures or item.get_closest_marker("slow_build"):
            item.add_marker(pytest.mark.live)


_STARTED: list[Any] = []


@pytest.fixture(scope="session")
def stack() -> Iterator[Any]:
    local_stack = load_stack_module().Stack()
    local_stack.start()
    _STARTED.append(local_stack)
    try:
        yield local_stack
    finally:
        _STARTED.remove(local_stack)
        local_stack.stop()


@pytest.fixture(autouse=True)
def _restore_stack() -> Iterator[None]:
    yield
    for local_stack in _STARTED:
        local_stack.ensure_running()


@pytest.fixture(scope="session")
def spark(stack: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """One SparkSession (Kafka, Avro and Delta jars) for the Spark tests and the consumer
    matrix: it takes seconds to start on two cores, so it is started once, lazily, and
    stopped at session end. Requests `stack` first: its installer provides the JDK and
    Maven the jars need; pyspark is imported here, not by every test run."""
    from bridge.spark.jars import spark_session  # noqa: PLC0415 (pyspark: slow to import)

    warehouse = tmp_path_factory.mktemp("spark-warehouse")
    session = spark_session("bridge-tests", extra_conf={"spark.sql.warehouse.dir": str(warehouse)})
    try:
        yield session
    finally:
        session.stop()


@pytest.fixture(scope="session")
def iceberg(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> str:
    """The name of an Iceberg catalog (a Hadoop one over a temporary warehouse) configured on
    the shared session, for the Spark apply's and verify's Iceberg tests (Spark loads a
    catalog on its first use, from the settings then)."""
    from bridge.spark.jars import iceberg_catalog  # noqa: PLC0415 (pyspark: slow to import)

    warehouse = tmp_path_factory.mktemp("iceberg-warehouse")
    for key, value in iceberg_catalog(ICEBERG_CATALOG, str(warehouse)).items():
        spark.conf.set(key, value)
    return ICEBERG_CATALOG


@pytest.fixture(scope="session")
def pg_modern() -> Iterator[Any]:
    load_stack_module()  # puts deploy/local, where stack_pg_npm lives, on sys.path
    cluster = importlib.import_module("stack_pg_npm").ModernPostgres()
    postgres = cluster.start()
    try:
        yield postgres
    finally:
        cluster.stop()


@pytest.fixture(scope="session")
def kafka_bootstrap(stack: Any) -> str:
    return str(stack.kafka_bootstrap)


@pytest.fixture(scope="session")
def registry_url(stack: Any) -> str:
    return str(stack.registry_url)


@pytest.fixture
def pg_db(stack: Any) -> Iterator[str]:
    name = _unique("test")
    stack.create_database(name)
    try:
        yield name
    finally:
        stack.ensure_running()
        stack.drop_database(name)


@pytest.fixture
def pg_dsn(stack: Any, pg_db: str) -> str:
    return str(stack.dsn(pg_db))


@pytest.fixture
def pg_conn(pg_dsn: str) -> Iterator[psycopg.Connection[Any]]:
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        yield conn


@pytest.fixture
def slot_name() -> str:
    return _unique("slot")


@pytest.fixture
def publication_name() -> str:
    return _unique("pub")


@pytest.fixture
def topic_prefix() -> str:
    return _unique("t")


@pytest.fixture
def topic_readers(stack: Any) -> Iterator[Callable[[str], TopicReader]]:
    """`topic_readers(topic)`: a TopicReader of the stack's Kafka, closed after the test
    (before the stack stops)."""
    # imported late: it imports `bridge`, which must not load before the stale-build check
    from snapshot.helpers import TopicReader  # noqa: PLC0415

    made: list[TopicReader] = []

    def make(topic: str) -> TopicReader:
        made.append(TopicReader(stack.kafka_bootstrap, stack.registry_url, topic))
        return made[-1]

    yield make
    for reader in made:
        reader.close()
