"""The checker itself, on hand-made records: it must see every kind of violation."""

from __future__ import annotations

from typing import Any

import pytest
from delivery.kafka_io import Rec

from bridge.lsn import LSN

from .checker import Fault, Summary, check

pytestmark = pytest.mark.fault


def rec(txn: int, row: int, lsn: int, offset: int, append_ms: int, partition: int = 0) -> Rec:
    value: dict[str, Any] = {"after": {"txn": txn, "row": row}, "source": {"commit_lsn": lsn}}
    return Rec("t", partition, offset, append_ms, {"id": txn * 10 + row}, value)


COMMITTED = {(1, 1), (2, 1), (3, 1)}
CLEAN = [rec(1, 1, 100, 0, 10), rec(2, 1, 200, 1, 11), rec(3, 1, 300, 2, 12)]
FAULT = Fault(20.0, LSN(200), "kill")


def test_clean_run() -> None:
    assert check("clean", COMMITTED, CLEAN, [], exactly_once=True) == Summary(
        "clean", 0, 3, 0, 0, 0, 0
    )


def test_lost_row() -> None:
    assert check("lost", COMMITTED, CLEAN[:2], [], exactly_once=False).lost == 1


def test_resend_after_fault_at_or_past_acked_lsn_is_allowed() -> None:
    records = [*CLEAN, rec(2, 1, 200, 3, 30), rec(3, 1, 300, 4, 30)]
    summary = check("resend", COMMITTED, records, [FAULT], exactly_once=False)
    assert (summary.duplicated, summary.bad_duplicates) == (2, 0)


def test_resend_below_acked_lsn_or_without_fault_is_forbidden() -> None:
    below = check("below", COMMITTED, [*CLEAN, rec(1, 1, 100, 3, 30)], [FAULT], False)
    assert below.bad_duplicates == 1
    early = check("early", COMMITTED, [*CLEAN, rec(3, 1, 300, 3, 15)], [FAULT], False)
    assert early.bad_duplicates == 1


def test_any_duplicate_is_forbidden_in_exactly_once() -> None:
    records = [*CLEAN, rec(3, 1, 300, 3, 30)]
    assert check("eos", COMMITTED, records, [FAULT], exactly_once=True).bad_duplicates == 1


def test_reordering_within_a_partition_only() -> None:
    swapped = [rec(2, 1, 200, 0, 10), rec(1, 1, 100, 1, 11), rec(3, 1, 300, 2, 12)]
    assert check("swapped", COMMITTED, swapped, [], False).out_of_order == 1
    spread = [rec(2, 1, 200, 0, 10), rec(1, 1, 100, 0, 11, partition=1), rec(3, 1, 300, 1, 12)]
    assert check("spread", COMMITTED, spread, [], False).out_of_order == 0


def test_a_keyless_change_resent_into_another_partition_is_a_duplicate() -> None:
    """A TRUNCATE has no key: the partitioner puts each copy anywhere. Here its first copy
    went to partition 1; after a restart (acknowledged 200) it is resent, with the newer
    change after it, into partition 0, behind that newer change's first copy. The resent
    copy is the duplicate (appended later), not a first copy arriving out of order."""
    earlier = Fault(5.0, LSN(50), "restart")
    records = [
        rec(1, 1, 100, 0, 10),
        rec(3, 1, 300, 1, 12),
        rec(2, 1, 200, 0, 11, partition=1),  # the TRUNCATE, first copy
        rec(2, 1, 200, 2, 30),  # resent after the restart, into partition 0
        rec(3, 1, 300, 3, 31),
    ]
    summary = check("keyless resent", COMMITTED, records, [earlier, FAULT], exactly_once=False)
    assert (summary.lost, summary.out_of_order) == (0, 0)
    assert (summary.duplicated, summary.bad_duplicates) == (2, 0)


def test_a_keyless_change_out_of_order_in_its_partition_is_caught() -> None:
    """Its first copy (the earliest appended) still has to keep its partition's order."""
    late = [
        rec(1, 1, 100, 0, 10),
        rec(3, 1, 300, 1, 12),
        rec(2, 1, 200, 2, 13),  # first copy, behind 300
        rec(2, 1, 200, 0, 30, partition=1),  # a later copy elsewhere
    ]
    summary = check("keyless late", COMMITTED, late, [FAULT], exactly_once=False)
    assert (summary.out_of_order, summary.duplicated, summary.bad_duplicates) == (1, 1, 0)
