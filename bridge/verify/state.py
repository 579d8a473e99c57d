"""What a key-based consumer holds after reading a topic: per key, a digest of each column.

Both sides of a verification are brought to one form here. A topic record and a row read
from PostgreSQL (encoded by the bridge's own encoder) are decoded with fastavro from the
registered writer schema into the table's current schema, with logical types left as their
wire values (a +infinity timestamp or a NaN decimal has no Python object, and raw values
compare exactly); each row column is reduced to an 8-byte digest of that value. Nothing
reads a source or envelope field by position, so fields added to the envelope or source
block change nothing here.

The fold follows `bridge.spark.apply` (a key-based consumer's rules):
- the newest change per key wins; a delete removes the key (its column digests are kept
  aside, as the apply's soft delete keeps the row, for a later key change's create);
- a column listed in `unchanged_fields` (an unsent TOASTed value) keeps the key's previous
  value; on the create of a primary-key change (the `__debezium.oldkey` header) it comes
  from the old key's row; with neither it is null, as in the apply;
- a TRUNCATE removes every key last written before it, and later-read changes older than
  it are dropped (they may come from another partition);
- tombstones change nothing: the delete before each one already did.

The states live in a `bridge.verify.store.KeyStore`: a dict, or an SQLite file once they
pass the memory budget. The fold above is the same for both; it reads a key's previous
state only where a rule needs it (a delete, an unsent TOASTed value), so a spilled store
costs a disk look-up for those records only.

Records of transactions committed at or after the verification point are left out: a
streamed change by its commit LSN (`source.lsn`, or the commit-LSN field where the source
block has one), a snapshot read (op "r") by its snapshot's LSN, which sees what committed
before it.
"""

from __future__ import annotations

import io
import json
import struct
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Final

import fastavro

from bridge.errors import SchemaError
from bridge.verify.store import DEFAULT_MEMORY_LIMIT, ROW_DIGEST, Kept, KeyStore

OLD_KEY_HEADER: Final = "__debezium.oldkey"
_HEADER: Final = struct.Struct(">bI")
DIGEST_SIZE: Final = 8
NO_ROW: Final = bytes(ROW_DIGEST)
_PACK: Final = struct.Struct("<q").pack
# A future source block carries the commit LSN in its own field and the event's LSN in
# `lsn`; until then `lsn` is the commit LSN.
_COMMIT_LSN_FIELDS: Final = ("commit_lsn", "lsn")


def digest(value: Any) -> bytes:
    """8 bytes standing for one decoded value (repr keeps type: 1 and '1' differ). Python's
    string hash (64-bit SipHash) is salted per process: digests are compared only within
    the process that made them, never stored."""
    return _PACK(hash(repr(value)))


NULL_DIGEST: Final = digest(None)


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


_NOT_OURS: Final = "verify reads only topics the bridge writes; remove the foreign record"


class Decoder:
    """Framed Avro -> dicts in the table's current key and envelope schemas.

    `writer` fetches a registered schema's text by id (cached here)."""

    def __init__(
        self,
        key_schema: Mapping[str, Any] | None,
        envelope_schema: Mapping[str, Any],
        writer: Callable[[int], str],
    ) -> None:
        self._key_raw: Any = None if key_schema is None else raw_schema(key_schema)
        self.integer_key = self._key_raw is not None and _one_integer(self._key_raw)
        self._key_reader: Any = (
            None if self._key_raw is None else fastavro.parse_schema(self._key_raw)
        )
        self._same_key: dict[int, bool] = {}
        self._value_raw = raw_schema(envelope_schema)
        self._value_reader = fastavro.parse_schema(self._value_raw)
        self.fields = row_fields(envelope_schema)
        self._writer = writer
        self._head, self._rest, self._after_only = _split(self._value_raw)
        # (schema id, reader is the key's) -> (parsed writer, reader or None when the same)
        self._plans: dict[tuple[int, bool], tuple[Any, Any]] = {}

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

    def key_fields(self, data: bytes, where: str) -> dict[str, Any]:
        """The key's fields as wire values."""
        if self._key_reader is None:
            raise SchemaError(f"{where}: the table has no key schema", hint="not verifiable")
        return self._decode(data, self._key_reader, where)

    def key(self, data: bytes, where: str) -> bytes:
        """The key's Avro body in the current key schema: equal keys, equal bytes, whatever
        the schema id. A key written with the current schema is used as it is (Avro's
        encoding of a record of scalars is unique); any other is decoded and re-encoded."""
        found = schema_id(data, where)
        same = self._same_key.get(found)
        if same is None:
            writer = raw_schema(json.loads(self._writer(found)))
            same = self._same_key[found] = writer == self._key_raw
        if same:
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

    def envelope_row(self, data: bytes, where: str) -> tuple[dict[str, Any], bytes | None]:
        """`envelope`, and the `after` row's Avro body when the record has one and no
        `before`, written with the current schema (else None). Its end is found by reading
        the envelope in two parts, `before` + `after` and the rest: no extra decoding."""
        found = schema_id(data, where)
        _, resolve = self._plans.get((found, False)) or self._plan(found, False)
        if resolve is not None or data[5:7] != self._after_only:
            return self._decode(data, self._value_reader, where), None
        stream = io.BytesIO(data)
        stream.seek(_HEADER.size)
        try:
            head = fastavro.schemaless_reader(stream, self._head, None)
            end = stream.tell()
            out = fastavro.schemaless_reader(stream, self._rest, None)
        except Exception as exc:  # as in `_decode`
            raise SchemaError(
                f"{where}: cannot decode with schema id {found}: {exc}", hint=_NOT_OURS
            ) from None
        assert isinstance(head, dict) and isinstance(out, dict)
        out.update(head)
        return out, data[7:end]

    def digests(self, row: Mapping[str, Any]) -> list[bytes]:
        return [digest(row.get(f)) for f in self.fields]


