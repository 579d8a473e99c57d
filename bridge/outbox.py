"""The outbox event router: Debezium's `io.debezium.transforms.outbox.EventRouter` as a
stage between the event stream and the producer (`outbox.*`; docs/concepts/filters-and-routing.md,
"Outbox event router").

A change of an outbox table (`outbox.tables`) never reaches the table's own topic. The
pipeline hands it here instead of to the table encoder, and gets back the records to
produce, each with its own topic:
- an insert becomes one event on the topic `outbox.topic_replacement` makes of the
  `route_by_column` value (`outbox.event.<aggregatetype>` by default; Kafka-invalid
  characters become `_`), keyed by `key_column`, its value the payload column, with the
  `id` header (the event id) and one header per `outbox.headers` column;
- an update is skipped and logged (`on_update: warn`/`error`) or stops the bridge
  (`fatal`); deletes and TRUNCATE are skipped, as Debezium's router skips them.

Encoding, as Debezium with the Avro converter writes it: the value is the payload column
alone, Avro of the column's type as the table encoder writes it (a jsonb/json/text payload
is a string, jsonb and json with `connect.name` io.debezium.data.Json; bytea is bytes),
and the key the key column's; both `["null", T]`, which registers as a BACKWARD-compatible
version of the subject Debezium's optional or required field schema made. A NULL payload
(or an empty one with `tombstone_on_empty_payload`) is a record without a value; a NULL key
a record without a key. Headers hold the value's PostgreSQL text (UTF-8), which is what
Connect's default SimpleHeaderConverter writes for strings, uuids and numbers; a NULL
value leaves its header out.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from typing import Any, Final

from bridge.config import OutboxConfig, java_regex, java_replacement
from bridge.decode.messages import KIND_BINARY, KIND_NULL, KIND_TEXT, Relation, TupleData
from bridge.encode.columns import BAD_INPUT, Converter, codec_of
from bridge.encode.records import framed_writer
from bridge.errors import ConfigError, SchemaError, ValueConversionError
from bridge.events.model import Change
from bridge.kafka.registry import Registry, subject_name
from bridge.record import Headers, KafkaRecord
from bridge.routing import kafka_safe
from bridge.schema.table import TableCodec

log: Final = logging.getLogger("bridge.outbox")


class _Field:
    """One outbox column: where its value is in a tuple and how it is converted."""

    def __init__(self, table: TableCodec, setting: str, name: str) -> None:
        relation = table.relation
        index = next((i for i, c in enumerate(relation.columns) if c.name == name), None)
        if index is None or index not in table.kept:
            raise ConfigError(
                f"outbox table {relation.namespace}.{relation.name} has no column {name!r} "
                f"({setting})",
                hint=f"set outbox.{setting} to one of its columns, or leave the table out "
                "of outbox.tables",
            )
        t = table.types[table.kept.index(index)]
        codec = codec_of(t)
        self.table = f"{relation.namespace}.{relation.name}"
        self.column = name
        self.pg_type = t.pg_type_name
        self.label = f"{self.table}.{name}"
        self.index = index
        self.avro: list[Any] = ["null", t.avro_schema]
        self.type_name: str = t.avro_schema.get("type", "value")
        self._text: Converter = codec.text
        self._binary = codec.binary

    def raw(self, row: TupleData) -> tuple[int, bytes | None]:
        return row.kinds[self.index], row.values[self.index]

    def value(self, row: TupleData) -> Any:
        kind, raw = self.raw(row)
        if kind == KIND_NULL or raw is None:
            return None
        convert = self._text if kind == KIND_TEXT else self._binary
        if kind not in (KIND_TEXT, KIND_BINARY) or convert is None:
            raise SchemaError(
                f"{self.label}: an outbox value arrived without its data (kind {chr(kind)!r})",
                hint="an inserted row carries every value; report this with the table definition",
            )
        try:
            return convert(raw)
        except BAD_INPUT as exc:
            raise self.error(raw, exc) from exc

    def error(self, value: object, reason: Exception) -> ValueConversionError:
        """A value of this column that cannot be converted or written, as the table
        encoder reports one (table, column and type named)."""
        return ValueConversionError(self.table, self.column, self.pg_type, value, reason)

    def text(self, row: TupleData) -> bytes | None:
        """PostgreSQL's text of the value (its converted form's, in binary mode)."""
        kind, raw = self.raw(row)
        if kind == KIND_TEXT:
            return raw
        value = self.value(row)
        return None if value is None else str(value).encode()


class _Table:
    """The outbox columns of one relation version, and a writer per routed topic."""

    def __init__(self, cfg: OutboxConfig, table: TableCodec) -> None:
        self.relation = table.relation
        self.event_id = _Field(table, "id_column", cfg.id_column)
        self.key = _Field(table, "key_column", cfg.key_column)
        self.payload = _Field(table, "payload_column", cfg.payload_column)
        self.route_by = _Field(table, "route_by_column", cfg.route_by_column)
        self.headers = [(h, _Field(table, "headers", c)) for c, h in cfg.headers.items()]
        self.writers: dict[str, tuple[Callable[[Any], bytes], Callable[[Any], bytes]]] = {}


class OutboxRouter:
    """Turns outbox table changes into routed events (see the module docstring)."""

    def __init__(
        self,
        cfg: OutboxConfig,
        codec_for: Callable[[Relation], TableCodec],
        registry: Registry,
        ensure_topic: Callable[[str], None],
    ) -> None:
        self._cfg = cfg
        self._topic_regex = re.compile(java_regex(cfg.topic_regex))
        self._replacement = java_replacement(cfg.topic_replacement)
        self._codec_for = codec_for
        self._registry = registry
        self._ensure_topic = ensure_topic
        self._by_oid: dict[int, _Table] = {}

    def matches(self, relation: Relation) -> bool:
        return self._cfg.holds(relation.namespace, relation.name)

    def route(self, change: Change) -> list[KafkaRecord]:
        """The event of an insert or snapshot read; nothing for other operations."""
        relation, row = change.relation, change.new
        if change.op == "u":
            self._unexpected_update(relation)
            return []
        if change.op not in ("c", "r") or relation is None or row is None:
            return []
        table = self._table(relation)
        topic = self._topic(table, row)
        write_key, write_value = self._writers(table, topic)
        key = table.key.value(row)
        payload = table.payload.value(row)
        empty = payload is None or (
            self._cfg.tombstone_on_empty_payload and not str(payload).strip()
        )
        headers: Headers = []
        for name, field in (("id", table.event_id), *table.headers):
            text = field.text(row)
            if text is not None:
                headers.append((name, text))
        return [
            KafkaRecord(
                topic,
                None if key is None else write_key(key),
                None if empty else write_value(payload),
                headers,
            )
        ]

    def _unexpected_update(self, relation: Relation | None) -> None:
        name = "?" if relation is None else f"{relation.namespace}.{relation.name}"
        if self._cfg.on_update == "fatal":
            raise ConfigError(
                f"outbox table {name}: a row was updated; outbox rows are only inserted",
                hint="stop updating outbox rows, or set outbox.on_update: warn to skip updates",
            )
        report = log.warning if self._cfg.on_update == "warn" else log.error
        report("outbox table %s: an update was skipped (outbox rows are only inserted)", name)

    def _table(self, relation: Relation) -> _Table:
        table = self._by_oid.get(relation.oid)
        if table is None or table.relation is not relation:
            table = self._by_oid[relation.oid] = _Table(self._cfg, self._codec_for(relation))
        return table

    def _topic(self, table: _Table, row: TupleData) -> str:
        routed = table.route_by.value(row)
        if routed is None:
            raise SchemaError(
                f"{table.route_by.label}: NULL in the column events are routed by",
                hint="give every outbox row a value there (outbox.route_by_column)",
            )
        text = str(routed)
        match = self._topic_regex.fullmatch(text)
        return kafka_safe(text if match is None else match.expand(self._replacement))

    def _writers(
        self, table: _Table, topic: str
    ) -> tuple[Callable[[Any], bytes], Callable[[Any], bytes]]:
        writers = table.writers.get(topic)
        if writers is None:
            self._ensure_topic(topic)
            label = f"{table.relation.namespace}.{table.relation.name}"
            made = []
            for field, is_key in ((table.key, True), (table.payload, False)):
                subject = subject_name(self._registry.strategy, topic, field.type_name, is_key)
                schema_id = self._registry.register(subject, field.avro, table=label)
                made.append(framed_writer(field.avro, schema_id, error=field.error))
            writers = table.writers[topic] = (made[0], made[1])
        return writers
