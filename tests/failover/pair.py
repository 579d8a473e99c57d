"""A PostgreSQL 18 primary and a physical streaming standby that synchronises failover slots.

Both run the npm build of deploy/local/stack_pg_npm.py. That package ships only initdb,
pg_ctl and postgres (no pg_basebackup), and Debian here has no client of a major this new,
so the standby is made with PostgreSQL's low-level base backup instead: pg_backup_start(),
a file copy of the data directory (same machine), pg_backup_stop() whose label file goes
into the copy, then standby.signal. The standby streams WAL through a physical slot that
existed before the backup, so nothing it needs can be removed meanwhile.

Standby settings are the ones failover slots need: sync_replication_slots, hot_standby_feedback,
primary_slot_name and a dbname in primary_conninfo; the primary lists that physical slot in
synchronized_standby_slots.
"""

from __future__ import annotations

import importlib
import os
import shutil
import signal
import tempfile
from pathlib import Path
from typing import Any

import psycopg
from delivery.helpers import bridge_settings
from stack_module import load_stack_module
from waiting import wait_for

PHYSICAL_SLOT = "standby1"


def _local(module: str) -> Any:
    """A deploy/local module (loading the stack module puts that directory on sys.path)."""
    load_stack_module()
    return importlib.import_module(module)


def _append_conf(data_dir: Path, settings: dict[str, str]) -> None:
    with (data_dir / "postgresql.conf").open("a") as handle:
        handle.write("\n# tests/failover/pair.py\n")
        handle.writelines(f"{k} = {v}\n" for k, v in settings.items())


def _copy_live(source: Path, dest: Path) -> None:
    """Copy a running server's data directory between pg_backup_start and pg_backup_stop.

    A file the server removes meanwhile (a dropped table's, a recycled segment) is skipped,
    as pg_basebackup skips it: replay from the backup's start recreates or drops it. Any
    other failure is raised."""
    try:
        shutil.copytree(
            source, dest, ignore=shutil.ignore_patterns("postmaster.pid", "postmaster.opts")
        )
    except shutil.Error as exc:
        others = [e for e in exc.args[0] if "No such file or directory" not in str(e[2])]
        if others:
            raise shutil.Error(others) from None


def _chown_tree(root: Path, user: str) -> None:
    for path in [root, *root.rglob("*")]:
        shutil.chown(path, user, user)


