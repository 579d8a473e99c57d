"""bench/spark_freshness.py's join of changes to the Delta versions that made them readable."""

from __future__ import annotations

from typing import Any

import pytest
from bench_module import load_bench_module

for sibling in ("e2e", "latency", "spark_common"):  # what spark_freshness imports
    load_bench_module(sibling)
fresh: Any = load_bench_module("spark_freshness")


def seq(commit_lsn: int, offset: int) -> tuple[int, int, int]:
    return (commit_lsn, commit_lsn, offset)


def test_each_change_is_readable_from_the_first_version_at_or_after_it() -> None:
    changes = [
        (1, seq(10, 0), 1000, 1004),  # insert of key 1, its own version
        (1, seq(20, 3), 2000, 2010),  # update of key 1, its own version
        (2, seq(20, 4), 2000, 2011),  # insert of key 2, folded into the delete below
        (2, seq(30, 7), 3000, 3002),  # delete of key 2: a soft-deleted version
    ]
    versions = [
        (1, seq(20, 3), 6500),
        (1, seq(10, 0), 5100),
        (2, seq(30, 7), 8200),
    ]
    assert fresh.lags(changes, versions) == [(4, 4100), (10, 4500), (11, 6200), (2, 5200)]


def test_a_later_version_written_earlier_counts_from_the_earlier_delta_commit() -> None:
    # Versions at or after a change: the earliest Delta commit among them, whatever their order.
    versions = [(1, seq(10, 0), 900), (1, seq(20, 0), 700)]
    assert fresh.lags([(1, seq(5, 0), 100, 110)], versions) == [(10, 600)]


def test_a_change_newer_than_every_version_of_its_key_fails_the_run() -> None:
    with pytest.raises(SystemExit, match="change lost"):
        fresh.lags([(1, seq(30, 0), 100, 110)], [(1, seq(20, 0), 700)])
    with pytest.raises(SystemExit, match="change lost"):
        fresh.lags([(3, seq(30, 0), 100, 110)], [(1, seq(20, 0), 700)])
