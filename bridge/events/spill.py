"""Bounded-memory buffers for transactions that cannot be emitted yet.

Streamed and prepared transactions must be held until PostgreSQL decides them, and
may be arbitrarily large. Buffers keep the raw protocol payloads (compact, and cheap
to re-decode on release); all buffers of a `SpillPool` share one memory budget. When
a record would exceed it, the largest in-memory part is appended to that buffer's own
temp file (length-prefixed records), so every buffer reads back as: file records,
then memory records, in arrival order. Files are deleted on release or drop.
"""

from __future__ import annotations

import contextlib
import os
import struct
import tempfile
from collections.abc import Generator, Iterable, Iterator
from pathlib import Path
from typing import BinaryIO

from bridge.errors import ConfigError, SourceError

_LEN = struct.Struct(">I")
# Accounted per in-memory record besides its payload: bytes object header, list slot.
RECORD_OVERHEAD = 48
_FILE_BUFFER = 64 * 1024


def _open_spill_file(directory: Path, label: str) -> tuple[BinaryIO, str]:
    directory.mkdir(parents=True, exist_ok=True)
    fd, path = tempfile.mkstemp(prefix=f"{label}-", suffix=".spill", dir=directory)
    return os.fdopen(fd, "w+b", buffering=_FILE_BUFFER), path


class SpillPool:
    """The shared budget: in-memory payload bytes never exceed `memory_limit_bytes`."""

    def __init__(self, spill_dir: str | os.PathLike[str], memory_limit_bytes: int) -> None:
        if memory_limit_bytes < 0:
            raise ConfigError(
                f"memory_limit_bytes must not be negative, got {memory_limit_bytes}",
                hint="set it to the bytes of buffered transaction data to keep in memory",
            )
        self.spill_dir = Path(spill_dir)
        self.memory_limit_bytes = memory_limit_bytes
        self.in_memory_bytes = 0
        self.peak_in_memory_bytes = 0
        self.spill_file_count = 0  # files created so far, for metrics
        self._buffers: set[SpillBuffer] = set()

    def buffer(self, label: str, top_xid: int | None = None) -> SpillBuffer:
        """A new buffer; `top_xid` marks records that belong to no subtransaction."""
        buffer = SpillBuffer(self, label, top_xid)
        self._buffers.add(buffer)
        return buffer

    def close(self) -> None:
        """Drop every live buffer and its file (connection lost or pipeline stopping)."""
        for buffer in list(self._buffers):
            buffer.discard()

    def _reserve(self, size: int) -> bool:
        """Account `size` in-memory bytes, spilling others first; False: go to disk."""
        limit = self.memory_limit_bytes
        while self.in_memory_bytes + size > limit:
            candidates = [b for b in self._buffers if b.memory_bytes and not b.sealed]
            if not candidates:
                return False
            max(candidates, key=lambda b: b.memory_bytes).spill()
        self.in_memory_bytes += size
        self.peak_in_memory_bytes = max(self.peak_in_memory_bytes, self.in_memory_bytes)
        return True

    def _forget(self, buffer: SpillBuffer) -> None:
        self._buffers.discard(buffer)


