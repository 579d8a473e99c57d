"""A case replayed through the bridge, compared with PostgreSQL at each of its checks.

The case's statements run on the publisher in their order; `start` starts one bridge per
declared publication and mode (`MODES`, in-process, tests/running.py; each with its own slot
and topics, so one run of the SQL feeds every mode) with an initial snapshot, so what the
set-up wrote is read as a snapshot and the rest is streamed. At each `check` every bridge
is compared with PostgreSQL (`rebuild.compare`): each captured table's topic, rebuilt as a
key-based consumer must, against the table's rows, value by value.

A problem is collected, not raised at once: the case goes on to its end, so one run lists
every mismatch (each names the case file's line), and the test fails listing them all.
"""

from __future__ import annotations

import contextlib
import json
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import psycopg
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic
from delivery.helpers import bridge_settings
from psycopg import sql
from running import PipelineThread, start
from servers import Servers
from waiting import wait_for

from bridge.config import Config
from bridge.source.libpq import CommandError
from conformance.cases import BridgeSpec, Case, Check, Restart, Resync, Sql, Start, Stop
from conformance.rebuild import Checker

# The settings every case runs under, side by side (a bridge each): the defaults, and binary
# tuples with in-progress transactions streamed (a case may turn streaming on in both).
MODES: Final = {
    "default": {},
    "binary-streaming": {"binary": True, "streaming": "on"},
}
TIMEOUT: Final = 120.0
# How often one bridge of a case may be restarted after PostgreSQL chose its walsender as
# a deadlock victim (`Running.checked`), and a statement retried after it chose the
# statement's session: enough for the catalog rewrites of test_decoding/rewrite.
DEADLOCK_RETRIES: Final = 3
DEADLOCK: Final = "40P01"  # PostgreSQL's sqlstate deadlock_detected


@dataclass
class Running:
    spec: BridgeSpec
    mode: str
    cfg: Config
    thread: PipelineThread | None = None
    checker: Checker | None = None
    restarts: int = 0  # after PostgreSQL ended the walsender as a deadlock victim

    def checked(self) -> PipelineThread:
        """The bridge's thread, alive: raises what the bridge died of, except when
        PostgreSQL ended its walsender as a deadlock victim (a REINDEX of pg_class's
        indexes while the walsender reads the catalog, test_decoding/rewrite: a deadlock
        of two server processes). The bridge then exits as it does on any lost
        replication connection, and is started again, as a pod's restart policy starts
        it (and PostgreSQL's launcher an apply worker that exited on an error); it
        resumes from its slot, and the case's comparisons say whether anything was lost."""
        thread = self.thread
        assert thread is not None
        if (
            thread.error is not None
            and deadlock_victim(thread.error)
            and self.restarts < DEADLOCK_RETRIES
        ):
            thread.join()
            self.restarts += 1
            self.thread = thread = start(self.cfg)
        thread.check()
        return thread

    def delivered(self, point: int) -> bool:
        """The pipeline has seen the WAL up to `point` and has nothing open or in flight:
        what committed before `point` is in Kafka (its slot's confirmed position may stay
        below an undecided PREPARE, so it cannot say)."""
        pipeline = self.checked().pipeline
        idle = pipeline.assembler.idle_wal_end()
        tracker = pipeline.tracker
        return (
            idle is not None
            and max(idle, pipeline.stream.server_wal_end) >= point
            and tracker.open_transactions == 0
            and tracker.in_flight_records == 0
        )


