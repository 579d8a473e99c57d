"""Relation metadata → Avro key, row and envelope schemas, and each column's type.

Built once per relation version (every Relation message); `bridge.encode.plan` compiles
the one encoder of that version from it.

Naming rule (deterministic, documented in the README): every character outside
`[A-Za-z0-9_]` becomes `_`, a leading digit gets a `_` prefix, and a name that
then collides with an earlier column gets `_2`, `_3`, … in column order. The
original PostgreSQL name is kept in the field property `pg.name`.

Every row field is `["null", T]` with default null, key columns included in the
row: a delete's before-image under REPLICA IDENTITY DEFAULT carries only the key,
and nullable fields keep every ALTER TABLE BACKWARD-compatible.

Columns matched by `filters.exclude_columns` are absent from the row schema and rows;
the kept column indexes are decided here, so the per-row cost does not grow.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import Any, Final, NamedTuple

from bridge.decode.messages import Relation
from bridge.errors import SchemaError
from bridge.schema.avronames import fold_named_types
from bridge.schema.catalog import TypeCatalog
from bridge.schema.fixed import load_fixed
from bridge.schema.pgtypes import CodecOptions, ColumnType, column_type

UNAVAILABLE: Final = "__bridge_unavailable_value"
_INVALID: Final = re.compile(r"[^A-Za-z0-9_]")


class ColumnDetails(NamedTuple):
    """What the Relation message lacks: array dimensions, from pg_attribute."""

    ndims: int


class TableDetails(NamedTuple):
    """Catalog facts for one table, read when its Relation message arrives."""

    primary_key: tuple[str, ...]  # empty: fall back to the replica identity flags
    columns: dict[str, ColumnDetails]


def avro_name(name: str) -> str:
    out = _INVALID.sub("_", name)
    if not out or out[0].isdigit():
        out = "_" + out
    return out


def unique_names(names: Sequence[str]) -> list[str]:
    seen: set[str] = set()
    result = []
    for name in names:
        base = avro_name(name)
        candidate, n = base, 1
        while candidate in seen:
            n += 1
            candidate = f"{base}_{n}"
        seen.add(candidate)
        result.append(candidate)
    return result


class TableCodec:
    """Schemas and column types for one version of one table."""

    __slots__ = (
        "envelope_schema",
        "field_names",
        "kept",
        "key_index",
        "key_names",
        "key_positions",
        "key_schema",
        "namespace",
        "placeholders",
        "relation",
        "row_name",
        "types",
    )

    def __init__(
        self,
        relation: Relation,
        catalog: TypeCatalog,
        details: TableDetails,
        options: CodecOptions,
        server_name: str,
        *,
        exclude_columns: Iterable[re.Pattern[str]] = (),
    ) -> None:
        self.relation = relation
        self.kept = self._kept_columns(relation, tuple(exclude_columns))
        self.key_index = self._key_columns(relation, details)
        self._check_key_kept()
        columns = [relation.columns[i] for i in self.kept]
        names = unique_names([c.name for c in columns])
        self.field_names = tuple(names)
        self.namespace = ".".join(
            avro_name(p) for p in (server_name, relation.namespace, relation.name)
        )
        codecs = [
            self._codec(c.name, c.type_oid, c.typmod, catalog, details, options) for c in columns
        ]
        self.types = tuple(codecs)  # per kept column, for bridge.encode.plan
        self.placeholders = {
            name: _placeholder(codec.avro_schema) for name, codec in zip(names, codecs, strict=True)
        }
        fields = [
            {
                "name": name,
                "type": ["null", codec.avro_schema],
                "default": None,
                "pg.name": col.name,
                "pg.type": codec.pg_type_name,
            }
            for name, col, codec in zip(names, columns, codecs, strict=True)
        ]
        self.row_name = f"{self.namespace}.Value"
        row = {"type": "record", "name": "Value", "namespace": self.namespace, "fields": fields}
        position = {col: pos for pos, col in enumerate(self.kept)}
        key_pos = [position[i] for i in self.key_index]
        self.key_positions = tuple(key_pos)
        self.key_names = tuple(names[pos] for pos in key_pos)
        self.key_schema: dict[str, Any] | None = None
        if key_pos:
            key_fields = [
                {
                    "name": names[pos],
                    # a NaN numeric key converts to None (decimal has no NaN)
                    "type": ["null", codecs[pos].avro_schema]
                    if codecs[pos].may_be_null
                    else codecs[pos].avro_schema,
                    "pg.name": columns[pos].name,
                }
                for pos in key_pos
            ]
            self.key_schema = fold_named_types(
                {"type": "record", "name": "Key", "namespace": self.namespace, "fields": key_fields}
            )
        self.envelope_schema: dict[str, Any] = fold_named_types(
            {
                "type": "record",
                "name": "Envelope",
                "namespace": self.namespace,
                "connect.name": f"{self.namespace}.Envelope",
                "fields": [
                    {"name": "before", "type": ["null", row], "default": None},
                    {"name": "after", "type": ["null", self.row_name], "default": None},
                    {"name": "source", "type": load_fixed("source")},
                    {"name": "op", "type": "string"},
                    {"name": "ts_ms", "type": ["null", "long"], "default": None},
                    {
                        "name": "transaction",
                        "type": ["null", load_fixed("transaction_block")],
                        "default": None,
                    },
                    {
                        "name": "unchanged_fields",
                        "type": ["null", {"type": "array", "items": "string"}],
                        "default": None,
                        "doc": "after-image fields whose unchanged TOASTed value was not sent",
                    },
                    {
                        "name": "special_values",
                        "type": ["null", {"type": "map", "values": "string"}],
                        "default": None,
                        "doc": "before.<field> / after.<field> -> PostgreSQL's text of a value "
                        "its field cannot hold (clamped date/time, numeric NaN)",
                    },
                ],
            }
        )

    @staticmethod
    def _codec(
        name: str,
        type_oid: int,
        typmod: int,
        catalog: TypeCatalog,
        details: TableDetails,
        options: CodecOptions,
    ) -> ColumnType:
        col = details.columns.get(name)
        return column_type(type_oid, typmod, catalog, options, col.ndims if col else 1)

    @staticmethod
    def _kept_columns(relation: Relation, exclude: tuple[re.Pattern[str], ...]) -> tuple[int, ...]:
        prefix = f"{relation.namespace}.{relation.name}."
        return tuple(
            i
            for i, c in enumerate(relation.columns)
            if not any(p.fullmatch(prefix + c.name) for p in exclude)
        )

    def _check_key_kept(self) -> None:
        """The record key identifies the row (partitioning, compaction): it cannot lose a part."""
        kept = set(self.kept)
        for i in self.key_index:
            if i not in kept:
                rel = self.relation
                raise SchemaError(
                    f"filters.exclude_columns excludes {rel.namespace}.{rel.name}."
                    f"{rel.columns[i].name}, a key column of that table",
                    hint="narrow the pattern so that it matches no primary-key or "
                    "replica-identity column",
                )

    @staticmethod
    def _key_columns(relation: Relation, details: TableDetails) -> tuple[int, ...]:
        """Primary key columns (as Debezium keys), else the replica identity index."""
        names = [c.name for c in relation.columns]
        if details.primary_key and all(k in names for k in details.primary_key):
            return tuple(names.index(k) for k in details.primary_key)
        if relation.replica_identity == "f":
            return ()  # FULL marks every column as key: no usable key
        return tuple(i for i, c in enumerate(relation.columns) if c.is_key)

    def placeholder(self, field: str) -> Any:
        """Debezium-style stand-in for an unchanged TOASTed value, where the type allows one."""
        return self.placeholders.get(field)


def _placeholder(schema: Any) -> Any:
    kind = schema.get("type") if isinstance(schema, dict) else schema
    if kind == "string" and not (isinstance(schema, dict) and "logicalType" in schema):
        return UNAVAILABLE
    if kind == "bytes" and not (isinstance(schema, dict) and "logicalType" in schema):
        return UNAVAILABLE.encode()
    return None
