"""The wait helper (`bridge.source.waiting`) on socket pairs: answers, deadlines, stops.

No server: one end of a socket pair is the connection the waiter watches, the test
writes to (or reads from) the other. Deadlines and grace periods are short; nothing
asserts a time, only which way each wait ended.
"""

from __future__ import annotations

import os
import signal
import socket
import threading
from collections.abc import Iterator
from types import FrameType

import pytest

from bridge.source import waiting
from bridge.source.waiting import READ, WRITE, Expired, Step, Stop, Stopped, Waiter

GRACE_S = 0.05
LONG_S = 60.0  # a deadline no test reaches: a wait that does not end otherwise hangs the test


@pytest.fixture
def pair() -> Iterator[tuple[socket.socket, socket.socket]]:
    ours, theirs = socket.socketpair()
    ours.setblocking(False)
    yield ours, theirs
    ours.close()
    theirs.close()


@pytest.fixture
def stop() -> Iterator[Stop]:
    made = Stop()
    yield made
    made.close()


def read_line(sock: socket.socket) -> Step[bytes]:
    """A step that reads up to a newline, waiting whenever nothing is at hand."""
    got = b""
    while not got.endswith(b"\n"):
        try:
            chunk = sock.recv(4096)
        except BlockingIOError:
            yield READ
            continue
        if not chunk:
            raise ConnectionError("closed")
        got += chunk
    return got


def test_a_step_runs_to_its_result_as_the_socket_becomes_ready(
    pair: tuple[socket.socket, socket.socket], stop: Stop
) -> None:
    ours, theirs = pair
    waiter = Waiter(ours.fileno(), stop, grace_s=GRACE_S)
    theirs.sendall(b"hel")
    threading.Timer(0.01, theirs.sendall, (b"lo\n",)).start()
    assert waiter.run(read_line(ours), LONG_S) == b"hello\n"


def test_no_answer_before_the_deadline_expires(
    pair: tuple[socket.socket, socket.socket], stop: Stop
) -> None:
    ours, _ = pair
    with pytest.raises(Expired):
        Waiter(ours.fileno(), stop, grace_s=GRACE_S).run(read_line(ours), 0.02)


def test_a_stop_during_the_wait_ends_it_after_the_grace(
    pair: tuple[socket.socket, socket.socket], stop: Stop
) -> None:
    ours, _ = pair
    threading.Timer(0.01, stop.set).start()
    with pytest.raises(Stopped):
        Waiter(ours.fileno(), stop, grace_s=GRACE_S).run(read_line(ours), LONG_S)


def test_a_stop_from_a_signal_handler_wakes_the_poll(
    pair: tuple[socket.socket, socket.socket], stop: Stop
) -> None:
    """The signal interrupts `poll`; Python runs the handler and polls again, and finds the
    stop's pipe readable."""
    ours, _ = pair

    def handler(signum: int, frame: FrameType | None) -> None:
        stop.set()

    before = signal.signal(signal.SIGUSR1, handler)
    try:
        threading.Timer(0.01, os.kill, (os.getpid(), signal.SIGUSR1)).start()
        with pytest.raises(Stopped):
            Waiter(ours.fileno(), stop, grace_s=GRACE_S).run(read_line(ours), LONG_S)
    finally:
        signal.signal(signal.SIGUSR1, before)


def test_after_a_stop_a_server_that_answers_still_finishes(
    pair: tuple[socket.socket, socket.socket], stop: Stop
) -> None:
    """The exit path (final status update, a position stored) works against a live server."""
    ours, theirs = pair
    stop.set()
    theirs.sendall(b"answer\n")
    assert Waiter(ours.fileno(), stop, grace_s=LONG_S).run(read_line(ours), LONG_S) == (b"answer\n")


def test_a_wait_begun_after_the_stop_gets_the_grace_too(
    pair: tuple[socket.socket, socket.socket], stop: Stop
) -> None:
    ours, _ = pair
    stop.set()
    with pytest.raises(Stopped):
        Waiter(ours.fileno(), stop, grace_s=GRACE_S).run(read_line(ours), LONG_S)


