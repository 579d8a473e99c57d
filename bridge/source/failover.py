"""Failover slots (PostgreSQL 17+): a logical slot that standbys keep a copy of.

A logical slot lives on one server. Unless it is created with FAILOVER and a standby
runs with `sync_replication_slots = on`, a promoted standby has no slot and the changes
made between the promotion and a new slot are in no slot at all: the most common way
CDC pipelines lose data. With a synchronised slot the bridge, given every server in
`source.host`, reconnects to the new primary and resumes where the copy stands (at or
before what Kafka has: a few transactions may come twice, none goes missing).

`synchronized_standby_slots` on the primary makes the walsender wait until the listed
standbys have the WAL it decodes, so Kafka never holds a change a promoted standby lacks.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any, Final

import psycopg
from psycopg import sql

from bridge import hosts
from bridge.config import Config
from bridge.errors import BridgeError, SourceError
from bridge.source import libpq

log: Final = logging.getLogger("bridge.source.failover")
FAILOVER_VERSION: Final = 170000


def prepare(rc: libpq.ReplicationConnection, cfg: Config, version: int) -> None:
    """Before the slot is used: require 17+, and turn FAILOVER on for an existing slot.

    A slot the bridge creates gets FAILOVER in CREATE_REPLICATION_SLOT itself (slots.py)."""
    src = cfg.source
    if not src.failover_slot:
        return
    if version < FAILOVER_VERSION:
        raise SourceError(
            f"source.failover_slot needs PostgreSQL 17 or later (server_version_num {version})",
            hint="upgrade, or set source.failover_slot: false and accept that a failover "
            "needs a new slot and a snapshot (docs: operations/high-availability)",
        )
    rows = rc.command(
        "SELECT failover, pg_is_in_recovery() FROM pg_replication_slots "
        f"WHERE slot_name = {rc.quote(sql.Literal(src.slot_name))}"
    )
    if rows and rows[0] == ("f", "f"):
        rc.command(
            f"ALTER_REPLICATION_SLOT {rc.quote(sql.Identifier(src.slot_name))} (FAILOVER true)"
        )
        log.info("slot %s: FAILOVER turned on", src.slot_name)
    (standby_slots,) = rc.command("SHOW synchronized_standby_slots")[0]
    if not standby_slots:
        log.warning(
            "synchronized_standby_slots is empty on the primary: the bridge may receive "
            "changes a standby has not yet, and after a failover Kafka could hold "
            "transactions the new primary never had; list the standbys' physical slots there"
        )


def report(rc: libpq.ReplicationConnection, cfg: Config) -> str:
    """`bridge check`: is the slot synchronised to a standby? A "WARNING" when not."""
    src = cfg.source
    (version,) = rc.command("SHOW server_version_num")[0]
    if int(version or 0) < FAILOVER_VERSION:
        if src.failover_slot:
            raise BridgeError(
                f"source.failover_slot needs PostgreSQL 17 or later (server_version_num {version})",
                hint="upgrade, or set source.failover_slot: false",
            )
        return (
            "WARNING: PostgreSQL before 17 has no failover slots: after a failover the "
            "slot is missing on the new primary and the bridge stops (source.on_slot_lost)"
        )
    rows = rc.command(
        "SELECT failover FROM pg_replication_slots "
        f"WHERE slot_name = {rc.quote(sql.Literal(src.slot_name))}"
    )
    (standby_slots,) = rc.command("SHOW synchronized_standby_slots")[0]
    problems = []
    if not src.failover_slot:
        problems.append("source.failover_slot is false: the slot is not synchronised to standbys")
    elif rows and rows[0][0] != "t":
        problems.append("the slot has FAILOVER off (the bridge turns it on at start)")
    if not standby_slots:
        problems.append("synchronized_standby_slots is empty on the primary")
    synced = list(_standby_copies(rc, cfg))
    found = [f"{where}: {state}" for where, state in synced]
    if src.failover_slot and not any(state.startswith("synced") for _, state in synced):
        problems.append(
            "no standby in source.host has a synchronised copy (sync_replication_slots = on, "
            "hot_standby_feedback = on and a dbname in primary_conninfo on the standby)"
        )
    detail = "; ".join(found) if found else "no standby in source.host"
    if problems:
        return f"WARNING: {'; '.join(problems)} ({detail})"
    return f"synchronised via {standby_slots!r} ({detail})"


def _standby_copies(rc: libpq.ReplicationConnection, cfg: Config) -> Iterator[tuple[str, str]]:
    """The slot's copy on each other server of `source.host` that is a standby."""
    src = cfg.source
    here = (rc.conn.info.host, rc.conn.info.port)
    for endpoint in src.endpoints():
        if (endpoint.host, endpoint.port) == here:
            continue
        where = hosts.describe((endpoint,))
        params: dict[str, Any] = {
            **src.conninfo(),
            **hosts.libpq_params((endpoint,), "any"),
        }
        try:
            with libpq.connect(params, replication=False) as conn:
                row = conn.execute(
                    "SELECT pg_is_in_recovery(), (SELECT row(synced, confirmed_flush_lsn)::text "
                    "FROM pg_replication_slots WHERE slot_name = %s)",
                    (src.slot_name,),
                ).fetchone()
        except (BridgeError, psycopg.Error) as exc:
            yield where, f"unreachable ({str(exc).splitlines()[0]})"
            continue
        assert row is not None
        recovery, slot = row
        if not recovery:
            yield where, "not a standby"
        elif slot is None:
            yield where, "no copy of the slot"
        else:
            flag, lsn = slot.strip("()").split(",")
            yield where, f"synced at {lsn}" if flag == "t" else f"copy not synced ({lsn})"
