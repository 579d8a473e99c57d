"""Kafka Connect standalone with Debezium's JDBC sink, reading the bridge's topics.

A third-party consumer nobody here wrote: Connect's standalone worker (Kafka 4.3.1),
`io.debezium:debezium-connector-jdbc` and Apicurio's Avro converter, all from Maven
Central (tests/consumers/jdbcsink/pom.xml), built once per machine into
~/.cache/pg-kafka-bridge/ like the stack's own jars and put on one classpath.

Converter: Confluent's `AvroConverter` is not published on Maven Central; Apicurio's
(`io.apicurio.registry.utils.converter.AvroConverter`, 2.4.2 like the stack's registry)
is, and it reads the Confluent wire format when told so: `as-confluent` (magic byte and
a 4-byte id) with `use-id=contentId`, the id the registry's Confluent-compatible API hands
out. It talks to the registry's native API (`/apis/registry/v2`, beside
`/apis/ccompat/v7`). Its Avro -> Connect conversion is Confluent's AvroData, so our
`connect.name` / `connect.parameters` properties reach the sink as Connect's and
Debezium's semantic types.

One worker per test session (`connect_worker` fixture in tests/consumers/conftest.py):
the JVM starts once; each test adds its own connector over the worker's REST API and
deletes it afterwards, so modules that reuse the worker (the consumer matrix) pay the
start-up once.
"""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from waiting import wait_for

ROOT = Path(__file__).resolve().parents[2]
_LOCAL = str(ROOT / "deploy" / "local")
if _LOCAL not in sys.path:  # the stack_* modules live beside stack.py, outside any package
    sys.path.insert(0, _LOCAL)

_install = importlib.import_module("stack_install")
_proc = importlib.import_module("stack_proc")

VERSION = "3.3.1.Final"  # keep equal to tests/consumers/jdbcsink/pom.xml <version>
POM = Path(__file__).resolve().parent / "jdbcsink" / "pom.xml"
COMPONENT = "connect"
START_TIMEOUT_S = 300.0  # cold JVM + plugin scan on a busy 2-core machine
LOG4J2 = """\
appender.out.type = Console
appender.out.name = out
appender.out.layout.type = PatternLayout
appender.out.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = warn
rootLogger.appenderRef.out.ref = out
logger.dbz.name = io.debezium.connector.jdbc
logger.dbz.level = info
logger.task.name = org.apache.kafka.connect.runtime.WorkerSinkTask
logger.task.level = info
"""


def connect_libs(java_home: Path, log_path: Path) -> Path:
    """Directory of Connect's, the sink's and the converter's jars, resolved once per machine."""
    name = f"connect-jdbc-sink-{VERSION}"
    return Path(_install.maven_libs(COMPONENT, POM, name, java_home, log_path))


def avro_converter(registry_url: str) -> dict[str, str]:
    """Apicurio's AvroConverter reading Confluent framing, for `key.`/`value.converter`.

    `registry_url` is the stack's Confluent-compatible base (`.../apis/ccompat/v7`); the
    converter's client speaks the native API under the same `/apis`. Headers are off:
    the id is read from the payload (our key-change records carry Debezium's own
    headers, which must not be taken for Apicurio's)."""
    base = registry_url.rstrip("/")
    if not base.endswith("/apis/ccompat/v7"):
        raise ValueError(f"not the registry's ccompat/v7 URL: {registry_url}")
    native = base.removesuffix("/ccompat/v7") + "/registry/v2"
    return {
        "": "io.apicurio.registry.utils.converter.AvroConverter",
        ".apicurio.registry.url": native,
        ".apicurio.registry.as-confluent": "true",
        ".apicurio.registry.use-id": "contentId",
        ".apicurio.registry.headers.enabled": "false",
    }


def _properties(path: Path, values: dict[str, str]) -> Path:
    path.write_text("".join(f"{k}={v}\n" for k, v in values.items()))
    return path