class Pair:
    """`primary` and `standby` are stack Postgres objects (dsn(), port, data_dir, ...).

    Both listen on `host` and admit `clients` (the soak's veth link; loopback by default).
    After a promotion `replace_standby` makes the promoted server the primary and a fresh
    copy of it, on the old primary's address, the standby: promotions can recur."""

    def __init__(
        self,
        primary_settings: dict[str, str] | None = None,
        *,
        host: str = "127.0.0.1",
        clients: str = "127.0.0.1/32",
    ) -> None:
        self._npm = _local("stack_pg_npm")
        self.workdir = Path(tempfile.mkdtemp(prefix="pgkb-failover-"))
        self.workdir.chmod(0o755)
        self._watchdog = _local("stack_proc").WATCHDOG
        self._watchdog.send("add-dir", self.workdir)  # removed even if the session is killed
        self._logs = self.workdir / "logs"
        self._logs.mkdir()
        self._where = {"host": host, "clients": clients}
        self._copies = 0
        self.primary = self._server("a")
        self.standby = self._server("b")
        self.standby.log_path = self._logs / "standby.log"
        self.standby.password = self.primary.password  # a copy of the same cluster
        self._primary_settings = primary_settings or {}

    def _server(self, name: str) -> Any:
        (self.workdir / name).mkdir()
        return self._npm.NpmPostgres(self.workdir / name, self._logs, **self._where)

    # ---- set-up -------------------------------------------------------------------------
    def start_primary(self) -> None:
        p = self.primary
        p.install()
        p.init()
        _append_conf(
            p.data_dir,
            {"synchronized_standby_slots": f"'{PHYSICAL_SLOT}'", **self._primary_settings},
        )
        p.start()
        p.wait_ready()

    def start_standby(self) -> None:
        p, s = self.primary, self.standby
        s.install()
        s.root.mkdir(parents=True)
        with psycopg.connect(p.dsn(), autocommit=True) as conn:
            conn.execute("SELECT pg_create_physical_replication_slot(%s, true)", (PHYSICAL_SLOT,))
            conn.execute("SELECT pg_backup_start('failover-test', true)")
            _copy_live(p.data_dir, s.data_dir)
            row = conn.execute("SELECT labelfile FROM pg_backup_stop(false)").fetchone()
        assert row is not None
        for sub in ("pg_wal", "pg_replslot"):  # WAL comes through the slot; slots are not copied
            shutil.rmtree(s.data_dir / sub)
            (s.data_dir / sub).mkdir()
        (s.data_dir / "pg_wal" / "archive_status").mkdir()
        (s.data_dir / "backup_label").write_text(row[0])
        (s.data_dir / "standby.signal").write_text("")
        conninfo = psycopg.conninfo.make_conninfo(
            host=p.host,
            port=p.port,
            user=p.user,
            password=p.password,
            dbname="postgres",
            application_name=PHYSICAL_SLOT,
        )
        _append_conf(
            s.data_dir,
            {
                "port": str(s.port),
                "unix_socket_directories": f"'{s.socket_dir}'",
                "primary_conninfo": "'" + conninfo.replace("'", "''") + "'",
                "primary_slot_name": f"'{PHYSICAL_SLOT}'",
                "hot_standby_feedback": "on",
                "sync_replication_slots": "on",
                "synchronized_standby_slots": "''",  # after promotion it has no standby
            },
        )
        s.data_dir.chmod(0o700)
        os_user = _local("stack_postgres").OS_USER
        if os_user is not None:
            _chown_tree(s.root, os_user)
        s.start()
        s.wait_ready()
        wait_for(self._streaming, 60, "the standby to stream from the primary", every=0.2)

    def _streaming(self) -> bool:
        with psycopg.connect(self.primary.dsn(), autocommit=True) as conn:
            row = conn.execute(
                "SELECT count(*) FROM pg_stat_replication WHERE application_name = %s "
                "AND state = 'streaming'",
                (PHYSICAL_SLOT,),
            ).fetchone()
        return bool(row and row[0])

    # ---- the failover -------------------------------------------------------------------
    def stop_primary(self, mode: str) -> None:
        """`fast` (a switchover: WAL reaches the standby first) or `immediate` (a crash)."""
        p = self.primary
        if mode == "fast":
            p.stop(graceful=True)
            return
        pid = int((p.data_dir / "postmaster.pid").read_text().split()[0])
        os.kill(pid, signal.SIGQUIT)  # pg_ctl stop -m immediate
        wait_for(lambda: not p.running(), 30, "the primary to exit")

    def promote(self) -> None:
        with psycopg.connect(self.standby.dsn(), autocommit=True) as conn:
            conn.execute("SELECT pg_promote(true, 60)")

    def replace_standby(self) -> None:
        """After `promote`: the promoted server is the primary; the old one (stopped) is
        discarded for a new standby copied from the new primary, listening on the old one's
        port, so a client's host list stays valid. The new primary waits for it before
        sending logical changes (synchronized_standby_slots), as the first one did."""
        old = self.primary
        old.stop(graceful=False)
        self.primary = self.standby
        self._copies += 1
        self.standby = self._server(f"copy{self._copies}")
        self.standby.port = old.port
        self.standby.log_path = self._logs / f"standby{self._copies}.log"
        self.standby.password = self.primary.password
        shutil.rmtree(old.root, ignore_errors=True)
        with psycopg.connect(self.primary.dsn(), autocommit=True) as conn:
            conn.execute(
                "SELECT pg_drop_replication_slot(%s) FROM pg_replication_slots "
                "WHERE slot_name = %s",
                (PHYSICAL_SLOT, PHYSICAL_SLOT),
            )
        self.start_standby()
        with psycopg.connect(self.primary.dsn(), autocommit=True) as conn:
            conn.execute(f"ALTER SYSTEM SET synchronized_standby_slots = '{PHYSICAL_SLOT}'")
            conn.execute("SELECT pg_reload_conf()")

    def multi_dsn(self, dbname: str, attrs: str = "read-write") -> str:
        p, s = self.primary, self.standby
        return psycopg.conninfo.make_conninfo(
            host=f"{p.host},{s.host}",
            port=f"{p.port},{s.port}",
            user=p.user,
            password=p.password,
            dbname=dbname,
            target_session_attrs=attrs,
            connect_timeout="5",
        )

    def source_host(self) -> str:
        p, s = self.primary, self.standby
        return f"{p.host}:{p.port},{s.host}:{s.port}"

    def synced_slot(self, slot: str) -> tuple[bool, str] | None:
        """(synced and persistent, confirmed_flush_lsn) of the standby's copy."""
        with psycopg.connect(self.standby.dsn(), autocommit=True) as conn:
            row = conn.execute(
                "SELECT synced AND NOT temporary, confirmed_flush_lsn::text "
                "FROM pg_replication_slots WHERE slot_name = %s",
                (slot,),
            ).fetchone()
        return None if row is None else (bool(row[0]), str(row[1]))

    def stop(self) -> None:
        for server in (self.standby, self.primary):
            server.stop(graceful=False)
        shutil.rmtree(self.workdir, ignore_errors=True)
        self._watchdog.send("remove-dir", self.workdir)


def pair_settings(
    stack: Any, pair: Pair, dbname: str, slot: str, prefix: str, spill: Path, **source: Any
) -> dict[str, Any]:
    """The delivery suite's bridge settings, its source every server of the pair."""
    settings = bridge_settings(stack, dbname, slot, f"pub_{slot}", prefix, spill)
    settings["source"].update(
        {
            "host": pair.source_host(),
            "user": pair.primary.user,
            "password": pair.primary.password,
            **source,
        }
    )
    return settings
