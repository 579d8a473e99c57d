"""The incremental snapshot's state machine, without I/O: DBLog's windows and the runs
that move through them (the shell that reads and writes is bridge/snapshot/incremental.py).

A run (`Run`, one execute-snapshot signal) reads its tables chunk by chunk. Each chunk is
a `Window` placed in the stream:

- Watermarked (DBLog, as Debezium does it): a low watermark row is written, the chunk
  read, a high watermark row written. In the stream, between the two, a change to a key
  of the chunk supersedes the key's row: the read may have seen that change or not, but
  the streamed event (delivered in order, and followed by any later one) carries the
  key's state, so the row read is redundant or stale and is dropped. At the high
  watermark the rest goes out, inside the watermark's transaction.
- Read-only (`snapshot.read_only`, bridge/snapshot/watermarks.py): the chunk is read in
  one transaction snapshot together with a WAL position `until`; the window is open from
  the read, a streamed change drops its keys as above, and it closes at the first change
  of a transaction committed at or past `until`, or when the idle stream passes it.

A run's position (`Mark`) is stored only once the flush position passed what delivered
the window's rows, so a restart re-reads only chunks whose delivery was not confirmed,
and a key's rows are never older than what Kafka already holds for it (per-key order
across resumed snapshots).

`Windows` drives it all: signals queue runs, stop-snapshot takes tables out between
chunks, pause-snapshot holds new chunks; `next_step` says what the shell must do next,
and the stream's events say when a window closes. Everything here is plain data: the
unit tests (tests/snapshot/test_windows.py) play the stream against it.
"""

from __future__ import annotations

import json
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Final, NamedTuple

from bridge.decode.messages import KIND_BINARY, KIND_TEXT
from bridge.events.model import OP_TRUNCATE, Change
from bridge.record import KafkaRecord
from bridge.snapshot.chunks import Bound

KIND: Final = "incremental"
Key = bytes | None
Delivered = Callable[[], bool]  # whether records sent between transactions are confirmed


class Run:
    """One execute-snapshot signal: its tables and how far it got."""

    __slots__ = ("conditions", "index", "last_key", "max_key", "names", "rows", "run_id")

    def __init__(self, run_id: str, names: Sequence[str], conditions: dict[str, str]) -> None:
        self.run_id = run_id
        self.names = list(names)
        self.conditions = conditions
        self.index = 0  # table being read
        self.last_key: Bound | None = None  # last key emitted in that table
        self.max_key: Bound | None = None  # fixed when the table starts
        self.rows = 0  # rows emitted from that table

    @property
    def done(self) -> bool:
        return self.index >= len(self.names)

    @property
    def table(self) -> str:
        return self.names[self.index]

    def remaining(self) -> list[str]:
        return self.names[self.index :]

    def detail(self) -> dict[str, Any]:
        return {
            "data-collections": self.names,
            "conditions": self.conditions,
            "index": self.index,
            "last_key": self.last_key,
            "max_key": self.max_key,
            "rows": self.rows,
        }

    @classmethod
    def restore(cls, run_id: str, detail: dict[str, Any]) -> Run:
        run = cls(run_id, detail.get("data-collections", []), detail.get("conditions", {}))
        run.index = int(detail.get("index", 0))
        run.last_key = _bound(detail.get("last_key"))
        run.max_key = _bound(detail.get("max_key"))
        run.rows = int(detail.get("rows", 0))
        return run

    def next_table(self) -> None:
        self.index += 1
        self.last_key = self.max_key = None
        self.rows = 0

    def stop(self, names: list[str] | None) -> list[str]:
        """stop-snapshot: the tables of `names` (all when None) not read yet, or being
        read, leave the run; those it stopped. A table being read starts over if it stays."""
        rest = self.remaining()
        kept = [] if names is None else [n for n in rest if n not in names]
        if not kept or kept[0] != rest[0]:
            self.last_key = self.max_key = None  # the table being read was stopped
            self.rows = 0
        self.names = self.names[: self.index] + kept
        return [n for n in rest if n not in kept]


class Mark(NamedTuple):
    """A run's position, stored once its chunk is delivered: the flush position passed
    `lsn` (rows sent inside a transaction), or `delivered()` (rows sent between them)."""

    lsn: int
    run_id: str
    detail: dict[str, Any]
    done: bool
    delivered: Delivered | None = None

    def ready(self, flushed: int) -> bool:
        return self.lsn < flushed if self.delivered is None else self.delivered()


