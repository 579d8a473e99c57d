"""The real local stack: PostgreSQL 15 + pglogical, Kafka 4 (KRaft), Apicurio schema registry.

Everything runs on 127.0.0.1, on ports picked free at start, in a throwaway directory; stop()
leaves no process behind. Tests (tests/conftest.py) import this file by path; `bridge demo`
imports it as module `stack` (dev.sh puts deploy/local on PYTHONPATH):

    stack = Stack(); stack.start()
    stack.dsn("mydb"), stack.kafka_bootstrap, stack.registry_url
    stack.stop_kafka(); stack.start_kafka()      # same port, same data
    stack.stop()

CLI for humans and the demo: `python deploy/local/stack.py up` prints one JSON line of connection
info and runs until SIGINT/SIGTERM; `--spark-workers 2` adds a Spark standalone cluster
(`spark_master` in that line; deploy/local/stack_spark.py).

Secured variant (tests/security): `Stack(tls=True)` gives every server a certificate from a fresh
test CA (`stack.ca`) and refuses plain connections; `kafka_users` adds SASL SCRAM-SHA-512
credentials; `registry_auth` makes the registry authenticate against an OpenID Connect issuer.
`stack.kafka_client_config()` is how a client gets into such a broker.
"""

from __future__ import annotations

import argparse
import atexit
import json
import os
import shutil
import signal
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from types import FrameType, TracebackType
from typing import Any

_HERE = str(Path(__file__).resolve().parent)
if _HERE not in sys.path:  # the stack_* modules live beside this file, outside any package
    sys.path.insert(0, _HERE)

from stack_install import find_java_home  # noqa: E402
from stack_kafka import Kafka  # noqa: E402
from stack_postgres import Postgres  # noqa: E402
from stack_proc import WATCHDOG, StackError  # noqa: E402
from stack_registry import Registry, RegistryAuth  # noqa: E402
from stack_spark import SparkCluster  # noqa: E402
from stack_tls import CertificateAuthority  # noqa: E402

__all__ = ["RegistryAuth", "Stack", "StackError"]


