"""bench/drain.c, compare.py's client that drops every message: it reads a slot's
stream to the given end and stops there, telling the server how far it got."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import psycopg
import pytest
from bench_module import load_bench_module
from waiting import wait_for

pytestmark = pytest.mark.live

load_bench_module("e2e")  # what compare_workloads imports
workloads: Any = load_bench_module("compare_workloads")


def test_the_drain_reads_every_message_to_the_end_and_confirms_it(
    stack: Any, pg_db: str, pg_conn: psycopg.Connection[Any], tmp_path: Path
) -> None:
    pg_conn.execute("CREATE TABLE t (id int PRIMARY KEY)")
    pg_conn.execute("CREATE PUBLICATION drainpub FOR TABLE t")
    pg_conn.execute("SELECT pg_create_logical_replication_slot('drainslot', 'pgoutput')")
    try:
        for first in range(1, 1000, 100):  # 10 transactions of 100 rows
            pg_conn.execute(
                "INSERT INTO t SELECT generate_series(%s::int, %s::int)", (first, first + 99)
            )
        row = pg_conn.execute("SELECT pg_current_wal_insert_lsn() - '0/0'").fetchone()
        assert row is not None
        end = int(row[0])
        options = workloads.limit_options("drainpub", pg_conn.info.server_version)
        binary = workloads.build_drain(tmp_path)
        result = workloads.run_drain(binary, stack, pg_db, "drainslot", options, end)
        # a Relation, then per transaction a Begin, 100 Inserts and a Commit
        assert result["messages"] == 1 + 10 * 102

        def confirmed() -> bool:  # the walsender reads the last status update after exit
            row = pg_conn.execute(
                "SELECT confirmed_flush_lsn - '0/0' FROM pg_replication_slots "
                "WHERE slot_name = 'drainslot' AND NOT active"
            ).fetchone()
            return row is not None and int(row[0]) >= end

        wait_for(confirmed, 30, "the drain's last status update")
    finally:
        pg_conn.execute("SELECT pg_drop_replication_slot('drainslot')")
