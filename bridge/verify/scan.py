"""Per record verify reads: an envelope's bytes scanned in place, reduced to one fixed-width
entry; and the fold of those entries into a key's state. Compiled with mypyc
(setup.py): this runs once per topic record and once per PostgreSQL row.

Nothing is decoded into Python objects. `EnvelopeScan` walks a record written with the
table's current envelope schema field by field (`skip` over a tree of `Node`s built once
per schema), reading only what the fold needs: the `after` row's extent and each of its
columns' extent, `source.commit_lsn` (or `source.lsn`), `op`, whether a `before` image is
there, and the names in `unchanged_fields`. Each column, and the whole row, becomes a
digest of its Avro bytes (Avro's binary encoding of a value is unique, so equal bytes are
equal values and the bridge's encoder writes PostgreSQL's rows in the same bytes):
Python's `hash` of the bytes, salted per process, so digests are compared only within
the process that made them (the disk files of `bridge.verify.store` included), never
kept.

An entry (`entry`): the key's identity `ident` (16 bytes) and the rest, `REST` followed
by the column digests:

    lsn (8) | flags (1) | row digest (8) | partition (4) | offset (8) | key schema id (4)

`ident` is the key's Avro body itself when it has at most 15 bytes (a length byte, the
body, zeros: every integer key, and short text ones), else a 15-byte BLAKE2b of it
behind a 0xFF byte: equal keys, equal identities, and an exact one can be turned back
into the key (`body_of`).
"""

from __future__ import annotations

import hashlib
import struct
from typing import Any, Final

import fastavro.schema

from bridge.errors import SchemaError

# Node kinds
NULL: Final = 0
BOOLEAN: Final = 1
VARINT: Final = 2  # int, long, enum
FLOAT: Final = 3
DOUBLE: Final = 4
BYTES: Final = 5  # bytes, string
FIXED: Final = 6
ARRAY: Final = 7
MAP: Final = 8
UNION: Final = 9
RECORD: Final = 10

_KINDS: Final = {
    "null": NULL,
    "boolean": BOOLEAN,
    "int": VARINT,
    "long": VARINT,
    "enum": VARINT,
    "float": FLOAT,
    "double": DOUBLE,
    "bytes": BYTES,
    "string": BYTES,
    "fixed": FIXED,
    "array": ARRAY,
    "map": MAP,
    "record": RECORD,
}

# entry flags
DELETED: Final = 1
CARRY: Final = 2  # some column digests are UNSENT: the key's previous state fills them
MOVED: Final = 4  # with CARRY: the previous state is the old key's (a COPY entry before it)
NO_ROW: Final = 8  # no row digest: compared column by column
TRUNCATE: Final = 16  # not a key's entry: a TRUNCATE at `lsn`
COPY: Final = 32  # not a key's change: the next entry (MOVED) carries from this key
RESCANNED: Final = 64  # the key was written with another key schema: its bytes are not ours

IDENT: Final = 16
_REST: Final = struct.Struct("<qBqiqi")
REST: Final = _REST.size  # 33
LSN_AT: Final = 0
FLAGS_AT: Final = 8
ROW_AT: Final = 9
COLUMNS_AT: Final = REST
DIGEST: Final = 8
_DIGEST: Final = struct.Struct("<q")
UNSENT: Final = _DIGEST.pack(-1)  # `hash` never returns -1
_ZEROS: Final = bytes(IDENT)
_LONG_KEY: Final = b"\xff"


class Node:
    """One Avro type, as `skip` walks it: its kind, a fixed's size, and its children
    (a record's fields, a union's branches, an array's items or a map's values)."""

    def __init__(self, kind: int, size: int, children: list[Node]) -> None:
        self.kind = kind
        self.size = size
        self.children = children


def build(schema: Any) -> Node:
    """The `Node` tree of a schema whose named types are expanded (`expanded`)."""
    if isinstance(schema, list):
        return Node(UNION, 0, [build(s) for s in schema])
    if isinstance(schema, str):
        return Node(_kind(schema), 0, [])
    kind = schema["type"]
    if not isinstance(kind, str):
        return build(kind)
    code = _kind(kind)
    if code == RECORD:
        return Node(RECORD, 0, [build(f["type"]) for f in schema["fields"]])
    if code == ARRAY:
        return Node(ARRAY, 0, [build(schema["items"])])
    if code == MAP:
        return Node(MAP, 0, [build(schema["values"])])
    return Node(code, int(schema.get("size", 0)), [])


