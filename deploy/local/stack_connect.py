"""A Kafka Connect standalone worker beside the local stack, for Debezium's connectors.

The bench's Debezium PostgreSQL source (bench/compare_debezium.py, also the take-over
tests') and the tests' Debezium JDBC sink (tests/consumers/connect.py) run the same
worker: one JVM, Connect's and the plugins' jars from Maven Central on one classpath
(`stack_install.maven_libs`, cached per machine; no plugin.path), offsets in a file, a
REST listener on a free loopback port. Connectors are either given at start (properties
files on the command line, as the bench does) or added over the REST API later (as the
tests do, so one worker serves a whole session).

Avro: Confluent's AvroConverter is not on Maven Central; Apicurio's is and speaks the
Confluent wire format (`apicurio_avro_converter`).
"""

from __future__ import annotations

import json
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from stack_proc import StackError, free_port, tail

START_TIMEOUT_S = 300.0  # cold JVM + plugin scan on a busy 2-core machine
RUNNING_TIMEOUT_S = 120.0
_POLL_S = 0.5


class ConnectError(StackError):
    """The worker died, or a connector or its task failed (with the task's trace)."""


def apicurio_avro_converter(registry_url: str, *, registers: bool) -> dict[str, str]:
    """Worker (or per-connector) settings for Avro in the Confluent wire format, both sides.

    `registry_url` is the registry's Confluent-compatible URL (`.../apis/ccompat/v7`); the
    converter talks Apicurio's own API beside it. `as-confluent` + `use-id=contentId` read
    and write the magic byte and the 4-byte id a Confluent deserializer expects, in the
    payload; headers are off (our key-change records carry Debezium's own headers, which
    must not be taken for Apicurio's). A converter that `registers` (a source) also
    auto-registers under `<topic>-key`/`<topic>-value` as Confluent's converter names them,
    with `dereference-schema`: one self-contained schema per subject, as Confluent's
    converter writes; without it the source block becomes a reference to a subject of its
    own, and Apicurio 2.4.2's Confluent-compatible API answers every later compatibility
    check on such a subject with 422 (42201 "invalid Avro schema").
    """
    base = registry_url.rstrip("/")
    if not base.endswith("/apis/ccompat/v7"):
        raise ValueError(f"not the registry's ccompat/v7 URL: {registry_url}")
    side = {
        "": "io.apicurio.registry.utils.converter.AvroConverter",
        ".apicurio.registry.url": base.removesuffix("/ccompat/v7") + "/registry/v2",
        ".apicurio.registry.as-confluent": "true",
        ".apicurio.registry.use-id": "contentId",
        ".apicurio.registry.headers.enabled": "false",
    }
    if registers:
        side |= {
            ".apicurio.registry.auto-register": "true",
            ".apicurio.registry.find-latest": "true",
            ".apicurio.registry.dereference-schema": "true",
        }
    return {f"{k}.converter{s}": v for k in ("key", "value") for s, v in side.items()}


def _properties(path: Path, values: Mapping[str, str | int]) -> Path:
    path.write_text("".join(f"{k}={v}\n" for k, v in values.items()))
    return path


def _log4j(info_loggers: Sequence[str]) -> str:
    lines = [
        "appender.out.type = Console",
        "appender.out.name = out",
        "appender.out.layout.type = PatternLayout",
        "appender.out.layout.pattern = [%d] %p %m (%c)%n",
        "rootLogger.level = warn",
        "rootLogger.appenderRef.out.ref = out",
    ]
    for n, logger in enumerate(info_loggers):
        lines += [f"logger.l{n}.name = {logger}", f"logger.l{n}.level = info"]
    return "\n".join(lines) + "\n"


