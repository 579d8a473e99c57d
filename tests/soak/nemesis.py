"""The soak's nemesis: a schedule of overlapping faults drawn from a seed, and how each is
injected and healed.

The schedule is a pure function of (seed, duration): the same seed gives the same faults at
the same offsets with the same durations, so a failing run is replayed with its seed. It
opens with every kind once, in a seeded order, then draws kinds at random; arrivals are
exponential, so faults overlap (a fault's duration often outlasts the gap to the next).
Faults that act on one server are not stacked on themselves: PostgreSQL's restarts and the
promotion take turns (a restart of a server being promoted is no separate fault), and so do
two faults of one link or of the broker. A fault waiting its turn starts late; the timeline
records when it really started and ended.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

from waiting import wait_for

# kind -> (exclusive group, (min, max) seconds it lasts; (0, 0): instantaneous)
KINDS: dict[str, tuple[str, tuple[float, float]]] = {
    "bridge kill -9": ("bridge", (0, 0)),
    "bridge SIGSTOP": ("bridge", (2, 8)),
    "broker kill -9": ("broker", (3, 15)),
    "postgres fast restart": ("postgres", (0, 0)),
    "postgres immediate restart": ("postgres", (0, 0)),
    "registry outage": ("registry", (5, 25)),
    "postgres link cut": ("link postgres", (3, 12)),
    "kafka link cut": ("link kafka", (3, 12)),
    "postgres link slow": ("link postgres", (5, 20)),
    "kafka link slow": ("link kafka", (5, 20)),
    "postgres link reset": ("link postgres", (0, 0)),
    "kafka link reset": ("link kafka", (0, 0)),
    "spill disk full": ("spill", (5, 20)),
    "promotion": ("postgres", (0, 0)),
}


class Planned(NamedTuple):
    at_s: float  # offset from the start of the schedule
    kind: str
    duration_s: float
    choice: int  # a seeded number the fault may use (fast or immediate stop, ...)


class Happened(NamedTuple):
    kind: str
    planned_s: float
    start_s: float
    end_s: float
    t_ms: float  # wall clock when it was injected (the checker's fault time)
    note: str


def schedule(seed: int, duration_s: float, mean_gap_s: float) -> list[Planned]:
    rng = random.Random(seed)
    kinds = list(KINDS)
    rng.shuffle(kinds)
    plan: list[Planned] = []
    at = rng.uniform(1, mean_gap_s)
    while at < duration_s:
        kind = kinds.pop(0) if kinds else rng.choice(list(KINDS))
        low, high = KINDS[kind][1]
        plan.append(
            Planned(round(at, 2), kind, round(rng.uniform(low, high), 2), rng.randrange(1 << 30))
        )
        at += rng.expovariate(1 / mean_gap_s)
    return plan


class Target(NamedTuple):
    """What the nemesis acts on (see run.py's SoakEnv)."""

    stack: Any  # deploy/local/stack.py Stack: Kafka and the registry
    pair: Any  # tests/failover/pair.py Pair: the PostgreSQL 18 primary and standby
    netns: Any  # tests/faults/netns.py Netns the bridge runs in
    spill_dir: Path  # the bridge's spill directory, a small tmpfs
    bridge: Callable[[], Any]  # the current BridgeProcess
    slot: str


class Nemesis:
    """Runs a schedule on threads (one per fault); `timeline` is what happened."""

    def __init__(self, target: Target, plan: list[Planned]) -> None:
        self.target = target
        self.plan = plan
        self.timeline: list[Happened] = []
        self.errors: list[BaseException] = []
        self._locks = {group: threading.Lock() for group, _ in KINDS.values()}
        self._threads: list[threading.Thread] = []
        self._t0 = 0.0
        self.t0_ms = 0.0  # the timeline's zero on the wall clock
        self._mutex = threading.Lock()

    def start(self) -> Nemesis:
        self._t0, self.t0_ms = time.monotonic(), time.time() * 1000
        for planned in self.plan:
            thread = threading.Thread(target=self._run, args=(planned,), daemon=True)
            thread.start()
            self._threads.append(thread)
        return self

    def join(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        for thread in self._threads:
            thread.join(max(0.0, deadline - time.monotonic()))
        assert not any(t.is_alive() for t in self._threads), "a fault did not heal in time"
        if self.errors:
            raise self.errors[0]

    def _now(self) -> float:
        return time.monotonic() - self._t0

    def _run(self, planned: Planned) -> None:
        delay = planned.at_s - self._now()
        if delay > 0:
            time.sleep(delay)  # the schedule's own clock, not a synchronisation
        group = KINDS[planned.kind][0]
        try:
            with self._locks[group]:
                start, t_ms = self._now(), time.time() * 1000
                note = FAULTS[planned.kind](self.target, planned)
                happened = Happened(planned.kind, planned.at_s, start, self._now(), t_ms, note)
            with self._mutex:
                self.timeline.append(happened)
        except BaseException as exc:
            self.errors.append(exc)

    def print_timeline(self, seed: int) -> None:
        print(f"\nfault timeline (seed {seed}; offsets in s from the first fault's clock)")
        print(f"{'planned':>8} {'start':>8} {'end':>8}  fault")
        for h in sorted(self.timeline, key=lambda h: h.start_s):
            extra = f"  ({h.note})" if h.note else ""
            print(f"{h.planned_s:8.1f} {h.start_s:8.1f} {h.end_s:8.1f}  {h.kind}{extra}")


# ---- the faults -----------------------------------------------------------------------


def _bridge_kill(t: Target, p: Planned) -> str:
    bridge = t.bridge()
    if not bridge.alive():
        return "bridge was not running"
    bridge.kill9()
    return ""


def _bridge_freeze(t: Target, p: Planned) -> str:
    bridge = t.bridge()
    if not bridge.alive():
        return "bridge was not running"
    bridge.freeze()
    try:
        time.sleep(p.duration_s)  # the freeze itself
    finally:
        bridge.thaw()
    return f"{p.duration_s:.1f}s"


def _broker_kill(t: Target, p: Planned) -> str:
    t.stack.stop_kafka(graceful=False)
    try:
        time.sleep(p.duration_s)  # the outage itself
    finally:
        t.stack.start_kafka()
    return f"down {p.duration_s:.1f}s"


def _postgres_restart(mode: str) -> Callable[[Target, Planned], str]:
    def restart(t: Target, p: Planned) -> str:
        primary = t.pair.primary
        t.pair.stop_primary(mode)
        primary.start()
        primary.wait_ready()
        return ""

    return restart


def _registry_outage(t: Target, p: Planned) -> str:
    t.stack.stop_registry()
    try:
        time.sleep(p.duration_s)  # the outage itself
    finally:
        t.stack.start_registry()
    return f"down {p.duration_s:.1f}s"


def _link(action: str, link: str) -> Callable[[Target, Planned], str]:
    def fault(t: Target, p: Planned) -> str:
        if action == "reset":
            return f"{t.netns.reset(link)} connection(s) reset"
        down, up = (
            (t.netns.cut, t.netns.restore) if action == "cut" else (t.netns.slow, t.netns.unslow)
        )
        down(link)
        try:
            time.sleep(p.duration_s)  # the cut or throttle itself
        finally:
            up(link)
        return f"{p.duration_s:.1f}s"

    return fault


def _spill_full(t: Target, p: Planned) -> str:
    """Fill the spill tmpfs to the last byte for a while."""
    filler = t.spill_dir / "filler"
    written = 0
    try:
        with filler.open("wb") as handle:
            block = b"\0" * (1 << 20)
            while True:
                try:
                    handle.write(block)
                    handle.flush()
                    written += len(block)
                except OSError:
                    break
        try:  # the last partial megabyte too
            with filler.open("ab") as handle:
                while True:
                    handle.write(b"\0" * 4096)
                    handle.flush()
        except OSError:
            pass
        time.sleep(p.duration_s)  # the full disk itself
    finally:
        filler.unlink(missing_ok=True)
    return f"{written >> 20} MiB filler, {p.duration_s:.1f}s"


def _promotion(t: Target, p: Planned) -> str:
    """Stop the primary (fast or immediate), promote the standby, make a new standby.

    Waits first for the standby's synchronised copy of the slot (a failover slot is only
    useful once synced): a promotion before it would be a different fault, the slot's loss,
    which tests/failover covers on its own."""
    pair = t.pair
    try:
        wait_for(
            lambda: (copy := pair.synced_slot(t.slot)) is not None and copy[0],
            180,
            "the standby's synchronised copy of the slot",
            every=0.5,
        )
    except AssertionError:
        # A standby copied while the slot lagged (the bridge down under other faults) syncs
        # it only once the slot passes the copy's start: this promotion waits for the next.
        return "skipped: the standby had no synchronised copy of the slot yet"
    mode = "fast" if p.choice % 2 else "immediate"
    pair.stop_primary(mode)
    pair.promote()
    pair.replace_standby()
    return f"primary stopped {mode}"


FAULTS: dict[str, Callable[[Target, Planned], str]] = {
    "bridge kill -9": _bridge_kill,
    "bridge SIGSTOP": _bridge_freeze,
    "broker kill -9": _broker_kill,
    "postgres fast restart": _postgres_restart("fast"),
    "postgres immediate restart": _postgres_restart("immediate"),
    "registry outage": _registry_outage,
    "postgres link cut": _link("cut", "postgres"),
    "kafka link cut": _link("cut", "kafka"),
    "postgres link slow": _link("slow", "postgres"),
    "kafka link slow": _link("slow", "kafka"),
    "postgres link reset": _link("reset", "postgres"),
    "kafka link reset": _link("reset", "kafka"),
    "spill disk full": _spill_full,
    "promotion": _promotion,
}
assert FAULTS.keys() == KINDS.keys()


def rss_bytes(pid: int) -> int | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None
