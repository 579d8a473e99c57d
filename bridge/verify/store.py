"""Where the fold of `bridge.verify.state` keeps its per-key states: a dict while they fit
a memory budget, an SQLite file beyond it.

A key's state (`Kept`, about 340 bytes per key in a dict for a 6-column table) is small,
but a table of 100M keys would need some 34 GB of it. `KeyStore` holds the states in a
dict until their estimated size passes the budget (`--memory-limit-mb`), then moves them
into a private SQLite database in a temporary directory (`TMPDIR`) and keeps the dict as
a write buffer, flushed in key order whenever it passes half the budget; SQLite's page
cache takes a quarter. The fold itself (`TopicState`) is the same in both storages: it
only calls `get`, `put` and `drop_older`.

Why SQLite and not sorted spill runs merged by key: the fold reads a key's previous
state at random (a delete keeps the columns a later key change's create may carry, an
unsent TOASTed value comes from the key's own or the old key's state), and with runs every
such read would search every run; SQLite's B-tree answers it in one look-up, is in the
standard library, and its file is the store without a merge step. The disk costs only
where the dict would not fit: a table within the budget never touches it.

The comparison (`bridge.verify.compare`) takes each batch of PostgreSQL's rows' states
out with `claim` (one `DELETE ... RETURNING` per batch on disk), so what is left at the
end are the keys PostgreSQL does not have.

The file is ordered by key, and PostgreSQL's rows (and an initial snapshot's records)
come in the table's key order: where the two orders agree, flushes append and each claim
reads the pages the previous one left off at, instead of a random page per key once the
file outgrows the page cache. The Avro body of a key does not sort like the key (a
zigzag varint), so the most common key, one integer column, is stored as 8 big-endian
bytes that do; any other key as its body (correct all the same, only with less locality).
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import tempfile
import weakref
from collections.abc import Callable, Iterator, Sequence
from typing import Final, NamedTuple

from bridge.encode.avro import long_bytes
from bridge.errors import VerifyError

# `Kept.columns` starts with a digest of the whole row's Avro body in the table's current
# schema (NO_ROW when unknown: a row completed by carried TOAST values, or written with
# another schema version). PostgreSQL's row, encoded by the bridge, is compared with it
# first: equal bytes, equal row, with no decoding (`bridge.verify.compare`).
ROW_DIGEST: Final = 8

MB: Final = 1 << 20
# The budget for the per-key states when nothing else is said: a quarter of an 8 GB pod
# with 2 cores, leaving room for Python's allocator slack over the estimate, librdkafka's
# fetch queues, SQLite's page cache and PostgreSQL's fetched rows.
DEFAULT_MEMORY_LIMIT: Final = 2048 * MB
# What a dict entry and its `Kept` cost besides the bytes of the key and columns (CPython
# 3.11, 64-bit: the dict slot, the tuple, the LSN int and three bytes objects' headers),
# so that `bench/verify.py`'s measured 340 bytes per key of a 6-column table come out.
ENTRY_OVERHEAD: Final = 271
_CLAIM: Final = 500  # keys per DELETE ... RETURNING (SQLite's parameter limit is 32766)
_COLUMNS: Final = "lsn, deleted, columns, partition, raw_key"


class Kept(NamedTuple):
    """A key's state: the LSN of its newest change, whether that was a delete, its row
    digest and column digests joined, and where its records live (partition, framed key)
    for repairs."""

    lsn: int
    deleted: bool
    columns: bytes
    partition: int
    raw_key: bytes

    @property
    def digests(self) -> bytes:
        """The column digests (`columns` without the row digest)."""
        return self.columns[ROW_DIGEST:]


def entry_size(name: bytes, kept: Kept) -> int:
    """The estimated bytes a key and its state take in the dict."""
    return ENTRY_OVERHEAD + len(name) + len(kept.columns) + len(kept.raw_key)


def _kept(lsn: int, deleted: int, columns: bytes, partition: int, raw_key: bytes) -> Kept:
    """A state as SQLite returns it (`deleted` an integer)."""
    return Kept(lsn, bool(deleted), columns, partition, raw_key)


_OFFSET: Final = 1 << 63


def ordered_long(body: bytes) -> bytes:
    """The Avro body of one int or long (a zigzag varint) as 8 bytes that sort like the
    number."""
    zigzag = shift = 0
    for byte in body:
        zigzag |= (byte & 0x7F) << shift
        shift += 7
    return (((zigzag >> 1) ^ -(zigzag & 1)) + _OFFSET).to_bytes(8, "big")


def long_body(ordered: bytes) -> bytes:
    """`ordered_long`'s inverse."""
    return long_bytes(int.from_bytes(ordered, "big") - _OFFSET)


def _same(body: bytes) -> bytes:
    return body


def _remove(db: sqlite3.Connection, directory: str) -> None:
    db.close()
    shutil.rmtree(directory, ignore_errors=True)


