"""Change events → Confluent-framed Avro key/value bytes, following Debezium's conventions.

One `ChangeEncoder` per table version: schemas parsed once by fastavro, the
5-byte Confluent header (magic 0, big-endian schema id) precomputed. Row unions
are written with fastavro's tuple notation so it never has to guess the branch
by validating the whole row.
"""

from __future__ import annotations

import io
import struct
import time
from collections.abc import Callable
from typing import Any, Final, Literal

from fastavro import parse_schema, schemaless_writer

from bridge.decode.messages import PG_EPOCH_OFFSET_US, TupleData
from bridge.encode.avro import compile_writer, long_bytes, write_long
from bridge.encode.plan import RowBodies, compile_row_writer
from bridge.errors import SchemaError
from bridge.events.model import Change
from bridge.schema.table import TableCodec

Record = tuple[bytes | None, bytes | None]  # (key, value); value None = tombstone
ToastMode = Literal["list", "placeholder"]
_HEADER: Final = struct.Struct(">bI")
# Avro strings (length 1, the letter) of the ops the fast path writes; "r" is a snapshot read.
_OPS: Final = {op: b"\x02" + op.encode() for op in ("c", "u", "d", "r")}
_AFTER_ONLY: Final = b"\x00\x02"  # the envelope's before: null, after: union branch 1


class _Clock:
    """The envelope's last fields, ts_ms then null transaction and unchanged_fields,
    encoded once per millisecond instead of once per record."""

    def __init__(self) -> None:
        self._ms = -1
        self._tail = b""

    def tail(self) -> bytes:
        ms = time.time_ns() // 1_000_000
        if ms != self._ms:
            self._ms = ms
            self._tail = b"\x02" + long_bytes(ms) + b"\x00\x00"
        return self._tail


_TS_MS: Final = _Clock()


def framed_writer(
    schema: dict[str, Any], schema_id: int, label: str = "record"
) -> Callable[[Any], bytes]:
    """Encoder for one registered schema: Confluent header + Avro binary body.

    The body comes from a writer compiled for this schema (`fastwriter`, byte-for-byte
    fastavro's output at about twice the speed), or from fastavro for the constructs it
    does not compile. A value the schema cannot hold (an xid8 above 2^63) is a
    SchemaError naming `label`, not a bare ValueError."""
    header = _HEADER.pack(0, schema_id)
    body = _body_writer(schema)

    def write(datum: Any) -> bytes:
        try:
            return header + body(datum)
        except (
            TypeError,
            ValueError,
            OverflowError,
            KeyError,
            AttributeError,
            struct.error,
        ) as exc:
            raise SchemaError(
                f"{label}: a value does not fit its Avro schema: {exc!r}",
                hint="report this with the table definition; the change was not produced",
            ) from None

    return write


def _body_writer(schema: dict[str, Any]) -> Callable[[Any], bytes]:
    try:
        return compile_writer(schema)
    except SchemaError:
        return _fastavro_body(schema)


def _fastavro_body(schema: dict[str, Any]) -> Callable[[Any], bytes]:
    parsed = parse_schema(schema)

    def body(datum: Any) -> bytes:
        buf = io.BytesIO()
        schemaless_writer(buf, parsed, datum)
        return buf.getvalue()

    return body


class TxSource:
    """The parts of Debezium's source block fixed for one transaction.

    `blocks` caches the encoded block per table: it is the same for every row of a table
    in the transaction, so the fast path writes it once. Built once per transaction, so
    it keeps plain fields: `base` (the block as a record, for the general path) is only
    built when something asks for it."""

    __slots__ = (
        "_base",
        "_ends",
        "blocks",
        "commit_lsn",
        "db",
        "server",
        "snapshot",
        "ts_ms",
        "version",
        "xid",
    )

    def __init__(
        self,
        server: str,
        db: str,
        xid: int | None,
        commit_lsn: int,
        commit_ts: int,
        version: str,
        snapshot: str = "false",
    ) -> None:
        self.server = server
        self.db = db
        self.xid = xid
        self.commit_lsn = commit_lsn
        self.ts_ms = (commit_ts + PG_EPOCH_OFFSET_US) // 1000
        self.version = version
        self.snapshot = snapshot
        self.blocks: dict[tuple[str, str], bytes] = {}
        self._base: dict[str, Any] | None = None
        self._ends: tuple[bytes, bytes] | None = None

    @property
    def base(self) -> dict[str, Any]:
        """The source block's fields, schema and table left empty."""
        if self._base is None:
            self._base = {
                "version": self.version,
                "connector": "postgresql",
                "name": self.server,
                "ts_ms": self.ts_ms,
                "snapshot": self.snapshot,
                "db": self.db,
                "sequence": None,
                "schema": "",
                "table": "",
                "txId": self.xid,
                "lsn": self.commit_lsn,
                "xmin": None,
            }
        return self._base

    def ends(self) -> tuple[bytes, bytes]:
        """The source block's body before and after its schema and table fields, in
        `source.avsc`'s field order: the same for every table of the transaction.

        Raises ValueError or TypeError for a value the schema cannot hold (the general
        path then names it)."""
        if self._ends is None:
            before_ts, after_ts = _texts(self.version, self.server, self.snapshot, self.db)
            head = bytearray(before_ts)
            _write_long(head, self.ts_ms)
            head += after_ts
            tail = bytearray()
            if self.xid is None:
                tail.append(0)
            else:
                tail.append(2)
                _write_long(tail, self.xid)
            tail.append(2)
            _write_long(tail, self.commit_lsn)
            tail.append(0)  # xmin
            self._ends = bytes(head), bytes(tail)
        return self._ends


