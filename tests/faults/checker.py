"""The fault suite's verdict: Kafka's records against PostgreSQL's committed history.

PostgreSQL's side is the ledger table itself, read after the run: a row is there iff
its transaction committed (crashes and restarts included), so nothing the writer
merely believed it committed can hide a loss. Kafka's side is every record of the
run's topics, read from the beginning (librdkafka's default isolation level is
read_committed, so aborted exactly-once transactions are invisible, as they must be).

A fault is (when, confirmed_flush_lsn at that moment). After a fault PostgreSQL
resends every transaction whose commit LSN is at or past the slot's position, so a
second copy of a row is legitimate only in at-least-once mode, only if it reached
Kafka after a fault, and only if its transaction committed at or past the position
acknowledged at that (latest preceding) fault.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Hashable, Sequence
from typing import Any, NamedTuple, Protocol, TypeVar

import psycopg
from delivery.kafka_io import Rec

from bridge.lsn import LSN


class Fault(NamedTuple):
    t_ms: float  # wall clock just before the fault was injected
    acked: LSN  # confirmed_flush_lsn when the fault hit (what PostgreSQL will not resend)
    what: str


class Summary(NamedTuple):
    scenario: str
    faults: int
    checked: int  # committed rows compared
    lost: int
    duplicated: int  # second copies, allowed or not
    bad_duplicates: int  # copies the mode or the acknowledged LSN forbids
    out_of_order: int
    phantom: int = 0  # changes in Kafka that no committed transaction made


class Located(Protocol):
    """A record as the checker reads it (delivery.kafka_io.Rec, the soak's SoakRec)."""

    @property
    def topic(self) -> str: ...

    @property
    def partition(self) -> int: ...

    @property
    def offset(self) -> int: ...

    @property
    def append_ms(self) -> int: ...

    @property
    def commit_lsn(self) -> int: ...


R = TypeVar("R", bound=Located)


def committed_rows(conn: psycopg.Connection[Any]) -> set[tuple[int, int]]:
    return {(t, r) for t, r in conn.execute("SELECT txn, row FROM ledger").fetchall()}


def _ledger_key(rec: Rec) -> tuple[int, int] | None:
    if rec.value is None or rec.value["after"] is None:
        return None
    after = rec.value["after"]
    return int(after["txn"]), int(after["row"])


def check(
    scenario: str,
    committed: set[Any],
    records: Sequence[R],
    faults: Sequence[Fault],
    exactly_once: bool,
    identity: Callable[[R], Hashable | None] = _ledger_key,  # type: ignore[assignment]
) -> Summary:
    """Count lost, phantom, duplicated (and forbidden duplicates) and reordered changes;
    print the table.

    `identity` names the committed change a record carries (None: a record that carries
    none, such as a tombstone); `committed` holds the identities of every committed change.
    Order: per partition (hence per key), the first copies of changes must arrive in
    commit-LSN order; a resent copy is judged by the duplicate rule instead. The first
    copy is the one Kafka appended first (`first_copies`), which for a record without a key
    (a TRUNCATE) may be in another partition than its resent copy.
    """
    fault_times = [f.t_ms for f in faults]
    first: set[Any] = set()
    duplicated = bad = reordered = 0
    last_lsn: dict[tuple[str, int], int] = {}
    newest: dict[tuple[str, int], R] = {}
    disorder: list[tuple[R, R]] = []
    ordered = sorted(records, key=lambda r: (r.topic, r.partition, r.offset))
    firsts = first_copies(ordered, identity)
    for rec in ordered:
        key = identity(rec)
        if key is None:
            continue
        if firsts[key] is not rec:
            duplicated += 1
            n = bisect.bisect_right(fault_times, rec.append_ms)
            if exactly_once or n == 0 or rec.commit_lsn < faults[n - 1].acked:
                bad += 1
            continue
        first.add(key)
        where = (rec.topic, rec.partition)
        if rec.commit_lsn < last_lsn.get(where, 0):
            reordered += 1
            disorder.append((rec, newest[where]))
        if rec.commit_lsn >= last_lsn.get(where, 0):
            last_lsn[where], newest[where] = rec.commit_lsn, rec
    summary = Summary(
        scenario,
        len(faults),
        len(committed),
        len(committed - first),
        duplicated,
        bad,
        reordered,
        len(first - committed),
    )
    print_table([summary])
    for late, passed in disorder[:5]:
        print_disorder(ordered, late, passed, identity)
    return summary


def first_copies(ordered: Sequence[R], identity: Callable[[R], Hashable | None]) -> dict[Any, R]:
    """Each change's first copy in Kafka, from records sorted by (topic, partition, offset).

    Within a partition the lowest offset. A record with a key has every copy in its key's
    partition; one without (a TRUNCATE: the partitioner picks any partition) may have its
    copies in several, and Kafka's append time tells which came first (the soak's topics
    use LogAppendTime). Taking the lowest partition's copy instead made a TRUNCATE resent
    after a restart into a lower-numbered partition look like a first copy arriving after
    the newer changes the run before had put there: "out of order", where the record was
    a duplicate (and its real first copy was counted as the duplicate)."""
    firsts: dict[Any, R] = {}
    for rec in ordered:
        key = identity(rec)
        if key is None:
            continue
        seen = firsts.get(key)
        if seen is None or (
            (seen.topic, seen.partition) != (rec.topic, rec.partition)
            and rec.append_ms < seen.append_ms
        ):
            firsts[key] = rec
    return firsts


def print_disorder(
    ordered: Sequence[R], late: R, passed: R, identity: Callable[[R], Hashable | None]
) -> None:
    """A first copy that arrived after a newer change in its partition: both records, and
    the partition's records from the newer one to a few past the late one, with their
    identities, commit LSNs, offsets and append times (what tells a replay from disorder)."""
    print(
        f"\nout of order in {late.topic}[{late.partition}]: offset {late.offset} "
        f"{identity(late)} commit {LSN(late.commit_lsn)} after offset {passed.offset} "
        f"{identity(passed)} commit {LSN(passed.commit_lsn)}"
    )
    key = getattr(late, "key", None)
    for rec in ordered:
        if (rec.topic, rec.partition) != (late.topic, late.partition):
            continue
        near = any(-3 <= rec.offset - at.offset <= 3 for at in (late, passed))
        if near or (key is not None and getattr(rec, "key", None) == key):
            print(f"  {rec.offset:>8} {LSN(rec.commit_lsn)!s:>14} {rec.append_ms} {identity(rec)}")


def print_table(rows: Sequence[Summary]) -> None:
    head = (
        "scenario",
        "faults",
        "checked",
        "lost",
        "duplicated",
        "bad dups",
        "out of order",
        "phantom",
    )
    cells = [head, *[tuple(str(v) for v in row) for row in rows]]
    widths = [max(len(c[i]) for c in cells) for i in range(len(head))]
    lines = [" | ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)) for row in cells]
    lines.insert(1, "-+-".join("-" * w for w in widths))
    print("\n" + "\n".join(lines))


def assert_clean(summary: Summary) -> None:
    assert summary.checked > 0, "no committed rows to check"
    assert summary.lost == 0, f"{summary.lost} committed rows lost: {summary}"
    assert summary.bad_duplicates == 0, f"forbidden duplicates: {summary}"
    assert summary.out_of_order == 0, f"rows out of commit order: {summary}"
    assert summary.phantom == 0, f"changes no committed transaction made: {summary}"
