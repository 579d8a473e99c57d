"""Snapshot progress counters and the rich bars (pure)."""

from __future__ import annotations

import io
import logging

import pytest

from bridge.snapshot.progress import ProgressBars, SnapshotProgress, TableStatus


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_table_completes_when_planned_chunks_are_done(caplog: pytest.LogCaptureFixture) -> None:
    clock = Clock()
    progress = SnapshotProgress(clock)
    progress.start_table("public.t", "initial", estimate=1000, rows_done=100)
    progress.planned("public.t", 2)
    progress.add_rows("public.t", 400, chunks=1)
    progress.planning_done("public.t")
    assert progress.tables() == [TableStatus("public.t", "initial", 500, 1000, False)]
    clock.now += 2.0
    with caplog.at_level(logging.INFO, "bridge.snapshot"):
        progress.add_rows("public.t", 600, chunks=1)
        progress.finish("public.t")  # idempotent: one log line per table
    assert progress.tables() == [TableStatus("public.t", "initial", 1100, 1100, True)]
    lines = [r.getMessage() for r in caplog.records]
    assert lines == [
        "initial snapshot of public.t done: 1100 rows (100 before the resume) in 2.0s (500 rows/s)"
    ]


def test_total_is_never_below_rows_done() -> None:
    progress = SnapshotProgress()
    progress.start_table("s.t", "incremental", estimate=0)
    progress.add_rows("s.t", 7)
    assert progress.tables()[0].rows_total == 7


def test_bars_render_rows_and_rate() -> None:
    progress = SnapshotProgress()
    progress.start_table("public.big", "initial", estimate=10)
    bars = ProgressBars(progress, enabled=True)
    assert bars._bars is not None
    out = io.StringIO()
    bars._bars.console.file = out
    with bars:
        progress.add_rows("public.big", 4)
        bars.refresh()
    assert "public.big" in out.getvalue()
    assert "4/10" in out.getvalue()


def test_disabled_bars_do_nothing() -> None:
    progress = SnapshotProgress()
    progress.start_table("public.t", "initial", estimate=1)
    with ProgressBars(progress, enabled=False) as bars:
        bars.refresh()
    assert not ProgressBars.wanted("never")
    assert ProgressBars.wanted("always")


def test_table_listener_hears_starts_and_ends() -> None:
    heard: list[tuple[str, TableStatus]] = []
    progress = SnapshotProgress(on_table=lambda event, status: heard.append((event, status)))
    progress.start_table("public.t", "initial", estimate=10)
    progress.planned("public.t", 1)
    progress.planning_done("public.t")
    progress.add_rows("public.t", 7, chunks=1)
    progress.finish("public.t")  # once only
    assert heard == [
        ("started", TableStatus("public.t", "initial", 0, 10, False)),
        ("done", TableStatus("public.t", "initial", 7, 7, True)),
    ]