# The encoded source fields that stay the same across transactions (version, connector,
# server; snapshot, database, sequence), by (version, server, snapshot, db).
_TEXTS: Final[dict[tuple[str, str, str, str], tuple[bytes, bytes]]] = {}


def _texts(version: str, server: str, snapshot: str, db: str) -> tuple[bytes, bytes]:
    """(version, connector, name) and (snapshot, db, sequence=null) as Avro bytes."""
    key = (version, server, snapshot, db)
    encoded = _TEXTS.get(key)
    if encoded is None:
        head, tail = bytearray(), bytearray()
        for value in (version, "postgresql", server):
            _write_text(head, value)
        for value in (snapshot, db):
            _write_text(tail, value)
        tail.append(0)  # sequence: null
        encoded = _TEXTS[key] = bytes(head), bytes(tail)
    return encoded


def _write_text(out: bytearray, value: object) -> None:
    if type(value) is not str:
        raise TypeError(f"{value!r} is not a string")
    data = value.encode()
    write_long(out, len(data))
    out += data


def _write_long(out: bytearray, value: object) -> None:
    if type(value) is not int:
        raise TypeError(f"{value!r} is not an integer")
    write_long(out, value)


class ChangeEncoder:
    """Key/value records for the changes of one table version."""

    __slots__ = (
        "_fast",
        "_key",
        "_key_header",
        "_table_fields",
        "_table_id",
        "_value",
        "_value_header",
        "table",
        "toast_mode",
        "tombstones",
    )

    def __init__(
        self,
        table: TableCodec,
        key_id: int | None,
        value_id: int,
        *,
        toast_mode: ToastMode = "list",
        tombstones: bool = True,
    ) -> None:
        self.table = table
        self.toast_mode = toast_mode
        self.tombstones = tombstones
        label = f"{table.relation.namespace}.{table.relation.name}"
        self._key = (
            framed_writer(table.key_schema, key_id, f"{label} key")
            if table.key_schema and key_id is not None
            else None
        )
        self._value = framed_writer(table.envelope_schema, value_id, label)
        self._fast = compile_row_writer(table)
        self._key_header = None if self._key is None else _HEADER.pack(0, key_id or 0)
        self._value_header = _HEADER.pack(0, value_id)
        self._table_id = (table.relation.namespace, table.relation.name)
        self._table_fields: bytes | None = None  # schema and table, as the source block has them
        fields = bytearray()
        try:
            for name in self._table_id:
                _write_text(fields, name)
            self._table_fields = bytes(fields)
        except (ValueError, TypeError):
            pass  # the general path names the value

    def records(self, change: Change, tx: TxSource) -> list[Record]:
        """Debezium's shapes: c/u/d/t, a delete followed by a tombstone, and a primary-key
        change as delete + tombstone + create."""
        if self._fast is not None:
            fast = self._fast_records(change, tx)
            if fast is not None:
                return fast
        return self._general_records(change, tx)

    def _fast_records(self, change: Change, tx: TxSource) -> list[Record] | None:
        """`_general_records`' output from the fused row writer; None where it does not apply."""
        plan = self._fast
        if plan is None or change.op not in _OPS:
            return None
        source = tx.blocks.get(self._table_id)
        if source is None:
            source = self._source_block(tx)
            if source is None:
                return None
        op = change.op
        new = change.new
        if new is not None and change.old is None and op != "d":
            # one record, no key comparison: the common case, the row written straight
            # into the envelope's parts
            parts = [self._value_header, _AFTER_ONLY]
            key = plan.write_parts(parts, new.kinds, new.values)
            if key is None:
                return None
            parts.append(source)
            parts.append(_OPS[op])
            parts.append(_TS_MS.tail())
            return [(self._framed_key(key), b"".join(parts))]
        before = after = None
        if new is not None:
            after = plan.write(new.kinds, new.values)
            if after is None:
                return None
        if change.old is not None:
            before = plan.write(change.old.kinds, change.old.values)
            if before is None:
                return None
        if (before if op == "d" else after) is None:
            return None

        def envelope(before: Any, after: Any, op: str) -> bytes:
            return self._fast_envelope(before, after, _OPS[op], source)

        def key_of(bodies: RowBodies) -> bytes | None:
            return self._framed_key(bodies[0])

        return self._shape(op, change.old_kind, before, after, key_of, envelope)

    def _shape(
        self,
        op: str,
        old_kind: str,
        before: Any,
        after: Any,
        key_of: Callable[[Any], bytes | None],
        envelope: Callable[[Any, Any, str], bytes],
    ) -> list[Record]:
        """Debezium's record shapes over either path's row form: a delete followed by a
        tombstone, and a primary-key change as delete + tombstone + create."""
        if op == "d":
            key = key_of(before)
            out: list[Record] = [(key, envelope(before, None, "d"))]
            if self.tombstones:
                out.append((key, None))
            return out
        key = key_of(after)
        if op == "u" and old_kind and before is not None:
            old_key = key_of(before)
            if old_key != key:
                out = [(old_key, envelope(before, None, "d"))]
                if self.tombstones:
                    out.append((old_key, None))
                out.append((key, envelope(None, after, "c")))
                return out
        return [(key, envelope(before, after, op))]

    def _framed_key(self, body: bytes) -> bytes | None:
        header = self._key_header
        return None if header is None else header + body

    def _source_block(self, tx: TxSource) -> bytes | None:
        """The encoded source block (`schemas/source.avsc`) with this table's names."""
        if self._table_fields is None:
            return None
        try:
            head, tail = tx.ends()
        except (ValueError, TypeError):
            return None  # the general path names the value
        block = head + self._table_fields + tail
        tx.blocks[self._table_id] = block
        return block

    def _fast_envelope(
        self, before: RowBodies | None, after: RowBodies | None, op: bytes, source: bytes
    ) -> bytes:
        """Envelope fields in schema order: before, after, source, op, ts_ms, and NULL for
        transaction and unchanged_fields (the fast path never has unchanged columns)."""
        out = bytearray(self._value_header)
        if before is None:
            out.append(0)
        else:
            out.append(2)
            out += before[1]
        if after is None:
            out.append(0)
        else:
            out.append(2)
            out += after[1]
        out += source
        out += op
        out += _TS_MS.tail()
        return bytes(out)

    def _general_records(self, change: Change, tx: TxSource) -> list[Record]:
        source = dict(tx.base)
        source["schema"] = self.table.relation.namespace
        source["table"] = self.table.relation.name
        op = change.op
        if op == "t":
            return [(None, self._envelope(None, None, "t", source, None))]
        unchanged: list[str] = []
        before = self._row(change.old, None) if change.old is not None else None
        after = self._row(change.new, unchanged) if change.new is not None else None
        if unchanged and after is not None:
            unchanged = self._fill_unchanged(
                after, before if change.old_kind == "O" else None, unchanged
            )
        fields = unchanged or None

        def envelope(before: Any, after: Any, op: str) -> bytes:
            return self._envelope(before, after, op, source, None if op == "d" else fields)

        return self._shape(op, change.old_kind, before, after, self._encode_key, envelope)

    def _row(self, tup: TupleData, unchanged: list[str] | None) -> dict[str, Any]:
        return self.table.row(tup.kinds, tup.values, unchanged)

    def _fill_unchanged(
        self, after: dict[str, Any], old: dict[str, Any] | None, names: list[str]
    ) -> list[str]:
        """REPLICA IDENTITY FULL sends the old value: use it. Otherwise apply the mode."""
        still: list[str] = []
        for name in names:
            if old is not None and old.get(name) is not None:
                after[name] = old[name]
            else:
                placeholder = (
                    self.table.placeholder(name) if self.toast_mode == "placeholder" else None
                )
                if placeholder is not None:
                    after[name] = placeholder
                still.append(name)
        return still

    def _encode_key(self, row: dict[str, Any] | None) -> bytes | None:
        if self._key is None or row is None:
            return None
        return self._key(self.table.key(row))

    def _envelope(
        self,
        before: dict[str, Any] | None,
        after: dict[str, Any] | None,
        op: str,
        source: dict[str, Any],
        unchanged: list[str] | None,
    ) -> bytes:
        row_name = self.table.row_name
        return self._value(
            {
                "before": None if before is None else (row_name, before),
                "after": None if after is None else (row_name, after),
                "source": source,
                "op": op,
                "ts_ms": time.time_ns() // 1_000_000,
                "transaction": None,
                "unchanged_fields": unchanged,
            }
        )
