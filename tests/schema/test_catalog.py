"""Type descriptions: the built-in table against a real pg_type, and load_types/PgCatalog."""

from __future__ import annotations

import pytest

from bridge.errors import SchemaError
from bridge.schema import BUILTIN_TYPES, PgCatalog, PgType, StaticCatalog, load_types

from .helpers import Conn


def _oid(conn: Conn, sql_type: str) -> int:
    row = conn.execute("SELECT %s::regtype::oid", (sql_type,)).fetchone()
    assert row is not None
    return int(row[0])


def test_builtin_table_matches_pg_type(pg_conn: Conn) -> None:
    rows = pg_conn.execute(
        """
        SELECT t.oid, t.typname, n.nspname, t.typtype, t.typcategory, t.typelem, t.typdelim,
               COALESCE(r.rngsubtype, mr.rngsubtype, 0)
        FROM pg_type t JOIN pg_namespace n ON n.oid = t.typnamespace
        LEFT JOIN pg_range r ON r.rngtypid = t.oid
        LEFT JOIN pg_range mr ON mr.rngmultitypid = t.oid
        WHERE t.oid = ANY(%s::oid[])
        """,
        (sorted(BUILTIN_TYPES),),
    ).fetchall()
    assert len(rows) == len(BUILTIN_TYPES)
    for oid, name, nsp, typtype, category, elem, delim, subtype in rows:
        known = BUILTIN_TYPES[oid]
        assert (known.name, known.namespace, known.delim) == (name, nsp, delim)
        is_array = category == "A" and known.kind == "a"
        assert known.kind == ("a" if is_array else typtype), name
        assert known.elem_oid == (elem if is_array else 0), name
        assert known.range_subtype == subtype, name


def test_load_types_describes_user_types_and_their_dependencies(pg_conn: Conn) -> None:
    pg_conn.execute("ALTER TYPE mood ADD VALUE 'meh' BEFORE 'ok'")
    array_of_range = _oid(pg_conn, "floatrange[]")
    types = load_types(pg_conn, [_oid(pg_conn, "mood"), _oid(pg_conn, "price"), array_of_range])
    mood = types[_oid(pg_conn, "mood")]
    assert (mood.kind, mood.namespace) == ("e", "public")
    assert mood.enum_labels == ("sad", "meh", "ok", "happy", "with space", 'q"uote')
    price = types[_oid(pg_conn, "price")]
    assert (price.kind, price.base_oid) == ("d", 1700)
    assert price.base_typmod == (8 << 16 | 3) + 4
    array = types[array_of_range]
    assert (array.kind, array.name) == ("a", "_floatrange")
    floatrange = types[array.elem_oid]
    assert (floatrange.kind, floatrange.range_subtype) == ("r", 701)
    assert types[701] == BUILTIN_TYPES[701]  # dependency resolved from the built-in table
    multi = load_types(pg_conn, [_oid(pg_conn, "floatmultirange")])
    assert [(t.kind, t.range_subtype) for t in multi.values() if t.name == "floatmultirange"] == [
        ("m", 701)
    ]


def test_load_types_kinds_of_extension_and_composite_types(pg_conn: Conn) -> None:
    oids = [_oid(pg_conn, name) for name in ("citext", "hstore", "pair", "intarr", "hstore[]")]
    types = load_types(pg_conn, oids)
    assert [types[o].kind for o in oids] == ["b", "b", "c", "d", "a"]
    assert types[oids[4]].elem_oid == oids[1]
    assert types[oids[3]].base_oid == 1007


def test_pg_catalog_caches_until_invalidated(pg_conn: Conn) -> None:
    pg_conn.execute("CREATE TYPE color AS ENUM ('red')")
    catalog = PgCatalog(pg_conn)
    color = _oid(pg_conn, "color")
    assert catalog.lookup(color).enum_labels == ("red",)
    pg_conn.execute("ALTER TYPE color ADD VALUE 'blue'")
    assert catalog.lookup(color).enum_labels == ("red",)
    catalog.invalidate()
    assert catalog.lookup(color).enum_labels == ("red", "blue")
    assert catalog.lookup(25) is BUILTIN_TYPES[25]


def test_unknown_oid_is_a_schema_error(pg_conn: Conn) -> None:
    with pytest.raises(SchemaError, match="not found"):
        PgCatalog(pg_conn).lookup(4_000_000_000)
    with pytest.raises(SchemaError, match="unknown type OID"):
        StaticCatalog().lookup(4_000_000_000)


def test_static_catalog_adds_types_to_builtins() -> None:
    mood = PgType(90000, "mood", "public", "e", enum_labels=("a",))
    catalog = StaticCatalog([mood])
    assert catalog.lookup(90000) is mood
    assert catalog.lookup(23) is BUILTIN_TYPES[23]
    assert PgType(1, "x", "app").qualified_name == "app.x"
