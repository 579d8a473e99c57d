"""What a key-based consumer holds after reading a topic: per key, a digest of each column.

Both sides of a verification are brought to one form here. A topic record's `after` row
and a row read from PostgreSQL (encoded by the bridge's own encoder, in the table's
current schema) are reduced to a digest of the whole row's Avro bytes and one of each
column's (`bridge.verify.scan`, compiled: the records are scanned in place, never decoded
into Python objects). Avro's binary encoding of a value is unique, so equal bytes are an
equal value; logical types play no part (a +infinity timestamp or a NaN decimal compares
as its wire bytes). A record written with another version of the schema is read with
fastavro in its own writer schema (fetched by the id in its header, once per id) and its
columns, by name, encoded again in the current one (`Decoder.reencoded`): a column added
since reads as its default, a value of a type its column no longer has (retyped since)
equals no current value; it has no row digest (the comparison goes column by column). A
record keyed by another key schema (the key moved to other columns) is placed at the
current key of its row (`TopicState`). Nothing reads a source or envelope field by
position, so fields added to the envelope or source block change nothing here.

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
import fastavro.validation

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


def row_record(envelope_schema: Mapping[str, Any]) -> Mapping[str, Any]:
    """The row record of an envelope schema (the one `before` defines and `after` names)."""
    for field in envelope_schema["fields"]:
        if field["name"] in ("before", "after"):
            branches = field["type"] if isinstance(field["type"], list) else [field["type"]]
            for branch in branches:
                if isinstance(branch, dict) and branch.get("type") == "record":
                    return branch
    raise SchemaError("envelope schema without a row record", hint="not a bridge topic?")


def row_fields(envelope_schema: Mapping[str, Any]) -> tuple[str, ...]:
    """Names of the row fields of an envelope schema."""
    return tuple(f["name"] for f in row_record(envelope_schema)["fields"])


def schema_id(data: bytes, where: str) -> int:
    if len(data) < _HEADER.size:
        raise SchemaError(f"{where}: record is not Confluent-framed Avro", hint=_NOT_OURS)
    magic, found = _HEADER.unpack_from(data)
    if magic != 0:
        raise SchemaError(f"{where}: record is not Confluent-framed Avro", hint=_NOT_OURS)
    return int(found)


class _Column(NamedTuple):
    """A current row column that a writer's row does not hold in the same type: its
    position, name and type (parsed)."""

    at: int
    name: str
    type: Any


class Decoder:
    """Framed Avro read for the fold, each record with its own writer schema (fetched by
    the id in its Confluent header through `writer`, parsed once per id), its values
    compared with PostgreSQL's current row by column name:

    - keys as the current key schema writes them (`key`; `key_of` a row's values);
    - records of another envelope version encoded again in the current one (`reencoded`):
      a column the writer did not have reads as its current default, one of another type
      keeps its value if the current type holds it (an int read as a long), else it
      stands for a value no current one equals (`foreign`: PostgreSQL's row, retyped since,
      differs there);
    - the scanner of current records (`envelope_scan`), which needs no decoding at all.

    Nothing here resolves a writer schema into the reader's: Avro's resolution refuses
    exactly the versions a table's history can bring (a column retyped, a key moved to
    other columns), where reading by column name still holds."""

    def __init__(
        self,
        key_schema: Mapping[str, Any] | None,
        envelope_schema: Mapping[str, Any],
        writer: Callable[[int], str],
    ) -> None:
        self._key_raw: Any = None if key_schema is None else raw_schema(key_schema)
        self._key_parsed: Any = (
            None if self._key_raw is None else fastavro.parse_schema(self._key_raw)
        )
        self._key_names = (
            () if self._key_raw is None else tuple(f["name"] for f in self._key_raw["fields"])
        )
        self._value_raw = raw_schema(envelope_schema)
        self._value_parsed = fastavro.parse_schema(self._value_raw)
        self.fields = row_fields(envelope_schema)
        row = row_record(scan.expanded(self._value_raw))
        self._row_types = {f["name"]: f["type"] for f in row["fields"]}
        self._row_defaults = {f["name"]: f.get("default") for f in row["fields"]}
        self._writer = writer
        self._parsed: dict[int, Any] = {}  # schema id -> its parsed raw schema
        self._raw: dict[int, Any] = {}  # schema id -> its raw schema
        self._columns: dict[int, list[_Column]] = {}  # envelope id -> columns to convert
        self.envelope_scan = scan.EnvelopeScan(self._value_raw, list(self.fields))
        self.row_scan = self.envelope_scan.row

    def _schema(self, found: int) -> Any:
        """Schema `found` parsed (its raw form), fetched once."""
        parsed = self._parsed.get(found)
        if parsed is None:
            raw = self._raw[found] = raw_schema(json.loads(self._writer(found)))
            parsed = self._parsed[found] = fastavro.parse_schema(raw)
            if (
                raw != self._value_raw
                and isinstance(raw, dict)
                and any(f["name"] in ("before", "after") for f in raw.get("fields", ()))
            ):
                self._columns[found] = self._converted(raw)
        return parsed

    def _converted(self, writer: Any) -> list[_Column]:
        """The current row columns an envelope of schema `writer` does not hold in their
        current type (compared expanded: a named type is the same wherever defined)."""
        written = {f["name"]: f["type"] for f in row_record(scan.expanded(writer))["fields"]}
        return [
            _Column(at, name, fastavro.parse_schema(kind))
            for at, (name, kind) in enumerate(self._row_types.items())
            if written.get(name) != kind
        ]

    def read(self, data: bytes, where: str) -> dict[str, Any]:
        """A framed record as its writer schema has it (wire values)."""
        found = schema_id(data, where)
        parsed = self._parsed.get(found) or self._schema(found)
        try:
            out = fastavro.schemaless_reader(io.BytesIO(data[_HEADER.size :]), parsed, None)
        except Exception as exc:  # fastavro raises many types for a body that does not fit
            raise SchemaError(
                f"{where}: cannot decode with schema id {found}: {exc}", hint=_NOT_OURS
            ) from None
        if not isinstance(out, dict):
            raise SchemaError(f"{where}: schema id {found} is not a record", hint=_NOT_OURS)
        return out

    def current_value(self, found: int) -> bool:
        """Whether value schema `found` is the current envelope schema."""
        self._schema(found)
        return bool(self._raw[found] == self._value_raw)

    def current_key(self, found: int) -> bool:
        """Whether key schema `found` is the current key schema."""
        self._schema(found)
        return self._key_raw is not None and bool(self._raw[found] == self._key_raw)

    def key_of(self, values: Mapping[str, Any]) -> bytes | None:
        """The current key's Avro body from values by column name (a key's or a row's);
        None when one is missing or does not fit the current key's type."""
        if self._key_parsed is None:
            return None
        try:
            datum = {name: values[name] for name in self._key_names}
        except KeyError:
            return None
        if not fastavro.validation.validate(datum, self._key_parsed, raise_errors=False):
            return None
        out = io.BytesIO()
        fastavro.schemaless_writer(out, self._key_parsed, datum)
        return out.getvalue()

    def key(self, data: bytes, where: str) -> bytes:
        """The key's Avro body in the current key schema: equal keys, equal bytes, whatever
        the schema id. A key written with the current schema is used as it is (Avro's
        encoding of a record of scalars is unique); any other is read and its columns
        written again in the current one, by name. A key of other columns (the primary
        key moved) has no such body: `TopicState` places its records by their rows."""
        if self._key_parsed is None:
            raise SchemaError(f"{where}: the table has no key schema", hint="not verifiable")
        if self.current_key(schema_id(data, where)):
            return data[_HEADER.size :]
        fields = self.read(data, where)
        body = self.key_of(fields)
        if body is None:
            raise SchemaError(
                f"{where}: a key of columns {sorted(fields)}, not the current key's "
                f"{list(self._key_names)}",
                hint="a key of other columns is placed by its record's row (verify's fold)",
            )
        return body

    def show_key(self, body: bytes) -> str:
        """A key from `key` as JSON, for people."""
        assert self._key_parsed is not None
        decoded = fastavro.schemaless_reader(io.BytesIO(body), self._key_parsed, None)
        return json.dumps(decoded, sort_keys=True, default=_show, ensure_ascii=False)

    def current(self, data: bytes, where: str) -> dict[str, Any]:
        """A record's envelope read with its writer schema, its rows by the current
        columns' names (a column the writer did not have: its current default; a value
        of another type: as written)."""
        env = self.read(data, where)
        for image in ("before", "after"):
            row = env.get(image)
            if isinstance(row, dict):
                defaults = self._row_defaults
                env[image] = {n: row[n] if n in row else defaults[n] for n in self.fields}
        return env

    def reencoded(self, data: bytes, where: str) -> tuple[bytes, list[tuple[int, bytes]]]:
        """A record of another envelope schema version as the current one writes it (its
        5-byte header kept), and the `after` columns whose values the current types do
        not hold, each with its `foreign` digest (null in the bytes)."""
        env = self.current(data, where)
        foreign: list[tuple[int, bytes]] = []
        for column in self._columns.get(schema_id(data, where), ()):
            for image in ("before", "after"):
                row = env.get(image)
                if not isinstance(row, dict):
                    continue
                value = row[column.name]
                if fastavro.validation.validate(value, column.type, raise_errors=False):
                    continue
                row[column.name] = None
                if image == "after":
                    foreign.append((column.at, _foreign(value)))
        out = io.BytesIO()
        out.write(data[: _HEADER.size])
        try:
            fastavro.schemaless_writer(out, self._value_parsed, env)
        except Exception as exc:  # an envelope field outside the rows that does not fit
            raise SchemaError(
                f"{where}: cannot read as the current envelope: {exc}", hint=_NOT_OURS
            ) from None
        return out.getvalue(), foreign

    def columns(self, body: bytes) -> bytes:
        """The column digests of a row's Avro body in the current schema."""
        parts: list[bytes] = []
        self.row_scan.digests(body, 0, parts)
        return b"".join(parts)