class SpillBuffer:
    """The ordered raw records of one buffered transaction.

    Remembers where each subtransaction's first record sits so a subtransaction abort
    can cut the buffer there (see `drop_subtransaction`).
    """

    __slots__ = (
        "_count",
        "_file",
        "_file_count",
        "_first",
        "_label",
        "_memory",
        "_path",
        "_pool",
        "_size",
        "_top_xid",
        "memory_bytes",
        "sealed",
    )

    def __init__(self, pool: SpillPool, label: str, top_xid: int | None) -> None:
        self._pool = pool
        self._label = label
        self._top_xid = top_xid
        self._memory: list[bytes] = []
        self.memory_bytes = 0  # accounted bytes of `_memory`
        self._file: BinaryIO | None = None
        self._path: str | None = None
        self._file_count = 0  # records in the file, which precede `_memory`
        self._count = 0  # records in file and memory
        self._size = 0  # encoded size of all records: a record's file offset
        self._first: dict[int, tuple[int, int]] = {}  # subxid -> (index, offset)
        self.sealed = False  # being replayed: no more appends, not a spill victim

    @property
    def path(self) -> str | None:
        """The spill file, once one was needed."""
        return self._path

    def __len__(self) -> int:
        return self._count

    def append(self, raw: bytes, xid: int | None) -> None:
        if xid is not None and xid != self._top_xid and xid not in self._first:
            self._first[xid] = (self._count, self._size)
        size = len(raw) + RECORD_OVERHEAD
        if self._pool._reserve(size):
            self._memory.append(raw)
            self.memory_bytes += size
        else:
            self._write((raw,))
            self._file_count += 1
        self._count += 1
        self._size += _LEN.size + len(raw)

    def spill(self) -> None:
        """Move the in-memory records to the end of the file."""
        self._write(self._memory)
        self._file_count += len(self._memory)
        self._memory = []
        self._release_memory()

    def drop_subtransaction(self, subxid: int) -> None:
        """Discard the records from `subxid`'s first one onwards.

        Everything after that point was made by the aborted subtransaction or by its
        own (nested) subtransactions: a backend runs one subtransaction at a time and
        the stream carries changes in WAL order. PostgreSQL's own apply worker
        truncates its spool file the same way. An unknown subxid had no changes.
        """
        position = self._first.get(subxid)
        if position is None:
            return
        index, offset = position
        if index >= self._file_count:
            cut = index - self._file_count
            freed = sum(len(raw) + RECORD_OVERHEAD for raw in self._memory[cut:])
            del self._memory[cut:]
            self.memory_bytes -= freed
            self._pool.in_memory_bytes -= freed
        else:
            self._memory = []
            self._release_memory()
            file = self._file
            assert file is not None  # records before `_file_count` live in the file
            try:
                file.flush()
                file.truncate(offset)
                file.seek(offset)
            except OSError as exc:
                raise self._io_error("truncate", exc) from exc
            self._file_count = index
        self._count = index
        self._size = offset
        first = self._first
        while first and next(reversed(first.values()))[0] >= index:
            first.popitem()

    def replay(self) -> Generator[bytes, None, None]:
        """Yield every record in order, one at a time; the buffer is discarded after."""
        self.sealed = True
        try:
            if self._file is not None:
                yield from self._read_file(self._file, self._file_count)
            yield from self._memory
        finally:
            self.discard()

    def discard(self) -> None:
        """Free memory and delete the file; idempotent."""
        self._memory = []
        self._release_memory()
        self._pool._forget(self)
        file, path = self._file, self._path
        self._file = self._path = None
        if file is not None and path is not None:
            # The content is being thrown away: a failing flush at close (a full disk, the
            # very error that may have brought us here) must not mask the real cause.
            with contextlib.suppress(OSError):
                file.close()
            try:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(path)
            except OSError as exc:
                raise SourceError(
                    f"could not delete spill file {path}: {exc.strerror or exc}",
                    hint="check permissions of the spill directory; the file can be removed",
                ) from exc

    def _release_memory(self) -> None:
        self._pool.in_memory_bytes -= self.memory_bytes
        self.memory_bytes = 0

    def _write(self, records: Iterable[bytes]) -> None:
        try:
            if self._file is None:
                self._file, self._path = _open_spill_file(self._pool.spill_dir, self._label)
                self._pool.spill_file_count += 1
            write = self._file.write
            pack = _LEN.pack
            for raw in records:
                write(pack(len(raw)))
                write(raw)
        except OSError as exc:
            raise self._io_error("write", exc) from exc

    def _read_file(self, file: BinaryIO, count: int) -> Iterator[bytes]:
        try:
            file.flush()
            file.seek(0)
        except OSError as exc:
            raise self._io_error("read", exc) from exc
        read = file.read
        unpack = _LEN.unpack
        for _ in range(count):
            try:
                head = read(_LEN.size)
                raw = read(unpack(head)[0]) if len(head) == _LEN.size else None
            except OSError as exc:
                raise self._io_error("read", exc) from exc
            if raw is None or len(raw) != unpack(head)[0]:
                raise SourceError(
                    f"spill file {self._path} is shorter than what was written to it",
                    hint="something else changed the spill directory; give the bridge "
                    "a spill_dir of its own",
                )
            yield raw

    def _io_error(self, action: str, exc: OSError) -> SourceError:
        where = self._path or str(self._pool.spill_dir)
        return SourceError(
            f"could not {action} spill file for {self._label} in {where}: {exc.strerror or exc}",
            hint="buffered transactions past memory_limit_bytes are spilled to spill_dir; "
            "free space there, point spill_dir at a larger volume, or raise "
            "memory_limit_bytes",
        )
