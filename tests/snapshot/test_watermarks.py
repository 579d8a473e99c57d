"""Read-only watermarks (pure): what a chunk read's transaction snapshot and WAL position say."""

from __future__ import annotations

import pytest

from bridge.errors import SourceError
from bridge.snapshot.watermarks import Watermark, record_bound

BLOCK = 8192


def test_in_progress_xids_compare_by_their_low_32_bits() -> None:
    # xid8 values of epoch 1 (2^32 + n): the stream's xids are 32-bit
    mark = Watermark.parse(f"{(1 << 32) + 90}:{(1 << 32) + 120}:{(1 << 32) + 95},{(1 << 32) + 101}", "0/16B3748", BLOCK)
    assert mark.in_progress == {95, 101}
    assert mark.until == 0x16B3748
    # streamed 95 and 99: 95 is still running in the snapshot (its rows are not in the
    # read), 99 had finished (it is in the read)
    assert mark.stuck({95, 99}) == {95}
    assert Watermark.parse("100:100:", "0/10", BLOCK).in_progress == frozenset()


def test_a_page_header_just_written_is_taken_off_the_position() -> None:
    page = 5 * BLOCK
    assert record_bound(page + 24, BLOCK) == page  # past a short page header
    assert record_bound(page + 40, BLOCK) == page  # past a long one (segment start)
    assert record_bound(page + 48, BLOCK) == page + 48
    assert record_bound(page, BLOCK) == page


def test_an_unexpected_snapshot_text_is_a_clear_error() -> None:
    with pytest.raises(SourceError, match="PostgreSQL 13"):
        Watermark.parse("not a snapshot", "0/10", BLOCK)
