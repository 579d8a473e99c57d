"""`bridge verify` against the real bridge, PostgreSQL, Kafka and registry (issue 25).

One workload (many types, a primary-key change over an unchanged TOASTed value, a
TRUNCATE) streamed by the bridge running in process; verify must find every table equal.
Then faults a user cannot see: a record produced into a topic by hand (a ghost), changes
made while the table was left out of the publication (an update, an insert and a delete
that never reached Kafka); verify must report exactly those keys.
The same verification with a memory budget of a few hundred bytes (the topic's states
in hash partitions on disk) must report exactly the same.
"""

from __future__ import annotations

import io
import json
import secrets
import subprocess
from collections.abc import Iterator
from typing import Any

import fastavro
import psycopg
import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
from confluent_kafka.schema_registry import SchemaRegistryClient
from psycopg import sql
from running import PipelineThread, running
from schema.live import unique
from toast_keys import big_text
from tools import venv_tool

from bridge.config import Config
from bridge.verify.repair import repair
from bridge.verify.report import as_json
from bridge.verify.run import Verification, verify
from verify.live import bridge_config

TABLES = ("kinds", "moved", "trunc")
SCHEMA = """
CREATE TABLE kinds (id int PRIMARY KEY, amount numeric(10,2), at timestamptz, doc jsonb,
                    tags int[], raw bytea, ratio float8, day date, body text);
ALTER TABLE kinds ALTER COLUMN body SET STORAGE EXTERNAL;
CREATE TABLE moved (id int PRIMARY KEY, flag int, body text);
ALTER TABLE moved ALTER COLUMN body SET STORAGE EXTERNAL;
CREATE TABLE trunc (id int PRIMARY KEY, v text);
CREATE TABLE signals (id text PRIMARY KEY, type text NOT NULL, data text);
"""
WORKLOAD = [
    "INSERT INTO kinds SELECT g, g * 1.25,"
    " '2026-01-02 03:04:05+01'::timestamptz + g * interval '1h',"
    " jsonb_build_object('g', g), ARRAY[g, g + 1], decode('00ff', 'hex'), g / 3.0, 'infinity',"
    " %(big)s FROM generate_series(1, 40) g",
    "UPDATE kinds SET ratio = 'NaN', day = '-infinity' WHERE id = 5",
    "UPDATE kinds SET amount = 0 WHERE id <= 10",  # body unchanged: unsent TOAST
    "DELETE FROM kinds WHERE id = 40",
    "INSERT INTO moved VALUES (1, 0, %(big)s), (2, 0, 'small')",
    "UPDATE moved SET id = 11 WHERE id = 1",  # key change over an unchanged TOASTed body
    "UPDATE moved SET flag = 7 WHERE id = 11",
    "INSERT INTO trunc SELECT g, 'old ' || g FROM generate_series(1, 20) g",
    "TRUNCATE trunc",
    "INSERT INTO trunc VALUES (3, 'after the truncate')",
]


@pytest.fixture
def setup(stack: Any, pg_conn: psycopg.Connection[Any], pg_db: str) -> Iterator[Config]:
    pg_conn.execute(SCHEMA)
    publication = unique("pub")
    pg_conn.execute(f"CREATE PUBLICATION {publication} FOR TABLE {', '.join(TABLES)}, signals")
    yield bridge_config(stack, pg_db, publication)


def _by_table(result: Verification) -> dict[str, Any]:
    return {t.table.split(".", 1)[1]: t for t in result.tables}


def _counts(result: Verification) -> dict[str, tuple[int, int, int, int]]:
    """(equal, missing, ghosts, different) of the workload's tables (the signal table,
    captured too, holds the repairs' watermarks)."""
    found = _by_table(result)
    assert found["signals"].ok
    return {n: (t.equal, t.missing, t.ghosts, t.different) for n, t in found.items() if n in TABLES}


