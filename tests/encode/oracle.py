"""The test oracle of the encoder: Debezium's records written by fastavro, from dicts.

Values are converted column by column with the same converters the encoder calls
(`bridge.encode.columns`, tested on their own against PostgreSQL); everything after
that (record shapes, TOAST filling, keys, unions, the envelope and the source block) is
written here the plain way and encoded by `fastavro.schemaless_writer` on the schema
that is registered. The encoder must produce the same bytes, or raise a BridgeError
where this raises.
"""

from __future__ import annotations

import io
import json
import struct
from typing import Any

import fastavro
import fastavro.validation

from bridge.decode.messages import KIND_BINARY, KIND_NULL, KIND_TEXT, KIND_UNCHANGED, TupleData
from bridge.encode.columns import array_text, codec_of, special_text
from bridge.encode.records import TxSource
from bridge.events.model import Change
from bridge.record import KafkaRecord
from bridge.schema.table import TableCodec

MS = 1_700_000_000_123  # the frozen clock of the tests, in ms


class Oracle:
    def __init__(
        self,
        table: TableCodec,
        key_id: int | None,
        value_id: int,
        *,
        topic: str = "",
        toast_mode: str = "list",
        tombstones: bool = True,
    ) -> None:
        self.table = table
        self.topic = topic
        self.key_id = key_id
        self.value_id = value_id
        self.toast_mode = toast_mode
        self.tombstones = tombstones
        self.codecs = [codec_of(t) for t in table.types]
        self.envelope = fastavro.parse_schema(table.envelope_schema)
        self.key = None if table.key_schema is None else fastavro.parse_schema(table.key_schema)
        self.key_names = [table.field_names[pos] for pos in table.key_positions]

    def records(self, change: Change, tx: TxSource) -> list[KafkaRecord]:
        last = None if tx.last_commit_lsn is None else str(tx.last_commit_lsn)
        sequence = json.dumps([last, str(change.lsn)], separators=(",", ":"))  # as Jackson writes
        source = {**tx.base, "schema": self.table.relation.namespace}
        source.update(lsn=change.lsn, sequence=sequence)
        source["table"] = self.table.relation.name
        op = change.op
        if op == "t":
            return [KafkaRecord(self.topic, None, self._envelope(None, None, "t", source, None))]
        unchanged: list[str] = []
        old_specials: dict[str, str] = {}
        new_specials: dict[str, str] = {}
        before = None if change.old is None else self.row(change.old, None, old_specials, "before.")
        after = (
            None if change.new is None else self.row(change.new, unchanged, new_specials, "after.")
        )
        if unchanged and after is not None:
            old = before if change.old_kind in ("O", "K") else None  # FULL's row, the key
            unchanged = self._fill(after, old, unchanged)
        fields = unchanged or None
        if op == "d":
            key = self._key(before)
            delete = self._envelope(before, None, "d", source, None, old_specials)
            out = [KafkaRecord(self.topic, key, delete)]
            return [*out, KafkaRecord(self.topic, key, None)] if self.tombstones else out
        key = self._key(after)
        if op == "u" and change.old_kind and before is not None:
            old_key = self._key(before)
            if old_key != key:
                # Debezium: the delete and its tombstone name the new key, the create the old
                assert old_key is not None and key is not None
                newkey = [("__debezium.newkey", key)]
                delete = self._envelope(before, None, "d", source, None, old_specials)
                out = [KafkaRecord(self.topic, old_key, delete, newkey)]
                if self.tombstones:
                    out.append(KafkaRecord(self.topic, old_key, None, newkey))
                create = self._envelope(None, after, "c", source, fields, new_specials)
                return [
                    *out,
                    KafkaRecord(self.topic, key, create, [("__debezium.oldkey", old_key)]),
                ]
        specials = {**old_specials, **new_specials}
        value = self._envelope(before, after, op, source, fields, specials)
        return [KafkaRecord(self.topic, key, value)]

    def row(
        self,
        tup: TupleData,
        unchanged: list[str] | None,
        specials: dict[str, str] | None = None,
        prefix: str = "",
    ) -> dict[str, Any]:
        """The row's values; values outside their schema's bounds are clamped and, like
        NaN numerics, listed in `specials` with PostgreSQL's text (special_values)."""
        assert len(tup.kinds) == len(self.table.relation.columns)
        out: dict[str, Any] = {}
        for index, name, codec in zip(
            self.table.kept, self.table.field_names, self.codecs, strict=True
        ):
            kind, raw = tup.kinds[index], tup.values[index]
            if kind in (KIND_TEXT, KIND_BINARY):
                assert raw is not None
                text = kind == KIND_TEXT
                value = codec.from_text(raw) if text else codec.from_binary(raw)
                bounds = codec.type.bounds
                special = value is None and codec.type.may_be_null
                if bounds is not None and value is not None:
                    special = not bounds[0] <= value <= bounds[1]
                    value = min(max(value, bounds[0]), bounds[1])
                if codec.clamped:  # an array with clamped elements
                    special = True
                    codec.clamped.clear()
                if special and specials is not None:
                    render = special_text(codec.type.wire) or array_text(codec.type)
                    specials[prefix + name] = (
                        raw.decode() if text or render is None else render(raw)
                    )
                out[name] = value
            else:
                assert kind in (KIND_NULL, KIND_UNCHANGED)
                out[name] = None
                if kind == KIND_UNCHANGED and unchanged is not None:
                    unchanged.append(name)
        return out

    def _fill(
        self, after: dict[str, Any], old: dict[str, Any] | None, names: list[str]
    ) -> list[str]:
        still = []
        for name in names:
            if old is not None and old.get(name) is not None:
                after[name] = old[name]
            else:
                if self.toast_mode == "placeholder":
                    after[name] = self.table.placeholder(name)
                still.append(name)
        return still

    def _key(self, row: dict[str, Any] | None) -> bytes | None:
        if self.key is None or self.key_id is None or row is None:
            return None
        return framed(self.key, self.key_id, {name: row[name] for name in self.key_names})

    def _envelope(
        self,
        before: dict[str, Any] | None,
        after: dict[str, Any] | None,
        op: str,
        source: dict[str, Any],
        unchanged: list[str] | None,
        specials: dict[str, str] | None = None,
    ) -> bytes:
        row_name = self.table.row_name
        datum = {
            "before": None if before is None else (row_name, before),
            "after": None if after is None else (row_name, after),
            "source": source,
            "op": op,
            "ts_ms": MS,
            "transaction": None,
            "unchanged_fields": unchanged,
            "special_values": specials or None,
        }
        return framed(self.envelope, self.value_id, datum)


def framed(schema: Any, schema_id: int, datum: Any) -> bytes:
    """The Confluent frame of `datum`, validated first: fastavro's writer does not check
    its input and would write a NULL in a boolean field as false."""
    fastavro.validation.validate(datum, schema, raise_errors=True)
    buf = io.BytesIO()
    buf.write(struct.pack(">bI", 0, schema_id))
    fastavro.schemaless_writer(buf, schema, datum)
    return buf.getvalue()