@dataclass
class Replay:
    case: Case
    servers: Servers
    dbname: str
    workdir: Path
    modes: tuple[str, ...] = tuple(MODES)  # the bridges per declared bridge, side by side
    problems: list[str] = field(default_factory=list)
    compared: int = 0  # table comparisons made
    values: int = 0  # values found equal
    _sessions: dict[str, psycopg.Connection[Any]] = field(default_factory=dict)
    _bridges: list[Running] = field(default_factory=list)

    @property
    def restarts(self) -> int:
        """Restarts of the case's bridges after a deadlock (`Running.checked`)."""
        return sum(b.restarts for b in self._bridges)

    def run(self) -> None:
        try:
            for step in self.case.steps:
                self._step(step)
        finally:
            self._close()

    def _step(self, step: Any) -> None:
        if isinstance(step, Sql):
            conn = self._session(step.session)
            if step.copy is not None:
                with conn.cursor() as cur, cur.copy(step.text) as copy:
                    copy.write(step.copy)
                return
            if not step.fails:
                _execute(conn, step.text)
                return
            try:
                conn.execute(step.text)
            except psycopg.Error:
                return
            self.problems.append(f"{self.case.name}.sql:{step.line}: did not fail")
        elif isinstance(step, Start):
            if step.bridge is None:
                self._bridges = [
                    Running(s, mode, self._config(s, mode))
                    for s in self.case.bridges
                    for mode in self.modes
                ]
            for bridge in self._bridges:
                if bridge.spec.later == (step.bridge is not None) and step.bridge in (
                    None,
                    bridge.spec.name,
                ):
                    _signal_topic(bridge.cfg)
                    bridge.thread = start(bridge.cfg)
                    bridge.checker = Checker(bridge.cfg, bridge.delivered)
        elif isinstance(step, Stop):
            for bridge in self._bridges:
                if bridge.spec.name == step.bridge and bridge.thread is not None:
                    thread, bridge.thread = bridge.thread, None
                    thread.stop()
        elif isinstance(step, Check):
            self._check(step)
        elif isinstance(step, Restart):
            running = [b for b in self._bridges if b.thread is not None]
            self._stop()
            for bridge in running:
                bridge.thread = start(bridge.cfg)
        elif isinstance(step, Resync):
            self._resync(step)

    def _check(self, check: Check) -> None:
        where = f"{self.case.name}.sql:{check.line}"
        for bridge in self._bridges:
            if bridge.thread is None:
                continue  # not started yet, or stopped
            assert bridge.checker is not None
            bridge.checked()  # raises what it died of
            found = bridge.checker.check(check, bridge.spec.name, self._rebuild_conn(), TIMEOUT)
            self.compared += found.tables
            self.values += found.values
            self.problems += [
                f"{where} [{bridge.spec.name} {bridge.mode}] {p}" for p in found.problems
            ]

    def _resync(self, step: Resync) -> None:
        """An incremental snapshot of the tables, asked for as Debezium's Kafka signal asks
        (a read-only one: nothing written to the source), waited for until the bridge's
        notification topic says it COMPLETED."""
        for bridge in self._bridges:
            if bridge.spec.name == step.bridge:
                self._resync_one(bridge, step)

    def _resync_one(self, bridge: Running, step: Resync) -> None:
        cfg = bridge.cfg
        signal = uuid.uuid4().hex
        data = {"data-collections": list(step.tables), "type": "incremental"}
        producer = Producer(cfg.kafka.client_config())
        producer.produce(
            str(cfg.snapshot.signal_kafka_topic),
            key=cfg.kafka.topic_prefix,
            value=json.dumps({"id": signal, "type": "execute-snapshot", "data": data}),
        )
        assert producer.flush(30) == 0, "the signal was not delivered"
        consumer = Consumer(
            {
                **cfg.kafka.client_config(),
                "group.id": f"conformance-{signal}",
                "auto.offset.reset": "earliest",
            }
        )
        consumer.subscribe([str(cfg.snapshot.notification_topic)])
        try:

            def completed() -> bool:
                bridge.checked()
                msg = consumer.poll(0.5)
                if msg is None or msg.error() is not None or msg.value() is None:
                    return False
                note = json.loads(msg.value() or b"{}")
                return bool(note.get("id") == signal and note.get("type") == "COMPLETED")

            wait_for(completed, TIMEOUT, f"the incremental snapshot of {step.tables}", every=0)
        finally:
            consumer.close()

    def _config(self, spec: BridgeSpec, mode: str) -> Config:
        settings = bridge_settings(
            self.servers,
            self.dbname,
            f"slot_{uuid.uuid4().hex[:12]}",
            spec.publication,
            f"c_{uuid.uuid4().hex[:12]}",
            self.workdir / f"spill-{spec.name}-{mode}",
        )
        source = settings["source"]
        source.update(MODES[mode])
        source.update(publication_mode="disabled", status_interval_s=0.2)
        settings["snapshot"] = {"mode": "initial", "progress_bar": "never"}
        if any(isinstance(step, Resync) and step.bridge == spec.name for step in self.case.steps):
            prefix = settings["kafka"]["topic_prefix"]
            settings["snapshot"].update(
                read_only=True,
                signal_kafka_topic=f"{prefix}.signals",
                notification_topic=f"{prefix}.notifications",
            )
        settings["log"] = {"level": "WARNING"}
        for key, value in spec.options.items():  # source.X by default: `name=value`
            section, dot, name = key.partition(".")
            if dot:
                settings.setdefault(section, {})[name] = value
            else:
                source[key] = value
        return Config(**settings)

    def _session(self, name: str) -> psycopg.Connection[Any]:
        conn = self._sessions.get(name)
        if conn is None:
            _, _, database = name.partition("@")
            conn = psycopg.connect(self.servers.dsn(database or self.dbname), autocommit=True)
            self._sessions[name] = conn
        return conn

    def _rebuild_conn(self) -> psycopg.Connection[Any]:
        """The session where `expect` rebuilds topics as temporary tables."""
        return self._session(" rebuild")

    def _stop(self) -> None:
        for bridge in self._bridges:
            if bridge.thread is not None:
                thread, bridge.thread = bridge.thread, None
                thread.stop()

    def _close(self) -> None:
        try:
            self._stop()
        finally:
            for bridge in self._bridges:
                if bridge.checker is not None:
                    bridge.checker.close()
            self._close_sessions()

    def _close_sessions(self) -> None:
        for conn in self._sessions.values():
            with contextlib.suppress(psycopg.Error):
                conn.close()