def _everything(result: Verification) -> list[Any]:
    """What a verification says of each table but where it kept the topic's states, and
    what --repair would act on."""
    return [
        (
            {k: v for k, v in t.as_dict().items() if k != "kafka_state_on_disk"},
            t.reread_keys,
            sorted(t.ghost_keys.items()),
        )
        for t in result.tables
    ]


def _inject_faults(cfg: Config, conn: psycopg.Connection[Any], topic: str) -> None:
    """What Kafka never gets, kinds 2, 3 and 200 changed while the table is out of the
    publication (a different row, a missing delete: a ghost, a missing row), and a ghost
    record produced by hand (kinds 300)."""
    publication = cfg.source.publication_name
    conn.execute(f"ALTER PUBLICATION {publication} DROP TABLE kinds")
    conn.execute("UPDATE kinds SET amount = 99 WHERE id = 2")  # different
    conn.execute("INSERT INTO kinds (id, amount) VALUES (200, 1)")  # missing
    conn.execute("DELETE FROM kinds WHERE id = 3")  # a missing delete: a ghost
    conn.execute(f"ALTER PUBLICATION {publication} ADD TABLE kinds")
    _hand_made_ghost(cfg, topic, 300)


def _hand_made_ghost(cfg: Config, topic: str, ghost_id: int) -> None:
    """A copy of the topic's first record with its key and id changed to `ghost_id`,
    produced to the same partition (schemas from the registry, as any producer would)."""
    consumer = Consumer({**cfg.kafka.client_config(), "group.id": unique("ghost")})
    consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
    msg = consumer.poll(30)
    consumer.close()
    assert msg is not None and msg.error() is None
    registry = SchemaRegistryClient(cfg.registry.client_config())

    def rewrite(data: bytes, change: Any) -> bytes:
        schema = fastavro.parse_schema(
            json.loads(str(registry.get_schema(int.from_bytes(data[1:5], "big")).schema_str))
        )
        decoded = fastavro.schemaless_reader(io.BytesIO(data[5:]), schema, schema)
        out = io.BytesIO()
        fastavro.schemaless_writer(out, schema, change(decoded))
        return data[:5] + out.getvalue()

    def new_value(env: Any) -> Any:
        env["after"]["id"] = ghost_id
        return env

    old_key, old_value, partition = msg.key(), msg.value(), msg.partition()
    assert old_key is not None and old_value is not None and partition is not None
    key = rewrite(old_key, lambda k: {**k, "id": ghost_id})
    value = rewrite(old_value, new_value)
    producer = Producer(cfg.kafka.client_config())
    producer.produce(topic, value, key, partition=partition)
    assert producer.flush(30) == 0