def _kind(name: str) -> int:
    found = _KINDS.get(name)
    if found is None:
        raise SchemaError(f"Avro type {name!r} not known to verify", hint="not a bridge topic?")
    return found


def expanded(schema: Any) -> Any:
    """`schema` with every named type's reference replaced by its definition."""
    return fastavro.schema.expand_schema(schema)


def read_long(data: bytes, pos: int) -> tuple[int, int]:
    """The Avro long (zigzag varint) at `pos`, and the position after it."""
    byte = data[pos]
    pos += 1
    n = byte & 0x7F
    shift = 7
    while byte & 0x80:
        byte = data[pos]
        pos += 1
        n |= (byte & 0x7F) << shift
        shift += 7
    return (n >> 1) ^ -(n & 1), pos


def skip(data: bytes, pos: int, node: Node) -> int:  # noqa: C901 (one branch per type)
    """The position after the value of type `node` at `pos`."""
    kind = node.kind
    if kind == VARINT:
        while data[pos] & 0x80:
            pos += 1
        return pos + 1
    if kind == BYTES:
        size, pos = read_long(data, pos)
        if size < 0:
            raise IndexError(pos)
        return pos + size
    if kind == UNION:
        branch, pos = read_long(data, pos)
        return skip(data, pos, node.children[branch])
    if kind == RECORD:
        for field in node.children:
            pos = skip(data, pos, field)
        return pos
    if kind == NULL:
        return pos
    if kind == BOOLEAN:
        return pos + 1
    if kind == FLOAT:
        return pos + 4
    if kind == DOUBLE:
        return pos + 8
    if kind == FIXED:
        return pos + node.size
    return _blocks(data, pos, node)


def _blocks(data: bytes, pos: int, node: Node) -> int:
    """Past an array's or map's blocks of items (a negative count is followed by the
    block's size in bytes)."""
    kind = node.kind
    item = node.children[0]
    while True:
        count, pos = read_long(data, pos)
        if count == 0:
            return pos
        if count < 0:
            size, pos = read_long(data, pos)
            pos += size
            continue
        for _ in range(count):
            if kind == MAP:
                size, pos = read_long(data, pos)
                pos += size
            pos = skip(data, pos, item)


def digest(data: bytes) -> bytes:
    """8 bytes standing for a value's (or a row's) Avro bytes (never UNSENT)."""
    return _DIGEST.pack(hash(data))


def ident(body: bytes) -> bytes:
    """A key's identity (module docstring) from its Avro body in the current key schema."""
    size = len(body)
    if size < IDENT:
        return bytes((size,)) + body + _ZEROS[size + 1 :]
    return _LONG_KEY + hashlib.blake2b(body, digest_size=IDENT - 1).digest()


def body_of(key: bytes) -> bytes | None:
    """The Avro body an exact identity stands for (None for a hashed one)."""
    size = key[0]
    return None if size == 0xFF else key[1 : 1 + size]


# envelope field roles
_OTHER: Final = 0
_BEFORE: Final = 1
_AFTER: Final = 2
_SOURCE: Final = 3
_OP: Final = 4
_UNCHANGED: Final = 5
_ROLES: Final = {
    "before": _BEFORE,
    "after": _AFTER,
    "source": _SOURCE,
    "op": _OP,
    "unchanged_fields": _UNCHANGED,
}


class RowScan:
    """A row record's column digests, and its extent (PostgreSQL's row bodies, and the
    `after` of an envelope)."""

    def __init__(self, row: Node, names: list[str]) -> None:
        self.columns = row.children
        self.names = names
        self.index = {name: i for i, name in enumerate(names)}
        self.width = len(names) * DIGEST
        # a null column's digest: its union's null branch (["null", T] or [T, "null"])
        nulls = []
        for column in row.children:
            tag = 0
            if column.kind == UNION:
                for i, branch in enumerate(column.children):
                    if branch.kind == NULL:
                        tag = i
            nulls.append(digest(bytes((tag * 2,))))
        self.nulls = b"".join(nulls)

    def digests(self, data: bytes, pos: int, parts: list[bytes]) -> int:
        """Appends each column's digest to `parts`; returns the row's end."""
        for column in self.columns:
            start = pos
            pos = skip(data, pos, column)
            parts.append(_DIGEST.pack(hash(data[start:pos])))
        return pos


