"""No password ever reaches the bridge's output: stdout, stderr (text and JSON logs at DEBUG,
librdkafka's own debug lines included), error messages, or the HTTP endpoint.

The real CLI (`python -m bridge run/check`) runs as a subprocess with a password on every
connection it makes: a PostgreSQL role created for the test, Kafka SASL and registry basic
auth (the local Kafka and registry do not check them, but the clients are configured with
them). Each password embeds a random hex marker, so a leak shows whatever the escaping
(JSON, repr, URL quoting); base64 forms cover an echoed Authorization header.
"""

from __future__ import annotations

import base64
import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import urllib.parse
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest
import waiting
import yaml
from prometheus_client.parser import text_string_to_metric_families
from psycopg import sql

ROOT = Path(__file__).resolve().parents[1]
REGISTRY_USER = "bridge-registry"
SASL_USER = "bridge-sasl"


def make_password(label: str) -> str:
    """Quotes, a backslash, a space, a percent sign and a non-ASCII letter around a marker."""
    return f"{label}-{secrets.token_hex(8)}-\"q'u\\o t%é"


@dataclass(frozen=True)
class Passwords:
    postgres: str
    sasl: str
    registry: str
    wrong: str

    def leaks(self) -> list[str]:
        """Every form in which a password would show up if printed."""
        forms: list[str] = []
        for pw in (self.postgres, self.sasl, self.registry, self.wrong):
            forms += [
                pw,
                pw.split("-")[1],  # the random marker survives any escaping
                json.dumps(pw)[1:-1],
                json.dumps(pw, ensure_ascii=False)[1:-1],
                repr(pw)[1:-1],
                urllib.parse.quote(pw),
                urllib.parse.quote_plus(pw),
                base64.b64encode(pw.encode()).decode(),
            ]
        for user, pw in ((REGISTRY_USER, self.registry), (SASL_USER, self.sasl)):
            forms.append(base64.b64encode(f"{user}:{pw}".encode()).decode())
        return forms


def assert_no_secrets(text: str, passwords: Passwords, where: str) -> None:
    for form in passwords.leaks():
        at = text.find(form)
        if at >= 0:
            context = text[max(0, at - 300) : at + len(form) + 100]
            pytest.fail(f"{where} contains a password (form {form[:6]!r}...):\n{context}")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@pytest.fixture
def passwords() -> Passwords:
    return Passwords(
        make_password("pg"),
        make_password("sasl"),
        make_password("registry"),
        make_password("wrong"),
    )


@pytest.fixture
def pg_role(pg_conn: psycopg.Connection[Any], passwords: Passwords) -> Iterator[str]:
    """A login role whose password is `passwords.postgres` (superuser: it creates the
    publication FOR ALL TABLES)."""
    name = f"bridge_{secrets.token_hex(6)}"
    pg_conn.execute(
        sql.SQL("CREATE ROLE {} LOGIN SUPERUSER PASSWORD {}").format(
            sql.Identifier(name), sql.Literal(passwords.postgres)
        )
    )
    try:
        yield name
    finally:
        pg_conn.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = %s", (name,)
        )
        pg_conn.execute(sql.SQL("DROP OWNED BY {}").format(sql.Identifier(name)))
        pg_conn.execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(name)))


def bridge_config(
    passwords: Passwords,
    *,
    pg_host: str,
    pg_port: int,
    dbname: str,
    user: str,
    kafka: str,
    registry: str,
    names: str = "bridge",
    log_format: str = "text",
    http_port: int = 0,
) -> dict[str, Any]:
    return {
        "source": {
            "host": pg_host,
            "port": pg_port,
            "dbname": dbname,
            "user": user,
            "password": passwords.postgres,
            "slot_name": names,
            "publication_name": names,
            "status_interval_s": 1.0,
            "connect_timeout_s": 5,
        },
        "kafka": {
            "bootstrap_servers": kafka,
            "topic_prefix": names,
            "sasl_username": SASL_USER,
            "sasl_password": passwords.sasl,
            "request_timeout_s": 3.0,
            # librdkafka's most talkative contexts about settings and credentials
            "producer": {"debug": "conf,security,broker"},
        },
        "registry": {
            "url": registry,
            "basic_auth_user": REGISTRY_USER,
            "basic_auth_password": passwords.registry,
        },
        "http": {"host": "127.0.0.1", "port": http_port},
        "log": {"level": "DEBUG", "format": log_format},
    }


