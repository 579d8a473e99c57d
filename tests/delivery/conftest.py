"""Per-test bridge settings and bridge processes that never outlive their test."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from .helpers import BridgeProcess, bridge_settings


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
def bridge_process(tmp_path: Path) -> Iterator[Callable[[dict[str, Any]], BridgeProcess]]:
    made: list[BridgeProcess] = []

    def make(cfg: dict[str, Any], prefix: Sequence[str] = ()) -> BridgeProcess:
        proc = BridgeProcess(cfg, tmp_path, name=f"bridge{len(made)}", prefix=prefix)
        made.append(proc)
        return proc

    yield make
    for proc in made:
        proc.cleanup()
