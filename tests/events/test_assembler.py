from __future__ import annotations

import tracemalloc
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest

from bridge.decode.messages import (
    Begin,
    BeginPrepare,
    Commit,
    CommitPrepared,
    Delete,
    LogicalMessage,
    Message,
    Origin,
    Prepare,
    RollbackPrepared,
    Startup,
    StreamAbort,
    StreamCommit,
    StreamPrepare,
    StreamStart,
    StreamStop,
    Truncate,
    TypeMessage,
    Update,
)
from bridge.errors import ProtocolError
from bridge.events import (
    Change,
    Event,
    EventAssembler,
    LogicalMessageEvent,
    TxBegin,
    TxCommit,
)

from .conftest import OTHER, REL, REL_V2, RELID, feed, ins, raw, row, spill_files

Make = Callable[..., EventAssembler]


def changes(events: Sequence[Event]) -> list[Change]:
    return [e for e in events if isinstance(e, Change)]


def values(events: Sequence[Event]) -> list[bytes | None]:
    return [c.new.values[0] for c in changes(events) if c.new is not None]


def stream(xid: int, *msgs: Message, first: bool = True) -> tuple[Message, ...]:
    return (StreamStart(xid, first), *msgs, StreamStop())


# -- plain transactions ---------------------------------------------------------


def test_plain_transaction_passes_each_row_through_at_once(make: Make) -> None:
    asm = make()
    assert feed(asm, Begin(1000, 77, 900)) == []
    assert feed(asm, REL) == []
    first = feed(asm, ins(b"1"))
    assert first == [
        TxBegin(900, 1000, 77, None),
        Change("c", REL, "", None, row(b"1"), 0, (), 0, None),
    ]
    upd = feed(asm, Update(None, RELID, "K", row(b"1"), row(b"2")))
    assert upd == [Change("u", REL, "K", row(b"1"), row(b"2"), 1, (), 0, None)]
    dele = feed(asm, Delete(None, RELID, "O", row(b"2")))
    assert dele == [Change("d", REL, "O", row(b"2"), None, 2, (), 0, None)]
    assert asm.pool.in_memory_bytes == 0
    assert feed(asm, Commit(0, 1000, 1010, 77)) == [TxCommit(900, 1000, 1010, 77, {"public.t": 3})]
    assert asm.last_commit_end_lsn == 1010


def test_large_plain_transaction_runs_in_constant_memory(make: Make, spill_dir: Path) -> None:
    asm = make(memory_limit_bytes=0)
    feed(asm, REL, Begin(5000, 0, 1))
    msg = ins(b"x")
    data = raw(msg)
    tracemalloc.start()
    try:
        for i in range(100_000):
            out = list(asm.feed(msg, data, i, i))
            assert len(out) == (2 if i == 0 else 1)
            if i == 1000:
                baseline = tracemalloc.get_traced_memory()[0]
        grown = tracemalloc.get_traced_memory()[0] - baseline
    finally:
        tracemalloc.stop()
    assert grown < 64 * 1024
    assert spill_files(spill_dir) == []
    (end,) = feed(asm, Commit(0, 5000, 5010, 0))
    assert isinstance(end, TxCommit) and end.event_count_by_table == {"public.t": 100_000}


def test_rows_of_interleaved_tables_name_and_count_each_table(make: Make) -> None:
    """Runs of one table, another table between them, and the first table described
    again mid-transaction: every row carries its current relation, and the commit
    counts each table's rows once, whatever the runs."""
    asm = make()
    feed(asm, REL, OTHER, Begin(100, 0, 1))
    events = feed(
        asm,
        ins(b"1"),
        ins(b"2"),
        ins(b"k", relid=OTHER.oid),
        ins(b"3"),
        REL_V2,
        ins(b"4"),
        ins(b"l", relid=OTHER.oid),
    )
    got = [(c.relation, c.ordinal) for c in changes(events)]
    assert got == [(REL, 0), (REL, 1), (OTHER, 2), (REL, 3), (REL_V2, 4), (OTHER, 5)]
    (end,) = feed(asm, Commit(0, 100, 110, 1))
    assert isinstance(end, TxCommit) and end.event_count_by_table == {"public.t": 4, "app.u": 2}
    feed(asm, Begin(200, 0, 2))
    assert [c.relation for c in changes(feed(asm, ins(b"5")))] == [REL_V2]
    (end,) = feed(asm, Commit(0, 200, 210, 2))
    assert isinstance(end, TxCommit) and end.event_count_by_table == {"public.t": 1}


