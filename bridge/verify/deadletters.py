"""The dead-letter topic as `bridge verify` reads it: which of a table's differences are
changes the bridge dead-lettered (`pipeline.on_error: dlq`, `pipeline.oversized`), so the
report names them as such instead of leaving them unexplained.

The topic is read whole (committed records, as the bridge wrote them: one JSON record per
change or oversized record, `bridge.kafka.oversized.OversizedPolicy.park`), and a letter
counts for the verification point L when its transaction committed before L, the rule
the topics are folded by. A letter names its key one of two ways: an oversized record's
letter carries the record's Kafka key, compared with a differing key's bytes (in the
table's current key schema, so any key schema version matches); a change the bridge
could not encode carries the row as PostgreSQL sent it, whose key columns' text is
compared with the key's text as the table's rows are read (both PostgreSQL's output
functions). A key with several letters is explained by its newest.
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Any

from bridge.config import Config
from bridge.kafka.oversized import parse_letter
from bridge.lsn import LSN
from bridge.verify.state import Decoder
from bridge.verify.topic import messages

log = logging.getLogger("bridge.verify")


@dataclass(frozen=True)
class DeadLetter:
    """One letter's coordinates, and what names its key (`key`: the Kafka key, framed;
    `rows`: the change's before and after as PostgreSQL sent them)."""

    table: str
    op: str
    lsn: int
    commit_lsn: int
    error: str
    key: bytes | None
    rows: tuple[dict[str, Any], ...]

    def shown(self, key: str, kind: str) -> dict[str, str]:
        """The report's entry of the differing `key` (as people read it) it explains."""
        return {
            "key": key,
            "kind": kind,
            "op": self.op,
            "lsn": str(LSN(self.lsn)),
            "commit_lsn": str(LSN(self.commit_lsn)),
            "error": self.error,
        }


def read_letters(
    cfg: Config, tables: Collection[str], point: int, timeout: float
) -> dict[str, list[DeadLetter]]:
    """The letters of `tables` ("schema.table") committed before `point`, by table, in the
    topic's order. A record that is no letter of the bridge's is left out, with a warning."""
    topic = cfg.dead_letter_topic()
    out: dict[str, list[DeadLetter]] = {}
    foreign = 0
    for msg in messages(cfg, topic, timeout):
        letter = parse_letter(msg.value())
        if letter is None:
            foreign += 1
            continue
        if letter["table"] not in tables:
            continue
        commit = letter["commit_lsn"]
        if commit >= point:
            continue
        rows = tuple(r for r in (letter.get("before"), letter.get("after")) if isinstance(r, dict))
        out.setdefault(letter["table"], []).append(
            DeadLetter(
                letter["table"],
                str(letter.get("op", "")),
                letter["lsn"],
                commit,
                str(letter.get("error") or letter.get("reason", "")),
                msg.key() if letter.get("key") else None,
                rows,
            )
        )
    if foreign:
        log.warning("%d record(s) of %s are no letters of the bridge: left out", foreign, topic)
    return out


class Explained:
    """A table's letters by the keys they name (module docstring)."""

    def __init__(
        self, letters: Sequence[DeadLetter], decoder: Decoder, key_columns: Sequence[str]
    ) -> None:
        self.count = len(letters)
        self._by_key: dict[bytes, DeadLetter] = {}
        self._by_text: dict[tuple[str, ...], DeadLetter] = {}
        for letter in letters:  # in topic order: the newest of a key stays
            if letter.key is not None:
                self._by_key[decoder.key(letter.key, f"dead letter of {letter.table}")] = letter
            for row in letter.rows:
                texts = [row.get(c) for c in key_columns]
                if all(isinstance(t, str) for t in texts):  # no binary or unchanged value
                    self._by_text[tuple(str(t) for t in texts)] = letter

    def find(self, key: bytes, texts: tuple[str, ...] | None) -> DeadLetter | None:
        """The letter of the key whose body (current key schema) is `key` and whose key
        columns' text is `texts` (None: not known, a key only Kafka has)."""
        found = self._by_key.get(key)
        if found is None and texts is not None:
            found = self._by_text.get(texts)
        return found
