"""The snapshot decision per mode (pure)."""

from __future__ import annotations

import pytest

from bridge.snapshot.modes import (
    AGAIN,
    FRESH,
    RESUME,
    SlotStatus,
    decide,
    needs_new_slot,
    streams_after,
    wants_snapshot,
)

MODES = ("initial", "initial_only", "no_data", "when_needed", "always", "external")


@pytest.mark.parametrize("mode", MODES)
def test_new_slot(mode: str) -> None:
    assert decide(mode, True, "pending") == (None if mode == "no_data" else FRESH)


@pytest.mark.parametrize("mode", MODES)
def test_unfinished_snapshot_is_resumed(mode: str) -> None:
    for state in ("pending", "running"):
        assert decide(mode, False, state) == (None if mode == "no_data" else RESUME)


@pytest.mark.parametrize("mode", MODES)
def test_existing_slot_after_a_finished_snapshot(mode: str) -> None:
    expected = AGAIN if mode == "always" else None
    assert decide(mode, False, "done") == expected
    assert decide(mode, False, None) == expected  # a slot the bridge never snapshotted


def test_only_when_needed_replaces_a_lost_slot() -> None:
    lost, healthy, missing = (
        SlotStatus(True, True),
        SlotStatus(True, False),
        SlotStatus(False, False),
    )
    assert needs_new_slot("when_needed", lost)
    assert not needs_new_slot("when_needed", healthy)
    assert not needs_new_slot("when_needed", missing)
    for mode in ("initial", "initial_only", "no_data", "always", "external"):
        assert not needs_new_slot(mode, lost)


def test_streaming_and_snapshot_flags() -> None:
    assert [m for m in MODES if not streams_after(m)] == ["initial_only"]
    assert [m for m in MODES if not wants_snapshot(m)] == ["no_data"]
