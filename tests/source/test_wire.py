"""The native network-order readers agree with struct on every value, sign and offset."""

import struct

from hypothesis import given
from hypothesis import strategies as st

from bridge.source.wire import i64be, u32, u64


@given(st.binary(min_size=8, max_size=24), st.data())
def test_readers_agree_with_struct(buf: bytes, data: st.DataObject) -> None:
    pos = data.draw(st.integers(0, len(buf) - 8))
    assert u32(buf, pos) == struct.unpack_from(">I", buf, pos)[0]
    assert u64(buf, pos) == struct.unpack_from(">Q", buf, pos)[0]
    assert i64be(buf, pos) == struct.unpack_from(">q", buf, pos)[0]


def test_edges() -> None:
    for value in (0, 1, 2**31 - 1, 2**31, 2**32 - 1, 2**32, 2**62, 2**63 - 1, 2**63, 2**64 - 1):
        assert u64(struct.pack(">Q", value), 0) == value
    for value in (-(2**63), -(2**32), -1, 0, 2**63 - 1):
        assert i64be(struct.pack(">q", value), 0) == value
