"""The nemesis soak, short: every fault kind the fault suite has, overlapping, on a mixed
workload, in both delivery modes; then the oracle (run.py, oracle.py).

The seed is fixed so the suite is reproducible run to run; `SOAK_SEED=n` replays another
(a failing run prints its seed and fault timeline), `SOAK_SECONDS` sets how long faults are
injected. The long run is bench/soak.py.
"""

from __future__ import annotations

import os

import pytest

from .nemesis import KINDS
from .run import SoakEnv, run_soak

pytestmark = [pytest.mark.fault, pytest.mark.live]

SEED = int(os.environ.get("SOAK_SEED", "4711"))
SECONDS = float(os.environ.get("SOAK_SECONDS", "45"))
MAX_RSS_MB = 1024  # the chart's memory limit
MAX_WAL_RETAINED_MB = 1024


@pytest.mark.parametrize("exactly_once", [False, True], ids=["at-least-once", "exactly-once"])
def test_nemesis_soak(soak_env: SoakEnv, exactly_once: bool) -> None:
    seed = SEED + exactly_once
    report = run_soak(soak_env, seed, SECONDS, exactly_once=exactly_once, mean_gap_s=3)
    print("\n" + report.table())
    s = report.summary
    replay = f"replay: SOAK_SEED={seed} SOAK_SECONDS={SECONDS:g} pytest tests/soak"
    assert s.checked > 0, replay
    assert (s.lost, s.phantom, s.bad_duplicates, s.out_of_order) == (0, 0, 0, 0), replay
    assert report.state_mismatches == 0, replay
    assert set(report.faults_by_kind) == set(KINDS), f"kinds not injected; {replay}"
    assert report.max_rss_mb < MAX_RSS_MB, replay
    assert report.max_wal_retained_mb < MAX_WAL_RETAINED_MB, replay
