"""Taking over from a running Debezium connector: same slot, publication, topics, subjects.

Debezium's PostgreSQL connector (Kafka Connect, Apicurio's Avro converter in Confluent
wire format, jars from Maven Central) snapshots two tables and streams a workload; it is
stopped mid-stream while the workload goes on; the bridge starts with the configuration
`bridge import-debezium` made of the connector's own properties file, on the same slot and
publication, and the workload goes on. Then:

- no gap: a plain consumer (confluent-kafka + AvroDeserializer) finds every committed
  change at least once: each insert's and update's after-image, each delete;
- the topics' final state (latest record per key, deletes and tombstones applied) equals
  the tables;
- no snapshot: the bridge wrote no `r` records, it resumed at the slot's position;
- same subjects: the bridge's key and value schemas are the next versions of the subjects
  Debezium registered (the registry's BACKWARD rule accepted them).
"""

from __future__ import annotations

import itertools
import random
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psycopg
import requests
from running import running
from snapshot.helpers import Rec, TopicReader
from waiting import checked, wait_for

from bridge.config import Config
from bridge.debezium_import import import_connector, read_connector_file
from takeover.debezium import avro_debezium

DEBEZIUM = "3.3.1.Final"  # source.version in Debezium's records (bench/debezium/pom.xml)

ITEMS = (
    "CREATE TABLE items (id int PRIMARY KEY, n int NOT NULL, note text, price numeric(10,2),"
    " ts timestamp, tstz timestamptz, d date, u uuid, j jsonb, b bytea,"
    " flag boolean NOT NULL DEFAULT true, big bigint, r real, f float8, t time, num numeric)"
)
PAIRS = "CREATE TABLE pairs (a int, b text, v int NOT NULL, PRIMARY KEY (a, b))"
INSERT_ITEM = (
    "INSERT INTO items VALUES (%(id)s, %(n)s, %(note)s, 12.34, now(), now(), current_date,"
    " gen_random_uuid(), '{\"k\": 1}', 'ab', true, 5, 1.5, 2.5, '10:00', 3.14159)"
)


class Workload:
    """One change per transaction on both tables, until stopped; remembers what committed.

    Every insert and update writes a new value of `n` (items) or `v` (pairs) from one
    counter, so each committed change is recognisable in the topic by (key, value).
    """

    def __init__(self, dsn: str, first_id: int) -> None:
        self.dsn = dsn
        self.counter = itertools.count(1_000_000)
        self.ids = list(range(first_id))
        self.next_id = first_id
        self.items: set[tuple[int, int]] = set()  # (id, n) committed
        self.pairs: set[tuple[int, str, int]] = set()  # (a, b, v) committed
        self.deleted: set[int] = set()
        self.done = 0
        self._stop = threading.Event()
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="workload", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(60)
        assert not self._thread.is_alive(), "the workload did not stop"
        self.check()

    def check(self) -> None:
        if self._error is not None:
            raise self._error

    def _run(self) -> None:
        rng = random.Random(20)
        try:
            with psycopg.connect(self.dsn, autocommit=True) as conn:
                while not self._stop.is_set():
                    self._one(conn, rng)
                    self.done += 1
        except BaseException as exc:  # handed to the test thread
            self._error = exc

    def _one(self, conn: psycopg.Connection[Any], rng: random.Random) -> None:
        n = next(self.counter)
        kind = rng.random()
        if kind < 0.3 or len(self.ids) < 10:
            item = self.next_id
            self.next_id += 1
            conn.execute(INSERT_ITEM, {"id": item, "n": n, "note": f"new {n}"})
            self.ids.append(item)
            self.items.add((item, n))
        elif kind < 0.7:
            item = rng.choice(self.ids)
            conn.execute("UPDATE items SET n = %s, note = %s WHERE id = %s", (n, f"u {n}", item))
            self.items.add((item, n))
        elif kind < 0.8:
            item = self.ids.pop(rng.randrange(len(self.ids)))
            conn.execute("DELETE FROM items WHERE id = %s", (item,))
            self.deleted.add(item)
        else:
            a, b = rng.randrange(5), rng.choice("xyz")
            conn.execute(
                "INSERT INTO pairs VALUES (%s, %s, %s) ON CONFLICT (a, b) DO UPDATE SET v = %s",
                (a, b, n, n),
            )
            self.pairs.add((a, b, n))


def _subjects(registry_url: str, topics: list[str]) -> dict[str, list[int]]:
    return {
        subject: requests.get(f"{registry_url}/subjects/{subject}/versions", timeout=10).json()
        for topic in topics
        for subject in (f"{topic}-key", f"{topic}-value")
    }


def _state(records: list[Rec], key: tuple[str, ...]) -> dict[tuple[Any, ...], dict[str, Any]]:
    state: dict[tuple[Any, ...], dict[str, Any]] = {}
    for rec in records:
        assert rec.key is not None
        k = tuple(rec.key[f] for f in key)
        if rec.value is None or rec.value["op"] == "d":
            state.pop(k, None)
        else:
            state[k] = rec.value["after"]
    return state


