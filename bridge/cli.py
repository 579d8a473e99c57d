"""The `bridge` command line: run, check, demo.

Every `BridgeError` becomes one readable message and its exit code (2 for bad
configuration, 1 otherwise); tracebacks are kept for real bugs.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from bridge import __version__, log
from bridge.check import run_checks
from bridge.config import Config, load_config
from bridge.demo import run_demo
from bridge.errors import BridgeError
from bridge.log import SecretMask
from bridge.pipeline import run_pipeline

app = typer.Typer(
    help="Stream PostgreSQL changes into Kafka as keyed Avro records.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

ConfigOption = Annotated[
    Path | None,
    typer.Option(
        "--config",
        "-c",
        help="YAML configuration file; BRIDGE_SECTION__KEY environment variables override it.",
        exists=False,
        dir_okay=False,
    ),
]


def _load(path: Path | None) -> Config:
    try:
        return load_config(path)
    except BridgeError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(exc.exit_code) from None


@app.command()
def check(config: ConfigOption = None) -> None:
    """Check each dependency (PostgreSQL, slot, publication, Kafka, registry): ok or FAIL."""
    cfg = _load(config)
    mask = SecretMask(cfg.secrets())
    failed = 0
    for result in run_checks(cfg):
        failed += not result.ok
        status = "ok  " if result.ok else "FAIL"
        typer.echo(mask.scrub(f"{status} {result.name}: {result.detail}"))
    raise typer.Exit(1 if failed else 0)


@app.command()
def run(config: ConfigOption = None) -> None:
    """Stream changes from the replication slot into Kafka until stopped (SIGTERM/SIGINT)."""
    cfg = _load(config)
    log.setup(cfg.log.level, cfg.log.format, cfg.secrets())
    try:
        run_pipeline(cfg)
    except BridgeError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(exc.exit_code) from None


@app.command()
def demo(
    keep: Annotated[bool, typer.Option(help="Keep the stack running until Ctrl-C.")] = False,
) -> None:
    """Start the local stack (PostgreSQL, Kafka, registry), make changes, show them arrive."""
    try:
        run_demo(keep=keep)
    except BridgeError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(exc.exit_code) from None


@app.callback(invoke_without_command=True)
def _version(
    version: Annotated[bool, typer.Option("--version", help="Print the version.")] = False,
) -> None:
    if version:
        typer.echo(__version__)
        raise typer.Exit(0)


def main() -> None:
    app()
