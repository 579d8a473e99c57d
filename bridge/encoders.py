"""Relation version → topic + registered `ChangeEncoder`, built once and reused per row.

A new Relation message (ALTER TABLE, reconnect) yields a new `Relation` object; the
encoder is rebuilt then, and its schemas registered before the first row that needs
them is produced.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from typing import Any, Final

from bridge.config import Config
from bridge.decode.messages import Relation
from bridge.encode.plan import check_binary
from bridge.encode.records import ChangeEncoder, ToastMode
from bridge.registry import Registry, subject_name
from bridge.schema.catalog import PgCatalog, TypeCatalog
from bridge.schema.pgtypes import CodecOptions
from bridge.schema.table import ColumnDetails, TableCodec, TableDetails

_DETAILS_SQL: Final = """
SELECT a.attname, a.attndims, array_position(i.indkey::int2[], a.attnum)
FROM pg_attribute a
LEFT JOIN pg_index i ON i.indrelid = a.attrelid AND i.indisprimary
WHERE a.attrelid = %s AND a.attnum > 0 AND NOT a.attisdropped
"""


def codec_options(cfg: Config) -> CodecOptions:
    """The `avro.*` settings that decide column schemas (every CodecOptions field)."""
    fields = CodecOptions.__dataclass_fields__
    return CodecOptions(**{k: v for k, v in cfg.avro.model_dump().items() if k in fields})


def load_table_details(conn: Any, relid: int) -> TableDetails:
    """Primary key and array dimensions, which the Relation message does not carry."""
    rows = conn.execute(_DETAILS_SQL, (relid,)).fetchall()
    columns = {name: ColumnDetails(max(ndims or 1, 1)) for name, ndims, _ in rows}
    # indkey is an int2vector: 0-based, so the first key column is at position 0
    in_key = sorted((r for r in rows if r[2] is not None), key=lambda r: r[2])
    pk = tuple(name for name, _, _ in in_key)
    return TableDetails(pk, columns)


class EncoderCache:
    """`exclude_columns`: `filters.exclude_columns`, compiled once for every relation version."""

    def __init__(
        self,
        registry: Registry,
        catalog: TypeCatalog,
        details: Callable[[int], TableDetails],
        topic_for: Callable[[Relation], str],
        *,
        server_name: str,
        options: CodecOptions,
        toast_mode: ToastMode,
        tombstones: bool,
        binary: bool,
        exclude_columns: Iterable[str] = (),
    ) -> None:
        self._registry = registry
        self._catalog = catalog
        self._details = details
        self._topic_for = topic_for
        self._server = server_name
        self._options = options
        self._toast_mode: ToastMode = toast_mode
        self._tombstones = tombstones
        self._binary = binary
        self._exclude_columns = tuple(re.compile(p) for p in exclude_columns)
        self._by_oid: dict[int, tuple[Relation, str, ChangeEncoder]] = {}

    def get(self, relation: Relation) -> tuple[str, ChangeEncoder]:
        entry = self._by_oid.get(relation.oid)
        if entry is not None and entry[0] is relation:
            return entry[1], entry[2]
        topic, encoder = self._build(relation)
        self._by_oid[relation.oid] = (relation, topic, encoder)
        return topic, encoder

    def _build(self, relation: Relation) -> tuple[str, ChangeEncoder]:
        table = TableCodec(
            relation,
            self._catalog,
            self._details(relation.oid),
            self._options,
            self._server,
            exclude_columns=self._exclude_columns,
        )
        if self._binary:
            check_binary(table)
        topic = self._topic_for(relation)
        label = f"{relation.namespace}.{relation.name}"
        strategy = self._registry.strategy
        key_id = None
        if table.key_schema is not None:
            subject = subject_name(strategy, topic, f"{table.namespace}.Key", True)
            key_id = self._registry.register(subject, table.key_schema, table=label)
        subject = subject_name(strategy, topic, f"{table.namespace}.Envelope", False)
        value_id = self._registry.register(subject, table.envelope_schema, table=label)
        encoder = ChangeEncoder(
            table, key_id, value_id, toast_mode=self._toast_mode, tombstones=self._tombstones
        )
        return topic, encoder


def encoder_cache(
    cfg: Config,
    conn: Any,
    registry: Registry,
    topic_for: Callable[[Relation], str],
    *,
    binary: bool,
) -> EncoderCache:
    """The encoders as configured: shared by the stream and the snapshot readers."""
    return EncoderCache(
        registry,
        PgCatalog(conn),
        lambda oid: load_table_details(conn, oid),
        topic_for,
        server_name=cfg.kafka.topic_prefix,
        options=codec_options(cfg),
        toast_mode=cfg.avro.toast_mode,
        tombstones=cfg.pipeline.tombstones,
        binary=binary,
        exclude_columns=cfg.filters.exclude_columns,
    )
