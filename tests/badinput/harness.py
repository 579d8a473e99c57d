"""Runs generated inputs through a function and classifies what happens.

The only acceptable outcomes are a return value or an `accepted` error
(`ProtocolError` unless told otherwise); any other exception is a crash, kept
with the input that caused it. Every call is timed in thread CPU time (the
machine may be busy with other work, which must not count against the code
under test), and a CPU-time interval timer (SIGVTALRM, so it never collides with
pytest-timeout's SIGALRM) aborts any single input running longer than
`hang_limit_s`: a loop driven by an unchecked length shows up as a "hang"
outcome with its input instead of stalling the campaign. (CPython checks for
signals inside long integer arithmetic too, so even a runaway `10**n` is cut.)
"""

from __future__ import annotations

import signal
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from types import FrameType, TracebackType
from typing import Any

from bridge.errors import BridgeError, ProtocolError


class HangError(Exception):
    """Raised from the interval timer inside an input that ran past the hang limit."""


@dataclass
class Report:
    inputs: int = 0
    seconds: float = 0.0
    outcomes: Counter[str] = field(default_factory=Counter)
    per_target: Counter[str] = field(default_factory=Counter)
    max_ns: int = 0
    slowest: tuple[str, bytes] = ("", b"")
    crashes: list[tuple[str, bytes, str]] = field(default_factory=list)

    @property
    def rate(self) -> float:
        return self.inputs / self.seconds if self.seconds else 0.0

    def summary(self) -> str:
        outcomes = ", ".join(f"{k} {v}" for k, v in sorted(self.outcomes.items()))
        return (
            f"{self.inputs:,} inputs in {self.seconds:.1f}s ({self.rate:,.0f} inputs/s); "
            f"outcomes: {outcomes}; max CPU time per input {self.max_ns / 1e6:.3f} ms "
            f"({self.slowest[0]}, {len(self.slowest[1])} bytes)"
        )

    def crash_lines(self, limit: int = 10) -> list[str]:
        return [f"{name}: {error} <- {data.hex()}" for name, data, error in self.crashes[:limit]]


class Recorder:
    """Context manager that owns the hang timer while a campaign runs."""

    def __init__(
        self,
        hang_limit_s: float = 2.0,
        accepted: tuple[type[BridgeError], ...] = (ProtocolError,),
    ) -> None:
        self.report = Report()
        self._accepted = accepted
        self._limit_s = hang_limit_s
        self._started: float | None = None
        self._begin = 0.0
        self._previous: Any = None

    def __enter__(self) -> Recorder:
        tick = min(self._limit_s / 4, 0.05)
        self._previous = signal.signal(signal.SIGVTALRM, self._check)
        signal.setitimer(signal.ITIMER_VIRTUAL, tick, tick)
        self._begin = time.perf_counter()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.report.seconds = time.perf_counter() - self._begin
        signal.setitimer(signal.ITIMER_VIRTUAL, 0)
        signal.signal(signal.SIGVTALRM, self._previous)

    def _check(self, signum: int, frame: FrameType | None) -> None:
        # CPU time, like the timer that calls this: on a busy machine wall time runs
        # on while the input waits for a core, and that must not count as a hang.
        if self._started is not None and time.thread_time() - self._started > self._limit_s:
            raise HangError

    def run(self, name: str, fn: Callable[[bytes], object], data: bytes) -> None:
        """Call `fn(data)`, record the outcome and the CPU time it took."""
        report = self.report
        self._started = time.thread_time()
        t0 = time.thread_time_ns()
        try:
            fn(data)
            outcome = "returned"
        except HangError:
            outcome = "hang"
            report.crashes.append((name, data, f"no result after {self._limit_s}s of CPU time"))
        except Exception as exc:
            if isinstance(exc, self._accepted):
                outcome = type(exc).__name__
            else:
                outcome = f"crash:{type(exc).__name__}"
                report.crashes.append((name, data, repr(exc)))
        elapsed = time.thread_time_ns() - t0
        self._started = None
        if elapsed > report.max_ns:
            report.max_ns, report.slowest = elapsed, (name, data)
        report.inputs += 1
        report.outcomes[outcome] += 1
        report.per_target[name] += 1
