"""Per-key order in Kafka equals commit order, over 1,000 random transactions.

Three tables (one with a composite key), a small key space so keys are reused
often, several statements per transaction, multi-row statements, primary-key
changes, and rolled-back transactions and savepoints that must leave no trace.
A row trigger writes every change to an unpublished audit table in the same
transaction; the transactions run one after another on one connection, so the
audit id order is the commit order (and, within a transaction, the WAL order).
Topics have several partitions, so only per-key order is guaranteed, which is
what is checked, along with per-partition commit order and the ack invariant.
"""

from __future__ import annotations

import os
import random
from collections import defaultdict
from typing import Any

import psycopg
from psycopg import sql
from running import running

from bridge.config import Config

from .helpers import SlotMonitor, wait_slot_active
from .kafka_io import Rec, TopicReader, assert_acks_follow_appends, create_topics

TRANSACTIONS = 1000
TABLES: dict[str, tuple[str, tuple[str, ...]]] = {
    "acct": ("id int PRIMARY KEY, owner text NOT NULL, n int NOT NULL", ("id",)),
    "pair": ("a int, b text, v int NOT NULL, note text, PRIMARY KEY (a, b)", ("a", "b")),
    "item": ("id bigint PRIMARY KEY, flag boolean, label text", ("id",)),
}
KEYS: dict[str, list[tuple[Any, ...]]] = {
    "acct": [(i,) for i in range(1, 13)],
    "pair": [(a, b) for a in range(1, 5) for b in "xyz"],
    "item": [(2**40 + i,) for i in range(1, 13)],
}
AUDIT = [
    "CREATE TABLE audit (id bigserial PRIMARY KEY, xid bigint NOT NULL "
    "DEFAULT txid_current() % 4294967296, tbl text NOT NULL, op text NOT NULL, "
    "old jsonb, new jsonb)",
    """CREATE FUNCTION audit_row() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      INSERT INTO audit (tbl, op, old, new) VALUES (TG_TABLE_NAME, TG_OP,
        CASE WHEN TG_OP <> 'INSERT' THEN to_jsonb(OLD) END,
        CASE WHEN TG_OP <> 'DELETE' THEN to_jsonb(NEW) END);
      RETURN NULL;
    END $$""",
]

Event = tuple[str, dict[str, Any] | None]  # (op or "tombstone", after image)
History = dict[tuple[str, tuple[Any, ...]], list[Event]]  # (table, key) -> events


def _values(rng: random.Random, table: str) -> dict[str, Any]:
    if table == "acct":
        return {"owner": rng.choice(["ada", "bob", "cy", "dee"]), "n": rng.randint(-999, 999)}
    if table == "pair":
        return {"v": rng.randint(0, 99), "note": rng.choice([None, "", "n" * rng.randint(1, 9)])}
    return {"flag": rng.choice([None, True, False]), "label": rng.choice([None, "l", "label"])}


