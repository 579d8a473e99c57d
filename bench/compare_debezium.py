"""Debezium's PostgreSQL connector under Kafka Connect standalone, for bench/compare.py.

The jars come from Maven Central (bench/debezium/pom.xml) through the local stack's
install helpers, so they are built once per machine and cached like the broker's.
Everything sits on one classpath: no plugin.path, no per-plugin class loader to set up.
"""

from __future__ import annotations

import importlib
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
_LOCAL = str(ROOT / "deploy" / "local")
if _LOCAL not in sys.path:  # the stack_* modules live beside stack.py, outside any package
    sys.path.insert(0, _LOCAL)

_install = importlib.import_module("stack_install")
_proc = importlib.import_module("stack_proc")

DEBEZIUM_VERSION = "3.3.1.Final"  # keep equal to bench/debezium/pom.xml
POM = Path(__file__).resolve().parent / "debezium" / "pom.xml"
CONVERTER_VERSION = "2.4.2.Final"  # keep equal to bench/debezium/avro-converter.pom.xml
CONVERTER_POM = POM.parent / "avro-converter.pom.xml"
COMPONENT = "debezium"
LOG4J2 = """\
appender.out.type = Console
appender.out.name = out
appender.out.layout.type = PatternLayout
appender.out.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = warn
rootLogger.appenderRef.out.ref = out
logger.dbz.name = io.debezium
logger.dbz.level = info
"""


def debezium_libs(java_home: Path, log_path: Path) -> Path:
    """Directory of Connect's and the connector's jars."""
    return Path(
        _install.maven_libs(COMPONENT, POM, f"debezium-{DEBEZIUM_VERSION}", java_home, log_path)
    )


def avro_converter_libs(java_home: Path, log_path: Path) -> Path:
    """Directory of Apicurio's Avro converter jars (Confluent wire format, ccompat subjects)."""
    name = f"debezium-avro-converter-{CONVERTER_VERSION}"
    return Path(_install.maven_libs(COMPONENT, CONVERTER_POM, name, java_home, log_path))


def avro_converter(registry_url: str) -> dict[str, str | int]:
    """Worker settings for Avro in the Confluent wire format through Apicurio's converter.

    `registry_url` is the registry's Confluent-compatible URL (`.../apis/ccompat/v7`); the
    converter talks Apicurio's own API beside it. `as-confluent` + `use-id=contentId` write
    the 4-byte id a Confluent deserializer expects, in the payload (no headers); subjects
    are `<topic>-key` / `<topic>-value` (its TopicIdStrategy), as Confluent's converter names them.
    `dereference-schema` registers one self-contained schema per subject, as Confluent's
    converter does; without it the source block becomes a reference to a subject of its own
    (`io.debezium.connector.postgresql.Source`), and Apicurio 2.4.2's Confluent-compatible API
    answers every later compatibility check on such a subject with 422 (42201 "invalid Avro
    schema"), Debezium's own unchanged schema included.
    """
    native = registry_url.split("/apis/", maxsplit=1)[0] + "/apis/registry/v2"
    settings: dict[str, str | int] = {}
    for side in ("key", "value"):
        settings |= {
            f"{side}.converter": "io.apicurio.registry.utils.converter.AvroConverter",
            f"{side}.converter.apicurio.registry.url": native,
            f"{side}.converter.apicurio.registry.auto-register": "true",
            f"{side}.converter.apicurio.registry.find-latest": "true",
            f"{side}.converter.apicurio.registry.as-confluent": "true",
            f"{side}.converter.apicurio.registry.use-id": "contentId",
            f"{side}.converter.apicurio.registry.headers.enabled": "false",
            f"{side}.converter.apicurio.registry.dereference-schema": "true",
        }
    return settings


def _properties(path: Path, values: dict[str, str | int]) -> Path:
    path.write_text("".join(f"{k}={v}\n" for k, v in values.items()))
    return path


