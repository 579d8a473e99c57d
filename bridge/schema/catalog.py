"""What the codec needs to know about a PostgreSQL type, and where it comes from.

Built-in types have fixed OIDs, so they are described here without a round trip;
everything else (enums, domains, extension types, user ranges and their arrays)
is read from pg_type/pg_enum/pg_range through an ordinary (non-replication)
connection and cached until `invalidate()`.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, NamedTuple, Protocol

from bridge.errors import SchemaError, TableDroppedError

KIND_BASE, KIND_ARRAY, KIND_COMPOSITE, KIND_DOMAIN = "b", "a", "c", "d"
KIND_ENUM, KIND_RANGE, KIND_MULTIRANGE, KIND_PSEUDO = "e", "r", "m", "p"


class PgType(NamedTuple):
    """One pg_type row, reduced to what the Avro mapping needs.

    kind is pg_type.typtype, except that arrays get "a" (typtype says "b").
    elem_oid: array element; base_oid/base_typmod: domain base type and its
    typmod; range_subtype: subtype of a range or multirange; delim: typdelim,
    the separator of this type's values inside array text; fields: the type OIDs of a
    composite's attributes in order (those record_send sends: not the dropped ones);
    has_send: the type has a send function (pg_type.typsend), so that pgoutput's binary
    mode sends its values in binary (the others it sends as text).
    """

    oid: int
    name: str
    namespace: str = "pg_catalog"
    kind: str = KIND_BASE
    elem_oid: int = 0
    base_oid: int = 0
    base_typmod: int = -1
    range_subtype: int = 0
    enum_labels: tuple[str, ...] = ()
    delim: str = ","
    fields: tuple[int, ...] = ()  # a composite's attribute types, dropped ones left out
    has_send: bool = True

    @property
    def qualified_name(self) -> str:
        return self.name if self.namespace == "pg_catalog" else f"{self.namespace}.{self.name}"


class TypeCatalog(Protocol):
    def lookup(self, oid: int) -> PgType:
        """The type with this OID; raises SchemaError when it does not exist."""
        ...


# (oid, name, array oid) of the built-in scalar types the mapping knows, plus the
# vector types whose text form is not array syntax (kept here so they stay opaque).
_SCALARS = (
    (16, "bool", 1000), (17, "bytea", 1001), (18, "char", 1002), (19, "name", 1003),
    (20, "int8", 1016), (21, "int2", 1005), (22, "int2vector", 1006), (23, "int4", 1007),
    (25, "text", 1009), (26, "oid", 1028), (27, "tid", 1010), (28, "xid", 1011),
    (29, "cid", 1012), (30, "oidvector", 1013), (114, "json", 199), (142, "xml", 143),
    (600, "point", 1017), (601, "lseg", 1018), (602, "path", 1019), (603, "box", 1020),
    (604, "polygon", 1027), (628, "line", 629), (650, "cidr", 651), (700, "float4", 1021),
    (701, "float8", 1022), (718, "circle", 719), (774, "macaddr8", 775), (790, "money", 791),
    (829, "macaddr", 1040), (869, "inet", 1041), (1042, "bpchar", 1014),
    (1043, "varchar", 1015), (1082, "date", 1182), (1083, "time", 1183),
    (1114, "timestamp", 1115), (1184, "timestamptz", 1185), (1186, "interval", 1187),
    (1266, "timetz", 1270), (1560, "bit", 1561), (1562, "varbit", 1563),
    (1700, "numeric", 1231), (2950, "uuid", 2951), (3220, "pg_lsn", 3221),
    (3802, "jsonb", 3807), (5069, "xid8", 271),
)  # fmt: skip
# (range oid, name, subtype, array oid, multirange oid, multirange array oid)
_RANGES = (
    (3904, "int4range", 23, 3905, 4451, 6150), (3906, "numrange", 1700, 3907, 4532, 6151),
    (3908, "tsrange", 1114, 3909, 4533, 6152), (3910, "tstzrange", 1184, 3911, 4534, 6153),
    (3912, "daterange", 1082, 3913, 4535, 6155), (3926, "int8range", 20, 3927, 4536, 6157),
)  # fmt: skip


def _builtins() -> dict[int, PgType]:
    types: dict[int, PgType] = {}

    def add(oid: int, name: str, array: int, **details: Any) -> None:
        delim = ";" if name == "box" else ","
        types[oid] = PgType(oid, name, delim=delim, **details)
        types[array] = PgType(array, "_" + name, kind=KIND_ARRAY, elem_oid=oid, delim=delim)

    for oid, name, array in _SCALARS:
        add(oid, name, array)
    for oid, name, subtype, array, multi, multi_array in _RANGES:
        add(oid, name, array, kind=KIND_RANGE, range_subtype=subtype)
        multi_name = name.replace("range", "multirange")
        add(multi, multi_name, multi_array, kind=KIND_MULTIRANGE, range_subtype=subtype)
    return types


BUILTIN_TYPES: dict[int, PgType] = _builtins()

_QUERY = """
SELECT t.oid, t.typname, n.nspname,
       CASE WHEN t.typtype = 'b' AND t.typcategory = 'A' AND t.typelem <> 0
                 AND t.typlen = -1 THEN 'a' ELSE t.typtype::text END,
       CASE WHEN t.typcategory = 'A' AND t.typlen = -1 THEN t.typelem ELSE 0 END,
       t.typbasetype, t.typtypmod, COALESCE(r.rngsubtype, mr.rngsubtype, 0),
       ARRAY(SELECT e.enumlabel FROM pg_catalog.pg_enum e
             WHERE e.enumtypid = t.oid ORDER BY e.enumsortorder),
       t.typdelim,
       ARRAY(SELECT a.atttypid FROM pg_catalog.pg_attribute a
             WHERE a.attrelid = t.typrelid AND t.typtype = 'c' AND a.attnum > 0
               AND NOT a.attisdropped ORDER BY a.attnum),
       t.typsend <> 0
