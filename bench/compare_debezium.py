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
_connect = importlib.import_module("stack_connect")

DEBEZIUM_VERSION = "3.3.1.Final"  # keep equal to bench/debezium/pom.xml
POM = Path(__file__).resolve().parent / "debezium" / "pom.xml"
CONVERTER_VERSION = "2.4.2.Final"  # keep equal to bench/debezium/avro-converter.pom.xml
CONVERTER_POM = POM.parent / "avro-converter.pom.xml"
COMPONENT = "debezium"


def debezium_libs(java_home: Path, log_path: Path) -> Path:
    """Directory of Connect's and the connector's jars."""
    return Path(
        _install.maven_libs(COMPONENT, POM, f"debezium-{DEBEZIUM_VERSION}", java_home, log_path)
    )


def avro_converter_libs(java_home: Path, log_path: Path) -> Path:
    """Directory of Apicurio's Avro converter jars (Confluent wire format, ccompat subjects)."""
    name = f"debezium-avro-converter-{CONVERTER_VERSION}"
    return Path(_install.maven_libs(COMPONENT, CONVERTER_POM, name, java_home, log_path))


def avro_converter(registry_url: str) -> dict[str, str]:
    """Settings for Avro in the Confluent wire format through Apicurio's converter, as a
    source writes it (registering `<topic>-key` / `<topic>-value`)."""
    return dict(_connect.apicurio_avro_converter(registry_url, registers=True))


class Debezium:
    """One standalone Connect worker (deploy/local/stack_connect.py) running one
    PostgresConnector task, given on the worker's command line."""

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
        log = workdir / f"{prefix}.log"
        java_home = Path(_install.find_java_home(COMPONENT, log))
        json_converter = "org.apache.kafka.connect.json.JsonConverter"
        converters: Mapping[str, str | int] = converter or {
            "key.converter": json_converter,
            "value.converter": json_converter,
            "key.converter.schemas.enable": str(schemas).lower(),
            "value.converter.schemas.enable": str(schemas).lower(),
        }
        self.worker = _connect.ConnectWorker(
            name=prefix,
            workdir=workdir,
            java=java_home / "bin" / "java",
            libs=[debezium_libs(java_home, log), *extra_libs],
            bootstrap=stack.kafka_bootstrap,
            converters=converters,
            connectors=[
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
                }
            ],
        )
        self.connector = self.worker.connectors[0]
        self.offsets = self.worker.offsets

    @property
    def proc(self) -> subprocess.Popen[bytes] | None:
        proc: subprocess.Popen[bytes] | None = self.worker.proc  # the stack module's Worker
        return proc

    def start(self) -> None:
        self.worker.start()

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
        self.worker.check()

    def stop(self) -> None:
        self.worker.stop()
