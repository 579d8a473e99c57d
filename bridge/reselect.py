"""`avro.toast_reselect`: unchanged TOASTed values read back from the table before producing.

An UPDATE that leaves a large (TOASTed, stored out of line) value alone does not resend
it: the new tuple has it as kind 'u'. Without REPLICA IDENTITY FULL the bridge cannot
know it, so the record says so in `unchanged_fields`, and a consumer that keeps old values
by key fills it in; after a primary-key change it cannot, the old value being under the
old key. This is Debezium's reselect post-processor: the missing columns are read by the
row's replica identity key with a plain SELECT on a normal connection, and the change is
encoded as if PostgreSQL had sent them.

The SELECT sees the table as it is when the bridge decodes the change, which may be after
later transactions committed: the value read can be newer than the event
(docs/concepts/records.md, "Unchanged TOASTed values"). A row that is gone by then keeps its
`unchanged_fields`, as without this.
"""

from __future__ import annotations

import logging
from typing import Any, Final, NamedTuple

import psycopg
from psycopg import sql

from bridge.decode.messages import (
    KIND_BINARY,
    KIND_NULL,
    KIND_TEXT,
    KIND_UNCHANGED,
    Relation,
    TupleData,
)
from bridge.errors import SourceError
from bridge.events.model import Change
from bridge.source import libpq

log: Final = logging.getLogger("bridge.reselect")


class _Query(NamedTuple):
    """The SELECT of some missing columns of one relation version, by its identity key."""

    text: bytes
    keys: tuple[int, ...]  # key columns' positions in the tuple
    types: tuple[int, ...]  # their type oids (0: the server infers it)
    missing: tuple[int, ...]  # the selected columns' positions, in the SELECT's order


class ToastReselect:
    """Completes changes whose new row lacks unchanged TOASTed values (`complete`).

    Owns nothing: the builder opens `conn` (autocommit, not a replication connection) and
    closes it. Queries are built once per relation version and set of missing columns."""

    def __init__(self, conn: psycopg.Connection[Any]) -> None:
        self._conn = conn
        self._queries: dict[int, tuple[Relation, dict[tuple[int, ...], _Query | None]]] = {}

    def complete(self, change: Change) -> Change:
        """`change` with its missing values read from the table; unchanged when nothing is
        missing, REPLICA IDENTITY FULL's old row has them (the encoder takes them from
        there), the table has no identity key, or the row is gone."""
        new = change.new
        relation = change.relation
        if (
            new is None
            or relation is None
            or KIND_UNCHANGED not in new.kinds
            or change.old_kind == "O"
        ):
            return change
        query = self._query(relation, new.kinds)
        if query is None:
            return change
        params: list[bytes | None] = []
        formats: list[int] = []
        for index in query.keys:
            kind = new.kinds[index]
            if kind not in (KIND_TEXT, KIND_BINARY):
                return change  # a key value not sent (itself TOASTed and unchanged)
            params.append(new.values[index])
            formats.append(1 if kind == KIND_BINARY else 0)
        try:
            row = libpq.fetch_one(self._conn, query.text, params, query.types, formats)
        except SourceError as exc:
            raise SourceError(
                f"avro.toast_reselect: reading the unchanged TOASTed columns of "
                f"{relation.namespace}.{relation.name} back failed: {exc.message}",
                hint="grant the bridge's user SELECT on the table, or set "
                "avro.toast_reselect: false; nothing past the last delivered transaction "
                "was acknowledged",
            ) from None
        if row is None:
            log.debug(
                "toast_reselect: %s.%s row gone; its unchanged_fields stay",
                relation.namespace,
                relation.name,
            )
            return change
        kinds = bytearray(new.kinds)
        values = list(new.values)
        for index, value in zip(query.missing, row, strict=True):
            kinds[index] = KIND_NULL if value is None else KIND_TEXT
            values[index] = value
        return change._replace(new=TupleData(bytes(kinds), tuple(values)))

    def _query(self, relation: Relation, kinds: bytes) -> _Query | None:
        cached = self._queries.get(relation.oid)
        if cached is None or cached[0] is not relation:
            cached = self._queries[relation.oid] = (relation, {})
        missing = tuple(i for i, kind in enumerate(kinds) if kind == KIND_UNCHANGED)
        by_missing = cached[1]
        if missing not in by_missing:
            by_missing[missing] = self._build(relation, missing)
        return by_missing[missing]

    def _build(self, relation: Relation, missing: tuple[int, ...]) -> _Query | None:
        keys = tuple(i for i, column in enumerate(relation.columns) if column.is_key)
        if not keys:
            return None  # REPLICA IDENTITY NOTHING: no row to find
        columns = relation.columns
        where = sql.SQL(" AND ").join(
            sql.SQL("{} = ${}").format(sql.Identifier(columns[i].name), sql.SQL(str(n)))
            for n, i in enumerate(keys, start=1)
        )
        text = sql.SQL("SELECT {} FROM {}.{} WHERE {}").format(
            sql.SQL(", ").join(sql.Identifier(columns[i].name) for i in missing),
            sql.Identifier(relation.namespace),
            sql.Identifier(relation.name),
            where,
        )
        return _Query(
            text.as_bytes(self._conn),
            keys,
            tuple(columns[i].type_oid for i in keys),
            missing,
        )