def _one_integer(key_schema: Mapping[str, Any]) -> bool:
    """A key of one int or long column (logical types stripped): its Avro body is one
    zigzag varint, which the key store keeps in numeric order (`bridge.verify.store`)."""
    fields = key_schema["fields"]
    if len(fields) != 1:
        return False
    kind = fields[0]["type"]
    return (kind.get("type") if isinstance(kind, dict) else kind) in ("int", "long")


def _split(envelope: Mapping[str, Any]) -> tuple[Any, Any, bytes]:
    """The envelope as two records read one after the other (`before` and `after`, then
    the other fields) and the union tags of a record with no `before` and an `after`."""
    fields = envelope["fields"]
    head = [f for f in fields if f["name"] in ("before", "after")]
    if [f["name"] for f in fields[:2]] != ["before", "after"]:
        raise SchemaError("envelope schema not starting with before, after", hint=_NOT_OURS)
    rest = {**envelope, "name": envelope["name"] + "Rest", "fields": fields[2:]}
    branches = head[0]["type"]
    null_first = isinstance(branches, list) and branches[0] == "null"
    tags = b"\x00\x02" if null_first else b"\x02\x00"
    return (
        fastavro.parse_schema({**envelope, "fields": head}),
        fastavro.parse_schema(rest),
        tags,
    )


def row_digest(body: bytes) -> bytes:
    """`ROW_DIGEST` bytes standing for a row's Avro body (never NO_ROW; salted like
    `digest`)."""
    return _PACK(hash(body) or 1)


def _show(value: Any) -> Any:
    return value.hex() if isinstance(value, bytes) else repr(value)


def commit_lsn(envelope: Mapping[str, Any]) -> int:
    source = envelope.get("source") or {}
    for name in _COMMIT_LSN_FIELDS:
        found = source.get(name)
        if found is not None:
            return int(found)
    return 0


class TopicState:
    """Records folded into per-key `Kept` states (see the module docstring)."""

    def __init__(
        self,
        decoder: Decoder,
        point: int,
        *,
        track_later: bool = False,
        memory_limit: int = DEFAULT_MEMORY_LIMIT,
    ) -> None:
        self.decoder = decoder
        self.point = point
        # by `Decoder.key`; on disk beyond the limit
        self.keys = KeyStore(memory_limit, integer_key=decoder.integer_key)
        # with `track_later`: keys changed at or after the point (-> their framed key), which
        # a lake may already show in a newer state (`bridge.verify.lake`)
        self.later: dict[bytes, bytes] | None = {} if track_later else None
        self.truncated = 0  # LSN of the newest TRUNCATE folded
        self.records = 0
        self.after_point = 0  # records left out: committed at or after the point

    def fold(
        self,
        where: str,
        partition: int,
        key: bytes | None,
        env: Mapping[str, Any] | None,
        headers: Iterable[tuple[str, bytes | None]] | None,
        row: bytes | None = None,
    ) -> None:
        """One record, its value decoded by `decoder.envelope` (None for a tombstone), and
        its row's body from `decoder.envelope_row` when it gave one."""
        self.records += 1
        if env is None:
            return
        op, lsn = env.get("op"), commit_lsn(env)
        if (lsn > self.point) if op == "r" else (lsn >= self.point):
            self.after_point += 1
            if self.later is not None and key is not None and op != "t":
                self.later[self.decoder.key(key, where)] = key
            return
        if op == "t":
            if lsn > self.truncated:
                self.truncated = lsn
                self.keys.drop_older(lsn)
            return
        if lsn < self.truncated or key is None:
            return
        name = self.decoder.key(key, where)
        # a key's records sit in one partition, in commit order; its previous state is read
        # only where a rule needs it (a look-up on disk when the store spilled)
        if op == "d":
            old = self.keys.get(name)
            columns = (
                old.columns if old is not None else NO_ROW + NULL_DIGEST * len(self.decoder.fields)
            )
            self.keys.put(name, Kept(lsn, True, columns, partition, key))
            return
        digests = self.decoder.digests(env.get("after") or {})
        unchanged = env.get("unchanged_fields")
        whole = NO_ROW if row is None else row_digest(row)
        if unchanged:
            moved = _header(headers, OLD_KEY_HEADER) if op == "c" else None
            base = (
                self.keys.get(name)
                if moved is None
                else self.keys.get(self.decoder.key(moved, f"{where} {OLD_KEY_HEADER}"))
            )
            self._carry(digests, unchanged, base)
            whole = NO_ROW
        self.keys.put(name, Kept(lsn, False, whole + b"".join(digests), partition, key))

    def close(self) -> None:
        """Remove the key store's file, if it spilled to disk."""
        self.keys.close()

    def _carry(self, digests: list[bytes], unchanged: Iterable[str], base: Kept | None) -> None:
        """Unsent columns keep `base`'s value (the key's own, or a moved key's old one),
        null without one."""
        names = set(unchanged)
        for i, field in enumerate(self.decoder.fields):
            if field in names:
                at = i * DIGEST_SIZE
                digests[i] = NULL_DIGEST if base is None else base.digests[at : at + DIGEST_SIZE]


def _header(headers: Iterable[tuple[str, bytes | None]] | None, name: str) -> bytes | None:
    for found, value in headers or ():
        if found == name and value is not None:
            return value
    return None


def differing_columns(fields: tuple[str, ...], a: bytes, b: bytes) -> list[str]:
    return [
        f
        for i, f in enumerate(fields)
        if a[i * DIGEST_SIZE : (i + 1) * DIGEST_SIZE] != b[i * DIGEST_SIZE : (i + 1) * DIGEST_SIZE]
    ]
