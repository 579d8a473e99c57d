"""MkDocs hook: the reference pages written from the code at build time, so they cannot drift.

`reference/configuration.md` comes from the pydantic model (`bridge.config.Config`): every
key with its type, default, limits, description and `BRIDGE_` environment name.
`reference/cli.md` comes from the `bridge` command's own options (`bridge.cli.app`).
Neither page exists in `docs/`; both are added to the build as generated files. A field
without a description stops the build: the reference would have a hole. The benchmarks
page shows bench/README.md's current tables, read from there at build time (one copy).
"""

from __future__ import annotations

import enum
import inspect
import re
import types
import typing
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import annotated_types
import typer
import yaml
from mkdocs.config.defaults import MkDocsConfig
from mkdocs.structure.files import File, Files
from mkdocs.structure.pages import Page
from pydantic import BaseModel, SecretStr
from pydantic.fields import FieldInfo

from bridge.cli import app
from bridge.config import Config

CONFIG_PAGE = "reference/configuration.md"
CLI_PAGE = "reference/cli.md"
BENCH_README = Path(__file__).resolve().parents[2] / "bench" / "README.md"
BENCH_MARK = "<!-- bench/README.md: current figures -->"
CURRENT = re.compile(r"<!-- current:begin[^>]*-->\n(.*?)<!-- current:end -->", re.S)
LINK = re.compile(r"\[([^\]]+)\]\((results/[^)#]*)[^)]*\)")


@dataclass(frozen=True)
class Key:
    """One configuration key: its dotted path, the model field and the environment name."""

    path: str
    field: FieldInfo
    env: str | None  # None inside a list item: the list is set as a whole
    section: bool  # a nested model (documented key by key below it)


def _nested_model(annotation: Any) -> tuple[type[BaseModel], bool] | None:
    """The model inside a field's type, and whether it is a list of them."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation, False
    if typing.get_origin(annotation) is tuple:
        args = typing.get_args(annotation)
        if args and isinstance(args[0], type) and issubclass(args[0], BaseModel):
            return args[0], True
    return None


def keys(model: type[BaseModel], prefix: str = "", env: str | None = "BRIDGE_") -> Iterator[Key]:
    """Every key of `model`, depth first, in the model's order."""
    for name, field in model.model_fields.items():
        path = f"{prefix}{name}"
        nested = _nested_model(field.annotation)
        key_env = None if env is None else f"{env}{name.upper()}"
        yield Key(path, field, key_env, nested is not None and not nested[1])
        if nested is not None:
            inner, is_list = nested
            yield from keys(
                inner,
                f"{path}[]." if is_list else f"{path}.",
                None if is_list or key_env is None else f"{key_env}__",
            )


def undescribed(model: type[BaseModel]) -> list[str]:
    """Keys that have no description (sections take their model's docstring)."""
    missing = []
    for key in keys(model):
        if key.section:
            nested = _nested_model(key.field.annotation)
            if nested is None or not inspect.getdoc(nested[0]):
                missing.append(key.path)
        elif not (key.field.description or "").strip():
            missing.append(key.path)
    return missing


def type_name(annotation: Any) -> str:
    """A field's type as a user writes it in YAML."""
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is Literal:
        return " | ".join(f"`{a}`" for a in args)
    if origin in (typing.Union, types.UnionType):
        parts = [type_name(a) for a in args if a is not type(None)]
        return " | ".join(parts) + (" | `null`" if type(None) in args else "")
    if origin is typing.Annotated:
        return type_name(args[0])
    if origin is tuple:
        return f"list of {type_name(args[0])}"
    if origin is dict:
        return f"map of {type_name(args[0])} to {type_name(args[1])}"
    if annotation is SecretStr:
        return "secret string"
    if annotation is Path:
        return "path"
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return "section"
    return {str: "string", int: "integer", float: "number", bool: "boolean"}.get(
        annotation, getattr(annotation, "__name__", str(annotation))
    )


def default_text(field: FieldInfo) -> str | None:
    """The default as YAML would spell it, None for a required key."""
    if field.is_required():
        return None
    value = field.get_default(call_default_factory=True)
    if isinstance(value, BaseModel):
        return None
    if isinstance(value, Path):
        value = str(value)
    if isinstance(value, tuple):
        value = list(value)
    if isinstance(value, enum.Enum):
        value = value.value
    text = yaml.safe_dump(value, default_flow_style=True, width=1000).strip()
    return text.removesuffix("\n...").removesuffix(" ...").strip()


