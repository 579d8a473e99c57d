"""Relation version → topic + registered `ChangeEncoder`, built once and reused per row.

A new Relation message (ALTER TABLE, reconnect) yields a new `Relation` object; the
encoder is rebuilt then, and its schemas registered before the first row that needs
them is produced.

Field defaults: a column's missing value (what rows written before ADD COLUMN read as) is
its field's Avro default (`bridge.encode.defaults`). A table rewrite (ALTER COLUMN TYPE, a
volatile ADD COLUMN, VACUUM FULL) stores the value in every row and clears it from the
catalog, but the records written before the ADD COLUMN still lack the field: so a default
the subject's newest schema gives a field of the same name and type is kept when the catalog
no longer has one.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Final

from bridge.config import ColumnRule, Config
from bridge.decode.messages import Relation
from bridge.encode.defaults import missing_defaults, without_key
from bridge.encode.plan import check_binary
from bridge.encode.records import ChangeEncoder, ToastMode
from bridge.errors import TableDroppedError
from bridge.kafka.registry import Registry, subject_name
from bridge.kafka.topics import topic_creator
from bridge.schema.catalog import PgCatalog, TypeCatalog, row_identity
from bridge.schema.pgtypes import CodecOptions
from bridge.schema.table import ColumnDetails, TableCodec, TableDetails

# attmissingval is a one-element anyarray: its text read back as text[] gives the element's
# text (the type's output form, which the text decoders read).
_DETAILS_SQL: Final = """
SELECT a.attname, a.attndims,
       CASE WHEN a.atthasmissing THEN (a.attmissingval::text::text[])[1] END
