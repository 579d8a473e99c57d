"""The chart's `config` and the bridge's config model must agree: what the chart
renders loads in the bridge, and the schema knows exactly the model's fields."""

from __future__ import annotations

import json
import os
import types
import typing
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel, SecretStr

from bridge.config import Config, load_config

from .chart import CHART, Helm, values_files


def _schema() -> dict[str, Any]:
    data: dict[str, Any] = json.loads((CHART / "values.schema.json").read_text(encoding="utf-8"))
    return data


def _literal_values(annotation: Any) -> set[Any] | None:
    """The allowed values of a Literal (or Optional Literal) annotation, else None."""
    if typing.get_origin(annotation) is typing.Literal:
        return set(typing.get_args(annotation))
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        args = typing.get_args(annotation)
        literals = [a for a in args if typing.get_origin(a) is typing.Literal]
        if len(literals) == 1:
            values = set(typing.get_args(literals[0]))
            return values | ({None} if type(None) in args else set())
    return None


def _is_secret(annotation: Any) -> bool:
    return annotation is SecretStr or SecretStr in typing.get_args(annotation)


@pytest.mark.parametrize("path", [None, *values_files()], ids=lambda p: p.stem if p else "default")
def test_rendered_config_loads_in_the_bridge(
    helm: Helm, path: Path | None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in list(os.environ):
        if name.startswith("BRIDGE_"):
            monkeypatch.delenv(name)
    rendered = helm.template(None, *([path] if path else []))
    config_file = tmp_path / "config.yaml"
    config_file.write_text(rendered.one("ConfigMap")["data"]["config.yaml"], encoding="utf-8")
    config = load_config(config_file)
    assert config.secrets() == []
    # The port the chart probes is the port the bridge will serve.
    port = rendered.container["ports"][0]["containerPort"]
    assert config.model_dump()["http"]["port"] == port


def test_schema_config_sections_match_the_model() -> None:
    schema_config = _schema()["properties"]["config"]
    assert schema_config["additionalProperties"] is False
    assert set(schema_config["properties"]) == set(Config.model_fields)


@pytest.mark.parametrize("section", sorted(Config.model_fields))
def test_schema_config_fields_match_the_model(section: str) -> None:
    model = Config.model_fields[section].annotation
    assert isinstance(model, type) and issubclass(model, BaseModel)
    schema_section = _schema()["properties"]["config"]["properties"][section]
    assert schema_section["additionalProperties"] is False
    public = {name for name, f in model.model_fields.items() if not _is_secret(f.annotation)}
    assert set(schema_section["properties"]) == public, (
        "values.schema.json config fields drifted from bridge/config.py "
        "(secret fields must stay out of the schema)"
    )
    for name in public:
        allowed = _literal_values(model.model_fields[name].annotation)
        if allowed is not None:
            assert set(schema_section["properties"][name]["enum"]) == allowed, f"{section}.{name}"


def test_schema_has_closed_objects_everywhere() -> None:
    """Every object the chart defines rejects unknown keys.

    Exceptions: string maps (labels, annotations) and Kubernetes structures passed through.
    """
    open_ok = {
        "global",
        "secret",
        "configMap",
        "projected",
        "emptyDir",
        "csi",
        "persistentVolumeClaim",
        "nodeAffinity",
        "podAffinity",
        "podAntiAffinity",
    }

    def walk(node: Any, name: str) -> None:
        if isinstance(node, dict):
            if node.get("type") == "object" and name not in open_ok:
                extra = node.get("additionalProperties")
                is_map = isinstance(extra, dict) and "properties" not in node
                assert extra is False or is_map, name
            for key, child in node.items():
                if key in ("properties", "definitions"):
                    for child_name, sub in child.items():
                        walk(sub, child_name)
                else:
                    walk(child, name)
        elif isinstance(node, list):
            for item in node:
                walk(item, name)

    walk(_schema(), "<root>")
