"""`pipeline.on_error`: one table's bad change never silences the others.

Live, against the real stack: an xid8 above 2**63 (a value PostgreSQL accepts, the
bridge's Avro long cannot hold) in one table, or a row over its topic's max.message.bytes.
With that table in `dlq` mode the change (or record) is parked on the dead-letter topic
with its coordinates, another table keeps flowing and the slot passes the bad
transaction; with the default (`fail`) the bridge stops and the slot never passes it,
also after a restart.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import psycopg
import pytest
from delivery.helpers import bridge_settings
from running import running
from test_oversized import BIG_ROW, _confirmed_at_least, _read_json, _write, small_topic
from waiting import wait_for

from bridge.config import Config, PipelineConfig
from bridge.demo import consume
from bridge.errors import ValueConversionError
from bridge.kafka.oversized import letter_id, tally
from bridge.metrics import BridgeCollector, Metrics

BAD_XID8 = str(2**64 - 1)
__all__ = ["small_topic"]  # a fixture of test_oversized's, used here


def test_the_first_matching_table_pattern_wins_else_the_default() -> None:
    cfg = PipelineConfig(
        on_error="skip", on_error_tables={r"public\.bad.*": "dlq", r"public\..*": "fail"}
    )
    assert cfg.on_error_for("public", "bad_one") == "dlq"
    assert cfg.on_error_for("public", "other") == "fail"
    assert cfg.on_error_for("sales", "other") == "skip"
    assert PipelineConfig().on_error_for("public", "t") == "fail"


def test_an_invalid_table_pattern_is_refused_when_read() -> None:
    with pytest.raises(ValueError, match="invalid regular expression"):
        PipelineConfig(on_error_tables={"public.(": "dlq"})


def test_degraded_tables_are_counted_and_named_in_readyz() -> None:
    metrics = Metrics()
    assert metrics.degraded() == ""
    metrics.tolerated("public.a", ("public.a", 1, 2, "e"))
    metrics.tolerated("public.a", ("public.a", 3, 4, "e"))
    metrics.tolerated("public.b", None)
    assert metrics.degraded() == "degraded tables: public.a (2 dead-lettered), public.b (1 skipped)"
    assert metrics.ready()[1].endswith("; " + metrics.degraded())
    samples = {
        (s.name, s.labels.get("table")): s.value
        for family in BridgeCollector(metrics).collect()
        for s in family.samples
    }
    assert samples[("bridge_dead_lettered_total", "public.a")] == 2
    assert samples[("bridge_skipped_changes_total", "public.b")] == 1
    assert samples[("bridge_table_degraded", "public.a")] == 1
    assert samples[("bridge_table_degraded", "public.b")] == 1


def _config(stack: Any, db: str, slot: str, publication: str, prefix: str, tmp: Path,
            **pipeline: Any) -> Config:  # fmt: skip
    settings = bridge_settings(stack, db, slot, publication, prefix, tmp)
    settings["pipeline"].update(pipeline)
    return Config(**settings)


def _tables(conn: psycopg.Connection[Any]) -> None:
    conn.execute("CREATE TABLE bad (id int PRIMARY KEY, x xid8, note text)")
    conn.execute("CREATE TABLE good (id int PRIMARY KEY, v text)")


def test_a_dlq_table_parks_its_bad_change_while_the_others_flow(
    stack: Any,
    pg_db: str,
    pg_conn: psycopg.Connection[Any],
    slot_name: str,
    publication_name: str,
    topic_prefix: str,
    tmp_path: Path,
) -> None:
    _tables(pg_conn)
    cfg = _config(
        stack, pg_db, slot_name, publication_name, topic_prefix, tmp_path,
        on_error_tables={r"public\.bad": "dlq"},
    )  # fmt: skip
    with running(cfg) as bridge:  # re-raises whatever the pipeline dies of
        _write(pg_conn, "INSERT INTO good VALUES (1, 'before')")
        with pg_conn.transaction():
            pg_conn.execute("INSERT INTO bad VALUES (1, %s, 'too big')", (BAD_XID8,))
            pg_conn.execute("INSERT INTO good VALUES (2, 'same transaction')")
            row = pg_conn.execute(
                "SELECT pg_current_xact_id()::text, pg_current_wal_insert_lsn()::text"
            ).fetchone()
        assert row is not None
        xid, inside_bad = int(row[0]), str(row[1])
        _write(pg_conn, "INSERT INTO bad VALUES (2, '7', 'fits')")
        last = _write(pg_conn, "INSERT INTO good VALUES (3, 'after')")
        wait_for(
            lambda: _confirmed_at_least(pg_conn, slot_name, last), 60, f"the slot to pass {last}"
        )
        dead = _read_json(stack.kafka_bootstrap, f"{topic_prefix}.dlq", 1)
        good = consume(cfg, f"{topic_prefix}.public.good", 3)
        bad = consume(cfg, f"{topic_prefix}.public.bad", 1)
        _, detail = bridge.pipeline.metrics.ready()
        assert bridge.error is None and bridge.alive()
    assert _confirmed_at_least(pg_conn, slot_name, inside_bad)
    assert [(key["id"], value["after"]["v"]) for key, value in good] == [
        (1, "before"),
        (2, "same transaction"),
        (3, "after"),
    ]
    assert [(key["id"], value["after"]["x"]) for key, value in bad] == [(2, 7)]
    assert len(dead) == 1
    _, letter = dead[0]
    assert letter["table"] == "public.bad" and letter["op"] == "c"
    assert letter["txId"] == xid and letter["commit_lsn"] > 0 and letter["lsn"] > 0
    assert letter["error_type"] == "ValueConversionError"
    assert "public.bad.x (xid8): cannot encode the value" in letter["error"]
    assert letter["after"] == {"id": "1", "x": BAD_XID8, "note": "too big"}
    assert letter["before"] is None
    assert bridge.pipeline.metrics.dead_lettered == {"public.bad": 1}
    # the in-process bridge has no dependency probes: `ready` depends on them, not on this
    assert "degraded tables: public.bad (1 dead-lettered)" in detail


def test_a_skip_table_counts_its_bad_change_and_streams_on(
    stack: Any,
    pg_db: str,
    pg_conn: psycopg.Connection[Any],
    slot_name: str,
    publication_name: str,
    topic_prefix: str,
    tmp_path: Path,
) -> None:
    _tables(pg_conn)
    cfg = _config(
        stack, pg_db, slot_name, publication_name, topic_prefix, tmp_path, on_error="skip"
    )
    with running(cfg) as bridge:
        _write(pg_conn, "INSERT INTO bad VALUES (1, %s, 'too big')", (BAD_XID8,))
        last = _write(pg_conn, "INSERT INTO good VALUES (1, 'after')")
        wait_for(
            lambda: _confirmed_at_least(pg_conn, slot_name, last), 60, f"the slot to pass {last}"
        )
        good = consume(cfg, f"{topic_prefix}.public.good", 1)
    assert [key["id"] for key, _ in good] == [1]
    assert bridge.pipeline.metrics.skipped == {"public.bad": 1}


def test_fail_by_default_stops_and_a_restart_does_not_pass_the_bad_change(
    stack: Any,
    pg_db: str,
    pg_conn: psycopg.Connection[Any],
    slot_name: str,
    publication_name: str,
    topic_prefix: str,
    tmp_path: Path,
) -> None:
    _tables(pg_conn)
    cfg = _config(stack, pg_db, slot_name, publication_name, topic_prefix, tmp_path)
    with running(cfg) as bridge:
        first = _write(pg_conn, "INSERT INTO good VALUES (1, 'before')")
        wait_for(
            lambda: _confirmed_at_least(pg_conn, slot_name, first), 60, f"the slot to pass {first}"
        )
        inside_bad = _write(pg_conn, "INSERT INTO bad VALUES (1, %s, 'x')", (BAD_XID8,))
        _write(pg_conn, "INSERT INTO good VALUES (2, 'after')")
        error = bridge.join()
    assert isinstance(error, ValueConversionError), error
    assert "public.bad.x (xid8)" in error.message
    assert not _confirmed_at_least(pg_conn, slot_name, inside_bad)
    with running(cfg) as again:
        error = again.join()
    assert isinstance(error, ValueConversionError), error
    assert not _confirmed_at_least(pg_conn, slot_name, inside_bad)


def test_a_dlq_tables_oversized_row_is_parked_while_the_others_flow(
    stack: Any,
    pg_db: str,
    pg_conn: psycopg.Connection[Any],
    slot_name: str,
    publication_name: str,
    topic_prefix: str,
    small_topic: str,
    tmp_path: Path,
) -> None:
    """The table's on_error governs a record too large for its topic (max.message.bytes
    10000 here) as it does the other troubles, with pipeline.oversized left at stop."""
    pg_conn.execute("CREATE TABLE big (id int PRIMARY KEY, payload text)")
    pg_conn.execute("CREATE TABLE good (id int PRIMARY KEY, v text)")
    cfg = _config(
        stack, pg_db, slot_name, publication_name, topic_prefix, tmp_path,
        on_error_tables={r"public\.big": "dlq"},
    )  # fmt: skip
    assert cfg.pipeline.oversized == "stop"
    with running(cfg) as bridge:
        with pg_conn.transaction():
            pg_conn.execute(BIG_ROW, (1,))
            pg_conn.execute("INSERT INTO good VALUES (1, 'same transaction')")
            row = pg_conn.execute(
                "SELECT pg_current_xact_id()::text, pg_current_wal_insert_lsn()::text"
            ).fetchone()
        assert row is not None
        xid, inside_big = int(row[0]), str(row[1])
        _write(pg_conn, "INSERT INTO big VALUES (2, 'fits')")
        last = _write(pg_conn, "INSERT INTO good VALUES (2, 'after')")
        wait_for(
            lambda: _confirmed_at_least(pg_conn, slot_name, last), 60, f"the slot to pass {last}"
        )
        dead = _read_json(stack.kafka_bootstrap, f"{topic_prefix}.dlq", 1)
        good = consume(cfg, f"{topic_prefix}.public.good", 2)
        big = consume(cfg, small_topic, 1)
        _, detail = bridge.pipeline.metrics.ready()
        assert bridge.error is None and bridge.alive()
    assert _confirmed_at_least(pg_conn, slot_name, inside_big)
    assert [(key["id"], value["after"]["v"]) for key, value in good] == [
        (1, "same transaction"),
        (2, "after"),
    ]
    assert [(key["id"], value["after"]["payload"]) for key, value in big] == [(2, "fits")]
    assert len(dead) == 1
    key, letter = dead[0]
    assert key is not None and letter["key_text"] == "{'id': 1}"  # Kafka's key, kept
    assert letter["table"] == "public.big" and letter["op"] == "c"
    assert letter["topic"] == small_topic and letter["limit"] == 10_000
    assert letter["size"] > 50_000 and "after" not in letter
    assert letter["txId"] == xid and letter["commit_lsn"] >= letter["lsn"] > 0
    assert letter["error_type"] == "RecordTooLargeError"
    assert "over the 10000-byte record limit" in letter["error"]
    assert bridge.pipeline.metrics.dead_lettered == {"public.big": 1}
    assert "degraded tables: public.big (1 dead-lettered)" in detail


def test_a_degraded_table_is_notified_once_per_table_version(
    stack: Any,
    pg_db: str,
    pg_conn: psycopg.Connection[Any],
    slot_name: str,
    publication_name: str,
    topic_prefix: str,
    tmp_path: Path,
) -> None:
    """With snapshot.notification_topic set, a table's first dead-lettered or skipped
    change of a table version is told there (Debezium's sink notification shape), its
    later ones are not; a new table version (ALTER TABLE) is told again."""
    _tables(pg_conn)
    pg_conn.execute("CREATE TABLE also_bad (id int PRIMARY KEY, x xid8)")
    settings = bridge_settings(stack, pg_db, slot_name, publication_name, topic_prefix, tmp_path)
    notifications = f"{topic_prefix}.notifications"
    settings["snapshot"]["notification_topic"] = notifications
    settings["pipeline"]["on_error_tables"] = {r"public\.bad": "dlq", r"public\.also_bad": "skip"}
    cfg = Config(**settings)
    with running(cfg) as bridge:
        _write(pg_conn, "INSERT INTO bad VALUES (1, %s, 'first')", (BAD_XID8,))
        _write(pg_conn, "INSERT INTO bad VALUES (2, %s, 'second')", (BAD_XID8,))
        _write(pg_conn, "INSERT INTO also_bad VALUES (1, %s)", (BAD_XID8,))
        first = _read_json(stack.kafka_bootstrap, notifications, 2)
        pg_conn.execute("ALTER TABLE bad ADD COLUMN extra int")
        _write(pg_conn, "INSERT INTO bad VALUES (3, %s, 'new version', 1)", (BAD_XID8,))
        last = _write(pg_conn, "INSERT INTO good VALUES (1, 'after')")
        wait_for(
            lambda: _confirmed_at_least(pg_conn, slot_name, last), 60, f"the slot to pass {last}"
        )
        told = _read_json(stack.kafka_bootstrap, notifications, 4, timeout=10)
        assert bridge.error is None and bridge.alive()
    assert bridge.pipeline.metrics.dead_lettered == {"public.bad": 3}
    assert [n["additional_data"]["data_collection"] for _, n in first] == [
        "public.bad",
        "public.also_bad",
    ]
    assert len(told) == 3  # bad twice (two table versions), also_bad once
    key, bad = told[0]
    assert json.loads(key) == {"id": bad["id"]}
    assert (bad["aggregate_type"], bad["type"]) == ("Table", "DEGRADED")
    data = bad["additional_data"]
    assert data["policy"] == "dlq" and data["dead_letter_topic"] == f"{topic_prefix}.dlq"
    assert data["error_type"] == "ValueConversionError" and "xid8" in data["error"]
    assert data["lsn"] != "0/0" and data["commit_lsn"] and data["connector_name"] == topic_prefix
    skipped = told[1][1]["additional_data"]
    assert skipped["policy"] == "skip" and "dead_letter_topic" not in skipped
    assert told[2][1]["additional_data"]["data_collection"] == "public.bad"
    assert told[2][1]["id"] != bad["id"]


def test_letters_are_tallied_once_and_those_postgresql_sends_again_are_not_counted_twice() -> None:
    """The start's counts from the dead-letter topic (`tally`): a letter written twice (its
    transaction sent again after a crash) counts once; one of a transaction the slot has
    not confirmed, dead-lettered again by the pipeline, still counts once."""
    def letter(lsn: int, commit: int, table: str = "public.a") -> bytes:  # fmt: skip
        return json.dumps({"table": table, "lsn": lsn, "commit_lsn": commit, "error": "e"}).encode()

    values = [letter(1, 2), letter(1, 2), letter(5, 9), letter(3, 4, "public.b"), b"x", None]
    counts, pending = tally(values, start_lsn=8)
    assert counts == {"public.a": 2, "public.b": 1}
    assert pending == {letter_id("public.a", 5, 9, "e")}
    metrics = Metrics()
    metrics.letters_before(counts, pending)
    metrics.tolerated("public.a", letter_id("public.a", 5, 9, "e"))  # sent again: counted
    metrics.tolerated("public.a", letter_id("public.a", 12, 13, "e"))  # a new one
    assert metrics.dead_lettered == {"public.a": 3, "public.b": 1}


def test_dead_letter_counts_survive_a_restart(
    stack: Any,
    pg_db: str,
    pg_conn: psycopg.Connection[Any],
    slot_name: str,
    publication_name: str,
    topic_prefix: str,
    tmp_path: Path,
) -> None:
    """bridge_dead_lettered_total and the degraded tables start from the dead-letter
    topic: after a restart the dlq table is still degraded, with its count."""
    _tables(pg_conn)
    cfg = _config(
        stack, pg_db, slot_name, publication_name, topic_prefix, tmp_path,
        on_error_tables={r"public\.bad": "dlq"},
    )  # fmt: skip
    with running(cfg) as bridge:
        _write(pg_conn, "INSERT INTO bad VALUES (1, %s, 'x')", (BAD_XID8,))
        last = _write(pg_conn, "INSERT INTO bad VALUES (2, %s, 'y')", (BAD_XID8,))
        wait_for(
            lambda: _confirmed_at_least(pg_conn, slot_name, last), 60, f"the slot to pass {last}"
        )
        assert bridge.pipeline.metrics.dead_lettered == {"public.bad": 2}
    with running(cfg) as again:
        assert again.pipeline.metrics.dead_lettered == {"public.bad": 2}  # before any change
        last = _write(pg_conn, "INSERT INTO bad VALUES (3, %s, 'z')", (BAD_XID8,))
        wait_for(
            lambda: _confirmed_at_least(pg_conn, slot_name, last), 60, f"the slot to pass {last}"
        )
        _, detail = again.pipeline.metrics.ready()
        assert again.error is None
    assert again.pipeline.metrics.dead_lettered == {"public.bad": 3}
    assert "degraded tables: public.bad (3 dead-lettered)" in detail
