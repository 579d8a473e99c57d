"""One soak run: the environment, the bridge under a supervisor, the workload, the nemesis,
then the drain and the verdict. tests/soak/test_soak.py runs it short; bench/soak.py long.

The bridge runs in a network namespace (tests/faults/netns.py) with a link to PostgreSQL
and one to Kafka and the registry. PostgreSQL is the failover suite's pair of PostgreSQL 18
servers (tests/failover/pair.py), both on the PostgreSQL link, the slot a failover slot;
Kafka and the registry are a stack of their own on the Kafka link (the fault suite's
`netns_stack`). The spill directory is a small tmpfs. A supervisor restarts the bridge
whenever it exits, as Kubernetes would (no back-off beyond a second: faults come faster).

At the end the nemesis heals everything, the writers stop, the bridge delivers what is
committed and stops gracefully, and the oracle compares (oracle.py). RSS and the WAL the
slot retains are sampled every second throughout.
"""

from __future__ import annotations

import contextlib
import copy
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NamedTuple

import psycopg
from delivery.helpers import BridgeProcess, SlotMonitor, bridge_settings
from delivery.kafka_io import create_topics
from failover.pair import Pair
from faults.checker import Fault, Summary, check
from faults.netns import Netns
from stack_module import load_stack_module
from waiting import wait_for

from . import nemesis, oracle, workload

SPILL_MB = 64


class SoakEnv(NamedTuple):
    netns: Netns
    stack: Any
    pair: Pair
    spill_dir: Path
    workdir: Path


@contextlib.contextmanager
def soak_environment(
    workdir: Path, netns: Netns | None = None, stack: Any = None
) -> Iterator[SoakEnv]:
    """The namespace, the Kafka stack behind its link, the pair behind the PostgreSQL link
    and a tmpfs spill directory; given `netns` and `stack` (the fault suite's module
    fixtures) are used, not made."""
    with contextlib.ExitStack() as opened:
        if netns is None:
            netns = opened.enter_context(Netns(["postgres", "kafka"]))
        pg, kafka = netns.links["postgres"], netns.links["kafka"]
        if stack is None:
            stack = load_stack_module().Stack(
                pg_host=pg.server, pg_clients=pg.network, kafka_host=kafka.server
            )
            stack.start()
            opened.callback(stack.stop)
        pair = Pair(host=pg.server, clients=pg.network)
        opened.callback(pair.stop)
        pair.start_primary()
        pair.start_standby()
        spill = workdir / "spill"
        spill.mkdir(parents=True, exist_ok=True)
        subprocess.run(
            ["mount", "-t", "tmpfs", "-o", f"size={SPILL_MB}m", "tmpfs", str(spill)], check=True
        )
        opened.callback(subprocess.run, ["umount", "-l", str(spill)], check=False)
        yield SoakEnv(netns, stack, pair, spill, workdir)


class Report(NamedTuple):
    seed: int
    exactly_once: bool
    duration_s: float
    summary: Summary
    state_mismatches: int
    faults_by_kind: dict[str, int]
    bridge_runs: int
    max_rss_mb: float
    max_wal_retained_mb: float
    max_lag_s: float
    changes: int

    def table(self) -> str:
        mode = "exactly-once" if self.exactly_once else "at-least-once"
        s = self.summary
        kinds = ", ".join(f"{k} {n}" for k, n in sorted(self.faults_by_kind.items()))
        return "\n".join(
            [
                f"soak seed {self.seed}, {mode}, {self.duration_s:.0f} s of faults",
                f"faults injected ({sum(self.faults_by_kind.values())}): {kinds}",
                f"bridge runs: {self.bridge_runs}",
                f"changes checked: {s.checked} (records read {self.changes})",
                f"lost {s.lost}, phantom {s.phantom}, duplicated {s.duplicated} "
                f"(forbidden {s.bad_duplicates}), out of order {s.out_of_order}, "
                f"rebuilt-state mismatches {self.state_mismatches}",
                f"max RSS {self.max_rss_mb:.0f} MiB, max WAL retained "
                f"{self.max_wal_retained_mb:.1f} MiB, max lag (acknowledgement stalled) "
                f"{self.max_lag_s:.1f} s",
            ]
        )


