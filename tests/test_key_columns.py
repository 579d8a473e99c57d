"""`avro.key_columns` (Debezium's `message.key.columns`): a record key made of chosen
columns, for a table without a primary key and for a business key."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psycopg
import pytest
from delivery.helpers import bridge_settings
from running import running
from snapshot.helpers import Rec, TopicReader
from waiting import wait_for

from bridge.config import Config
from bridge.decode.messages import Column, Relation
from bridge.errors import SchemaError
from bridge.schema import CodecOptions, StaticCatalog
from bridge.schema.table import TableCodec, TableDetails


def _codec(identity_flags: tuple[int, int], keys: tuple[str, ...]) -> TableCodec:
    columns = (Column(identity_flags[0], "id", 23, -1), Column(identity_flags[1], "biz", 25, -1))
    relation = Relation(None, 1, "public", "t", "d", columns)
    return TableCodec(
        relation,
        StaticCatalog([]),
        TableDetails(("id",), {}),
        CodecOptions(),
        "srv",
        key_columns=[(re.compile(r"public\.t"), keys)],
    )


def test_key_columns_must_be_in_the_replica_identity() -> None:
    assert _codec((1, 1), ("biz",)).key_names == ("biz",)
    with pytest.raises(SchemaError, match="not in the table's replica identity"):
        _codec((1, 0), ("biz",))
    with pytest.raises(SchemaError, match="does not have"):
        _codec((1, 1), ("nope",))


def _state(records: list[Rec], key: tuple[str, ...]) -> dict[tuple[Any, ...], Any]:
    state: dict[tuple[Any, ...], Any] = {}
    for rec in records:
        assert rec.key is not None and list(rec.key) == list(key)
        k = tuple(rec.key[f] for f in key)
        if rec.value is None or rec.value["op"] == "d":
            state.pop(k, None)
        else:
            state[k] = rec.value["after"]["v"]
    return state


def test_records_are_keyed_by_the_chosen_columns(
    stack: Any,
    pg_db: str,
    pg_conn: psycopg.Connection[Any],
    slot_name: str,
    publication_name: str,
    topic_prefix: str,
    tmp_path: Path,
    topic_readers: Callable[[str], TopicReader],
) -> None:
    pg_conn.execute("CREATE TABLE nopk (code text NOT NULL, region text NOT NULL, v int)")
    pg_conn.execute("CREATE TABLE orders (id int PRIMARY KEY, order_no text NOT NULL, v int)")
    for table in ("nopk", "orders"):
        pg_conn.execute(f"ALTER TABLE {table} REPLICA IDENTITY FULL")
    settings = bridge_settings(
        stack, pg_db, slot_name, publication_name, topic_prefix, tmp_path / "spill"
    )
    settings["avro"] = {
        "key_columns": {r"public\.nopk": ["code", "region"], r"public\.orders": ["order_no"]}
    }
    nopk = topic_readers(f"{topic_prefix}.public.nopk")
    orders = topic_readers(f"{topic_prefix}.public.orders")
    with running(Config(**settings)) as bridge:
        pg_conn.execute("INSERT INTO nopk VALUES ('a', 'eu', 1), ('b', 'us', 2), ('a', 'us', 3)")
        pg_conn.execute("UPDATE nopk SET v = 10 WHERE code = 'a' AND region = 'eu'")
        pg_conn.execute("DELETE FROM nopk WHERE code = 'b'")
        pg_conn.execute("INSERT INTO orders VALUES (1, 'N-1', 1), (2, 'N-2', 2)")
        pg_conn.execute("UPDATE orders SET order_no = 'N-9', v = 9 WHERE id = 1")  # key change
        pg_conn.execute("DELETE FROM orders WHERE id = 2")
        tables = {
            "nopk": {(c, r): v for c, r, v in pg_conn.execute("SELECT code, region, v FROM nopk")},
            "orders": {(n,): v for n, v in pg_conn.execute("SELECT order_no, v FROM orders")},
        }

        def caught_up() -> bool:
            bridge.check()
            return (
                _state(nopk.read(60), ("code", "region")) == tables["nopk"]
                and _state(orders.read(60), ("order_no",)) == tables["orders"]
            )

        wait_for(caught_up, 60, "keyed state equal to the tables", every=0.2)
    change = [r for r in orders.records if r.key == {"order_no": "N-1"}]
    assert [r.value["op"] if r.value else None for r in change] == ["c", "d", None]
    n9 = [r for r in orders.records if r.key == {"order_no": "N-9"}]
    assert [r.value["op"] if r.value else None for r in n9] == ["c"]
    deleted = [r for r in nopk.records if r.key == {"code": "b", "region": "us"}]
    assert [r.value["op"] if r.value else None for r in deleted] == ["c", "d", None]
