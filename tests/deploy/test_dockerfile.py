"""deploy/Dockerfile without a Docker engine: its structure, hadolint, and the
wheel its builder stage would make from the files the build context lets in."""

from __future__ import annotations

import fnmatch
import json
import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import NamedTuple

import pytest
import yaml
from compiled import hot_path
from tools import venv_tool

from .chart import CHART, ROOT

DOCKERFILE = ROOT / "deploy" / "Dockerfile"
DOCKERIGNORE = ROOT / ".dockerignore"
BASE = re.compile(r"^python:3\.11\.\d+-slim-bookworm$")


class Instruction(NamedTuple):
    stage: int
    op: str
    args: str


def _instructions() -> list[Instruction]:
    """Dockerfile instructions, continuation lines joined, comments dropped."""
    logical: list[str] = []
    pending = ""
    for raw in DOCKERFILE.read_text(encoding="utf-8").splitlines():
        line = raw.strip()
        if not pending and (not line or line.startswith("#")):
            continue
        if line.startswith("#"):
            continue
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        logical.append(pending + line)
        pending = ""
    assert not pending, "Dockerfile ends inside a continued line"
    result: list[Instruction] = []
    stage = -1
    for line in logical:
        op, _, args = line.partition(" ")
        if op.upper() == "FROM":
            stage += 1
        result.append(Instruction(stage, op.upper(), " ".join(args.split())))
    return result


def _stage(index: int) -> list[Instruction]:
    instructions = _instructions()
    last = max(i.stage for i in instructions)
    wanted = last if index == -1 else index
    return [i for i in instructions if i.stage == wanted]


def _only(stage: list[Instruction], op: str) -> str:
    found = [i.args for i in stage if i.op == op]
    assert len(found) == 1, f"expected one {op}, got {found}"
    return found[0]


def test_multi_stage_on_one_pinned_base() -> None:
    froms = [i.args.split() for i in _instructions() if i.op == "FROM"]
    assert len(froms) >= 2, "builder and runtime stages expected"
    images = [f[0] for f in froms]
    for image in images:
        assert BASE.match(image), f"{image}: pin an exact python:3.11.N-slim-bookworm tag"
        assert "latest" not in image
    assert len(set(images)) == 1, "builder and runtime must share the base (same libc, same ABI)"
    assert [w.lower() for w in froms[0][1:]] == ["as", "builder"]


def test_builder_makes_wheels() -> None:
    runs = [i.args for i in _stage(0) if i.op == "RUN"]
    assert any("pip wheel" in r for r in runs)


def test_runtime_stage_installs_only_the_wheels() -> None:
    runtime = _stage(-1)
    assert not [i for i in runtime if i.op in ("COPY", "ADD") and "--from=builder" not in i.args]
    install = [i.args for i in runtime if i.op == "RUN" and "pip install" in i.args]
    assert len(install) == 1
    assert "--no-index" in install[0] and "from=builder" in install[0]


def test_runtime_runs_as_non_root_numeric_user() -> None:
    runtime = _stage(-1)
    users = [i for i in runtime if i.op == "USER"]
    assert users, "the runtime stage must switch to a non-root user"
    user = users[-1].args
    assert re.fullmatch(r"\d+(:\d+)?", user), "numeric UID so Kubernetes can check runAsNonRoot"
    assert int(user.split(":")[0]) == 10001
    ops = [i.op for i in runtime]
    assert ops.index("ENTRYPOINT") > runtime.index(users[-1])
    assert "RUN" not in ops[runtime.index(users[-1]) :], "no RUN after dropping root"


def test_entrypoint_cmd_port_and_healthcheck() -> None:
    runtime = _stage(-1)
    assert json.loads(_only(runtime, "ENTRYPOINT")) == ["bridge"]
    assert json.loads(_only(runtime, "CMD")) == ["run", "--config", "/etc/bridge/config.yaml"]
    assert _only(runtime, "EXPOSE") == "9187"
    assert _only(runtime, "HEALTHCHECK") == "NONE"


def test_image_matches_the_chart() -> None:
    values = yaml.safe_load((CHART / "values.yaml").read_text(encoding="utf-8"))
    runtime = _stage(-1)
    assert int(_only(runtime, "EXPOSE")) == values["config"]["http"]["port"]
    uid = int(_only(runtime, "USER").split(":")[0])
    assert (
        uid == values["securityContext"]["runAsUser"] == values["podSecurityContext"]["runAsUser"]
    )
    assert json.loads(_only(runtime, "CMD"))[-1] == "/etc/bridge/config.yaml"


def test_hadolint() -> None:
    result = subprocess.run(
        [venv_tool("hadolint"), "--failure-threshold", "info", str(DOCKERFILE)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def _ignored(name: str) -> bool:
    """Whether .dockerignore keeps top-level `name` out of the context (last match wins)."""
    excluded = False
    for raw in DOCKERIGNORE.read_text(encoding="utf-8").splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        negated = line.startswith("!")
        pattern = line.lstrip("!").rstrip("/")
        if fnmatch.fnmatch(name, pattern):
            excluded = not negated
    return excluded


def _builder_sources() -> list[str]:
    sources: list[str] = []
    for i in _stage(0):
        if i.op == "COPY":
            assert "--from" not in i.args
            sources += [s.rstrip("/") for s in i.args.split()[:-1]]
    return sources


@pytest.mark.slow_build  # compiles the hot path with mypyc: minutes on a 2-core machine
def test_build_context_builds_a_complete_wheel(tmp_path: Path) -> None:
    """Build the wheel from exactly what the builder stage COPYs, as `pip wheel` there would."""
    context = tmp_path / "context"
    context.mkdir()
    for source in _builder_sources():
        assert not _ignored(source), f".dockerignore excludes {source}, which the build COPYs"
        path = ROOT / source
        assert path.exists(), f"{source} is missing: `docker build` would fail at COPY"
        if path.is_dir():
            shutil.copytree(
                path,
                context / source,
                ignore=shutil.ignore_patterns("__pycache__", "*.py[cod]", "*.so"),
            )
        else:
            shutil.copy2(path, context / source)
    for private in (".git", "tests", "deploy"):
        assert _ignored(private), f".dockerignore should keep {private} out of the context"
    out = tmp_path / "wheels"
    result = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--wheel-dir", str(out), str(context)],
        capture_output=True,
        text=True,
        timeout=1500,  # only a bound on a hang: the build took over 300 s on a loaded machine
        check=False,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    (wheel,) = out.glob("pg_kafka_bridge-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    schemas = {n.rsplit("/", 1)[1] for n in names if "/data/share/pg-kafka-bridge/schemas/" in n}
    assert schemas == {p.name for p in (ROOT / "schemas").glob("*.avsc")}
    (entry_points,) = [n for n in names if n.endswith(".dist-info/entry_points.txt")]
    text = zipfile.ZipFile(wheel).read(entry_points).decode()
    assert re.search(r"^bridge = bridge\.cli:main$", text, re.MULTILINE)
    if not os.environ.get("BRIDGE_PURE_PYTHON"):  # the image runs the compiled hot path
        for module in hot_path():
            stem = module.removesuffix(".py")
            assert any(n.startswith(stem + ".cpython-") and n.endswith(".so") for n in names), (
                f"the wheel lacks the compiled {module}"
            )
