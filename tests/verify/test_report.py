"""The verdict as text, JSON and Prometheus metrics (pure, no servers)."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from bridge.verify.compare import TableResult
from bridge.verify.metrics import write_metrics
from bridge.verify.report import as_json, as_table
from bridge.verify.run import Verification


def verdict() -> Verification:
    clean = TableResult("public.a", "p.public.a", rows=3, live_keys=3, records=4, equal=3)
    bad = TableResult("public.b", "p.public.b", rows=2, live_keys=3, equal=1, ghosts=2)
    bad.different = 1
    bad.columns = Counter({"v": 1})
    bad.samples = {"ghost": ['{"id": 9}', '{"id": 8}'], "different": ['{"id": 2}']}
    keyless = TableResult("public.c", "p.public.c", skipped="no key")
    return Verification(0x16B3748, [clean, bad, keyless])


def test_text_and_json() -> None:
    found = verdict()
    assert not found.ok
    text = as_table(found)
    assert text.splitlines()[0] == "verification point 0/16B3748"
    assert "public.b: columns that differ: v (1)" in text
    assert 'public.b: ghost keys: {"id": 9}; {"id": 8}' in text
    assert "public.c: skipped, no key" in text
    assert text.endswith("MISMATCH")
    doc = json.loads(as_json(found))
    assert doc["ok"] is False and doc["point"] == "0/16B3748"
    assert [t["status"] for t in doc["tables"]] == ["equal", "differs", "skipped"]
    assert doc["tables"][1]["different_columns"] == {"v": 1}


def test_metrics_file(tmp_path: Path) -> None:
    path = tmp_path / "verify.prom"
    write_metrics(verdict(), path, 2.5)
    samples = {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(path.read_text())
        for s in family.samples
    }
    assert samples[("bridge_verify_ok", ())] == 0
    assert samples[("bridge_verify_duration_seconds", ())] == 2.5
    assert samples[("bridge_verify_rows", (("table", "public.b"),))] == 2
    ghost = (("kind", "ghost"), ("table", "public.b"))
    assert samples[("bridge_verify_mismatches", ghost)] == 2
    assert ("bridge_verify_rows", (("table", "public.c"),)) not in samples  # skipped
