"""deploy/tools/helm.sh: without Go it stops with a reason instead of a stack of errors."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from .chart import HELM_SH


def _run(script: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(script), "version"], env=env, capture_output=True, text=True, timeout=60, check=False
    )


def test_missing_go_is_explained(tmp_path: Path) -> None:
    # A copy in a checkout without .venv/bin/go, the last place helm.sh looks.
    script = tmp_path / "checkout" / "deploy" / "tools" / "helm.sh"
    script.parent.mkdir(parents=True)
    shutil.copy2(HELM_SH, script)
    env = {
        "PATH": "/usr/bin:/bin",
        "HOME": str(tmp_path),
        "XDG_CACHE_HOME": str(tmp_path / "cache"),
        "HELM_VERSION": "v3.0.0-test",
    }
    assert not any((Path(d) / "go").exists() for d in env["PATH"].split(os.pathsep))
    result = _run(script, env)
    assert result.returncode == 127
    assert "no Go toolchain to build helm v3.0.0-test" in result.stderr
    assert f"{tmp_path / 'checkout'}/.venv/bin" in result.stderr
    assert not (tmp_path / "cache" / "pg-kafka-bridge" / "helm-v3.0.0-test" / ".built").exists()

    result = _run(script, {**env, "GO": str(tmp_path / "no-such-go")})
    assert result.returncode == 127
    assert f"GO={tmp_path / 'no-such-go'} is not an executable" in result.stderr