class EnvelopeScan:
    """One envelope schema's records scanned (module docstring). After `scan`: `op` (its
    first letter's code), `lsn`, `before`, the row's extent `row_start`..`row_end` (-1
    without an `after`), its column digests `parts`, the `unchanged` column names."""

    def __init__(self, envelope: Any, names: list[str]) -> None:
        schema = expanded(envelope)
        fields = schema["fields"]
        self.roles = [_ROLES.get(f["name"], _OTHER) for f in fields]
        self.nodes = [build(f["type"]) for f in fields]
        self.row_branch = -1
        after = self.nodes[self.roles.index(_AFTER)] if _AFTER in self.roles else None
        if after is None or after.kind != UNION:
            raise SchemaError("envelope schema without an after union", hint="not a bridge topic?")
        row: Node | None = None
        for i, branch in enumerate(after.children):
            if branch.kind == RECORD:
                self.row_branch, row = i, branch
        if row is None:
            raise SchemaError("envelope schema without a row record", hint="not a bridge topic?")
        self.row = RowScan(row, names)
        source = schema["fields"][self.roles.index(_SOURCE)]["type"]
        names_in_source = [f["name"] for f in source["fields"]]
        self.source_lsn = names_in_source.index("lsn") if "lsn" in names_in_source else -1
        self.source_commit = (
            names_in_source.index("commit_lsn") if "commit_lsn" in names_in_source else -1
        )
        self.op = 0
        self.lsn = 0
        self.before = False
        self.row_start = -1
        self.row_end = -1
        self.parts: list[bytes] = []
        self.unchanged: list[str] = []
        self._commit = -1
        self._change = -1

    def scan(self, data: bytes) -> None:
        """Scan one record (its 5-byte Confluent header first); IndexError or ValueError
        when the bytes do not fit the schema."""
        pos = 5
        self.before = False
        self.row_start = self.row_end = -1
        self.parts = []
        self.unchanged = []
        self.op = 0
        self._commit = self._change = -1
        roles = self.roles
        nodes = self.nodes
        for i in range(len(roles)):
            role = roles[i]
            node = nodes[i]
            if role == _OTHER:
                pos = skip(data, pos, node)
            elif role == _AFTER:
                branch, pos = read_long(data, pos)
                if branch == self.row_branch:
                    self.row_start = pos
                    pos = self.row.digests(data, pos, self.parts)
                    self.row_end = pos
                else:
                    pos = skip(data, pos, node.children[branch])
            elif role == _BEFORE:
                branch, pos = read_long(data, pos)
                self.before = node.children[branch].kind != NULL
                pos = skip(data, pos, node.children[branch])
            elif role == _SOURCE:
                pos = self._source(data, pos, node)
            elif role == _OP:
                size, pos = read_long(data, pos)
                self.op = data[pos] if size > 0 else 0
                pos += size
            else:  # _UNCHANGED: ["null", array of string]
                branch, pos = read_long(data, pos)
                if node.children[branch].kind == ARRAY:
                    pos = self._names(data, pos)
        if pos != len(data):
            raise ValueError(pos)
        commit, change = self._commit, self._change
        self.lsn = commit if commit >= 0 else (change if change >= 0 else 0)

    def _source(self, data: bytes, pos: int, node: Node) -> int:
        """Past the source block, its commit LSN and change LSN kept (-1 when null)."""
        fields = node.children
        for j in range(len(fields)):
            if j not in (self.source_commit, self.source_lsn):
                pos = skip(data, pos, fields[j])
                continue
            branch, pos = read_long(data, pos)
            if fields[j].children[branch].kind == NULL:
                continue
            value, pos = read_long(data, pos)
            if j == self.source_commit:
                self._commit = value
            else:
                self._change = value
        return pos

    def _names(self, data: bytes, pos: int) -> int:
        while True:
            count, pos = read_long(data, pos)
            if count == 0:
                return pos
            if count < 0:
                count = -count
                _, pos = read_long(data, pos)
            for _ in range(count):
                size, pos = read_long(data, pos)
                self.unchanged.append(data[pos : pos + size].decode())
                pos += size


