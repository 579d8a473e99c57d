"""EncoderCache's catalog facts for a table dropped before the stream reached its changes:
those read for its previous Relation version (test_decoding/toast.sql's toasted_several,
dropped right after a transaction that resends its Relation message)."""

from __future__ import annotations

from typing import Any, cast

import pytest

from bridge.decode.messages import Column, Relation
from bridge.encoders import EncoderCache
from bridge.errors import TableDroppedError
from bridge.kafka.registry import Registry
from bridge.schema import DEFAULT_OPTIONS, StaticCatalog
from bridge.schema.table import TableDetails


def _relation() -> Relation:
    """A new Relation version of one table (REPLICA IDENTITY FULL flags every column)."""
    return Relation(
        None,
        16450,
        "public",
        "toasted_several",
        "f",
        (Column(1, "id", 23, -1), Column(1, "k", 25, -1)),
    )


class _Registry:
    """What EncoderCache asks of the registry: ids in registration order."""

    strategy = "topic"

    def __init__(self) -> None:
        self.subjects: list[str] = []

    def latest(self, subject: str) -> dict[str, Any] | None:
        return None

    def register(self, subject: str, schema: Any, *, table: str) -> int:
        self.subjects.append(subject)
        return len(self.subjects)


def _cache(details: dict[int, TableDetails]) -> EncoderCache:
    def lookup(oid: int) -> TableDetails:
        if oid not in details:
            raise TableDroppedError(f"table with OID {oid} not found in pg_class")
        return details[oid]

    return EncoderCache(
        cast(Registry, _Registry()),
        StaticCatalog(),
        lookup,
        lambda _: "topic",
        server_name="srv",
        options=DEFAULT_OPTIONS,
        toast_mode="list",
        tombstones=True,
        binary=False,
    )


def test_a_dropped_table_keeps_the_key_read_for_its_previous_version() -> None:
    details = {16450: TableDetails(("k",), {})}
    cache = _cache(details)
    _, first = cache.get(_relation())
    del details[16450]  # DROP TABLE, then the stream sends the Relation message again
    _, again = cache.get(_relation())
    assert again is not first
    key = again.table.key_schema
    assert key is not None and key == first.table.key_schema
    assert [f["name"] for f in key["fields"]] == ["k"]


def test_a_table_dropped_before_any_version_was_read_still_stops_the_bridge() -> None:
    with pytest.raises(TableDroppedError, match="not found in pg_class"):
        _cache({}).get(_relation())
