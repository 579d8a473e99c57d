"""The hot path runs compiled (setup.py), and a stale build refuses to import."""

from __future__ import annotations

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


def test_stale_extension_is_found(tmp_path: Path) -> None:
    """The newest library dates the build: stubs left untouched by a rebuild are fine."""
    package = tmp_path / "bridge"
    (package / "decode").mkdir(parents=True)
    stub = package / "decode" / "pgoutput.cpython-311-x86_64-linux-gnu.so"
    source = package / "decode" / "pgoutput.py"
    shared = tmp_path / "0123abcd__mypyc.cpython-311-x86_64-linux-gnu.so"
    for path in (source, stub, shared, package / "acks.py"):
        path.write_bytes(b"")
    os.utime(stub, (1_000, 1_000))
    os.utime(source, (2_000, 2_000))
    os.utime(shared, (3_000, 3_000))  # a rebuild relinked the library, not the stub
    assert bridge.stale_compiled_modules(package) == []
    os.utime(source, (4_000, 4_000))  # edited after the build
    assert bridge.stale_compiled_modules(package) == [source]


def test_stale_build_refuses_to_import(tmp_path: Path) -> None:
    """A source checkout whose compiled module is older than its source stops at import."""
    checkout = tmp_path / "checkout"
    (checkout / "bridge").mkdir(parents=True)
    (checkout / "setup.py").write_text("")
    (checkout / "bridge" / "__init__.py").write_text((ROOT / "bridge" / "__init__.py").read_text())
    ext = checkout / "bridge" / "acks.cpython-311-x86_64-linux-gnu.so"
    ext.write_bytes(b"")
    (checkout / "bridge" / "acks.py").write_text("")
    os.utime(ext, (1_000, 1_000))
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
