"""PostgreSQL 15 (Debian build, with pglogical) configured for logical decoding tests.

Runs as the `postgres` OS user when we are root, because the server refuses root. Authentication is
scram-sha-256 everywhere, TCP and socket alike, so security-related tests see what a real
deployment would. Another build can run through the same class (`bin_dir`, `lib_dir`, no
pglogical): the npm-packaged newer majors of stack_pg_npm.py, for protocol features 15 lacks.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import signal
import subprocess
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import psycopg
from psycopg import sql
from stack_install import ensure_apt_packages
from stack_proc import ManagedProcess, StackError, free_port, run_logged, wait_until

if TYPE_CHECKING:
    from stack_tls import TlsFiles

COMPONENT = "postgresql"
PG_BIN = Path("/usr/lib/postgresql/15/bin")
PG_LIB = Path("/usr/lib/postgresql/15/lib")
OS_USER = "postgres" if os.geteuid() == 0 else None  # None: run as ourselves
SUPERUSER = "postgres"
START_TIMEOUT = 60.0

HBA = """\
# Written by deploy/local/stack.py: passwords for every connection, nothing trusted.
local   all          all                   scram-sha-256
local   replication  all                   scram-sha-256
host    all          all     {clients}  scram-sha-256
host    replication  all     {clients}  scram-sha-256
"""

# With a server certificate: TCP only inside TLS, and a plain connection is told so explicitly.
HBA_TLS = """\
# Written by deploy/local/stack.py: TCP only over TLS, passwords for every connection.
local      all          all                   scram-sha-256
local      replication  all                   scram-sha-256
hostssl    all          all     {clients}  scram-sha-256
hostssl    replication  all     {clients}  scram-sha-256
hostnossl  all          all     0.0.0.0/0     reject
hostnossl  replication  all     0.0.0.0/0     reject
"""


def _settings(
    port: int, socket_dir: Path, *, pglogical: bool = True, host: str = "127.0.0.1"
) -> dict[str, str]:
    settings = {
        "listen_addresses": f"'{host}'",
        "port": str(port),
        "unix_socket_directories": f"'{socket_dir}'",
        "password_encryption": "'scram-sha-256'",
        "wal_level": "logical",
        "max_replication_slots": "64",
        "max_wal_senders": "64",
        "max_worker_processes": "32",
        "max_connections": "200",
        "shared_preload_libraries": "'pglogical'",
        "track_commit_timestamp": "on",
        "max_prepared_transactions": "64",
        "logical_decoding_work_mem": "'64kB'",
        "wal_sender_timeout": "'60s'",
        "fsync": "off",
        "synchronous_commit": "off",
        "full_page_writes": "off",
        "log_line_prefix": "'%m [%p] %q%u@%d '",
    }
    if not pglogical:
        del settings["shared_preload_libraries"]
    return settings


class Postgres:
    """One throwaway cluster; stop/start keep the data dir and port (for restart tests).

    The keyword arguments select another build (its lib dir goes on LD_LIBRARY_PATH) and name the
    cluster's subdirectory and log, so a second cluster can share the work dir. With `tls` the
    server serves that certificate, refuses TCP without TLS, and `dsn()` verifies it
    (`sslmode=verify-full` against `tls.ca`). `host` is the one address it listens on and
    `clients` the network it lets in over TCP (fault tests: the end of a veth link).
    `initdb_options` go to initdb after the stack's own.
    """

    def __init__(
        self,
        workdir: Path,
        log_dir: Path,
        *,
        name: str = "postgres",
        bin_dir: Path = PG_BIN,
        lib_dir: Path | None = None,
        pglogical: bool = True,
        tls: TlsFiles | None = None,
        host: str = "127.0.0.1",
        clients: str = "127.0.0.1/32",
        initdb_options: tuple[str, ...] = (),
    ) -> None:
        self.root = workdir / name
        self.initdb_options = initdb_options
        self.data_dir = self.root / "data"
        self.socket_dir = self.root
        self.log_path = log_dir / f"{name}.log"
        self.bin_dir = bin_dir
        self.lib_dir = lib_dir
        self.pglogical = pglogical
        self.tls = tls
        self.host = host
        self.clients = clients
        self.port = free_port(host)
        self.user = SUPERUSER
        self.password = secrets.token_urlsafe(18)
        self._process: ManagedProcess | None = None

    def dsn(self, dbname: str = "postgres", **params: str) -> str:
        if self.tls is not None:
            params = {"sslmode": "verify-full", "sslrootcert": str(self.tls.ca), **params}
        return psycopg.conninfo.make_conninfo(
            host=self.host,
            port=self.port,
            user=self.user,
            password=self.password,
            dbname=dbname,
            **params,
        )

    def install(self) -> None:
        ensure_apt_packages(COMPONENT, ["postgresql-15", "postgresql-15-pglogical"], self.log_path)
        if not (PG_LIB / "pglogical.so").is_file():
            raise StackError(COMPONENT, f"pglogical.so missing from {PG_LIB}", self.log_path)

    def init(self) -> None:
        """initdb as the postgres OS user, then write our server and client-auth config."""
        self.root.mkdir(parents=True)
        pwfile = self.root / "pwfile"
        pwfile.write_text(self.password + "\n")
        pwfile.chmod(0o600)
        if OS_USER is not None:
            shutil.chown(self.root, OS_USER, OS_USER)
            shutil.chown(pwfile, OS_USER, OS_USER)
        run_logged(
            COMPONENT,
            [
                str(self.bin_dir / "initdb"),
                "-D",
                str(self.data_dir),
                "-U",
                SUPERUSER,
                f"--pwfile={pwfile}",
                "--auth=scram-sha-256",
                "-E",
                "UTF8",
                "--no-locale",
                "--no-sync",
                *self.initdb_options,
            ],
            self.log_path,
            env=self._env(),
            cwd=self.root,
            user=OS_USER,
        )
        pwfile.unlink()
        settings = _settings(self.port, self.socket_dir, pglogical=self.pglogical, host=self.host)
        if self.tls is not None:
            settings.update(self._install_certificate(self.tls))
        conf = "".join(f"{k} = {v}\n" for k, v in settings.items())
        with (self.data_dir / "postgresql.conf").open("a") as handle:
            handle.write("\n# deploy/local/stack.py\n" + conf)
        hba = HBA if self.tls is None else HBA_TLS
        (self.data_dir / "pg_hba.conf").write_text(hba.format(clients=self.clients))

    def _install_certificate(self, tls: TlsFiles) -> dict[str, str]:
        """Copy the pair where the server's OS user owns it: it refuses a key others can read."""
        cert, key = self.data_dir / "server.crt", self.data_dir / "server.key"
        shutil.copyfile(tls.cert, cert)
        shutil.copyfile(tls.key, key)
        key.chmod(0o600)
        if OS_USER is not None:
            shutil.chown(cert, OS_USER, OS_USER)
            shutil.chown(key, OS_USER, OS_USER)
        return {"ssl": "on", "ssl_cert_file": f"'{cert}'", "ssl_key_file": f"'{key}'"}

    def _env(self) -> dict[str, str]:
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LC_ALL": "C", "HOME": "/tmp"}
        if self.lib_dir is not None:
            env["LD_LIBRARY_PATH"] = str(self.lib_dir)
        return env

    def start(self) -> None:
        if self._process is not None and self._process.alive():
            return
        self._process = ManagedProcess(
            COMPONENT,
            [str(self.bin_dir / "postgres"), "-D", str(self.data_dir)],
            self.log_path,
            env=self._env(),
            cwd=self.root,
            user=OS_USER,
            stop_signal=signal.SIGINT,  # "fast" shutdown: SIGTERM would wait for clients
        )
        self._process.start()

    def wait_ready(self, timeout: float = START_TIMEOUT) -> None:
        assert self._process is not None
        wait_until(self._process, self._ready, timeout=timeout, what="accepting connections")

    def _ready(self) -> bool:
        isready = self.bin_dir / "pg_isready"  # not every build ships it: then connect only
        if isready.is_file():
            probe = subprocess.run(
                [str(isready), "-q", "-h", self.host, "-p", str(self.port)], check=False
            )
            if probe.returncode != 0:
                return False
        with psycopg.connect(self.dsn(), connect_timeout=5) as conn:
            conn.execute("SELECT 1")
        return True

    def stop(self, *, graceful: bool = True) -> None:
        if self._process is not None:
            self._process.stop(graceful=graceful)

    def running(self) -> bool:
        return self._process is not None and self._process.alive()

    def create_database(self, name: str) -> str:
        with psycopg.connect(self.dsn(), autocommit=True) as conn:
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
        return self.dsn(name)

    def drop_database(self, name: str, timeout: float = 60.0) -> None:
        """Drop the database after its replication slots (terminating their walsenders)."""
        deadline = time.monotonic() + timeout
        with psycopg.connect(self.dsn(), autocommit=True) as conn:
            self._drop_slots(conn, name, deadline)
            self._drop_database(conn, name, deadline)

    @staticmethod
    def _drop_slots(conn: psycopg.Connection[Any], name: str, deadline: float) -> None:
        while True:
            slots = conn.execute(
                "SELECT slot_name, active_pid FROM pg_replication_slots WHERE database = %s",
                (name,),
            ).fetchall()
            if not slots:
                return
            for slot_name, active_pid in slots:
                if active_pid is not None:
                    conn.execute("SELECT pg_terminate_backend(%s)", (active_pid,))
                    continue
                # In use: its walsender is still exiting. Undefined: dropped concurrently.
                with contextlib.suppress(
                    psycopg.errors.ObjectInUse, psycopg.errors.UndefinedObject
                ):
                    conn.execute("SELECT pg_drop_replication_slot(%s)", (slot_name,))
            if time.monotonic() > deadline:
                raise StackError(COMPONENT, f"could not drop the slots of {name}: {slots}")
            time.sleep(0.1)

    @staticmethod
    def _drop_database(conn: psycopg.Connection[Any], name: str, deadline: float) -> None:
        """DROP DATABASE, working around pglogical 2.4.2 on PostgreSQL 15.

        Its supervisor never absorbs the ProcSignalBarrier that DROP DATABASE waits for, so the
        drop would hang forever (pglogical issues 399/418). The supervisor only runs pglogical
        subscriptions, which these tests do not use; terminate it (the postmaster restarts it)
        and bound the drop with a statement timeout in case a fresh one raced in.
        """
        statement = sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
        while True:
            conn.execute(
                "SELECT pg_terminate_backend(pid, 5000) FROM pg_stat_activity"
                " WHERE backend_type = 'pglogical supervisor'"
            )
            conn.execute("SET statement_timeout = '5s'")
            try:
                conn.execute(statement)
                return
            except psycopg.errors.QueryCanceled:
                if time.monotonic() > deadline:
                    raise StackError(
                        COMPONENT, f"DROP DATABASE {name} kept timing out", None
                    ) from None
            finally:
                conn.execute("RESET statement_timeout")
