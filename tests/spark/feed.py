"""Test input made by the bridge's own schema + serializer path: the exact bytes it produces.

`TableFeed` plays one PostgreSQL table: rows are dicts of PostgreSQL text values, every call
is one committed transaction with a fresh commit LSN, and records go through `EncoderCache`
(registration in the real registry) and `ChangeEncoder.records` to a real Kafka topic.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from bridge.decode.messages import (
    KIND_NULL,
    KIND_TEXT,
    KIND_UNCHANGED,
    Column,
    Relation,
    TupleData,
)
from bridge.encode.records import SourceBlock, TxSource
from bridge.encoders import EncoderCache
from bridge.events.model import Change
from bridge.kafka.registry import ConfluentClient, Registry
from bridge.record import KafkaRecord
from bridge.schema import CodecOptions, StaticCatalog
from bridge.schema.table import ColumnDetails, TableDetails

UNCHANGED = object()  # an unchanged TOASTed value: not sent by PostgreSQL
Row = Mapping[str, Any]  # column -> PostgreSQL text (str), None (NULL) or UNCHANGED
OID = {"int4": 23, "int8": 20, "text": 25, "numeric": 1700, "timestamptz": 1184, "uuid": 2950}
OID |= {"int4[]": 1007, "jsonb": 3802, "date": 1082, "interval": 1186, "time": 1083}
OID |= {"float4": 700, "float8": 701}
_BLOCK = SourceBlock("srv", "db", "0.1.0")


def numeric_typmod(precision: int, scale: int) -> int:
    return ((precision << 16) | scale) + 4


class TableFeed:
    def __init__(
        self,
        bootstrap: str,
        registry_url: str,
        prefix: str,
        columns: Sequence[tuple[str, str, int]],
        key: Sequence[str],
        *,
        partitions: int = 2,
    ) -> None:
        self.topic = f"{prefix}.public.items"
        self.key = tuple(key)
        self.columns = list(columns)
        self.missing: dict[str, str] = {}  # column -> attmissingval text (ADD COLUMN DEFAULT)
        self._version = 0
        self._relation = self._new_relation()
        self.lsn = 0x1_0000_0000
        self.xid = 700
        self.produced: list[KafkaRecord] = []
        admin = AdminClient({"bootstrap.servers": bootstrap})
        futures = admin.create_topics([NewTopic(self.topic, partitions, 1)])
        futures[self.topic].result(timeout=30)
        self.producer = Producer(
            {"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 0}
        )
        self.encoders = EncoderCache(
            Registry(ConfluentClient({"url": registry_url})),
            StaticCatalog(),
            lambda _oid: TableDetails(
                self.key,
                {name: ColumnDetails(1, self.missing.get(name)) for name, _, _ in self.columns},
            ),
            lambda _rel: self.topic,
            server_name=prefix,
            options=CodecOptions(interval_mode="record"),  # Spark applies it as a struct
            toast_mode="list",
            tombstones=True,
            binary=False,
        )

    def _new_relation(self) -> Relation:
        self._version += 1
        cols = tuple(
            Column(1 if name in self.key else 0, name, OID[kind], typmod)
            for name, kind, typmod in self.columns
        )
        return Relation(None, 16384, "public", "items", "d", cols)

    def add_column(
        self, name: str, kind: str, typmod: int = -1, missing: str | None = None
    ) -> None:
        """ALTER TABLE ADD COLUMN (`missing`: its constant DEFAULT, PostgreSQL's text): a new
        Relation message, hence a new schema version."""
        self.columns.append((name, kind, typmod))
        if missing is not None:
            self.missing[name] = missing
        self._relation = self._new_relation()

    def retype_column(self, name: str, kind: str, typmod: int = -1) -> None:
        """ALTER TABLE ALTER COLUMN TYPE: a new Relation message with the column's new type."""
        self.columns = [(c, kind, typmod) if c == name else (c, k, t) for c, k, t in self.columns]
        self._relation = self._new_relation()

    def drop_column(self, name: str) -> None:
        """ALTER TABLE DROP COLUMN: a new Relation message without it."""
        self.columns = [col for col in self.columns if col[0] != name]
        self._relation = self._new_relation()

    def _tuple(self, row: Row, *, key_only: bool = False) -> TupleData:
        kinds = bytearray()
        values: list[bytes | None] = []
        for name, _, _ in self.columns:
            value = row.get(name) if (name in self.key or not key_only) else None
            if value is UNCHANGED:
                kinds.append(KIND_UNCHANGED)
                values.append(None)
            elif value is None:
                kinds.append(KIND_NULL)
                values.append(None)
            else:
                kinds.append(KIND_TEXT)
                values.append(str(value).encode())
        return TupleData(bytes(kinds), tuple(values))

    def _change(self, op: str, old: TupleData | None, new: TupleData | None, n: int) -> Change:
        return Change(op, self._relation, "K" if old else "", old, new, n, (), 0, None)

    def insert(self, row: Row) -> tuple[str, TupleData | None, TupleData | None]:
        return ("c", None, self._tuple(row))

    def update(
        self, row: Row, old_key: Row | None = None
    ) -> tuple[str, TupleData | None, TupleData | None]:
        """An UPDATE; `old_key` only when the primary key changed (PostgreSQL sends it then)."""
        old = self._tuple(old_key, key_only=True) if old_key is not None else None
        return ("u", old, self._tuple(row))

    def delete(self, key: Row) -> tuple[str, TupleData | None, TupleData | None]:
        return ("d", self._tuple(key, key_only=True), None)

    def truncate(self) -> tuple[str, TupleData | None, TupleData | None]:
        return ("t", None, None)

    def commit(self, *changes: tuple[str, TupleData | None, TupleData | None]) -> int:
        """Produce one transaction's changes (all with its commit LSN); returns that LSN."""
        self.lsn += 0x100
        self.xid += 1
        tx = TxSource(_BLOCK, self.xid, self.lsn, 800_000_000_000_000 + self.lsn)
        _, encoder = self.encoders.get(self._relation)
        for n, (op, old, new) in enumerate(changes):
            self.send(encoder.records(self._change(op, old, new, n), tx))
        self.flush()
        return self.lsn

    def send(self, records: Sequence[KafkaRecord]) -> None:
        for record in records:
            if record.headers is None:
                self.producer.produce(record.topic, key=record.key, value=record.value)
            else:
                headers: list[tuple[str, str | bytes | None]] = list(record.headers)
                self.producer.produce(
                    record.topic, key=record.key, value=record.value, headers=headers
                )
            self.produced.append(record)

    def flush(self) -> None:
        assert self.producer.flush(30) == 0
