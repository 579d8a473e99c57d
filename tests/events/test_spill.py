from __future__ import annotations

import errno
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO

import pytest

from bridge.decode.messages import (
    Insert,
    Message,
    StreamAbort,
    StreamCommit,
    StreamStart,
    StreamStop,
)
from bridge.errors import ConfigError, SourceError
from bridge.events import Change, EventAssembler, SpillPool, TxCommit
from bridge.events import spill as spill_module
from bridge.events.spill import RECORD_OVERHEAD

from .conftest import REL, RELID, feed, ins, row, spill_files

Make = Callable[..., EventAssembler]


def records(n: int, start: int = 0) -> list[bytes]:
    return [b"record-%06d" % i for i in range(start, start + n)]


def cost(raw: bytes) -> int:
    return len(raw) + RECORD_OVERHEAD


def test_records_stay_in_memory_below_the_bound(spill_dir: Path) -> None:
    pool = SpillPool(spill_dir, 10_000)
    buffer = pool.buffer("t")
    for raw in records(10):
        buffer.append(raw, None)
    assert buffer.path is None and not spill_dir.exists()
    assert pool.in_memory_bytes == sum(cost(r) for r in records(10))
    assert list(buffer.replay()) == records(10)
    assert pool.in_memory_bytes == 0


def test_spill_keeps_order_across_disk_and_memory(spill_dir: Path) -> None:
    data = records(100)
    pool = SpillPool(spill_dir, 10 * cost(data[0]))
    buffer = pool.buffer("t")
    for raw in data:
        buffer.append(raw, None)
        assert pool.in_memory_bytes <= pool.memory_limit_bytes
    assert buffer.path is not None and Path(buffer.path).parent == spill_dir
    assert 0 < buffer.memory_bytes <= pool.memory_limit_bytes  # the tail is in memory
    assert len(buffer) == 100
    assert list(buffer.replay()) == data
    assert spill_files(spill_dir) == [] and pool.in_memory_bytes == 0


def test_largest_buffer_is_spilled_first(spill_dir: Path) -> None:
    pool = SpillPool(spill_dir, 20 * cost(records(1)[0]))
    big, small = pool.buffer("big"), pool.buffer("small")
    for raw in records(15):
        big.append(raw, None)
    for raw in records(6, 100):
        small.append(raw, None)
    assert big.path is not None and small.path is None
    assert list(small.replay()) == records(6, 100)
    assert list(big.replay()) == records(15)


def test_record_larger_than_the_bound_goes_straight_to_disk(spill_dir: Path) -> None:
    pool = SpillPool(spill_dir, 100)
    buffer = pool.buffer("t")
    buffer.append(b"a", None)
    buffer.append(b"x" * 1000, None)
    buffer.append(b"b", None)
    assert pool.peak_in_memory_bytes <= 100
    assert list(buffer.replay()) == [b"a", b"x" * 1000, b"b"]


def test_subtransaction_cut_inside_the_file(spill_dir: Path) -> None:
    pool = SpillPool(spill_dir, 5 * cost(records(1)[0]))
    buffer = pool.buffer("t", top_xid=1)
    data = records(30)
    for i, raw in enumerate(data):
        buffer.append(raw, 1 if i < 10 else 2 if i < 20 else 3)
    buffer.drop_subtransaction(2)  # starts inside the spilled part
    assert len(buffer) == 10 and buffer.memory_bytes == 0 and pool.in_memory_bytes == 0
    buffer.append(b"after", 4)
    buffer.drop_subtransaction(3)  # already cut away together with 2
    assert list(buffer.replay()) == [*data[:10], b"after"]


def test_subtransaction_cut_inside_memory(spill_dir: Path) -> None:
    pool = SpillPool(spill_dir, 1 << 20)
    buffer = pool.buffer("t", top_xid=1)
    buffer.append(b"a", 1)
    buffer.append(b"b", 7)
    buffer.append(b"c", 7)
    buffer.drop_subtransaction(7)
    assert pool.in_memory_bytes == cost(b"a")
    buffer.drop_subtransaction(1)  # the top-level xid is never a subtransaction
    assert list(buffer.replay()) == [b"a"]


