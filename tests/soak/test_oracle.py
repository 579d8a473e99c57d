"""The soak's rebuild-by-key verdict on hand-made records: what it counts and what it
prints for a mismatch (the CI log alone must tell which key, which records)."""

from __future__ import annotations

import pytest

from .oracle import Identity, Mismatch, SoakRec, print_mismatches, rebuild, state_mismatches

pytestmark = pytest.mark.fault


def rec(offset: int, lsn: int, key: str | None, v: int | None, op: str, p: int = 0) -> SoakRec:
    table = "soak_docs"
    ident: Identity | None = None
    if op == "t":
        ident = (table, None, lsn, "t")
    elif op and v is not None:
        ident = (table, key, v, op)
    return SoakRec(f"x.public.{table}", p, offset, 1000 + offset, lsn, table, key, v, op, ident)


def test_last_record_per_key_wins_and_a_truncate_removes_older_keys() -> None:
    records = [
        rec(0, 100, "1", 1, "c"),
        rec(1, 200, "2", 2, "c"),
        rec(2, 300, "1", 3, "u"),
        rec(0, 400, None, None, "t", p=1),
        rec(3, 500, "3", 4, "c"),
        rec(4, 600, "3", 4, "d"),
        rec(5, 600, "3", None, ""),  # the delete's tombstone
        rec(6, 700, "4", 5, "c"),
    ]
    assert rebuild(records) == {"soak_docs": {"4": 5}}


def test_a_resent_older_version_after_the_newer_one_is_a_mismatch() -> None:
    """At-least-once may repeat a change, but the key's last record must be its newest."""
    records = [rec(0, 100, "1", 1, "c"), rec(1, 200, "1", 2, "u"), rec(2, 100, "1", 1, "c")]
    got = state_mismatches(rebuild(records), {"soak_docs": {"1": 2}})
    assert got == [Mismatch("soak_docs", "1", 1, 2)]


def test_a_mismatch_prints_the_key_its_history_and_its_records(
    capsys: pytest.CaptureFixture[str],
) -> None:
    records = [rec(0, 100, "1", 1, "c"), rec(1, 200, "1", 2, "u"), rec(2, 100, "1", 1, "c")]
    mismatches = [Mismatch("soak_docs", "1", 1, 2)]
    print_mismatches(mismatches, records, lambda t, k: [(1, "c", 7), (2, "u", 8)], 0.0)
    out = capsys.readouterr().out
    assert "soak_docs key 1: Kafka rebuilds v=1, PostgreSQL has v=2" in out
    assert "c1 (xid 7), u2 (xid 8)" in out
    lines = [line for line in out.splitlines() if "soak_docs[0]@" in line]
    assert len(lines) == 3 and lines[2].endswith("c v=1  (repeat)"), out
