"""Folding repeated named Avro types into references.

Column fragments reuse named records (bridge.pg.Interval, ...); Avro allows a
name to be defined only once per schema, so the record builder passes its
finished schema through `fold_named_types`.
"""

from __future__ import annotations

from typing import Any

from bridge.errors import SchemaError

_NAMED = ("record", "enum", "fixed")


def fold_named_types(schema: Any) -> Any:
    """Copy of `schema` where every repeat definition of a named type is its full name."""
    return _fold(schema, "", {})


def _fold(schema: Any, namespace: str, seen: dict[str, Any]) -> Any:
    """One walk over every kind of Avro schema node: union, named type, array, map, a
    type given as a nested schema."""
    if isinstance(schema, list):
        return [_fold(branch, namespace, seen) for branch in schema]
    if not isinstance(schema, dict):
        return schema
    kind = schema.get("type")
    if kind in _NAMED:
        return _fold_named(schema, kind, namespace, seen)
    if kind == "array":
        return {**schema, "items": _fold(schema["items"], namespace, seen)}
    if kind == "map":
        return {**schema, "values": _fold(schema["values"], namespace, seen)}
    if isinstance(kind, (dict, list)):
        return {**schema, "type": _fold(kind, namespace, seen)}
    return dict(schema)


def _fold_named(schema: dict[str, Any], kind: str, namespace: str, seen: dict[str, Any]) -> Any:
    """A record, enum or fixed: its full name if defined before (with the same body), else
    the definition, a record's fields folded in its namespace."""
    name = schema["name"]
    if "." in name:
        namespace, _, _ = name.rpartition(".")
    else:
        namespace = schema.get("namespace", namespace)
    fullname = f"{namespace}.{name}" if namespace and "." not in name else name
    if fullname in seen:
        if seen[fullname] != schema:
            raise SchemaError(
                f"Avro type {fullname} is defined twice with different bodies",
                hint="two columns map to incompatible definitions of one named type",
            )
        return fullname
    seen[fullname] = schema
    if kind == "record":
        fields = [{**f, "type": _fold(f["type"], namespace, seen)} for f in schema["fields"]]
        return {**schema, "fields": fields}
    return dict(schema)
