"""`bridge check`: is every dependency usable as configured? One ok/FAIL line each."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Iterator
from typing import Any, NamedTuple

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.error import SchemaRegistryError
from psycopg import sql

from bridge import log
from bridge.config import Config
from bridge.errors import BridgeError
from bridge.kafka.producer import kafka_client_config
from bridge.source import failover, libpq, slots


class Result(NamedTuple):
    name: str
    ok: bool
    detail: str


def run_checks(cfg: Config) -> Iterator[Result]:
    """Yield results as they come; later PostgreSQL checks need an earlier connection."""
    yield from _postgres(cfg)
    yield _guard("Kafka reachable", lambda: _kafka(cfg))
    yield _guard("schema registry reachable", lambda: _registry(cfg))


def _guard(name: str, fn: Callable[[], str]) -> Result:
    try:
        return Result(name, True, fn())
    except BridgeError as exc:
        return Result(name, False, str(exc))
    except Exception as exc:  # a check reports any failure, it never crashes the command
        return Result(name, False, f"{type(exc).__name__}: {exc}")


def _postgres(cfg: Config) -> Iterator[Result]:
    src = cfg.source
    try:
        rc = libpq.ReplicationConnection(libpq.connect(src.conninfo(), replication=True))
    except BridgeError as exc:
        yield Result("PostgreSQL reachable", False, str(exc))
        return
    try:
        info = slots.identify_system(rc)
        yield Result(
            "PostgreSQL reachable",
            True,
            f"{src.host}:{src.port}/{info.dbname}, system {info.systemid}, WAL at {info.xlogpos}",
        )
        (wal_level,) = rc.command("SHOW wal_level")[0]
        yield Result("wal_level = logical", wal_level == "logical", f"wal_level is {wal_level}")
        yield _guard("role has REPLICATION", lambda: _replication_role(rc))
        if src.plugin == "pgoutput":
            yield _guard("publication", lambda: _publication(rc, cfg))
            yield _guard("partitioned tables", lambda: _partitions(rc, cfg))
        yield _guard("replication slot", lambda: _slot(rc, cfg))
        yield _guard("failover slot", lambda: failover.report(rc, cfg))
        yield _guard("major upgrade", lambda: _upgrade(rc, cfg))
        yield _guard("verify --repair", lambda: _repair(rc, cfg))
    finally:
        rc.close()


def _upgrade(rc: libpq.ReplicationConnection, cfg: Config) -> str:
    """What a pg_upgrade of this server to a newer major does to the slot."""
    (version,) = rc.command("SHOW server_version_num")[0]
    major = int(version or 0) // 10000
    return upgrade_outlook(major, cfg.source.slot_name, cfg.source.on_slot_lost)


def upgrade_outlook(major: int, slot: str, on_slot_lost: str) -> str:
    """Pure: `bridge check`'s line on a major upgrade of a PostgreSQL `major` server."""
    if major >= 17:
        return (
            f"PostgreSQL {major}: pg_upgrade to a newer major keeps slot {slot!r}; stop the "
            "bridge gracefully first (pg_upgrade refuses a slot that has not consumed all "
            "WAL) and start it after: it resumes without a snapshot "
            "(docs/operations/upgrades.md)"
        )
    then = (
        "create the slot again and re-read the captured tables (on_slot_lost: resnapshot)"
        if on_slot_lost == "resnapshot"
        else "stop with SlotLostError naming the gap (on_slot_lost: fail)"
    )
    return (
        f"WARNING: PostgreSQL {major}: pg_upgrade drops logical slots, so after an upgrade "
        f"the bridge finds no slot {slot!r} and will {then}; to upgrade without a snapshot, "
        "stop writes, let the bridge confirm everything, upgrade, delete the slot's record "
        "from the state topic, start from a new slot and run bridge verify --repair "
        "(docs/operations/upgrades.md)"
    )


