"""`bridge verify` names the differences whose changes were dead-lettered (issue 43).

Live: the bridge runs with two `pipeline.on_error: dlq` tables, one whose row is over its
topic's max.message.bytes (10000 here) and one with an xid8 above 2**63 (the bridge's
Avro long cannot hold it: neither can verify's encoder), next to a table whose change was
made while it was out of the publication. verify must count and list the dead-lettered
keys with their letters' coordinates apart from the one unexplained difference, keep
every difference a difference (not ok), and say the same with its states on disk.
"""

from __future__ import annotations

import json
from typing import Any

import psycopg
from confluent_kafka.admin import AdminClient, NewTopic
from running import running
from schema.live import unique
from test_oversized import BIG_ROW

from bridge.verify.report import as_json, as_table
from bridge.verify.run import Verification, verify
from verify.live import bridge_config

BAD_XID8 = str(2**64 - 1)


def _tables(result: Verification) -> dict[str, Any]:
    return {t.table: t for t in result.tables}


def _said(result: Verification) -> list[Any]:
    """What a verification says of each table, but where it kept the topic's states."""
    return [
        ({k: v for k, v in t.as_dict().items() if k != "kafka_state_on_disk"}, t.reread_keys)
        for t in result.tables
    ]


def test_verify_names_dead_lettered_keys_apart_from_other_differences(
    stack: Any, pg_conn: psycopg.Connection[Any], pg_db: str
) -> None:
    pg_conn.execute("CREATE TABLE big (id int PRIMARY KEY, payload text)")
    pg_conn.execute("CREATE TABLE bad (id int PRIMARY KEY, x xid8, note text)")
    pg_conn.execute("CREATE TABLE good (id int PRIMARY KEY, v text)")
    publication = unique("pub")
    pg_conn.execute(f"CREATE PUBLICATION {publication} FOR TABLE big, bad, good")
    dlq = {"on_error_tables": {r"public\.(big|bad)": "dlq"}}
    cfg = bridge_config(stack, pg_db, publication, signal_table=None, pipeline=dlq)
    small = NewTopic(f"{cfg.kafka.topic_prefix}.public.big", 1, 1)
    small.config = {"max.message.bytes": "10000"}
    admin = AdminClient({"bootstrap.servers": stack.kafka_bootstrap})
    for future in admin.create_topics([small]).values():
        future.result(timeout=30)
    with running(cfg) as bridge:
        pg_conn.execute("INSERT INTO big VALUES (1, 'small')")
        pg_conn.execute(BIG_ROW, (2,))  # parked: over the topic's limit
        pg_conn.execute("INSERT INTO bad VALUES (1, '7', 'fits'), (3, '8', 'stays')")
        pg_conn.execute("UPDATE bad SET x = %s WHERE id = 1", (BAD_XID8,))  # parked
        pg_conn.execute("INSERT INTO bad VALUES (2, %s, 'never fits')", (BAD_XID8,))  # parked
        pg_conn.execute("INSERT INTO good VALUES (1, 'a'), (2, 'b')")
        pg_conn.execute(f"ALTER PUBLICATION {publication} DROP TABLE good")
        pg_conn.execute("UPDATE good SET v = 'unseen' WHERE id = 2")  # no letter explains it
        pg_conn.execute(f"ALTER PUBLICATION {publication} ADD TABLE good")
        found = verify(cfg, timeout=120)
        on_disk = verify(cfg, timeout=120, memory_limit=500)
        bridge.check()
    assert not found.ok, as_json(found)  # dead-lettered differences are differences
    tables = _tables(found)
    big, bad, good = tables["public.big"], tables["public.bad"], tables["public.good"]
    counts = {
        name: (t.equal, t.missing, t.ghosts, t.different, t.dead_lettered, t.dead_letters)
        for name, t in tables.items()
    }
    assert counts == {
        "public.big": (1, 0, 0, 0, 1, 1),
        "public.bad": (1, 0, 0, 0, 2, 2),
        "public.good": (1, 0, 0, 1, 0, 0),
    }
    assert [t.status for t in found.tables] == ["differs", "differs", "differs"]
    ((parked_big,),) = [big.dead_lettered_keys]
    assert [parked_big[k] for k in ("key", "kind", "op")] == ['{"id": 2}', "missing", "c"]
    assert "over the 10000-byte record limit" in parked_big["error"]
    assert [(k["key"], k["kind"], k["op"]) for k in bad.dead_lettered_keys] == [
        ('{"id": 1}', "different", "u"),
        ('{"id": 2}', "missing", "c"),
    ]
    assert all("public.bad.x (xid8): cannot encode" in k["error"] for k in bad.dead_lettered_keys)
    assert all(k["lsn"] != "0/0" and k["commit_lsn"] for k in bad.dead_lettered_keys)
    assert big.samples == {} and bad.samples == {} and good.samples == {"different": ['{"id": 2}']}
    assert bad.columns == {} and dict(good.columns) == {"v": 1}
    # --repair re-emits what it can: not a row the encoder cannot encode
    assert (big.reread_keys, bad.reread_keys, good.reread_keys) == ([("2",)], [], [("2",)])
    text = as_table(found)
    dead = f"{cfg.kafka.topic_prefix}.dlq"
    assert (
        f"public.bad: 2 key(s) differ because their changes were dead-lettered to {dead} "
        "(of 2 dead letter(s) before the point)"
    ) in text
    assert 'public.big: dead-lettered missing key {"id": 2}: c at LSN' in text
    assert text.endswith("MISMATCH")
    doc = json.loads(as_json(found))
    assert doc["dead_letter_topic"] == dead
    dead_lettered = {t["table"]: t["dead_lettered"] for t in doc["tables"]}
    assert dead_lettered == {"public.big": 1, "public.bad": 2, "public.good": 0}
    assert all(t.on_disk for t in on_disk.tables)
    assert _said(on_disk) == _said(found)
