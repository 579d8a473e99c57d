"""Which letter names a key (`bridge.verify.deadletters`, pure)."""

from __future__ import annotations

from typing import Any

from bridge.kafka.oversized import parse_letter
from bridge.verify.deadletters import DeadLetter, Explained


def _letter(lsn: int, **row: Any) -> DeadLetter:
    return DeadLetter("public.t", "u", lsn, lsn + 1, "cannot encode", None, (row,))


def test_a_letter_names_its_key_by_the_key_columns_text_and_the_newest_wins() -> None:
    letters = [_letter(1, a="1", b="x", v="old"), _letter(5, a="1", b="x", v="new")]
    letters.append(_letter(9, a={"base64": "AA=="}, b="y", v="binary"))
    explained = Explained(letters, None, ["a", "b"])  # type: ignore[arg-type]
    found = explained.find(b"no such key body", ("1", "x"))
    assert found is not None and found.lsn == 5
    assert explained.find(b"", ("1", "y")) is None
    assert explained.find(b"", None) is None  # a key only Kafka has: by its bytes alone
    assert explained.count == 3


def test_records_that_are_no_letters_of_the_bridge_are_left_out() -> None:
    assert parse_letter(b'{"table": "public.t", "lsn": 5, "commit_lsn": 6}') is not None
    assert parse_letter(b'{"table": "public.t", "lsn": 5}') is not None  # an older oversized one
    for value in (None, b"", b"not json", b"[1]", b'{"table": 1, "lsn": 5}', b'{"table": "t"}'):
        assert parse_letter(value) is None
