"""deploy/grafana/dashboard.json: importable, and every query names only metrics
the bridge exports (a renamed metric must not leave a silently empty panel)."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from .chart import ROOT

DASHBOARD = ROOT / "deploy" / "grafana" / "dashboard.json"

METRICS = {
    "bridge_slot_lag_bytes",
    "bridge_source_lag_seconds",
    "bridge_events_total",
    "bridge_errors_total",
    "bridge_in_flight_records",
    "bridge_in_flight_bytes",
    "bridge_confirmed_flush_lsn",
    "bridge_connected",
    "bridge_snapshot_rows_total",
    "bridge_build_info",
}
PROMQL_FUNCTIONS = {
    "sum",
    "min",
    "max",
    "avg",
    "count",
    "topk",
    "bottomk",
    "quantile",
    "rate",
    "irate",
    "increase",
    "deriv",
    "delta",
    "idelta",
    "clamp_min",
    "clamp_max",
    "abs",
    "time",
    "timestamp",
    "label_values",
    "absent",
    "vector",
    "scalar",
    "min_over_time",
    "max_over_time",
    "avg_over_time",
    "last_over_time",
    "changes",
    "resets",
}
PROMQL_KEYWORDS = {"by", "without", "on", "ignoring", "group_left", "group_right", "bool",
                   "and", "or", "unless", "offset"}  # fmt: skip


def _dashboard() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(DASHBOARD.read_text(encoding="utf-8"))
    return data


def _panels() -> list[dict[str, Any]]:
    panels: list[dict[str, Any]] = []
    for panel in _dashboard()["panels"]:
        panels.append(panel)
        panels.extend(panel.get("panels", []))
    return panels


def _queries() -> list[str]:
    exprs = [t["expr"] for p in _panels() for t in p.get("targets", [])]
    for variable in _dashboard()["templating"]["list"]:
        if variable["type"] == "query":
            exprs.append(variable["query"]["query"])
    return exprs


def _metric_names(expr: str) -> set[str]:
    """Metric names in a PromQL expression; fails on any identifier it cannot place."""
    text = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)  # label values, regexes
    text = re.sub(r"\{[^}]*\}", "", text)  # label matchers
    text = re.sub(r"\[[^\]]*\]", "", text)  # range selectors ([$__rate_interval])
    text = re.sub(r"\b(by|without|on|ignoring)\s*\([^)]*\)", "", text)  # grouping labels
    names: set[str] = set()
    for match in re.finditer(r"[A-Za-z_:][A-Za-z0-9_:]*", text):
        word = match.group()
        follows = text[match.end() :].lstrip()
        if follows.startswith("("):
            assert word in PROMQL_FUNCTIONS, f"unknown function {word!r} in {expr!r}"
        elif word in PROMQL_KEYWORDS:
            continue
        elif word.startswith("bridge_"):
            names.add(word)
        elif word == "e" or word.isdigit():
            continue
        else:
            # label_values(metric, label): the second argument is a label name.
            assert text[: match.start()].rstrip().endswith(","), f"stray {word!r} in {expr!r}"
    return names


def test_valid_dashboard() -> None:
    dashboard = _dashboard()
    assert 36 <= dashboard["schemaVersion"] <= 41
    assert dashboard["title"] and dashboard["uid"]
    ids = [p["id"] for p in _panels()]
    assert len(ids) == len(set(ids)), "panel ids must be unique"
    for panel in _panels():
        grid = panel["gridPos"]
        assert grid["x"] >= 0 and grid["x"] + grid["w"] <= 24, panel["title"]


def test_datasource_variable() -> None:
    variables = {v["name"]: v for v in _dashboard()["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource"
    assert variables["datasource"]["query"] == "prometheus"
    for panel in _panels():
        if panel["type"] == "row":
            continue
        assert panel["datasource"]["uid"] == "${datasource}", panel["title"]
        assert panel["targets"], f"{panel['title']} has no query"
        for target in panel["targets"]:
            assert target["datasource"]["uid"] == "${datasource}", panel["title"]


@pytest.mark.parametrize("expr", _queries())
def test_queries_use_only_bridge_metrics(expr: str) -> None:
    names = _metric_names(expr)
    assert names, f"no bridge_ metric in {expr!r}"
    assert names <= METRICS, f"unknown metrics {names - METRICS} in {expr!r}"


def test_every_metric_has_a_panel() -> None:
    shown = set().union(*(_metric_names(e) for e in _queries()))
    assert shown == METRICS


def test_metric_parser_rejects_foreign_names() -> None:
    assert _metric_names('sum by (op) (rate(bridge_events_total{x=~"a|b"}[5m]))') == {
        "bridge_events_total"
    }
    with pytest.raises(AssertionError):
        _metric_names("rate(process_cpu_seconds_total[5m])")
    with pytest.raises(AssertionError):
        _metric_names("bridge_slot_lag_bytes / node_memory_bytes")