def test_clean_workload_then_injected_faults(
    setup: Config, pg_conn: psycopg.Connection[Any]
) -> None:
    cfg = setup
    big = big_text(7)
    pg_conn.execute("INSERT INTO kinds (id, amount, body) VALUES (100, 1, 'before the slot')")
    bridge: PipelineThread
    with running(cfg) as bridge:
        for statement in WORKLOAD:
            pg_conn.execute(statement, {"big": big})
        clean = verify(cfg, timeout=120)
        bridge.check()
        assert clean.ok, as_json(clean)
        assert _counts(clean) == {
            "kinds": (40, 0, 0, 0),  # 39 streamed + 1 from the initial snapshot
            "moved": (2, 0, 0, 0),
            "trunc": (1, 0, 0, 0),
        }
        assert {t.skipped for t in clean.tables} == {None}
        # settled by their Avro bytes, except the rows completed by carried TOAST values:
        # kinds 1-10 (an update left body unsent), moved 11 (a key change, then an update)
        decoded = {n: t.decoded for n, t in _by_table(clean).items() if n in TABLES}
        assert decoded == {"kinds": 10, "moved": 1, "trunc": 0}

        topic = _by_table(clean)["kinds"].topic
        _inject_faults(cfg, pg_conn, topic)

        found = verify(cfg, timeout=120)
        bridge.check()
        # the same verification with a few hundred bytes of memory for the topic's states:
        # they go to hash partitions on disk, and everything found must be the same
        on_disk = verify(cfg, timeout=120, memory_limit=500)
        bridge.check()
        done = repair(cfg, found, timeout=120)
        assert (done.reread, done.deleted, done.skipped) == (2, 2, 0)
        again = verify(cfg, timeout=120)
        bridge.check()
    assert again.ok, as_json(again)
    assert _counts(again) == {
        "kinds": (40, 0, 0, 0),
        "moved": (2, 0, 0, 0),
        "trunc": (1, 0, 0, 0),
    }
    assert all(_by_table(on_disk)[n].on_disk for n in TABLES)
    assert not any(t.on_disk for t in found.tables)
    assert _everything(on_disk) == _everything(found)
    kinds = _by_table(found)["kinds"]
    assert not found.ok
    assert _counts(found) == {
        "kinds": (38, 1, 2, 1),
        "moved": (2, 0, 0, 0),
        "trunc": (1, 0, 0, 0),
    }
    assert dict(kinds.columns) == {"amount": 1}
    assert kinds.samples == {
        "different": ['{"id": 2}'],
        "missing": ['{"id": 200}'],
        "ghost": ['{"id": 3}', '{"id": 300}'],
    }
    report = json.loads(as_json(found))
    assert report["ok"] is False
    statuses = {t["table"]: t["status"] for t in report["tables"]}
    assert statuses == {
        "public.kinds": "differs",
        "public.moved": "equal",
        "public.trunc": "equal",
        "public.signals": "equal",
    }


def test_cli_exit_codes(
    stack: Any, setup: Config, pg_conn: psycopg.Connection[Any], tmp_path: Any
) -> None:
    """`bridge verify` as a process: JSON and exit 0 when equal, exit 1 once a row differs,
    exit 0 after `--repair` fixed it."""
    cfg = setup
    settings = cfg.model_dump(mode="json", exclude_none=True)
    settings["source"]["password"] = stack.pg_password  # dumped masked
    path = tmp_path / "bridge.yaml"
    path.write_text(json.dumps(settings))
    pg_conn.execute("INSERT INTO trunc VALUES (1, 'a')")
    command = [venv_tool("bridge"), "verify", "-c", str(path)]
    with running(cfg):
        ok = subprocess.run(
            [*command, "--format", "json"], check=False, capture_output=True, text=True
        )
        assert ok.returncode == 0, ok.stderr
        assert json.loads(ok.stdout)["ok"] is True
        pg_conn.execute(f"ALTER PUBLICATION {cfg.source.publication_name} DROP TABLE trunc")
        pg_conn.execute("UPDATE trunc SET v = 'b'")
        pg_conn.execute(f"ALTER PUBLICATION {cfg.source.publication_name} ADD TABLE trunc")
        bad = subprocess.run(
            [*command, "--tables", "public.trunc"], check=False, capture_output=True, text=True
        )
    assert bad.returncode == 1, bad.stderr
    assert "public.trunc: columns that differ: v (1)" in bad.stdout


