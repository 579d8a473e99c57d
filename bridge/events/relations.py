"""Relation and type descriptions as the output plugin last sent them.

Row messages carry only a relation id; the plugin describes the relation (and, for
non-built-in column types, the type) in separate messages sent before first use and
again after every schema change, so the latest description replaces the previous one.

Two relations never hold one qualified name at once, so a description naming a relation
as another one is still described says the other one's name is out of date: it was renamed
(or dropped) since its description. PostgreSQL 16 and later describe it again before its
next change; pgoutput before 16 does not after ALTER SCHEMA ... RENAME (upstream commit
cd4b2334db49 added the invalidation), so its next change would go on under the name that
now belongs to the other relation. Such a relation is set aside (`Renamed`): its next row
asks `RenameResolver` (I/O, given by the wiring for the servers known to need it) for its
name at that change, and without one the row is out of sequence.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import NamedTuple

from bridge.decode.messages import Relation, TypeMessage
from bridge.errors import StreamSequenceError


class CachedRelation(NamedTuple):
    relation: Relation
    qualified_name: str  # "namespace.name", precomputed for the per-row counters


class Renamed(NamedTuple):
    """A relation whose name another relation was described with since."""

    stale: Relation  # its last description
    claimant: Relation  # the description that named another relation so
    xid: int | None  # transaction the claimant's description came in
    commit_lsn: int | None  # that transaction's commit LSN; None while undecided (prepared)


# (the set-aside relation, the xid of the transaction being emitted, the LSN of its row
# that needs the relation) -> its description under its name at that row, or a raised
# bridge.errors.RenamedRelationError.
RenameResolver = Callable[[Renamed, int | None, int], Relation]


def describe(relation: Relation) -> CachedRelation:
    """Cache form: without the streamed xid, so descriptions compare by content."""
    if relation.xid is not None:
        relation = relation._replace(xid=None)
    return CachedRelation(relation, f"{relation.namespace}.{relation.name}")


class RelationCache:
    """relid -> current `Relation`, oid -> `TypeMessage`; read by the schema layer."""

    __slots__ = (
        "_commit_lsn",
        "_holder",
        "_last",
        "_relations",
        "_renamed",
        "_resolve",
        "_types",
        "_xid",
    )

    def __init__(self, resolve_renamed: RenameResolver | None = None) -> None:
        self._relations: dict[int, CachedRelation] = {}
        self._types: dict[int, TypeMessage] = {}
        # The entry of the last row's relation: rows come in runs of one table, and the
        # dict lookup (its int key boxed, compiled) costs more than this compare.
        self._last: CachedRelation | None = None
        self._holder: dict[str, int] = {}  # qualified name -> relid last described with it
        self._renamed: dict[int, Renamed] = {}  # relid -> set aside, not described since
        self._resolve = resolve_renamed
        self._xid: int | None = None  # the transaction being emitted (`at`)
        self._commit_lsn: int | None = None

    def at(self, xid: int | None, commit_lsn: int | None) -> None:
        """The transaction whose messages come next (its commit LSN None while undecided)."""
        self._xid = xid
        self._commit_lsn = commit_lsn

    def put(self, relation: Relation) -> None:
        cached = describe(relation)
        oid, name = relation.oid, cached.qualified_name
        before = self._relations.get(oid)
        if before is not None and self._holder.get(before.qualified_name) == oid:
            del self._holder[before.qualified_name]
        holder = self._holder.get(name)
        if holder is not None and holder != oid:
            stale = self._relations.pop(holder, None)
            if stale is not None:
                self._renamed[holder] = Renamed(
                    stale.relation, cached.relation, self._xid, self._commit_lsn
                )
        self._holder[name] = oid
        self._renamed.pop(oid, None)
        self._relations[oid] = cached
        self._last = None

    def entry(self, relid: int, message_type: str, lsn: int) -> CachedRelation:
        """The current description of `relid`, for a row message of `message_type` at
        WAL position `lsn`."""
        last = self._last
        if last is not None and last.relation.oid == relid:
            return last
        try:
            last = self._last = self._relations[relid]
        except KeyError:
            return self._described_again(relid, message_type, lsn)
        return last

    def _described_again(self, relid: int, message_type: str, lsn: int) -> CachedRelation:
        """A set-aside relation's description under its name at `lsn`, from the resolver;
        kept as if the plugin had sent it (its later rows use it)."""
        renamed = self._renamed.get(relid)
        if renamed is None:
            raise StreamSequenceError(
                message_type,
                f"row for relation id {relid}, which no Relation message has described",
            )
        if self._resolve is None:
            stale, claimant = renamed.stale, renamed.claimant
            raise StreamSequenceError(
                message_type,
                f"row for relation id {relid} ({stale.namespace}.{stale.name}), whose name "
                f"relation id {claimant.oid} was described with since, without a new "
                "Relation message for it",
            )
        # as good as a Relation message: a relation described with that name since is set
        # aside in turn (its own name out of date)
        self.put(self._resolve(renamed, self._xid, lsn))
        return self._relations[relid]

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