class ConnectError(AssertionError):
    """A connector or its task failed: the sink rejected what it read."""


class ConnectWorker:
    """One standalone Connect worker; connectors come and go over its REST API.

    Offsets go to a file; sink connectors keep theirs in the consumer group named after
    the connector, so every test uses a connector name of its own."""

    def __init__(self, stack: Any, workdir: Path) -> None:
        workdir.mkdir(parents=True, exist_ok=True)
        self.log = workdir / "connect.log"
        java_home = Path(_install.find_java_home(COMPONENT, self.log))
        self.java = java_home / "bin" / "java"
        self.libs = connect_libs(java_home, self.log)
        self.port = _proc.free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        converter = avro_converter(stack.registry_url)
        self.worker = _properties(
            workdir / "worker.properties",
            {
                "bootstrap.servers": stack.kafka_bootstrap,
                **{f"key.converter{k}": v for k, v in converter.items()},
                **{f"value.converter{k}": v for k, v in converter.items()},
                "offset.storage.file.filename": str(workdir / "connect.offsets"),
                "offset.flush.interval.ms": "1000",
                "listeners": self.url,
                # Everything is on the classpath: skip scanning for plugins elsewhere.
                "plugin.discovery": "only_scan",
                "consumer.auto.offset.reset": "earliest",
                "consumer.max.poll.records": "500",
            },
        )
        self.log4j = workdir / "log4j2.properties"
        self.log4j.write_text(LOG4J2)
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        argv = [
            str(self.java),
            "-Xms128m",
            "-Xmx768m",
            "-XX:+UseSerialGC",
            "-XX:TieredStopAtLevel=1",  # short-lived worker: C1 only, less start-up CPU
            "-Djava.awt.headless=true",
            f"-Dlog4j2.configurationFile={self.log4j}",
            "-cp",
            f"{self.libs}/*",
            "org.apache.kafka.connect.cli.ConnectStandalone",
            str(self.worker),
        ]
        with self.log.open("ab") as log:
            self.proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT)
        wait_for(self._ready, START_TIMEOUT_S, "Kafka Connect's REST API", every=0.5)

    def _ready(self) -> bool:
        self.check_process()
        try:
            self._request("GET", "/connectors")
        except (OSError, urllib.error.URLError):
            return False
        return True

    def check_process(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            raise ConnectError(f"Kafka Connect is not running:\n{self.tail()}")

    def tail(self, chars: int = 6000) -> str:
        return self.log.read_text(errors="replace")[-chars:] if self.log.is_file() else ""

    def _request(self, method: str, path: str, body: Any = None) -> Any:
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(
            self.url + path, data=data, method=method, headers={"Content-Type": "application/json"}
        )
        with urllib.request.urlopen(req, timeout=30) as resp:
            raw = resp.read()
        return json.loads(raw) if raw else None

    def put_connector(self, name: str, config: dict[str, str]) -> None:
        """Create (or reconfigure) connector `name` and wait until its task runs."""
        self._request("PUT", f"/connectors/{name}/config", {"name": name, **config})
        wait_for(lambda: self.task_states(name) == ["RUNNING"], 120, f"connector {name} running")

    def task_states(self, name: str) -> list[str]:
        """States of the connector's tasks; raises ConnectError with the trace of a failed one."""
        self.check_process()
        try:
            status = self._request("GET", f"/connectors/{name}/status")
        except urllib.error.HTTPError as exc:
            if exc.code == 404:
                return []
            raise
        failed = [t for t in [status["connector"], *status["tasks"]] if t["state"] == "FAILED"]
        if failed:
            raise ConnectError(f"connector {name} failed: {failed[0].get('trace', '')[:6000]}")
        return [str(t["state"]) for t in status["tasks"]]

    def delete_connector(self, name: str) -> None:
        try:
            self._request("DELETE", f"/connectors/{name}")
        except urllib.error.HTTPError as exc:
            if exc.code != 404:
                raise

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)


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
