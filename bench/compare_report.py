"""bench/compare.py's printed table and the machine it ran on.

The figures of a shared 2-vCPU VM swing with its load, so the load average at the
start and the end of a run is part of the record.
"""

from __future__ import annotations

import os
import platform
from pathlib import Path
from typing import Any

COLUMNS = (
    ("txn rows", 9),
    ("op", 7),
    ("load s", 7),
    ("WAL MiB", 8),
    ("drain r/s", 10),
    ("limit r/s", 10),
    ("bridge r/s", 11),
    ("in topic", 9),
    ("CPU s", 7),
    ("RSS MiB", 8),
    ("dbz r/s", 8),
    ("in topic", 9),
    ("CPU s", 7),
    ("RSS MiB", 8),
    ("br/limit", 9),
    ("br/drain", 9),
    ("br/dbz", 7),
)


def load_average() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def machine() -> dict[str, Any]:
    cpuinfo = Path("/proc/cpuinfo").read_text()
    model = next(
        (line.split(":", 1)[1].strip() for line in cpuinfo.splitlines() if "model name" in line),
        platform.machine(),
    )
    meminfo = Path("/proc/meminfo").read_text().split()
    mem_kib = int(meminfo[meminfo.index("MemTotal:") + 1])
    return {
        "cores": os.cpu_count(),
        "cpu_model": model,
        "memory_gib": round(mem_kib / 2**20, 1),
        "python": platform.python_version(),
        "load_average_start": load_average(),
    }


def _row(cells: list[str]) -> str:
    return " ".join(f"{text:>{width}}" for text, (_, width) in zip(cells, COLUMNS, strict=True))


def _in_topic(result: dict[str, Any]) -> str:
    rate = result.get("rows_per_s_in_topic")  # absent from runs before it was measured
    return "-" if rate is None else f"{rate:,}"


def cell_line(cell: dict[str, Any]) -> str:
    """One workload cell: its backlog, each reader's rate, CPU and RSS, and the ratios."""
    dbz = cell.get("debezium")
    bridge = cell["bridge"]
    ratios = cell["ratios"]
    return _row(
        [
            f"{cell['txn_rows']:,}",
            cell["op"],
            f"{cell['load_s']:.1f}",
            f"{cell['wal_mib']:.0f}",
            f"{cell['drain']['rows_per_s']:,}" if "drain" in cell else "-",
            f"{cell['limit']['rows_per_s']:,}",
            f"{bridge['rows_per_s']:,}",
            _in_topic(bridge),
            f"{bridge['cpu_s']:.1f}",
            f"{bridge['peak_rss_mib']:.0f}",
            f"{dbz['rows_per_s']:,}" if dbz else "-",
            _in_topic(dbz) if dbz else "-",
            f"{dbz['cpu_s']:.1f}" if dbz else "-",
            f"{dbz['peak_rss_mib']:.0f}" if dbz else "-",
            f"{ratios['bridge/limit']:.3f}",
            f"{ratios['bridge/drain']:.3f}" if "bridge/drain" in ratios else "-",
            f"{ratios['bridge/debezium']:.2f}" if "bridge/debezium" in ratios else "-",
        ]
    )


def header() -> str:
    return _row([name for name, _ in COLUMNS])


def latency_line(lat: dict[str, Any]) -> str:
    e2e, produce = lat["commit_to_consumer_ms"], lat["commit_to_produce_ms"]
    return (
        f"bridge latency, {lat['offered_txn_per_s']:g} single-row txn/s offered "
        f"({lat['achieved_txn_per_s']} achieved), {lat['records']:,} records: "
        f"commit -> consumer p50 {e2e['p50']} ms, p99 {e2e['p99']} ms, max {e2e['max']} ms; "
        f"commit -> produce() p50 {produce['p50']} ms, p99 {produce['p99']} ms"
    )


def machine_line(host: dict[str, Any], debezium: str | None) -> str:
    start, end = host["load_average_start"], host.get("load_average_end", ["?"])
    return (
        f"machine: {host['cores']} cores ({host['cpu_model']}), {host['memory_gib']} GiB; "
        f"load average {start[0]} at start, {end[0]} at end; "
        f"PostgreSQL {host.get('postgresql')}, Python {host['python']}"
        + (f", Debezium {debezium}" if debezium else "")
    )


def table(
    cells: list[dict[str, Any]],
    lat: dict[str, Any] | None,
    host: dict[str, Any],
    debezium: str | None,
) -> str:
    rows = cells[0]["rows"] if cells else 0
    lines = [
        f"{rows:,} rows per cell; rows/s from the reader's slot turning active until done "
        "(bridge, Debezium: until the slot confirmed the last commit; 'in topic': until the "
        "broker acked every row); ratios from r/s; CPU s and peak RSS of the reader process",
        header(),
        *(cell_line(c) for c in cells),
    ]
    if lat is not None:
        lines.append(latency_line(lat))
    lines.append(machine_line(host, debezium))
    return "\n".join(lines)