def test_origin_message_names_the_transaction_origin(make: Make) -> None:
    events = feed(make(), REL, Begin(100, 1, 5), Origin(42, "upstream"), ins(b"a"))
    assert events[0] == TxBegin(5, 100, 1, "upstream")


def test_empty_transaction_still_begins_and_commits(make: Make) -> None:
    events = feed(make(), Begin(100, 1, 5), Commit(0, 100, 110, 1))
    assert events == [TxBegin(5, 100, 1, None), TxCommit(5, 100, 110, 1, {})]


def test_relation_replaced_mid_transaction(make: Make) -> None:
    events = feed(
        make(), REL, Begin(100, 0, 1), ins(b"1"), REL_V2, ins(b"2"), Commit(0, 100, 110, 0)
    )
    assert [c.relation for c in changes(events)] == [REL, REL_V2]


def test_unknown_relation_id_is_a_protocol_error(make: Make) -> None:
    asm = make()
    feed(asm, REL, Begin(100, 0, 1))
    with pytest.raises(ProtocolError) as err:
        feed(asm, ins(b"1", relid=777))
    assert "777" in err.value.reason and err.value.message_type == "I"


def test_truncate_yields_one_change_per_table(make: Make) -> None:
    events = feed(make(), REL, OTHER, Begin(100, 0, 1), Truncate(None, 1, (RELID, OTHER.oid)))
    got = changes(events)
    assert [(c.op, c.relation, c.ordinal) for c in got] == [("t", REL, 0), ("t", OTHER, 1)]
    assert all(c.relations == (REL, OTHER) and c.truncate_options == 1 for c in got)


def test_logical_messages(make: Make) -> None:
    asm = make()
    plain = LogicalMessage(None, False, 50, "audit", b"hello")
    assert feed(asm, plain) == [LogicalMessageEvent(50, "audit", b"hello")]
    inner = LogicalMessage(None, True, 60, "p", b"x")
    events = feed(asm, Begin(100, 0, 1), inner)
    assert events[1] == Change("m", None, "", None, None, 0, (), 0, inner)
    feed(asm, Commit(0, 100, 110, 0))
    # Non-transactional messages are never held back, even inside a stream block.
    feed(asm, StreamStart(7, True))
    assert feed(asm, plain._replace(xid=7)) == [LogicalMessageEvent(50, "audit", b"hello")]


def test_type_messages_fill_the_type_cache(make: Make) -> None:
    asm = make()
    feed(asm, TypeMessage(None, 70000, "public", "mood"))
    assert asm.relations.type_name(70000) == "public.mood"
    assert asm.relations.type_name(1) is None
    feed(asm, *stream(9, REL._replace(xid=9), TypeMessage(9, 70001, "app", "colour")))
    assert asm.relations.type_name(70001) is None  # applied when the stream commits
    feed(asm, StreamCommit(9, 0, 200, 210, 0))
    assert asm.relations.type_name(70001) == "app.colour"


def test_startup_message_is_ignored(make: Make) -> None:
    assert feed(make(), Startup(1, {"encoding": "UTF8"})) == []


# -- streamed transactions --------------------------------------------------------