FROM pg_attribute a
WHERE a.attrelid = %s AND a.attnum > 0 AND NOT a.attisdropped
"""


def codec_options(cfg: Config) -> CodecOptions:
    """The `avro.*` settings that decide column schemas (every CodecOptions field)."""
    fields = CodecOptions.__dataclass_fields__
    return CodecOptions(**{k: v for k, v in cfg.avro.model_dump().items() if k in fields})


def load_table_details(conn: Any, relid: int) -> TableDetails:
    """The record key's columns (`RowIdentity.record_key`: the Relation message flags them
    but in column order, and flags every column under REPLICA IDENTITY FULL), array
    dimensions and missing values, which the Relation message does not carry."""
    rows = conn.execute(_DETAILS_SQL, (relid,)).fetchall()
    columns = {name: ColumnDetails(max(ndims or 1, 1), missing) for name, ndims, missing in rows}
    return TableDetails(row_identity(conn, relid).record_key, columns)


def _flagged_key(relation: Relation) -> tuple[str, ...] | None:
    """The record key's columns (`RowIdentity.record_key`) from the Relation message's key
    flags alone, where they say it exactly: REPLICA IDENTITY NOTHING (no key), USING INDEX
    (the index's columns, in column order, the flags' order) and DEFAULT with a primary key
    of at most one column (none: no key). None for a primary key of several columns (the
    key is in index order, which the flags do not give) and FULL (every column flagged)."""
    flagged = tuple(c.name for c in relation.columns if c.is_key)
    if relation.replica_identity == "n":
        return ()
    if relation.replica_identity == "i" or (relation.replica_identity == "d" and len(flagged) <= 1):
        return flagged
    return None


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
        column_rules: Iterable[ColumnRule] = (),
        key_columns: Mapping[str, tuple[str, ...]] | None = None,
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
        self._column_rules = tuple((re.compile(rule.match), rule) for rule in column_rules)
        self._key_columns = tuple((re.compile(p), c) for p, c in (key_columns or {}).items())
        self._by_oid: dict[int, tuple[Relation, str, ChangeEncoder]] = {}
        self._known: dict[int, TableDetails] = {}  # each table's last catalog facts read

    def get(self, relation: Relation) -> tuple[str, ChangeEncoder]:
        entry = self._by_oid.get(relation.oid)
        if entry is not None and entry[0] is relation:
            return entry[1], entry[2]
        topic, encoder = self._build(relation)
        self._by_oid[relation.oid] = (relation, topic, encoder)
        return topic, encoder

    def codec(self, relation: Relation) -> TableCodec:
        """The relation's column types as its encoder would have them, nothing registered
        (the outbox router writes single columns: bridge.outbox)."""
        return self._table(relation, self._table_details(relation))

    def _table_details(self, relation: Relation) -> TableDetails:
        """The table's catalog facts; those read for its previous Relation version when
        it has been dropped since: the stream still carries what it committed before the
        DROP, and a streamed transaction sends its Relation message again (a change of its
        key after the version read would not be seen). A table dropped before any version
        was read (created and dropped in one transaction: test_decoding's ddl script) is
        keyed as the Relation message says, where it says the key exactly
        (`_flagged_key`)."""
        oid = relation.oid
        try:
            details = self._details(oid)
        except TableDroppedError:
            known = self._known.get(oid)
            if known is not None:
                return known
            key = _flagged_key(relation)
            if key is None:
                raise
            return TableDetails(key, {})
        self._known[oid] = details
        return details

    def _build(self, relation: Relation) -> tuple[str, ChangeEncoder]:
        details = self._table_details(relation)
        table = self._table(relation, details)
        topic = self._topic_for(relation)
        strategy = self._registry.strategy
        subject = subject_name(strategy, topic, f"{table.namespace}.Envelope", False)
        missing = {n: c.missing for n, c in details.columns.items() if c.missing is not None}
        defaults = carried_defaults(self._registry.current(subject), table)
        if missing:
            keyless = self._table(*without_key(relation, details), keyed=False)
            defaults.update(missing_defaults(keyless, missing))
        if defaults:
            table = self._table(relation, details, defaults)
        if self._binary:
            check_binary(table)
        label = f"{relation.namespace}.{relation.name}"
        key_id = None
        if table.key_schema is not None:
            key_subject = subject_name(strategy, topic, f"{table.namespace}.Key", True)
            key_id = self._registry.register(key_subject, table.key_schema, table=label)
        value_id = self._registry.register(subject, table.envelope_schema, table=label)
        encoder = ChangeEncoder(
            table,
            key_id,
            value_id,
            topic=topic,
            toast_mode=self._toast_mode,
            tombstones=self._tombstones,
        )
        return topic, encoder

    def _table(
        self,
        relation: Relation,
        details: TableDetails,
        defaults: dict[str, Any] | None = None,
        *,
        keyed: bool = True,
    ) -> TableCodec:
        """`keyed=False`: the keyless version `missing_defaults` encodes with, where chosen
        key columns (`avro.key_columns`) do not apply."""
        return TableCodec(
            relation,
            self._catalog,
            details,
            self._options,
            self._server,
            exclude_columns=self._exclude_columns,
            column_rules=self._column_rules,
            key_columns=self._key_columns if keyed else (),
            defaults=defaults,
        )


def carried_defaults(previous: dict[str, Any] | None, table: TableCodec) -> dict[str, Any]:
    """PostgreSQL column name -> the non-null default the subject's newest envelope schema
    gives its field, where that field has the same name and value type in `table`."""
    if previous is None:
        return {}
    fields = previous["fields"][0]["type"]
    row = next((t for t in fields if isinstance(t, dict)), None)
    if row is None:
        return {}
    types = dict(zip(table.field_names, table.types, strict=True))
    out = {}
    for field in row["fields"]:
        t = types.get(field["name"])
        branches = field["type"]
        if field.get("default") is None or t is None or not isinstance(branches, list):
            continue
        if branches[0] == t.avro_schema:
            out[field.get("pg.name", field["name"])] = field["default"]
    return out


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
        topic_creator(cfg).wrap(topic_for) if cfg.kafka.topic_creation else topic_for,
        server_name=cfg.kafka.topic_prefix,
        options=codec_options(cfg),
        toast_mode=cfg.avro.toast_mode,
        tombstones=cfg.pipeline.tombstones,
        binary=binary,
        exclude_columns=cfg.filters.exclude_columns,
        column_rules=cfg.avro.column_rules,
        key_columns=cfg.avro.key_columns,
    )
