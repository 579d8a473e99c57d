"""Takeover time: a standby pair against today's one-pod restart.

    python bench/takeover.py [--runs 20] [--lease-timeout 5] [--kinds kill,freeze,restart]

Everything is real: PostgreSQL, Kafka and the registry from deploy/local/stack.py, each
bridge `python -m bridge run` in its own process (tests/delivery/helpers.py's
`BridgeProcess`), the delivery suite's ledger writer committing 100 transactions of 3 rows
a second. The time measured is from the fault to the broker's append (LogAppendTime,
read_uncommitted: exactly-once records count when appended, not when committed) of the
first record after it:

* kill:    kill -9 of the active bridge of a pair (ha.enabled, exactly-once); the standby
           takes over. The killed one is restarted and stands by for the next run.
* freeze:  SIGSTOP of the active; the standby takes over once PostgreSQL ended the frozen
           one's lease (ha.lease_timeout_s). Then SIGCONT: the old active stops on its lost
           lease and is restarted as the next standby.
* restart: one bridge (exactly-once, no standby) killed with kill -9 and started again at
           once, as a supervisor that restarts it without delay would: today's one-pod
           restart, before Kubernetes adds its own (container restart, CrashLoopBackOff, and
           for a dead node minutes until the pod is rescheduled).

A record appended within GRACE_MS of the fault is the old process's last bytes, already in
the kernel's socket buffers; the first one after that is the new active's (none of the
kinds is that fast). p50/p99 are nearest-rank over the runs.
"""

from __future__ import annotations

import argparse
import math
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psycopg

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from tests.delivery.helpers import BridgeProcess, bridge_settings, wait_slot_active  # noqa: E402
from tests.delivery.kafka_io import TopicReader, create_topics  # noqa: E402
from tests.delivery.ledger import LEDGER_DDL, LedgerWriter  # noqa: E402
from tests.stack_module import load_stack_module  # noqa: E402
from tests.waiting import checked, wait_for  # noqa: E402

GRACE_MS = 250.0
RATE = 100.0


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q * len(ordered)) - 1)]


class Scene:
    """A database, the ledger table and topic, a writer, a reader, and bridges to run."""

    def __init__(self, stack: Any, workdir: Path, name: str, paired: bool, lease_s: float):
        self.stack = stack
        db = f"takeover_{name}_{time.time_ns() % 10**9}"
        stack.create_database(db)
        self.dsn = stack.dsn(db)
        self.slot, prefix = f"slot_{name}", f"tk{time.time_ns() % 10**9}"
        settings = bridge_settings(stack, db, self.slot, f"pub_{name}", prefix, workdir / "spill")
        settings["kafka"].update(exactly_once=True)
        if paired:
            settings["ha"] = {"enabled": True, "lease_timeout_s": lease_s}
        self.settings = settings
        self.conn = psycopg.connect(self.dsn, autocommit=True)
        self.conn.execute(LEDGER_DDL)
        topics = create_topics(stack.kafka_bootstrap, [f"{prefix}.public.ledger"])
        self.reader = TopicReader(
            stack.kafka_bootstrap, stack.registry_url, topics, isolation="read_uncommitted"
        )
        self.workdir = workdir
        self.bridges: list[BridgeProcess] = []
        self.writer: LedgerWriter | None = None

    def bridge(self) -> BridgeProcess:
        made = BridgeProcess(self.settings, self.workdir, name=f"bridge{len(self.bridges)}")
        self.bridges.append(made)
        return made

    def start_writing(self) -> None:
        self.writer = LedgerWriter(self.dsn, rows_per_txn=3, rate=RATE)

    def flowing(self, watch: BridgeProcess, count: int = 150) -> None:
        goal = len(self.reader.records) + count
        self.reader.read_until(lambda recs: len(recs) >= goal, 120, "records", watch)

    def first_append_after(self, t_ms: float, watch: Callable[[], None]) -> float:
        """Seconds from `t_ms` to the first record appended past the grace period."""
        start = len(self.reader.records)

        class Watch:
            def check(self) -> None:
                watch()

        def found(recs: list[Any]) -> bool:
            return any(r.append_ms > t_ms + GRACE_MS for r in recs[start:])

        self.reader.read_until(found, 180, "the first record after the fault", Watch())
        first = min(
            r.append_ms for r in self.reader.records[start:] if r.append_ms > t_ms + GRACE_MS
        )
        return (first - t_ms) / 1000

    def close(self) -> None:
        if self.writer is not None:
            self.writer.stop()
        for bridge in self.bridges:
            bridge.cleanup()
        self.reader.close()
        self.conn.close()


def _log_count(bridge: BridgeProcess, text: str) -> int:
    return bridge.log().count(text)


def _standing_by(bridge: BridgeProcess, before: int) -> None:
    wait_for(
        checked(bridge.check, lambda: _log_count(bridge, "standing by for slot") > before),
        120,
        "a standby",
    )


def run_pair(scene: Scene, runs: int, freeze: bool) -> list[float]:
    active, standby = scene.bridge(), scene.bridge()
    active.start()
    wait_slot_active(scene.conn, scene.slot, active)
    standby.start()
    _standing_by(standby, 0)
    scene.start_writing()
    times = []
    for i in range(runs):
        scene.flowing(active)
        waiting = _log_count(active, "standing by for slot")
        t_ms = time.time() * 1000
        if freeze:
            active.freeze()
        else:
            active.kill9()
        times.append(scene.first_append_after(t_ms, standby.check))
        if freeze:
            active.thaw()
            wait_for(lambda: active.wait(0) is not None, 120, "the old active to stop")  # noqa: B023
        active.start()
        _standing_by(active, waiting)
        print(f"  run {i + 1}: {times[-1]:.2f} s", flush=True)
        active, standby = standby, active
    return times


def run_restart(scene: Scene, runs: int) -> list[float]:
    bridge = scene.bridge()
    bridge.start()
    wait_slot_active(scene.conn, scene.slot, bridge)
    scene.start_writing()
    times = []
    for i in range(runs):
        scene.flowing(bridge)
        t_ms = time.time() * 1000
        bridge.kill9()
        bridge.start()
        times.append(scene.first_append_after(t_ms, bridge.check))
        print(f"  run {i + 1}: {times[-1]:.2f} s", flush=True)
    return times


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--lease-timeout", type=float, default=5.0)
    parser.add_argument("--kinds", default="kill,freeze,restart")
    args = parser.parse_args()
    stack = load_stack_module().Stack()
    stack.start()
    results: dict[str, list[float]] = {}
    try:
        for kind in args.kinds.split(","):
            print(f"{kind}: {args.runs} runs", flush=True)
            with tempfile.TemporaryDirectory(prefix="pgkb-takeover-") as scratch:
                scene = Scene(stack, Path(scratch), kind, kind != "restart", args.lease_timeout)
                try:
                    if kind == "restart":
                        results[kind] = run_restart(scene, args.runs)
                    else:
                        results[kind] = run_pair(scene, args.runs, freeze=kind == "freeze")
                finally:
                    scene.close()
    finally:
        stack.stop()
    print(f"\nfault -> first record appended after it (s), lease timeout {args.lease_timeout:g} s")
    print("| kind | runs | p50 | p99 | min | max |")
    print("|---|---:|---:|---:|---:|---:|")
    for kind, times in results.items():
        print(
            f"| {kind} | {len(times)} | {percentile(times, 0.5):.2f} | "
            f"{percentile(times, 0.99):.2f} | {min(times):.2f} | {max(times):.2f} |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