def test_interleaved_streams_released_at_their_commits(make: Make) -> None:
    asm = make()
    out = feed(
        asm,
        REL,
        StreamStart(10, True),
        Origin(0, "far"),
        REL._replace(xid=10),
        ins(b"a", 10),
        StreamStop(),
        *stream(20, REL._replace(xid=20), ins(b"b", 20)),
        *stream(10, ins(b"c", 10), first=False),
    )
    assert out == []
    first = feed(asm, StreamCommit(20, 0, 300, 310, 3))
    assert first == [
        TxBegin(20, 300, 3, None),
        Change("c", REL, "", None, row(b"b"), 0, (), 0, None),
        TxCommit(20, 300, 310, 3, {"public.t": 1}),
    ]
    second = feed(asm, StreamCommit(10, 0, 400, 410, 4))
    assert second[0] == TxBegin(10, 400, 4, "far")
    assert values(second) == [b"a", b"c"]
    assert [c.ordinal for c in changes(second)] == [0, 1]
    assert second[-1] == TxCommit(10, 400, 410, 4, {"public.t": 2})
    assert asm.last_commit_end_lsn == 410


def test_plain_transactions_pass_while_streams_are_open(make: Make) -> None:
    asm = make()
    feed(asm, REL, *stream(10, ins(b"s", 10)))
    out = feed(asm, Begin(150, 0, 11), ins(b"p"), Commit(0, 150, 160, 0))
    assert values(out) == [b"p"]
    assert values(feed(asm, StreamCommit(10, 0, 200, 210, 0))) == [b"s"]


def test_stream_abort_drops_the_transaction(make: Make, spill_dir: Path) -> None:
    asm = make(memory_limit_bytes=0)  # everything on disk
    feed(asm, REL, *stream(10, ins(b"a", 10), ins(b"b", 10)))
    assert len(spill_files(spill_dir)) == 1
    assert feed(asm, StreamAbort(10, 10, None, None)) == []
    assert spill_files(spill_dir) == []
    with pytest.raises(ProtocolError):
        feed(asm, StreamCommit(10, 0, 200, 210, 0))


def test_subtransaction_abort_drops_only_its_rows(make: Make) -> None:
    asm = make()
    # BEGIN; INSERT a; SAVEPOINT s; INSERT b; ROLLBACK TO s; INSERT c; COMMIT
    feed(asm, REL, *stream(100, ins(b"a", 100), ins(b"b", 101)))
    feed(asm, StreamAbort(100, 101, None, None))
    feed(asm, *stream(100, ins(b"c", 102), first=False))
    out = feed(asm, StreamCommit(100, 0, 500, 510, 0))
    assert values(out) == [b"a", b"c"]
    assert [c.ordinal for c in changes(out)] == [0, 1]


def test_rollback_to_outer_savepoint_drops_released_inner_ones(make: Make) -> None:
    asm = make()
    # SAVEPOINT s1 (101); b; SAVEPOINT s2 (102); c; RELEASE s2; d (in 101); ROLLBACK TO s1
    feed(asm, REL, *stream(100, ins(b"a", 100), ins(b"b", 101), ins(b"c", 102), ins(b"d", 101)))
    feed(asm, StreamAbort(100, 102, None, None), StreamAbort(100, 101, None, None))
    feed(asm, *stream(100, ins(b"e", 100), first=False))
    assert values(feed(asm, StreamCommit(100, 0, 500, 510, 0))) == [b"a", b"e"]


def test_abort_of_empty_or_unknown_subtransaction_changes_nothing(make: Make) -> None:
    asm = make()
    feed(asm, REL, *stream(100, ins(b"a", 100), ins(b"b", 101)))
    feed(asm, StreamAbort(100, 999, None, None), StreamAbort(555, 556, None, None))
    assert values(feed(asm, StreamCommit(100, 0, 500, 510, 0))) == [b"a", b"b"]


def test_streamed_relation_applies_at_replay_not_before(make: Make) -> None:
    asm = make()
    feed(asm, REL, *stream(10, REL_V2._replace(xid=10), ins(b"s", 10)))
    plain = feed(asm, Begin(150, 0, 11), ins(b"p"), Commit(0, 150, 160, 0))
    assert changes(plain)[0].relation == REL
    streamed = feed(asm, StreamCommit(10, 0, 200, 210, 0))
    assert changes(streamed)[0].relation == REL_V2
    assert asm.relations.get(RELID) == REL_V2