class Stack:
    """Owns the three servers and their work dir; every stop is idempotent."""

    def __init__(
        self,
        workdir: Path | None = None,
        *,
        keep_workdir: bool = False,
        tls: bool = False,
        kafka_users: Mapping[str, str] | None = None,
        registry_auth: RegistryAuth | None = None,
        pg_host: str = "127.0.0.1",
        pg_clients: str = "127.0.0.1/32",
        kafka_host: str = "127.0.0.1",
        spark_workers: int = 0,
    ) -> None:
        """The hosts bind servers elsewhere than loopback (the fault suite's veth links):
        `pg_clients` is the network PostgreSQL admits; the registry shares `kafka_host`.
        `spark_workers` > 0 also starts a Spark standalone cluster of that many workers
        (`stack.spark`, deploy/local/stack_spark.py)."""
        self._own_workdir = workdir is None
        self.workdir = Path(workdir or tempfile.mkdtemp(prefix="pgkb-stack-"))
        self.workdir.chmod(0o755)  # the postgres OS user must reach its data dir
        self.log_dir = self.workdir / "logs"
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self.keep_workdir = keep_workdir or bool(os.environ.get("PGKB_KEEP_STACK"))
        self.ca = CertificateAuthority(self.workdir / "tls") if tls else None
        self.postgres = Postgres(
            self.workdir,
            self.log_dir,
            tls=self.ca.issue("postgres") if self.ca else None,
            host=pg_host,
            clients=pg_clients,
        )
        self.kafka = Kafka(
            self.workdir,
            self.log_dir,
            tls=self.ca.issue("kafka") if self.ca else None,
            scram_users=kafka_users,
            host=kafka_host,
        )
        self.registry = Registry(
            self.workdir,
            self.log_dir,
            tls=self.ca.issue("registry") if self.ca else None,
            auth=registry_auth,
            host=kafka_host,
        )
        self.spark: SparkCluster | None = None
        self._spark_workers = spark_workers
        self.timings: dict[str, float] = {}
        self._stopped = False
        if self._own_workdir and not self.keep_workdir:
            WATCHDOG.send("add-dir", self.workdir)
        atexit.register(self.stop)

    # --- connection info -------------------------------------------------------------------

    @property
    def pg_host(self) -> str:
        return self.postgres.host

    @property
    def pg_port(self) -> int:
        return self.postgres.port

    @property
    def pg_user(self) -> str:
        return self.postgres.user

    @property
    def pg_password(self) -> str:
        return self.postgres.password

    def dsn(self, dbname: str = "postgres", **params: str) -> str:
        """libpq connection string, e.g. dsn("db", replication="database")."""
        return self.postgres.dsn(dbname, **params)

    @property
    def kafka_bootstrap(self) -> str:
        return self.kafka.bootstrap_servers

    def kafka_client_config(self) -> dict[str, Any]:
        """librdkafka settings that get a client into this broker (its admin user under SASL)."""
        return self.kafka.client_config()

    @property
    def registry_url(self) -> str:
        return self.registry.url

    def info(self) -> dict[str, Any]:
        return {
            "workdir": str(self.workdir),
            "logs": str(self.log_dir),
            "pg_host": self.pg_host,
            "pg_port": self.pg_port,
            "pg_user": self.pg_user,
            "pg_password": self.pg_password,
            "pg_dsn": self.dsn(),
            "kafka_bootstrap": self.kafka_bootstrap,
            "registry_url": self.registry_url,
            **(
                {
                    "spark_master": self.spark.master_url,
                    "spark_worker_pids": self.spark.worker_pids(),
                }
                if self.spark is not None
                else {}
            ),
        }

    # --- lifecycle -------------------------------------------------------------------------

    def start(self) -> Stack:
        """Install what is missing, then boot all three servers concurrently and wait."""
        t0 = time.monotonic()
        try:
            self.postgres.install()
            java_home = find_java_home("java", self.log_dir / "install.log")
            self._parallel(
                [
                    lambda: self.kafka.install(java_home),
                    lambda: self.registry.install(java_home),
                ]
            )
            self.timings["install"] = time.monotonic() - t0
            t1 = time.monotonic()
            self._parallel([self.postgres.init, self.kafka.init, self.registry.init])
            for component in (self.postgres, self.kafka, self.registry):
                component.start()
            self._parallel(
                [self.postgres.wait_ready, self.kafka.wait_ready, self.registry.wait_ready]
            )
            if self._spark_workers:
                self.start_spark(self._spark_workers)
            self.timings["boot"] = time.monotonic() - t1
        except BaseException:
            if self._own_workdir and not self.keep_workdir:
                self.keep_workdir = True  # the error names log files in it
                WATCHDOG.send("remove-dir", self.workdir)
            self.stop()
            raise
        self.timings["total"] = time.monotonic() - t0
        return self

    @staticmethod
    def _parallel(tasks: list[Callable[[], object]]) -> None:
        """Run callables on threads; re-raise the first failure after all have finished."""
        errors: list[BaseException] = []

        def run(task: Callable[[], object]) -> None:
            try:
                task()
            except BaseException as exc:
                errors.append(exc)

        threads = [threading.Thread(target=run, args=(task,), daemon=True) for task in tasks]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        if errors:
            raise errors[0]

    def stop(self) -> None:
        if self._stopped:
            return
        self._stopped = True
        self.stop_spark()
        for component in (self.registry, self.kafka, self.postgres):
            component.stop()
        if self._own_workdir and not self.keep_workdir:
            shutil.rmtree(self.workdir, ignore_errors=True)
            WATCHDOG.send("remove-dir", self.workdir)

    def __enter__(self) -> Stack:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    # --- the Spark standalone cluster (tests/spark/test_cluster.py) ---------------------

    def start_spark(self, workers: int = 2, cores: int = 1, memory: str = "1g") -> SparkCluster:
        """A Spark standalone cluster of `workers` workers (`cores` executor cores and
        `memory` for executors each) beside the running servers (`stack.spark`;
        deploy/local/stack_spark.py), started once; stop() stops it."""
        if self.spark is None:
            cluster = SparkCluster(
                self.workdir, self.log_dir, workers=workers, cores=cores, memory=memory
            )
            cluster.install()
            self.spark = cluster
            cluster.start()
        return self.spark

    def stop_spark(self) -> None:
        if self.spark is not None:
            self.spark.stop()
            self.spark = None

    # --- per-component control (fault tests) ----------------------------------------------

    def ensure_running(self) -> None:
        """Start again whatever a fault test left stopped (same ports, same data)."""
        if not self.postgres.running():
            self.start_postgres()
        if not self.kafka.running():
            self.start_kafka()
        if not self.registry.running():
            self.start_registry()

    def stop_postgres(self, *, graceful: bool = True) -> None:
        self.postgres.stop(graceful=graceful)

    def start_postgres(self) -> None:
        self.postgres.start()
        self.postgres.wait_ready()

    def restart_postgres(self, *, graceful: bool = True) -> None:
        self.stop_postgres(graceful=graceful)
        self.start_postgres()

    def stop_kafka(self, *, graceful: bool = True) -> None:
        self.kafka.stop(graceful=graceful)

    def start_kafka(self) -> None:
        self.kafka.start()
        self.kafka.wait_ready()

    def stop_registry(self, *, graceful: bool = True) -> None:
        self.registry.stop(graceful=graceful)

    def start_registry(self) -> None:
        self.registry.start()
        self.registry.wait_ready()

    # --- databases -------------------------------------------------------------------------

    def create_database(self, name: str) -> str:
        """Create an empty database; returns its DSN."""
        return self.postgres.create_database(name)

    def drop_database(self, name: str) -> None:
        """Drop a database and, first, every replication slot that belongs to it."""
        self.postgres.drop_database(name)


def _serve(args: argparse.Namespace) -> int:
    stop_requested = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop_requested.set()

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    stack = Stack(
        Path(args.workdir) if args.workdir else None,
        keep_workdir=args.keep,
        spark_workers=args.spark_workers,
    )
    try:
        stack.start()
        print(json.dumps({**stack.info(), "timings": stack.timings}), flush=True)
        stop_requested.wait()
    finally:
        stack.stop()
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description="Run the local PostgreSQL + Kafka + registry stack."
    )
    sub = parser.add_subparsers(dest="command", required=True)
    up = sub.add_parser("up", help="start the stack, print connection info, run until signalled")
    up.add_argument("--workdir", help="an empty directory to use instead of a fresh temporary one")
    up.add_argument("--keep", action="store_true", help="keep the work dir (logs) after stop")
    up.add_argument(
        "--spark-workers",
        type=int,
        default=0,
        help="also start a Spark standalone cluster of this many workers (1 core, 1g each)",
    )
    args = parser.parse_args(argv)
    try:
        return _serve(args)
    except StackError as exc:
        print(f"stack failed: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