class Supervisor:
    """Keeps a bridge running: starts it again whenever it exited; samples its RSS.
    `runs` is [start, exit seen] per run in wall-clock ms (exit None: still running)."""

    def __init__(self, bridge: BridgeProcess) -> None:
        self.bridge = bridge
        self.max_rss = 0
        self.runs: list[list[float | None]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="soak-supervisor", daemon=True)

    def start(self) -> Supervisor:
        self._start_bridge()
        self._thread.start()
        return self

    def _start_bridge(self) -> None:
        self.bridge.start()
        self.runs.append([time.time() * 1000, None])

    def _run(self) -> None:
        while not self._stop.wait(0.25):
            if not self.bridge.alive():
                if self.runs[-1][1] is None:
                    self.runs[-1][1] = time.time() * 1000
                self._stop.wait(0.5)  # a restart, not a spin, while a fault lasts
                if not self._stop.is_set():
                    self._start_bridge()
            elif (rss := nemesis.rss_bytes(self.bridge.pid)) is not None:
                self.max_rss = max(self.max_rss, rss)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(10)


class WalSampler:
    """The WAL the slot retains (current position - restart_lsn) on whichever server is
    primary, every second."""

    def __init__(self, dsn: str, slot: str) -> None:
        self.max_retained = 0
        self._dsn, self._slot = dsn, slot
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="soak-wal", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        query = (
            "SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), restart_lsn)::bigint "
            "FROM pg_replication_slots WHERE slot_name = %s"
        )
        while not self._stop.wait(1.0):
            try:
                with psycopg.connect(self._dsn, autocommit=True, connect_timeout=3) as conn:
                    while not self._stop.wait(1.0):
                        row = conn.execute(query, (self._slot,)).fetchone()
                        if row is not None and row[0] is not None:
                            self.max_retained = max(self.max_retained, int(row[0]))
            except psycopg.Error:
                continue  # restarting or promoting: sample on after

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(10)


def _settings(env: SoakEnv, db: str, slot: str, prefix: str, exactly_once: bool) -> dict[str, Any]:
    settings = bridge_settings(env.stack, db, slot, f"pub_{slot}", prefix, env.spill_dir)
    settings["source"].update(
        host=env.pair.source_host(),
        user=env.pair.primary.user,
        password=env.pair.primary.password,
        failover_slot=True,
        streaming="on",
        two_phase=True,
        publication_mode="disabled",
    )
    settings["pipeline"].update(memory_limit_mb=4)  # large transactions spill
    settings["log"] = {"level": "INFO"}
    if exactly_once:
        settings["kafka"].update(exactly_once=True, transaction_max_records=500)
    return settings


def _max_stall_s(monitor: SlotMonitor) -> float:
    """The longest the slot's confirmed position stood still while the writers committed
    (they commit several transactions a second throughout): the worst lag of a change."""
    worst, since, last = 0.0, None, None
    for sample in monitor.samples:
        lsn = sample.state.confirmed_flush
        if last is None or lsn > last:
            since, last = sample.t_ms, lsn
        elif since is not None:
            worst = max(worst, (sample.t_ms - since) / 1000)
    return worst