class KeyStore:
    """Per-key `Kept` states by the key's Avro body: a dict within `limit` bytes (the
    estimate of `entry_size`), an SQLite file with the dict as its write buffer beyond
    (see the module docstring). `directory`: where the file goes (default: `TMPDIR`);
    `integer_key`: every key body is one Avro int or long (stored in numeric order)."""

    def __init__(
        self,
        limit: int = DEFAULT_MEMORY_LIMIT,
        directory: str | None = None,
        *,
        integer_key: bool = False,
    ) -> None:
        self.limit = limit
        self._directory = directory
        # key body -> the file's key, and back
        self._order: Callable[[bytes], bytes] = ordered_long if integer_key else _same
        self._body: Callable[[bytes], bytes] = long_body if integer_key else _same
        self._keys: dict[bytes, Kept] = {}
        self._size = 0  # estimated bytes of `_keys`
        self._db: sqlite3.Connection | None = None
        self._finalizer: weakref.finalize[[sqlite3.Connection, str], KeyStore] | None = None

    @property
    def on_disk(self) -> bool:
        return self._db is not None

    def get(self, name: bytes) -> Kept | None:
        found = self._keys.get(name)
        if found is not None or self._db is None:
            return found
        query = f"SELECT {_COLUMNS} FROM keys WHERE key = ?"
        row = self._db.execute(query, (self._order(name),)).fetchone()
        return None if row is None else _kept(*row)

    def __contains__(self, name: bytes) -> bool:
        return self.get(name) is not None

    def put(self, name: bytes, kept: Kept) -> None:
        old = self._keys.get(name)
        self._keys[name] = kept
        self._size += entry_size(name, kept) - (0 if old is None else entry_size(name, old))
        if self._db is not None:
            if self._size > self.limit // 2:
                self._flush()
        elif self._size > self.limit:
            self._spill()

    def drop_older(self, lsn: int) -> None:
        """Remove every key whose newest change is older than `lsn` (a TRUNCATE)."""
        self._keys = {k: s for k, s in self._keys.items() if s.lsn >= lsn}
        self._size = sum(entry_size(k, s) for k, s in self._keys.items())
        if self._db is not None:
            self._db.execute("DELETE FROM keys WHERE lsn < ?", (lsn,))

    def live_count(self) -> int:
        """How many keys are alive (their newest change is not a delete)."""
        if self._db is None:
            return sum(not s.deleted for s in self._keys.values())
        self._flush()
        (count,) = self._db.execute("SELECT count(*) FROM keys WHERE deleted = 0").fetchone()
        return int(count)

    def claim(self, names: Sequence[bytes]) -> dict[bytes, Kept]:
        """Take the states of `names` out of the store (deleted ones too): those it has."""
        if self._db is None:
            pop = self._keys.pop
            found = {n: k for n in names if (k := pop(n, None)) is not None}
            self._size -= sum(entry_size(n, k) for n, k in found.items())
            return found
        self._flush()
        out: dict[bytes, Kept] = {}
        order = self._order
        for at in range(0, len(names), _CLAIM):
            part = {order(n): n for n in names[at : at + _CLAIM]}
            marks = ",".join("?" * len(part))
            query = f"DELETE FROM keys WHERE key IN ({marks}) RETURNING key, {_COLUMNS}"
            for key, *state in self._db.execute(query, list(part)):
                out[part[key]] = _kept(*state)
        return out

    def items(self) -> Iterator[tuple[bytes, Kept]]:
        """Every key and its state (deleted ones too), in no particular order."""
        if self._db is None:
            yield from self._keys.items()
            return
        self._flush()
        body = self._body
        for key, *state in self._db.execute(f"SELECT key, {_COLUMNS} FROM keys"):
            yield body(key), _kept(*state)

    def close(self) -> None:
        """Remove the SQLite file, if there is one (also done when the store is collected)."""
        if self._finalizer is not None:
            self._finalizer()

    def _spill(self) -> None:
        """From now on on disk: the dict's states go to a new SQLite file."""
        try:
            directory = tempfile.mkdtemp(prefix="bridge-verify-", dir=self._directory)
            # one thread uses it; the finalizer may run in another (a collection there)
            db = sqlite3.connect(
                os.path.join(directory, "keys.sqlite3"),
                isolation_level=None,
                check_same_thread=False,
            )
            self._finalizer = weakref.finalize(self, _remove, db, directory)
            # a scratch file: nothing to recover after a crash, no journal, no fsync
            db.execute("PRAGMA journal_mode = OFF")
            db.execute("PRAGMA synchronous = OFF")
            db.execute("PRAGMA locking_mode = EXCLUSIVE")
            db.execute(f"PRAGMA cache_size = -{max(self.limit // 4 // 1024, 1024)}")
            db.execute(
                "CREATE TABLE keys (key BLOB PRIMARY KEY, lsn INTEGER NOT NULL, deleted INTEGER"
                " NOT NULL, columns BLOB NOT NULL, partition INTEGER NOT NULL, raw_key BLOB NOT"
                " NULL) WITHOUT ROWID"
            )
        except (OSError, sqlite3.Error) as exc:
            raise self._no_room(exc) from None
        self._db = db
        self._flush()

    def _flush(self) -> None:
        """The write buffer into the file, in key order (B-tree pages filled in sequence)."""
        if not self._keys or self._db is None:
            return
        keys, order = self._keys, self._order
        rows = (
            (key, s.lsn, int(s.deleted), s.columns, s.partition, s.raw_key)
            for key, name in sorted((order(n), n) for n in keys)
            for s in (keys[name],)
        )
        try:
            self._db.execute("BEGIN")
            self._db.executemany("INSERT OR REPLACE INTO keys VALUES (?, ?, ?, ?, ?, ?)", rows)
            self._db.execute("COMMIT")
        except sqlite3.Error as exc:  # the file grows only here: a full disk shows here
            raise self._no_room(exc) from None
        self._keys = {}
        self._size = 0

    def _no_room(self, exc: Exception) -> VerifyError:
        where = self._directory or tempfile.gettempdir()
        return VerifyError(
            f"verify's key store under {where} failed: {exc}",
            hint="the topic's key states passed --memory-limit-mb and go to disk there: give "
            "TMPDIR room for about 100 bytes per key, or raise --memory-limit-mb",
        )
