"""Relation metadata → Avro key, row and envelope schemas, and each column's type.

Built once per relation version (every Relation message); `bridge.encode.plan` compiles
the one encoder of that version from it.

Naming rule (deterministic, documented in docs/concepts/records.md): every character outside
`[A-Za-z0-9_]` becomes `_`, a leading digit gets a `_` prefix, and a name that
then collides with an earlier column gets `_2`, `_3`, … in column order. The
original PostgreSQL name is kept in the field property `pg.name`.

Every row field is `["null", T]` with default null, key columns included in the
row: a delete's before-image under REPLICA IDENTITY DEFAULT carries only the key,
and nullable fields keep every ALTER TABLE BACKWARD-compatible. A column whose rows
written before it existed read as a constant (ALTER TABLE ... ADD COLUMN ... DEFAULT,
pg_attribute.attmissingval) is `[T, "null"]` with that constant as the Avro default
(Avro wants a union's default to match its first branch), so a consumer that reads an
older record with the newer schema sees what PostgreSQL returns for that row.

Record names are Debezium's (`<prefix>.<schema>.<table>.Key`, `.Value`, `.Envelope`, each
with its `connect.name`; the source block `io.debezium.connector.postgresql.Source` and
the transaction block `event.block` in schemas/): Avro schema resolution matches records
by name, so only with the same names does our schema register as the next BACKWARD
version of a subject Debezium's Avro converter wrote (a take-over, docs/debezium.md "Coming from
Debezium").

Columns matched by `filters.exclude_columns` are absent from the row schema and rows;
the kept column indexes are decided here, so the per-row cost does not grow.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final, NamedTuple

from bridge.config import ColumnRule
from bridge.decode.messages import Column, Relation
from bridge.errors import SchemaError
from bridge.schema.avronames import fold_named_types
from bridge.schema.catalog import TypeCatalog
from bridge.schema.fixed import load_fixed
from bridge.schema.pgtypes import CodecOptions, ColumnType, Wire, column_type

UNAVAILABLE: Final = "__bridge_unavailable_value"
_INVALID: Final = re.compile(r"[^A-Za-z0-9_]")


class ColumnDetails(NamedTuple):
    """What the Relation message lacks, from pg_attribute: array dimensions, and the text of
    the value rows written before the column existed read as (attmissingval: a constant
    default of ADD COLUMN; None when there is none or a table rewrite stored it in them)."""

    ndims: int
    missing: str | None = None


class TableDetails(NamedTuple):
    """Catalog facts for one table, read when its Relation message arrives."""

    # the record key's columns (bridge.schema.catalog.RowIdentity.record_key: the primary
    # key, or the REPLICA IDENTITY USING INDEX index; never an INCLUDE column); empty: fall
    # back to the replica identity flags
    primary_key: tuple[str, ...]
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
    """Schemas and column types for one version of one table, built by the named steps
    below (`kept_columns`, `key_columns_of`, `check_key_kept`, `column_types`, `rules_of`,
    `row_schema`, `key_schema`, `envelope_schema`)."""

    __slots__ = (
        "defaulted",
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
        "rules",
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
        column_rules: Iterable[tuple[re.Pattern[str], ColumnRule]] = (),
        key_columns: Iterable[tuple[re.Pattern[str], tuple[str, ...]]] = (),
        defaults: Mapping[str, Any] | None = None,
    ) -> None:
        """`defaults`: PostgreSQL column name -> the Avro JSON default of its field (the
        value its rows had before the column existed); other fields default to null."""
        self.relation = relation
        self.kept = kept_columns(relation, tuple(exclude_columns))
        self.key_index = key_columns_of(relation, details, tuple(key_columns))
        check_key_kept(relation, self.key_index, self.kept)
        columns = [relation.columns[i] for i in self.kept]
        names = unique_names([c.name for c in columns])
        self.field_names = tuple(names)
        self.namespace = ".".join(
            avro_name(p) for p in (server_name, relation.namespace, relation.name)
        )
        codecs = column_types(columns, catalog, details, options)
        self.types = tuple(codecs)  # per kept column, for bridge.encode.plan
        self.rules = rules_of(relation, self.key_index, columns, codecs, tuple(column_rules))
        self.placeholders = {
            name: _placeholder(codec.avro_schema) for name, codec in zip(names, codecs, strict=True)
        }
        given = defaults or {}
        # positions (among the kept columns) whose union lists the value branch first
        self.defaulted = tuple(i for i, c in enumerate(columns) if c.name in given)
        self.row_name = f"{self.namespace}.Value"
        row = row_schema(self.namespace, names, columns, codecs, given)
        position = {col: pos for pos, col in enumerate(self.kept)}
        key_pos = [position[i] for i in self.key_index]
        self.key_positions = tuple(key_pos)
        self.key_names = tuple(names[pos] for pos in key_pos)
        self.key_schema = key_schema(self.namespace, names, columns, codecs, key_pos)
        self.envelope_schema = envelope_schema(self.namespace, row)

    def placeholder(self, field: str) -> Any:
        """Debezium-style stand-in for an unchanged TOASTed value, where the type allows one."""
        return self.placeholders.get(field)


def kept_columns(relation: Relation, exclude: tuple[re.Pattern[str], ...]) -> tuple[int, ...]:
    """Indexes of the columns `filters.exclude_columns` leaves in the rows."""
    prefix = f"{relation.namespace}.{relation.name}."
    return tuple(
        i
        for i, c in enumerate(relation.columns)
        if not any(p.fullmatch(prefix + c.name) for p in exclude)
    )


def key_columns_of(
    relation: Relation,
    details: TableDetails,
    chosen: tuple[tuple[re.Pattern[str], tuple[str, ...]], ...],
) -> tuple[int, ...]:
    """Indexes of the record key's columns: `avro.key_columns` where a rule names the
    table, else the catalog's record key (`TableDetails.primary_key`), else the columns
    the Relation message flags as the replica identity."""
    label = f"{relation.namespace}.{relation.name}"
    named = next((cols for p, cols in chosen if p.fullmatch(label)), None)
    if named is not None:
        return _chosen_key(relation, named)
    names = [c.name for c in relation.columns]
    if details.primary_key and all(k in names for k in details.primary_key):
        return tuple(names.index(k) for k in details.primary_key)
    if relation.replica_identity == "f":
        return ()  # FULL marks every column as key: no usable key
    return tuple(i for i, c in enumerate(relation.columns) if c.is_key)


def _chosen_key(relation: Relation, columns: tuple[str, ...]) -> tuple[int, ...]:
    """`avro.key_columns` for this table: each must exist and be part of the replica
    identity, or a delete (whose old row carries only the identity) would lack it."""
    names = [c.name for c in relation.columns]
    label = f"{relation.namespace}.{relation.name}"
    for name in columns:
        if name not in names:
            raise SchemaError(
                f"avro.key_columns names {label}.{name}, which the table does not have",
                hint=f"use columns of {label}: {', '.join(names)}",
            )
        if not relation.columns[names.index(name)].is_key:
            raise SchemaError(
                f"avro.key_columns names {label}.{name}, which is not in the table's "
                "replica identity: a delete's old row would not carry it",
                hint=f"ALTER TABLE {label} REPLICA IDENTITY FULL (or USING INDEX on an "
                "index over the key columns)",
            )
    return tuple(names.index(name) for name in columns)


def check_key_kept(relation: Relation, key_index: tuple[int, ...], kept: tuple[int, ...]) -> None:
    """The record key identifies the row (partitioning, compaction): it cannot lose a part."""
    for i in key_index:
        if i not in kept:
            raise SchemaError(
                f"filters.exclude_columns excludes {relation.namespace}.{relation.name}."
                f"{relation.columns[i].name}, a key column of that table",
                hint="narrow the pattern so that it matches no primary-key or "
                "replica-identity column",
            )


def column_types(
    columns: Sequence[Column],
    catalog: TypeCatalog,
    details: TableDetails,
    options: CodecOptions,
) -> list[ColumnType]:
    """Each kept column's type (array dimensions from the catalog's details)."""
    found = []
    for c in columns:
        col = details.columns.get(c.name)
        found.append(column_type(c.type_oid, c.typmod, catalog, options, col.ndims if col else 1))
    return found


def rules_of(
    relation: Relation,
    key_index: tuple[int, ...],
    columns: Sequence[Column],
    codecs: Sequence[ColumnType],
    rules: tuple[tuple[re.Pattern[str], ColumnRule], ...],
) -> tuple[tuple[ColumnRule, ...], ...]:
    """`avro.column_rules` matching each kept column, in order (mostly all empty).

    Only plain text columns (an Avro string) can be rewritten, and never a key column:
    the key identifies the row."""
    prefix = f"{relation.namespace}.{relation.name}."
    key_names = {relation.columns[i].name for i in key_index}
    found = []
    for col, codec in zip(columns, codecs, strict=True):
        matched = tuple(rule for p, rule in rules if p.fullmatch(prefix + col.name))
        if matched and (col.name in key_names or codec.wire != Wire.TEXT):
            raise SchemaError(
                f"avro.column_rules {matched[0].match!r} matches {prefix}{col.name}, "
                + ("a key column" if col.name in key_names else "not a text column"),
                hint="narrow the pattern to text columns outside the record key",
            )
        found.append(matched)
    return tuple(found)


def row_schema(
    namespace: str,
    names: Sequence[str],
    columns: Sequence[Column],
    codecs: Sequence[ColumnType],
    defaults: Mapping[str, Any],
) -> dict[str, Any]:
    """The `Value` record: every field nullable, null first unless the column has a
    default its older rows read as (then that default, value branch first)."""
    fields = [
        {
            "name": name,
            "type": [codec.avro_schema, "null"]
            if col.name in defaults
            else ["null", codec.avro_schema],
            "default": defaults.get(col.name),
            "pg.name": col.name,
            "pg.type": codec.pg_type_name,
        }
        for name, col, codec in zip(names, columns, codecs, strict=True)
    ]
    return {
        "type": "record",
        "name": "Value",
        "namespace": namespace,
        "connect.name": f"{namespace}.Value",
        "fields": fields,
    }


def key_schema(
    namespace: str,
    names: Sequence[str],
    columns: Sequence[Column],
    codecs: Sequence[ColumnType],
    key_positions: Sequence[int],
) -> dict[str, Any] | None:
    """The `Key` record of the key columns (positions among the kept ones); None without
    a key."""
    if not key_positions:
        return None
    key_fields = [
        {
            "name": names[pos],
            # a NaN numeric key converts to None (decimal has no NaN)
            "type": ["null", codecs[pos].avro_schema]
            if codecs[pos].may_be_null
            else codecs[pos].avro_schema,
            "pg.name": columns[pos].name,
        }
        for pos in key_positions
    ]
    schema: dict[str, Any] = fold_named_types(
        {
            "type": "record",
            "name": "Key",
            "namespace": namespace,
            "connect.name": f"{namespace}.Key",
            "fields": key_fields,
        }
    )
    return schema


def envelope_schema(namespace: str, row: dict[str, Any]) -> dict[str, Any]:
    """Debezium's `Envelope` around the row: before, after, source, op, ts_ms,
    transaction, and our unchanged_fields / special_values."""
    schema: dict[str, Any] = fold_named_types(
        {
            "type": "record",
            "name": "Envelope",
            "namespace": namespace,
            "connect.name": f"{namespace}.Envelope",
            "connect.version": 2,  # Debezium's envelope schema version
            "fields": [
                {"name": "before", "type": ["null", row], "default": None},
                {"name": "after", "type": ["null", row["connect.name"]], "default": None},
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
    return schema


def _placeholder(schema: Any) -> Any:
    kind = schema.get("type") if isinstance(schema, dict) else schema
    if kind == "string" and not (isinstance(schema, dict) and "logicalType" in schema):
        return UNAVAILABLE
    if kind == "bytes" and not (isinstance(schema, dict) and "logicalType" in schema):
        return UNAVAILABLE.encode()
    return None