class Window:
    """One chunk of a table between its watermarks: key -> the "r" record's value, in the
    order read. Watermarked (`open_id`, `close_id`: the signal rows written around the
    read), it opens when the stream shows the low watermark; read-only, it is open from
    the read and closes once the stream passes `until`."""

    __slots__ = (
        "buffer",
        "close_id",
        "label",
        "last_key",
        "oid",
        "open_id",
        "opened",
        "topic",
        "until",
    )

    def __init__(
        self,
        label: str,
        oid: int,
        topic: str,
        rows: Iterable[tuple[Key, bytes | None]],
        last_key: Bound,
        *,
        watermarks: tuple[str, str] | None = None,
        until: int | None = None,
    ) -> None:
        if (watermarks is None) == (until is None):
            raise ValueError("a window is watermarked or read-only, not both")
        self.label = label
        self.oid = oid
        self.topic = topic
        self.buffer: dict[Key, bytes | None] = dict(rows)
        self.last_key = last_key
        self.open_id, self.close_id = watermarks or ("", "")
        self.until = until
        self.opened = until is not None

    def streamed(self, oid: int, op: str, keys: Iterable[Key]) -> None:
        """A change the stream delivered: a key of this chunk it changed is superseded."""
        if not self.opened or oid != self.oid:
            return
        if op == OP_TRUNCATE:
            self.buffer.clear()
        else:
            for key in keys:
                self.buffer.pop(key, None)

    def drop(self, keys: Iterable[Key]) -> None:
        """Read-only: rows older than changes streamed before the read (`Streamed.stale`)."""
        for key in keys:
            self.buffer.pop(key, None)

    def passed_by(self, commit_lsn: int) -> bool:
        """Read-only: whether a transaction committed at `commit_lsn` closes the window
        (it comes after everything the chunk's snapshot saw)."""
        return self.until is not None and commit_lsn >= self.until

    def rows(self) -> list[KafkaRecord]:
        """The rows left, as op "r" records, in the order read."""
        return [KafkaRecord(self.topic, key, value) for key, value in self.buffer.items()]


class Closed(NamedTuple):
    """A window that closed: its rows to send, its run (moved past them), and where the
    table stands: its last key read, its maximum, the rows it sent in all, whether it is
    done (the run then reads its next table)."""

    rows: list[KafkaRecord]
    run: Run
    label: str
    last_key: Bound
    max_key: Bound | None
    table_rows: int
    table_done: bool


class Completed(NamedTuple):
    """`next_step`: a run whose every table is done (its final mark is queued)."""

    run: Run


