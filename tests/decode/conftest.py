"""`open_source`: LiveSource (tests/decode/live.py) on the test's database, slot and
publication, closed after the test. test_live_pglogical.py has its own (no publication)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from decode.live import LiveSource, Open, source_config


@pytest.fixture
def open_source(
    stack: Any, pg_db: str, slot_name: str, publication_name: str, tmp_path: Path
) -> Iterator[Open]:
    opened: list[LiveSource] = []

    def open_(**source: Any) -> LiveSource:
        cfg = source_config(
            stack, pg_db, slot_name=slot_name, publication_name=publication_name, **source
        )
        live = LiveSource(cfg, tmp_path / "spill")
        opened.append(live)
        return live

    yield open_
    for live in opened:
        live.close()
