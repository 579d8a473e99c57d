"""Each case of tests/conformance (README.md there) replayed through the bridge, every
topic compared with its table at each of the case's checks.

Three plans, chosen by the environment variable CONFORMANCE (`plan`):

- unset (CI's run, part of the full test suite): `CI_RUNS`, a fixed sample of the cases
  where the bridge has crashed or can lose a change (covering keys with INCLUDE columns,
  replica identities, keys of every type, TOAST, partitions in both root modes, two-phase
  commit, streamed and aborted subtransactions), each once, on one server in one mode, so
  that both servers and both modes run. About three minutes on 2 cores.
- `CONFORMANCE=each`: every case once, on one server in one mode, rotating both over the
  cases; a case with parts for one version only (`--! requires`, `--! if`) runs on the
  newer server, where all of it runs.
- `CONFORMANCE=full`: the whole matrix: every case on PostgreSQL 15 and 18, its SQL
  replayed once into a bridge per mode side by side."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Final, NamedTuple

import psycopg
import pytest
from servers import SERVERS, Servers

from bridge.source.libpq import CommandError
from conformance.cases import HERE, case_files, case_name, load
from conformance.replay import MODES, Replay, database, deadlock_victim

pytestmark = pytest.mark.conformance

# Mismatches the suite found that are not fixed yet: bugs of the bridge, listed in
# tests/conformance/README.md ("Open bugs"), each run and expected to fail (strictly: a
# fix makes the test fail until its entry goes) on the servers named, until fixed.
OPEN_BUGS: Final[dict[str, tuple[tuple[int, ...], str]]] = {}


class Run(NamedTuple):
    server: str  # "pg15" or "pg18"
    path: Path
    modes: tuple[str, ...]  # replay.MODES run side by side

    @property
    def id(self) -> str:
        modes = "all-modes" if self.modes == tuple(MODES) else "+".join(self.modes)
        return f"{self.server}-{case_name(self.path)}-{modes}"


# CI's sample (server, case, mode): what each one is there for.
CI_RUNS: Final = (
    # a covering primary key (INCLUDE), REPLICA IDENTITY FULL and NOTHING, a restart
    ("pg15", "subscription/001_rep_changes", "default"),
    # arrays, enums, composites, ranges, domains as keys
    ("pg18", "subscription/002_types", "binary-streaming"),
    # a nondeterministic collation, replica identity FULL
    ("pg15", "subscription/012_collation", "binary-streaming"),
    # TOASTed values unchanged in updates, a TOASTed key
    ("pg18", "test_decoding/toast", "default"),
    # a partitioned table in both root modes: cross-partition UPDATE, ATTACH, DETACH,
    # TRUNCATE of one partition
    ("pg15", "local/partitions", "binary-streaming"),
    # two-phase commit: PREPARE, COMMIT/ROLLBACK PREPARED, a restart between them
    ("pg18", "subscription/021_twophase", "default"),
    # streamed prepared transactions
    ("pg15", "test_decoding/twophase_stream", "binary-streaming"),
    # streamed transactions and subtransactions, aborted ones
    ("pg18", "subscription/016_stream_subxact", "binary-streaming"),
    ("pg15", "test_decoding/stream", "default"),
    ("pg18", "test_decoding/xact", "default"),
    ("pg15", "test_decoding/truncate", "default"),
)


def plan(which: str) -> list[Run]:
    """The runs of the suite for CONFORMANCE=`which` (see the module's doc)."""
    if which == "full":
        return [Run(server, path, tuple(MODES)) for server in SERVERS for path in case_files()]
    if which == "":
        return [Run(server, HERE / f"{name}.sql", (mode,)) for server, name, mode in CI_RUNS]
    if which != "each":
        raise ValueError(f"CONFORMANCE={which!r}: expected unset, 'each' or 'full'")
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


WHICH: Final = os.environ.get("CONFORMANCE", "")


@pytest.mark.parametrize(
    ("servers", "run"),
    [(r.server, r) for r in plan(WHICH)],
    ids=[r.id for r in plan(WHICH)],
    indirect=["servers"],
)
def test_case(servers: Servers, run: Run, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    case = load(run.path, servers.major)
    majors, reason = OPEN_BUGS.get(case.name, ((), ""))
    if servers.major in majors:
        request.applymarker(pytest.mark.xfail(reason=reason, strict=True))
    if servers.major < case.requires:
        pytest.skip(f"{case.name} needs PostgreSQL {case.requires}")
    started = time.monotonic()
    with database(servers) as dbname:
        replay = Replay(case, servers, dbname, tmp_path, run.modes)
        replay.run()
    print(
        f"\n{case.name} pg{servers.major} ({', '.join(run.modes)}): {replay.compared} table "
        f"comparisons, {replay.values} values equal, {replay.restarts} restarts after a "
        f"deadlock, {time.monotonic() - started:.1f}s"
    )
    assert not replay.problems, "\n".join(replay.problems)


def test_plans_cover_every_case_server_and_mode() -> None:
    """CI's sample names real cases, and it and CONFORMANCE=each give every server and mode
    cases; `each` leaves no case out; `full` runs every case on every server in every mode."""
    everything = {(s, m) for s in SERVERS for m in MODES}
    ci = plan("")
    assert all(r.path.is_file() for r in ci), [r.id for r in ci if not r.path.is_file()]
    assert len({r.path for r in ci}) == len(ci)
    assert {(r.server, m) for r in ci for m in r.modes} == everything
    each = plan("each")
    assert sorted(r.path for r in each) == case_files()
    assert {(r.server, m) for r in each for m in r.modes} == everything
    full = plan("full")
    assert {(r.server, r.path) for r in full} == {(s, p) for s in SERVERS for p in case_files()}
    assert all(r.modes == tuple(MODES) for r in full)


def test_only_a_deadlock_victim_is_restarted() -> None:
    """The harness restarts a bridge only when PostgreSQL ended its walsender as a deadlock
    victim (40P01), also when that came wrapped in another error; anything else ends it."""
    deadlock = CommandError("START_REPLICATION", "40P01", "deadlock detected")
    assert deadlock_victim(deadlock)
    try:
        try:
            raise deadlock
        except CommandError as exc:
            raise RuntimeError("replication connection lost") from exc
    except RuntimeError as wrapped:
        assert deadlock_victim(wrapped)
    assert not deadlock_victim(CommandError("START_REPLICATION", "XX000", "internal error"))
    assert not deadlock_victim(psycopg.errors.LockNotAvailable("lock timeout"))
    assert not deadlock_victim(RuntimeError("pipeline stopped"))
