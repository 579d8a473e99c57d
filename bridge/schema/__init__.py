"""Relation -> Avro mapping: per-column PostgreSQL types and their wire shapes (see `pgtypes`).

Pure mapping: nothing here converts values or imports anything above `bridge.schema`.
"""

from bridge.schema.avronames import fold_named_types
from bridge.schema.catalog import (
    BUILTIN_TYPES,
    PgCatalog,
    PgType,
    StaticCatalog,
    TypeCatalog,
    load_types,
)
from bridge.schema.pgtypes import (
    DEFAULT_OPTIONS,
    INTERVAL_SCHEMA,
    VARIABLE_DECIMAL_SCHEMA,
    CodecOptions,
    ColumnType,
    Wire,
    column_type,
)

__all__ = [
    "BUILTIN_TYPES",
    "DEFAULT_OPTIONS",
    "INTERVAL_SCHEMA",
    "VARIABLE_DECIMAL_SCHEMA",
    "CodecOptions",
    "ColumnType",
    "PgCatalog",
    "PgType",
    "StaticCatalog",
    "TypeCatalog",
    "Wire",
    "column_type",
    "fold_named_types",
    "load_types",
]