@pytest.fixture
def stack_config(
    stack: Any, pg_db: str, pg_role: str, passwords: Passwords, topic_prefix: str
) -> Callable[..., dict[str, Any]]:
    """bridge_config for the stack, the test's database and topics, as `pg_role`; keyword
    arguments (bridge_config's) override."""

    def make(**overrides: Any) -> dict[str, Any]:
        where: dict[str, Any] = {
            "pg_host": stack.pg_host,
            "pg_port": stack.pg_port,
            "dbname": pg_db,
            "user": pg_role,
            "kafka": stack.kafka_bootstrap,
            "registry": stack.registry_url,
            "names": topic_prefix,
        }
        return bridge_config(passwords, **(where | overrides))

    return make


class Bridge:
    """`python -m bridge <command> --config FILE` with output captured to files."""

    def __init__(
        self, tmp_path: Path, command: str, config: dict[str, Any], env: dict[str, str]
    ) -> None:
        self.config_path = tmp_path / f"{command}-{secrets.token_hex(4)}.yaml"
        self.config_path.write_text(yaml.safe_dump(config, allow_unicode=True), "utf-8")
        self._out = self.config_path.with_suffix(".out")
        self._err = self.config_path.with_suffix(".err")
        clean_env = {k: v for k, v in os.environ.items() if not k.startswith("BRIDGE_")}
        path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)
        with self._out.open("wb") as out, self._err.open("wb") as err:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "bridge", command, "--config", str(self.config_path)],
                stdout=out,
                stderr=err,
                env={**clean_env, **env, "PYTHONPATH": path},
                cwd=ROOT,
            )

    @property
    def stdout(self) -> str:
        return self._out.read_text("utf-8", errors="replace")

    @property
    def stderr(self) -> str:
        return self._err.read_text("utf-8", errors="replace")

    def wait(self, timeout: float = 90.0) -> int:
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            pytest.fail(f"bridge did not exit within {timeout}s; stderr:\n{self.stderr[-3000:]}")

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        return self.wait()

    def wait_for(self, what: str, check: Callable[[], bool], timeout: float = 90.0) -> None:
        """Wait until `check()`; fail at once if the bridge exits, and stop it on a timeout."""

        def ready() -> bool:
            if check():
                return True
            if self.proc.poll() is not None:
                pytest.fail(f"bridge exited ({self.proc.returncode}) before {what}:\n{self.stderr}")
            return False

        try:
            waiting.wait_for(ready, timeout, what, every=0.2)
        except AssertionError as timed_out:
            self.stop()
            pytest.fail(f"{timed_out}; stderr:\n{self.stderr[-3000:]}")


def run_to_exit(tmp_path: Path, command: str, config: dict[str, Any]) -> tuple[int, str]:
    bridge = Bridge(tmp_path, command, config, {})
    code = bridge.wait()
    return code, bridge.stdout + bridge.stderr


def get(url: str) -> httpx.Response | None:
    try:
        return httpx.get(url, timeout=5)
    except httpx.TransportError:
        return None


def status(url: str) -> int:
    reply = get(url)
    return reply.status_code if reply is not None else 0


def json_records(stderr: str) -> list[dict[str, Any]]:
    """Every stderr line, parsed: in JSON mode nothing else may be printed."""
    records = []
    for line in stderr.splitlines():
        if line.strip():
            try:
                records.append(json.loads(line))
            except ValueError:
                pytest.fail(f"not a JSON log line: {line!r}")
    return records


