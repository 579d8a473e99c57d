"""The one place the bridge waits for PostgreSQL: on a socket, with a deadline and a stop.

Every exchange with the server is a protocol step (`bridge.source.libpq`): a generator
that calls libpq's non-blocking functions and, when it would block, yields the socket
events it waits for (`READ`, `WRITE`, both); it is sent back the events that are ready.
psycopg's own steps speak the same protocol (its `Wait.R/W/RW` are these numbers), so its
queries wait here too. Nothing else in the bridge blocks on a PostgreSQL socket.

Two things end a wait besides the server's answer:
- its deadline: `Expired`, and the caller cancels the query (a server that answers
  nothing is frozen, overloaded or cut off: the bridge stops with a clear error instead
  of hanging with the slot held);
- a stop (`Stop`, set once by the SIGTERM handler): from then on every wait, the one in
  progress and any later one, lasts at most `STOP_GRACE_S`. A server that answers
  finishes what it was asked (the final status update, a chunk's position being stored);
  one that does not is given up on (`Stopped`), so the process exits within its stop
  timeout even with PostgreSQL frozen.

The stop is a pipe that `poll` watches beside the socket: setting it wakes a wait at
once, from a signal handler too (after the handler runs, the interrupted `poll` is
called again and finds the pipe readable).
"""

from __future__ import annotations

import errno
import math
import os
import select
import threading
import time
from collections.abc import Callable, Generator, Iterator
from contextlib import contextmanager
from typing import Final, TypeVar

T = TypeVar("T")

READ: Final = 1  # selectors.EVENT_READ, psycopg's Wait.R / Ready.R
WRITE: Final = 2  # selectors.EVENT_WRITE, psycopg's Wait.W / Ready.W

# A protocol step: yields the events it waits for, is sent the ready ones, returns its result.
Step = Generator[int, int, T]

# After a stop, how long any wait may still last: a working server answers a status
# update or a small query in milliseconds, and the process must be gone well within its
# stop timeout (pipeline.shutdown_timeout_s) after a possible cancel of its own.
STOP_GRACE_S: Final = 2.0

_POLL_OF: Final = {
    READ: select.POLLIN,
    WRITE: select.POLLOUT,
    READ | WRITE: select.POLLIN | select.POLLOUT,
}
_BROKEN: Final = select.POLLERR | select.POLLHUP


class Expired(Exception):  # noqa: N818 (an outcome, not an error: libpq turns it into one)
    """The deadline passed before the server answered."""


class Stopped(Exception):  # noqa: N818
    """A stop was requested and the server did not answer within `STOP_GRACE_S`."""


class Stop:
    """A request to stop, set once and never cleared, that a `poll` can watch.

    `set` is safe in a signal handler: it writes one byte to a non-blocking pipe."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._read, self._write = os.pipe()
        os.set_blocking(self._read, False)
        os.set_blocking(self._write, False)
        self._clock = clock
        self.requested_at: float | None = None
        self._interruptible = 0  # main-thread waits that are not a Waiter's, under way

    @property
    def requested(self) -> bool:
        return self.requested_at is not None

    def set(self) -> None:
        """Request the stop; raises `Stopped` when it interrupts an `interruptible` wait
        (called from a signal handler, which runs in the main thread)."""
        if self.requested_at is not None:
            return
        self.requested_at = self._clock()
        os.write(self._write, b"\0")
        if self._interruptible and threading.current_thread() is threading.main_thread():
            raise Stopped

    @contextmanager
    def interruptible(self) -> Iterator[None]:
        """A wait that is not a `Waiter`'s (psycopg's connect, bounded by connect_timeout
        only): in the main thread, a stop arriving meanwhile raises `Stopped` in it from
        the signal handler. Elsewhere (another thread) it runs to its own timeout."""
        if threading.current_thread() is not threading.main_thread():
            yield
            return
        self._interruptible += 1
        try:
            yield
        finally:
            self._interruptible -= 1

    def wait(self, timeout: float) -> bool:
        """Pause up to `timeout` seconds, less if the stop comes; whether it was requested."""
        if self.requested_at is None:
            select.select([self._read], [], [], max(0.0, timeout))
        return self.requested

    def fileno(self) -> int:
        return self._read

    def close(self) -> None:
        os.close(self._read)
        os.close(self._write)


# The process's stop: `bridge run`'s SIGTERM/SIGINT handler sets it (bridge.build). A
# signal asks the whole process to end, so every connection watches this one.
STOP: Final = Stop()


class Waiter:
    """Waits on one connection's socket and a `Stop`; made once per connection (a `poll`
    object costs no system call to set up or change, and is reused for every wait)."""

    def __init__(
        self,
        fileno: int,
        stop: Stop = STOP,
        *,
        grace_s: float = STOP_GRACE_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.fileno = fileno
        self.stop = stop
        self.grace_s = grace_s
        self._clock = clock
        self._poll = select.poll()
        self._events = 0  # registered for the socket
        self._watching_stop = False

    def run(self, step: Step[T], timeout: float) -> T:
        """Drive `step` to its end, waiting at most `timeout` seconds in all (a stop cuts
        that to `grace_s`); `Expired` or `Stopped` otherwise. The step is left where
        it was: the caller cancels the query and finishes or drops the connection."""
        start = self._clock()
        deadline = start + timeout
        stop_deadline = self._stop_deadline(start)
        try:
            events = next(step)
            while True:
                ready, stopped = self._wait(events, min(deadline, stop_deadline))
                if stopped:
                    stop_deadline = self._stop_deadline(start)
                if ready:
                    events = step.send(ready)
                elif not stopped:  # nothing came before the deadline
                    raise Stopped if stop_deadline < deadline else Expired
        except StopIteration as done:
            result: T = done.value
            return result

    def ready(self, events: int, timeout: float) -> int:
        """One wait of at most `timeout` seconds for `events`: those that are ready, 0 when
        none came in time or a stop came first (the caller reads `stop.requested`)."""
        start = self._clock()
        ready, _ = self._wait(events, min(start + timeout, self._stop_deadline(start)))
        return ready

    def _stop_deadline(self, start: float) -> float:
        """When a wait begun at `start` ends because of the stop: `grace_s` after the stop
        or after `start`, whichever is later; never before a stop."""
        at = self.stop.requested_at
        return math.inf if at is None else max(at, start) + self.grace_s

    def _wait(self, events: int, deadline: float) -> tuple[int, bool]:
        """One `poll`: the socket's ready events (masked to `events`; all of them on an
        error or hang-up, so that libpq reads the error) and whether the stop fired."""
        if events != self._events:
            self._poll.register(self.fileno, _POLL_OF[events])  # registering again modifies
            self._events = events
        watch = not self.stop.requested  # once set, the pipe stays readable: not polled again
        if watch != self._watching_stop:
            if watch:
                self._poll.register(self.stop.fileno(), select.POLLIN)
            else:
                self._poll.unregister(self.stop.fileno())
            self._watching_stop = watch
        remaining = deadline - self._clock()
        if remaining <= 0:
            return 0, False
        ms = -1 if math.isinf(remaining) else math.ceil(remaining * 1000)
        ready, stopped = 0, False
        for fd, happened in self._poll.poll(ms):
            if fd != self.fileno:
                stopped = True
            elif happened & select.POLLNVAL:
                raise OSError(errno.EBADF, "the connection's socket is closed")
            elif happened & _BROKEN:
                ready = events
            else:
                ready = (READ if happened & select.POLLIN else 0) | (
                    WRITE if happened & select.POLLOUT else 0
                )
        return ready & events, stopped
