"""The spill directory runs out of space under a big streamed transaction.

A 1 MiB tmpfs is the spill directory, the in-memory buffer is 1 MiB and the
server streams in-progress transactions past 64 kB: the big transaction must
stop the bridge with a typed error naming the spill directory, and the slot must
not move past the last transaction before it. Restarted with room to spill, the
bridge delivers everything.
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from delivery.helpers import BridgeFactory, insert_lsn, wait_slot_active
from delivery.ledger import ledger_reader, stop_bridge
from waiting import wait_for

from .checker import Fault, assert_clean, check
from .harness import acked, drain

SMALL_TXNS = 20
BIG_ROWS = 6000  # about 6 MB of row data


@pytest.fixture
def tiny_tmpfs(tmp_path: Path) -> Iterator[Path]:
    where = tmp_path / "tiny"
    where.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(where)],
        capture_output=True,
        check=False,
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.decode().strip()}")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)


def _small(conn: psycopg.Connection[Any], first: int, count: int) -> None:
    for txn in range(first, first + count):
        conn.execute(
            "INSERT INTO ledger (txn, row, pad) SELECT %s, g, 'x' FROM generate_series(1, 3) g",
            (txn,),
        )


@pytest.mark.fault
def test_spill_dir_out_of_space(
    pg_conn: psycopg.Connection[Any],
    pg_db: str,
    pg_dsn: str,
    slot_name: str,
    topic_prefix: str,
    kafka_bootstrap: str,
    registry_url: str,
    settings: dict[str, Any],
    bridge_process: BridgeFactory,
    tiny_tmpfs: Path,
    tmp_path: Path,
) -> None:
    pg_conn.execute(f"ALTER DATABASE \"{pg_db}\" SET logical_decoding_work_mem = '64kB'")
    settings["source"]["streaming"] = "on"
    settings["pipeline"].update(spill_dir=str(tiny_tmpfs), memory_limit_mb=1)
    reader = ledger_reader(pg_conn, kafka_bootstrap, registry_url, topic_prefix)
    bridge = bridge_process(settings)
    bridge.start()
    wait_slot_active(pg_conn, slot_name, bridge)
    try:
        _small(pg_conn, 1, SMALL_TXNS)
        reader.read_until(lambda recs: len(recs) >= 3 * SMALL_TXNS, 60, "small txns", bridge)
        last_good = insert_lsn(pg_conn)
        wait_for(lambda: acked(pg_dsn, slot_name) > 0, 30, "an acknowledgement")
        t_ms = time.time() * 1000
        pg_conn.execute(
            "INSERT INTO ledger (txn, row, pad) "
            "SELECT %s, g, repeat('y', 1000) FROM generate_series(1, %s) g",
            (SMALL_TXNS + 1, BIG_ROWS),
        )
        code = bridge.wait(60)
        log = bridge.log()
        assert code not in (None, 0), f"bridge still running or exited 0 (code {code}):\n{log}"
        assert "Traceback" not in log, f"an untyped error escaped:\n{log}"
        assert "spill file" in log and str(tiny_tmpfs) in log, log
        assert "No space left" in log, log
        fault = Fault(t_ms, acked(pg_dsn, slot_name), "spill dir full")
        assert fault.acked <= last_good, (
            f"slot acknowledged {fault.acked}, past the last good transaction ({last_good})"
        )
        print(f"\nbridge stopped on the full spill dir:\n{log.strip().splitlines()[-1]}")

        settings["pipeline"]["spill_dir"] = str(tmp_path / "roomy")
        bridge = bridge_process(settings)
        bridge.start()
        _small(pg_conn, SMALL_TXNS + 2, SMALL_TXNS)
        rows = drain(pg_dsn, reader, None, bridge)
        stop_bridge(bridge, reader)
    finally:
        reader.close()
    assert len(rows) == 6 * SMALL_TXNS + BIG_ROWS
    assert_clean(check("spill dir full", rows, reader.records, [fault], exactly_once=False))
    assert "free space" in log, log.strip().splitlines()[-1]  # the real cause, not cleanup
