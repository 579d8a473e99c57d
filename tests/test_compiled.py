"""The hot path runs compiled (setup.py), and a stale build refuses to import."""

from __future__ import annotations

import hashlib
import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest
from compiled import BUILD_RECORD, ROOT, hot_path, stale_build_message, stale_compiled_modules


def test_hot_path_names_existing_modules() -> None:
    paths = hot_path()
    assert paths, "HOT_PATH is empty"
    for path in paths:
        assert (ROOT / path).is_file(), f"setup.py compiles {path}, which does not exist"


@pytest.mark.skipif(
    bool(os.environ.get("BRIDGE_PURE_PYTHON")), reason="installed with BRIDGE_PURE_PYTHON"
)
def test_hot_path_is_compiled() -> None:
    """The suite (and the bridge) run the compiled modules, not their sources."""
    for path in hot_path():
        name = path.removesuffix(".py").replace("/", ".")
        spec = importlib.util.find_spec(name)
        assert spec is not None and spec.origin is not None
        assert spec.origin.endswith(".so"), f"{name} is not compiled: {spec.origin}"


def test_stale_sources_are_found(tmp_path: Path) -> None:
    (tmp_path / "bridge").mkdir()
    source = tmp_path / "bridge" / "acks.py"
    source.write_text("x = 1\n")
    assert stale_compiled_modules(tmp_path) == []  # no build record: nothing compiled
    digest = hashlib.sha256(b"x = 1\n").hexdigest()
    (tmp_path / BUILD_RECORD).write_text(f"{digest}  bridge/acks.py\n")
    assert stale_compiled_modules(tmp_path) == []
    source.write_text("x = 2\n")  # edited after the build
    assert stale_compiled_modules(tmp_path) == ["bridge/acks.py"]


def test_stale_build_refuses_to_test(tmp_path: Path) -> None:
    """A checkout whose compiled source changed since the build stops the test session."""
    checkout = tmp_path / "checkout"
    (checkout / "bridge").mkdir(parents=True)
    (checkout / "bridge" / "acks.py").write_text("edited = True\n")
    (checkout / BUILD_RECORD).write_text(f"{'0' * 64}  bridge/acks.py\n")
    message = stale_build_message(checkout)
    assert message is not None
    assert "bridge/acks.py changed after it was compiled" in message
    assert "pip install -e ." in message


def test_import_bridge_reads_no_sources() -> None:
    """`import bridge` costs nothing beyond the version: the guard is the test session's."""
    result = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", "import bridge"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    imported = {line.rsplit("|", 1)[-1].strip() for line in result.stderr.splitlines()}
    assert "bridge" in imported
    assert not {"hashlib", "pathlib"} & imported - _interpreter_startup()


def _interpreter_startup() -> set[str]:
    """Modules the interpreter itself imports at start (some sites import pathlib)."""
    result = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", "pass"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    return {line.rsplit("|", 1)[-1].strip() for line in result.stderr.splitlines()}