def limits(field: FieldInfo) -> list[str]:
    """Bounds and patterns pydantic enforces on the value."""
    out = []
    signs = {"ge": "≥", "gt": ">", "le": "≤", "lt": "<"}
    for item in field.metadata:
        for attr, sign in signs.items():
            if isinstance(item, getattr(annotated_types, attr.capitalize())):
                out.append(f"{sign} {getattr(item, attr)}")
        pattern = getattr(item, "pattern", None)
        if pattern is not None:
            out.append(f"matches `{pattern}`")
    return out


def _one_line(text: str) -> str:
    return " ".join(text.split())


def configuration_page(model: type[BaseModel]) -> str:
    """The configuration reference as Markdown."""
    lines = [
        "# Configuration reference",
        "",
        "Generated from `bridge/config.py` when the site is built. The configuration is one",
        "YAML file (`--config`); every key can also be set by the environment variable shown,",
        "which wins over the file (`BRIDGE_SOURCE__PASSWORD` sets `source.password`; a list or",
        "map is given as JSON). Unknown keys are refused, so a misspelt key never falls back to",
        "its default.",
        "",
    ]
    for key in keys(model):
        depth = key.path.count(".") - key.path.count("[].")
        nested = _nested_model(key.field.annotation)
        if key.section and nested is not None and depth == 0:
            lines += [f"## `{key.path}` {{ #{key.path} }}", "", inspect.getdoc(nested[0]) or "", ""]
            continue
        lines += [f"### `{key.path}` {{ #{key.path.replace('[]', '')} }}", ""]
        if nested is not None:
            lines += [_one_line(inspect.getdoc(nested[0]) or ""), ""]
        if key.field.description:
            lines += [_one_line(key.field.description), ""]
        facts = [f"type: {type_name(key.field.annotation)}"]
        default = default_text(key.field)
        facts.append("required" if default is None else f"default: `{default}`")
        facts += limits(key.field)
        if key.env is not None:
            facts.append(f"environment: `{key.env}`")
        lines += [" · ".join(facts), ""]
    return "\n".join(lines)


def _param_line(param: Any) -> str:
    """One option or argument of a command (typer's click objects, read by attribute)."""
    text = _one_line(getattr(param, "help", None) or "")
    if param.param_type_name == "argument":
        return f"- `{(param.name or '').upper()}`: {text}"
    names = ", ".join(f"`{n}`" for n in [*param.opts, *param.secondary_opts])
    extra = []
    if param.multiple:
        extra.append("repeatable")
    elif not param.is_flag and param.default is not None:
        extra.append(f"default `{param.default}`")
    tail = f" ({', '.join(extra)})" if extra else ""
    return f"- {names}: {text}{tail}"


def cli_page(group: Any) -> str:
    """The command line reference as Markdown, from the commands' own help."""
    lines = [
        "# Command line",
        "",
        "Generated from the `bridge` command when the site is built. Every command that takes",
        "`--config` reads the YAML file of the [configuration reference](configuration.md).",
        "Exit codes: 0 success, 1 failure (a FAIL, a mismatch, an error), 2 bad configuration",
        "or usage.",
        "",
    ]
    for name, command in group.commands.items():
        if command.hidden:
            continue
        params = [p for p in command.params if p.name != "help"]
        usage = ["[OPTIONS]"] + [
            (p.name or "").upper() for p in params if p.param_type_name == "argument"
        ]
        lines += [f"## `bridge {name}`", "", inspect.cleandoc(command.help or ""), ""]
        lines += ["```", f"bridge {name} {' '.join(usage)}", "```", ""]
        lines += [_param_line(p) for p in params] + [""]
    return "\n".join(lines)


def current_benchmarks(readme: str) -> str:
    """bench/README.md's current section, its links into bench/results/ as plain paths."""
    found = CURRENT.search(readme)
    if found is None:
        raise SystemExit("bench/README.md has no <!-- current:begin --> ... end section")
    return LINK.sub(r"\1 (`bench/\2`)", found.group(1))


# --- the MkDocs side ---------------------------------------------------------------------


def on_files(files: Files, config: MkDocsConfig) -> Files:
    """Add the generated pages to the build (MkDocs 1.6 `File.generated`)."""
    missing = undescribed(Config)
    if missing:
        raise SystemExit(f"configuration keys without a description: {', '.join(missing)}")
    command = typer.main.get_command(app)
    files.append(File.generated(config, CONFIG_PAGE, content=configuration_page(Config)))
    files.append(File.generated(config, CLI_PAGE, content=cli_page(command)))
    return files


def on_page_markdown(markdown: str, page: Page, config: MkDocsConfig, files: Files) -> str:
    """Splice bench/README.md's current tables into the benchmarks page."""
    if BENCH_MARK not in markdown:
        return markdown
    return markdown.replace(BENCH_MARK, current_benchmarks(BENCH_README.read_text()))
