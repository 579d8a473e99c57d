"""Kafka over SASL_SSL (SCRAM-SHA-512): a refused login or certificate stops the bridge with the
broker's reason, and no password reaches its output."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from bridge.check import run_checks
from bridge.config import Config

from .helpers import Credentials, changed, other_ca

pytestmark = pytest.mark.live

ROOT = Path(__file__).resolve().parents[2]


def kafka_check(cfg: Config) -> tuple[bool, str]:
    (result,) = [r for r in run_checks(cfg) if r.name == "Kafka reachable"]
    return result.ok, result.detail


def test_the_configured_user_gets_in(settings: dict[str, Any]) -> None:
    ok, detail = kafka_check(Config(**settings))
    assert ok, detail


def test_bridge_run_stops_on_a_wrong_password_without_printing_it(
    settings: dict[str, Any], credentials: Credentials, tmp_path: Path
) -> None:
    wrong = "wrong-" + credentials.kafka_password[::-1]
    config = {
        **settings,
        "kafka": {**settings["kafka"], "sasl_password": wrong},
        "log": {"level": "DEBUG"},
    }
    config_path = tmp_path / "bridge.yaml"
    config_path.write_text(yaml.safe_dump(config))
    env = {k: v for k, v in os.environ.items() if not k.startswith("BRIDGE_")}
    with subprocess.Popen(
        [sys.executable, "-m", "bridge", "run", "--config", str(config_path)],
        cwd=ROOT,
        env={**env, "PYTHONPATH": str(ROOT)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    ) as proc:
        try:
            stdout, stderr = proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            stdout, stderr = proc.communicate()
            pytest.fail(f"the bridge kept running with a refused login:\n{stderr[-2000:]}")
    output = stdout + stderr
    assert proc.returncode == 1, output
    assert "error: Kafka refused the connection" in stderr
    assert "invalid credentials with SASL mechanism SCRAM-SHA-512" in stderr
    for secret in (wrong, credentials.kafka_password):
        assert secret not in output
        assert secret[6:18] not in output  # not even part of it


def test_check_names_a_refused_login(settings: dict[str, Any]) -> None:
    ok, detail = kafka_check(changed(settings, "kafka", sasl_password="not-the-password"))
    assert not ok
    assert "SASL authentication error" in detail
    assert "not-the-password" not in detail


def test_a_broker_certificate_from_another_ca_is_refused(
    settings: dict[str, Any], tmp_path: Path
) -> None:
    ok, detail = kafka_check(changed(settings, "kafka", ssl_ca_location=str(other_ca(tmp_path))))
    assert not ok
    assert "certificate verify failed" in detail


def test_a_plaintext_client_is_not_served(settings: dict[str, Any]) -> None:
    ok, _ = kafka_check(
        changed(settings, "kafka", security_protocol="PLAINTEXT", sasl_mechanism=None)
    )
    assert not ok
