"""Logs a person can read, counted on the real command line (`python -m bridge ...`).

`bridge check` against a broker and a registry that do not answer: its report and a
handful of distinct lines, where librdkafka alone used to print ~190 identical ones, and
nothing after the last result. `bridge run` starting on many tables: no line per registry
request (the HTTP client logs each at INFO).
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import psycopg
import pytest
import waiting
import yaml
from psycopg import sql

pytestmark = pytest.mark.live

ROOT = Path(__file__).resolve().parents[1]
TABLES = 40


def closed_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def config(stack: Any, dbname: str, names: str, **sections: dict[str, Any]) -> dict[str, Any]:
    base: dict[str, Any] = {
        "source": {
            "host": stack.pg_host,
            "port": stack.pg_port,
            "dbname": dbname,
            "user": stack.pg_user,
            "password": stack.pg_password,
            "slot_name": names,
            "publication_name": names,
            "status_interval_s": 1.0,
        },
        "kafka": {"bootstrap_servers": stack.kafka_bootstrap, "topic_prefix": names},
        "registry": {"url": stack.registry_url},
        "http": {"port": 0},
    }
    for name, values in sections.items():
        base[name] = {**base.get(name, {}), **values}
    return base


def bridge(tmp_path: Path, command: str, cfg: dict[str, Any]) -> subprocess.Popen[bytes]:
    """The command with stdout and stderr in one file, in the order they were written."""
    path = tmp_path / f"{command}.yaml"
    path.write_text(yaml.safe_dump(cfg))
    env = {k: v for k, v in os.environ.items() if not k.startswith("BRIDGE_")}
    with (tmp_path / f"{command}.out").open("wb") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "bridge", command, "--config", str(path)],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
            cwd=ROOT,
        )


def output(tmp_path: Path, command: str) -> list[str]:
    return (tmp_path / f"{command}.out").read_text(errors="replace").splitlines()


def test_check_of_unreachable_kafka_and_registry_prints_a_handful_of_distinct_lines(
    stack: Any, pg_db: str, slot_name: str, tmp_path: Path
) -> None:
    cfg = config(
        stack,
        pg_db,
        slot_name,
        kafka={"bootstrap_servers": f"127.0.0.1:{closed_port()}", "request_timeout_s": 5.0},
        registry={"url": f"http://127.0.0.1:{closed_port()}"},
    )
    proc = bridge(tmp_path, "check", cfg)
    assert proc.wait(timeout=120) == 1
    lines = output(tmp_path, "check")
    text = "\n".join(lines)
    results = [line for line in lines if line.startswith(("ok ", "FAIL "))]
    assert [r.split(":")[0] for r in results if r.startswith("FAIL")] == [
        "FAIL Kafka reachable",
        "FAIL schema registry reachable",
    ], text
    assert lines[-1] == results[-1], f"something printed after the last result:\n{text}"
    others = [line.split(" ", 2)[-1] for line in lines if line not in results]
    assert len(others) <= 4, f"more than a handful of log lines:\n{text}"
    repeated = [line for line, n in Counter(others).items() if n > 1]
    assert not repeated, f"the same line more than once:\n{text}"
    assert any("Connection refused (" in line and "times)" in line for line in others), (
        f"the refused connection is not one line with its count:\n{text}"
    )


def test_run_starting_on_many_tables_logs_no_request_per_table(
    stack: Any, pg_db: str, pg_conn: psycopg.Connection[Any], slot_name: str, tmp_path: Path
) -> None:
    for i in range(TABLES):
        pg_conn.execute(
            sql.SQL("CREATE TABLE {} (id int PRIMARY KEY, v text)").format(sql.Identifier(f"t{i}"))
        )
    cfg = config(stack, pg_db, slot_name, snapshot={"mode": "no_data"}, log={"level": "info"})
    proc = bridge(tmp_path, "run", cfg)
    try:

        def streaming() -> bool:
            lines = output(tmp_path, "run")
            assert proc.poll() is None, "\n".join(lines)
            return any("streaming slot" in line for line in lines)

        waiting.wait_for(streaming, 120, "the bridge to start streaming", every=0.2)
        with pg_conn.transaction():
            for i in range(TABLES):
                pg_conn.execute(
                    sql.SQL("INSERT INTO {} VALUES (1, 'x')").format(sql.Identifier(f"t{i}"))
                )
        row = pg_conn.execute("SELECT pg_current_wal_insert_lsn()").fetchone()
        assert row is not None
        target = row[0]

        def delivered() -> bool:
            assert proc.poll() is None, "\n".join(output(tmp_path, "run"))
            row = pg_conn.execute(
                "SELECT confirmed_flush_lsn >= %s::pg_lsn FROM pg_replication_slots "
                "WHERE slot_name = %s",
                (target, slot_name),
            ).fetchone()
            return bool(row and row[0])

        waiting.wait_for(delivered, 120, f"{TABLES} tables' changes delivered", every=0.2)
    finally:
        proc.terminate()
        proc.wait(timeout=60)
    lines = output(tmp_path, "run")
    text = "\n".join(lines)
    assert not [line for line in lines if "HTTP Request" in line], text
    assert len(lines) < TABLES, f"{len(lines)} lines for {TABLES} tables:\n{text}"
