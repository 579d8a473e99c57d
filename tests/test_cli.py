"""The `bridge` command line, run as a user runs it (a subprocess)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

REPO = Path(__file__).resolve().parents[1]


def bridge(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "bridge", *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        check=False,
    )


@pytest.mark.parametrize("command", [[], ["run"], ["check"], ["demo"]])
def test_help(command: list[str]) -> None:
    result = bridge(*command, "--help")
    assert result.returncode == 0, result.stderr
    assert "Usage" in result.stdout
    if command in (["run"], ["check"]):
        assert "--config" in result.stdout


def test_version() -> None:
    result = bridge("--version")
    assert result.returncode == 0 and result.stdout.strip()


def test_bad_config_exits_2_with_one_line_per_problem(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text("source:\n  port: seventy\n  pasword: x\nkafka:\n  topic_prefix: 'a b'\n")
    for command in ("check", "run"):
        result = bridge(command, "--config", str(path))
        assert result.returncode == 2
        lines = result.stderr.splitlines()
        assert any(line.strip().startswith("source.port:") for line in lines)
        assert any(line.strip().startswith("source.pasword: unknown key") for line in lines)
        assert any(line.strip().startswith("kafka.topic_prefix:") for line in lines)


def config_for(stack: Any, pg_db: str, tmp_path: Path, **source: Any) -> Path:
    settings = {
        "source": {
            "host": stack.pg_host,
            "port": stack.pg_port,
            "dbname": pg_db,
            "user": stack.pg_user,
            "password": stack.pg_password,
            "connect_timeout_s": 3,
            **source,
        },
        "kafka": {"bootstrap_servers": stack.kafka_bootstrap, "request_timeout_s": 3},
        "registry": {"url": stack.registry_url},
    }
    path = tmp_path / "bridge.yaml"
    path.write_text(yaml.safe_dump(settings))
    return path


def test_check_against_the_stack(stack: Any, pg_db: str, tmp_path: Path) -> None:
    result = bridge("check", "--config", str(config_for(stack, pg_db, tmp_path)))
    assert result.returncode == 0, result.stdout + result.stderr
    names = [
        "PostgreSQL reachable",
        "wal_level = logical",
        "role has REPLICATION",
        "publication",
        "replication slot",
        "Kafka reachable",
        "schema registry reachable",
    ]
    for name in names:
        assert any(line.startswith(f"ok   {name}") for line in result.stdout.splitlines()), name


def test_check_reports_failures_without_secrets(stack: Any, pg_db: str, tmp_path: Path) -> None:
    path = config_for(stack, pg_db, tmp_path, password="not-the-password-42")
    settings = yaml.safe_load(path.read_text())
    settings["kafka"]["bootstrap_servers"] = "127.0.0.1:1"
    settings["registry"]["url"] = "http://127.0.0.1:1"
    settings["source"]["publication_mode"] = "disabled"
    path.write_text(yaml.safe_dump(settings))
    result = bridge("check", "--config", str(path))
    assert result.returncode == 1
    out = result.stdout
    assert "FAIL PostgreSQL reachable" in out and "password authentication failed" in out
    assert "FAIL Kafka reachable" in out
    assert "FAIL schema registry reachable" in out
    assert "not-the-password-42" not in out + result.stderr


def test_check_names_a_missing_publication(stack: Any, pg_db: str, tmp_path: Path) -> None:
    path = config_for(stack, pg_db, tmp_path, publication_mode="disabled")
    result = bridge("check", "--config", str(path))
    assert result.returncode == 1
    assert "FAIL publication" in result.stdout and "CREATE PUBLICATION" in result.stdout


def test_demo_without_the_stack_on_the_import_path_says_how_to_run_it() -> None:
    """The installed package never reaches into the checkout for deploy/local/stack.py."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    code = "from bridge.demo import _load_stack; _load_stack()"
    result = subprocess.run(
        [sys.executable, "-c", code],
        cwd=REPO / "bench",  # not the repository root, where `stack` is not either
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
        check=False,
    )
    assert result.returncode != 0
    assert "not on the import path" in result.stderr
    assert "./deploy/local/dev.sh demo" in result.stderr


def test_demo_finds_the_stack_as_dev_sh_puts_it() -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO / "deploy" / "local")}
    code = "from bridge.demo import _load_stack; print(_load_stack().Stack.__name__)"
    result = subprocess.run(
        [sys.executable, "-c", code],
        cwd=REPO / "bench",
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "Stack"
    assert 'PYTHONPATH="$ROOT/deploy/local' in (REPO / "deploy/local/dev.sh").read_text()