def _foreign(value: Any) -> bytes:
    """The digest of a value written in a type its column no longer has: of bytes no
    column's Avro bytes start with (those start with its union branch, 0 or 2), so no value
    in the current type, PostgreSQL's included, has it."""
    return scan.digest(b"\xff\xfe" + json.dumps(value, default=repr, sort_keys=True).encode())


def _show(value: Any) -> Any:
    return value.hex() if isinstance(value, bytes) else repr(value)


def _header(headers: Iterable[tuple[str, bytes | None]] | None, name: str) -> bytes | None:
    for found, value in headers or ():
        if found == name and value is not None:
            return value
    return None


def _named(fields: Mapping[str, Any]) -> str:
    """A key's fields as one string: the same key whatever its schema id."""
    return json.dumps(fields, sort_keys=True, default=repr)


def _deleted(state: bytes, nulls: bytes) -> bytes:
    """A delete at `state`'s LSN and record (`Entry.gone`)."""
    flags = bytes((scan.DELETED | scan.RESCANNED | scan.NO_ROW,))
    return state[: scan.FLAGS_AT] + flags + state[scan.FLAGS_AT + 1 : scan.COLUMNS_AT] + nulls


def _with_digests(state: bytes, digests: list[tuple[int, bytes]]) -> bytes:
    """`state` with the digests of some columns (by position) replaced, unsent ones kept."""
    out = bytearray(state)
    for at, found in digests:
        start = scan.COLUMNS_AT + at * scan.DIGEST
        if out[start : start + scan.DIGEST] != scan.UNSENT:
            out[start : start + scan.DIGEST] = found
    return bytes(out)


