"""`bridge verify` from options to exit code: verify, with `--repair` fix what differs and
verify again, then print the verdict and write or push it as metrics.

The command line (`bridge.cli.verify`) only parses its options into a `Request` and calls
`run`; everything a verification run decides is here, so a scheduler or a test can run
exactly what the command runs. What is printed goes through `echo(text, err)`: with
`--format json` the standard output holds only the final verification (the first one
and the repair's summary go to the standard error), so a script can parse it whatever
`--repair` did.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from bridge.config import Config
from bridge.errors import ConfigError
from bridge.verify.metrics import push_metrics, write_metrics
from bridge.verify.repair import Repaired, repair
from bridge.verify.report import as_json, as_table
from bridge.verify.run import Verification, verify
from bridge.verify.store import DEFAULT_MEMORY_LIMIT

FORMATS = ("table", "json")


@dataclass(frozen=True)
class Request:
    """One `bridge verify` invocation, its options as given (`lake` and `spark_conf` still
    as `TABLE=TARGET` and `KEY=VALUE` texts, checked by `run`)."""

    tables: tuple[str, ...] = ()
    output: str = "table"  # one of FORMATS
    timeout: float = 300.0
    repair: bool = False
    metrics_file: Path | None = None
    push_gateway: str | None = None
    lake: tuple[str, ...] = ()
    memory_limit: int = DEFAULT_MEMORY_LIMIT  # bytes
    spark: bool = False
    spark_master: str | None = None
    spark_conf: tuple[str, ...] = field(default=())


def run(cfg: Config, request: Request, echo: Callable[[str, bool], None]) -> bool:
    """Verify (and repair) as `request` says, print through `echo(text, to_stderr)`, write
    or push the metrics; True when every table matches (after `--repair`: at the second
    verification). Raises `BridgeError` for anything that kept it from a verdict."""
    if request.output not in FORMATS:
        raise ConfigError(f"--format {request.output!r}", hint="use table or json")
    show = as_json if request.output == "json" else as_table
    interim = request.output == "json"  # what is not the final verdict goes to stderr
    lake = parse_targets(list(request.lake))
    spark_conf = parse_settings(list(request.spark_conf))
    started = time.monotonic()

    def check(*, keys_for_repair: bool = False) -> Verification:
        return verify(
            cfg,
            request.tables,
            timeout=request.timeout,
            delta=lake,
            memory_limit=request.memory_limit,
            distributed=request.spark,
            spark_master=request.spark_master,
            spark_conf=spark_conf,
            keys_for_repair=keys_for_repair,
        )

    result = check(keys_for_repair=request.repair)
    if request.repair and not result.ok:
        echo(show(result), interim)
        echo(repaired_line(repair(cfg, result, timeout=request.timeout)), interim)
        result = check()
    echo(show(result), False)
    seconds = time.monotonic() - started
    if request.metrics_file is not None:
        write_metrics(result, request.metrics_file, seconds)
    if request.push_gateway is not None:
        push_metrics(result, request.push_gateway, cfg.source.slot_name, seconds)
    return result.ok


def repaired_line(done: Repaired) -> str:
    """What `--repair` did, in one line."""
    lake = (
        f"; {done.lake_left} lake key(s) the topic cannot fix (never in it, or changed "
        "after the point: delete them from the lake, or verify again)"
        if done.lake_left
        else ""
    )
    return (
        f"repaired: {done.reread} row(s) re-emitted, {done.deleted} ghost key(s) deleted, "
        f"{done.skipped} ghost key(s) changed meanwhile and left to the next verify{lake}"
    )


def parse_targets(specs: list[str]) -> dict[str, str]:
    """`--lake schema.table=TARGET` options -> table -> lake table's path or name."""
    out = {}
    for spec in specs:
        table, sep, target = spec.partition("=")
        if not sep or "." not in table or not target:
            raise ConfigError(
                f"--lake {spec!r}", hint="write --lake schema.table=/path/or/table_name"
            )
        out[table] = target
    return out


def parse_settings(specs: list[str]) -> dict[str, str]:
    """`--spark-conf KEY=VALUE` options -> Spark settings."""
    out = {}
    for spec in specs:
        key, sep, value = spec.partition("=")
        if not sep or not key.strip():
            raise ConfigError(
                f"--spark-conf {spec!r}", hint="write --spark-conf spark.some.setting=value"
            )
        out[key.strip()] = value
    return out
