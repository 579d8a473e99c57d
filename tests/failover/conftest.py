"""Fixtures of the failover suite: a fresh PostgreSQL 18 primary + standby pair per test.

Kafka and the registry are the session stack's; the bridge runs as a subprocess
(delivery.conftest's `bridge_process`), restarted by the test the way a supervisor
restarts it after it exits on a lost connection.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from delivery.conftest import bridge_process

from .pair import Pair

__all__ = ["bridge_process", "pair", "primary_only"]


@pytest.fixture
def pair() -> Iterator[Pair]:
    made = Pair()
    try:
        made.start_primary()
        made.start_standby()
        yield made
    finally:
        made.stop()


@pytest.fixture
def primary_only() -> Iterator[Pair]:
    """One server (the pair's primary, no standby) with max_slot_wal_keep_size small enough
    to invalidate a slot on demand."""
    made = Pair({"max_slot_wal_keep_size": "'1MB'", "synchronized_standby_slots": "''"})
    try:
        made.start_primary()
        yield made
    finally:
        made.stop()
