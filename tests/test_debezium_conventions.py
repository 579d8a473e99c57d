"""Debezium's conventions on a real stream: `source.lsn`/`sequence`, the heartbeat topic.

`source.lsn`, `source.sequence` and `source.commit_lsn`:

Debezium's PostgreSQL connector writes each change's own WAL position in `lsn` and
`sequence` = ["<last commit LSN>", "<this LSN>"], where the last commit LSN is the end
LSN of the transaction committed before (the position its COMMIT message was sent at).
The bridge adds `commit_lsn`, the same for every change of a transaction, for ordering
consumers. Each change's position is bracketed by `pg_current_wal_insert_lsn()` read
around its statement; the commit's by the positions around COMMIT.
"""

from __future__ import annotations

import json
from typing import Any

import psycopg
from running import running
from schema.live import Decoders, bridge_config, read_topic, unique


def _insert_lsn(conn: psycopg.Connection[Any]) -> int:
    row = conn.execute("SELECT (pg_current_wal_insert_lsn() - '0/0')::bigint").fetchone()
    assert row is not None
    return int(row[0])


def test_lsn_is_the_changes_own_and_sequence_follows_debezium(
    stack: Any, pg_db: str, pg_conn: psycopg.Connection[Any]
) -> None:
    pg_conn.execute("CREATE TABLE pos (id int4 PRIMARY KEY, v text)")
    cfg = bridge_config(stack, pg_db, prefix=unique("pos"))
    topic = f"{cfg.kafka.topic_prefix}.public.pos"
    brackets: list[tuple[int, int]] = []
    with running(cfg) as bridge:
        with pg_conn.transaction():
            for i in range(3):
                start = _insert_lsn(pg_conn)
                pg_conn.execute("INSERT INTO pos VALUES (%s, 'x')", (i,))
                brackets.append((start, _insert_lsn(pg_conn)))
        first_end = _insert_lsn(pg_conn)  # at or past the first transaction's end
        start = _insert_lsn(pg_conn)
        pg_conn.execute("UPDATE pos SET v = 'y' WHERE id = 1")
        brackets.append((start, _insert_lsn(pg_conn)))
        received = read_topic(cfg, topic, 4, alive=bridge.alive)
    decoders = Decoders(cfg)
    sources = [decoders.raw(r.value or b"")["source"] for r in received]
    assert [s["lsn"] is not None for s in sources] == [True] * 4

    for source, (low, high) in zip(sources, brackets, strict=True):
        assert low <= source["lsn"] < high, (source, low, high)
        last, own = json.loads(source["sequence"])
        assert own == str(source["lsn"])
        assert last is None or int(last) <= low

    first, second = sources[:3], sources[3]
    commit = first[0]["commit_lsn"]
    assert [s["commit_lsn"] for s in first] == [commit] * 3
    assert max(s["lsn"] for s in first) < commit < second["commit_lsn"]
    # the second transaction's "last commit" is the first one's end LSN
    last = int(json.loads(second["sequence"])[0])
    assert commit < last <= first_end
    assert len({s["sequence"] for s in first}) == 3


def test_heartbeat_topic_takes_debeziums_name_when_asked(stack: Any, pg_db: str) -> None:
    cfg = bridge_config(stack, pg_db, prefix=unique("hb"))
    pipeline = cfg.pipeline.model_copy(
        update={"heartbeat_interval_s": 0.2, "heartbeat_topic_prefix": "__debezium-heartbeat"}
    )
    cfg = cfg.model_copy(update={"pipeline": pipeline})
    topic = f"__debezium-heartbeat.{cfg.kafka.topic_prefix}"
    with running(cfg) as bridge:
        (beat,) = read_topic(cfg, topic, 1, alive=bridge.alive)
    decoders = Decoders(cfg)
    assert decoders.raw(beat.key or b"") == {"serverName": cfg.kafka.topic_prefix}
    assert decoders.raw(beat.value or b"")["ts_ms"] > 0