@pytest.mark.parametrize("log_format", ["text", "json"])
def test_streaming_run_never_prints_a_password(
    pg_conn: psycopg.Connection[Any],
    passwords: Passwords,
    stack_config: Callable[..., dict[str, Any]],
    tmp_path: Path,
    log_format: str,
) -> None:
    pg_conn.execute("CREATE TABLE t (id int PRIMARY KEY, secretish text)")
    pg_conn.execute("INSERT INTO t VALUES (100, 'snapshotted')")  # the initial snapshot's producer
    port = free_port()
    config = stack_config(log_format=log_format, http_port=port)
    env = {}
    if log_format == "json":  # the Kubernetes way: the password from the environment
        env["BRIDGE_SOURCE__PASSWORD"] = config["source"].pop("password")
    bridge = Bridge(tmp_path, "run", config, env)
    base = f"http://127.0.0.1:{port}"
    bridge.wait_for("/readyz 200", lambda: status(f"{base}/readyz") == 200)
    for i in range(3):
        pg_conn.execute("INSERT INTO t VALUES (%s, 'x')", (i,))

    def delivered() -> bool:
        reply = get(f"{base}/metrics")
        found = {
            (s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(reply.text if reply else "")
            for s in family.samples
        }
        events = found.get(("bridge_events_total", (("op", "c"), ("table", "public.t"))))
        return events == 3 and found.get(("bridge_open_transactions", ())) == 0

    bridge.wait_for("3 changes delivered and acknowledged", delivered)
    served = "".join(
        getattr(get(f"{base}{path}"), "text", "") for path in ("/metrics", "/healthz", "/readyz")
    )
    assert bridge.stop() == 0, bridge.stderr[-3000:]
    output = bridge.stdout + bridge.stderr
    assert "streaming slot" in output
    assert_no_secrets(output, passwords, f"bridge run ({log_format} logs)")
    assert_no_secrets(served, passwords, "the HTTP endpoint")
    if log_format == "json":
        records = json_records(bridge.stderr)
        assert any(r["level"] == "DEBUG" for r in records)
        # librdkafka's own lines arrive through Python logging, masked and formatted.
        assert any(r["logger"] == "bridge.kafka" for r in records), "librdkafka log not routed"


def test_check_never_prints_a_password(
    passwords: Passwords, stack_config: Callable[..., dict[str, Any]], tmp_path: Path
) -> None:
    code, output = run_to_exit(tmp_path, "check", stack_config())
    assert code == 0, output
    assert "FAIL" not in output
    assert_no_secrets(output, passwords, "bridge check")


def test_wrong_password_is_reported_without_it(
    passwords: Passwords, stack_config: Callable[..., dict[str, Any]], tmp_path: Path
) -> None:
    config = stack_config()
    config["source"]["password"] = passwords.wrong
    for command in ("check", "run"):
        code, output = run_to_exit(tmp_path, command, config)
        assert code == 1, output
        assert "password authentication failed" in output, output
        assert_no_secrets(output, passwords, f"bridge {command} with a wrong password")


def test_unreachable_dependencies_are_reported_without_passwords(
    passwords: Passwords, tmp_path: Path
) -> None:
    config = bridge_config(
        passwords,
        pg_host="127.0.0.1",
        pg_port=free_port(),
        dbname="shop",
        user="bridge",
        kafka=f"127.0.0.1:{free_port()}",
        registry=f"http://127.0.0.1:{free_port()}",
    )
    code, output = run_to_exit(tmp_path, "check", config)
    assert code == 1, output
    for name in ("PostgreSQL reachable", "Kafka reachable", "schema registry reachable"):
        assert f"FAIL {name}" in output, output
    assert_no_secrets(output, passwords, "bridge check, nothing reachable")
    code, output = run_to_exit(tmp_path, "run", config)
    assert code == 1 and "cannot connect to PostgreSQL" in output, output
    assert_no_secrets(output, passwords, "bridge run, PostgreSQL unreachable")


def test_kafka_and_registry_unreachable_after_connecting(
    pg_conn: psycopg.Connection[Any],
    passwords: Passwords,
    stack_config: Callable[..., dict[str, Any]],
    tmp_path: Path,
) -> None:
    pg_conn.execute("CREATE TABLE t (id int PRIMARY KEY)")
    pg_conn.execute("INSERT INTO t VALUES (1)")  # its schema must be registered: the bridge stops
    config = stack_config(
        kafka=f"127.0.0.1:{free_port()}",
        registry=f"http://127.0.0.1:{free_port()}",
        log_format="json",
    )
    bridge = Bridge(tmp_path, "run", config, {})
    code = bridge.wait()
    output = bridge.stdout + bridge.stderr
    assert code == 1, output[-3000:]
    assert_no_secrets(output, passwords, "bridge run, Kafka and registry unreachable")
    json_records(bridge.stderr)


def test_invalid_configuration_never_echoes_a_password(
    passwords: Passwords, tmp_path: Path
) -> None:
    config = bridge_config(
        passwords,
        pg_host="127.0.0.1",
        pg_port=5432,
        dbname="shop",
        user="bridge",
        kafka="127.0.0.1:9092",
        registry="http://127.0.0.1:8081",
    )
    config["source"]["port"] = "not-a-port"
    config["kafka"]["sasl_password"] = {"nested": passwords.sasl}
    config["registry"]["basic_auth_password"] = [passwords.registry]
    for command in ("check", "run"):
        code, output = run_to_exit(tmp_path, command, config)
        assert code == 2, output
        assert "source.port" in output and "registry.basic_auth_password" in output, output
        assert_no_secrets(output, passwords, f"bridge {command} with an invalid configuration")
