"""A relation whose name another relation is described with (bridge.events.relations):
set aside, and at its next row named by the resolver where the plugin sent no new
description (pgoutput before PostgreSQL 16 after ALTER SCHEMA ... RENAME)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

import pytest

from bridge.decode.messages import (
    Begin,
    Column,
    Commit,
    Relation,
    StreamCommit,
    StreamStart,
    StreamStop,
)
from bridge.errors import StreamSequenceError
from bridge.events import Change, Event, EventAssembler
from bridge.events.relations import Renamed

from .conftest import decode_plain, decode_streamed, feed, ins

OLD = Relation(None, 16385, "sch1", "t1", "d", (Column(0, "c1", 23, -1),))
NEW = Relation(None, 16390, "sch1", "t1", "d", (Column(0, "c1", 23, -1),))
XID = 727
COMMIT_LSN = 0x151BAF8

Resolver = Callable[[Renamed, int | None, int], Relation]


class Catalog:
    """The resolver's answers, and what it was asked."""

    def __init__(self, namespace: str) -> None:
        self.namespace = namespace
        self.asked: list[tuple[Renamed, int | None, int]] = []

    def __call__(self, renamed: Renamed, xid: int | None, lsn: int) -> Relation:
        self.asked.append((renamed, xid, lsn))
        return renamed.stale._replace(namespace=self.namespace)


def assembler(spill_dir: Path, resolve: Resolver | None) -> EventAssembler:
    return EventAssembler(
        decode=decode_plain,
        decode_streamed=decode_streamed,
        spill_dir=spill_dir,
        memory_limit_bytes=1 << 20,
        resolve_renamed=resolve,
    )


def names(events: Sequence[object]) -> list[tuple[str, bytes | None]]:
    return [
        (f"{e.relation.namespace}.{e.relation.name}", e.new.values[0])
        for e in events
        if isinstance(e, Change) and e.relation is not None and e.new is not None
    ]


def rename_transaction(asm: EventAssembler) -> list[Event]:
    """What PostgreSQL 15 sends for 100_bugs.pl's transaction: no new description of the
    renamed table before its row 3 (captured with pg_logical_slot_peek_binary_changes)."""
    out: list[Event] = []
    out += feed(asm, Begin(COMMIT_LSN, 0, XID), OLD, wal_start=0x15174B8)
    out += feed(asm, ins(b"1", relid=OLD.oid), wal_start=0x15174B8)
    out += feed(asm, NEW, ins(b"2", relid=NEW.oid), wal_start=0x151BA78)
    out += feed(asm, ins(b"3", relid=OLD.oid), wal_start=0x151BAB8)
    out += feed(asm, Commit(0, COMMIT_LSN, COMMIT_LSN + 8, 0), wal_start=0x151BCE0)
    return out


def test_renamed_relation_named_by_the_resolver_at_its_next_row(spill_dir: Path) -> None:
    catalog = Catalog("sch2")
    asm = assembler(spill_dir, catalog)
    events = rename_transaction(asm)
    assert names(events) == [("sch1.t1", b"1"), ("sch1.t1", b"2"), ("sch2.t1", b"3")]
    [(renamed, xid, lsn)] = catalog.asked
    assert (renamed.stale, renamed.claimant) == (OLD, NEW)
    assert (renamed.xid, renamed.commit_lsn) == (XID, COMMIT_LSN)
    assert (xid, lsn) == (XID, 0x151BAB8)
    # kept as if described: a later transaction's row asks nothing
    later = feed(asm, Begin(2 * COMMIT_LSN, 0, XID + 1), ins(b"4", relid=OLD.oid))
    assert names(later) == [("sch2.t1", b"4")]
    assert len(catalog.asked) == 1
    asm.close()


def test_a_new_description_replaces_the_set_aside_one(spill_dir: Path) -> None:
    """PostgreSQL 16 and later describe the renamed relation again: no resolver asked."""
    catalog = Catalog("unused")
    asm = assembler(spill_dir, catalog)
    events = feed(
        asm,
        Begin(COMMIT_LSN, 0, XID),
        OLD,
        ins(b"1", relid=OLD.oid),
        NEW,
        ins(b"2", relid=NEW.oid),
        OLD._replace(namespace="sch2"),
        ins(b"3", relid=OLD.oid),
    )
    assert names(events) == [("sch1.t1", b"1"), ("sch1.t1", b"2"), ("sch2.t1", b"3")]
    assert catalog.asked == []
    asm.close()


def test_without_a_resolver_the_row_is_out_of_sequence(spill_dir: Path) -> None:
    asm = assembler(spill_dir, None)
    with pytest.raises(StreamSequenceError, match="relation id 16390 was described with since"):
        rename_transaction(asm)
    asm.close()


def test_a_name_taken_by_a_dropped_relation_asks_nothing(spill_dir: Path) -> None:
    """DROP TABLE sch1.t1; CREATE TABLE sch1.t1: the old relation has no rows after."""
    catalog = Catalog("unused")
    asm = assembler(spill_dir, catalog)
    events = feed(asm, Begin(COMMIT_LSN, 0, XID), OLD, ins(b"1", relid=OLD.oid))
    events += feed(asm, NEW, ins(b"2", relid=NEW.oid))
    assert names(events) == [("sch1.t1", b"1"), ("sch1.t1", b"2")]
    assert catalog.asked == []
    asm.close()


def test_a_resolved_name_sets_aside_the_relation_last_described_with_it(
    spill_dir: Path,
) -> None:
    """The catalog proves the name now A's, as a Relation message would: a relation
    described with it before (dropped, or renamed unannounced) is set aside in turn."""
    other = Relation(None, 16400, "sch2", "t1", "d", OLD.columns)
    catalog = Catalog("sch2")
    asm = assembler(spill_dir, catalog)
    feed(asm, Begin(1, 0, 1), other, ins(b"0", relid=other.oid), Commit(0, 1, 2, 0))
    assert names(rename_transaction(asm))[-1] == ("sch2.t1", b"3")
    feed(asm, Begin(2 * COMMIT_LSN, 0, XID + 1), ins(b"4", relid=other.oid))
    [_, (renamed, _, _)] = catalog.asked
    assert (renamed.stale, renamed.claimant.oid) == (other, OLD.oid)


def test_streamed_transaction_resolves_at_replay(spill_dir: Path) -> None:
    """Inside a stream the descriptions apply at replay, with the commit's xid and LSN."""
    catalog = Catalog("sch2")
    asm = assembler(spill_dir, catalog)
    feed(asm, Begin(1, 0, 1), OLD, ins(b"0", relid=OLD.oid), Commit(0, 1, 2, 0))
    feed(
        asm,
        StreamStart(XID, True),
        NEW._replace(xid=XID),
        ins(b"2", XID, NEW.oid),
        ins(b"3", XID, OLD.oid),
        StreamStop(),
        wal_start=0x200,
    )
    events = feed(asm, StreamCommit(XID, 0, COMMIT_LSN, COMMIT_LSN + 8, 0))
    assert names(events) == [("sch1.t1", b"2"), ("sch2.t1", b"3")]
    [(renamed, xid, lsn)] = catalog.asked
    assert (renamed.xid, renamed.commit_lsn, xid, lsn) == (XID, COMMIT_LSN, XID, 0x200)
    asm.close()
