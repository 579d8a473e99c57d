"""Apicurio Registry with embedded H2 storage, serving the Confluent Schema Registry API.

Clients use `url` (the `/apis/ccompat/v7` base) exactly like a Confluent registry URL. After
start the global compatibility level is set to BACKWARD, Confluent's default, so schema
evolution tests see the behaviour they would in production.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import httpx
from stack_install import HERE, cached_build, run_maven
from stack_proc import ManagedProcess, StackError, free_port, port_open, wait_until

COMPONENT = "schema-registry"
APICURIO_VERSION = "2.4.2.Final"
RUNNER_JAR = f"apicurio-registry-runner-{APICURIO_VERSION}-runner.jar"
CCOMPAT_PATH = "/apis/ccompat/v7"
START_TIMEOUT = 120.0
DEFAULT_COMPATIBILITY = "BACKWARD"


def registry_dist(java_home: Path, log_path: Path) -> Path:
    """Directory holding the augmented runner jar and its lib/, built with Maven once."""

    def build(scratch: Path) -> Path:
        project = run_maven(
            COMPONENT,
            HERE / "registry" / "pom.xml",
            ["package", "-DskipTests"],
            scratch,
            java_home,
            log_path,
        )
        out = scratch / "out"
        out.mkdir()
        shutil.move(project / "target" / RUNNER_JAR, out / RUNNER_JAR)
        shutil.move(project / "target" / "lib", out / "lib")
        return out

    return cached_build(COMPONENT, f"apicurio-registry-{APICURIO_VERSION}", log_path, build)


class Registry:
    def __init__(self, workdir: Path, log_dir: Path) -> None:
        self.root = workdir / "registry"
        self.log_path = log_dir / "registry.log"
        self.port = free_port()
        self._process: ManagedProcess | None = None
        self._java = Path()
        self._dist = Path()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}{CCOMPAT_PATH}"

    def install(self, java_home: Path) -> None:
        self._java = java_home / "bin" / "java"
        self._dist = registry_dist(java_home, self.log_path)

    def init(self) -> None:
        self.root.mkdir(parents=True)

    def start(self) -> None:
        if self._process is not None and self._process.alive():
            return
        argv = [
            str(self._java),
            "-Xms64m",
            "-Xmx512m",
            "-Djava.awt.headless=true",
            "-Dquarkus.http.host=127.0.0.1",
            f"-Dquarkus.http.port={self.port}",
            "-Dregistry.rest.artifact.deletion.enabled=true",
            "-Dregistry.enable.sentry=false",
            # H2 on disk rather than in memory: schema ids must survive a registry restart, or
            # records already in Kafka would resolve to the wrong schemas.
            f"-Dquarkus.datasource.jdbc.url=jdbc:h2:file:{self.root / 'h2' / 'registry'}",
            f"-Djava.io.tmpdir={self.root}",
            "-jar",
            str(self._dist / RUNNER_JAR),
        ]
        self._process = ManagedProcess(COMPONENT, argv, self.log_path, cwd=self.root)
        self._process.start()

    def wait_ready(self, timeout: float = START_TIMEOUT) -> None:
        assert self._process is not None
        wait_until(self._process, self._ready, timeout=timeout, what="serving /subjects")
        response = httpx.put(
            f"{self.url}/config",
            json={"compatibility": DEFAULT_COMPATIBILITY},
            headers={"Content-Type": "application/vnd.schemaregistry.v1+json"},
            timeout=10.0,
        )
        if response.status_code != 200:
            raise StackError(
                COMPONENT,
                f"setting compatibility failed: {response.status_code} {response.text}",
                self.log_path,
            )

    def _ready(self) -> bool:
        if not port_open(self.port):
            return False
        return httpx.get(f"{self.url}/subjects", timeout=5.0).status_code == 200

    def stop(self, *, graceful: bool = True) -> None:
        if self._process is not None:
            self._process.stop(graceful=graceful)

    def running(self) -> bool:
        return self._process is not None and self._process.alive()
