"""Change events → Confluent-framed Avro key/value bytes, following Debezium's conventions.

One `ChangeEncoder` per table version: its `RowPlan` (bridge/encode/plan.py) writes
keys and rows, the envelope around them is laid out from the registered envelope schema
(`EnvelopeLayout`: union branches, the constant trailing fields, the op strings, all
written by the writers compiled for those fields), and the source block is pre-encoded
once per (transaction, table). Debezium's record shapes (c/u/d/r/t, a delete followed by
a tombstone, a primary-key change as delete + tombstone + create, linked by the
`__debezium.newkey` / `__debezium.oldkey` headers) are written once, in
`ChangeEncoder.records`.
"""

from __future__ import annotations

import struct
import time
from collections.abc import Callable
from typing import Any, Final, Literal

from bridge.decode.messages import KIND_UNCHANGED, PG_EPOCH_OFFSET_US, TupleData
from bridge.encode.avro import Writer, compile_value_writer, compile_writer, long_bytes
from bridge.encode.columns import BAD_INPUT
from bridge.encode.plan import RowBodies, RowPlan, Toast
from bridge.errors import BridgeError, SchemaError
from bridge.events.model import Change
from bridge.record import Headers, KafkaRecord
from bridge.schema.fixed import load_fixed
from bridge.schema.table import TableCodec

# Debezium's header names (RelationalChangeRecordEmitter): the delete (and its tombstone)
# of a primary-key change names the new key, the create names the old one. Values are the
# framed keys, byte for byte the Kafka keys of the other side's records.
OLD_KEY_HEADER: Final = "__debezium.oldkey"
NEW_KEY_HEADER: Final = "__debezium.newkey"
ToastMode = Literal["list", "placeholder"]
_HEADER: Final = struct.Struct(">bI")
_OPS: Final = ("c", "u", "d", "r", "t")  # "r": a snapshot read; "t": a truncate
# Read per record. Compiled, `time.time_ns()` is an attribute lookup on the module per
# call and a global one is a dict lookup: half the cost. Not Final, so that the tests'
# frozen clock (tests/encode/conftest.py) can replace it.
_now_ns = time.time_ns
_ENVELOPE_FIELDS: Final = (
    "before",
    "after",
    "source",
    "op",
    "ts_ms",
    "transaction",
    "unchanged_fields",
    "special_values",
)


def framed_writer(
    schema: dict[str, Any] | list[Any],
    schema_id: int,
    label: str = "record",
    *,
    error: Callable[[Any, Exception], BridgeError] | None = None,
) -> Callable[[Any], bytes]:
    """Encoder for one registered schema: Confluent header + Avro binary body (compiled
    by `bridge.encode.avro`). A value the schema cannot hold raises `error(value, exc)`
    (a column's value: the error naming table, column and type), else a SchemaError
    naming `label`; never a bare ValueError."""
    header = _HEADER.pack(0, schema_id)
    body = compile_writer(schema)

    def write(datum: Any) -> bytes:
        try:
            return header + body(datum)
        except BAD_INPUT as exc:
            if error is not None:
                raise error(datum, exc) from exc
            raise SchemaError(
                f"{label}: a value does not fit its Avro schema: {exc!r}",
                hint="report this with the table definition; the change was not produced",
            ) from None

    return write


def _encoded(writer: Writer, value: Any) -> bytes:
    out = bytearray()
    writer(out, value)
    return bytes(out)


def _union_tags(union: Any, field: str) -> tuple[bytes, bytes]:
    """(null branch, value branch) of a ["null", T] field, as the field's writer encodes
    the branch index."""
    if not (isinstance(union, list) and len(union) == 2 and "null" in union):
        raise SchemaError(f"envelope field {field}: expected a union of null and one type")
    null_at = union.index("null")
    index = compile_value_writer("long")
    return _encoded(index, null_at), _encoded(index, 1 - null_at)


