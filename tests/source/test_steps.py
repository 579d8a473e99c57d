"""The protocol steps of `bridge.source.libpq`, driven by hand and by the waiter over a
socket pair, with a stand-in for libpq's connection (`FakePg`): which events each step
waits for, what it does when they are ready, and what it returns."""

from __future__ import annotations

import contextlib
import socket
import threading
from collections import deque
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import pytest
from psycopg import pq

from bridge.source import libpq
from bridge.source.waiting import READ, WRITE, Stop, Waiter


class FakePg:
    """libpq's non-blocking calls over one end of a socket pair: `flush` writes what was
    queued, `consume_input` reads what arrived; received lines are rows of a COPY (a
    line "." ends it) or, outside one, results."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.queued = b""
        self.received = b""
        self.results: deque[Any] = deque()
        self.consumed = 0

    def flush(self) -> int:
        try:
            sent = self.sock.send(self.queued)
        except BlockingIOError:
            sent = 0
        self.queued = self.queued[sent:]
        return 1 if self.queued else 0

    def consume_input(self) -> None:
        self.consumed += 1
        with contextlib.suppress(BlockingIOError):
            self.received += self.sock.recv(65536)

    def get_copy_data(self, async_: int) -> tuple[int, bytes]:
        line, sep, rest = self.received.partition(b"\n")
        if not sep:
            return 0, b""
        if line == b".":
            return -1, b""
        self.received = rest
        return len(line) + 1, line + b"\n"

    def is_busy(self) -> bool:
        return b"\n" not in self.received

    def get_result(self) -> Any:
        line, sep, rest = self.received.partition(b"\n")
        if not sep or line == b"":
            self.received = rest
            return None
        self.received = rest
        return SimpleNamespace(status=pq.ExecStatus.TUPLES_OK, text=line)


@pytest.fixture
def pair() -> Iterator[tuple[socket.socket, socket.socket]]:
    ours, theirs = socket.socketpair()
    ours.setblocking(False)
    yield ours, theirs
    ours.close()
    theirs.close()


@pytest.fixture
def waiter(pair: tuple[socket.socket, socket.socket]) -> Iterator[Waiter]:
    stop = Stop()
    yield Waiter(pair[0].fileno(), stop)
    stop.close()


def test_wait_step_asks_again_when_resumed_with_nothing_ready() -> None:
    step = libpq.wait_step(READ)
    assert next(step) == READ
    assert step.send(0) == READ  # a spurious wake-up
    with pytest.raises(StopIteration) as done:
        step.send(READ)
    assert done.value.value == READ


def test_flush_step_waits_for_both_and_reads_while_the_peer_cannot_take_more(
    pair: tuple[socket.socket, socket.socket],
) -> None:
    ours, _ = pair
    pg = FakePg(ours)
    pg.queued = b"\0" * (16 << 20)  # more than the socket buffers hold
    step = libpq.flush_step(pg)
    assert next(step) == READ | WRITE
    consumed = pg.consumed
    assert step.send(READ) == READ | WRITE  # readable: input consumed, flushing goes on
    assert pg.consumed == consumed + 1


def test_flush_step_driven_by_the_waiter_sends_everything(
    pair: tuple[socket.socket, socket.socket], waiter: Waiter
) -> None:
    ours, theirs = pair
    pg = FakePg(ours)
    payload = b"x" * (4 << 20)
    pg.queued = payload
    got = bytearray()

    def read() -> None:
        while len(got) < len(payload):
            got.extend(theirs.recv(1 << 20))

    reader = threading.Thread(target=read)
    reader.start()
    waiter.run(libpq.flush_step(pg), 60)
    reader.join()
    assert bytes(got) == payload and not pg.queued


def test_command_step_returns_the_last_result_up_to_the_end(
    pair: tuple[socket.socket, socket.socket], waiter: Waiter
) -> None:
    ours, theirs = pair
    pg = FakePg(ours)
    threading.Timer(0.01, theirs.sendall, (b"first\nsecond\n\n",)).start()
    assert waiter.run(libpq.command_step(pg), 60).text == b"second"


def test_copy_block_step_waits_for_rows_then_hands_over_what_is_at_hand(
    pair: tuple[socket.socket, socket.socket], waiter: Waiter
) -> None:
    ours, theirs = pair
    pg = FakePg(ours)
    step = libpq.copy_block_step(pg, 1 << 20)
    assert next(step) == READ  # nothing yet: wait
    theirs.sendall(b"1\n2\n")
    with pytest.raises(StopIteration) as done:
        step.send(READ)
    assert done.value.value == (b"1\n2\n", False)  # no more at hand: a block now
    theirs.sendall(b"3\n.\n")
    assert waiter.run(libpq.copy_block_step(pg, 1 << 20), 60) == (b"3\n", True)


def test_copy_block_step_cuts_blocks_at_the_limit(
    pair: tuple[socket.socket, socket.socket], waiter: Waiter
) -> None:
    ours, theirs = pair
    pg = FakePg(ours)
    theirs.sendall(b"aa\nbb\ncc\n.\n")
    pg.consume_input()
    blocks = []
    ended = False
    while not ended:
        block, ended = waiter.run(libpq.copy_block_step(pg, 5), 60)
        blocks.append(block)
    assert blocks == [b"aa\nbb\n", b"cc\n"]


def test_put_copy_step_waits_for_room_in_libpqs_buffer() -> None:
    class Full(FakePg):
        def __init__(self) -> None:
            super().__init__(socket.socket())
            self.refusals = 1
            self.flushes = 0

        def put_copy_data(self, data: bytes) -> int:
            if self.refusals:
                self.refusals -= 1
                return 0
            self.queued += data
            return 1

        def flush(self) -> int:
            self.flushes += 1
            self.queued = b""
            return 0

    pg = Full()
    step = libpq.put_copy_step(pg, b"r")
    assert next(step) == WRITE
    with pytest.raises(StopIteration):
        step.send(WRITE)
    assert pg.flushes == 2  # once to make room, once to send
    pg.sock.close()