class Workload:
    """Random statements that are valid against a model of which keys exist."""

    def __init__(self, conn: psycopg.Connection[Any], seed: int) -> None:
        self.conn = conn
        self.rng = random.Random(seed)
        self.present: dict[str, set[tuple[Any, ...]]] = {t: set() for t in TABLES}

    def _where(self, table: str, key: tuple[Any, ...]) -> sql.Composed:
        cols = TABLES[table][1]
        return sql.SQL(" AND ").join(
            sql.SQL("{} = {}").format(sql.Identifier(c), sql.Literal(v))
            for c, v in zip(cols, key, strict=True)
        )

    def statement(self) -> None:
        rng, table = self.rng, self.rng.choice(list(TABLES))
        cols, present = TABLES[table][1], self.present[table]
        absent = [k for k in KEYS[table] if k not in present]
        kinds = ["insert"] * bool(absent) + ["update", "delete", "rekey", "bulk"] * bool(present)
        kind = rng.choice(kinds)
        t = sql.Identifier(table)
        if kind == "insert":
            key = rng.choice(absent)
            row = dict(zip(cols, key, strict=True)) | _values(rng, table)
            self.conn.execute(
                sql.SQL("INSERT INTO {} ({}) VALUES ({})").format(
                    t,
                    sql.SQL(", ").join(map(sql.Identifier, row)),
                    sql.SQL(", ").join(map(sql.Literal, row.values())),
                )
            )
            present.add(key)
        elif kind in ("update", "delete", "rekey"):
            key = rng.choice(sorted(present))
            if kind == "delete":
                where = self._where(table, key)
                self.conn.execute(sql.SQL("DELETE FROM {} WHERE {}").format(t, where))
                present.remove(key)
                return
            if kind == "rekey" and absent:
                new = rng.choice(absent)
                changes = dict(zip(cols, new, strict=True))
                present.remove(key)
                present.add(new)
            else:
                changes = _values(rng, table)
            sets = sql.SQL(", ").join(
                sql.SQL("{} = {}").format(sql.Identifier(c), sql.Literal(v))
                for c, v in changes.items()
            )
            self.conn.execute(
                sql.SQL("UPDATE {} SET {} WHERE {}").format(t, sets, self._where(table, key))
            )
        else:  # several rows in one statement, in whatever order the executor visits them
            col, value = next(iter(_values(rng, table).items()))
            self.conn.execute(
                sql.SQL("UPDATE {} SET {} = {} WHERE {} % 3 = {}").format(
                    t,
                    sql.Identifier(col),
                    sql.Literal(value),
                    sql.Identifier(cols[0]),
                    sql.Literal(rng.randrange(3)),
                )
            )

    def transaction(self) -> None:
        """1-4 statements; 5% are rolled back, 10% also roll back a savepoint."""
        saved = {t: set(keys) for t, keys in self.present.items()}
        rollback = self.rng.random() < 0.05
        with self.conn.transaction(force_rollback=rollback):
            for _ in range(self.rng.randint(1, 4)):
                self.statement()
            if self.rng.random() < 0.1:
                inner = {t: set(keys) for t, keys in self.present.items()}
                with self.conn.transaction(force_rollback=True):  # a savepoint
                    self.statement()
                self.present = inner
                self.statement()
        if rollback:
            self.present = saved


def expected_history(conn: psycopg.Connection[Any]) -> tuple[History, dict[int, int]]:
    """Debezium's record shapes for each audited change, and record counts per xid."""
    history: History = defaultdict(list)
    per_xid: dict[int, int] = defaultdict(int)
    for xid, table, op, old, new in conn.execute(
        "SELECT xid, tbl, op, old, new FROM audit ORDER BY id"
    ):
        cols = TABLES[table][1]
        old_key = tuple(old[c] for c in cols) if old else ()
        new_key = tuple(new[c] for c in cols) if new else ()
        shapes: list[tuple[tuple[Any, ...], Event]] = []
        if op == "UPDATE" and old_key == new_key:
            shapes = [(new_key, ("u", new))]
        elif op != "INSERT":  # a delete, or a key change: delete + tombstone + create
            shapes = [(old_key, ("d", None)), (old_key, ("tombstone", None))]
        if op == "INSERT" or (op == "UPDATE" and old_key != new_key):
            shapes.append((new_key, ("c", new)))
        for key, event in shapes:
            history[(table, key)].append(event)
        per_xid[xid] += len(shapes)
    return history, per_xid


def kafka_history(records: list[Rec], prefix: str) -> History:
    history: History = defaultdict(list)
    for rec in records:
        table = rec.topic.removeprefix(f"{prefix}.public.")
        assert rec.key is not None, f"record without key on {rec.topic}"
        key = tuple(rec.key[c] for c in TABLES[table][1])
        event: Event = (
            ("tombstone", None) if rec.value is None else (rec.value["op"], rec.value["after"])
        )
        history[(table, key)].append(event)
    return history