def _repair(rc: libpq.ReplicationConnection, cfg: Config) -> str:
    """How `bridge verify --repair` will fix rows, and whether this role may, said before
    anyone needs it (bridge.verify.repair): it locks a table in SHARE MODE (UPDATE, DELETE
    or TRUNCATE on it, and a transaction that may lock) for ghosts, and for re-read rows
    too unless the bridge re-reads them through snapshot.signal_table (INSERT there)."""
    signal = cfg.snapshot.signal_table
    how = (
        f"the bridge re-reads rows through {signal}"
        if signal
        else "verify re-reads rows itself, under a table lock (no signal table needed)"
    )
    problems = []
    if signal:
        name = rc.quote(sql.Literal(signal))
        (insert,) = rc.command(
            f"SELECT CASE WHEN to_regclass({name}) IS NULL THEN 'missing' "
            f"WHEN has_table_privilege({name}, 'INSERT') THEN 'ok' ELSE 'no INSERT' END"
        )[0]
        if insert != "ok":
            problems.append(f"{signal}: {'no such table' if insert == 'missing' else insert}")
    (read_only,) = rc.command("SHOW default_transaction_read_only")[0]
    if read_only == "on":
        problems.append("the role's transactions are read-only, so it cannot lock a table")
    elif cfg.source.plugin == "pgoutput":
        # materialized: the privilege test must see the publication's tables only (a
        # name in a schema the role may not use, pg_toast's, cannot be looked up)
        rows = rc.command(
            "WITH t AS MATERIALIZED (SELECT format('%I.%I', schemaname, tablename) AS name "
            "FROM pg_publication_tables "
            f"WHERE pubname = {rc.quote(sql.Literal(cfg.source.publication_name))}) "
            "SELECT name FROM t WHERE NOT ("
            + " OR ".join(
                f"has_table_privilege(name, '{p}')" for p in ("UPDATE", "DELETE", "TRUNCATE")
            )
            + ") ORDER BY 1"
        )
        if rows:
            names = ", ".join(str(r[0]) for r in rows[:3]) + (", ..." if len(rows) > 3 else "")
            problems.append(
                f"no UPDATE, DELETE or TRUNCATE (for its SHARE MODE lock) on {len(rows)} "
                f"published table(s): {names}"
            )
    if problems:
        return (
            f"WARNING: {how}, and with this role it would stop: {'; '.join(problems)} "
            "(docs/verify.md, repair)"
        )
    return f"{how}; this role may"


def _replication_role(rc: libpq.ReplicationConnection) -> str:
    version = slots.check_prerequisites(rc)
    return f"ok (server_version_num {version})"


def _publication(rc: libpq.ReplicationConnection, cfg: Config) -> str:
    name = cfg.source.publication_name
    rows = rc.command(
        "SELECT puballtables, (SELECT count(*) FROM pg_publication_tables t "
        "WHERE t.pubname = p.pubname) FROM pg_publication p "
        f"WHERE pubname = {rc.quote(sql.Literal(name))}"
    )
    if rows:
        all_tables, count = rows[0]
        scope = "all tables" if all_tables == "t" else f"{count} table(s)"
        return f"{name!r} exists ({scope})"
    if cfg.source.publication_mode == "disabled":
        raise BridgeError(
            f"publication {name!r} is missing and publication_mode is disabled",
            hint=f"CREATE PUBLICATION {sql.Identifier(name).as_string()} FOR TABLE ...",
        )
    return f"{name!r} missing; it will be created FOR ALL TABLES on start"


def _partitions(rc: libpq.ReplicationConnection, cfg: Config) -> str:
    """The publication's partitioned tables (or, before the bridge creates it FOR ALL
    TABLES, the database's): what PostgreSQL will not send for them."""
    name = rc.quote(sql.Literal(cfg.source.publication_name))
    rows = rc.command(f"SELECT pubviaroot FROM pg_publication WHERE pubname = {name}")
    if rows:
        via_root = rows[0][0] == "t"
        tables = rc.command(
            "SELECT format('%I.%I', t.schemaname, t.tablename) FROM pg_publication_tables t "
            "JOIN pg_namespace n ON n.nspname = t.schemaname "
            "JOIN pg_class c ON c.relnamespace = n.oid AND c.relname = t.tablename "
            f"WHERE t.pubname = {name} AND (c.relkind = 'p' OR c.relispartition) ORDER BY 1"
        )
    else:
        via_root = cfg.source.publish_via_partition_root
        roots, leaves = "c.relkind = 'p' AND NOT", "c.relkind = 'r' AND"
        which = f"{roots if via_root else leaves} c.relispartition"
        tables = rc.command(
            "SELECT format('%I.%I', n.nspname, c.relname) FROM pg_class c "
            "JOIN pg_namespace n ON n.oid = c.relnamespace "
            f"WHERE {which} "
            "AND n.nspname NOT IN ('pg_catalog', 'information_schema') ORDER BY 1"
        )
    return partitions_outlook(via_root, [str(t) for (t,) in tables])


