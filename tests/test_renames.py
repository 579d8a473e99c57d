"""bridge.renames.unproven: when a catalog row's writer is known to precede a change (the
live cases are tests/test_schema_rename.py)."""

from __future__ import annotations

from bridge.decode.messages import Column, Relation
from bridge.events.relations import Renamed
from bridge.renames import unproven

OLD = Relation(None, 16385, "sch1", "t1", "d", (Column(0, "c1", 23, -1),))
NEW = OLD._replace(oid=16390)
CLAIMED = Renamed(OLD, NEW, 734, 0x2000)  # B described in transaction 734, committed at 0x2000


def test_written_by_the_transaction_being_emitted() -> None:
    assert unproven("734", False, None, CLAIMED, 734, 0x1000) is None


def test_written_by_the_claimants_transaction_before_the_change() -> None:
    assert unproven("734", False, None, CLAIMED, 735, 0x2000) is None
    # a change that lies before that commit (a longer transaction) may predate the write
    assert unproven("734", False, None, CLAIMED, 735, 0x1FFF) is not None
    # the claimant's transaction undecided when it was described (prepared)
    assert unproven("734", False, None, CLAIMED._replace(commit_lsn=None), 735, 0x3000)


def test_older_than_the_slot_for_a_change_at_or_past_its_confirmed_position() -> None:
    assert unproven("733", True, 0x1800, CLAIMED, 734, 0x1800) is None
    assert unproven("733", True, 0x1800, CLAIMED, 734, 0x17FF) is not None
    assert unproven("733", True, None, CLAIMED, 734, 0x1800) is not None  # no slot row


def test_any_other_writer_is_not_placed() -> None:
    why = unproven("736", False, 0x1800, CLAIMED, 734, 0x1900)
    assert why == "written by transaction 736, which the bridge cannot place before the change"
