"""Primary-key changes over unchanged TOASTed values, made by the real bridge (issue 19, 4).

`UPDATE t SET id = 2 WHERE id = 1` on a row whose large column is stored out of line and
left alone: PostgreSQL does not resend that column, so the create of the new key lacks it
unless REPLICA IDENTITY FULL supplies the old row. `run_scenario` makes such changes (a
single move, a chain inside one transaction, a chain across transactions, then a plain
update of the moved row) on one table per replica identity, with the bridge running in
process, and returns every record with its headers plus PostgreSQL's final rows.

Shared by tests/test_toast_keys.py (the records) and tests/spark/test_toast_keys.py (the
Spark apply compared with PostgreSQL).
"""

from __future__ import annotations

import hashlib
import random
from collections import Counter
from dataclasses import dataclass
from typing import Any, NamedTuple

import psycopg
from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from running import running
from schema.live import bridge_config, unique
from waiting import wait_for

from bridge.config import Config

TABLES = {"keys_default": "DEFAULT", "keys_full": "FULL"}
PARTITIONS = 3  # the old and the new key usually land in different partitions


def big_text(seed: int) -> str:
    """4096 characters of md5 hex digests of random bytes: incompressible enough, and
    stored out of line anyway (the column is SET STORAGE EXTERNAL)."""
    rng = random.Random(seed)
    return "".join(hashlib.md5(rng.randbytes(16)).hexdigest() for _ in range(128))


BODY_A, BODY_B = big_text(1), big_text(2)

# One PostgreSQL transaction per step (per table), and the records it makes in its topic
# (a key change: delete, tombstone, create).
STEPS: list[tuple[list[str], int]] = [
    (["INSERT INTO {t} VALUES (1, 0, %(a)s)"], 1),
    (["UPDATE {t} SET id = 2 WHERE id = 1"], 3),
    (["INSERT INTO {t} VALUES (10, 0, %(b)s)"], 1),
    (["UPDATE {t} SET id = 11 WHERE id = 10", "UPDATE {t} SET id = 12, flag = 1 WHERE id = 11"], 6),
    (["UPDATE {t} SET id = 3 WHERE id = 2"], 3),
    (["UPDATE {t} SET flag = 5 WHERE id = 3"], 1),
]
FINAL = {3: (5, BODY_A), 12: (1, BODY_B)}  # id -> (flag, body) in PostgreSQL at the end
MOVES = [(1, 2), (10, 11), (11, 12), (2, 3)]  # (old id, new id) of every key change


class Msg(NamedTuple):
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes]] | None


def _bytes(value: object) -> bytes:
    """A header's value: the bridge writes only bytes ones."""
    assert isinstance(value, bytes), value
    return value


@dataclass
class Scenario:
    cfg: Config
    topics: dict[str, str]  # table -> topic
    records: dict[str, list[Msg]]  # table -> its topic's records
    rows: dict[str, dict[int, tuple[int, str]]]  # table -> PostgreSQL's final rows


def create_table(conn: psycopg.Connection[Any], table: str, identity: str) -> None:
    conn.execute(f"CREATE TABLE {table} (id int PRIMARY KEY, flag int, body text)")
    conn.execute(f"ALTER TABLE {table} ALTER COLUMN body SET STORAGE EXTERNAL")
    conn.execute(f"ALTER TABLE {table} REPLICA IDENTITY {identity}")


def create_topics(bootstrap: str, topics: list[str]) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(t, PARTITIONS, 1) for t in topics])
    for future in futures.values():
        future.result(timeout=30)


class TopicsReader:
    """Every record of some topics from the beginning, headers included, as they arrive
    (read_committed, librdkafka's default: an exactly-once run shows committed records)."""

    def __init__(self, cfg: Config, topics: list[str]) -> None:
        self.records: dict[str, list[Msg]] = {t: [] for t in topics}
        self._consumer = Consumer(
            {
                **cfg.kafka.client_config(),
                "group.id": unique("keys"),
                "enable.auto.commit": False,
                "fetch.wait.max.ms": 50,
            }
        )
        self._consumer.assign(
            [TopicPartition(t, p, OFFSET_BEGINNING) for t in topics for p in range(PARTITIONS)]
        )

    def wait(self, counts: dict[str, int], alive: Any, what: str) -> None:
        """Read until each topic holds `counts[topic]` records."""

        def enough() -> bool:
            msg = self._consumer.poll(0.2)
            if msg is not None and msg.error() is None:
                topic, partition, offset = msg.topic(), msg.partition(), msg.offset()
                raw = msg.headers()
                assert topic is not None and partition is not None and offset is not None
                assert raw is None or isinstance(raw, list)
                headers = None if raw is None else [(k, _bytes(v)) for k, v in raw]
                self.records[topic].append(Msg(partition, offset, msg.key(), msg.value(), headers))
            if not alive():
                raise AssertionError(f"the bridge stopped while waiting for {what}")
            return all(len(self.records[t]) >= n for t, n in counts.items())

        wait_for(
            enough, 90, what, every=0, detail=lambda: {t: len(r) for t, r in self.records.items()}
        )

    def close(self) -> None:
        self._consumer.close()


def run_scenario(stack: Any, **options: Any) -> Scenario:
    """The steps on both tables, each waited for in Kafka before the next: `options` go to
    schema.live.bridge_config (avro=..., kafka=...)."""
    dbname, prefix = unique("keys"), unique("k")
    stack.create_database(dbname)
    try:
        with psycopg.connect(stack.dsn(dbname), autocommit=True) as conn:
            for table, identity in TABLES.items():
                create_table(conn, table, identity)
            topics = {table: f"{prefix}.public.{table}" for table in TABLES}
            create_topics(stack.kafka_bootstrap, list(topics.values()))
            cfg = bridge_config(stack, dbname, prefix=prefix, **options)
            reader = TopicsReader(cfg, list(topics.values()))
            expected: Counter[str] = Counter()
            try:
                with running(cfg) as bridge:
                    for n, (statements, count) in enumerate(STEPS):
                        for table, topic in topics.items():
                            with conn.transaction():
                                for statement in statements:
                                    conn.execute(
                                        statement.format(t=table), {"a": BODY_A, "b": BODY_B}
                                    )
                            expected[topic] += count
                        reader.wait(dict(expected), bridge.alive, f"the records of step {n}")
            finally:
                reader.close()
            rows = {
                table: {
                    int(i): (int(f), str(b))
                    for i, f, b in conn.execute(f"SELECT id, flag, body FROM {table}").fetchall()
                }
                for table in TABLES
            }
            sizes = conn.execute("SELECT min(pg_column_size(body)) FROM keys_default").fetchone()
            assert sizes is not None and sizes[0] > 2000  # really stored as large values
        records = {table: reader.records[topic] for table, topic in topics.items()}
        return Scenario(cfg, topics, records, rows)
    finally:
        stack.drop_database(dbname)