def test_the_bridge_takes_over_from_debezium(
    stack: Any,
    pg_db: str,
    pg_dsn: str,
    pg_conn: psycopg.Connection[Any],
    slot_name: str,
    publication_name: str,
    topic_prefix: str,
    tmp_path: Path,
    topic_readers: Callable[[str], TopicReader],
) -> None:
    pg_conn.execute(ITEMS)
    pg_conn.execute(PAIRS)
    pg_conn.execute(f"CREATE PUBLICATION {publication_name} FOR TABLE items, pairs")
    for i in range(50):
        pg_conn.execute(INSERT_ITEM, {"id": i, "n": i, "note": f"first {i}"})
    pg_conn.execute("INSERT INTO pairs VALUES (0, 'x', 0), (1, 'y', 1)")
    topics = [f"{topic_prefix}.public.items", f"{topic_prefix}.public.pairs"]
    items, pairs = (topic_readers(topic) for topic in topics)
    workload = Workload(pg_dsn, first_id=50)
    debezium = avro_debezium(
        stack,
        dbname=pg_db,
        slot=slot_name,
        publication=publication_name,
        prefix=topic_prefix,
        tables=["public.items", "public.pairs"],
        workdir=tmp_path,
    )
    debezium.start()
    try:

        def streamed(count: int) -> bool:
            """Debezium has streamed `count` changes of the workload."""
            debezium.check()
            workload.check()
            items.read(120)
            changed = [r for r in items.records if r.value and r.value["op"] in "cud"]
            return len(changed) >= count

        wait_for(lambda: items.read(300) and len(items.records) >= 50, 300, "Debezium's snapshot")
        workload.start()
        wait_for(lambda: streamed(200), 120, "Debezium streaming the workload", every=0.2)
    finally:
        debezium.stop()  # mid-stream: the workload goes on
    dbz_records = len(items.read(60))  # all Debezium wrote: the topic's end after its stop
    pairs.read(60)
    assert debezium.proc is not None and debezium.proc.returncode is not None
    versions_before = _subjects(stack.registry_url, topics)
    assert all(v == [1] for v in versions_before.values()), versions_before
    at_stop = workload.done
    wait_for(
        checked(workload.check, lambda: workload.done >= at_stop + 100), 60, "changes meanwhile"
    )

    imported = import_connector(read_connector_file(debezium.connector), stack.kafka_bootstrap)
    settings = imported.settings
    assert settings["registry"]["url"] == stack.registry_url  # Apicurio's URL, ccompat API
    settings["source"]["password"] = stack.pg_password  # the import leaves secrets out
    settings["http"] = {"port": 0}
    settings["pipeline"] = {**settings["pipeline"], "spill_dir": str(tmp_path / "spill")}
    with running(Config.model_validate(settings)) as bridge:
        at_start = workload.done

        def going_on() -> bool:
            workload.check()
            bridge.check()
            return workload.done >= at_start + 200

        wait_for(going_on, 120, "the workload going on under the bridge")
        workload.stop()
        final_items = {
            (row[0],): row[1:] for row in pg_conn.execute("SELECT id, n, note FROM items")
        }
        final_pairs = {
            (row[0], row[1]): (row[2],) for row in pg_conn.execute("SELECT a, b, v FROM pairs")
        }

        def caught_up() -> bool:
            bridge.check()
            got_items = _state(items.read(60), ("id",))
            got_pairs = _state(pairs.read(60), ("a", "b"))
            return {k: (v["n"], v["note"]) for k, v in got_items.items()} == final_items and {
                k: (v["v"],) for k, v in got_pairs.items()
            } == final_pairs

        wait_for(caught_up, 120, "the topics' final state to equal the tables", every=0.5)

    seen_items = {
        (r.value["after"]["id"], r.value["after"]["n"])
        for r in items.records
        if r.value and r.value["after"]
    }
    assert workload.items - seen_items == set(), "a gap: committed changes missing in Kafka"
    deletes = {r.key["id"] for r in items.records if r.key and r.value and r.value["op"] == "d"}
    assert workload.deleted - deletes == set()
    seen_pairs = {
        (r.value["after"]["a"], r.value["after"]["b"], r.value["after"]["v"])
        for r in pairs.records
        if r.value and r.value["after"]
    }
    assert workload.pairs - seen_pairs == set()

    writers = [r.value["source"]["version"] if r.value else None for r in items.records]
    assert set(writers[:dbz_records]) - {None} == {DEBEZIUM}
    assert set(writers[dbz_records:]) - {None}, "the bridge wrote nothing after Debezium"
    assert DEBEZIUM not in writers[dbz_records:]
    bridge_ops = {r.value["op"] for r in items.records[dbz_records:] if r.value}
    assert "r" not in bridge_ops, "the bridge snapshotted again"
    versions = _subjects(stack.registry_url, topics)
    assert all(len(v) >= 2 for v in versions.values()), versions
