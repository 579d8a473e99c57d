"""ReplicationStream against a scripted connection: the loop priorities, without I/O."""

import struct
from collections import deque

from bridge.source.status import StatusTracker
from bridge.source.stream import ReplicationStream


class FakeConn:
    def __init__(self, clock: list[float]) -> None:
        self.incoming: deque[bytes] = deque()
        self.sent: list[bytes] = []
        self.clock = clock
        self.finished = False
        self.closed = False

    def read_copy(self, timeout: float) -> bytes | None:
        if self.incoming:
            return self.incoming.popleft()
        self.clock[0] += timeout  # time passes while waiting
        return None

    def write_copy(self, data: bytes) -> None:
        self.sent.append(data)

    def finish_copy(self) -> None:
        self.finished = True

    def close(self) -> None:
        self.closed = True


def xlog(start: int, end: int, payload: bytes = b"B") -> bytes:
    return b"w" + struct.pack(">QQQ", start, end, 0) + payload


def keepalive(end: int, reply: bool) -> bytes:
    return b"k" + struct.pack(">QQB", end, 0, reply)


def flush_of(raw: bytes) -> int:
    return int(struct.unpack(">cQQQQB", raw)[2])


def make(interval: float = 10.0) -> tuple[ReplicationStream, FakeConn, list[float]]:
    clock = [0.0]
    conn = FakeConn(clock)
    stream = ReplicationStream(
        conn,
        StatusTracker(interval),
        clock=lambda: clock[0],
        wall_us=lambda: 946_684_800_000_000,
    )
    return stream, conn, clock


def test_keepalive_reply_requested_is_answered_before_data() -> None:
    stream, conn, _ = make()
    stream.read(0)  # first periodic update goes out
    conn.sent.clear()
    conn.incoming.extend([keepalive(500, True), xlog(10, 20)])
    msg = stream.read(1.0)
    assert msg is not None and msg.wal_end == 20
    assert len(conn.sent) == 1
    assert stream.server_wal_end == 500


def test_service_answers_keepalives_while_blocked_and_keeps_data() -> None:
    stream, conn, clock = make(interval=10.0)
    stream.read(0)
    conn.sent.clear()
    conn.incoming.extend([keepalive(100, True), xlog(1, 2, b"I"), keepalive(200, True)])
    stream.service()
    assert len(conn.sent) == 1  # the first keepalive; the second waits behind the data
    clock[0] += 11.0
    stream.service()
    assert len(conn.sent) == 2  # periodic update even though nothing is consumed
    msg = stream.read(0)
    assert msg is not None and msg.payload == b"I"


def test_periodic_status_while_idle_and_confirm_reported() -> None:
    stream, conn, _ = make(interval=2.0)
    assert stream.read(5.0) is None
    assert len(conn.sent) >= 3  # at 0, 2 and 4 seconds
    stream.confirm(1234)
    stream.read(2.0)
    assert flush_of(conn.sent[-1]) == 1234
    stream.confirm(1000)  # never backwards
    stream.send_status()
    assert flush_of(conn.sent[-1]) == 1234


def test_close_sends_final_status_then_copy_done() -> None:
    stream, conn, _ = make()
    stream.confirm(77)
    stream.close()
    assert flush_of(conn.sent[-1]) == 77
    assert conn.finished and conn.closed
    stream.close()  # idempotent
