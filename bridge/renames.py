"""The name of a relation as of one of its changes, where PostgreSQL did not send it.

pgoutput before PostgreSQL 16 keeps a relation's description after ALTER SCHEMA ... RENAME:
it describes a relation again after the relation itself changes, not after its schema is
renamed (upstream commit cd4b2334db49, "Invalidate pgoutput's replication-decisions cache
upon schema rename", added that, in 16 only). So on 15

    begin; insert into sch1.t1 ...; alter schema sch1 rename to sch2; create schema sch1;
    create table sch1.t1 (c1 int); insert into sch1.t1 ...; insert into sch2.t1 ...; commit;

sends Relation(A, sch1.t1), A's row, Relation(B, sch1.t1), B's row, and A's second row
with no new description: named as the stream says, it would land in B's topic. The
relation cache sees the second description of one name and sets A aside
(`bridge.events.relations`); at A's next row it asks `CatalogRenames` for A's name then.

The catalog gives a name as it is now, not as of the change (the bridge may lag; the schema
may have been renamed again since), so the name is taken only where the catalog proves it
was already A's at that change and has not changed since: both A's pg_class row and its
schema's pg_namespace row were written (their xmin) by

- the transaction being emitted (the rename in the same transaction, as above); or
- the transaction whose stream described B (decided, and that change lies after its
  commit); or
- a transaction older than the slot's catalog_xmin, when the change lies at or past the
  slot's confirmed_flush_lsn: catalog_xmin is the oldest transaction running at a position
  at or before confirmed_flush_lsn, so it had committed before the change.

A later write of either row (renamed again, moved, dropped) leaves no such proof:
`bridge.errors.RenamedRelationError`, never a guess. What the rule cannot see: two renames
of the schema (or one after the change) within the transaction being emitted, since
pgoutput sends no command ids to order them against its rows.
"""

from __future__ import annotations

import logging
from typing import Any, Final

from bridge.decode.messages import Relation
from bridge.errors import RenamedRelationError
from bridge.events.relations import Renamed
from bridge.lsn import LSN

log: Final = logging.getLogger("bridge.renames")

# The first PostgreSQL whose pgoutput describes a relation again after its schema's rename.
ANNOUNCED_FROM: Final = 160000

_SQL: Final = """
SELECT n.nspname, c.relname, n.xmin::text, c.xmin::text,
       coalesce(age(n.xmin) > age(s.catalog_xmin), false),
       coalesce(age(c.xmin) > age(s.catalog_xmin), false),
       pg_wal_lsn_diff(s.confirmed_flush_lsn, '0/0')::bigint
FROM pg_class c
JOIN pg_namespace n ON n.oid = c.relnamespace
LEFT JOIN pg_replication_slots s ON s.slot_name = %s
WHERE c.oid = %s
"""


def unproven(
    xmin: str,
    before_slot: bool,
    confirmed: int | None,
    renamed: Renamed,
    xid: int | None,
    lsn: int,
) -> str | None:
    """None if a catalog row written by transaction `xmin` was in place at the change at
    `lsn` of transaction `xid` (the module's three cases); else why that is not known.
    `before_slot`: `xmin` is older than the slot's catalog_xmin; `confirmed`: the slot's
    confirmed_flush_lsn."""
    if xid is not None and xmin == str(xid):
        return None
    if (
        renamed.xid is not None
        and xmin == str(renamed.xid)
        and renamed.commit_lsn is not None
        and lsn >= renamed.commit_lsn
    ):
        return None
    if before_slot and confirmed is not None and lsn >= confirmed:
        return None
    return f"written by transaction {xmin}, which the bridge cannot place before the change"


class CatalogRenames:
    """`bridge.events.relations.RenameResolver` over the catalog connection (`conn`, the
    pipeline's thread only), for pgoutput before PostgreSQL 16."""

    def __init__(self, conn: Any, slot_name: str, server_version: int) -> None:
        self._conn = conn
        self._slot = slot_name
        self._major = server_version // 10000

    def __call__(self, renamed: Renamed, xid: int | None, lsn: int) -> Relation:
        stale = renamed.stale
        old = f"{stale.namespace}.{stale.name}"
        where = (
            f"relation id {stale.oid} ({old}) changed at LSN {LSN(lsn)} in transaction {xid}, "
            f"after relation id {renamed.claimant.oid} was described as {old}; PostgreSQL "
            f"{self._major} sends no new name for it after ALTER SCHEMA ... RENAME "
            "(pgoutput before 16; upstream commit cd4b2334db49)"
        )
        row = self._conn.execute(_SQL, (self._slot, stale.oid)).fetchone()
        if row is None:
            raise RenamedRelationError(f"{where}, and it has been dropped since")
        nspname, relname, nsp_xmin, rel_xmin, nsp_before, rel_before, confirmed = row
        name = f"{nspname}.{relname}"
        if relname != stale.name:
            raise RenamedRelationError(f"{where}; it has been renamed to {name} since")
        for what, xmin, before in (
            (f"schema {nspname}'s catalog row", nsp_xmin, nsp_before),
            (f"{name}'s catalog row", rel_xmin, rel_before),
        ):
            why = unproven(xmin, before, confirmed, renamed, xid, lsn)
            if why is not None:
                raise RenamedRelationError(
                    f"{where}; the catalog names it {name} now, but {what} was {why}"
                )
        log.warning(
            "%s; the catalog shows it was %s then: its changes go to that topic", where, name
        )
        return stale._replace(namespace=nspname)
