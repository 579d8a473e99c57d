"""Fixtures of the encoder's unit tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from encode.oracle import MS


@pytest.fixture
def frozen_clock() -> Iterator[None]:
    """The encoder stamps ts_ms from the clock: frozen at the oracle's, so that records
    compare byte for byte."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr("bridge.encode.records._now_ns", lambda: MS * 1_000_000 + 456_789)
        yield
