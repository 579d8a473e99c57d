"""Key changes over unchanged TOASTed values, in Kafka (scenario: tests/toast_keys.py).

(a) Every primary-key change is linked the way Debezium links it: `__debezium.newkey` on the
delete and its tombstone, `__debezium.oldkey` on the create, each the other side's framed
Kafka key; in at-least-once and exactly-once mode. (c) With `avro.toast_reselect` the create
(and the update that leaves the value alone) carries the full value read back from the
table; the documented race is shown with the bridge stopped while the table moves on.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from running import running
from schema.live import Decoders, bridge_config, unique
from toast_keys import (
    BODY_A,
    BODY_B,
    FINAL,
    MOVES,
    TABLES,
    Msg,
    Scenario,
    TopicsReader,
    create_table,
    create_topics,
    run_scenario,
)

VARIANTS: dict[str, dict[str, Any]] = {
    "at_least_once": {},
    "exactly_once": {"kafka": {"exactly_once": True, "transaction_interval_ms": 50}},
    "toast_reselect": {"avro": {"toast_reselect": True}},
}


@pytest.fixture(scope="module", params=sorted(VARIANTS))
def scenario(request: pytest.FixtureRequest, stack: Any) -> tuple[str, Scenario]:
    return request.param, run_scenario(stack, **VARIANTS[request.param])


def _decoded(run: Scenario, table: str) -> list[tuple[Any, Any, Msg]]:
    """(key, value, record) per record of `table`, decoded as any consumer would."""
    decoders = Decoders(run.cfg)
    topic = run.topics[table]
    out = []
    for msg in run.records[table]:
        key = decoders.key(topic, msg.key)
        value = None if msg.value is None else decoders.value(topic, msg.value)
        out.append((key, value, msg))
    return out


def _key_changes(run: Scenario, table: str) -> dict[tuple[int, int], list[tuple[Any, Any, Msg]]]:
    """(old id, new id) -> its delete, tombstone and create (found by their keys and LSN)."""
    records = _decoded(run, table)
    out = {}
    for old, new in MOVES:
        deletes = [r for r in records if r[0] == {"id": old} and r[1] and r[1]["op"] == "d"]
        assert len(deletes) == 1, (old, new)
        lsn = deletes[0][1]["source"]["lsn"]
        tombstones = [r for r in records if r[0] == {"id": old} and r[1] is None]
        creates = [
            r
            for r in records
            if r[0] == {"id": new} and r[1] and r[1]["op"] == "c" and r[1]["source"]["lsn"] == lsn
        ]
        assert len(tombstones) == 1 and len(creates) == 1, (old, new)
        out[(old, new)] = [deletes[0], tombstones[0], creates[0]]
    return out


@pytest.mark.parametrize("table", sorted(TABLES))
def test_a_key_change_is_linked_by_debezium_headers(
    scenario: tuple[str, Scenario], table: str
) -> None:
    _, run = scenario
    decoders = Decoders(run.cfg)
    topic = run.topics[table]
    linked = _key_changes(run, table)
    for (old, new), (delete, tombstone, create) in linked.items():
        old_key, new_key = delete[2].key, create[2].key
        assert delete[2].headers == [("__debezium.newkey", new_key)], (old, new)
        assert tombstone[2].headers == [("__debezium.newkey", new_key)], (old, new)
        assert create[2].headers == [("__debezium.oldkey", old_key)], (old, new)
        assert decoders.key(topic, create[2].headers[0][1]) == {"id": old}
        assert decoders.key(topic, delete[2].headers[0][1]) == {"id": new}
    in_key_changes = {id(r[2]) for records in linked.values() for r in records}
    others = [r for r in _decoded(run, table) if id(r[2]) not in in_key_changes]
    assert len(others) == 3  # the two inserts and the plain update
    assert all(r[2].headers is None for r in others)


def test_replica_identity_full_completes_the_create(scenario: tuple[str, Scenario]) -> None:
    _, run = scenario
    for (old, new), (_, _, create) in _key_changes(run, "keys_full").items():
        body = BODY_A if new in (2, 3) else BODY_B
        assert create[1]["after"]["body"] == body, (old, new)
        assert create[1]["unchanged_fields"] is None


def test_default_identity_create_lists_or_reselects_the_value(
    scenario: tuple[str, Scenario],
) -> None:
    """Without toast_reselect the create lists the column as today; with it, the create
    and the plain update carry the value (steps are waited for one by one, so what the
    SELECT reads is the event's own value here). Key 11 lived only inside its transaction
    (10 -> 11 -> 12): its row is gone when the change is decoded, so its create keeps
    unchanged_fields."""
    variant, run = scenario
    reselect = variant == "toast_reselect"
    for (old, new), (_, _, create) in _key_changes(run, "keys_default").items():
        after, unchanged = create[1]["after"], create[1]["unchanged_fields"]
        if new == 12:  # its transaction inserted nothing, the body came along unchanged
            assert after["flag"] == 1
        body = BODY_A if new in (2, 3) else BODY_B
        if reselect and new != 11:
            assert (after["body"], unchanged) == (body, None), (old, new)
        else:
            assert (after["body"], unchanged) == (None, ["body"]), (old, new)
    (update,) = [r for r in _decoded(run, "keys_default") if r[1] and r[1]["op"] == "u"]
    assert update[0] == {"id": 3} and update[1]["after"]["flag"] == 5
    if reselect:
        assert (update[1]["after"]["body"], update[1]["unchanged_fields"]) == (BODY_A, None)
    else:
        assert (update[1]["after"]["body"], update[1]["unchanged_fields"]) == (None, ["body"])
    assert run.rows == dict.fromkeys(TABLES, FINAL)


@pytest.fixture
def race(stack: Any) -> Iterator[tuple[list[tuple[Any, Any]], dict[int, tuple[int, str]]]]:
    """toast_reselect reading a table that moved on while the bridge was stopped."""
    dbname, prefix = unique("race"), unique("r")
    stack.create_database(dbname)
    try:
        with psycopg.connect(stack.dsn(dbname), autocommit=True) as conn:
            create_table(conn, "keys_race", "DEFAULT")
            topic = f"{prefix}.public.keys_race"
            create_topics(stack.kafka_bootstrap, [topic])
            cfg = bridge_config(stack, dbname, prefix=prefix, avro={"toast_reselect": True})
            reader = TopicsReader(cfg, [topic])
            try:
                with running(cfg) as bridge:
                    conn.execute(
                        "INSERT INTO keys_race VALUES (1, 0, %s), (5, 0, %s)", (BODY_A, BODY_A)
                    )
                    reader.wait({topic: 2}, bridge.alive, "the inserts")
                # stopped: the slot keeps the changes, the table moves on
                conn.execute("UPDATE keys_race SET id = 2 WHERE id = 1")  # body unchanged
                conn.execute("UPDATE keys_race SET body = %s WHERE id = 2", (BODY_B,))
                conn.execute("UPDATE keys_race SET id = 6 WHERE id = 5")
                conn.execute("DELETE FROM keys_race WHERE id = 6")
                with running(cfg) as bridge:
                    reader.wait({topic: 2 + 3 + 1 + 3 + 2}, bridge.alive, "the later changes")
            finally:
                reader.close()
            rows = {
                int(i): (int(f), str(b))
                for i, f, b in conn.execute("SELECT id, flag, body FROM keys_race").fetchall()
            }
        decoders = Decoders(cfg)
        decoded = [
            (
                decoders.key(topic, m.key),
                None if m.value is None else decoders.value(topic, m.value),
            )
            for m in reader.records[topic]
        ]
        yield decoded, rows
    finally:
        stack.drop_database(dbname)


def test_reselect_reads_the_table_as_it_is_now(
    race: tuple[list[tuple[Any, Any]], dict[int, tuple[int, str]]],
) -> None:
    """The documented race (docs/concepts/records.md): the create of key 2 shows the body a
    later transaction wrote (the update right after it in key 2's order brings the same value,
    so the final state is right); key 6's row was gone when its change was decoded: it keeps
    unchanged_fields."""
    records, rows = race
    creates = {key["id"]: value for key, value in records if value and value["op"] == "c"}
    assert creates[2]["after"]["body"] == BODY_B and creates[2]["unchanged_fields"] is None
    (update,) = [v for k, v in records if v and v["op"] == "u"]
    assert update["after"] == {"id": 2, "flag": 0, "body": BODY_B}
    assert creates[6]["after"]["body"] is None and creates[6]["unchanged_fields"] == ["body"]
    assert rows == {2: (0, BODY_B)}
