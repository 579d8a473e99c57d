"""Apache Kafka 4 in KRaft mode: one process that is both broker and controller.

Ports and the data dir are fixed at construction, so a fault test can stop the broker and start
it again where clients expect it, with its log intact.

Optionally secured (tests/security): `tls` puts the client listener behind TLS, `scram_users`
makes it require SASL SCRAM-SHA-512 with those credentials (written at storage format time, like
`kafka-storage format --add-scram`), both give SASL_SSL. The broker talks to itself over the
same listener as an extra admin user; the controller listener stays plaintext on loopback.
`client_config()` is what a librdkafka client needs to get in, as that admin.

`host` is the address of the client listener, advertised as is: clients follow the advertised
address, so a fault test that binds it to the end of a veth link gets every connection onto it.
"""

from __future__ import annotations

import base64
import secrets
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from confluent_kafka.admin import AdminClient
from stack_install import HERE, cached_build, run_maven
from stack_proc import ManagedProcess, free_port, port_open, run_logged, wait_until

if TYPE_CHECKING:
    from stack_tls import TlsFiles

COMPONENT = "kafka"
KAFKA_VERSION = "4.3.1"
START_TIMEOUT = 120.0
SCRAM_MECHANISM = "SCRAM-SHA-512"
ADMIN_USER = "kafka-admin"

LOG4J2 = """\
status = warn
appender.out.type = Console
appender.out.name = out
appender.out.layout.type = PatternLayout
appender.out.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = info
rootLogger.appenderRef.out.ref = out
logger.kafka.name = kafka
logger.kafka.level = warn
logger.apache.name = org.apache.kafka
logger.apache.level = warn
logger.started.name = kafka.server.KafkaRaftServer
logger.started.level = info
"""


def kafka_libs(java_home: Path, log_path: Path) -> Path:
    """Directory of the broker's jars, built with Maven once per machine."""

    def build(scratch: Path) -> Path:
        run_maven(
            COMPONENT,
            HERE / "kafka" / "pom.xml",
            [
                "dependency:copy-dependencies",
                "-DincludeScope=runtime",
                f"-DoutputDirectory={scratch / 'out' / 'libs'}",
            ],
            scratch,
            java_home,
            log_path,
        )
        return scratch / "out"

    return cached_build(COMPONENT, f"kafka-{KAFKA_VERSION}", log_path, build) / "libs"


