"""Fixtures for the deployment artifacts: a helm built from source.

helm is built from its Go module by deploy/tools/helm.sh (once; cached), with the Go
toolchain of the dev extra (the venv's bin/go). If that cannot happen the tests fail
with the build's own output: a chart that was never linted must not look like a
passing suite. The build takes minutes on first use, so tests/conftest.py marks the
tests that use the `helm` fixture `slow_build` (and so `live`): `pytest -m "not live"`
stays a fast unit run, and the full suite still runs them.
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from .chart import HELM_SH, Helm, run_helm_sh

# Building helm from source on a 2-core machine takes minutes; the first test
# that needs it pays for the build, so every test here gets room for it.
_BUILD_TIMEOUT_S = 1500
_helm_report: list[str] = []


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    here = Path(__file__).resolve().parent
    for item in items:
        if here in Path(str(item.fspath)).resolve().parents:
            item.add_marker(pytest.mark.timeout(_BUILD_TIMEOUT_S + 120))


def pytest_terminal_summary(terminalreporter: Any) -> None:
    for line in _helm_report:
        terminalreporter.write_line(line)


@pytest.fixture(scope="session")
def helm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Helm]:
    started = time.monotonic()
    try:
        result = run_helm_sh("version", "--short", timeout=_BUILD_TIMEOUT_S)
    except subprocess.TimeoutExpired as exc:
        pytest.fail(f"building helm via {HELM_SH} took over {exc.timeout}s", pytrace=False)
    elapsed = time.monotonic() - started
    if result.returncode != 0:
        pytest.fail(
            f"could not build/run helm via {HELM_SH} (exit {result.returncode}); "
            f"it needs the Go toolchain and the Go module proxy:\n{result.stderr[-4000:]}",
            pytrace=False,
        )
    built = "building helm" in result.stderr
    _helm_report.append(
        f"helm {result.stdout.strip()}: "
        + (f"built from source in {elapsed:.0f}s" if built else "cached build")
    )
    yield Helm(tmp_path_factory.mktemp("helm-values"))
