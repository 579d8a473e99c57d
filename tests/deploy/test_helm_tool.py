"""deploy/tools/helm.sh: without Go it stops with a reason instead of a stack of errors."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from .chart import HELM_SH


def test_missing_go_is_explained(tmp_path: Path) -> None:
    env = {
        "PATH": "/usr/bin:/bin",
        "HOME": str(tmp_path),
        "XDG_CACHE_HOME": str(tmp_path / "cache"),
        "HELM_VERSION": "v3.0.0-test",
    }
    assert not any((Path(d) / "go").exists() for d in env["PATH"].split(os.pathsep))
    result = subprocess.run(
        [str(HELM_SH), "version"], env=env, capture_output=True, text=True, timeout=60, check=False
    )
    assert result.returncode == 127
    assert "the Go toolchain ('go') is not on PATH" in result.stderr
    assert not (tmp_path / "cache" / "pg-kafka-bridge" / "helm-v3.0.0-test" / ".built").exists()