def deadlock_victim(error: BaseException) -> bool:
    """Whether `error` (or what caused it) is PostgreSQL's 40P01, deadlock detected."""
    cause: BaseException | None = error
    while cause is not None:
        if isinstance(cause, psycopg.errors.DeadlockDetected) or (
            isinstance(cause, CommandError) and cause.sqlstate == DEADLOCK
        ):
            return True
        cause = cause.__cause__ or cause.__context__
    return False


def _execute(conn: psycopg.Connection[Any], statement: str) -> None:
    """Run `statement`; again when PostgreSQL chose it as a deadlock victim outside a
    transaction block (its REINDEX against the walsender's catalog reads, see
    `Running.checked`): psql's script meets no walsender reading at the same time."""
    for attempt in range(DEADLOCK_RETRIES + 1):
        try:
            conn.execute(statement)
            return
        except psycopg.errors.DeadlockDetected:
            idle = conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE
            if not idle or attempt == DEADLOCK_RETRIES:
                raise


def _signal_topic(cfg: Config) -> None:
    """Create the bridge's signal topic before it subscribes (a consumer learns of a topic
    created later only at its next metadata refresh, minutes away)."""
    topic = cfg.snapshot.signal_kafka_topic
    if topic is None:
        return
    admin = AdminClient(cfg.kafka.client_config())
    for future in admin.create_topics([NewTopic(topic, 1, 1)]).values():
        future.result(30)


@contextlib.contextmanager
def database(servers: Servers) -> Iterator[str]:
    name = f"conf_{uuid.uuid4().hex[:12]}"
    servers.create_database(name)
    try:
        yield name
    finally:
        _rollback_prepared(servers, name)
        servers.drop_database(name)


def _rollback_prepared(servers: Servers, dbname: str) -> None:
    """Roll back what a failed case left prepared: a prepared transaction outlives its
    session and would keep the database from being dropped."""
    with psycopg.connect(servers.dsn(dbname), autocommit=True) as conn:
        rows = conn.execute(
            "SELECT gid FROM pg_prepared_xacts WHERE database = current_database()"
        ).fetchall()
        for (gid,) in rows:
            conn.execute(sql.SQL("ROLLBACK PREPARED {}").format(sql.Literal(gid)))
