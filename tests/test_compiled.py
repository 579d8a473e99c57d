"""The hot path runs compiled (setup.py), and a stale build refuses to import."""

from __future__ import annotations

import hashlib
import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest
from compiled import ROOT, hot_path

import bridge


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
    assert bridge.stale_compiled_modules(tmp_path) == []  # no build record: nothing compiled
    digest = hashlib.sha256(b"x = 1\n").hexdigest()
    (tmp_path / bridge.BUILD_RECORD).write_text(f"{digest}  bridge/acks.py\n")
    assert bridge.stale_compiled_modules(tmp_path) == []
    source.write_text("x = 2\n")  # edited after the build
    assert bridge.stale_compiled_modules(tmp_path) == ["bridge/acks.py"]


def test_stale_build_refuses_to_import(tmp_path: Path) -> None:
    """A source checkout whose compiled source changed since the build stops at import."""
    checkout = tmp_path / "checkout"
    (checkout / "bridge").mkdir(parents=True)
    (checkout / "setup.py").write_text("")
    (checkout / "bridge" / "__init__.py").write_text((ROOT / "bridge" / "__init__.py").read_text())
    (checkout / "bridge" / "acks.py").write_text("edited = True\n")
    (checkout / bridge.BUILD_RECORD).write_text(f"{'0' * 64}  bridge/acks.py\n")
    result = subprocess.run(
        [sys.executable, "-c", "import bridge"],
        cwd=checkout,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode != 0
    assert "bridge/acks.py changed after it was compiled" in result.stderr
    assert "pip install -e ." in result.stderr
