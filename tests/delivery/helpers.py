"""Running the bridge as a process and watching its replication slot.

The slot is the ground truth of what the bridge acknowledged: `confirmed_flush_lsn`
in `pg_replication_slots` is exactly what PostgreSQL will skip after a restart.
`SlotMonitor` samples it with wall-clock times so a test can check, afterwards,
that nothing was acknowledged before Kafka had appended it (see `kafka_io`).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NamedTuple, Protocol

import psycopg
import yaml
from waiting import wait_for

from bridge.lsn import LSN

ROOT = Path(__file__).resolve().parents[2]


def bridge_settings(
    stack: Any,
    dbname: str,
    slot: str,
    publication: str,
    prefix: str,
    spill_dir: Path,
) -> dict[str, Any]:
    """A YAML-able configuration for the local stack (1 s status interval, no HTTP)."""
    return {
        "source": {
            "host": stack.pg_host,
            "port": stack.pg_port,
            "dbname": dbname,
            "user": stack.pg_user,
            "password": stack.pg_password,
            "slot_name": slot,
            "publication_name": publication,
            "status_interval_s": 1.0,
        },
        "kafka": {"bootstrap_servers": stack.kafka_bootstrap, "topic_prefix": prefix},
        "registry": {"url": stack.registry_url},
        "pipeline": {"spill_dir": str(spill_dir)},
        "http": {"port": 0},
        "snapshot": {"mode": "no_data"},  # streaming guarantees only: tables start empty
        "log": {"level": "INFO"},
    }


class BridgeProcess:
    """`python -m bridge run --config FILE` as a child process, its output in a log file.

    `prefix` goes before the command line and must exec it in place (`ip netns exec NS`,
    fault tests), so that signals still reach the bridge itself.
    """

    def __init__(
        self,
        settings: dict[str, Any],
        workdir: Path,
        name: str = "bridge",
        prefix: Sequence[str] = (),
    ) -> None:
        self.prefix = list(prefix)
        self.config_path = workdir / f"{name}.yaml"
        self.config_path.write_text(yaml.safe_dump(settings))
        self.log_path = workdir / f"{name}.log"
        self._proc: subprocess.Popen[bytes] | None = None
        self.runs = 0

    def start(self) -> None:
        assert not self.alive(), "already running"
        env = {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONUNBUFFERED": "1"}
        with self.log_path.open("ab") as log:
            log.write(f"--- run {self.runs} ---\n".encode())
            log.flush()
            self._proc = subprocess.Popen(
                [*self.prefix, sys.executable, "-m", "bridge", "run", "--config", self.config_path],
                cwd=ROOT,
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        self.runs += 1

    @property
    def pid(self) -> int:
        assert self._proc is not None
        return self._proc.pid

    def alive(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def check(self) -> None:
        """Fail with the bridge's log if the process is not running."""
        if not self.alive():
            code = None if self._proc is None else self._proc.returncode
            raise AssertionError(f"bridge is not running (exit code {code}):\n{self.log()}")

    def kill9(self) -> None:
        """SIGKILL and reap: the process gets no chance to flush or report anything."""
        assert self._proc is not None and self.alive()
        self._proc.send_signal(signal.SIGKILL)
        self._proc.wait(10)

    def terminate(self) -> None:
        assert self._proc is not None
        self._proc.send_signal(signal.SIGTERM)

    def freeze(self) -> None:
        """SIGSTOP: every thread stops where it is, sockets stay open (a long GC pause)."""
        assert self._proc is not None and self.alive()
        self._proc.send_signal(signal.SIGSTOP)

    def thaw(self) -> None:
        """SIGCONT after `freeze`: the process resumes where it stopped."""
        assert self._proc is not None
        self._proc.send_signal(signal.SIGCONT)

    def wait(self, timeout: float) -> int | None:
        """Exit code, or None if still running after `timeout` seconds."""
        assert self._proc is not None
        try:
            return self._proc.wait(timeout)
        except subprocess.TimeoutExpired:
            return None

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def cleanup(self) -> None:
        if self.alive():
            assert self._proc is not None
            self._proc.kill()
            self._proc.wait(10)


class BridgeFactory(Protocol):
    """The `bridge_process` fixture: a BridgeProcess (not started) that the test cleans up."""

    def __call__(self, cfg: dict[str, Any], prefix: Sequence[str] = ()) -> BridgeProcess: ...


class SlotState(NamedTuple):
    active: bool
    active_pid: int | None
    confirmed_flush: LSN