class EnvelopeLayout:
    """The envelope schema's fields as byte pieces around the rows and the source block.

    Built from the schema that is registered: a schema whose fields differ from the
    layout this writes is refused when the encoder is built, not mis-encoded."""

    def __init__(self, schema: dict[str, Any]) -> None:
        fields = {f["name"]: f["type"] for f in schema["fields"]}
        if tuple(fields) != _ENVELOPE_FIELDS:
            raise SchemaError(f"envelope fields {tuple(fields)}, expected {_ENVELOPE_FIELDS}")
        self.row_null, self.row_some = _union_tags(fields["before"], "before")
        if _union_tags(fields["after"], "after") != (self.row_null, self.row_some):
            raise SchemaError("envelope fields before and after differ in their union order")
        if fields["source"] != load_fixed("source"):
            raise SchemaError("envelope field source is not schemas/source.avsc")
        op = compile_value_writer(fields["op"])
        self.ops = {name: _encoded(op, name) for name in _OPS}
        self._ts_some = _union_tags(fields["ts_ms"], "ts_ms")[1]
        self._unchanged = compile_value_writer(fields["unchanged_fields"])
        self._specials = compile_value_writer(fields["special_values"])
        self._no_transaction = _encoded(compile_value_writer(fields["transaction"]), None)
        # what follows ts_ms in nearly every record: no unchanged fields, no special values
        self._plain_rest = self._rest(None, None)
        self.after_only = self.row_null + self.row_some  # before: null, after: a row

    def tail(
        self, ms: int, unchanged: list[str] | None, specials: dict[str, str] | None = None
    ) -> bytes:
        """ts_ms, transaction (always null), unchanged_fields and special_values."""
        plain = unchanged is None and not specials
        rest = self._plain_rest if plain else self._rest(unchanged, specials)
        return self._ts_some + long_bytes(ms) + rest

    def _rest(self, unchanged: list[str] | None, specials: dict[str, str] | None) -> bytes:
        out = bytearray(self._no_transaction)
        self._unchanged(out, unchanged)
        self._specials(out, specials or None)
        return bytes(out)


# The source block's fields that vary, in schema order (the table's two fields as
# "schema"): per transaction ts_ms, txId and commit_lsn, per change sequence, the table
# and lsn. Every other field is fixed for the process (version, connector, server name,
# database, snapshot flag), so its bytes are written once. `SourceBlock` and `TxSource`
# write the varying ones inline in this order, with the union branches of the schema
# (both checked against schemas/source.avsc at import).
_VARYING: Final = ("ts_ms", "sequence", "schema", "txId", "lsn", "commit_lsn")
_VARYING_TYPES: Final = {
    "ts_ms": "long",
    "sequence": ["null", "string"],
    "txId": ["null", "long"],
    "lsn": ["null", "long"],
    "commit_lsn": ["null", "long"],
}


def _source_layout() -> tuple[list[str], dict[str, Writer], bytes, bytes, bytes]:
    """`schemas/source.avsc` as `SourceBlock` fills it: field names in order (schema and
    table as one "schema"), the compiled writer of each field, and the union branches
    of the varying fields (string, then null and long)."""
    schema = load_fixed("source")
    types = {f["name"]: f["type"] for f in schema["fields"]}
    writers = {name: compile_value_writer(t) for name, t in types.items()}
    names = [n for n in types if n != "table"]
    if list(types).index("table") != list(types).index("schema") + 1:
        raise SchemaError("source block: schema and table must be adjacent fields")
    if tuple(n for n in names if n in _VARYING) != _VARYING:
        raise SchemaError(f"source block: expected the varying fields {_VARYING} in order")
    if any(types[n] != t for n, t in _VARYING_TYPES.items()):
        raise SchemaError(f"source block: expected the varying fields' types {_VARYING_TYPES}")
    long_null, long_some = _union_tags(types["lsn"], "lsn")
    return names, writers, _union_tags(types["sequence"], "sequence")[1], long_null, long_some


_SOURCE_NAMES, _SOURCE_WRITERS, _SEQUENCE_SOME, _LONG_NULL, _LONG_SOME = _source_layout()
_TEXT: Final = compile_value_writer("string")
_SEQUENCE_END: Final = b'"]'  # closes the sequence's JSON array after the change's LSN