def lsn_of(state: bytes) -> int:
    return int.from_bytes(state[LSN_AT : LSN_AT + 8], "little", signed=True)


def flags_of(state: bytes) -> int:
    return state[FLAGS_AT]


def where_of(state: bytes) -> tuple[int, int, int]:
    """(partition, offset, key schema id) of an entry's record."""
    _, _, _, partition, offset, key_id = _REST.unpack_from(state)
    return partition, offset, key_id


class Fold:
    """States by key identity, folded from entries in the topic's order by the rules of
    `bridge.verify.state` (a delete keeps its columns, unsent values come from the key's
    previous state or a moved key's, a TRUNCATE drops older keys and later-read older
    changes). `nulls`: the column digests of an all-null row."""

    def __init__(self, nulls: bytes) -> None:
        self.states: dict[bytes, bytes] = {}
        self.nulls = nulls
        self.truncated = 0
        self._base: bytes | None = None  # a COPY entry's state, for the MOVED entry after it

    def add(self, key: bytes, state: bytes) -> None:
        flags = state[FLAGS_AT]
        lsn = int.from_bytes(state[LSN_AT : LSN_AT + 8], "little", signed=True)
        if flags & TRUNCATE:
            if lsn > self.truncated:
                self.truncated = lsn
                self.states = {
                    k: s
                    for k, s in self.states.items()
                    if int.from_bytes(s[LSN_AT : LSN_AT + 8], "little", signed=True) >= lsn
                }
            return
        if lsn < self.truncated:
            return
        if flags & COPY:
            self._base = self.states.get(key)
            return
        if flags & DELETED:
            old = self.states.get(key)
            columns = self.nulls if old is None else old[COLUMNS_AT:]
            self.states[key] = state[:COLUMNS_AT] + columns
            return
        if flags & CARRY:
            base = self._base if flags & MOVED else self.states.get(key)
            self._base = None
            state = _carried(state, base, self.nulls)
        self.states[key] = state


def _carried(state: bytes, base: bytes | None, nulls: bytes) -> bytes:
    """`state` with its UNSENT digests taken from `base` (null without one) and no row
    digest."""
    parts = [state[:FLAGS_AT], bytes(((state[FLAGS_AT] | NO_ROW) & ~(CARRY | MOVED),))]
    parts.append(state[FLAGS_AT + 1 : COLUMNS_AT])
    for at in range(COLUMNS_AT, len(state), DIGEST):
        found = state[at : at + DIGEST]
        if found == UNSENT:
            i = at - COLUMNS_AT
            found = nulls[i : i + DIGEST] if base is None else base[at : at + DIGEST]
        parts.append(found)
    return b"".join(parts)


# what `Entries.entry` made of a record
ENTRY: Final = 0  # an entry: `key`, `state`
CHECK_MOVED: Final = 1  # an entry, a create with unsent values: is it a key change (header)?
LATER: Final = 2  # committed at or after the point: left out
NO_KEY: Final = 3  # a change without a key: nothing to fold
OTHER_SCHEMA: Final = 4  # the value's schema is not known as current or not: ask
OTHER_KEY: Final = 5  # the key's schema is not known as current or not: ask
BAD: Final = 6  # not Confluent-framed Avro of this table