def test_cli_repairs_without_a_signal_table(
    stack: Any, pg_conn: psycopg.Connection[Any], pg_db: str, tmp_path: Any
) -> None:
    """A bridge run with the defaults (no snapshot.signal_table): `bridge check` says how
    repair will work, `bridge verify --repair` re-reads a different and a missing row itself
    and deletes a ghost, and the table matches afterwards, also after a later change."""
    pg_conn.execute("CREATE TABLE plain (id int PRIMARY KEY, v text)")
    publication = unique("pub")
    pg_conn.execute(f"CREATE PUBLICATION {publication} FOR TABLE plain")
    cfg = bridge_config(stack, pg_db, publication, signal_table=None)
    settings = cfg.model_dump(mode="json", exclude_none=True)
    settings["source"]["password"] = stack.pg_password  # dumped masked
    path = tmp_path / "bridge.yaml"
    path.write_text(json.dumps(settings))
    pg_conn.execute("INSERT INTO plain SELECT g, 'v' || g FROM generate_series(1, 20) g")
    command = [venv_tool("bridge"), "verify", "-c", str(path), "--repair"]
    checked = subprocess.run(
        [venv_tool("bridge"), "check", "-c", str(path)], check=False, capture_output=True, text=True
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "ok   verify --repair: verify re-reads rows itself" in checked.stdout, checked.stdout
    with running(cfg) as bridge:
        pg_conn.execute(f"ALTER PUBLICATION {publication} DROP TABLE plain")
        pg_conn.execute("UPDATE plain SET v = 'changed' WHERE id = 3")  # different
        pg_conn.execute("INSERT INTO plain VALUES (50, 'never streamed')")  # missing
        pg_conn.execute("DELETE FROM plain WHERE id = 4")  # a ghost
        pg_conn.execute(f"ALTER PUBLICATION {publication} ADD TABLE plain")
        repaired = subprocess.run(command, check=False, capture_output=True, text=True)
        bridge.check()
        pg_conn.execute("UPDATE plain SET v = 'after the repair' WHERE id = 3")  # still ordered
        again = verify(cfg, timeout=120)
        bridge.check()
    assert repaired.returncode == 0, repaired.stdout + repaired.stderr
    assert "repaired: 2 row(s) re-emitted, 1 ghost key(s) deleted" in repaired.stdout
    assert repaired.stdout.rstrip().endswith("all tables match")
    assert again.ok, as_json(again)
    (table,) = again.tables
    assert (table.rows, table.equal) == (20, 20)


def test_check_warns_when_the_role_could_not_repair(
    stack: Any, pg_conn: psycopg.Connection[Any], pg_db: str, tmp_path: Any
) -> None:
    """`bridge check` as a role that may stream and read but not lock the published table
    (nor write the signal table) says up front that `--repair` would stop, and why."""
    pg_conn.execute("CREATE TABLE readonly (id int PRIMARY KEY)")
    pg_conn.execute("CREATE TABLE signals (id text PRIMARY KEY, type text NOT NULL, data text)")
    publication = unique("pub")
    pg_conn.execute(f"CREATE PUBLICATION {publication} FOR TABLE readonly")
    role, password = unique("reader"), secrets.token_urlsafe(16)
    ident = sql.Identifier(role)
    pg_conn.execute(
        sql.SQL("CREATE ROLE {} LOGIN REPLICATION PASSWORD {}").format(ident, sql.Literal(password))
    )
    try:
        pg_conn.execute(sql.SQL("GRANT SELECT ON readonly, signals TO {}").format(ident))
        for signal_table, expected in ((None, ""), ("public.signals", "public.signals: no INSERT")):
            cfg = bridge_config(stack, pg_db, publication, signal_table=signal_table)
            settings = cfg.model_dump(mode="json", exclude_none=True)
            settings["source"].update(user=role, password=password)
            path = tmp_path / "bridge.yaml"
            path.write_text(json.dumps(settings))
            checked = subprocess.run(
                [venv_tool("bridge"), "check", "-c", str(path)],
                check=False,
                capture_output=True,
                text=True,
            )
            (line,) = [x for x in checked.stdout.splitlines() if x[5:].startswith("verify --")]
            assert line.startswith("ok   verify --repair: WARNING: "), checked.stdout
            assert "for its SHARE MODE lock) on 1 published table(s): public.readonly" in line
            assert expected in line
    finally:
        pg_conn.execute(sql.SQL("DROP OWNED BY {}").format(ident))
        pg_conn.execute(sql.SQL("DROP ROLE {}").format(ident))
