"""Each case of tests/conformance (README.md there) replayed through the bridge, every
topic compared with its table at each of the case's checks.

The default run (CI's) runs each case once, on one server in one mode, rotating both over
the cases (`plan`), so every case runs and each server and each mode gets about half of
them; a case with parts for one version only (`--! requires`, `--! if`) runs on the newer
server, where all of it runs. `CONFORMANCE=full` runs the whole matrix: every case on
PostgreSQL 15 and 18, its SQL replayed once into a bridge per mode side by side."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Final, NamedTuple

import pytest
from servers import SERVERS, Servers

from conformance.cases import case_files, case_name, load
from conformance.replay import MODES, Replay, database

pytestmark = pytest.mark.conformance

# Mismatches the suite found that are not fixed yet: bugs of the bridge, listed in
# tests/conformance/README.md ("Open bugs"), each run and expected to fail until fixed.
_OLD_SCHEMAS: Final = (
    "bridge verify's fold (bridge.verify.state.Decoder), which the suite rebuilds topics "
    "with, reads every record with the table's current schema, which cannot read records "
    "written under a schema it is incompatible with"
)
OPEN_BUGS: Final = {
    "test_decoding/ddl": f"a column retyped varchar -> int4: {_OLD_SCHEMAS}",
    "subscription/031_column_list": f"tab6's primary key moved to column b: {_OLD_SCHEMAS}",
    "subscription/100_bugs": f"another replica identity index: {_OLD_SCHEMAS}",
    "test_decoding/toast": (
        "UPDATE toasted_key SET toasted_col2 = toasted_col1 (a TOASTed primary key left "
        "unchanged): the new tuple carries the key column as unchanged TOAST and the bridge "
        "stops with ValueConversionError (NULL in a column of the record key); whether "
        "PostgreSQL sent an old key tuple to take the key from is not yet investigated"
    ),
}


class Run(NamedTuple):
    server: str  # "pg15" or "pg18"
    path: Path
    modes: tuple[str, ...]  # replay.MODES run side by side

    @property
    def id(self) -> str:
        modes = "all-modes" if self.modes == tuple(MODES) else "+".join(self.modes)
        return f"{self.server}-{case_name(self.path)}-{modes}"


def plan(full: bool) -> list[Run]:
    """The runs of the suite: the whole matrix, or each case once (see the module's doc)."""
    if full:
        return [Run(server, path, tuple(MODES)) for server in SERVERS for path in case_files()]
    runs: list[Run] = []
    modes = list(MODES)
    for path in case_files():
        text = path.read_text()
        newest = "\n--! requires " in text or "\n--! if " in text
        taken = [r.server for r in runs]
        server = SERVERS[-1] if newest else min(SERVERS, key=taken.count)
        on_server = sum(1 for r in runs if r.server == server)
        runs.append(Run(server, path, (modes[on_server % len(modes)],)))
    return runs


FULL: Final = os.environ.get("CONFORMANCE", "") == "full"


@pytest.mark.parametrize(
    ("servers", "run"),
    [(r.server, r) for r in plan(FULL)],
    ids=[r.id for r in plan(FULL)],
    indirect=["servers"],
)
def test_case(servers: Servers, run: Run, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    case = load(run.path, servers.major)
    if case.name in OPEN_BUGS:
        request.applymarker(pytest.mark.xfail(reason=OPEN_BUGS[case.name], strict=False))
    if servers.major < case.requires:
        pytest.skip(f"{case.name} needs PostgreSQL {case.requires}")
    started = time.monotonic()
    with database(servers) as dbname:
        replay = Replay(case, servers, dbname, tmp_path, run.modes)
        replay.run()
    print(
        f"\n{case.name} pg{servers.major} ({', '.join(run.modes)}): {replay.compared} table "
        f"comparisons, {replay.values} values equal, {time.monotonic() - started:.1f}s"
    )
    assert not replay.problems, "\n".join(replay.problems)


def test_default_plan_runs_every_case_and_every_server_and_mode() -> None:
    """The default run leaves no case out, and each server and mode gets cases."""
    runs = plan(full=False)
    assert sorted(r.path for r in runs) == case_files()
    assert {r.server for r in runs} == set(SERVERS)
    assert {(r.server, m) for r in runs for m in r.modes} == {
        (s, m) for s in SERVERS for m in MODES
    }