class Entries:
    """Topic records to entries (module docstring), committed before `point`.

    `values` and `keys`: schema id -> whether it is the table's current value (envelope)
    or key schema, filled by the caller when `entry` asks (OTHER_SCHEMA, OTHER_KEY);
    a record of another value schema is given again re-encoded in the current one
    (`flags` NO_ROW), a key of another key schema with its identity (`key_ident`)."""

    def __init__(self, scan: EnvelopeScan, point: int) -> None:
        self.scan = scan
        self.point = point
        self.values: dict[int, bool] = {}
        self.keys: dict[int, bool] = {}
        self.key = b""
        self.state = b""
        self.lsn = 0
        self.op = 0

    def entry(
        self,
        key: bytes | None,
        value: bytes,
        partition: int,
        offset: int,
        flags: int = 0,
        key_ident: bytes | None = None,
    ) -> int:
        """What the record `value` (keyed `key`, at `offset` of `partition`) is: ENTRY or
        CHECK_MOVED with `key` and `state` set, or why there is none."""
        framed = len(value) >= 5 and value[0] == 0
        if not framed:
            return BAD
        if not flags & NO_ROW and not self.values.get(int.from_bytes(value[1:5], "big"), False):
            return OTHER_SCHEMA
        scan = self.scan
        try:
            scan.scan(value)
        except (IndexError, ValueError):
            return BAD
        op = scan.op
        lsn = scan.lsn
        self.lsn = lsn
        self.op = op
        if (lsn > self.point) if op == 114 else (lsn >= self.point):  # "r": the snapshot's LSN
            return LATER
        if op == 116:  # "t"
            self.key = b""
            self.state = _REST.pack(lsn, TRUNCATE, 0, partition, offset, 0) + scan.row.nulls
            return ENTRY
        if key is None:
            return NO_KEY
        key_id = 0
        if key_ident is not None:
            self.key = key_ident
            flags |= RESCANNED
        else:
            key_id = self._key_id(key)
            if key_id < 0:
                return BAD if key_id == -1 else OTHER_KEY
            self.key = ident(key[5:])
        return self._change(value, lsn, flags, partition, offset, key_id)

    def _change(
        self, value: bytes, lsn: int, flags: int, partition: int, offset: int, key_id: int
    ) -> int:
        """`state` of a keyed change (`entry`)."""
        scan = self.scan
        row = scan.row
        op = scan.op
        if op == 100:  # "d"
            self.state = _REST.pack(lsn, flags | DELETED, 0, partition, offset, key_id) + row.nulls
            return ENTRY
        if scan.row_start < 0:
            return BAD  # a change without a row, and not a delete
        parts = scan.parts
        found = 0
        if scan.unchanged:
            flags |= CARRY | NO_ROW
            for name in scan.unchanged:
                at = row.index.get(name)
                if at is not None:
                    parts[at] = UNSENT
        elif not flags & NO_ROW:
            found = hash(value[scan.row_start : scan.row_end])
        self.state = _REST.pack(lsn, flags, found, partition, offset, key_id) + b"".join(parts)
        # a create with unsent values carries from the old key when it is a key change's
        return CHECK_MOVED if flags & CARRY and op == 99 else ENTRY

    def _key_id(self, key: bytes) -> int:
        """The key's schema id when it is the current key schema; -1 for a key that is
        not Confluent-framed, -2 for another schema (or one not known yet)."""
        if len(key) < 5 or key[0] != 0:
            return -1
        found = int.from_bytes(key[1:5], "big")
        return found if self.keys.get(found, False) else -2


def copy_entry(state: bytes) -> bytes:
    """A COPY entry of the old key, for the MOVED `state` after it (same lsn)."""
    return state[:FLAGS_AT] + bytes((COPY,)) + state[FLAGS_AT + 1 :]


def moved(state: bytes) -> bytes:
    """`state` (a create carrying unsent values) as a key change's: from the COPY before."""
    return state[:FLAGS_AT] + bytes((state[FLAGS_AT] | MOVED,)) + state[FLAGS_AT + 1 :]


def fold_chunk(fold: Fold, chunk: bytes, width: int) -> None:
    """Every entry of `chunk` (identity + state, `width` bytes each) into `fold`."""
    for at in range(0, len(chunk), width):
        fold.add(chunk[at : at + IDENT], chunk[at + IDENT : at + width])


def settled(state: bytes | None, row: int) -> bool:
    """Whether a key's topic state holds a row whose digest is `row` (alive, whole)."""
    return (
        state is not None
        and not state[FLAGS_AT] & (DELETED | NO_ROW)
        and int.from_bytes(state[ROW_AT : ROW_AT + 8], "little", signed=True) == row
    )


def live(state: bytes) -> bool:
    return not state[FLAGS_AT] & DELETED


