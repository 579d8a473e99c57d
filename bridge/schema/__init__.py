"""Relation -> Avro mapping: per-column PostgreSQL type codecs (see `pgtypes`)."""

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
    ColumnCodec,
    column_codec,
)

__all__ = [
    "BUILTIN_TYPES",
    "DEFAULT_OPTIONS",
    "INTERVAL_SCHEMA",
    "VARIABLE_DECIMAL_SCHEMA",
    "CodecOptions",
    "ColumnCodec",
    "PgCatalog",
    "PgType",
    "StaticCatalog",
    "TypeCatalog",
    "column_codec",
    "fold_named_types",
    "load_types",
]