class Windows:
    """The runs, the open window and the positions waiting for their delivery."""

    def __init__(self, runs: Iterable[Run] = ()) -> None:
        self.queue: deque[Run] = deque(runs)
        self.active: Run | None = None
        self.window: Window | None = None
        self.marks: deque[Mark] = deque()
        self.paused = False  # pause-snapshot: no new chunk until resume-snapshot
        self.stops: list[list[str] | None] = []  # stop-snapshot: applied between chunks
        self._last_lsn = 0  # commit LSN of the newest window close

    # -- signals ----------------------------------------------------------------------

    def request(self, run: Run) -> None:
        self.queue.append(run)

    def runs(self) -> list[Run]:
        """The active run first, then the queued ones."""
        return ([self.active] if self.active is not None else []) + list(self.queue)

    def wants_work(self) -> bool:
        """No window open, and a run or a stop waiting."""
        return self.window is None and (self.active is not None or bool(self.queue or self.stops))

    def apply_stops(self) -> list[tuple[Run, list[str]]]:
        """The stop-snapshot signals received since: each run they changed, with the
        tables that left it (empty when a stop named none of its tables)."""
        stops, self.stops = self.stops, []
        changed = []
        for names in stops:
            for run in self.runs():
                changed.append((run, run.stop(names)))
        return changed

    # -- the next chunk ---------------------------------------------------------------

    def next_step(self) -> Run | Completed | None:
        """What the shell does next: read the next chunk of the returned run's current
        table (then `open`, `table_done` or nothing: read again later); announce a
        `Completed` run; or nothing (paused, a window open, no run)."""
        if self.paused or self.window is not None:
            return None
        run = self.active
        if run is None:
            if not self.queue:
                return None
            run = self.active = self.queue.popleft()
        if run.done:
            self.marks.append(Mark(self._last_lsn, run.run_id, run.detail(), True))
            self.active = None
            return Completed(run)
        return run

    def open(self, window: Window) -> None:
        self.window = window

    # -- the stream -------------------------------------------------------------------

    def on_change(self, oid: int, op: str, keys: Sequence[Key], commit_lsn: int) -> Closed | None:
        """A streamed change of relation `oid` with its records' keys, in a transaction
        committed at `commit_lsn`: a read-only window it passes closes after it."""
        window = self.window
        if window is None:
            return None
        window.streamed(oid, op, keys)
        if window.passed_by(commit_lsn):
            return self.close_in(commit_lsn)
        return None

    def on_watermark(self, signal_id: str, commit_lsn: int) -> Closed | None:
        """A signal-table row: the open window's low watermark opens it, its high one
        closes it. None for any other row (a signal: the caller's)."""
        window = self.window
        if window is None or window.until is not None:
            return None
        if signal_id == window.open_id:
            window.opened = True
        elif signal_id == window.close_id:
            return self.close_in(commit_lsn)
        return None

    def is_watermark(self, signal_id: str) -> bool:
        window = self.window
        return window is not None and signal_id in (window.open_id, window.close_id)

    def close_in(self, commit_lsn: int) -> Closed:
        """The window closes inside the transaction committed at `commit_lsn`: its rows
        go out as that transaction's records, its position stored once that is flushed."""
        closed = self._take()
        self._last_lsn = commit_lsn
        self.marks.append(Mark(commit_lsn, closed.run.run_id, closed.run.detail(), False))
        return closed

    def waits_at(self, position: int) -> bool | None:
        """The stream is idle at `position`: None without a read-only window; True while
        it waits for the stream to reach its position; False when `position` passed it
        (then `close_between`)."""
        window = self.window
        if window is None or window.until is None:
            return None
        return position < window.until

    def close_between(self, position: int, delivered: Delivered) -> None:
        """The read-only window just taken (`take_idle`) went out between transactions:
        its position is stored once `delivered()`."""
        run = self.active
        assert run is not None
        self.marks.append(Mark(position, run.run_id, run.detail(), False, delivered))

    def take_idle(self) -> Closed:
        """Close the read-only window the idle stream passed (rows sent between
        transactions; then `close_between`)."""
        return self._take()

    def table_done(self, run: Run) -> None:
        run.next_table()

    def acknowledged(self, flushed: int) -> list[Mark]:
        """Positions whose delivery is confirmed now that the flush position is `flushed`,
        oldest first: to store."""
        ready = []
        while self.marks and self.marks[0].ready(flushed):
            ready.append(self.marks.popleft())
        return ready

    def _take(self) -> Closed:
        window, self.window = self.window, None
        run = self.active
        assert window is not None and run is not None
        rows = window.rows()
        run.rows += len(rows)
        done = window.last_key == run.max_key
        closed = Closed(rows, run, window.label, window.last_key, run.max_key, run.rows, done)
        if done:
            run.next_table()
        else:
            run.last_key = window.last_key
        return closed


# -- signals ------------------------------------------------------------------------------


def signal_row(change: Change) -> tuple[str, str, str | None] | None:
    """(id, type, data) of a signal-table insert; None if it lacks them."""
    relation, new = change.relation, change.new
    if relation is None or new is None:
        return None
    found: dict[str, str | None] = {}
    for column, kind, value in zip(relation.columns, new.kinds, new.values, strict=False):
        if column.name in ("id", "type", "data"):
            usable = value is not None and kind in (KIND_TEXT, KIND_BINARY)
            found[column.name] = (
                value.decode(errors="replace") if usable and value is not None else None
            )
    signal_id, signal_type = found.get("id"), found.get("type")
    if signal_id is None or signal_type is None:
        return None
    return signal_id, signal_type, found.get("data")


def requested_run(signal_id: str, data: str | None) -> Run | str:
    """The run an execute-snapshot signal asks for, or why it is ignored."""
    try:
        spec = json.loads(data or "{}")
        names = [str(n) for n in spec["data-collections"]]
        kind = str(spec.get("type", KIND)).lower()
        conditions = {
            str(c["data-collection"]): str(c["filter"])
            for c in spec.get("additional-conditions", [])
        }
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        return f"malformed execute-snapshot data ({exc})"
    if kind != KIND:
        return "only incremental snapshots can be signalled"
    return Run(signal_id, names, conditions)


def stop_names(data: str | None) -> list[str] | None:
    """A stop-snapshot's `data-collections`; None (every table) when it names none."""
    try:
        names = json.loads(data or "{}").get("data-collections")
    except (ValueError, AttributeError):
        return None
    return [str(n) for n in names] if isinstance(names, list) and names else None


def text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _bound(value: Any) -> Bound | None:
    return None if value is None else tuple(str(v) for v in value)
