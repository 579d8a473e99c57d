"""Waiting on a condition, the one way every test does it.

Tests never sleep to synchronise: they poll what they wait for until it holds or a
deadline passes, and a timeout fails the test naming what did not happen. The
deadline only bounds a hang; it is not a timed assertion.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def wait_for(
    probe: Callable[[], T | None],
    timeout: float,
    what: str,
    *,
    every: float = 0.05,
    detail: Callable[[], object] | None = None,
) -> T:
    """Call `probe` until it returns something truthy, and return that.

    After `timeout` seconds raise AssertionError naming `what` (and `detail()`, e.g.
    what was seen so far). `every` is the pause between calls; a probe that blocks by
    itself (a consumer poll, a stream read) passes 0. A probe may raise to stop early,
    e.g. when the process it watches has died.
    """
    deadline = time.monotonic() + timeout
    while True:
        result = probe()
        if result:
            return result
        if time.monotonic() > deadline:
            more = "" if detail is None else f" ({detail()})"
            raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}{more}")
        time.sleep(every)


def checked(check: Callable[[], None], probe: Callable[[], T]) -> Callable[[], T]:
    """`probe` that calls `check` first: a process's or workload's `check()`, which raises
    when it died, so that a wait on it fails at once rather than at its deadline."""

    def checked_probe() -> T:
        check()
        return probe()

    return checked_probe
