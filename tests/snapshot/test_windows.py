"""The incremental snapshot's state machine (bridge/snapshot/windows.py), without a server.

The property tests play DBLog's argument out: a table, transactions committed in some
order, a chunk read somewhere between its low and high watermarks (or, read-only, in a
snapshot followed by the stream passing its position); a consumer that applies the
topic in order must hold exactly the table's rows from the moment the window closed on.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bridge.decode.messages import KIND_NULL, KIND_TEXT, Column, Relation, TupleData
from bridge.events.model import OP_CREATE, OP_DELETE, OP_TRUNCATE, OP_UPDATE, Change
from bridge.record import KafkaRecord
from bridge.snapshot.windows import (
    Completed,
    Mark,
    Run,
    Window,
    Windows,
    requested_run,
    signal_row,
    stop_names,
)

OID = 16384
OTHER = 16385
IDS = ("w-open", "w-close")


def key(k: int) -> bytes:
    return b"k%d" % k


def window(rows: dict[int, str], last_key: tuple[str, ...] = ("9",), **how: Any) -> Window:
    if not how:
        how = {"watermarks": IDS}
    return Window(
        "public.t", OID, "topic.t", ((key(k), v.encode()) for k, v in rows.items()), last_key, **how
    )


def running(*names: str, max_key: tuple[str, ...] = ("9",)) -> Windows:
    machine = Windows([Run("run-1", list(names), {})])
    run = machine.next_step()
    assert isinstance(run, Run)
    run.max_key = max_key
    return machine


# -- one window -------------------------------------------------------------------------


def test_changes_before_the_low_watermark_leave_the_rows() -> None:
    machine = running("public.t")
    machine.open(window({1: "a", 2: "b"}))
    assert machine.on_change(OID, OP_UPDATE, [key(1)], 0x100) is None
    machine.on_watermark("w-open", 0x110)
    closed = machine.on_watermark("w-close", 0x120)
    assert closed is not None
    assert closed.rows == [
        KafkaRecord("topic.t", key(1), b"a"),
        KafkaRecord("topic.t", key(2), b"b"),
    ]


def test_a_change_between_the_watermarks_supersedes_its_keys_row() -> None:
    machine = running("public.t")
    machine.open(window({1: "a", 2: "b", 3: "c"}))
    machine.on_watermark("w-open", 0x110)
    machine.on_change(OID, OP_UPDATE, [key(2)], 0x111)
    machine.on_change(OTHER, OP_DELETE, [key(1)], 0x112)  # another table's key 1
    closed = machine.on_watermark("w-close", 0x120)
    assert closed is not None
    assert [r.key for r in closed.rows] == [key(1), key(3)]
    assert machine.window is None


def test_a_truncate_between_the_watermarks_empties_the_chunk() -> None:
    machine = running("public.t")
    machine.open(window({1: "a"}))
    machine.on_watermark("w-open", 0x110)
    machine.on_change(OID, OP_TRUNCATE, [], 0x111)
    closed = machine.on_watermark("w-close", 0x120)
    assert closed is not None and closed.rows == []


def test_other_signal_rows_leave_the_window_open() -> None:
    machine = running("public.t")
    machine.open(window({1: "a"}))
    assert not machine.is_watermark("snap-2")
    assert machine.on_watermark("snap-2", 0x110) is None
    assert machine.is_watermark("w-close") and machine.window is not None


def test_the_position_is_stored_once_the_flush_passes_the_closing_transaction() -> None:
    machine = running("public.t")
    machine.open(window({1: "a"}, last_key=("1",)))
    machine.on_watermark("w-open", 0x110)
    machine.on_watermark("w-close", 0x120)
    assert machine.acknowledged(0x120) == []  # the flush position must pass the commit
    (mark,) = machine.acknowledged(0x121)
    assert mark.run_id == "run-1" and mark.detail["last_key"] == ("1",) and not mark.done


def test_a_read_only_window_closes_at_the_first_transaction_past_its_position() -> None:
    machine = running("public.t")
    machine.open(window({1: "a", 2: "b"}, until=0x200))
    assert machine.on_change(OID, OP_UPDATE, [key(1)], 0x1F0) is None  # committed before
    closed = machine.on_change(OID, OP_UPDATE, [key(2)], 0x200)
    assert closed is not None and closed.rows == []  # both keys' rows superseded


def test_a_read_only_window_the_idle_stream_passes_goes_out_between_transactions() -> None:
    machine = running("public.t")
    machine.open(window({1: "a"}, until=0x200))
    assert machine.waits_at(0x1FF) is True
    assert machine.waits_at(0x200) is False
    closed = machine.take_idle()
    sent: list[bool] = []
    machine.close_between(0x200, lambda: bool(sent))
    assert closed.rows == [KafkaRecord("topic.t", key(1), b"a")]
    assert machine.acknowledged(0x10_000) == []  # not confirmed by Kafka yet
    sent.append(True)
    assert len(machine.acknowledged(0)) == 1


def test_a_window_is_watermarked_or_read_only() -> None:
    with pytest.raises(ValueError, match="not both"):
        Window("t", OID, "topic", (), (), watermarks=IDS, until=1)


# -- runs -------------------------------------------------------------------------------


def test_a_chunk_reaching_the_maximum_ends_the_table_and_the_run_moves_on() -> None:
    machine = running("public.t", "public.u", max_key=("5",))
    machine.open(window({5: "e"}, last_key=("5",)))
    machine.on_watermark("w-open", 1)
    closed = machine.on_watermark("w-close", 2)
    assert closed is not None and closed.table_done and closed.table_rows == 1
    assert closed.max_key == ("5",)
    run = machine.next_step()
    assert isinstance(run, Run) and run.table == "public.u" and run.max_key is None
    machine.table_done(run)
    completed = machine.next_step()
    assert isinstance(completed, Completed) and completed.run is run
    assert machine.next_step() is None
    marks = machine.acknowledged(10)
    assert [m.done for m in marks] == [False, True]


def test_a_chunk_short_of_the_maximum_keeps_the_table() -> None:
    machine = running("public.t", max_key=("9",))
    machine.open(window({1: "a"}, last_key=("1",)))
    machine.on_watermark("w-open", 1)
    closed = machine.on_watermark("w-close", 2)
    assert closed is not None and not closed.table_done
    run = machine.next_step()
    assert isinstance(run, Run) and run.last_key == ("1",) and run.rows == 1


def test_no_new_chunk_while_paused_or_while_a_window_is_open() -> None:
    machine = running("public.t")
    machine.paused = True
    assert machine.next_step() is None
    machine.paused = False
    machine.open(window({1: "a"}))
    assert machine.next_step() is None
    assert not machine.wants_work()


def test_stopping_the_table_being_read_starts_it_over_if_it_stays() -> None:
    run = Run("r", ["a", "b", "c"], {})
    run.last_key, run.max_key, run.rows = ("1",), ("9",), 7
    assert run.stop(["b"]) == ["b"]
    assert run.names == ["a", "c"] and run.last_key == ("1",)  # "a" goes on where it was
    assert run.stop(["a"]) == ["a"]
    assert run.names == ["c"] and run.last_key is None and run.max_key is None and run.rows == 0


def test_stopping_everything_completes_the_run_at_the_next_step() -> None:
    machine = running("public.t", "public.u")
    machine.stops.append(None)
    assert machine.wants_work()
    ((run, stopped),) = machine.apply_stops()
    assert stopped == ["public.t", "public.u"] and run.names == []
    assert isinstance(machine.next_step(), Completed)


def test_a_restored_run_goes_on_where_its_detail_left_it() -> None:
    run = Run("r", ["a", "b"], {"a": "id > 1"})
    run.index, run.last_key, run.max_key, run.rows = 1, ("3",), ("9",), 4
    again = Run.restore("r", run.detail())
    assert again.detail() == run.detail()


def test_marks_are_stored_in_order_only() -> None:
    machine = Windows()
    machine.marks.extend([Mark(5, "a", {}, False), Mark(3, "b", {}, False)])
    assert machine.acknowledged(4) == []  # the older one holds the newer back
    assert [m.run_id for m in machine.acknowledged(6)] == ["a", "b"]


# -- signals ----------------------------------------------------------------------------


def test_an_execute_snapshot_signal_asks_for_a_run() -> None:
    data = (
        '{"data-collections": ["public.t", "public.u"], "type": "INCREMENTAL",'
        ' "additional-conditions": [{"data-collection": "public.t", "filter": "id > 1"}]}'
    )
    run = requested_run("s1", data)
    assert isinstance(run, Run)
    assert run.names == ["public.t", "public.u"] and run.conditions == {"public.t": "id > 1"}
    assert "malformed" in str(requested_run("s2", "{}"))
    assert "only incremental" in str(
        requested_run("s3", '{"data-collections": [], "type": "blocking"}')
    )


def test_stop_snapshot_names() -> None:
    assert stop_names('{"data-collections": ["public.t"]}') == ["public.t"]
    assert stop_names("{}") is None
    assert stop_names("not json") is None


def test_a_signal_rows_columns_are_found_by_name() -> None:
    columns = tuple(Column(0, name, 25, -1) for name in ("data", "id", "type"))
    relation = Relation(None, 1, "public", "signals", "d", columns)
    row = TupleData(bytes((KIND_NULL, KIND_TEXT, KIND_TEXT)), (None, b"s1", b"pause-snapshot"))
    change = Change(OP_CREATE, relation, "", None, row, 0, (), 0, None, 0)
    assert signal_row(change) == ("s1", "pause-snapshot", None)


# -- DBLog, played out ------------------------------------------------------------------

KEYS = range(5)
value = st.text(alphabet="xyz", min_size=1, max_size=3)
op = st.tuples(st.sampled_from(KEYS), st.none() | value)  # None: delete
transactions = st.lists(st.lists(op, min_size=1, max_size=3), min_size=0, max_size=10)


def apply(state: dict[bytes, bytes], changes: list[tuple[int, str | None]]) -> None:
    for k, v in changes:
        if v is None:
            state.pop(key(k), None)
        else:
            state[key(k)] = v.encode()


def replay(
    machine: Windows,
    changes: list[tuple[int, str | None]],
    lsn: int,
    state: dict[bytes, bytes],
    consumer: dict[bytes, bytes],
) -> bool:
    """One transaction committed at `lsn`, change by change: the table and the consumer
    take each change, then the window sees it; rows of a window it closes go to the
    consumer right after it. Whether a window closed."""
    closed = False
    for k, v in changes:
        apply(state, [(k, v)])
        apply(consumer, [(k, v)])
        out = machine.on_change(OID, OP_UPDATE if v is not None else OP_DELETE, [key(k)], lsn)
        if out is not None:
            take(consumer, out.rows)
            closed = True
    return closed


def take(consumer: dict[bytes, bytes], rows: list[KafkaRecord]) -> None:
    for r in rows:
        assert r.key is not None and r.value is not None
        consumer[r.key] = r.value


@settings(max_examples=300, deadline=None)
@given(
    initial=st.dictionaries(st.sampled_from(KEYS), value),
    txs=transactions,
    where=st.lists(st.integers(min_value=0, max_value=10), min_size=3, max_size=3),
)
def test_dblog_a_consumer_holds_the_table_once_the_window_closed(
    initial: dict[int, str], txs: list[list[tuple[int, str | None]]], where: list[int]
) -> None:
    """In commit order: the low watermark after transaction `lw`, the chunk read after
    `read`, the high watermark after `hw` (lw <= read <= hw). The read is done (and the
    window made) before the stream brings the watermarks; the stream then delivers every
    transaction in commit order, the window's rows go out at the high watermark."""
    lw, read, hw = sorted(min(w, len(txs)) for w in where)
    table = {key(k): v.encode() for k, v in initial.items()}
    at_read = dict(table)
    for changes in txs[:read]:
        apply(at_read, changes)
    machine = running("public.t")
    machine.open(Window("public.t", OID, "t", sorted(at_read.items()), ("9",), watermarks=IDS))
    state, consumer = dict(table), dict[bytes, bytes]()
    closed = False
    for i in range(len(txs) + 1):
        lsn = 10 * i
        if i == lw:
            machine.on_watermark("w-open", lsn + 1)
        if i == hw:
            out = machine.on_watermark("w-close", lsn + 2)
            assert out is not None
            take(consumer, out.rows)
            closed = True
        if closed:
            assert consumer == state, f"before transaction {i}"
        if i < len(txs):
            replay(machine, txs[i], lsn + 3, state, consumer)
    assert closed and consumer == state


