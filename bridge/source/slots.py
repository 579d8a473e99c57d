"""Server prerequisites, the replication slot, the publication, and START_REPLICATION.

Every failure here names the setting or privilege to fix: these are the errors an
operator meets on the first deployment.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import psycopg
from psycopg import sql

from bridge.errors import SourceError, StopRequestedError
from bridge.lsn import LSN
from bridge.source.libpq import SQLSTATE_OBJECT_IN_USE, CommandError, ReplicationConnection
from bridge.source.waiting import STOP, Stop


class SystemInfo(NamedTuple):
    systemid: str
    timeline: int
    xlogpos: LSN
    dbname: str


class Slot(NamedTuple):
    name: str
    plugin: str
    confirmed_flush: LSN | None  # None right after creation (nothing confirmed yet)
    created: bool
    snapshot_name: str | None  # exported snapshot, valid until the next command on rc
    consistent_point: LSN | None


def identify_system(rc: ReplicationConnection) -> SystemInfo:
    systemid, timeline, xlogpos, dbname = rc.command("IDENTIFY_SYSTEM")[0]
    return SystemInfo(systemid or "", int(timeline or 0), LSN.parse(xlogpos or "0/0"), dbname or "")


def check_prerequisites(rc: ReplicationConnection) -> int:
    """Fail early on `wal_level` and the REPLICATION privilege; returns server_version_num."""
    (wal_level,) = rc.command("SHOW wal_level")[0]
    if wal_level != "logical":
        raise SourceError(
            f"wal_level is {wal_level!r}, logical decoding needs 'logical'",
            hint="set wal_level = logical in postgresql.conf and restart PostgreSQL",
        )
    rows = rc.command(
        "SELECT rolreplication OR rolsuper, current_user FROM pg_roles WHERE rolname = current_user"
    )
    if not rows or rows[0][0] != "t":
        user = rows[0][1] if rows else "current user"
        raise SourceError(
            f"role {user} lacks the REPLICATION attribute",
            hint=f"run: ALTER ROLE {user} WITH REPLICATION",
        )
    (version,) = rc.command("SHOW server_version_num")[0]
    return int(version or 0)


def ensure_slot(
    rc: ReplicationConnection,
    name: str,
    plugin: str,
    *,
    create: bool,
    two_phase: bool,
    failover: bool = False,
) -> Slot:
    """Use the existing slot (checking its plugin and database) or create it.

    `failover` creates it synchronised to standbys (PostgreSQL 17+; an existing slot is
    switched over by bridge/source/failover.py, not here, because any command after
    CREATE_REPLICATION_SLOT would end the snapshot it exported)."""
    rows = rc.command(
        "SELECT plugin, slot_type, database, confirmed_flush_lsn FROM pg_replication_slots "
        f"WHERE slot_name = {rc.quote(sql.Literal(name))}"
    )
    if rows:
        have_plugin, slot_type, database, confirmed = rows[0]
        (current_db,) = rc.command("SELECT current_database()")[0]
        if slot_type != "logical" or have_plugin != plugin:
            raise SourceError(
                f"replication slot {name!r} uses plugin {have_plugin!r} ({slot_type}), "
                f"not {plugin!r}",
                hint="choose another source.slot_name, or drop the slot if it is unused: "
                f"SELECT pg_drop_replication_slot('{name}')",
            )
        if database != current_db:
            raise SourceError(
                f"replication slot {name!r} belongs to database {database!r}, not {current_db!r}",
                hint="use a slot name unique to this database",
            )
        return Slot(name, plugin, LSN.parse(confirmed) if confirmed else None, False, None, None)
    if not create:
        raise SourceError(
            f"replication slot {name!r} does not exist",
            hint="create it, or set source.create_slot: true",
        )
    options = ["SNAPSHOT 'export'"]
    if two_phase:
        options.append("TWO_PHASE true")
    if failover:
        options.append("FAILOVER true")
    row = rc.command(
        f"CREATE_REPLICATION_SLOT {rc.quote(sql.Identifier(name))} LOGICAL "
        f"{rc.quote(sql.Identifier(plugin))} ({', '.join(options)})"
    )[0]
    _, consistent, snapshot, _ = row
    point = LSN.parse(consistent or "0/0")
    return Slot(name, plugin, None, True, snapshot, point)


class SlotInfo(NamedTuple):
    """What pg_replication_slots says of a slot now."""

    confirmed_flush: LSN  # 0/0 while nothing was confirmed
    invalidation: str | None  # why the server can no longer stream it; None when usable


def slot_info(conn: psycopg.Connection[Any], name: str) -> SlotInfo | None:
    """The slot's confirmed position and invalidation as the server holds them now; None
    without the slot.

    Read over a plain connection: the replication one may be streaming, or may be the
    one that just failed. Which column says why a slot is unusable depends on the
    server's version, taken from the connection."""
    row = conn.execute(_slot_query(conn.info.server_version), (name,)).fetchone()
    if row is None:
        return None
    confirmed, wal_status, why = row
    invalidation = why or ("wal_removed" if wal_status == "lost" else None)
    return SlotInfo(LSN.parse(confirmed or "0/0"), invalidation)