class Kafka:
    def __init__(
        self,
        workdir: Path,
        log_dir: Path,
        *,
        tls: TlsFiles | None = None,
        scram_users: Mapping[str, str] | None = None,
        host: str = "127.0.0.1",
    ) -> None:
        self.root = workdir / "kafka"
        self.data_dir = self.root / "data"
        self.config_path = self.root / "server.properties"
        self.log_path = log_dir / "kafka.log"
        self.host = host
        self.port = free_port(host)
        self.controller_port = free_port()
        self.tls = tls
        self.scram_users = dict(scram_users or {})
        if self.scram_users:  # the broker's own login on its SASL listener
            self.scram_users[ADMIN_USER] = secrets.token_hex(16)
        self.security_protocol = ("SASL_" if self.scram_users else "") + (
            "SSL" if tls is not None else "PLAINTEXT"
        )
        self._process: ManagedProcess | None = None
        self._java = Path()
        self._libs = Path()

    @property
    def bootstrap_servers(self) -> str:
        return f"{self.host}:{self.port}"

    def client_config(self) -> dict[str, Any]:
        """librdkafka settings to reach the client listener (as the admin user under SASL)."""
        conf: dict[str, Any] = {
            "bootstrap.servers": self.bootstrap_servers,
            "security.protocol": self.security_protocol,
        }
        if self.tls is not None:
            conf["ssl.ca.location"] = str(self.tls.ca)
        if self.scram_users:
            conf["sasl.mechanism"] = SCRAM_MECHANISM
            conf["sasl.username"] = ADMIN_USER
            conf["sasl.password"] = self.scram_users[ADMIN_USER]
        return conf

    def install(self, java_home: Path) -> None:
        self._java = java_home / "bin" / "java"
        self._libs = kafka_libs(java_home, self.log_path)

    def _java_argv(self, main: str, *args: str) -> list[str]:
        return [
            str(self._java),
            "-Xms128m",
            "-Xmx512m",
            "-XX:+UseG1GC",
            "-Djava.awt.headless=true",
            f"-Dlog4j2.configurationFile={self.root / 'log4j2.properties'}",
            "-cp",
            f"{self._libs}/*",
            main,
            *args,
        ]

    def init(self) -> None:
        """Write the config and format storage with a fresh random cluster id."""
        self.root.mkdir(parents=True)
        (self.root / "log4j2.properties").write_text(LOG4J2)
        listener = self.security_protocol
        props = {
            "process.roles": "broker,controller",
            "node.id": "1",
            "controller.quorum.voters": f"1@127.0.0.1:{self.controller_port}",
            "listeners": (
                f"{listener}://{self.bootstrap_servers},"
                f"CONTROLLER://127.0.0.1:{self.controller_port}"
            ),
            "advertised.listeners": f"{listener}://{self.bootstrap_servers}",
            "listener.security.protocol.map": f"{listener}:{listener},CONTROLLER:PLAINTEXT",
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": listener,
            "log.dirs": str(self.data_dir),
            "num.partitions": "1",
            "auto.create.topics.enable": "true",
            "offsets.topic.replication.factor": "1",
            "offsets.topic.num.partitions": "1",
            "transaction.state.log.replication.factor": "1",
            "transaction.state.log.min.isr": "1",
            "transaction.state.log.num.partitions": "1",
            "share.coordinator.state.topic.replication.factor": "1",
            "share.coordinator.state.topic.min.isr": "1",
            "group.initial.rebalance.delay.ms": "0",
            **self._security_props(listener),
        }
        self.config_path.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
        self.config_path.chmod(0o600)  # holds the admin password under SASL
        cluster_id = "-"
        while cluster_id.startswith("-"):  # the storage tool would take it for an option
            cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        scram = [
            arg
            for user, password in self.scram_users.items()
            for arg in ("--add-scram", f"{SCRAM_MECHANISM}=[name={user},password={password}]")
        ]
        run_logged(
            COMPONENT,
            self._java_argv(
                "kafka.tools.StorageTool",
                "format",
                "-t",
                cluster_id,
                "-c",
                str(self.config_path),
                *scram,
            ),
            self.log_path,
            cwd=self.root,
            timeout=120.0,
        )

    def _security_props(self, listener: str) -> dict[str, str]:
        props: dict[str, str] = {}
        if self.tls is not None:
            props |= {
                "ssl.keystore.type": "PEM",
                "ssl.keystore.location": str(self.tls.keystore()),
                "ssl.truststore.type": "PEM",  # the broker's own client checks its certificate
                "ssl.truststore.location": str(self.tls.ca),
            }
        if self.scram_users:
            login = (
                "org.apache.kafka.common.security.scram.ScramLoginModule required "
                f'username="{ADMIN_USER}" password="{self.scram_users[ADMIN_USER]}";'
            )
            props |= {
                "sasl.enabled.mechanisms": SCRAM_MECHANISM,
                "sasl.mechanism.inter.broker.protocol": SCRAM_MECHANISM,
                f"listener.name.{listener.lower()}.{SCRAM_MECHANISM.lower()}.sasl.jaas.config": (
                    login
                ),
            }
        return props

    def start(self) -> None:
        if self._process is not None and self._process.alive():
            return
        self._process = ManagedProcess(
            COMPONENT,
            self._java_argv("kafka.Kafka", str(self.config_path)),
            self.log_path,
            cwd=self.root,
        )
        self._process.start()

    def wait_ready(self, timeout: float = START_TIMEOUT) -> None:
        assert self._process is not None
        wait_until(self._process, self._ready, timeout=timeout, what="serving metadata")

    def _ready(self) -> bool:
        # Probe the socket first: librdkafka logs every refused connection to stderr.
        if not port_open(self.port, self.host):
            return False
        admin = AdminClient(self.client_config())
        metadata = admin.list_topics(timeout=5)
        return bool(metadata.brokers)

    def stop(self, *, graceful: bool = True) -> None:
        if self._process is not None:
            self._process.stop(graceful=graceful, timeout=60.0)

    def running(self) -> bool:
        return self._process is not None and self._process.alive()