class Debezium:
    """One standalone Connect worker running one PostgresConnector task.

    `offset.flush.interval.ms` is 1 s because the connector confirms an LSN to the slot
    only when Connect commits its offsets: that is when our completion check can see it.
    """

    def __init__(
        self,
        stack: Any,
        *,
        dbname: str,
        table: str,
        slot: str,
        publication: str,
        prefix: str,
        workdir: Path,
        schemas: bool,
        converter: Mapping[str, str | int] | None = None,
        connector: Mapping[str, str | int] | None = None,
        extra_libs: Sequence[Path] = (),
    ) -> None:
        """`converter` replaces the JSON converter settings (e.g. `avro_converter(...)`, its
        jars in `extra_libs`); `connector` adds to or overrides the connector's properties."""
        self.log = workdir / f"{prefix}.log"
        java_home = Path(_install.find_java_home(COMPONENT, self.log))
        self.java = java_home / "bin" / "java"
        self.libs = debezium_libs(java_home, self.log)
        self.extra_libs = tuple(extra_libs)
        json_converter = "org.apache.kafka.connect.json.JsonConverter"
        converters: Mapping[str, str | int] = converter or {
            "key.converter": json_converter,
            "value.converter": json_converter,
            "key.converter.schemas.enable": str(schemas).lower(),
            "value.converter.schemas.enable": str(schemas).lower(),
        }
        self.worker = _properties(
            workdir / f"{prefix}-worker.properties",
            {
                "bootstrap.servers": stack.kafka_bootstrap,
                **converters,
                "offset.storage.file.filename": str(workdir / f"{prefix}.offsets"),
                "offset.flush.interval.ms": 1000,
                "listeners": f"http://127.0.0.1:{_proc.free_port()}",
            },
        )
        self.connector = _properties(
            workdir / f"{prefix}-connector.properties",
            {
                "name": prefix,
                "connector.class": "io.debezium.connector.postgresql.PostgresConnector",
                "tasks.max": 1,
                "database.hostname": stack.pg_host,
                "database.port": stack.pg_port,
                "database.user": stack.pg_user,
                "database.password": stack.pg_password,
                "database.dbname": dbname,
                "topic.prefix": prefix,
                "plugin.name": "pgoutput",
                "slot.name": slot,
                "publication.name": publication,
                "publication.autocreate.mode": "disabled",
                # 3.x has no "never"; no_data starts streaming at the WAL position of its
                # (schema-only) snapshot, so prime() stores an offset before the load.
                "snapshot.mode": "no_data",
                "heartbeat.interval.ms": 1000,
                "table.include.list": f"public.{table}",
                **(connector or {}),
            },
        )
        self.offsets = workdir / f"{prefix}.offsets"
        self.log4j = workdir / f"{prefix}-log4j2.properties"
        self.log4j.write_text(LOG4J2)
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        argv = [
            str(self.java),
            "-Xms256m",
            "-Xmx1g",
            "-XX:+UseG1GC",
            "-Djava.awt.headless=true",
            f"-Dlog4j2.configurationFile={self.log4j}",
            "-cp",
            ":".join(f"{d}/*" for d in (self.libs, *self.extra_libs)),
            "org.apache.kafka.connect.cli.ConnectStandalone",
            str(self.worker),
            str(self.connector),
        ]
        with self.log.open("ab") as log:
            self.proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT)

    def prime(
        self, wait: Callable[[Callable[[], bool], float, str, Callable[[], None]], None]
    ) -> None:
        """Run once before the load, until an offset (a heartbeat's) is stored.

        A restart then resumes streaming from that offset, so the backlog committed
        in between is read like the other readers read it; without an offset a
        no_data start would skip it.
        """
        self.start()
        wait(
            lambda: self.offsets.is_file() and self.offsets.stat().st_size > 0,
            300,
            "Debezium's first offset",
            self.check,
        )
        self.stop()

    def check(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            raise SystemExit(f"Kafka Connect is not running:\n{self.log.read_text()[-4000:]}")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
