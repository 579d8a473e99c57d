"""`bridge verify` on a table whose initial rows came with an external load (snapshot.mode
external, issue 44): those rows never go to Kafka, so the topic alone lacks every row the
load read and nothing changed since. The cluster's initial-load case
(tests/spark/test_cluster.py) met it as 49 rows "missing from the topic": exactly the keys
its seeded writer never touched after the hand-over, while the lake equalled PostgreSQL.

verify must count such a row as equal (the load holds it), and only such a row: a change
made after the load that the topic lacks (an update of a loaded row, an insert, made while
the table was out of the publication) is still missing, and one over a key the topic has
still differs. Both the single-machine comparison and the Spark one (local mode here; the
cluster case runs it on a standalone cluster). No Spark load runs here: what verify judges
is PostgreSQL against the topic, and the rows the load read are PostgreSQL's own.
"""

from __future__ import annotations

from typing import Any

import psycopg
import pytest
from running import running
from schema.live import unique
from snapshot.helpers import make_table
from waiting import wait_for

from bridge.config import Config
from bridge.snapshot.store import load_point, store_of
from bridge.verify.compare import TableResult
from bridge.verify.run import verify
from verify.live import bridge_config
from verify.test_lake import _delivered

ROWS = 300
CHUNK = 40  # the Spark comparison's key ranges: 8 tasks


@pytest.fixture
def cfg(stack: Any, pg_conn: psycopg.Connection[Any], pg_db: str) -> Config:
    make_table(pg_conn, "items", ROWS)
    publication = unique("pub")
    pg_conn.execute(f"CREATE PUBLICATION {publication} FOR TABLE items")
    base = bridge_config(stack, pg_db, publication, signal_table=None)
    snapshot = base.snapshot.model_copy(update={"mode": "external", "chunk_size": CHUNK})
    return base.model_copy(update={"snapshot": snapshot})


def _held(cfg: Config) -> bool:
    store = store_of(cfg)
    try:
        return load_point(store) is not None
    finally:
        store.close()


def _items(cfg: Config, distributed: bool, request: pytest.FixtureRequest) -> TableResult:
    spark = request.getfixturevalue("spark") if distributed else None
    found = verify(cfg, timeout=120, distributed=distributed, spark=spark)
    (items,) = found.tables
    return items


# the changes after the hand-over: updated, deleted, deleted and inserted again, inserted
AFTER = [
    "UPDATE items SET v = v + 1, s = s || '+' WHERE id % 10 = 0",
    "DELETE FROM items WHERE id % 10 = 1",
    "DELETE FROM items WHERE id = 5",
    "INSERT INTO items VALUES (5, 5, 'again')",
    f"INSERT INTO items SELECT g, g, 'new' FROM generate_series({ROWS + 1}, {ROWS + 20}) g",
]
UNTOUCHED = ROWS - ROWS // 10 * 2 - 1  # rows the load read that nothing changed since


@pytest.mark.parametrize("distributed", [False, True], ids=["single", "spark"])
def test_rows_of_the_load_are_equal_changes_the_topic_lacks_are_not(
    cfg: Config,
    pg_conn: psycopg.Connection[Any],
    distributed: bool,
    request: pytest.FixtureRequest,
) -> None:
    with running(cfg) as bridge:  # creates the slot, holds its snapshot (L), streams
        wait_for(lambda: _held(cfg), 60, "the bridge to record the snapshot it holds")
        for statement in AFTER:
            pg_conn.execute(statement)
        _delivered(cfg, pg_conn)
        clean = _items(cfg, distributed, request)
        bridge.check()
        assert clean.status == "equal", clean.as_dict()
        rows = ROWS - ROWS // 10 + 20
        assert (clean.rows, clean.equal, clean.loaded) == (rows, rows, UNTOUCHED)
        assert (clean.missing, clean.ghosts, clean.different) == (0, 0, 0)

        # what Kafka never gets: a loaded row updated (its key has no record: missing, not
        # the load's), an insert (missing), a row the topic has updated again (different)
        publication = cfg.source.publication_name
        pg_conn.execute(f"ALTER PUBLICATION {publication} DROP TABLE items")
        pg_conn.execute("UPDATE items SET v = -1 WHERE id = 2")
        pg_conn.execute("INSERT INTO items VALUES (1000, 0, 'unseen')")
        pg_conn.execute("UPDATE items SET v = -1 WHERE id = 10")
        pg_conn.execute(f"ALTER PUBLICATION {publication} ADD TABLE items")
        _delivered(cfg, pg_conn)
        faulty = _items(cfg, distributed, request)
        bridge.check()
    assert faulty.status == "differs"
    assert (faulty.missing, faulty.ghosts, faulty.different) == (2, 0, 1), faulty.as_dict()
    assert faulty.loaded == UNTOUCHED - 1
    assert sorted(faulty.samples["missing"]) == sorted(['{"id": 2}', '{"id": 1000}'])
    assert faulty.samples["different"] == ['{"id": 10}']
