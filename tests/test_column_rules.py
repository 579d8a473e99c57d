"""`avro.column_rules` live: masked, truncated and hashed text columns in Kafka, through
inserts, updates (before and after images under REPLICA IDENTITY FULL) and the snapshot."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from delivery.helpers import bridge_settings
from running import running
from snapshot.helpers import TopicReader
from waiting import wait_for

from bridge.config import Config


@pytest.fixture
def reader(stack: Any, topic_prefix: str) -> Iterator[TopicReader]:
    topic_reader = TopicReader(
        stack.kafka_bootstrap, stack.registry_url, f"{topic_prefix}.public.customers"
    )
    yield topic_reader
    topic_reader.close()


def test_columns_are_rewritten(
    stack: Any,
    pg_db: str,
    pg_conn: psycopg.Connection[Any],
    slot_name: str,
    publication_name: str,
    topic_prefix: str,
    tmp_path: Path,
    reader: TopicReader,
) -> None:
    pg_conn.execute(
        "CREATE TABLE customers (id int PRIMARY KEY, email text, notes varchar(200),"
        " phone text, name text)"
    )
    pg_conn.execute("ALTER TABLE customers REPLICA IDENTITY FULL")
    pg_conn.execute("INSERT INTO customers VALUES (1, 'a@x.example', 'a long note', '555', 'A')")
    settings = bridge_settings(
        stack, pg_db, slot_name, publication_name, topic_prefix, tmp_path / "spill"
    )
    settings["snapshot"] = {"mode": "initial", "progress_bar": "never"}
    settings["avro"] = {
        "column_rules": [
            {"match": r"public\.customers\.email", "action": "mask", "length": 4},
            {"match": r"public\.customers\.notes", "action": "truncate", "length": 6},
            {"match": r".*\.phone", "action": "hash", "algorithm": "SHA-256", "salt": "pepper"},
        ]
    }
    with running(Config(**settings)) as bridge:
        pg_conn.execute("INSERT INTO customers VALUES (2, 'b@x.example', 'short', '556', 'B')")
        pg_conn.execute("UPDATE customers SET notes = 'another long note' WHERE id = 1")

        def three() -> bool:
            bridge.check()
            return len(reader.read(60)) >= 3

        wait_for(three, 60, "snapshot row, insert and update")

    def phone(number: str) -> str:
        return hashlib.sha256(b"pepper" + number.encode()).hexdigest()

    snapshot, insert, update = (r.value for r in reader.records[:3])
    assert snapshot is not None and insert is not None and update is not None
    assert snapshot["op"] == "r"
    assert snapshot["after"] == {
        "id": 1, "email": "****", "notes": "a long", "phone": phone("555"), "name": "A"
    }  # fmt: skip
    assert insert["after"] == {
        "id": 2, "email": "****", "notes": "short", "phone": phone("556"), "name": "B"
    }  # fmt: skip
    assert update["before"]["notes"] == "a long"
    assert update["after"]["notes"] == "anothe"
    assert update["after"]["phone"] == phone("555")
