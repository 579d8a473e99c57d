"""The `bridge` command line: run, check, verify, import-debezium, external-load, demo.

Every `BridgeError` becomes one readable message and its exit code (2 for bad
configuration, 1 otherwise); tracebacks are kept for real bugs.

Each command imports what only it needs when it runs (the pipeline, the checks, the
demo, the Debezium import, the external load): a `bridge verify` process, whose resident
memory its `--memory-limit-mb` bounds, does not carry the others' modules. Verify's own
are imported here, as its options' defaults come from them.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, NoReturn

import typer

from bridge import __version__, log
from bridge.config import Config, load_config
from bridge.errors import BridgeError, ConfigError
from bridge.verify.command import Request
from bridge.verify.command import run as run_verification
from bridge.verify.compare import REPAIR_KEY_LIMIT
from bridge.verify.store import DEFAULT_MEMORY_LIMIT, MB

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
    ),
]


def error_lines(exc: BridgeError) -> list[str]:
    """`error: <problem> (<what to do>)` on one line, then a configuration error's list.

    Messages from libpq and the like span lines; they are joined so the first line
    is always the whole story. Only a ConfigError keeps its further lines, one per
    invalid field.
    """
    lines = [line.strip() for line in exc.message.splitlines() if line.strip()] or ["failed"]
    head, details = lines[0], [f"  {line}" for line in lines[1:]]
    if not isinstance(exc, ConfigError):
        head, details = " ".join(lines), []
    hint = f" ({' '.join(exc.hint.split())})" if exc.hint else ""
    return [f"error: {head}{hint}", *details]


def _fail(exc: BridgeError, scrub: Callable[[str], str] = str) -> NoReturn:
    for line in error_lines(exc):
        typer.echo(scrub(line), err=True)
    raise typer.Exit(exc.exit_code)


def _load(path: Path | None) -> Config:
    try:
        return load_config(path)
    except BridgeError as exc:
        _fail(exc)


@app.command()
def check(config: ConfigOption = None) -> None:
    """Check each dependency (PostgreSQL, slot, publication, Kafka, registry): ok or FAIL."""
    from bridge.check import run_checks  # noqa: PLC0415 (per command: module docstring)

    cfg = _load(config)
    mask = log.setup(cfg.log.level, cfg.log.format, cfg.secrets())  # librdkafka lines too
    failed = 0
    for result in run_checks(cfg):
        failed += not result.ok
        status = "ok  " if result.ok else "FAIL"
        detail = " ".join(result.detail.split())  # one line per check, whatever the server said
        typer.echo(mask.scrub(f"{status} {result.name}: {detail}"))
    raise typer.Exit(1 if failed else 0)


@app.command()
def run(config: ConfigOption = None) -> None:
    """Stream changes from the replication slot into Kafka until stopped (SIGTERM/SIGINT)."""
    from bridge.build import run_pipeline  # noqa: PLC0415 (per command: module docstring)

    cfg = _load(config)
    mask = log.setup(cfg.log.level, cfg.log.format, cfg.secrets())
    try:
        run_pipeline(cfg)
    except BridgeError as exc:
        if cfg.log.format != "json":
            _fail(exc, mask.scrub)
        # JSON logs: the error is one more (masked) JSON record, like every other line.
        logging.getLogger("bridge").error("%s", "\n".join(error_lines(exc))[len("error: ") :])
        raise typer.Exit(exc.exit_code) from None


@app.command("import-debezium")
def import_debezium(
    connector: Annotated[
        Path, typer.Argument(help="Debezium PostgreSQL connector config: .json or .properties")
    ],
    output: Annotated[
        Path | None, typer.Option("--output", "-o", help="write the YAML here, not to stdout")
    ] = None,
    bootstrap_servers: Annotated[
        str | None, typer.Option(help="the Connect worker's bootstrap.servers")
    ] = None,
) -> None:
    """Turn a Debezium PostgreSQL connector configuration into bridge YAML (docs: Coming
    from Debezium); what cannot be carried over is listed at its top."""
    from bridge.debezium_import import (  # noqa: PLC0415 (per command: module docstring)
        import_connector,
        read_connector_file,
        render,
    )

    try:
        imported = import_connector(read_connector_file(connector), bootstrap_servers)
    except BridgeError as exc:
        _fail(exc)
    text = render(imported, connector.name)
    if output is None:
        typer.echo(text, nl=False)
    else:
        output.write_text(text, encoding="utf-8")
    for line in imported.unsupported:
        typer.echo(f"not carried over: {line}", err=True)


@app.command()
def verify(
    config: ConfigOption = None,
    tables: Annotated[
        list[str] | None,
        typer.Option("--tables", help="schema.table to verify (repeat); default: all captured."),
    ] = None,
    output: Annotated[
        str, typer.Option("--format", help="table (for people) or json (for scripts).")
    ] = "table",
    timeout: Annotated[
        float, typer.Option(help="Seconds to wait for the bridge to deliver up to the point.")
    ] = 300.0,
    repair: Annotated[
        bool,
        typer.Option(
            "--repair",
            help="Re-emit differing rows (incremental snapshots), delete ghost keys, verify again.",
        ),
    ] = False,
    metrics_file: Annotated[
        Path | None,
        typer.Option(help="Write the result as Prometheus metrics (textfile collector format)."),
    ] = None,
    push_gateway: Annotated[
        str | None,
        typer.Option(help="Push the result as Prometheus metrics to this Pushgateway URL."),
    ] = None,
    delta: Annotated[
        list[str] | None,
        typer.Option(
            "--lake",
            "--delta",
            help="schema.table=TARGET: also compare the lake table the Spark apply writes: a "
            "Delta path or table name, or an Iceberg catalog.namespace.table (the catalog set "
            "with --spark-conf); repeat; needs the spark extra; --repair fixes it through the "
            "topic, for the apply's next run.",
        ),
    ] = None,
    memory_limit_mb: Annotated[
        int,
        typer.Option(
            "--memory-limit-mb",
            min=0,
            help="MiB of per-key topic state held in memory per table; beyond it the state "
            "goes to hash-partition files under TMPDIR.",
        ),
    ] = DEFAULT_MEMORY_LIMIT // MB,
    spark: Annotated[
        bool,
        typer.Option(
            "--spark",
            help="Compare in Spark jobs (PostgreSQL read in key ranges by its tasks), for "
            "tables beyond one machine (needs the spark extra; with --repair the differing "
            f"keys, at most {REPAIR_KEY_LIMIT:,} per table, come back to this process).",
        ),
    ] = False,
    spark_master: Annotated[
        str | None,
        typer.Option(
            "--spark-master",
            help="Master URL of the session --spark and --lake start (default: local[2]).",
        ),
    ] = None,
    spark_conf: Annotated[
        list[str] | None,
        typer.Option(
            "--spark-conf",
            help="KEY=VALUE setting of that session (repeat), e.g. spark.driver.host=HOST "
            "for a cluster's executors to reach this process.",
        ),
    ] = None,
) -> None:
    """Compare each captured table with the state its topic describes, at one point.

    Exit 0 when every table matches (after --repair: at the second verification), 1 on a
    mismatch or an error."""
    request = Request(
        tables=tuple(tables or ()),
        output=output,
        timeout=timeout,
        repair=repair,
        metrics_file=metrics_file,
        push_gateway=push_gateway,
        lake=tuple(delta or ()),
        memory_limit=memory_limit_mb * MB,
        spark=spark,
        spark_master=spark_master,
        spark_conf=tuple(spark_conf or ()),
    )
    cfg = _load(config)
    mask = log.setup(cfg.log.level, cfg.log.format, cfg.secrets())
    try:
        ok = run_verification(cfg, request, lambda text, err: typer.echo(text, err=err))
    except BridgeError as exc:
        _fail(exc, mask.scrub)
    raise typer.Exit(0 if ok else 1)


@app.command("external-load")
def external_load(
    config: ConfigOption = None,
    done: Annotated[
        bool, typer.Option("--done", help="Record the load as done: the bridge releases it.")
    ] = False,
) -> None:
    """snapshot.mode external: print the snapshot the bridge holds for an initial load of
    your own and its hand-over LSN, as JSON; with --done, record that load as finished."""
    from bridge.snapshot.external import held_snapshot  # noqa: PLC0415 (per command)
    from bridge.snapshot.store import DONE, INITIAL, store_of  # noqa: PLC0415 (per command)

    cfg = _load(config)
    store = store_of(cfg)
    try:
        snapshot, lsn = held_snapshot(store)
        if done:
            store.set_state(INITIAL, DONE)
    except BridgeError as exc:
        _fail(exc)
    finally:
        store.close()
    state = DONE if done else "held"
    typer.echo(json.dumps({"snapshot": snapshot, "lsn": str(lsn), "state": state}))


@app.command()
def demo(
    keep: Annotated[bool, typer.Option(help="Keep the stack running until Ctrl-C.")] = False,
) -> None:
    """Start the local stack, change two tables, show the changes arrive in Kafka and Delta."""
    from bridge.demo import run_demo  # noqa: PLC0415 (per command: module docstring)

    try:
        run_demo(keep=keep)
    except BridgeError as exc:
        _fail(exc)


@app.callback(invoke_without_command=True)
def _version(
    version: Annotated[bool, typer.Option("--version", help="Print the version.")] = False,
) -> None:
    if version:
        typer.echo(__version__)
        raise typer.Exit(0)


def main() -> None:
    app()