def test_relation_dropped_with_subtransaction_is_sent_again(make: Make) -> None:
    asm = make()
    feed(asm, *stream(100, REL._replace(xid=101), ins(b"b", 101)))
    feed(asm, StreamAbort(100, 101, None, None))
    feed(asm, *stream(100, REL._replace(xid=100), ins(b"c", 100), first=False))
    assert values(feed(asm, StreamCommit(100, 0, 500, 510, 0))) == [b"c"]


def test_unknown_relation_in_stream_fails_at_replay(make: Make) -> None:
    asm = make()
    feed(asm, *stream(10, ins(b"a", 10, relid=4242)))
    events = iter(asm.feed(StreamCommit(10, 0, 1, 2, 0), b"", 0, 0))
    assert isinstance(next(events), TxBegin)
    with pytest.raises(ProtocolError, match="4242"):
        next(events)


# -- two-phase transactions -------------------------------------------------------


def test_commit_prepared_releases_at_the_commit_position(make: Make) -> None:
    asm = make()
    held = feed(asm, REL, BeginPrepare(700, 710, 5, 33, "g1"), Origin(0, "o"), ins(b"x"))
    held += feed(asm, Prepare(0, 700, 710, 5, 33, "g1"))
    assert held == []
    out = feed(asm, CommitPrepared(0, 900, 910, 9, 33, "g1"))
    assert out[0] == TxBegin(33, 900, 9, "o")
    assert values(out) == [b"x"]
    assert out[-1] == TxCommit(33, 900, 910, 9, {"public.t": 1})
    assert asm.hold_lsn() is None


def test_every_change_carries_the_lsn_it_was_sent_at(make: Make) -> None:
    """Debezium's `source.lsn`: the XLogData start of the change's own message, also for
    changes held back (streamed, prepared) and replayed at their commit."""
    asm = make()
    out = feed(asm, REL, Begin(1000, 77, 900), wal_start=600)
    out += feed(asm, ins(b"a"), wal_start=610)
    out += feed(asm, Truncate(None, 0, (RELID,)), wal_start=620)
    out += feed(asm, Commit(0, 1000, 1010, 77), wal_start=1010)
    held = feed(asm, BeginPrepare(1100, 1110, 5, 33, "g"), wal_start=1020)
    held += feed(asm, ins(b"p"), wal_start=1030)
    held += feed(asm, Prepare(0, 1100, 1110, 5, 33, "g"), wal_start=1110)
    held += feed(asm, *stream(44, ins(b"s", 44)), wal_start=1120)
    assert held == []
    out += feed(asm, CommitPrepared(0, 1200, 1210, 9, 33, "g"), wal_start=1210)
    out += feed(asm, StreamCommit(44, 0, 1300, 1310, 0), wal_start=1310)
    assert [(c.op, c.lsn) for c in changes(out)] == [
        ("c", 610),
        ("t", 620),
        ("c", 1030),
        ("c", 1120),
    ]


def test_rollback_prepared_drops_the_transaction(make: Make, spill_dir: Path) -> None:
    asm = make(memory_limit_bytes=0)
    feed(
        asm, REL, BeginPrepare(700, 710, 5, 33, "g1"), ins(b"x"), Prepare(0, 700, 710, 5, 33, "g1")
    )
    assert len(spill_files(spill_dir)) == 1
    assert feed(asm, RollbackPrepared(0, 710, 800, 5, 8, 33, "g1")) == []
    assert spill_files(spill_dir) == []
    assert asm.hold_lsn() is None
    with pytest.raises(ProtocolError, match="g1"):
        feed(asm, CommitPrepared(0, 900, 910, 9, 33, "g1"))