def slot_state(conn: psycopg.Connection[Any], slot: str) -> SlotState | None:
    row = conn.execute(
        "SELECT active, active_pid, confirmed_flush_lsn::text FROM pg_replication_slots "
        "WHERE slot_name = %s",
        (slot,),
    ).fetchone()
    if row is None:
        return None
    return SlotState(bool(row[0]), row[1], LSN.parse(row[2] or "0/0"))


class Checkable(Protocol):
    def check(self) -> None: ...


def wait_slot_active(
    conn: psycopg.Connection[Any], slot: str, bridge: Checkable, timeout: float = 60.0
) -> SlotState:
    """Wait until `bridge` streams from `slot`, failing at once if the bridge dies.

    A slot is active from the moment its creation starts, and creating one waits for
    the transactions running then to end (on a standby: for the primary to log them,
    which may take 15 s): what commits meanwhile precedes the slot's consistent point
    and is never decoded. So "streams" is the slot's walsender past START_REPLICATION
    (catchup or streaming in pg_stat_replication), not merely the slot being active."""

    def probe() -> SlotState | None:
        bridge.check()
        state = slot_state(conn, slot)
        if state is None or not state.active:
            return None
        row = conn.execute(
            "SELECT state FROM pg_stat_replication WHERE pid = %s", (state.active_pid,)
        ).fetchone()
        return state if row is not None and row[0] in ("catchup", "streaming") else None

    return wait_for(probe, timeout, f"slot {slot} to be streamed")


def wait_slot_released(
    conn: psycopg.Connection[Any], slot: str, timeout: float = 60.0
) -> SlotState:
    """Once the walsender is gone the confirmed position can no longer move."""

    def probe() -> SlotState | None:
        state = slot_state(conn, slot)
        assert state is not None, f"slot {slot} vanished"
        return None if state.active else state

    return wait_for(probe, timeout, f"slot {slot} to be released")


def insert_lsn(conn: psycopg.Connection[Any]) -> LSN:
    """WAL insert position: at or past the end of every record already committed.

    (The stack runs with synchronous_commit off, so `pg_current_wal_lsn()` may lag.)
    """
    row = conn.execute("SELECT pg_current_wal_insert_lsn()::text").fetchone()
    assert row is not None
    return LSN.parse(row[0])


def unacknowledged_transactions(
    conn: psycopg.Connection[Any], slot: str, publication: str
) -> list[LSN]:
    """Commit LSNs (as in `source.lsn`) of the transactions PostgreSQL would send again
    from the released slot: a peek through pgoutput, which does not move the slot."""
    rows = conn.execute(
        "SELECT data FROM pg_logical_slot_peek_binary_changes("
        "%s, NULL, NULL, 'proto_version', '1', 'publication_names', %s)",
        (slot, publication),
    ).fetchall()
    # Commit message: 'C', flags (1 byte), commit LSN (8), end LSN (8), timestamp (8).
    return [
        LSN(int.from_bytes(bytes(data)[2:10], "big")) for (data,) in rows if bytes(data)[:1] == b"C"
    ]


class Sample(NamedTuple):
    t_ms: float  # wall clock after the query returned
    state: SlotState


class SlotMonitor:
    """Samples the slot every `every` seconds on its own connection, on a thread
    (reconnecting while PostgreSQL restarts)."""

    def __init__(self, dsn: str, slot: str, every: float = 0.02) -> None:
        self.samples: list[Sample] = []
        self.errors: list[BaseException] = []
        self._dsn, self._slot, self._every = dsn, slot, every
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="slot-monitor", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                with psycopg.connect(self._dsn, autocommit=True) as conn:
                    while not self._stop.wait(self._every):
                        state = slot_state(conn, self._slot)
                        if state is not None:
                            self.samples.append(Sample(time.time() * 1000, state))
            except psycopg.OperationalError:
                self._stop.wait(0.2)  # PostgreSQL restarting (fault tests): sample on after
            except BaseException as exc:
                self.errors.append(exc)
                return

    def flushed(self) -> LSN:
        """The latest confirmed_flush_lsn seen (0 before the first sample)."""
        return self.samples[-1].state.confirmed_flush if self.samples else LSN(0)

    def since(self, t_ms: float) -> list[Sample]:
        return [s for s in self.samples if s.t_ms >= t_ms]

    def stop(self) -> list[Sample]:
        self._stop.set()
        self._thread.join(10)
        assert not self.errors, f"slot monitor failed: {self.errors[0]!r}"
        return self.samples