def test_abandoned_replay_still_deletes_the_file(spill_dir: Path) -> None:
    pool = SpillPool(spill_dir, 0)
    buffer = pool.buffer("t")
    for raw in records(3):
        buffer.append(raw, None)
    replay = buffer.replay()
    assert next(replay) == records(1)[0]
    replay.close()
    assert spill_files(spill_dir) == []


def test_negative_memory_limit_is_a_config_error(spill_dir: Path) -> None:
    with pytest.raises(ConfigError):
        SpillPool(spill_dir, -1)


class _FullDisk:
    """A spill file on a full volume: the first write fails with ENOSPC."""

    def __init__(self, real: BinaryIO) -> None:
        self.real = real

    def write(self, data: bytes) -> int:
        raise OSError(errno.ENOSPC, "No space left on device")

    def close(self) -> None:
        self.real.close()


def test_full_disk_is_a_source_error_naming_the_spill_dir(
    make: Make, spill_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real_open = spill_module._open_spill_file

    def full_disk(directory: Path, label: str) -> tuple[BinaryIO, str]:
        file, path = real_open(directory, label)
        return _FullDisk(file), path  # type: ignore[return-value]

    monkeypatch.setattr(spill_module, "_open_spill_file", full_disk)
    asm = make(memory_limit_bytes=0)
    with pytest.raises(SourceError) as err:
        feed(asm, REL, StreamStart(1, True), ins(b"a", 1))
    assert "No space left on device" in str(err.value) and str(spill_dir) in str(err.value)
    assert err.value.hint is not None and "spill_dir" in err.value.hint
    asm.close()
    assert spill_files(spill_dir) == []


def test_unusable_spill_dir_is_a_source_error(make: Make, spill_dir: Path) -> None:
    spill_dir.parent.mkdir(parents=True)
    spill_dir.write_bytes(b"not a directory")
    with pytest.raises(SourceError):
        feed(make(memory_limit_bytes=0), REL, StreamStart(1, True), ins(b"a", 1))


def test_streamed_transaction_spills_and_cleans_up(make: Make, spill_dir: Path) -> None:
    asm = make(memory_limit_bytes=4096)
    msgs: list[Message] = [REL, StreamStart(1, True)]
    msgs += [ins(b"%d" % i, 1) for i in range(300)]
    msgs += [StreamStop(), StreamStart(2, True), ins(b"other", 2), StreamStop()]
    feed(asm, *msgs)
    assert len(spill_files(spill_dir)) >= 1
    assert asm.pool.peak_in_memory_bytes <= 4096
    out = feed(asm, StreamCommit(1, 0, 100, 110, 0))
    assert [c.new.values[0] for c in out[1:-1]] == [b"%d" % i for i in range(300)]  # type: ignore[union-attr]
    assert [c.ordinal for c in out[1:-1]] == list(range(300))  # type: ignore[union-attr]
    feed(asm, StreamAbort(2, 2, None, None))
    assert spill_files(spill_dir) == []
    assert asm.pool.in_memory_bytes == 0


def test_million_row_streamed_transaction_stays_within_the_bound(spill_dir: Path) -> None:
    limit = 1 << 20
    rows = 1_000_000

    def decode_row(raw: bytes) -> Message:
        return Insert(7, RELID, row(raw))

    asm = EventAssembler(
        decode=decode_row,
        decode_streamed=decode_row,
        spill_dir=spill_dir,
        memory_limit_bytes=limit,
    )
    pool = asm.pool
    feed(asm, REL, StreamStart(7, True))
    msg = ins(b"", 7)
    for i in range(rows):
        asm.feed(msg, b"%d" % i, 1000 + i, i)
        if i % 50_000 == 0:
            assert pool.in_memory_bytes <= limit
    feed(asm, StreamStop())
    assert pool.peak_in_memory_bytes <= limit
    assert pool.spill_file_count == 1 and len(spill_files(spill_dir)) == 1

    expected = 0
    commit = None
    for event in asm.feed(StreamCommit(7, 0, 900, 910, 0), b"", 0, 0):
        if isinstance(event, TxCommit):
            commit = event
        elif isinstance(event, Change):
            assert event.new.values[0] == b"%d" % expected  # type: ignore[union-attr]
            assert event.lsn == 1000 + expected  # its own LSN, kept through the spill file
            expected += 1
    assert expected == rows
    assert commit is not None and commit.event_count_by_table == {"public.t": rows}
    assert spill_files(spill_dir) == [] and pool.in_memory_bytes == 0
