"""`bridge.verify.command.run`, the order of a `bridge verify` run: verify, with --repair fix
what differs and verify again; what goes to stdout and stderr (pure: the verification and
the repair stand in for the real ones, which tests/verify/test_verify.py runs)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from bridge.config import Config
from bridge.errors import ConfigError
from bridge.verify import command
from bridge.verify.command import Request, run
from bridge.verify.compare import TableResult
from bridge.verify.repair import Repaired
from bridge.verify.run import Verification

CFG = Config(source={"slot_name": "s"}, kafka={"topic_prefix": "p"})


def verdict(different: int) -> Verification:
    return Verification(0x10, [TableResult("public.t", "p.public.t", rows=1, different=different)])


class Calls:
    """The verifications and repairs `run` asks for, answered from `results`."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, *results: Verification) -> None:
        self.log: list[str] = []
        self.results = list(results)
        self.echoed: list[tuple[str, bool]] = []
        monkeypatch.setattr(command, "verify", self.verify)
        monkeypatch.setattr(command, "repair", self.repair)

    def verify(self, cfg: Config, tables: Any, **options: Any) -> Verification:
        self.log.append(f"verify keys_for_repair={options['keys_for_repair']}")
        return self.results.pop(0)

    def repair(self, cfg: Config, found: Verification, **options: Any) -> Repaired:
        self.log.append("repair")
        return Repaired(reread=found.tables[0].different)

    def echo(self, text: str, err: bool) -> None:
        self.echoed.append((text, err))


def test_a_match_is_verified_once(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = Calls(monkeypatch, verdict(0))
    assert run(CFG, Request(repair=True), calls.echo)
    assert calls.log == ["verify keys_for_repair=True"]
    assert calls.echoed[-1][0].endswith("all tables match")


def test_repair_then_verify_again(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = Calls(monkeypatch, verdict(3), verdict(0))
    assert run(CFG, Request(repair=True), calls.echo)
    assert calls.log == ["verify keys_for_repair=True", "repair", "verify keys_for_repair=False"]
    texts = [text for text, _ in calls.echoed]
    assert texts[0].endswith("MISMATCH")
    assert texts[1].startswith("repaired: 3 row(s) re-emitted")
    assert texts[2].endswith("all tables match")


def test_json_stdout_holds_the_final_verification_only(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = Calls(monkeypatch, verdict(3), verdict(1))
    assert not run(CFG, Request(repair=True, output="json"), calls.echo)
    stdout = [text for text, err in calls.echoed if not err]
    assert len(stdout) == 1
    assert json.loads(stdout[0])["tables"][0]["different"] == 1
    assert [err for _, err in calls.echoed] == [True, True, False]


def test_without_repair_a_mismatch_is_the_verdict(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    calls = Calls(monkeypatch, verdict(2))
    metrics = tmp_path / "verify.prom"
    assert not run(CFG, Request(metrics_file=metrics), calls.echo)
    assert calls.log == ["verify keys_for_repair=False"]
    assert 'bridge_verify_mismatches{kind="different",table="public.t"} 2.0' in (
        metrics.read_text()
    )


def test_options_are_checked_before_anything_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = Calls(monkeypatch)
    for request, option in [
        (Request(output="yaml"), "--format"),
        (Request(lake=("public.t",)), "--lake"),
        (Request(spark_conf=("spark.x",)), "--spark-conf"),
    ]:
        with pytest.raises(ConfigError, match=option):
            run(CFG, request, calls.echo)
    assert calls.log == []