def completion_by_commit(records: list[Rec], per_xid: dict[int, int]) -> dict[int, float]:
    """Commit LSN -> append time of the transaction's last record (inf if incomplete).

    A tombstone carries no source block: it belongs to the delete produced just
    before it, the previous record of the same partition.
    """
    previous: dict[tuple[str, int], int] = {}  # partition -> xid of its last record
    lsn_of: dict[int, int] = {}
    done: dict[int, list[int]] = defaultdict(list)
    for rec in sorted(records, key=lambda r: (r.topic, r.partition, r.offset)):
        if rec.value is None:
            xid = previous[(rec.topic, rec.partition)]
        else:
            xid = rec.value["source"]["txId"]
            lsn_of[xid] = rec.commit_lsn
        previous[(rec.topic, rec.partition)] = xid
        done[xid].append(rec.append_ms)
    return {
        lsn_of[xid]: float(max(done[xid])) if len(done[xid]) == count else float("inf")
        for xid, count in per_xid.items()
        if xid in lsn_of
    }


def _assert_partitions_in_commit_order(records: list[Rec]) -> None:
    last: dict[tuple[str, int], int] = {}
    for rec in sorted(records, key=lambda r: (r.topic, r.partition, r.offset)):
        if rec.value is None:
            continue
        where = (rec.topic, rec.partition)
        assert rec.commit_lsn >= last.get(where, 0), f"commit order broken at {rec}"
        last[where] = rec.commit_lsn


def _setup(conn: psycopg.Connection[Any], publication: str) -> None:
    for table, (columns, _) in TABLES.items():
        conn.execute(sql.SQL("CREATE TABLE {} (" + columns + ")").format(sql.Identifier(table)))
    for statement in AUDIT:
        conn.execute(statement)
    for table in TABLES:
        conn.execute(
            sql.SQL(
                "CREATE TRIGGER audit AFTER INSERT OR UPDATE OR DELETE ON {} "
                "FOR EACH ROW EXECUTE FUNCTION audit_row()"
            ).format(sql.Identifier(table))
        )
    conn.execute(
        sql.SQL("CREATE PUBLICATION {} FOR TABLE {}").format(
            sql.Identifier(publication), sql.SQL(", ").join(map(sql.Identifier, TABLES))
        )
    )


def test_per_key_order_is_commit_order(
    pg_conn: psycopg.Connection[Any],
    pg_dsn: str,
    slot_name: str,
    publication_name: str,
    topic_prefix: str,
    kafka_bootstrap: str,
    registry_url: str,
    settings: dict[str, Any],
) -> None:
    seed = int(os.environ.get("DELIVERY_SEED", "20240611"))
    _setup(pg_conn, publication_name)
    topics = create_topics(
        kafka_bootstrap, [f"{topic_prefix}.public.{t}" for t in TABLES], partitions=4
    )
    with running(Config(**settings)) as bridge:
        wait_slot_active(pg_conn, slot_name, bridge)
        monitor = SlotMonitor(pg_dsn, slot_name)
        reader = TopicReader(kafka_bootstrap, registry_url, topics)
        try:
            workload = Workload(pg_conn, seed)
            for _ in range(TRANSACTIONS):
                workload.transaction()
            expected, per_xid = expected_history(pg_conn)
            total = sum(per_xid.values())
            reader.read_until(lambda recs: len(recs) >= total, 120, f"{total} records")
            bridge.stop()
            reader.read_to_end()
        finally:
            samples = monitor.stop()
            reader.close()

    got = kafka_history(reader.records, topic_prefix)
    assert len(per_xid) > TRANSACTIONS * 0.9, "the workload committed too little"
    assert any(len(events) > 20 for events in expected.values()), "keys are not reused"
    for key in sorted(expected.keys() | got.keys(), key=repr):
        assert got.get(key) == expected.get(key), (
            f"seed {seed}: {key}: Kafka has {got.get(key)}, PostgreSQL committed "
            f"{expected.get(key)}"
        )
    assert len(reader.records) == total
    _assert_partitions_in_commit_order(reader.records)
    assert_acks_follow_appends(samples, completion_by_commit(reader.records, per_xid))