def partitions_outlook(via_root: bool, tables: list[str]) -> str:
    """Pure: `bridge check`'s line on the partitioned tables published (`tables`: roots
    through their root, or partitions), `via_root` the publication's
    publish_via_partition_root."""
    if not tables:
        return "none published"
    shown = ", ".join(tables[:5]) + (f" and {len(tables) - 5} more" if len(tables) > 5 else "")
    if via_root:
        return (
            f"WARNING: published through their root: {shown}. PostgreSQL does not send a "
            "TRUNCATE of a single partition, nor ATTACH or DETACH PARTITION: the root's topic "
            "then keeps or misses those rows (truncate the root, or run an incremental "
            "snapshot; docs/concepts/partitions.md)"
        )
    return (
        f"WARNING: published per partition (a topic each): {shown}. An UPDATE that moves a "
        "row to another partition is a delete in one topic and an insert in another, and "
        "ATTACH PARTITION sends none of the attached table's rows "
        "(docs/concepts/partitions.md)"
    )


def _slot(rc: libpq.ReplicationConnection, cfg: Config) -> str:
    name, plugin = cfg.source.slot_name, cfg.source.plugin
    rows = rc.command(
        "SELECT plugin, database, active, confirmed_flush_lsn, current_database() "
        f"FROM pg_replication_slots WHERE slot_name = {rc.quote(sql.Literal(name))}"
    )
    if not rows:
        if not cfg.source.create_slot:
            raise BridgeError(
                f"slot {name!r} is missing and source.create_slot is false",
                hint="create the slot or enable source.create_slot",
            )
        return f"{name!r} missing; it will be created with plugin {plugin} on start"
    have_plugin, database, active, confirmed, current = rows[0]
    if have_plugin != plugin:
        raise BridgeError(
            f"slot {name!r} uses plugin {have_plugin!r}, configured plugin is {plugin!r}",
            hint="choose another source.slot_name or drop the unused slot",
        )
    if database != current:
        raise BridgeError(
            f"slot {name!r} belongs to database {database!r}",
            hint="use a slot name unique to this database",
        )
    state = "active in another process" if active == "t" else "inactive"
    return f"{name!r} exists ({plugin}, {state}, confirmed_flush_lsn {confirmed})"


def _kafka(cfg: Config) -> str:
    """One metadata request. librdkafka retries a refused connection many times a second
    meanwhile: its lines are held and logged once each, with their count, before this
    check's result; then the client is destroyed, so nothing of it follows the report."""
    client_log = log.ClientLog(logging.getLogger("bridge.kafka"), hold=True)
    conf: dict[str, Any] = {**kafka_client_config(cfg.kafka), "logger": client_log}
    admin = AdminClient(conf)
    try:
        meta = admin.list_topics(timeout=cfg.kafka.request_timeout_s)
    except KafkaException as exc:
        cause = exc
        try:
            admin.poll(0)  # a refused login or TLS handshake (the real cause) raises from here
        except KafkaException as real:
            cause = real
        raise BridgeError(
            f"cannot use Kafka at {cfg.kafka.bootstrap_servers}: {cause}",
            hint="check kafka.bootstrap_servers, that the brokers run, and the kafka "
            "security settings",
        ) from None
    finally:
        with contextlib.suppress(KafkaException):
            admin.poll(0)  # serve the log lines queued during the request
        del admin  # the last reference: librdkafka's threads stop here
        client_log.close()
    brokers = len(meta.brokers)
    return f"{cfg.kafka.bootstrap_servers}: {brokers} broker(s), cluster {meta.cluster_id}"


def _registry(cfg: Config) -> str:
    with SchemaRegistryClient(cfg.registry.client_config()) as client:
        return _subjects(cfg, client)


def _subjects(cfg: Config, client: SchemaRegistryClient) -> str:
    try:
        subjects = client.get_subjects()
    except SchemaRegistryError as exc:
        if exc.http_status_code not in (401, 403):
            raise
        raise BridgeError(
            f"{cfg.registry.url} refused the credentials (HTTP {exc.http_status_code})",
            hint="check registry.basic_auth_user and registry.basic_auth_password",
        ) from None
    except Exception as exc:  # transport errors; the client's HTTP library is not public API
        raise BridgeError(
            f"cannot reach the schema registry at {cfg.registry.url}: {type(exc).__name__}: {exc}",
            hint="check registry.url and that the registry runs",
        ) from None
    return f"{cfg.registry.url}: {len(subjects)} subject(s)"
