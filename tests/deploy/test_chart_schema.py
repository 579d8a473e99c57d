"""`helm lint --strict` passes on every supported values set; values.schema.json
rejects what would deploy something other than what was asked."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from .chart import Helm, values_files


def test_lint_strict_default_values(helm: Helm) -> None:
    result = helm.lint()
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 chart(s) failed" in result.stdout
    assert "[WARNING]" not in result.stdout and "[ERROR]" not in result.stdout


@pytest.mark.parametrize("path", values_files(), ids=lambda p: p.stem)
def test_lint_strict_values_file(helm: Helm, path: Path) -> None:
    result = helm.lint(None, path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 chart(s) failed" in result.stdout
    assert "[WARNING]" not in result.stdout and "[ERROR]" not in result.stdout


def test_values_files_render(helm: Helm) -> None:
    for path in values_files():
        assert helm.template(None, path).deployment


REJECTED: dict[str, dict[str, Any]] = {
    "unknown-top-level-key": {"fooBar": 1},
    "replicas": {"replicas": 2},
    "replicaCount-3": {"replicaCount": 3},  # a slot has one active bridge and one standby
    "replicaCount-0": {"replicaCount": 0},
    "unknown-config-section": {"config": {"sink": {"url": "x"}}},
    "unknown-config-field": {"config": {"source": {"hostname": "db"}}},
    "postgres-password-in-configmap": {"config": {"source": {"password": "pw"}}},
    "sasl-password-in-configmap": {"config": {"kafka": {"sasl_password": "pw"}}},
    "registry-password-in-configmap": {"config": {"registry": {"basic_auth_password": "pw"}}},
    "port-not-integer": {"config": {"source": {"port": "fivefourthreetwo"}}},
    "port-out-of-range": {"config": {"http": {"port": 70000}}},
    "bad-enum": {"config": {"log": {"level": "LOUD"}}},
    "bad-slot-name": {"config": {"source": {"slot_name": "Bad-Slot"}}},
    "shutdown-timeout-zero": {"config": {"pipeline": {"shutdown_timeout_s": 0}}},
    "enabled-not-bool": {"serviceMonitor": {"enabled": "yes"}},
    "resources-not-object": {"resources": "big"},
    "bad-quantity": {"resources": {"limits": {"memory": "lots"}}},
    "unknown-resource": {"resources": {"limits": {"gpus": 1}}},
    "run-as-user-string": {"securityContext": {"runAsUser": "root"}},
    "unknown-security-field": {"securityContext": {"runAsRoot": True}},
    "tolerations-not-list": {"tolerations": {"key": "dedicated"}},
    "grace-period-string": {"terminationGracePeriodSeconds": "60"},
    "spill-medium": {"spill": {"medium": "Disk"}},
    "image-extra-key": {"image": {"repository": "x", "digest": "sha256:00"}},
    "auth-unknown-key": {"auth": {"password": "pw"}},
    "env-without-name": {"extraEnv": [{"value": "x"}]},
    "pdb-bad-percent": {"podDisruptionBudget": {"enabled": True, "minAvailable": "half"}},
    "verify-unknown-key": {"verify": {"enabled": True, "every": "day"}},
    "verify-table-without-schema": {"verify": {"tables": ["orders"]}},
}


@pytest.mark.parametrize("values", REJECTED.values(), ids=REJECTED.keys())
def test_schema_rejects(helm: Helm, values: dict[str, Any]) -> None:
    error = helm.template_error(values)
    assert "values don't meet the specifications of the schema" in error, error
    lint = helm.lint(values)
    assert lint.returncode != 0, f"helm lint accepted {values}:\n{lint.stdout}"


# Checks the schema cannot express; the templates `fail` with a reason.
# (helm lint only logs template `fail`s, so these are asserted on `helm template`.)
TEMPLATE_REJECTED: dict[str, tuple[dict[str, Any], str]] = {
    "grace-not-above-shutdown": (
        {"terminationGracePeriodSeconds": 30, "config": {"pipeline": {"shutdown_timeout_s": 30}}},
        "must exceed config.pipeline.shutdown_timeout_s",
    ),
    "secret-and-passwords": (
        {"auth": {"existingSecret": "mine", "postgresPassword": "pw"}},
        "set either existingSecret or the passwords",
    ),
    "pdb-both-bounds": (
        {"podDisruptionBudget": {"enabled": True, "minAvailable": 1, "maxUnavailable": 0}},
        "set minAvailable or maxUnavailable, not both",
    ),
    "alerts-without-pushed-metrics": (
        {"prometheusRule": {"enabled": True}, "verify": {"enabled": True}},
        "enable verify and set verify.pushGateway",
    ),
    "spill-dir-is-tmp": (
        {"config": {"pipeline": {"spill_dir": "/tmp"}}},
        "config.pipeline.spill_dir",
    ),
    "spill-dir-relative": (
        {"config": {"pipeline": {"spill_dir": "spill"}}},
        "config.pipeline.spill_dir",
    ),
    "pair-at-least-once": (
        {"replicaCount": 2, "config": {"kafka": {"exactly_once": False}}},
        "replicaCount 2 needs config.kafka.exactly_once",
    ),
    "pair-without-ha": (
        {"replicaCount": 2, "config": {"ha": {"enabled": False}}},
        "leave config.ha.enabled unset or true",
    ),
    "spill-dir-in-config-mount": (
        {"config": {"pipeline": {"spill_dir": "/etc/bridge/spill"}}},
        "config.pipeline.spill_dir",
    ),
}


@pytest.mark.parametrize(
    ("values", "reason"), TEMPLATE_REJECTED.values(), ids=TEMPLATE_REJECTED.keys()
)
def test_template_rejects(helm: Helm, values: dict[str, Any], reason: str) -> None:
    assert reason in helm.template_error(values)
