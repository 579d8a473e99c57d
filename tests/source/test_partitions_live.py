"""A publication the bridge creates publishes partitioned tables via their root: one topic
per partitioned table, and rows an update moves between partitions end where the parent
table has them."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import psycopg
from delivery.conftest import bridge_process, settings
from delivery.helpers import BridgeProcess, wait_slot_active
from delivery.kafka_io import Rec, TopicReader, create_topics

__all__ = ["bridge_process", "settings"]  # the delivery suite's fixtures, used here


def _state(records: list[Rec]) -> dict[tuple[int, int], str]:
    state: dict[tuple[int, int], str] = {}
    for rec in records:
        assert rec.key is not None
        key = (int(rec.key["id"]), int(rec.key["region"]))
        if rec.value is None or rec.value["after"] is None:
            state.pop(key, None)
        else:
            state[key] = rec.value["after"]["v"]
    return state


def test_partitioned_table_is_one_topic_equal_to_the_parent(
    pg_conn: psycopg.Connection[Any],
    slot_name: str,
    topic_prefix: str,
    kafka_bootstrap: str,
    registry_url: str,
    settings: dict[str, Any],
    bridge_process: Callable[[dict[str, Any]], BridgeProcess],
) -> None:
    pg_conn.execute(
        "CREATE TABLE m (id int, region int, v text, PRIMARY KEY (id, region)) "
        "PARTITION BY LIST (region)"
    )
    pg_conn.execute("CREATE TABLE m_1 PARTITION OF m FOR VALUES IN (1)")
    pg_conn.execute("CREATE TABLE m_2 PARTITION OF m FOR VALUES IN (2)")
    names = [f"{topic_prefix}.public.{t}" for t in ("m", "m_1", "m_2")]
    reader = TopicReader(kafka_bootstrap, registry_url, create_topics(kafka_bootstrap, names))
    bridge = bridge_process(settings)
    bridge.start()
    wait_slot_active(pg_conn, slot_name, bridge)
    pg_conn.execute("INSERT INTO m SELECT g, 1 + g % 2, 'a' FROM generate_series(1, 40) g")
    pg_conn.execute("UPDATE m SET region = 3 - region WHERE id <= 10")  # moves partitions
    pg_conn.execute("UPDATE m SET v = 'b' WHERE id % 3 = 0")
    pg_conn.execute("DELETE FROM m WHERE id > 35")

    def table() -> dict[tuple[int, int], str]:
        return {(i, r): v for i, r, v in pg_conn.execute("SELECT id, region, v FROM m")}

    reader.read_until(lambda recs: _state(recs) == table(), 60, "the parent table", bridge)
    bridge.terminate()
    assert bridge.wait(60) == 0, bridge.log()
    reader.read_to_end()
    reader.close()
    assert {r.topic for r in reader.records} == {names[0]}, "records on partition topics"
    assert _state(reader.records) == table()
