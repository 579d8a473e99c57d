"""The last verification as Prometheus metrics: a file in the text format of
node_exporter's textfile collector (`bridge verify --metrics-file`), or pushed to a
Pushgateway (`--push-gateway`, what the Helm chart's CronJob uses).

verify runs as its own short process (a CronJob), so it cannot serve /metrics; the file it
leaves, or the group it pushed, is scraped instead, and its age is
`time() - bridge_verify_last_run_timestamp_seconds`.

prometheus_client is imported when the metrics are written, not with this module: ~2 MiB
resident that a `bridge verify` without `--metrics-file` or `--push-gateway` never needs
(issue 48: its peak RSS within `--memory-limit-mb` + 64 MiB).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING

from bridge.errors import VerifyError
from bridge.verify.run import Verification

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry


def write_metrics(result: Verification, path: Path, seconds: float) -> None:
    """Replace `path` (atomically: prometheus_client writes a temporary file, then renames)."""
    from prometheus_client import write_to_textfile  # noqa: PLC0415 (module docstring)

    write_to_textfile(str(path), _registry(result, seconds))


def push_metrics(result: Verification, gateway: str, slot: str, seconds: float) -> None:
    """Replace the Pushgateway's group of this bridge (job bridge-verify, label `slot`: one
    group per bridge, so releases sharing a gateway do not overwrite each other)."""
    from prometheus_client import push_to_gateway  # noqa: PLC0415 (module docstring)

    try:
        push_to_gateway(
            gateway, "bridge-verify", _registry(result, seconds), grouping_key={"slot": slot}
        )
    except OSError as exc:  # URLError and connection errors
        raise VerifyError(
            f"cannot push the metrics to {gateway}: {exc}", hint="check --push-gateway's URL"
        ) from None


def _registry(result: Verification, seconds: float) -> CollectorRegistry:
    from prometheus_client import CollectorRegistry, Gauge  # noqa: PLC0415 (module docstring)

    registry = CollectorRegistry(auto_describe=True)
    Gauge(
        "bridge_verify_last_run_timestamp_seconds",
        "When the last verification finished (Unix time)",
        registry=registry,
    ).set(time.time())
    Gauge(
        "bridge_verify_duration_seconds", "How long the last verification took", registry=registry
    ).set(seconds)
    Gauge(
        "bridge_verify_ok", "1 if every table matched at the last verification", registry=registry
    ).set(1 if result.ok else 0)
    rows = Gauge(
        "bridge_verify_rows",
        "Rows of the table checked at the last verification",
        ["table"],
        registry=registry,
    )
    mismatches = Gauge(
        "bridge_verify_mismatches",
        "Keys that differ between the table and its topic at the last verification; "
        "dead_lettered: because their changes were dead-lettered",
        ["table", "kind"],
        registry=registry,
    )
    lake = Gauge(
        "bridge_verify_lake_mismatches",
        "Keys that differ between the table and its lake table (--lake) at the last "
        "verification; behind: changes the Spark apply had not applied by --timeout",
        ["table", "kind"],
        registry=registry,
    )
    for table in result.tables:
        if table.skipped is not None:
            continue
        rows.labels(table.table).set(table.rows)
        for kind, count in (
            ("missing", table.missing),
            ("ghost", table.ghosts),
            ("different", table.different),
            ("dead_lettered", table.dead_lettered),
        ):
            mismatches.labels(table.table, kind).set(count)
        if table.lake is not None:
            for kind in ("missing", "ghost", "different", "behind"):
                lake.labels(table.table, kind).set(table.lake.counts[kind])
    return registry