class SourceBlock:
    """Debezium's source block (`schemas/source.avsc`) for one server, database, version
    and snapshot flag: the fields fixed for all of them are encoded here once, so a
    transaction binds only its own three and a change writes only its own (`sequence`,
    the table's schema and table, `lsn`). The pipeline keeps one for its run; a snapshot
    reader one per chunk."""

    __slots__ = (
        "_after_ts",
        "_before_ts",
        "_between",
        "_commit_lsn_null",
        "_commit_lsn_some",
        "_end",
        "_xid_null",
        "_xid_some",
        "_xid_tail",
        "fixed",
    )

    def __init__(self, server: str, db: str, version: str, snapshot: str = "false") -> None:
        self.fixed: dict[str, Any] = {
            "version": version,
            "connector": "postgresql",
            "name": server,
            "snapshot": snapshot,
            "db": db,
            "xmin": None,
        }
        missing = set(_SOURCE_NAMES) - {*self.fixed, *_VARYING}
        if missing:
            raise SchemaError(f"source block: no value for {sorted(missing)}")
        # the fixed fields' bytes before, between and after the varying fields
        runs: list[bytes] = []
        fixed = bytearray()
        for name in _SOURCE_NAMES:
            if name in self.fixed:
                _SOURCE_WRITERS[name](fixed, self.fixed[name])
            else:
                runs.append(bytes(fixed))
                fixed = bytearray()
        runs.append(bytes(fixed))
        # ... joined with the union branches around them, so that `bind` (once per
        # transaction) concatenates only around the transaction's own values
        self._before_ts = runs[0]
        self._after_ts = runs[1] + _SEQUENCE_SOME
        self._between = runs[2]
        self._xid_some = runs[3] + _LONG_SOME
        self._xid_tail = runs[4] + _LONG_SOME
        self._xid_null = runs[3] + _LONG_NULL + self._xid_tail
        self._commit_lsn_some = runs[5] + _LONG_SOME
        self._end = runs[6]
        self._commit_lsn_null = runs[5] + _LONG_NULL + self._end

    def bind(self, ts_ms: int, xid: int | None, commit_lsn: int | None) -> list[bytes]:
        """The block's bytes before, between and after the per-change fields (sequence,
        the table's, lsn) with the transaction's own written in, each run before a
        nullable field ending in its non-null union branch, which a change always takes.
        Raises ValueError or TypeError for a value the schema cannot hold."""
        return [
            self._before_ts + long_bytes(ts_ms) + self._after_ts,
            self._between,
            self._xid_null if xid is None else self._xid_some + long_bytes(xid) + self._xid_tail,
            self._commit_lsn_null
            if commit_lsn is None
            else self._commit_lsn_some + long_bytes(commit_lsn) + self._end,
        ]


def table_fields(schema: str, table: str) -> bytes:
    """The source block's schema and table fields (two strings)."""
    out = bytearray()
    _TEXT(out, schema)
    _TEXT(out, table)
    return bytes(out)


def sequence_head(last_commit_lsn: int | None) -> bytes:
    """Debezium's `source.sequence` is the JSON array [last commit LSN, this LSN] of
    strings, the first null while no commit was seen (Debezium's SourceInfo.sequence()):
    this is the part before the change's LSN, the same for a whole transaction."""
    if last_commit_lsn is None:
        return b'[null,"'
    return b'["' + str(last_commit_lsn).encode() + b'","'


