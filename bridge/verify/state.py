"""What a key-based consumer holds after reading a topic: per key, a digest of each column.

Both sides of a verification are brought to one form here. A topic record's `after` row
and a row read from PostgreSQL (encoded by the bridge's own encoder, in the table's
current schema) are reduced to a digest of the whole row's Avro bytes and one of each
column's (`bridge.verify.scan`, compiled: the records are scanned in place, never decoded
into Python objects). Avro's binary encoding of a value is unique, so equal bytes are an
equal value; logical types play no part (a +infinity timestamp or a NaN decimal compares
as its wire bytes). A record written with another version of the schema is decoded
with fastavro from its registered writer schema into the current one and encoded again
in it (`Decoder.reencoded`): its columns compare as the current schema writes them, and
it has no row digest (the comparison goes column by column). Nothing reads a source or
envelope field by position, so fields added to the envelope or source block change
nothing here.

The fold follows `bridge.spark.apply` (a key-based consumer's rules):
- the newest change per key wins; a delete removes the key (its column digests are kept
  aside, as the apply's soft delete keeps the row, for a later key change's create);
- a column listed in `unchanged_fields` (an unsent TOASTed value) keeps the key's previous
  value; on the create of a primary-key change (the `__debezium.oldkey` header) it comes
  from the old key's row; with neither it is null, as in the apply;
- a TRUNCATE removes every key last written before it, and later-read changes older than
  it are dropped (they may come from another partition);
- tombstones change nothing: the delete before each one already did.

The states live in a `bridge.verify.store.KeyStore`, in memory or spilled to files in
hash partitions when they would pass the memory budget; the fold (`scan.Fold`) is the
same for both.

Records of transactions committed at or after the verification point are left out: a
streamed change by its commit LSN (`source.commit_lsn`, or `source.lsn` where the source
block has no commit LSN), a snapshot read (op "r") by its snapshot's LSN, which sees what
committed before it.
"""

from __future__ import annotations

import io
import json
import struct
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any, Final, NamedTuple

import fastavro

from bridge.errors import SchemaError
from bridge.verify import scan
from bridge.verify.store import DEFAULT_MEMORY_LIMIT, Kept, KeyStore

OLD_KEY_HEADER: Final = "__debezium.oldkey"
_HEADER: Final = struct.Struct(">bI")
_NOT_OURS: Final = "verify reads only topics the bridge writes; remove the foreign record"


def raw_schema(schema: Any) -> Any:
    """`schema` without logicalType annotations: every value decodes as its wire value."""
    if isinstance(schema, dict):
        return {k: raw_schema(v) for k, v in schema.items() if k != "logicalType"}
    if isinstance(schema, list):
        return [raw_schema(s) for s in schema]
    return schema


def row_fields(envelope_schema: Mapping[str, Any]) -> tuple[str, ...]:
    """Names of the row fields of an envelope schema (the row record `before` defines and
    `after` names)."""
    for field in envelope_schema["fields"]:
        if field["name"] in ("before", "after"):
            branches = field["type"] if isinstance(field["type"], list) else [field["type"]]
            for branch in branches:
                if isinstance(branch, dict) and branch.get("type") == "record":
                    return tuple(f["name"] for f in branch["fields"])
    raise SchemaError("envelope schema without a row record", hint="not a bridge topic?")


def schema_id(data: bytes, where: str) -> int:
    if len(data) < _HEADER.size:
        raise SchemaError(f"{where}: record is not Confluent-framed Avro", hint=_NOT_OURS)
    magic, found = _HEADER.unpack_from(data)
    if magic != 0:
        raise SchemaError(f"{where}: record is not Confluent-framed Avro", hint=_NOT_OURS)
    return int(found)


