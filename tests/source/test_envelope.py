import contextlib
import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bridge.errors import ProtocolError
from bridge.source.envelope import Keepalive, XLogData, parse, status_update


def test_xlogdata() -> None:
    raw = b"w" + struct.pack(">QQQ", 1, 2, 3) + b"Bpayload"
    msg = parse(raw)
    assert isinstance(msg, XLogData)
    assert (msg.wal_start, msg.wal_end, msg.send_time) == (1, 2, 3)
    assert msg.payload == b"Bpayload"


def test_keepalive() -> None:
    msg = parse(b"k" + struct.pack(">QQB", 0x1234, 99, 1))
    assert msg == Keepalive(0x1234, 99, True)


def test_status_update_layout() -> None:
    raw = status_update(10, 9, 8, 7, True)
    assert raw == b"r" + struct.pack(">QQQQB", 10, 9, 8, 7, 1)


@pytest.mark.parametrize(
    "raw", [b"", b"w" + b"\0" * 23, b"k" + b"\0" * 16, b"k" + b"\0" * 18, b"x123"]
)
def test_malformed(raw: bytes) -> None:
    with pytest.raises(ProtocolError):
        parse(raw)


@given(st.binary(max_size=40))
def test_random_bytes_only_raise_protocol_error(raw: bytes) -> None:
    with contextlib.suppress(ProtocolError):
        parse(raw)