class TxSource:
    """The parts of Debezium's source block fixed for one transaction.

    `last_commit_lsn` is the end LSN of the transaction committed before this one (the
    position Debezium's connector calls its last commit LSN), None when not known.
    Built once per transaction, so it keeps plain fields and encodes only when a record
    asks for it."""

    __slots__ = (
        "_bound",
        "_digits",
        "_head",
        "_middle",
        "_sequence",
        "_tables",
        "block",
        "commit_lsn",
        "last_commit_lsn",
        "ts_ms",
        "xid",
    )

    def __init__(
        self,
        block: SourceBlock,
        xid: int | None,
        commit_lsn: int,
        commit_ts: int,
        last_commit_lsn: int | None = None,
    ) -> None:
        self.block = block
        self.xid = xid
        self.commit_lsn = commit_lsn
        self.last_commit_lsn = last_commit_lsn
        self.ts_ms = (commit_ts + PG_EPOCH_OFFSET_US) // 1000
        self._bound: list[bytes] | None = None
        self._sequence = sequence_head(last_commit_lsn)
        # Pieces a change's block shares with the transaction's other changes, kept while
        # they hold: up to the LSN's digits (while the LSNs have `_digits` digits), and
        # from the sequence's end to the LSN (for the table whose fields are `_tables`).
        self._digits = 0
        self._head = b""
        self._tables: bytes | None = None
        self._middle = b""

    @property
    def base(self) -> dict[str, Any]:
        """The source block's fields for the transaction as a whole (no change of its
        own: `lsn` is the commit LSN), schema and table left empty."""
        return {
            **self.block.fixed,
            "ts_ms": self.ts_ms,
            "txId": self.xid,
            "commit_lsn": self.commit_lsn,
            "lsn": self.commit_lsn,
            "sequence": None,
            "schema": "",
            "table": "",
        }

    def block_parts(self, parts: list[bytes], tables: bytes, lsn: int) -> None:
        """Append the encoded source block of the change at `lsn` in the table whose
        schema and table fields are `tables` to `parts`: the transaction's pieces
        around the change's sequence, tables and LSN, written inline (the union
        branches are the schema's, `_source_layout`).

        Raises ValueError or TypeError for a value the schema cannot hold, before
        anything is appended."""
        bound = self._bound
        if bound is None:
            bound = self._bound = self.block.bind(self.ts_ms, self.xid, self.commit_lsn)
        at = long_bytes(lsn)
        digits = str(lsn).encode()
        if len(digits) != self._digits:
            # the sequence string's length prefix changes only with the LSN's digit count
            self._digits = len(digits)
            head = self._sequence
            length = long_bytes(len(head) + len(digits) + len(_SEQUENCE_END))
            self._head = bound[0] + length + head
        if tables is not self._tables:
            self._tables = tables
            self._middle = _SEQUENCE_END + bound[1] + tables + bound[2]
        # five pieces, not nine: each piece costs the envelope's join about as much as
        # a short concatenation, and these are joined once per transaction and table
        parts.append(self._head)
        parts.append(digits)
        parts.append(self._middle)
        parts.append(at)
        parts.append(bound[3])

    def block_for(self, tables: bytes, lsn: int) -> bytes:
        """The encoded source block of the change at `lsn` (`block_parts` as bytes).

        Raises ValueError or TypeError for a value the schema cannot hold."""
        parts: list[bytes] = []
        self.block_parts(parts, tables, lsn)
        return b"".join(parts)


class _Clock:
    """The envelope's last fields (ts_ms, then null transaction, unchanged_fields and
    special_values), encoded once per millisecond instead of once per record."""

    def __init__(self, layout: EnvelopeLayout) -> None:
        self._layout = layout
        self._ms = -1
        self._tail = b""

    def tail(self) -> bytes:
        ms = _now_ns() // 1_000_000
        if ms != self._ms:
            self._ms = ms
            self._tail = self._layout.tail(ms, None)
        return self._tail


