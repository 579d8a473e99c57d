"""Apicurio Registry with embedded H2 storage, serving the Confluent Schema Registry API.

Clients use `url` (the `/apis/ccompat/v7` base) exactly like a Confluent registry URL. After
start the global compatibility level is set to BACKWARD, Confluent's default, so schema
evolution tests see the behaviour they would in production.

Optionally secured (tests/security): `tls` serves HTTPS only (Quarkus TLS settings, plain HTTP
disabled). `auth` turns on the registry's own authentication, which in Apicurio 2.4 is OpenID
Connect only: a bearer token checked against the issuer, or HTTP basic credentials that the
registry exchanges for a token at the issuer's token endpoint (client-credentials grant) — the
form Confluent clients' `basic.auth.user.info` uses. It has no local user list. With
`roles` the registry also authorizes by role, as a production Apicurio behind Keycloak does:
the token's roles (its `groups` claim) must name `sr-admin` (everything), `sr-developer`
(register schemas, read) or `sr-readonly` (read only, e.g. a `bridge verify` CronJob).

`host` is the one address it listens on (fault tests: the end of a veth link).
"""

from __future__ import annotations

import shutil
import ssl
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

import httpx
from stack_install import HERE, cached_build, run_maven
from stack_proc import ManagedProcess, StackError, free_port, port_open, wait_until

if TYPE_CHECKING:
    from stack_tls import TlsFiles

COMPONENT = "schema-registry"
APICURIO_VERSION = "2.4.2.Final"
RUNNER_JAR = f"apicurio-registry-runner-{APICURIO_VERSION}-runner.jar"
CCOMPAT_PATH = "/apis/ccompat/v7"
START_TIMEOUT = 120.0
DEFAULT_COMPATIBILITY = "BACKWARD"


class RegistryAuth(NamedTuple):
    """An OpenID Connect issuer the registry trusts, and a client of it the stack itself uses."""

    issuer_url: str  # serves <issuer_url>/.well-known/openid-configuration
    token_endpoint: str
    user: str  # client id / secret, sent as HTTP basic credentials
    password: str
    roles: bool = False  # authorize by the token's roles (sr-admin, sr-developer, sr-readonly)


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
    def __init__(
        self,
        workdir: Path,
        log_dir: Path,
        *,
        tls: TlsFiles | None = None,
        auth: RegistryAuth | None = None,
        host: str = "127.0.0.1",
    ) -> None:
        self.root = workdir / "registry"
        self.log_path = log_dir / "registry.log"
        self.host = host
        self.port = free_port(host)
        self.tls = tls
        self.auth = auth
        self._process: ManagedProcess | None = None
        self._java = Path()
        self._dist = Path()

    @property
    def url(self) -> str:
        scheme = "http" if self.tls is None else "https"
        return f"{scheme}://{self.host}:{self.port}{CCOMPAT_PATH}"

    def _client(self) -> httpx.Client:
        """An HTTP client that trusts the stack's CA and logs in as the stack's own user."""
        return httpx.Client(
            verify=True if self.tls is None else ssl.create_default_context(cafile=self.tls.ca),
            auth=None if self.auth is None else (self.auth.user, self.auth.password),
            timeout=10.0,
        )

    def _http_args(self) -> list[str]:
        """Where and how the registry listens, and whom it lets in."""
        args = [f"-Dquarkus.http.port={self.port}"]
        if self.tls is not None:
            args = [
                f"-Dquarkus.http.ssl-port={self.port}",
                "-Dquarkus.http.insecure-requests=disabled",  # no plain HTTP port at all
                f"-Dquarkus.http.ssl.certificate.files={self.tls.cert}",
                f"-Dquarkus.http.ssl.certificate.key-files={self.tls.key}",
            ]
        if self.auth is not None:
            args += [
                "-Dregistry.auth.enabled=true",
                f"-Dquarkus.oidc.auth-server-url={self.auth.issuer_url}",
                f"-Dregistry.auth.token.endpoint={self.auth.token_endpoint}",
                "-Dregistry.auth.basic-auth-client-credentials.enabled=true",
            ]
            if self.auth.roles:
                args += [
                    "-Dregistry.auth.role-based-authorization=true",
                    "-Dregistry.auth.role-source=token",
                ]
        return args

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
            f"-Dquarkus.http.host={self.host}",
            *self._http_args(),
            "-Dregistry.rest.artifact.deletion.enabled=true",
            "-Dregistry.enable.sentry=false",
            # H2 on disk rather than in memory: schema ids must survive a registry restart, or
            # records already in Kafka would resolve to the wrong schemas. WRITE_DELAY=0: H2
            # writes each commit before the registry answers; its default leaves the last
            # 0.5 s of commits to a background writer, which a killed registry (SIGKILL, or a
            # graceful stop past its grace) never runs, forgetting ids it has handed out
            # (tests/faults/test_registry_kill.py).
            f"-Dquarkus.datasource.jdbc.url=jdbc:h2:file:{self.root / 'h2' / 'registry'}"
            ";WRITE_DELAY=0",
            f"-Djava.io.tmpdir={self.root}",
            "-jar",
            str(self._dist / RUNNER_JAR),
        ]
        self._process = ManagedProcess(COMPONENT, argv, self.log_path, cwd=self.root)
        self._process.start()

    def wait_ready(self, timeout: float = START_TIMEOUT) -> None:
        assert self._process is not None
        wait_until(self._process, self._ready, timeout=timeout, what="serving /subjects")
        with self._client() as client:
            response = client.put(
                f"{self.url}/config",
                json={"compatibility": DEFAULT_COMPATIBILITY},
                headers={"Content-Type": "application/vnd.schemaregistry.v1+json"},
            )
        if response.status_code != 200:
            raise StackError(
                COMPONENT,
                f"setting compatibility failed: {response.status_code} {response.text}",
                self.log_path,
            )

    def _ready(self) -> bool:
        if not port_open(self.port, self.host):
            return False
        with self._client() as client:
            return client.get(f"{self.url}/subjects").status_code == 200

    def stop(self, *, graceful: bool = True) -> None:
        if self._process is not None:
            self._process.stop(graceful=graceful)

    def running(self) -> bool:
        return self._process is not None and self._process.alive()
