"""Read-only watermarks (pure): what a chunk read's transaction snapshot and WAL position say."""

from __future__ import annotations

import pytest

from bridge.errors import SourceError
from bridge.snapshot.watermarks import Streamed, Watermark, record_bound

BLOCK = 8192


def test_what_a_snapshot_sees_of_the_streams_32_bit_xids() -> None:
    epoch = 1 << 32  # xid8 values of epoch 1 (2^32 + n); the stream's xids are 32-bit
    mark = Watermark.parse(
        f"{epoch + 90}:{epoch + 120}:{epoch + 95},{epoch + 101}", "0/16B3748", BLOCK
    )
    assert mark.until == 0x16B3748
    assert mark.sees(80) and mark.sees(99)
    assert not mark.sees(95) and not mark.sees(101)  # in progress
    # at or past xmax (the newest completed xid + 1): committed in the WAL, perhaps
    # delivered already, but still in the proc array (a synchronous standby's wait)
    assert not mark.sees(120) and not mark.sees(125)
    # an epoch boundary between the two: 2^32 - 6 is the previous epoch's
    wrapped = Watermark.parse(f"{epoch - 10}:{epoch + 5}:{epoch + 2}", "0/10", BLOCK)
    assert wrapped.sees((1 << 32) - 6) and wrapped.sees(3) and not wrapped.sees(2)
    assert not wrapped.sees(5)


def test_streamed_keys_of_transactions_a_snapshot_does_not_see_are_stale() -> None:
    streamed = Streamed()
    streamed.add(95, 7, [b"k1"], whole=False)  # 95: delivered, not yet visible
    streamed.add(95, 8, [b"other-table"], whole=False)
    streamed.add(95, 7, [b"k2"], whole=False)
    streamed.add(99, 7, [b"k3"], whole=False)  # 99: delivered and visible
    assert streamed.size == 2 + 4
    mark = Watermark.parse("90:120:95,101", "0/10", BLOCK)
    assert streamed.stale(mark, 7) == {b"k1", b"k2"}  # k3's row has 99's change
    assert streamed.size == 1 + 3  # 99 forgotten: every later snapshot sees it
    streamed.add(95, 7, [b"k4"], whole=False)  # the transaction at hand goes on
    streamed.add(121, 7, [b"k6"], whole=False)  # delivered, past xmax: not seen either
    assert streamed.stale(mark, 7) == {b"k1", b"k2", b"k4", b"k6"}
    assert streamed.stale(Watermark.parse("122:122:", "0/10", BLOCK), 7) == set()
    assert streamed.size == 0
    streamed.add(121, 7, [b"k5"], whole=False)  # seen by now: nothing more to keep
    assert streamed.size == 0


def test_a_truncate_or_too_many_keys_make_the_chunk_wait() -> None:
    mark = Watermark.parse("90:120:95,96", "0/10", BLOCK)
    streamed = Streamed()
    streamed.add(95, 7, [], whole=True)
    assert streamed.stale(mark, 7) is None
    streamed = Streamed()
    streamed.add(96, 7, [str(i).encode() for i in range(20_000)], whole=False)
    assert streamed.stale(mark, 7) is None and streamed.size == 1


def test_a_page_header_just_written_is_taken_off_the_position() -> None:
    page = 5 * BLOCK
    assert record_bound(page + 24, BLOCK) == page  # past a short page header
    assert record_bound(page + 40, BLOCK) == page  # past a long one (segment start)
    assert record_bound(page + 48, BLOCK) == page + 48
    assert record_bound(page, BLOCK) == page


def test_an_unexpected_snapshot_text_is_a_clear_error() -> None:
    with pytest.raises(SourceError, match="PostgreSQL 13"):
        Watermark.parse("not a snapshot", "0/10", BLOCK)