class Decoder:
    """Framed Avro in the table's current key and envelope schemas: keys as the current
    key schema writes them (`key`), records of other schema versions encoded again in the
    current one (`reencoded`), and the scanner of current records (`envelope_scan`).

    `writer` fetches a registered schema's text by id (cached here)."""

    def __init__(
        self,
        key_schema: Mapping[str, Any] | None,
        envelope_schema: Mapping[str, Any],
        writer: Callable[[int], str],
    ) -> None:
        self._key_raw: Any = None if key_schema is None else raw_schema(key_schema)
        self._key_reader: Any = (
            None if self._key_raw is None else fastavro.parse_schema(self._key_raw)
        )
        self._same_key: dict[int, bool] = {}
        self._value_raw = raw_schema(envelope_schema)
        self._value_reader = fastavro.parse_schema(self._value_raw)
        self.fields = row_fields(envelope_schema)
        self._writer = writer
        # schema id -> (parsed writer, reader or None when the same)
        self._plans: dict[tuple[int, bool], tuple[Any, Any]] = {}
        self.envelope_scan = scan.EnvelopeScan(self._value_raw, list(self.fields))
        self.row_scan = self.envelope_scan.row

    def _plan(self, found: int, key: bool) -> tuple[Any, Any]:
        """Schema resolution costs fastavro several times the decoding itself, per record:
        a writer equal to the reader is read without it."""
        raw = raw_schema(json.loads(self._writer(found)))
        current, reader = (
            (self._key_raw, self._key_reader) if key else (self._value_raw, self._value_reader)
        )
        plan = self._plans[found, key] = (
            fastavro.parse_schema(raw),
            None if raw == current else reader,
        )
        return plan

    def _decode(self, data: bytes, reader: Any, where: str) -> dict[str, Any]:
        found = schema_id(data, where)
        key = reader is self._key_reader
        parsed, resolve = self._plans.get((found, key)) or self._plan(found, key)
        try:
            out = fastavro.schemaless_reader(io.BytesIO(data[5:]), parsed, resolve)
        except Exception as exc:  # fastavro raises many types for a body that does not fit
            raise SchemaError(
                f"{where}: cannot decode with schema id {found}: {exc}", hint=_NOT_OURS
            ) from None
        assert isinstance(out, dict)  # both readers are records
        return out

    def current_value(self, found: int) -> bool:
        """Whether value schema `found` is the current envelope schema."""
        _, resolve = self._plans.get((found, False)) or self._plan(found, False)
        return resolve is None

    def current_key(self, found: int) -> bool:
        """Whether key schema `found` is the current key schema."""
        same = self._same_key.get(found)
        if same is None:
            writer = raw_schema(json.loads(self._writer(found)))
            same = self._same_key[found] = writer == self._key_raw
        return same

    def key_fields(self, data: bytes, where: str) -> dict[str, Any]:
        """The key's fields as wire values."""
        if self._key_reader is None:
            raise SchemaError(f"{where}: the table has no key schema", hint="not verifiable")
        return self._decode(data, self._key_reader, where)

    def key(self, data: bytes, where: str) -> bytes:
        """The key's Avro body in the current key schema: equal keys, equal bytes, whatever
        the schema id. A key written with the current schema is used as it is (Avro's
        encoding of a record of scalars is unique); any other is decoded and re-encoded."""
        if self.current_key(schema_id(data, where)):
            return data[_HEADER.size :]
        out = io.BytesIO()
        fastavro.schemaless_writer(out, self._key_reader, self.key_fields(data, where))
        return out.getvalue()

    def show_key(self, body: bytes) -> str:
        """A key from `key` as JSON, for people."""
        assert self._key_reader is not None
        decoded = fastavro.schemaless_reader(io.BytesIO(body), self._key_reader, None)
        return json.dumps(decoded, sort_keys=True, default=_show, ensure_ascii=False)

    def envelope(self, data: bytes, where: str) -> dict[str, Any]:
        return self._decode(data, self._value_reader, where)

    def reencoded(self, data: bytes, where: str) -> bytes:
        """A record of another envelope schema version as the current one writes it (its
        5-byte header kept): decoded into the current schema, then encoded again."""
        out = io.BytesIO()
        out.write(data[:5])
        fastavro.schemaless_writer(out, self._value_reader, self.envelope(data, where))
        return out.getvalue()

    def columns(self, body: bytes) -> bytes:
        """The column digests of a row's Avro body in the current schema."""
        parts: list[bytes] = []
        self.row_scan.digests(body, 0, parts)
        return b"".join(parts)