def _slot_query(version: int) -> str:
    if version >= 170000:
        reason = "invalidation_reason"
    elif version >= 160000:
        reason = "CASE WHEN conflicting THEN 'rows_removed' END"
    else:
        reason = "NULL"
    return (
        f"SELECT confirmed_flush_lsn::text, wal_status, {reason} FROM pg_replication_slots "
        "WHERE slot_name = %s"
    )


def drop_slot(rc: ReplicationConnection, name: str) -> None:
    rc.command(f"DROP_REPLICATION_SLOT {rc.quote(sql.Identifier(name))} WAIT")


def ensure_publication(
    conn: psycopg.Connection[Any],
    name: str,
    mode: str,
    tables: Sequence[tuple[str, str]] = (),
    *,
    via_root: bool = True,
    generated: bool = False,
) -> None:
    """Create the publication when missing, or require it (`disabled`).

    `all_tables` creates it FOR ALL TABLES (superuser only); `filtered` FOR TABLE the
    given (schema, table) pairs, those matching the table filters at start-up.
    `via_root` sets publish_via_partition_root: a partitioned table's changes come as the
    table's own (one topic; a row an update moves to another partition arrives as a delete
    and an insert of its key on that one topic, in order) instead of each partition's.
    `generated` sets publish_generated_columns = stored (PostgreSQL 18 on): stored generated
    columns are sent like any other; virtual ones never are. An existing publication that
    does not publish them while `generated` asks for them is an error, not ignored.
    """
    if generated and conn.info.server_version < 180000:
        raise SourceError(
            "source.publish_generated_columns needs PostgreSQL 18 or later "
            f"(the server runs {conn.info.server_version // 10000})",
            hint="set source.publish_generated_columns: false (generated columns are then "
            "absent from the topics, as PostgreSQL before 18 never publishes them)",
        )
    query = (
        "SELECT pubgencols::text FROM pg_publication WHERE pubname = %s"
        if generated
        else "SELECT puballtables FROM pg_publication WHERE pubname = %s"
    )
    row = conn.execute(query, (name,)).fetchone()
    if row is not None:
        if generated and row[0] != "s":
            ident = sql.Identifier(name).as_string()
            raise SourceError(
                f"publication {name!r} does not publish stored generated columns, which "
                "source.publish_generated_columns asks for",
                hint=f"ALTER PUBLICATION {ident} SET (publish_generated_columns = stored), "
                "or set source.publish_generated_columns: false",
            )
        return
    if mode == "disabled":
        raise SourceError(
            f"publication {name!r} does not exist",
            hint=f"create it (CREATE PUBLICATION {sql.Identifier(name).as_string()} FOR TABLE "
            "...) or set source.publication_mode: all_tables",
        )
    if mode == "filtered":
        if not tables:
            raise SourceError(
                f"no table matches the filters, so publication {name!r} would be empty",
                hint="check filters.include_tables / exclude_tables",
            )
        target: sql.Composable = sql.SQL("FOR TABLE {}").format(
            sql.SQL(", ").join(sql.Identifier(s, t) for s, t in tables)
        )
    else:
        target = sql.SQL("FOR ALL TABLES")
    try:
        options = sql.SQL(" WITH (publish_via_partition_root = {}{})").format(
            sql.SQL("true" if via_root else "false"),
            sql.SQL(", publish_generated_columns = stored" if generated else ""),
        )
        conn.execute(
            sql.SQL("CREATE PUBLICATION {} {}").format(sql.Identifier(name), target) + options
        )
    except psycopg.errors.InsufficientPrivilege:
        raise SourceError(
            f"not allowed to create publication {name!r} ({mode})",
            hint="a superuser (all_tables) or the tables' owner (filtered) must create it, or "
            "set source.publication_mode: disabled and create the publication by hand",
        ) from None


def start_replication(
    rc: ReplicationConnection,
    slot: str,
    start: LSN,
    options: Sequence[tuple[str, str]],
    *,
    busy_timeout_s: float,
    clock: Callable[[], float] = time.monotonic,
    stop: Stop = STOP,
    sleep: Callable[[float], object] | None = None,
) -> None:
    """START_REPLICATION, retrying while the slot is active in another process.

    A Kubernetes pod restart routinely overlaps the old walsender (SQLSTATE 55006),
    so that case is retried with backoff for `busy_timeout_s`, or until a stop
    (`sleep` stands in for the pause between tries, in tests).
    """
    opts = ", ".join(
        f"{rc.quote(sql.Identifier(k))} {rc.quote(sql.Literal(v))}" for k, v in options
    )
    command = f"START_REPLICATION SLOT {rc.quote(sql.Identifier(slot))} LOGICAL {start}"
    if opts:
        command += f" ({opts})"
    deadline = clock() + busy_timeout_s
    delay = 0.2
    while True:
        try:
            rc.start_copy_both(command)
            return
        except CommandError as exc:
            if exc.sqlstate != SQLSTATE_OBJECT_IN_USE:
                raise
            if clock() + delay > deadline:
                raise SourceError(
                    f"replication slot {slot!r} stayed active in another process for "
                    f"{busy_timeout_s:.0f}s",
                    hint="stop the other consumer of this slot, or raise "
                    "source.slot_busy_timeout_s",
                ) from None
            if sleep is None:
                stop.wait(delay)  # the pause, cut short by a stop
            else:
                sleep(delay)
            if stop.requested:
                raise StopRequestedError(
                    f"stop requested while replication slot {slot!r} was active in another process"
                ) from None
            delay = min(delay * 2, 5.0)
