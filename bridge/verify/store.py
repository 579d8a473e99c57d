"""Where the fold of `bridge.verify.state` keeps its per-key states: in memory while they fit
the budget, else in hash partitions on disk, one partition in memory at a time.

A key's state is one fixed-width entry of bytes (`bridge.verify.scan`: about 250 bytes a
key in a dict for a 6-column table), so a table of 100M keys would need some 25 GB. The
topic's end offsets are known before it is read, so the number of records (an upper
bound of the keys) decides up front: within the budget, one dict folds every record as
it comes and each PostgreSQL row takes its key's state out of it (`claim`). Beyond it,
verify is a Grace hash join: each record's entry is appended to one of P partition files
by a hash of its key (P chosen so that one partition's keys fit the budget), PostgreSQL's
rows likewise to P files of their own (with their key texts in a side file, read only
for the rows that differ); then, partition by partition, the topic's entries are folded
into a dict, the partition's PostgreSQL rows take their states out of it, what is left
are the ghosts, and the dict is dropped before the next partition's is built. Memory is
the budget, whatever the table size: write buffers, one partition's states, and
PostgreSQL's rows a fetch at a time. The files are written once and read once, in
sequence (no random disk access), under a private directory in `TMPDIR`, removed when
the store is closed or collected.

Why not sort runs and merge them: with entries that carry their key's position in the
topic's order, a hash partition keeps that order for free (each file is appended to in
the order records are read), and folding a partition is one pass over its file into a
dict; a sort would have to sort by (key, position) and could not fold in place. The
price of hash partitions is that a partition must fit in memory: with P up to
`MAX_PARTITIONS`, that is up to about a thousand times the budget's keys.

Two rules of the fold reach across keys, and partitions keep both: a TRUNCATE entry is
written to every partition (each drops its own older keys), and a key change's create
that carries unsent values from the old key (`scan.MOVED`) is written, after a COPY entry
of the old key, to the old key's partition, where the new key lives on from then
(`_homes`): every later record of the new key, and PostgreSQL's row of it, goes there.

`limit` is the budget of the whole process over 64 MiB of interpreter, libraries and
clients: what the process holds beyond that when the store is made (read from
/proc/self/statm) is taken off it, and Kafka's fetch queues and the write buffers too.
A limit too small for that still gets an eighth of it for the states (`budget`): the
process is then at its fixed term, ~60 MiB before it reads anything, and a partition's
states in memory add to it. Once the topic is read, the memory its consumers freed is
given back to the system (`give_back`): librdkafka's threads allocate in malloc arenas
of their own, which glibc keeps for the process (~4 MiB at `--memory-limit-mb 16`), and
the comparison's allocations, in the main arena, would otherwise add to them.
"""

from __future__ import annotations

import ctypes
import os
import shutil
import tempfile
import weakref
from collections.abc import Iterator
from typing import Final, NamedTuple

from bridge.errors import VerifyError
from bridge.verify import scan

MB: Final = 1 << 20
# The budget when nothing else is said: a quarter of an 8 GB pod with 2 cores.
DEFAULT_MEMORY_LIMIT: Final = 2048 * MB
# What the process may hold over the budget: the interpreter, its libraries and clients.
BASE: Final = 64 * MB
# Kafka's fetch queues (`bridge.verify.topic`) and other allocations beside the states.
RESERVE: Final = 24 * MB
# What a key's state costs in a dict beside the entry's bytes (CPython 3.11, 64-bit: the
# identity and state bytes objects, the dict's slot and its share of the table's slack),
# measured by bench/verify.py's `state_sizes`.
ENTRY_OVERHEAD: Final = 200
MAX_PARTITIONS: Final = 1024
_CHUNK: Final = 256 * 1024  # bytes read from a partition file at a time
_FEWEST: Final = 8
# a PostgreSQL row's entry: row digest, row number, where its key texts are and their size
PG_FIXED: Final = 28


class Kept(NamedTuple):
    """A key's state for people and repairs: the LSN of its newest change, whether that was
    a delete, its row digest and column digests joined, and where its records live
    (partition, framed key)."""

    lsn: int
    deleted: bool
    columns: bytes
    partition: int
    raw_key: bytes


def resident() -> int:
    """This process's resident bytes now (0 where /proc is not there)."""
    try:
        with open("/proc/self/statm", "rb") as statm:
            pages = int(statm.read().split()[1])
    except (OSError, ValueError, IndexError):
        return 0
    return pages * os.sysconf("SC_PAGE_SIZE")


