"""Unchanged TOASTed values: an UPDATE that leaves a large column alone does not resend it.

PostgreSQL writes such a column as kind 'u' (unchanged) in the new tuple. With the
default replica identity the bridge cannot know the value: by default
(`avro.toast_mode: list`) the field is null and named in `unchanged_fields`; with
`placeholder` string and bytes fields carry Debezium's placeholder instead (types
without one stay null). Under REPLICA IDENTITY FULL the old tuple carries the value,
and the bridge uses it.
"""

from __future__ import annotations

import random
import string
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import psycopg
import pytest
from running import running
from schema.live import Decoders, bridge_config, read_topic, unique

from bridge.schema.table import UNAVAILABLE

rng = random.Random(20240229)
BODY = "".join(rng.choices(string.ascii_letters + string.digits, k=6000))  # > 2 kB
BLOB = rng.randbytes(6000)
NUMS = list(range(2000))
TOASTED = ["body", "blob", "nums"]
TABLES = {"toast_default": "DEFAULT", "toast_full": "FULL"}


@dataclass
class Run:
    mode: str
    records: dict[str, list[Any]]  # table -> decoded values


@pytest.fixture(scope="module", params=["list", "placeholder"])
def run(request: pytest.FixtureRequest, stack: Any) -> Iterator[Run]:
    mode: str = request.param
    dbname, prefix = unique("toast"), unique("t")
    stack.create_database(dbname)
    try:
        with psycopg.connect(stack.dsn(dbname), autocommit=True) as conn:
            for table, identity in TABLES.items():
                conn.execute(
                    f"CREATE TABLE {table} (id int PRIMARY KEY, flag int, body text, "
                    f"blob bytea, nums int4[])"
                )
                for column in TOASTED:  # stored out of line, never compressed
                    conn.execute(f"ALTER TABLE {table} ALTER {column} SET STORAGE EXTERNAL")
                conn.execute(f"ALTER TABLE {table} REPLICA IDENTITY {identity}")
            cfg = bridge_config(stack, dbname, prefix=prefix, avro={"toast_mode": mode})
            with running(cfg) as bridge:
                for table in TABLES:
                    conn.execute(
                        f"INSERT INTO {table} VALUES (1, 0, %s, %s, %s)", (BODY, BLOB, NUMS)
                    )
                    conn.execute(f"UPDATE {table} SET flag = 1 WHERE id = 1")
                received = {
                    table: read_topic(cfg, f"{prefix}.public.{table}", 2, alive=bridge.alive)
                    for table in TABLES
                }
            row = conn.execute(
                "SELECT pg_column_size(body), pg_column_size(blob) FROM toast_default"
            ).fetchone()
            assert row is not None and min(row) > 2000  # really stored as large values
        decoders = Decoders(cfg)
        records = {
            table: [decoders.value(f"{prefix}.public.{table}", r.value) for r in found]
            for table, found in received.items()
        }
        yield Run(mode, records)
    finally:
        stack.drop_database(dbname)


def test_insert_carries_the_large_values(run: Run) -> None:
    for table in TABLES:
        create = run.records[table][0]
        assert create["op"] == "c"
        assert create["after"] == {"id": 1, "flag": 0, "body": BODY, "blob": BLOB, "nums": NUMS}
        assert create["unchanged_fields"] is None


def test_default_identity_marks_the_unchanged_fields(run: Run) -> None:
    update = run.records["toast_default"][1]
    assert update["op"] == "u"
    assert update["before"] is None
    assert update["unchanged_fields"] == TOASTED
    if run.mode == "list":
        stand_ins: dict[str, Any] = {"body": None, "blob": None, "nums": None}
    else:  # arrays have no placeholder value: they stay null
        stand_ins = {"body": UNAVAILABLE, "blob": UNAVAILABLE.encode(), "nums": None}
    assert update["after"] == {"id": 1, "flag": 1, **stand_ins}


def test_replica_identity_full_supplies_the_old_value(run: Run) -> None:
    update = run.records["toast_full"][1]
    assert update["op"] == "u"
    old = {"id": 1, "flag": 0, "body": BODY, "blob": BLOB, "nums": NUMS}
    assert update["before"] == old
    assert update["after"] == {**old, "flag": 1}
    assert update["unchanged_fields"] is None