# PostgreSQL's rows, compared with the states: a row's entry is its row digest, its row
# number, where its key texts are and their size (bridge.verify.store.PG_FIXED), then its
# column digests
_ROW: Final = struct.Struct("<qqqi")
ROW_COLUMNS_AT: Final = _ROW.size
_KIND_NULL: Final = 110  # bridge.decode.messages.KIND_NULL: "n"
_KIND_TEXT: Final = 116  # KIND_TEXT: "t"
# (row number, key body, key texts, row body or the row's column digests, the topic's
# state) of a row its row digest did not settle
Unsettled = tuple[int, bytes, tuple[bytes, ...], bytes, bytes | None]


def kinds(row: tuple[bytes | None, ...], all_text: bytes) -> bytes:
    """The tuple kinds of a row read as raw text (`all_text`: KIND_TEXT per column)."""
    if None not in row:
        return all_text
    return bytes(_KIND_NULL if v is None else _KIND_TEXT for v in row)


def settle_rows(
    states: dict[bytes, bytes],
    rows: list[tuple[bytes | None, ...]],
    bodies: Any,
    all_text: bytes,
    key_at: list[int],
    first: int,
    unsettled: list[Unsettled],
) -> int:
    """Take each row's state out of `states`; returns how many rows the row digest settled
    as equal, the others go to `unsettled` (with their row body). `bodies`: the
    encoder's `row_bodies`; `key_at`: the key columns' positions; `first`: the first
    row's number."""
    equal = 0
    number = first
    for row in rows:
        key, body = bodies(kinds(row, all_text), row)
        state = states.pop(ident(key), None)
        if settled(state, hash(body)):
            equal += 1
        else:
            texts = tuple([_text(row[i]) for i in key_at])
            unsettled.append((number, key, texts, body, state))
        number += 1
    return equal


def spill_rows(
    store: Any,
    rows: list[tuple[bytes | None, ...]],
    bodies: Any,
    all_text: bytes,
    key_at: list[int],
    first: int,
    row_scan: RowScan,
) -> None:
    """Each row's entry and key texts into `store` (`bridge.verify.store.KeyStore.add_row`,
    `add_texts`), for the partitions' comparison."""
    number = first
    for row in rows:
        key, body = bodies(kinds(row, all_text), row)
        parts = [b""]
        row_scan.digests(body, 0, parts)
        texts = [len(key).to_bytes(4, "little"), key]
        for i in key_at:
            value = _text(row[i])
            texts.append(len(value).to_bytes(4, "little"))
            texts.append(value)
        packed = b"".join(texts)
        at = store.add_texts(packed)
        parts[0] = _ROW.pack(hash(body), number, at, len(packed))
        store.add_row(ident(key), b"".join(parts))
        number += 1


def settle_chunk(
    states: dict[bytes, bytes], chunk: bytes, width: int, unsettled: list[Unsettled]
) -> int:
    """`settle_rows` for a chunk of spilled rows (`spill_rows`): the unsettled ones with
    their column digests and no key body or texts (read from the store by the caller
    through `row_texts`)."""
    equal = 0
    for at in range(0, len(chunk), width):
        key = chunk[at : at + IDENT]
        found, number, texts_at, size = _ROW.unpack_from(chunk, at + IDENT)
        state = states.pop(key, None)
        if settled(state, found):
            equal += 1
        else:
            where = (texts_at.to_bytes(8, "little") + size.to_bytes(4, "little"),)
            columns = chunk[at + IDENT + ROW_COLUMNS_AT : at + width]
            unsettled.append((number, b"", where, columns, state))
    return equal


def row_texts(packed: bytes) -> tuple[bytes, tuple[bytes, ...]]:
    """(key body, key texts) of a row's key texts as `spill_rows` packed them."""
    parts = []
    at = 0
    while at < len(packed):
        size = int.from_bytes(packed[at : at + 4], "little")
        parts.append(packed[at + 4 : at + 4 + size])
        at += 4 + size
    return parts[0], tuple(parts[1:])


def _text(value: bytes | None) -> bytes:
    if value is None:
        raise ValueError("a key column is null")  # key columns are NOT NULL
    return value
