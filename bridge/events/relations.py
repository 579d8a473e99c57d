"""Relation and type descriptions as the output plugin last sent them.

Row messages carry only a relation id; the plugin describes the relation (and, for
non-built-in column types, the type) in separate messages sent before first use and
again after every schema change, so the latest description replaces the previous one.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import NamedTuple

from bridge.decode.messages import Relation, TypeMessage
from bridge.errors import StreamSequenceError


class CachedRelation(NamedTuple):
    relation: Relation
    qualified_name: str  # "namespace.name", precomputed for the per-row counters


def describe(relation: Relation) -> CachedRelation:
    """Cache form: without the streamed xid, so descriptions compare by content."""
    if relation.xid is not None:
        relation = relation._replace(xid=None)
    return CachedRelation(relation, f"{relation.namespace}.{relation.name}")


class RelationCache:
    """relid -> current `Relation`, oid -> `TypeMessage`; read by the schema layer."""

    __slots__ = ("_last", "_relations", "_types")

    def __init__(self) -> None:
        self._relations: dict[int, CachedRelation] = {}
        self._types: dict[int, TypeMessage] = {}
        # The entry of the last row's relation: rows come in runs of one table, and the
        # dict lookup (its int key boxed, compiled) costs more than this compare.
        self._last: CachedRelation | None = None

    def put(self, relation: Relation) -> None:
        self._relations[relation.oid] = describe(relation)
        self._last = None

    def entry(self, relid: int, message_type: str) -> CachedRelation:
        """The current description of `relid`, for a row message of `message_type`."""
        last = self._last
        if last is not None and last.relation.oid == relid:
            return last
        try:
            last = self._last = self._relations[relid]
        except KeyError:
            raise StreamSequenceError(
                message_type,
                f"row for relation id {relid}, which no Relation message has described",
            ) from None
        return last

    def cached(self, relid: int) -> CachedRelation | None:
        return self._relations.get(relid)

    def get(self, relid: int) -> Relation | None:
        cached = self._relations.get(relid)
        return None if cached is None else cached.relation

    def put_type(self, type_message: TypeMessage) -> None:
        self._types[type_message.oid] = type_message

    def type_name(self, oid: int) -> str | None:
        """ "namespace.name" of a type the plugin described, None if it never did."""
        known = self._types.get(oid)
        return None if known is None else f"{known.namespace}.{known.name}"

    @property
    def types(self) -> Mapping[int, TypeMessage]:
        return self._types
