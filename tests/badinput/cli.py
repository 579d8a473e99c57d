"""Running the `bridge` CLI as an operator would, and the shape its errors must have.

`bridge()` is the real thing, `python -m bridge` in a subprocess. `invoke()` runs
the same Typer app in-process (typer.testing), for the many configuration cases
that fail before any connection, where a process start per case (~0.5 s) would
only make the suite slower.
"""

from __future__ import annotations

import os
import subprocess
import sys
import traceback
from pathlib import Path
from typing import Any, NamedTuple

import yaml
from typer.testing import CliRunner

from bridge.cli import app

REPO = Path(__file__).resolve().parents[2]


class Outcome(NamedTuple):
    returncode: int
    stdout: str
    stderr: str


def bridge(*args: str, env: dict[str, str] | None = None, timeout: float = 120) -> Outcome:
    done = subprocess.run(
        [sys.executable, "-m", "bridge", *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, **(env or {})},
        check=False,
    )
    return Outcome(done.returncode, done.stdout, done.stderr)


def invoke(*args: str, env: dict[str, str] | None = None) -> Outcome:
    result = CliRunner().invoke(app, list(args), env=env)
    stderr = result.stderr
    if result.exc_info is not None and not isinstance(result.exception, SystemExit):
        stderr += "".join(traceback.format_exception(*result.exc_info))  # what a user would see
    return Outcome(result.exit_code, result.stdout, stderr)


def write_config(path: Path, **sections: dict[str, Any]) -> Path:
    path.write_text(yaml.safe_dump(sections, allow_unicode=True))
    return path


def stack_config(stack: Any, database: str, path: Path, **source: Any) -> Path:
    """A config for `database` on the local stack; `source` keys override the defaults."""
    return write_config(
        path,
        source={
            "host": stack.pg_host,
            "port": stack.pg_port,
            "dbname": database,
            "user": stack.pg_user,
            "password": stack.pg_password,
            "connect_timeout_s": 3,
            "slot_busy_timeout_s": 0,
            **source,
        },
        kafka={"bootstrap_servers": stack.kafka_bootstrap, "request_timeout_s": 3},
        registry={"url": stack.registry_url},
        snapshot={"mode": "no_data"},
        http={"port": 0},
    )


def error_line(result: Outcome, exit_code: int) -> str:
    """The one `error:` line; asserts the exit code, no traceback, and nothing after it
    but the per-field list of a configuration error."""
    out = result.stdout + result.stderr
    assert result.returncode == exit_code, out
    assert "Traceback" not in out, out
    lines = result.stderr.splitlines()
    errors = [i for i, line in enumerate(lines) if line.startswith("error: ")]
    assert len(errors) == 1, out
    after = lines[errors[0] + 1 :]
    assert all(line.startswith("  ") for line in after), out
    line = lines[errors[0]]
    assert line.endswith(")") and " (" in line, f"no hint (what to do) in: {line}"
    return line


def fail_line(result: Outcome, check: str) -> str:
    """`bridge check`'s FAIL line for `check`; asserts exit code 1 and no traceback."""
    out = result.stdout + result.stderr
    assert result.returncode == 1, out
    assert "Traceback" not in out, out
    found = [line for line in result.stdout.splitlines() if line.startswith(f"FAIL {check}:")]
    assert len(found) == 1, out
    return found[0]