@settings(max_examples=300, deadline=None)
@given(
    initial=st.dictionaries(st.sampled_from(KEYS), value),
    txs=transactions,
    read=st.integers(min_value=0, max_value=10),
)
def test_read_only_a_consumer_holds_the_table_once_the_stream_passed_the_read(
    initial: dict[int, str], txs: list[list[tuple[int, str | None]]], read: int
) -> None:
    """The chunk read in the snapshot after transaction `read`, with the position right
    after that transaction's commit; the stream has delivered as much. The window closes
    at the first change of a later transaction, or when the idle stream reaches it."""
    read = min(read, len(txs))
    state = {key(k): v.encode() for k, v in initial.items()}
    consumer: dict[bytes, bytes] = {}
    machine = running("public.t")
    closed = False
    for i in range(len(txs) + 1):
        lsn = 2 * i + 1  # commit positions; the read's is even: between two of them
        if i == read:
            machine.open(Window("public.t", OID, "t", sorted(state.items()), ("9",), until=lsn - 1))
        if i == len(txs):
            break
        closed = replay(machine, txs[i], lsn, state, consumer) or closed
        if closed:
            assert consumer == state, f"after transaction {i}"
    if not closed:
        assert machine.waits_at(2 * len(txs)) is False
        take(consumer, machine.take_idle().rows)
    assert consumer == state