def budget(limit: int) -> int:
    """The bytes the states may take under `limit` (module docstring): at least an eighth
    of it, for limits too small to hold the process itself."""
    left = limit + BASE - resident() - RESERVE
    return max(left, limit // 8, 1)


def give_back() -> None:
    """Return the memory malloc holds free to the system (glibc's `malloc_trim`: the free
    pages of every arena, the threads' too; module docstring). Nothing where the C
    library has no such call."""
    trim = getattr(ctypes.CDLL(None), "malloc_trim", None)  # the process's own symbols
    if trim is not None:
        trim(0)


def _remove(directory: str) -> None:
    shutil.rmtree(directory, ignore_errors=True)


class KeyStore:
    """Per-key states (`bridge.verify.scan` entries) in memory, or in hash partitions on
    disk when `expected` records would not fit `limit` (module docstring). `nulls`: the
    column digests of an all-null row; `in_memory`: never on disk; `directory`: where
    the files go (default: `TMPDIR`)."""

    def __init__(
        self,
        limit: int,
        nulls: bytes,
        *,
        expected: int = 0,
        in_memory: bool = False,
        directory: str | None = None,
    ) -> None:
        self.limit = limit
        self.nulls = nulls
        self.width = scan.IDENT + scan.REST + len(nulls)  # a topic entry in a file
        self.row_width = scan.IDENT + PG_FIXED + len(nulls)  # a PostgreSQL row's
        self.in_memory = in_memory
        self.partitions = 1
        self._fold = scan.Fold(nulls)  # the only one in memory; one per partition on disk
        self.truncated = 0
        self._directory = directory
        self._root: str | None = None
        self._finalizer: weakref.finalize[[str], KeyStore] | None = None
        self._buffer = MB
        self._topic: list[bytearray] = []
        self._rows: list[bytearray] = []
        self._texts = bytearray()
        self._texts_at = 0  # bytes of key texts written to their file so far
        self._homes: dict[bytes, int] = {}  # keys that moved into another key's partition
        self.expect(expected)

    def expect(self, records: int) -> None:
        """How many records will be put (an upper bound of the keys): decides, before the
        first `put`, whether the states go to disk and in how many partitions."""
        if self.in_memory or self._fold.states or self.on_disk:
            return
        room = budget(self.limit)
        wanted = -(-records * (ENTRY_OVERHEAD + self.width) // room)
        # no more partitions than of _FEWEST records each: a budget too small to hold the
        # process is not met by emptier files
        self.partitions = max(1, min(wanted, MAX_PARTITIONS, max(2, records // _FEWEST)))
        if self.partitions > 1:
            self._buffer = max(4096, min(MB, room // 8 // self.partitions))
            self._topic = [bytearray() for _ in range(self.partitions)]
            self._rows = [bytearray() for _ in range(self.partitions)]
            self._open()

    @property
    def on_disk(self) -> bool:
        return self.partitions > 1

    # the topic's entries

    def put(self, key: bytes, state: bytes, moved_from: bytes | None = None) -> None:
        """One entry in the topic's order; `moved_from`: the old key a MOVED entry carries
        from."""
        if state[scan.FLAGS_AT] & scan.TRUNCATE:
            self.truncated = max(self.truncated, scan.lsn_of(state))
        if not self.on_disk:
            if moved_from is not None:
                self._fold.add(moved_from, scan.copy_entry(state))
            self._fold.add(key, state)
            return
        if state[scan.FLAGS_AT] & scan.TRUNCATE:
            entry = bytes(scan.IDENT) + state
            for p in range(self.partitions):
                self._append(self._topic, p, entry, "t")
            return
        if moved_from is not None:
            home = self._home(moved_from)
            self._homes[key] = home
            self._append(self._topic, home, moved_from + scan.copy_entry(state), "t")
        self._append(self._topic, self._home(key), key + state, "t")

    def _home(self, key: bytes) -> int:
        home = self._homes.get(key)
        return hash(key) % self.partitions if home is None else home

    # in memory

    def claim(self, key: bytes) -> bytes | None:
        """Take the state of `key` out of the store (in memory only)."""
        return self._fold.states.pop(key, None)

    def state(self, key: bytes) -> bytes | None:
        """The state of `key`, left in the store (in memory only)."""
        return self._fold.states.get(key)

    def states(self) -> Iterator[tuple[bytes, bytes]]:
        """Every key left and its state, deleted ones too (in memory only)."""
        yield from self._fold.states.items()

    @property
    def memory(self) -> dict[bytes, bytes]:
        """The states by key (in memory only), for `bridge.verify.compare`'s claims."""
        return self._fold.states

    def live_count(self) -> int:
        """How many keys are alive (in memory only)."""
        return sum(1 for s in self._fold.states.values() if scan.live(s))

    # on disk

    def add_row(self, key: bytes, row: bytes) -> None:
        """PostgreSQL's row of `key` (`PG_FIXED` bytes, then its column digests; on disk
        only)."""
        self._append(self._rows, self._home(key), key + row, "r")

    def add_texts(self, texts: bytes) -> int:
        """Store a row's key texts; returns where they are (`texts`)."""
        at = self._texts_at + len(self._texts)
        self._texts += texts
        if len(self._texts) >= self._buffer:
            self._write("texts", self._texts)
        return at

    def texts(self, at: int, size: int) -> bytes:
        """`size` bytes of key texts at `at` (`add_texts`)."""
        if self._texts:
            self._write("texts", self._texts)
        assert self._root is not None
        fd = os.open(os.path.join(self._root, "texts"), os.O_RDONLY)
        try:
            return os.pread(fd, size, at)
        finally:
            os.close(fd)

    def partitioned(self) -> Iterator[tuple[dict[bytes, bytes], Iterator[bytes]]]:
        """Per partition, in turn: its topic entries folded (states by key; the dict is the
        caller's to take states out of until the next partition) and its PostgreSQL rows,
        in chunks of whole entries (`row_width` each)."""
        for p in range(self.partitions):
            self._flush(p)
        if self._texts:
            self._write("texts", self._texts)
        for p in range(self.partitions):
            fold = scan.Fold(self.nulls)
            for chunk in self._chunks(f"t{p}", self.width):
                scan.fold_chunk(fold, chunk, self.width)
            self.truncated = max(self.truncated, fold.truncated)
            for key, home in self._homes.items():
                if home != p:  # the key lives on in the partition it moved to
                    fold.states.pop(key, None)
            yield fold.states, self._chunks(f"r{p}", self.row_width)
            fold.states = {}

    def close(self) -> None:
        """Remove the files, if there are any (also done when the store is collected)."""
        if self._finalizer is not None:
            self._finalizer()

    def _open(self) -> None:
        try:
            root = tempfile.mkdtemp(prefix="bridge-verify-", dir=self._directory)
        except OSError as exc:
            raise self._no_room(exc) from None
        self._root = root
        self._finalizer = weakref.finalize(self, _remove, root)

    def _append(self, buffers: list[bytearray], p: int, entry: bytes, kind: str) -> None:
        buffer = buffers[p]
        buffer += entry
        if len(buffer) >= self._buffer:
            self._write(f"{kind}{p}", buffer)

    def _flush(self, p: int) -> None:
        for kind, buffers in (("t", self._topic), ("r", self._rows)):
            if buffers[p]:
                self._write(f"{kind}{p}", buffers[p])

    def _write(self, name: str, buffer: bytearray) -> None:
        """Append `buffer` to file `name` and empty it."""
        assert self._root is not None
        try:
            fd = os.open(os.path.join(self._root, name), os.O_WRONLY | os.O_CREAT | os.O_APPEND)
            try:
                written = os.write(fd, buffer)
                while written < len(buffer):  # a short write: the rest again
                    written += os.write(fd, buffer[written:])
            finally:
                os.close(fd)
        except OSError as exc:  # a full disk shows here
            raise self._no_room(exc) from None
        if name == "texts":
            self._texts_at += len(buffer)
        del buffer[:]

    def _chunks(self, name: str, width: int) -> Iterator[bytes]:
        assert self._root is not None
        path = os.path.join(self._root, name)
        if not os.path.exists(path):
            return
        size = max(width, _CHUNK // width * width)
        with open(path, "rb") as file:  # buffered: a read returns `size` bytes until the end
            while chunk := file.read(size):
                yield chunk
        os.unlink(path)  # read once: its disk space back before the next partition's

    def _no_room(self, exc: Exception) -> VerifyError:
        where = self._directory or tempfile.gettempdir()
        return VerifyError(
            f"verify's key store under {where} failed: {exc}",
            hint="the topic's key states passed --memory-limit-mb and go to disk there: give "
            "TMPDIR room for about twice the topic's records times 100 bytes, or raise "
            "--memory-limit-mb",
        )
