import struct

from bridge.decode.messages import PG_EPOCH_OFFSET_US
from bridge.source.status import StatusTracker


def positions(raw: bytes) -> tuple[int, int, int, int, int]:
    tag, write, flush, apply, ts, reply = struct.unpack(">cQQQQB", raw)
    assert tag == b"r"
    return write, flush, apply, ts, reply


def test_first_update_is_due_then_waits_for_interval() -> None:
    st = StatusTracker(10.0)
    assert st.due(0.0)
    st.build(0.0, PG_EPOCH_OFFSET_US)
    assert not st.due(5.0)
    assert st.seconds_until_due(5.0) == 5.0
    assert st.due(10.0)


def test_flush_is_monotonic_and_write_covers_it() -> None:
    st = StatusTracker(10.0, start_lsn=100)
    st.on_received(150)
    st.on_flushed(120)
    st.on_flushed(110)  # lower: ignored
    write, flush, apply, ts, reply = positions(st.build(0.0, PG_EPOCH_OFFSET_US + 42))
    assert (write, flush, apply, ts, reply) == (150, 120, 120, 42, 0)
    st.on_received(130)  # lower: ignored
    assert st.received == 150


def test_flush_change_is_reported_soon_but_rate_limited() -> None:
    st = StatusTracker(10.0)
    st.build(0.0, PG_EPOCH_OFFSET_US)
    st.on_flushed(5)
    assert not st.due(0.15)
    assert abs(st.seconds_until_due(0.15) - 0.05) < 1e-9
    assert st.due(0.2)
    st.build(0.2, PG_EPOCH_OFFSET_US)
    assert not st.due(0.3)  # nothing new flushed: back to the 10 s interval
