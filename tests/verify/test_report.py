"""The verdict as text, JSON and Prometheus metrics (pure, no servers)."""

from __future__ import annotations

import json
import threading
from collections import Counter
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from bridge.errors import ConfigError, VerifyError
from bridge.verify.command import parse_targets
from bridge.verify.compare import LakeResult, TableResult
from bridge.verify.metrics import push_metrics, write_metrics
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


def test_the_lake_verdict_in_text_json_and_metrics(tmp_path: Path) -> None:
    table = TableResult("public.a", "p.public.a", rows=6, live_keys=6, equal=6)
    table.lake = LakeResult(
        "/lake/a",
        version=3,
        counts=Counter({"equal": 5, "different": 1}),
        columns=Counter({"v": 1}),
        samples={"different": ['{"id": 4}']},
    )
    found = Verification(0x10, [table])
    assert not found.ok and table.status == "differs"  # Kafka matches, the lake does not
    text = as_table(found)
    assert "public.a: Delta table /lake/a (version 3): differs; equal 5, missing 0" in text
    assert "public.a: Delta columns that differ: v (1)" in text
    assert 'public.a: Delta different keys: {"id": 4}' in text
    lake = json.loads(as_json(found))["tables"][0]["lake"]
    assert (lake["status"], lake["different"], lake["behind"]) == ("differs", 1, 0)
    assert (lake["format"], lake["version"]) == ("delta", 3)
    table.lake.target, table.lake.format, table.lake.version = "lake.db.a", "iceberg", 81
    text = as_table(found)  # an Iceberg table's version is its snapshot id
    assert "public.a: Iceberg table lake.db.a (snapshot 81): differs; equal 5" in text
    assert 'public.a: Iceberg different keys: {"id": 4}' in text
    path = tmp_path / "verify.prom"
    write_metrics(found, path, 1.0)
    values = {
        (s.name, s.labels.get("kind")): s.value
        for family in text_string_to_metric_families(path.read_text())
        for s in family.samples
        if s.name == "bridge_verify_lake_mismatches"
    }
    assert values == {
        ("bridge_verify_lake_mismatches", "missing"): 0,
        ("bridge_verify_lake_mismatches", "ghost"): 0,
        ("bridge_verify_lake_mismatches", "different"): 1,
        ("bridge_verify_lake_mismatches", "behind"): 0,
    }


def test_delta_targets() -> None:
    assert parse_targets(["public.a=/lake/a", "s.b=lake.b"]) == {
        "public.a": "/lake/a",
        "s.b": "lake.b",
    }
    for bad in ("public.a", "a=/lake/a", "public.a="):
        with pytest.raises(ConfigError, match="--lake"):
            parse_targets([bad])


def test_metrics_pushed_to_a_gateway() -> None:
    """What a Pushgateway receives: the same metrics, grouped by the bridge's slot."""
    got: list[tuple[str, str, bytes]] = []

    class Gateway(BaseHTTPRequestHandler):
        def do_PUT(self) -> None:
            body = self.rfile.read(int(self.headers["Content-Length"]))
            got.append((self.command, self.path, body))
            self.send_response(200)
            self.end_headers()

        def log_message(self, *args: Any) -> None:
            """Quiet."""

    server = HTTPServer(("127.0.0.1", 0), Gateway)
    thread = threading.Thread(target=server.handle_request)
    thread.start()
    try:
        push_metrics(verdict(), f"http://127.0.0.1:{server.server_port}", "bridge_a", 2.5)
    finally:
        thread.join(10)
        server.server_close()
    ((method, path, body),) = got
    assert (method, path) == ("PUT", "/metrics/job/bridge-verify/slot/bridge_a")
    names = {f.name for f in text_string_to_metric_families(body.decode())}
    assert {"bridge_verify_ok", "bridge_verify_mismatches", "bridge_verify_rows"} <= names


def test_an_unreachable_gateway_is_a_verify_error() -> None:
    server = HTTPServer(("127.0.0.1", 0), BaseHTTPRequestHandler)
    port = server.server_port
    server.server_close()  # nothing listens there now
    with pytest.raises(VerifyError, match="cannot push the metrics"):
        push_metrics(verdict(), f"http://127.0.0.1:{port}", "bridge_a", 1.0)


def test_dead_lettered_differences_are_named_apart_and_still_differences(tmp_path: Path) -> None:
    """Not ok (exit 1): a dead-lettered difference is still one, named as such."""
    table = TableResult("public.d", "p.public.d", rows=3, live_keys=2, equal=1, missing=1)
    table.dead_lettered, table.dead_letters = 1, 4
    entry = {"key": '{"id": 7}', "kind": "different", "op": "u", "lsn": "0/10"}
    table.dead_lettered_keys = [{**entry, "commit_lsn": "0/20", "error": "too large"}]
    found = Verification(0x30, [table], "p.dlq")
    assert not found.ok and table.status == "differs"
    text = as_table(found)
    assert (
        "public.d: 1 key(s) differ because their changes were dead-lettered to p.dlq "
        "(of 4 dead letter(s) before the point)"
    ) in text
    assert (
        'public.d: dead-lettered different key {"id": 7}: u at LSN 0/10 (commit LSN 0/20): '
        "too large"
    ) in text
    doc = json.loads(as_json(found))
    assert doc["dead_letter_topic"] == "p.dlq"
    assert (doc["tables"][0]["missing"], doc["tables"][0]["dead_lettered"]) == (1, 1)
    path = tmp_path / "verify.prom"
    write_metrics(found, path, 1.0)
    kinds = {
        s.labels["kind"]: s.value
        for family in text_string_to_metric_families(path.read_text())
        for s in family.samples
        if s.name == "bridge_verify_mismatches"
    }
    assert kinds == {"missing": 1, "ghost": 0, "different": 0, "dead_lettered": 1}
    table.dead_lettered, table.missing, table.dead_lettered_keys = 0, 0, []
    assert found.ok  # letters whose keys match again are no difference