class Entry(NamedTuple):
    """One record folded: its commit LSN (the order partitions are merged in), its key's
    identity and state (`bridge.verify.scan`), the old key's identity when the state
    carries values from it (a key change's create), and a key whose row this record
    moves away from (`gone`: deleted just before, at the same LSN; see `TopicState`)."""

    lsn: int
    key: bytes
    state: bytes
    moved_from: bytes | None
    gone: bytes | None = None


class TopicState:
    """Records folded into per-key states (see the module docstring).

    A record whose key has another key schema than the current one (the primary key or
    replica identity moved to other columns, or a key subject's next generation) is placed
    as a consumer holding rows places it: at the current key of the row it addresses, its
    row's values in the current key's columns (a delete: where its key's row was placed
    last, else its before image). One key's row whose current-key columns change under
    the other key moves there (`Entry.gone`: the old place deleted, as the bridge's own key
    changes do). `placed` keeps the bodies of the current keys so reached, which their
    records do not hold (a ghost's name).

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
        self.placed: dict[bytes, bytes] = {}  # identity -> current key body (class doc)
        # a key of another key schema (its fields as JSON) -> the current key it was at last
        self._places: dict[str, bytes] = {}
        self._moved_from: bytes | None = None  # the last entry's old key (a key change)
        self._gone: bytes | None = None  # the last entry's `Entry.gone`

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
        return Entry(entries.lsn, entries.key, entries.state, self._moved_from, self._gone)

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
            if self._gone is not None:
                self.keys.put(self._gone, _deleted(entries.state, self.keys.nulls))
            self.keys.put(entries.key, entries.state, self._moved_from)

    def _entry(
        self,
        partition: int,
        offset: int,
        key: bytes | None,
        value: bytes | None,
        headers: Callable[[], list[tuple[str, bytes | None]] | None],
    ) -> bool:
        """Whether the record is an entry (left in `entries.key`, `entries.state`,
        `_moved_from` and `_gone`)."""
        self.records += 1
        if value is None:  # a tombstone: the delete before it did the work
            return False
        entries = self.entries
        self._moved_from = self._gone = None
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
                body = self._body(key, value, self._where(partition, offset))
                if body is not None:
                    self.later[body] = key
            return False
        if status == scan.NO_KEY:
            return False
        if status == scan.CHECK_MOVED or self._gone is not None:
            self._carry(status == scan.CHECK_MOVED, headers, partition, offset)
        if self._raw is not None and key is not None:
            self._raw[entries.key] = key
        return True

    def _carry(
        self,
        check: bool,
        headers: Callable[[], list[tuple[str, bytes | None]] | None],
        partition: int,
        offset: int,
    ) -> None:
        """Where an entry carrying unsent values takes them from (`_moved_from`): a key
        change's old key (when `check`, its header), else the place its row moved from."""
        entries = self.entries
        if check:
            old = _header(headers(), OLD_KEY_HEADER)
            if old is not None:
                where = f"{self._where(partition, offset)} {OLD_KEY_HEADER}"
                self._moved_from = self._ident(old, where)
        if self._moved_from is None:
            self._moved_from = self._gone
        if self._moved_from is not None and scan.flags_of(entries.state) & scan.CARRY:
            entries.state = scan.moved(entries.state)
        else:
            self._moved_from = None

    def _where(self, partition: int, offset: int) -> str:
        return f"topic {self.topic} partition {partition} offset {offset}"

    def _ident(self, key: bytes, where: str) -> bytes | None:
        """The identity of an old key header's key (None: placed nowhere)."""
        if self.decoder.current_key(schema_id(key, where)):
            return scan.ident(key[_HEADER.size :])
        fields = self.decoder.read(key, where)
        body = self._places.get(_named(fields)) or self.decoder.key_of(fields)
        return None if body is None else scan.ident(body)

    def _body(self, key: bytes, value: bytes, where: str) -> bytes | None:
        """The current key body of a record left out (None: it has no place)."""
        decoder = self.decoder
        if decoder.current_key(schema_id(key, where)):
            return key[_HEADER.size :]
        body = decoder.key_of(decoder.read(key, where))
        if body is None:
            env = decoder.current(value, where)
            body = decoder.key_of(env.get("after") or env.get("before") or {})
        return body

    def _other(
        self,
        partition: int,
        offset: int,
        key: bytes | None,
        value: bytes,
        status: int,
    ) -> int:
        """`Entries.entry` again once it knows the schemas it asked about: a value of
        another envelope version re-encoded in the current one (its columns in types
        they no longer have given their `foreign` digests), a key of another key schema
        placed (`_place`)."""
        entries = self.entries
        where = self._where(partition, offset)
        written = value
        flags, key_ident = 0, None
        foreign: list[tuple[int, bytes]] = []
        while status in (scan.OTHER_SCHEMA, scan.OTHER_KEY):
            if status == scan.OTHER_SCHEMA:
                found = schema_id(value, where)
                if found not in entries.values:
                    entries.values[found] = self.decoder.current_value(found)
                if not entries.values[found]:
                    value, foreign = self.decoder.reencoded(value, where)
                    flags = scan.NO_ROW
            else:
                assert key is not None
                found = schema_id(key, where)
                if found not in entries.keys:
                    entries.keys[found] = self.decoder.current_key(found)
                if not entries.keys[found]:
                    body = self._place(key, written, where)
                    if body is None:
                        return scan.NO_KEY
                    key_ident = scan.ident(body)
                    self.placed[key_ident] = body
            status = entries.entry(key, value, partition, offset, flags, key_ident)
        if foreign and status in (scan.ENTRY, scan.CHECK_MOVED):
            entries.state = _with_digests(entries.state, foreign)
        return status

    def _place(self, key: bytes, value: bytes, where: str) -> bytes | None:
        """The current key a record of another key schema addresses (class docstring), or
        None when its values do not say; sets `_gone` when its row moves."""
        decoder = self.decoder
        fields = decoder.read(key, where)
        name = _named(fields)
        last = self._places.get(name)
        env = decoder.current(value, where)
        if env.get("op") == "d":
            return last or decoder.key_of(fields) or decoder.key_of(env.get("before") or {})
        body = decoder.key_of(fields) or decoder.key_of(env.get("after") or {})
        if body is None:
            return None
        self._places[name] = body
        if last is not None and last != body:
            self._gone = scan.ident(last)
        return body

    def put(self, entry: Entry) -> None:
        """Fold one entry, in the topic's order."""
        if entry.gone is not None:
            self.keys.put(entry.gone, _deleted(entry.state, self.keys.nulls))
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
            body = self.placed.get(key)
            yield self.decoder.key(raw, "key") if body is None else body, kept(state, raw)

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
