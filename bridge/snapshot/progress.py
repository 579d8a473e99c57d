"""Snapshot progress: counters for the metrics endpoint, bars for a terminal, a log line per table.

`SnapshotProgress` is the one object the rest of the bridge reads (rows done and
estimated total per table); workers update it per chunk, never per row.
`ProgressBars` draws it with rich when stderr is a terminal.
"""

from __future__ import annotations

import logging
import sys
import threading
import time
from collections.abc import Callable
from types import TracebackType
from typing import Any, NamedTuple

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeRemainingColumn,
)

log = logging.getLogger("bridge.snapshot")


class TableStatus(NamedTuple):
    table: str
    kind: str  # "initial" or "incremental"
    rows_done: int
    rows_total: int  # estimate (pg_class.reltuples), never below rows_done
    done: bool


class _Table:
    __slots__ = (
        "chunks_done",
        "chunks_planned",
        "done",
        "estimate",
        "kind",
        "planned",
        "rows",
        "rows_before",
    )

    def __init__(self, kind: str, estimate: int) -> None:
        self.kind = kind
        self.estimate = estimate
        self.rows = 0
        self.chunks_planned = 0
        self.chunks_done = 0
        self.planned = False  # every chunk is known
        self.done = False
        self.rows_before = 0  # done by an earlier run of a resumed snapshot


# `on_table` events: a table's scan started, or is done.
TABLE_STARTED, TABLE_DONE = "started", "done"
TableListener = Callable[[str, TableStatus], None]


class SnapshotProgress:
    """Thread-safe per-table counters; `tables()` is the read side for metrics.

    `on_table(event, status)` hears of each table's start and end (the initial snapshot's
    notifications, `bridge.snapshot.notify`), on the thread that made the change."""

    def __init__(self, clock: Any = time.monotonic, on_table: TableListener | None = None) -> None:
        self._lock = threading.Lock()
        self._tables: dict[str, _Table] = {}
        self._started: dict[str, float] = {}
        self._clock = clock
        self._on_table = on_table

    def start_table(self, table: str, kind: str, estimate: int, rows_done: int = 0) -> None:
        with self._lock:
            entry = _Table(kind, estimate)
            entry.rows = entry.rows_before = rows_done
            self._tables[table] = entry
            self._started[table] = self._clock()
        if self._on_table is not None:
            self._on_table(TABLE_STARTED, TableStatus(table, kind, rows_done, estimate, False))

    def planned(self, table: str, chunks: int = 1) -> None:
        with self._lock:
            self._tables[table].chunks_planned += chunks

    def planning_done(self, table: str) -> None:
        with self._lock:
            self._tables[table].planned = True
        self._finish_if_complete(table)

    def add_rows(self, table: str, rows: int, chunks: int = 0) -> None:
        with self._lock:
            entry = self._tables[table]
            entry.rows += rows
            entry.chunks_done += chunks
        if chunks:
            self._finish_if_complete(table)

    def finish(self, table: str) -> None:
        """Mark done and log once (incremental snapshots call this directly)."""
        with self._lock:
            entry = self._tables[table]
            if entry.done:
                return
            entry.done = True
            rows, before = entry.rows, entry.rows_before
            seconds = self._clock() - self._started[table]
            kind = entry.kind
        if self._on_table is not None:
            self._on_table(TABLE_DONE, TableStatus(table, kind, rows, rows, True))
        rate = (rows - before) / seconds if seconds > 0 else 0.0
        resumed = f" ({before} before the resume)" if before else ""
        log.info(
            "%s snapshot of %s done: %d rows%s in %.1fs (%.0f rows/s)",
            kind,
            table,
            rows,
            resumed,
            seconds,
            rate,
        )

    def tables(self) -> list[TableStatus]:
        with self._lock:
            return [
                TableStatus(name, t.kind, t.rows, max(t.estimate, t.rows), t.done)
                for name, t in self._tables.items()
            ]

    def _finish_if_complete(self, table: str) -> None:
        with self._lock:
            entry = self._tables[table]
            complete = entry.planned and entry.chunks_done >= entry.chunks_planned
        if complete:
            self.finish(table)


class ProgressBars:
    """One rich bar per table (rows done / estimate, rows/s, ETA); `refresh()` copies counters."""

    def __init__(self, progress: SnapshotProgress, enabled: bool) -> None:
        self._progress = progress
        self._bars: Progress | None = None
        self._tasks: dict[str, TaskID] = {}
        self._moved: list[tuple[logging.StreamHandler[Any], Any]] = []
        if enabled:
            self._bars = Progress(
                TextColumn("[bold]{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                TextColumn("{task.fields[rate]:>9} rows/s"),
                TimeRemainingColumn(),
                console=Console(file=sys.stderr),
                refresh_per_second=4,
            )

    @staticmethod
    def wanted(setting: str) -> bool:
        return setting == "always" or (setting == "auto" and sys.stderr.isatty())

    def __enter__(self) -> ProgressBars:
        if self._bars is not None:
            self._bars.start()
            # Log lines go above the bars instead of through them.
            for handler in logging.getLogger().handlers:
                if isinstance(handler, logging.StreamHandler) and handler.stream is sys.__stderr__:
                    self._moved.append((handler, handler.setStream(sys.stderr)))
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._bars is None:
            return
        self.refresh()
        self._bars.stop()
        for handler, stream in self._moved:
            handler.setStream(stream)

    def refresh(self) -> None:
        bars = self._bars
        if bars is None:
            return
        for status in self._progress.tables():
            task = self._tasks.get(status.table)
            if task is None:
                task = bars.add_task(status.table, total=status.rows_total, rate="")
                self._tasks[status.table] = task
            speed = next(t.speed for t in bars.tasks if t.id == task)
            bars.update(
                task,
                completed=status.rows_done,
                total=status.rows_done if status.done else status.rows_total,
                rate=f"{speed:,.0f}" if speed else "",
            )