def test_hold_lsn_is_the_oldest_undecided_prepare(make: Make) -> None:
    asm = make()
    assert asm.hold_lsn() is None
    feed(asm, REL, BeginPrepare(700, 710, 0, 1, "a"))
    assert asm.hold_lsn() == 700  # already while the prepared transaction arrives
    feed(asm, ins(b"1"), Prepare(0, 700, 710, 0, 1, "a"))
    feed(asm, *stream(2, ins(b"2", 2)))
    assert asm.hold_lsn() == 700  # a streamed, undecided transaction holds nothing
    feed(asm, StreamPrepare(0, 800, 810, 0, 2, "b"))
    feed(asm, Begin(850, 0, 3), ins(b"3"), Commit(0, 850, 860, 0))
    assert asm.hold_lsn() == 700
    feed(asm, CommitPrepared(0, 900, 910, 0, 1, "a"))
    assert asm.hold_lsn() == 800
    out = feed(asm, CommitPrepared(0, 950, 960, 0, 2, "b"))
    assert values(out) == [b"2"] and out[0] == TxBegin(2, 950, 0, None)
    assert asm.hold_lsn() is None


def test_prepared_replay_sees_relations_as_they_were(make: Make) -> None:
    asm = make()
    feed(asm, REL, BeginPrepare(700, 710, 0, 1, "a"), ins(b"old"), REL_V2, ins(b"new"))
    feed(asm, Prepare(0, 700, 710, 0, 1, "a"))
    # pgoutput counts REL_V2 as sent: later plain transactions rely on it.
    assert (
        changes(feed(asm, Begin(750, 0, 2), ins(b"p"), Commit(0, 750, 760, 0)))[0].relation
        == REL_V2
    )
    out = changes(feed(asm, CommitPrepared(0, 900, 910, 0, 1, "a")))
    assert [c.relation for c in out] == [REL, REL_V2]


def test_idle_wal_end(make: Make) -> None:
    asm = make()
    assert asm.idle_wal_end() == 0  # nothing received: idle at the start (keepalives lead)
    feed(asm, REL, wal_end=10)
    assert asm.idle_wal_end() == 10
    feed(asm, Begin(100, 0, 1), wal_end=20)
    assert asm.idle_wal_end() is None
    feed(asm, Commit(0, 100, 110, 0), wal_end=30)
    assert asm.idle_wal_end() == 30
    feed(asm, StreamStart(5, True), wal_end=40)
    assert asm.idle_wal_end() is None


@pytest.mark.parametrize(
    "msgs",
    [
        (Commit(0, 1, 2, 0),),
        (REL, ins(b"1")),
        (Begin(1, 0, 1), Begin(2, 0, 2)),
        (Begin(1, 0, 1), StreamStart(2, True)),
        (StreamStart(2, False),),
        (StreamStart(2, True), StreamStop(), StreamStart(2, True)),
        (StreamStop(),),
        (StreamStart(2, True), StreamCommit(2, 0, 1, 2, 0)),
        (StreamPrepare(0, 1, 2, 0, 2, "g"),),
        (Prepare(0, 1, 2, 0, 1, "g"),),
        (BeginPrepare(1, 2, 0, 1, "g"), Prepare(0, 1, 2, 0, 1, "other")),
        (Origin(0, "x"),),
        (
            BeginPrepare(1, 2, 0, 1, "g"),
            Prepare(0, 1, 2, 0, 1, "g"),
            BeginPrepare(1, 2, 0, 1, "g"),
            Prepare(0, 1, 2, 0, 1, "g"),
        ),
    ],
)
def test_out_of_order_messages_are_protocol_errors(make: Make, msgs: tuple[Message, ...]) -> None:
    with pytest.raises(ProtocolError):
        feed(make(), *msgs)


def test_close_removes_spill_files(make: Make, spill_dir: Path) -> None:
    asm = make(memory_limit_bytes=0)
    feed(asm, REL, *stream(1, ins(b"a", 1)), *stream(2, ins(b"b", 2)))
    assert len(spill_files(spill_dir)) == 2
    asm.close()
    assert spill_files(spill_dir) == []
