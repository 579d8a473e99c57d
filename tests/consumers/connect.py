"""Kafka Connect standalone with Debezium's JDBC sink, reading the bridge's topics.

A third-party consumer nobody here wrote: Connect's standalone worker (Kafka 4.3.1,
deploy/local/stack_connect.py, the bench's Debezium source runs the same worker),
`io.debezium:debezium-connector-jdbc` and Apicurio's Avro converter, all from Maven
Central (tests/consumers/jdbcsink/pom.xml), built once per machine into
~/.cache/pg-kafka-bridge/ like the stack's own jars and put on one classpath.

Converter: Apicurio's, reading the Confluent wire format (`as-confluent`, a 4-byte
`contentId`, the id the registry's Confluent-compatible API hands out). Its Avro ->
Connect conversion is Confluent's AvroData, so our `connect.name` /
`connect.parameters` properties reach the sink as Connect's and Debezium's semantic types.

One worker per test session (`connect_worker` fixture in tests/consumers/conftest.py):
the JVM starts once; each test adds its own connector over the worker's REST API and
deletes it afterwards, so modules that reuse the worker (the consumer matrix) pay the
start-up once. Sink connectors keep their offsets in the consumer group named after the
connector, so every test uses a connector name of its own.
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
_LOCAL = str(ROOT / "deploy" / "local")
if _LOCAL not in sys.path:  # the stack_* modules live beside stack.py, outside any package
    sys.path.insert(0, _LOCAL)

_install = importlib.import_module("stack_install")
_connect = importlib.import_module("stack_connect")

VERSION = "3.3.1.Final"  # keep equal to tests/consumers/jdbcsink/pom.xml <version>
POM = Path(__file__).resolve().parent / "jdbcsink" / "pom.xml"
COMPONENT = "connect"


def jdbc_sink_worker(stack: Any, workdir: Path) -> Any:
    """A not yet started worker with the sink's and the converter's jars, reading Avro."""
    log = workdir / "build.log"
    workdir.mkdir(parents=True, exist_ok=True)
    java_home = Path(_install.find_java_home(COMPONENT, log))
    libs = _install.maven_libs(COMPONENT, POM, f"connect-jdbc-sink-{VERSION}", java_home, log)
    return _connect.ConnectWorker(
        name="connect",
        workdir=workdir,
        java=java_home / "bin" / "java",
        libs=[libs],
        bootstrap=stack.kafka_bootstrap,
        converters=_connect.apicurio_avro_converter(stack.registry_url, registers=False),
        worker={
            # Everything is on the classpath: skip scanning for plugins elsewhere.
            "plugin.discovery": "only_scan",
            "consumer.auto.offset.reset": "earliest",
            "consumer.max.poll.records": "500",
        },
        info_loggers=(
            "io.debezium.connector.jdbc",
            "org.apache.kafka.connect.runtime.WorkerSinkTask",
        ),
        jvm_options=(
            "-Xms128m",
            "-Xmx768m",
            "-XX:+UseSerialGC",
            "-XX:TieredStopAtLevel=1",  # short-lived worker: C1 only, less start-up CPU
        ),
    )


def jdbc_sink_config(
    stack: Any, dbname: str, topics_regex: str, *, password: str | None = None
) -> dict[str, str]:
    """Debezium JDBC sink into `dbname` on the stack's PostgreSQL, as its docs set it up
    for a Debezium source: upserts keyed by the record key, deletes and truncates
    applied, one table per source table (`${source.table}`)."""
    return {
        "connector.class": "io.debezium.connector.jdbc.JdbcSinkConnector",
        "tasks.max": "1",
        "topics.regex": topics_regex,
        "connection.url": f"jdbc:postgresql://{stack.pg_host}:{stack.pg_port}/{dbname}",
        "connection.username": stack.pg_user,
        "connection.password": password if password is not None else stack.pg_password,
        "insert.mode": "upsert",
        "primary.key.mode": "record_key",
        "delete.enabled": "true",
        "truncate.enabled": "true",
        "schema.evolution": "basic",
        "collection.name.format": "${source.table}",
    }