def run_soak(
    env: SoakEnv,
    seed: int,
    duration_s: float,
    *,
    exactly_once: bool,
    mean_gap_s: float = 8.0,
    drain_timeout_s: float = 600.0,
) -> Report:
    stamp = time.time_ns() % 10**10
    db, slot, prefix = f"soak{stamp}", f"soak_{stamp}", f"soak{stamp}"
    pair = env.pair
    pair.primary.create_database(db)
    dsn = pair.multi_dsn(db)
    workload.setup(dsn, f"pub_{slot}")
    topics = create_topics(
        env.stack.kafka_bootstrap, [f"{prefix}.public.{t}" for t in workload.TABLES]
    )
    settings = _settings(env, db, slot, prefix, exactly_once)
    bridge = BridgeProcess(
        copy.deepcopy(settings), env.workdir, name=f"soak-{seed}", prefix=env.netns.exec_prefix
    )
    reader = oracle.SoakReader(env.stack.kafka_bootstrap, env.stack.registry_url, topics)
    supervisor = Supervisor(bridge).start()
    monitor = SlotMonitor(dsn, slot, every=0.2)
    wal = WalSampler(dsn, slot)
    writers: list[workload.Writer] = []
    plan = nemesis.schedule(seed, duration_s, mean_gap_s)
    target = nemesis.Target(env.stack, pair, env.netns, env.spill_dir, lambda: bridge, slot)
    chaos = nemesis.Nemesis(target, plan)
    try:
        with psycopg.connect(dsn, autocommit=True) as conn:

            def streaming() -> bool:
                bridge.check()
                row = conn.execute(
                    "SELECT count(*) FROM pg_stat_replication r JOIN pg_replication_slots s "
                    "ON s.active_pid = r.pid WHERE s.slot_name = %s AND r.state IN "
                    "('catchup', 'streaming')",
                    (slot,),
                ).fetchone()
                return row is not None and row[0] > 0

            wait_for(streaming, 120, "the bridge to stream the slot")
        writers = workload.start_writers(dsn, seed)

        def healthy() -> None:
            """Raises a writer's error, or the bridge's if it died."""
            for writer in writers:
                if writer.error is not None:
                    raise writer.error
            bridge.check()

        reader.read_until(
            lambda recs: len(recs) >= 200,
            120,
            "the first records",
            healthy,
        )
        chaos.start()
        chaos.join(duration_s + 600)
        for writer in writers:
            writer.stop()
        committed = workload.committed(pair.primary.dsn(db))
        reader.read_until(
            lambda recs: committed <= reader.seen,
            drain_timeout_s,
            "every committed change in Kafka",
        )
        supervisor.stop()
        bridge.terminate()
        assert bridge.wait(120) == 0, bridge.log()[-5000:]
        reader.read_to_end()
    finally:
        for writer in writers:
            with contextlib.suppress(BaseException):
                writer.stop()
        supervisor.stop()
        bridge.cleanup()
        wal.stop()
        monitor.stop()
        reader.close()
        # Also when the run failed: the timeline and the seed are what reproduces it.
        chaos.print_timeline(seed)
    _dump(env.workdir / f"records-{seed}.tsv", reader.records, chaos.t0_ms)
    faults = [
        Fault(h.t_ms, _acked_around(monitor, h.t_ms), h.kind)
        for h in sorted(chaos.timeline, key=lambda h: h.t_ms)
    ]
    mode = "exactly-once" if exactly_once else "at-least-once"
    summary = check(
        f"soak seed {seed} ({mode})",
        committed,
        reader.records,
        faults,
        exactly_once,
        oracle.identity,
    )
    mismatches = oracle.state_mismatches(
        oracle.rebuild(reader.records), workload.table_state(pair.primary.dsn(db))
    )
    if mismatches:
        _print_runs(supervisor, chaos.t0_ms)
        oracle.print_mismatches(
            mismatches,
            reader.records,
            lambda table, key: workload.key_history(pair.primary.dsn(db), table, key),
            chaos.t0_ms,
        )
    by_kind: dict[str, int] = {}
    for h in chaos.timeline:
        by_kind[h.kind] = by_kind.get(h.kind, 0) + 1
    log = bridge.log()
    assert "Traceback" not in log, log[
        log.index("Traceback") - 2000 : log.index("Traceback") + 5000
    ]
    return Report(
        seed,
        exactly_once,
        duration_s,
        summary,
        len(mismatches),
        by_kind,
        bridge.runs,
        supervisor.max_rss / 2**20,
        wal.max_retained / 2**20,
        _max_stall_s(monitor),
        len(reader.records),
    )


def _dump(path: Path, records: list[oracle.SoakRec], t0_ms: float) -> None:
    """Every record as read, one line each (t: append time on the timeline's clock), kept in
    the run's directory for a diagnosis the printed verdict does not settle."""
    with path.open("w") as out:
        out.write("topic\tpartition\toffset\tt\tcommit_lsn\ttable\tkey\tv\top\n")
        for r in records:
            t = (r.append_ms - t0_ms) / 1000
            out.write(
                f"{r.topic}\t{r.partition}\t{r.offset}\t{t:.3f}\t{r.commit_lsn}\t{r.table}\t"
                f"{r.key}\t{r.v}\t{r.op}\n"
            )


def _print_runs(supervisor: Supervisor, t0_ms: float) -> None:
    """The bridge's runs on the fault timeline's clock: which run a record came from."""
    print("\nbridge runs (s on the fault timeline's clock; exit: when the supervisor saw it)")
    for n, (start, end) in enumerate(supervisor.runs):
        assert start is not None
        gone = "still running" if end is None else f"exit {(end - t0_ms) / 1000:7.2f}"
        print(f"  run {n}: start {(start - t0_ms) / 1000:7.2f}  {gone}")


def _acked_around(monitor: SlotMonitor, t_ms: float) -> Any:
    """What PostgreSQL may resend from after a fault at `t_ms`: the lowest confirmed position
    seen from just before it until two minutes after (a restart or a promotion can take the
    slot back to a checkpointed or synchronised copy)."""
    window = [
        s.state.confirmed_flush for s in monitor.samples if t_ms - 1000 <= s.t_ms <= t_ms + 120_000
    ]
    before = [s.state.confirmed_flush for s in monitor.samples if s.t_ms < t_ms]
    return min([*window, *before[-1:]], default=0)