class ConnectWorker:
    """One standalone Connect worker: start, stop, readiness and connectors over REST.

    `name` prefixes its files in `workdir` (log, properties, offsets), so several workers
    can share a directory. `worker` adds to or overrides the worker's properties;
    `connectors` are properties files' contents, started with the worker.
    `offset.flush.interval.ms` is 1 s: a Debezium source confirms an LSN to its slot only
    when Connect commits its offsets, and the bench waits for exactly that.
    """

    def __init__(
        self,
        *,
        name: str,
        workdir: Path,
        java: Path,
        libs: Sequence[Path],
        bootstrap: str,
        converters: Mapping[str, str | int],
        worker: Mapping[str, str | int] | None = None,
        connectors: Sequence[Mapping[str, str | int]] = (),
        info_loggers: Sequence[str] = ("io.debezium",),
        jvm_options: Sequence[str] = ("-Xms256m", "-Xmx1g", "-XX:+UseG1GC"),
    ) -> None:
        workdir.mkdir(parents=True, exist_ok=True)
        self.log = workdir / f"{name}.log"
        self.java = java
        self.libs = tuple(libs)
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.offsets = workdir / f"{name}.offsets"
        self.worker = _properties(
            workdir / f"{name}-worker.properties",
            {
                "bootstrap.servers": bootstrap,
                **converters,
                "offset.storage.file.filename": str(self.offsets),
                "offset.flush.interval.ms": 1000,
                "listeners": self.url,
                **(worker or {}),
            },
        )
        self.connectors = [
            _properties(workdir / f"{name}-connector{n}.properties", c)
            for n, c in enumerate(connectors)
        ]
        self.log4j = workdir / f"{name}-log4j2.properties"
        self.log4j.write_text(_log4j(info_loggers))
        self.jvm_options = tuple(jvm_options)
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        """Launch the JVM (not waiting for it: `wait_ready` does, where REST is needed)."""
        argv = [
            str(self.java),
            *self.jvm_options,
            "-Djava.awt.headless=true",
            f"-Dlog4j2.configurationFile={self.log4j}",
            "-cp",
            ":".join(f"{d}/*" for d in self.libs),
            "org.apache.kafka.connect.cli.ConnectStandalone",
            str(self.worker),
            *(str(c) for c in self.connectors),
        ]
        with self.log.open("ab") as log:
            self.proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT)

    def wait_ready(self, timeout: float = START_TIMEOUT_S) -> None:
        self._wait(self._ready, timeout, "Kafka Connect's REST API")

    def _ready(self) -> bool:
        try:
            self._request("GET", "/connectors")
        except (OSError, urllib.error.URLError):
            return False
        return True

    def _wait(self, probe: Any, timeout: float, what: str) -> None:
        """Poll `probe` until true; fails at once when the worker dies or `probe` raises."""
        deadline = time.monotonic() + timeout
        while True:
            self.check()
            if probe():
                return
            if time.monotonic() > deadline:
                raise ConnectError("connect", f"not {what} after {timeout:.0f}s", self.log)
            time.sleep(_POLL_S)

    def check(self) -> None:
        """Raise ConnectError (with the log's last lines) unless the worker is running."""
        if self.proc is None or self.proc.poll() is not None:
            raise ConnectError("connect", "Kafka Connect is not running", self.log)

    def tail(self, lines: int = 60) -> str:
        return tail(self.log, lines)

    def _request(self, method: str, path: str, body: Any = None) -> Any:
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(
            self.url + path, data=data, method=method, headers={"Content-Type": "application/json"}
        )
        with urllib.request.urlopen(req, timeout=30) as resp:
            raw = resp.read()
        return json.loads(raw) if raw else None

    def put_connector(self, name: str, config: Mapping[str, str]) -> None:
        """Create (or reconfigure) connector `name` and wait until its task runs."""
        self._request("PUT", f"/connectors/{name}/config", {"name": name, **config})
        self._wait(
            lambda: self.task_states(name) == ["RUNNING"],
            RUNNING_TIMEOUT_S,
            f"connector {name} running",
        )

    def task_states(self, name: str) -> list[str]:
        """States of the connector's tasks; raises ConnectError with the trace of a failed one."""
        self.check()
        try:
            status = self._request("GET", f"/connectors/{name}/status")
        except urllib.error.HTTPError as exc:
            if exc.code == 404:
                return []
            raise
        failed = [t for t in [status["connector"], *status["tasks"]] if t["state"] == "FAILED"]
        if failed:
            trace = str(failed[0].get("trace", ""))[:6000]
            raise ConnectError("connect", f"connector {name} failed: {trace}")
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
