"""Per-test bridge settings, bridge processes that never outlive their test, and the ledger
scenario bound to the test's database, slot and topics. The fault suite uses them too
(tests/faults/conftest.py)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from .helpers import BridgeFactory, BridgeProcess, bridge_settings
from .ledger import LedgerStreamFactory, open_ledger_stream


@pytest.fixture
def settings(
    stack: Any,
    pg_db: str,
    slot_name: str,
    publication_name: str,
    topic_prefix: str,
    tmp_path: Path,
) -> dict[str, Any]:
    return bridge_settings(
        stack, pg_db, slot_name, publication_name, topic_prefix, tmp_path / "spill"
    )


@pytest.fixture
def bridge_process(tmp_path: Path) -> Iterator[BridgeFactory]:
    made: list[BridgeProcess] = []

    def make(cfg: dict[str, Any], prefix: Sequence[str] = ()) -> BridgeProcess:
        proc = BridgeProcess(cfg, tmp_path, name=f"bridge{len(made)}", prefix=prefix)
        made.append(proc)
        return proc

    yield make
    for proc in made:
        proc.cleanup()


@pytest.fixture
def ledger_stream(
    pg_dsn: str, slot_name: str, topic_prefix: str, kafka_bootstrap: str, registry_url: str
) -> LedgerStreamFactory:
    """`with ledger_stream(bridge, rate=..., reconnect=...) as stream:` (open_ledger_stream)."""
    return partial(
        open_ledger_stream, pg_dsn, slot_name, topic_prefix, kafka_bootstrap, registry_url
    )
