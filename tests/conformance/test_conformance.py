"""Each case of tests/conformance (README.md there) on PostgreSQL 15 and 18, under the
defaults and with binary tuples and streaming on: replayed through the bridge, every topic
compared with its table at each of the case's checks."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from servers import Servers

from conformance.cases import case_files, case_name, load
from conformance.replay import MODES, Replay, database

pytestmark = pytest.mark.conformance


@pytest.mark.parametrize("mode", list(MODES))
@pytest.mark.parametrize("path", case_files(), ids=case_name)
def test_case(servers: Servers, path: Path, mode: str, tmp_path: Path) -> None:
    case = load(path, servers.major)
    if servers.major < case.requires:
        pytest.skip(f"{case.name} needs PostgreSQL {case.requires}")
    started = time.monotonic()
    with database(servers) as dbname:
        replay = Replay(case, servers, dbname, mode, tmp_path)
        replay.run()
    print(
        f"\n{case.name} pg{servers.major} {mode}: {replay.compared} table comparisons, "
        f"{replay.values} values equal, {time.monotonic() - started:.1f}s"
    )
    assert not replay.problems, "\n".join(replay.problems)
