"""EncoderCache's catalog facts for a table dropped before the stream reached its changes:
those read for its previous Relation version (test_decoding/toast.sql's toasted_several,
dropped right after a transaction that resends its Relation message), or, without one, the
key its Relation message flags where that is exact (test_decoding/ddl.sql's spoolme)."""

from __future__ import annotations

from typing import Any, cast

import pytest

from bridge.decode.messages import Column, Relation
from bridge.encoders import EncoderCache
from bridge.errors import TableDroppedError
from bridge.kafka.registry import Registry
from bridge.schema import DEFAULT_OPTIONS, StaticCatalog
from bridge.schema.table import TableDetails


def _relation(identity: str = "f", flags: tuple[int, int] = (1, 1)) -> Relation:
    """A new Relation version of one table (REPLICA IDENTITY FULL flags every column)."""
    return Relation(
        None,
        16450,
        "public",
        "toasted_several",
        identity,
        (Column(flags[0], "id", 23, -1), Column(flags[1], "k", 25, -1)),
    )


class _Registry:
    """What EncoderCache asks of the registry: ids in registration order."""

    strategy = "topic"

    def __init__(self) -> None:
        self.subjects: list[str] = []

    def current(self, subject: str) -> dict[str, Any] | None:
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
    """Where the Relation message does not say the key exactly: FULL flags every column, a
    primary key of two columns is flagged in column order, not the key's index order."""
    for identity in ("f", "d"):
        with pytest.raises(TableDroppedError, match="not found in pg_class"):
            _cache({}).get(_relation(identity))


@pytest.mark.parametrize(
    ("identity", "flags", "key"),
    [
        ("d", (0, 0), None),  # no primary key: no record key
        ("n", (0, 0), None),
        ("d", (0, 1), ["k"]),  # a primary key of one column
        ("i", (1, 1), ["id", "k"]),  # an identity index's columns, in column order
    ],
)
def test_a_table_dropped_before_any_version_was_read_is_keyed_by_its_relation_message(
    identity: str, flags: tuple[int, int], key: list[str] | None
) -> None:
    """test_decoding/ddl.sql's spoolme, created and dropped in the transaction that
    writes it: the catalog has nothing by the time the stream decodes it."""
    _, encoder = _cache({}).get(_relation(identity, flags))
    schema = encoder.table.key_schema
    assert (None if schema is None else [f["name"] for f in schema["fields"]]) == key