def test_a_deadline_shorter_than_the_grace_is_still_a_deadline(
    pair: tuple[socket.socket, socket.socket], stop: Stop
) -> None:
    ours, _ = pair
    stop.set()
    with pytest.raises(Expired):
        Waiter(ours.fileno(), stop, grace_s=LONG_S).run(read_line(ours), 0.02)


def test_write_readiness_and_both_at_once(
    pair: tuple[socket.socket, socket.socket], stop: Stop
) -> None:
    ours, theirs = pair
    waiter = Waiter(ours.fileno(), stop, grace_s=GRACE_S)
    assert waiter.ready(WRITE, LONG_S) == WRITE
    assert waiter.ready(READ, 0.01) == 0  # nothing to read: the wait times out
    theirs.sendall(b"x")
    assert waiter.ready(READ | WRITE, LONG_S) == READ | WRITE


def test_a_full_socket_waits_for_write_until_the_peer_reads(
    pair: tuple[socket.socket, socket.socket], stop: Stop
) -> None:
    ours, theirs = pair
    while True:  # fill our send buffer and their receive buffer
        try:
            ours.send(b"\0" * 65536)
        except BlockingIOError:
            break

    def drain() -> None:
        theirs.setblocking(False)
        while True:
            try:
                theirs.recv(1 << 20)
            except BlockingIOError:
                return

    waiter = Waiter(ours.fileno(), stop, grace_s=GRACE_S)
    assert waiter.ready(WRITE, 0.01) == 0
    reader = threading.Timer(0.01, drain)
    reader.start()
    assert waiter.ready(WRITE, LONG_S) == WRITE
    reader.join()


def test_a_hang_up_is_reported_ready_so_that_the_step_reads_the_error(
    pair: tuple[socket.socket, socket.socket], stop: Stop
) -> None:
    ours, theirs = pair
    theirs.close()
    with pytest.raises(ConnectionError):
        Waiter(ours.fileno(), stop, grace_s=GRACE_S).run(read_line(ours), LONG_S)


def test_a_closed_socket_is_an_error_not_a_busy_loop(stop: Stop) -> None:
    ours, theirs = socket.socketpair()
    fileno = ours.fileno()
    ours.close()
    theirs.close()
    with pytest.raises(OSError, match="closed"):
        Waiter(fileno, stop, grace_s=GRACE_S).ready(READ, LONG_S)


def test_ready_ends_at_a_stop(pair: tuple[socket.socket, socket.socket], stop: Stop) -> None:
    ours, _ = pair
    threading.Timer(0.01, stop.set).start()
    assert Waiter(ours.fileno(), stop, grace_s=GRACE_S).ready(READ, LONG_S) == 0
    assert stop.requested


def test_a_stop_interrupts_an_interruptible_wait_in_the_main_thread(stop: Stop) -> None:
    with stop.interruptible(), pytest.raises(Stopped):
        stop.set()
    stop.set()  # set once: nothing more happens


def test_outside_the_main_thread_a_stop_never_raises(stop: Stop) -> None:
    raised: list[BaseException] = []

    def elsewhere() -> None:
        try:
            with stop.interruptible():
                stop.set()
        except BaseException as exc:
            raised.append(exc)

    thread = threading.Thread(target=elsewhere)
    thread.start()
    thread.join()
    assert raised == [] and stop.requested


def test_the_process_stop_is_one_instance() -> None:
    assert isinstance(waiting.STOP, Stop) and not waiting.STOP.requested


def test_stop_wait_pauses_until_the_stop(stop: Stop) -> None:
    assert stop.wait(0.01) is False
    threading.Timer(0.01, stop.set).start()
    assert stop.wait(LONG_S) is True
    assert stop.wait(LONG_S) is True  # set: no pause at all