class ChangeEncoder:
    """Key/value records for the changes of one table version."""

    __slots__ = (
        "_clock",
        "_insert_head",
        "_key_header",
        "_label",
        "_layout",
        "_plan",
        "_table_fields",
        "_value_header",
        "table",
        "toast_mode",
        "tombstones",
        "topic",
        "value_id",
    )

    def __init__(
        self,
        table: TableCodec,
        key_id: int | None,
        value_id: int,
        *,
        topic: str,
        toast_mode: ToastMode = "list",
        tombstones: bool = True,
    ) -> None:
        self.table = table
        self.topic = topic  # of every record
        self.toast_mode = toast_mode
        self.tombstones = tombstones
        relation = table.relation
        self._label = f"{relation.namespace}.{relation.name}"
        self._plan = RowPlan(table)
        self._layout = EnvelopeLayout(table.envelope_schema)
        self._clock = _Clock(self._layout)
        has_key = table.key_schema is not None and key_id is not None
        self._key_header = _HEADER.pack(0, key_id or 0) if has_key else None
        self.value_id = value_id  # the registered envelope schema's id
        self._value_header = _HEADER.pack(0, value_id)
        self._insert_head = self._value_header + self._layout.after_only
        self._table_fields = table_fields(relation.namespace, relation.name)

    def check_binary(self, every_column: bool = False) -> None:
        """Refuse binary tuples for a table with a column the binary reader lacks
        (`RowPlan.check_binary`)."""
        self._plan.check_binary(every_column)

    @property
    def value_header(self) -> bytes:
        """The 5-byte Confluent header of this version's value records."""
        return self._value_header

    def row_bodies(self, kinds: bytes, values: tuple[bytes | None, ...]) -> RowBodies:
        """(key body, row body) of a row as the `after` of its records holds them, without
        the envelope: `bridge verify` compares these bytes. Special values are dropped
        (they live in the envelope's tail, not in the row)."""
        bodies = self._plan.write(kinds, values, None)
        self._plan.specials.clear()
        return bodies

    def records(self, change: Change, tx: TxSource) -> list[KafkaRecord]:
        """Debezium's shapes: c/u/d/r/t, a delete followed by a tombstone, and a
        primary-key change as delete + tombstone + create (the only records with
        headers)."""
        new = change.new
        op = change.op
        if new is not None and change.old is None and op != "d" and KIND_UNCHANGED not in new.kinds:
            # one record, no key comparison: the common case
            parts: list[bytes] = []
            key = self.row_record(parts, new, op, change.lsn, tx)
            return [KafkaRecord(self.topic, key, b"".join(parts))]
        source = self._source_block(tx, change.lsn)
        if op == "t":
            return [KafkaRecord(self.topic, None, self._envelope(None, None, "t", source, None))]
        return self._shaped(change, source)

    def row_record(
        self, parts: list[bytes], new: TupleData, op: str, lsn: int, tx: TxSource
    ) -> bytes | None:
        """The one record of a change that carries a new row and nothing else, none of
        its values an unchanged TOASTed one (an insert, a snapshot read): its value's
        parts appended to `parts` (the row and the source block written straight into
        the envelope's), its key returned. A snapshot reader appends a whole chunk's
        records to one list of parts (`bridge.encode.copyrows.CopyRows`)."""
        parts.append(self._insert_head)
        plan = self._plan
        key = plan.write_parts(parts, new.kinds, new.values)
        try:
            tx.block_parts(parts, self._table_fields, lsn)
        except BAD_INPUT as exc:
            plan.specials.clear()  # the row is not produced, nor are its special values
            raise self._source_error(exc) from None
        parts.append(self._layout.ops[op])
        if plan.specials:  # a value its schema cannot hold: the rare, slower tail
            specials: dict[str, str] = {}
            plan.take_specials("after.", specials)
            parts.append(self._layout.tail(_now_ns() // 1_000_000, None, specials))
        else:
            parts.append(self._clock.tail())
        return self._framed_key(key)

    def _shaped(self, change: Change, source: bytes) -> list[KafkaRecord]:
        specials: dict[str, str] = {}
        before, after, unchanged = self._rows(change, specials)
        op = change.op

        def key_of(bodies: RowBodies | None) -> bytes | None:
            return None if bodies is None else self._framed_key(bodies[0])

        if op == "d":
            key = key_of(before)
            envelope = self._envelope(before, None, "d", source, None, specials)
            out = [KafkaRecord(self.topic, key, envelope)]
            if self.tombstones:
                out.append(KafkaRecord(self.topic, key, None))
            return out
        key = key_of(after)
        if op == "u" and change.old_kind and before is not None:
            old_key = key_of(before)
            if old_key != key:
                return self._key_change(old_key, key, before, after, source, unchanged, specials)
        value = self._envelope(before, after, op, source, unchanged, specials)
        return [KafkaRecord(self.topic, key, value)]

    def _key_change(
        self,
        old_key: bytes | None,
        key: bytes | None,
        before: RowBodies,
        after: RowBodies | None,
        source: bytes,
        unchanged: list[str] | None,
        specials: dict[str, str],
    ) -> list[KafkaRecord]:
        """Delete (+ tombstone) under the old key, create under the new one, as Debezium
        emits them. The headers let a consumer link the two: the create's unchanged
        TOASTed values live under the old key (bridge.spark.apply carries them over). The
        tombstone repeats the delete's header, as Debezium's tombstone copies the delete's
        headers."""
        to_new: Headers | None = None if key is None else [(NEW_KEY_HEADER, key)]
        to_old: Headers | None = None if old_key is None else [(OLD_KEY_HEADER, old_key)]
        old = {k: v for k, v in specials.items() if k.startswith("before.")}
        new = {k: v for k, v in specials.items() if k.startswith("after.")}
        topic = self.topic
        deleted = self._envelope(before, None, "d", source, None, old)
        out = [KafkaRecord(topic, old_key, deleted, to_new)]
        if self.tombstones:
            out.append(KafkaRecord(topic, old_key, None, to_new))
        created = self._envelope(None, after, "c", source, unchanged, new)
        out.append(KafkaRecord(topic, key, created, to_old))
        return out

    def _rows(
        self, change: Change, specials: dict[str, str]
    ) -> tuple[RowBodies | None, RowBodies | None, list[str] | None]:
        """(before, after, unchanged_fields): the old row fills the unchanged TOASTed
        values of the new one; what it does not hold follows `toast_mode`. The old row is
        REPLICA IDENTITY FULL's whole row, or the old key: PostgreSQL sends an old key
        whose TOASTed values are unchanged (the new tuple has them only as unchanged), and
        the key comes from there, as PostgreSQL's own subscriber finds the row by it. The
        rows' special values are collected in `specials`."""
        plan = self._plan
        old, new = change.old, change.new
        before: RowBodies | None = None
        toast: Toast | None = None
        if new is not None and KIND_UNCHANGED in new.kinds:
            fill = None
            if old is not None and change.old_kind in ("O", "K"):
                key, fill = plan.write_columns(old.kinds, old.values)
                before = key, b"".join(fill)
            toast = Toast(fill, self.toast_mode == "placeholder")
        if old is not None and before is None:
            before = self._write(old, None)
        plan.take_specials("before.", specials)
        after = None if new is None else self._write(new, toast)
        plan.take_specials("after.", specials)
        unchanged = toast.unchanged if toast is not None and toast.unchanged else None
        return before, after, unchanged

    def _write(self, tup: TupleData, toast: Toast | None) -> RowBodies:
        return self._plan.write(tup.kinds, tup.values, toast)

    def _framed_key(self, body: bytes) -> bytes | None:
        header = self._key_header
        return None if header is None else header + body

    def _source_block(self, tx: TxSource, lsn: int) -> bytes:
        """The encoded source block (`schemas/source.avsc`) of the change at `lsn`."""
        try:
            return tx.block_for(self._table_fields, lsn)
        except BAD_INPUT as exc:
            raise self._source_error(exc) from None

    def _source_error(self, exc: Exception) -> SchemaError:
        return SchemaError(
            f"{self._label}: the source block does not fit its Avro schema: {exc!r}",
            hint="report this with the transaction's xid and LSN; the change was not produced",
        )

    def _envelope(
        self,
        before: RowBodies | None,
        after: RowBodies | None,
        op: str,
        source: bytes,
        unchanged: list[str] | None,
        specials: dict[str, str] | None = None,
    ) -> bytes:
        """Envelope fields in schema order: before, after, source, op, then the tail."""
        layout = self._layout
        parts = [self._value_header]
        for row in (before, after):
            if row is None:
                parts.append(layout.row_null)
            else:
                parts.append(layout.row_some)
                parts.append(row[1])
        parts.append(source)
        parts.append(layout.ops[op])
        if unchanged is None and not specials:
            parts.append(self._clock.tail())
        else:
            parts.append(layout.tail(_now_ns() // 1_000_000, unchanged, specials))
        return b"".join(parts)