def _show(value: Any) -> Any:
    return value.hex() if isinstance(value, bytes) else repr(value)


def _header(headers: Iterable[tuple[str, bytes | None]] | None, name: str) -> bytes | None:
    for found, value in headers or ():
        if found == name and value is not None:
            return value
    return None


class Entry(NamedTuple):
    """One record folded: its commit LSN (the order partitions are merged in), its key's
    identity and state (`bridge.verify.scan`), and the old key's identity when the state
    carries values from it (a key change's create)."""

    lsn: int
    key: bytes
    state: bytes
    moved_from: bytes | None


class TopicState:
    """Records folded into per-key states (see the module docstring).

    `expected`: about how many records will be folded (the offsets to read), which decides
    whether the states stay in memory (`bridge.verify.store`); `in_memory`: they do,
    whatever the budget, with each key's framed bytes kept (`get`, `items`: what the lake
    comparison and the repair's check of later changes look up)."""

    def __init__(
        self,
        decoder: Decoder,
        point: int,
        *,
        track_later: bool = False,
        memory_limit: int = DEFAULT_MEMORY_LIMIT,
        expected: int = 0,
        in_memory: bool = False,
        directory: str | None = None,
        topic: str = "",
    ) -> None:
        self.decoder = decoder
        self.point = point
        self.topic = topic  # for errors
        self.entries = scan.Entries(decoder.envelope_scan, point)
        row = decoder.envelope_scan.row
        self.keys = KeyStore(
            memory_limit,
            row.nulls,
            expected=expected,
            in_memory=in_memory or track_later,
            directory=directory,
        )
        # keys changed at or after the point (-> their framed key), which a lake may already
        # show in a newer state (`bridge.verify.lake`); with `track_later` only
        self.later: dict[bytes, bytes] | None = {} if track_later else None
        self._raw: dict[bytes, bytes] | None = {} if (in_memory or track_later) else None
        self.records = 0
        self.after_point = 0  # records left out: committed at or after the point
        self._moved_from: bytes | None = None  # the last entry's old key (a key change)

    @property
    def truncated(self) -> int:
        """The LSN of the newest TRUNCATE folded."""
        return self.keys.truncated

    def entry(
        self,
        partition: int,
        offset: int,
        key: bytes | None,
        value: bytes | None,
        headers: Callable[[], list[tuple[str, bytes | None]] | None],
    ) -> Entry | None:
        """One record (at `offset` of `partition`) as an entry to `put` (None: nothing to
        fold); `headers` reads its headers, for key changes only."""
        if not self._entry(partition, offset, key, value, headers):
            return None
        entries = self.entries
        return Entry(entries.lsn, entries.key, entries.state, self._moved_from)

    def add(
        self,
        partition: int,
        offset: int,
        key: bytes | None,
        value: bytes | None,
        headers: Callable[[], list[tuple[str, bytes | None]] | None],
    ) -> None:
        """`entry` and `put` of one record: a topic of one partition is folded as read."""
        if self._entry(partition, offset, key, value, headers):
            entries = self.entries
            self.keys.put(entries.key, entries.state, self._moved_from)

    def _entry(
        self,
        partition: int,
        offset: int,
        key: bytes | None,
        value: bytes | None,
        headers: Callable[[], list[tuple[str, bytes | None]] | None],
    ) -> bool:
        """Whether the record is an entry (left in `entries.key`, `entries.state` and
        `_moved_from`)."""
        self.records += 1
        if value is None:  # a tombstone: the delete before it did the work
            return False
        entries = self.entries
        status = entries.entry(key, value, partition, offset)
        if status in (scan.OTHER_SCHEMA, scan.OTHER_KEY):
            status = self._other(partition, offset, key, value, status)
        if status == scan.BAD:
            where = self._where(partition, offset)
            schema_id(value, where)  # names a record that is not framed
            raise SchemaError(f"{where}: record does not fit its schema", hint=_NOT_OURS)
        if status == scan.LATER:
            self.after_point += 1
            if self.later is not None and key is not None and entries.op != 116:  # not "t"
                self.later[self.decoder.key(key, self._where(partition, offset))] = key
            return False
        if status == scan.NO_KEY:
            return False
        self._moved_from = None
        if status == scan.CHECK_MOVED:
            old = _header(headers(), OLD_KEY_HEADER)
            if old is not None:
                where = f"{self._where(partition, offset)} {OLD_KEY_HEADER}"
                self._moved_from = scan.ident(self.decoder.key(old, where))
                entries.state = scan.moved(entries.state)
        if self._raw is not None and key is not None:
            self._raw[entries.key] = key
        return True

    def _where(self, partition: int, offset: int) -> str:
        return f"topic {self.topic} partition {partition} offset {offset}"

    def _other(
        self,
        partition: int,
        offset: int,
        key: bytes | None,
        value: bytes,
        status: int,
    ) -> int:
        """`Entries.entry` again once it knows the schemas it asked about: a value of
        another envelope version re-encoded in the current one, a key of another key
        schema with its identity."""
        entries = self.entries
        where = self._where(partition, offset)
        flags, key_ident = 0, None
        while status in (scan.OTHER_SCHEMA, scan.OTHER_KEY):
            if status == scan.OTHER_SCHEMA:
                found = schema_id(value, where)
                if found not in entries.values:
                    entries.values[found] = self.decoder.current_value(found)
                if not entries.values[found]:
                    value, flags = self.decoder.reencoded(value, where), scan.NO_ROW
            else:
                assert key is not None
                found = schema_id(key, where)
                if found not in entries.keys:
                    entries.keys[found] = self.decoder.current_key(found)
                if not entries.keys[found]:
                    key_ident = scan.ident(self.decoder.key(key, where))
            status = entries.entry(key, value, partition, offset, flags, key_ident)
        return status

    def put(self, entry: Entry) -> None:
        """Fold one entry, in the topic's order."""
        self.keys.put(entry.key, entry.state, entry.moved_from)

    def fold(
        self,
        partition: int,
        offset: int,
        key: bytes | None,
        value: bytes | None,
        headers: list[tuple[str, bytes | None]] | None = None,
    ) -> None:
        """`add` of one record with its headers at hand (tests)."""
        self.add(partition, offset, key, value, lambda: headers)

    def get(self, name: bytes) -> Kept | None:
        """The state of key `name` (its body in the current key schema), in memory only."""
        key = scan.ident(name)
        state = self.keys.state(key)
        if state is None:
            return None
        assert self._raw is not None
        return kept(state, self._raw[key])

    def items(self) -> Iterator[tuple[bytes, Kept]]:
        """Every key (its body) and its state, in memory only."""
        assert self._raw is not None
        for key, state in self.keys.states():
            raw = self._raw[key]
            yield self.decoder.key(raw, "key"), kept(state, raw)

    def close(self) -> None:
        """Remove the key store's files, if it spilled to disk."""
        self.keys.close()


def kept(state: bytes, raw_key: bytes) -> Kept:
    """A key's state for people and repairs: its LSN, whether deleted, its columns, and
    where its newest record lives."""
    partition, _, _ = scan.where_of(state)
    return Kept(
        scan.lsn_of(state),
        not scan.live(state),
        state[scan.ROW_AT : scan.ROW_AT + 8] + state[scan.COLUMNS_AT :],
        partition,
        raw_key,
    )


def differing_columns(fields: tuple[str, ...], a: bytes, b: bytes) -> list[str]:
    """The names of the columns whose digests differ between two states' columns."""
    size = scan.DIGEST
    return [
        f
        for i, f in enumerate(fields)
        if a[i * size : (i + 1) * size] != b[i * size : (i + 1) * size]
    ]