FROM pg_catalog.pg_type t
JOIN pg_catalog.pg_namespace n ON n.oid = t.typnamespace
LEFT JOIN pg_catalog.pg_range r ON r.rngtypid = t.oid
LEFT JOIN pg_catalog.pg_range mr ON mr.rngmultitypid = t.oid
WHERE t.oid = ANY(%s::oid[])
"""


def load_types(conn: Any, oids: Iterable[int]) -> dict[int, PgType]:
    """Describe `oids` and, transitively, the types they are built from.

    `conn` is a psycopg Connection (typed Any: psycopg is imported only by callers
    that own a connection). Built-in types are answered without a query.
    """
    found: dict[int, PgType] = {}
    wanted = set(oids)
    while wanted:
        for oid in wanted & BUILTIN_TYPES.keys():
            found[oid] = BUILTIN_TYPES[oid]
        missing = sorted(wanted - found.keys())
        rows = conn.execute(_QUERY, (missing,)).fetchall() if missing else []
        for row in rows:
            oid, name, nsp, kind, elem, base, typmod, subtype, labels, delim, fields, send = row
            found[oid] = PgType(
                oid,
                name,
                nsp,
                kind,
                elem,
                base,
                typmod,
                subtype,
                tuple(labels),
                delim,
                tuple(int(f) for f in fields),
                bool(send),
            )
        absent = set(missing) - found.keys()
        if absent:
            raise SchemaError(
                f"type OID(s) {sorted(absent)} not found in pg_type",
                hint="the type was dropped or the catalog connection points at another "
                "database; reconnect to the source database and retry",
            )
        wanted = {
            dep
            for t in found.values()
            for dep in (t.elem_oid, t.base_oid, t.range_subtype, *t.fields)
            if dep and dep not in found
        }
    return found


# Key columns as PostgreSQL defines them. pg_index.indkey lists an index's INCLUDE columns
# after its key columns; only the first indnkeyatts entries are the key (what pgoutput and
# pglogical_output flag as key columns and what a delete's old row carries: relcache.c's
# RelationGetIdentityKeyBitmap leaves INCLUDE columns out). Only a primary key and the
# index chosen by REPLICA IDENTITY USING INDEX matter: PostgreSQL refuses an expression,
# partial or deferrable index as replica identity, so no other unique index identifies a
# row in logical replication.
_ROW_IDENTITY = """
SELECT c.relreplident::text, k.indisprimary, k.indisreplident, k.attname, k.attnum
FROM pg_catalog.pg_class c
LEFT JOIN LATERAL (
    SELECT i.indisprimary, i.indisreplident, a.attname, a.attnum, k.n
    FROM pg_catalog.pg_index i
    CROSS JOIN LATERAL unnest(i.indkey::int2[]) WITH ORDINALITY AS k(attnum, n)
    JOIN pg_catalog.pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = k.attnum
    WHERE i.indrelid = c.oid AND (i.indisprimary OR i.indisreplident)
      AND k.n <= i.indnkeyatts
) k ON true
WHERE c.oid = %s
ORDER BY k.indisprimary DESC, k.n
"""


class RowIdentity(NamedTuple):
    """How PostgreSQL identifies a table's rows in logical replication: the one reading of
    key columns that the stream's encoders, the snapshot's Relation and chunk key, and
    everything else that needs a table's key share (`row_identity`).

    `replident` is pg_class.relreplident: d(efault: the primary key), i(ndex), f(ull),
    n(othing). `primary_key` and `identity_index` are key columns in index order, never an
    INCLUDE column; `identity_index` is the REPLICA IDENTITY USING INDEX index's (empty
    unless replident is "i" and the index exists)."""

    replident: str
    primary_key: tuple[str, ...]
    identity_index: tuple[str, ...]
    identity_attnums: tuple[int, ...]  # of identity_index, same order

    def is_identity(self, column: str) -> bool:
        """Whether the output plugin flags `column` as part of the key (Relation message)."""
        if self.replident == "f":
            return True
        if self.replident == "i":
            return column in self.identity_index
        return self.replident == "d" and column in self.primary_key

    @property
    def record_key(self) -> tuple[str, ...]:
        """The Kafka record key's columns in field order: the replica identity index's under
        REPLICA IDENTITY USING INDEX (in table column order, the order the plugin's key flags
        give, as the bridge has always written them), else the primary key's in index order
        (as Debezium does). Under USING INDEX the identity wins over a primary key: a delete's
        old row and an update's old key carry only the identity's columns."""
        if self.replident == "i" and self.identity_index:
            ordered = sorted(zip(self.identity_attnums, self.identity_index, strict=True))
            return tuple(name for _, name in ordered)
        return self.primary_key

    @property
    def unique_key(self) -> tuple[str, ...]:
        """Columns that are unique and never NULL, in index order (a snapshot's chunk key):
        the primary key, else the replica identity index."""
        if self.primary_key:
            return self.primary_key
        return self.identity_index if self.replident == "i" else ()


def row_identity(conn: Any, relid: int) -> RowIdentity:
    """The table's `RowIdentity`; raises TableDroppedError when `relid` is no table."""
    rows = conn.execute(_ROW_IDENTITY, (relid,)).fetchall()
    if not rows:
        raise TableDroppedError(
            f"table with OID {relid} not found in pg_class: it was dropped before the stream "
            "reached its changes, and its key columns cannot be read any more",
            hint="list the table in filters.exclude_tables to skip its remaining changes",
        )
    primary = tuple(name for _, is_primary, _, name, _ in rows if is_primary)
    index = [(name, attnum) for _, _, is_replident, name, attnum in rows if is_replident]
    return RowIdentity(
        rows[0][0],
        primary,
        tuple(name for name, _ in index),
        tuple(int(attnum) for _, attnum in index),
    )


class PgCatalog:
    """TypeCatalog over a live connection, with built-ins and a per-OID cache."""

    def __init__(self, conn: Any) -> None:
        self._conn = conn
        self._cache: dict[int, PgType] = {}

    def lookup(self, oid: int) -> PgType:
        known = BUILTIN_TYPES.get(oid) or self._cache.get(oid)
        if known is None:
            self._cache.update(load_types(self._conn, [oid]))
            known = self._cache[oid]
        return known

    def invalidate(self) -> None:
        """Forget loaded types (after DDL such as ALTER TYPE ... ADD VALUE)."""
        self._cache.clear()


class StaticCatalog:
    """TypeCatalog over a fixed set of types on top of the built-ins (tests, replays)."""

    def __init__(self, types: Iterable[PgType] = ()) -> None:
        self._types = {**BUILTIN_TYPES, **{t.oid: t for t in types}}

    def lookup(self, oid: int) -> PgType:
        try:
            return self._types[oid]
        except KeyError:
            raise SchemaError(
                f"unknown type OID {oid}",
                hint="describe the type with load_types() before mapping its columns",
            ) from None
