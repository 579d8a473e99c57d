"""The incremental snapshot's I/O shell (bridge/snapshot/incremental.py) with its
collaborators faked: no server. The window reasoning itself is tested in test_windows.py;
here, that the shell reads the chunks it is told to, writes watermarks around them, hands
the chunk's records to the pipeline in the high watermark's transaction and stores each
position only once it is acknowledged. The live tests (test_incremental.py,
test_read_only.py) run the same shell against PostgreSQL and Kafka."""

from __future__ import annotations

from typing import Any

from bridge.config import Config
from bridge.decode.messages import KIND_TEXT, Column, Relation, TupleData
from bridge.encode.records import SourceBlock, TxSource
from bridge.events.model import OP_CREATE, OP_UPDATE, Change
from bridge.record import KafkaRecord
from bridge.snapshot.catalog import METHOD_KEY, KeyColumn, SnapshotTable
from bridge.snapshot.chunks import Bound
from bridge.snapshot.incremental import IncrementalSnapshotter
from bridge.snapshot.progress import SnapshotProgress
from bridge.snapshot.store import DONE, RUNNING, Run
from bridge.snapshot.watermarks import Watermark

SIGNALS = Relation(
    None, 1, "public", "signals", "d", tuple(Column(0, n, 25, -1) for n in ("id", "type", "data"))
)
TABLE = Relation(None, 2, "public", "t", "d", (Column(1, "id", 23, -1), Column(0, "v", 25, -1)))
TOPIC = "p.public.t"


class FakeChunks:
    """The chunk queries: the table's rows in key order, served `limit` at a time."""

    signal: tuple[str, str] | None = ("public", "signals")

    def __init__(self, rows: list[tuple[int, str]], limit: int) -> None:
        self.rows = rows
        self.limit = limit
        self.reads: list[tuple[str, str]] = []  # the watermark ids around each read
        self.closed = False

    def describe(self, name: str) -> SnapshotTable | None:
        if name != "public.t":
            return None
        return SnapshotTable(TABLE, (KeyColumn("id", "integer"),), METHOD_KEY, None, 3, 1)

    def max_key(self, table: SnapshotTable, condition: str | None) -> Bound | None:
        return (str(self.rows[-1][0]),) if self.rows else None

    def watermarked(
        self, query: Any, params: list[str], type_oids: set[int], ids: tuple[str, str]
    ) -> list[tuple[Any, ...]]:
        after = int(params[0]) if len(params) == 2 else None  # (last key,) max key
        self.reads.append(ids)
        chunk = [r for r in self.rows if after is None or r[0] > after][: self.limit]
        # the key's text first, then the columns, each as the server's text output
        return [(str(k).encode(), str(k).encode(), v.encode()) for k, v in chunk]

    def consistent(
        self, query: Any, params: list[str], type_oids: set[int]
    ) -> tuple[list[tuple[Any, ...]], Watermark]:
        raise AssertionError("not read-only")

    def watermark_now(self) -> Watermark:
        raise AssertionError("not read-only")

    def close(self) -> None:
        self.closed = True


class FakeEncoder:
    def records(self, change: Change, source: TxSource) -> list[KafkaRecord]:
        assert change.new is not None
        key, value = change.new.values
        return [KafkaRecord(TOPIC, key, b"r:" + (value or b""))]


class FakeEncoders:
    def get(self, relation: Relation) -> tuple[str, Any]:
        return TOPIC, FakeEncoder()


class MemoryStore:
    def __init__(self) -> None:
        self.saved: dict[str, Run] = {}

    def run(self, run_id: str) -> Run | None:
        return self.saved.get(run_id)

    def runs(self, kind: str, state: str) -> list[Run]:
        return [r for r in self.saved.values() if r.kind == kind and r.state == state]

    def begin(self, run_id: str, kind: str, state: str, detail: dict[str, Any]) -> None:
        self.saved[run_id] = Run(run_id, kind, state, None, detail)

    def set_state(self, run_id: str, state: str, lsn: Any = None) -> None:
        self.saved[run_id] = self.saved[run_id]._replace(state=state)

    def set_detail(self, run_id: str, detail: dict[str, Any]) -> None:
        self.saved[run_id] = self.saved[run_id]._replace(detail=detail)


class AllRoutes:
    def matches(self, schema: str, table: str) -> bool:
        return True


def tx(commit_lsn: int) -> TxSource:
    return TxSource(SourceBlock("p", "db", "0", "false"), 7, commit_lsn, 0)


def signal(signal_id: str, kind: str, data: str | None = None) -> Change:
    values = (signal_id.encode(), kind.encode(), None if data is None else data.encode())
    kinds = bytes(KIND_TEXT if v is not None else ord("n") for v in values)
    return Change(OP_CREATE, SIGNALS, "", None, TupleData(kinds, values), 0, (), 0, None, 0)


def update(k: int, v: str) -> tuple[Change, list[KafkaRecord]]:
    row = TupleData(bytes((KIND_TEXT, KIND_TEXT)), (str(k).encode(), v.encode()))
    change = Change(OP_UPDATE, TABLE, "", None, row, 0, (), 0, None, 0)
    return change, [KafkaRecord(TOPIC, str(k).encode(), b"u:" + v.encode())]


def shell(chunks: FakeChunks, store: MemoryStore) -> IncrementalSnapshotter:
    cfg = Config(
        source={"slot_name": "s", "dbname": "db"},
        kafka={"topic_prefix": "p"},
        snapshot={"signal_table": "public.signals", "incremental_chunk_size": chunks.limit},
    )
    return IncrementalSnapshotter(
        cfg,
        chunks,
        AllRoutes(),
        store,
        SnapshotProgress(),
        FakeEncoders(),  # type: ignore[arg-type]  # an EncoderCache's get() only
        lambda oid: None,
    )


def test_a_signalled_run_reads_between_watermarks_and_stores_acknowledged_positions() -> None:
    chunks, store = FakeChunks([(1, "a"), (2, "b"), (3, "c")], limit=2), MemoryStore()
    snapshotter = shell(chunks, store)
    request = '{"data-collections": ["public.t"]}'
    assert snapshotter.on_change(signal("snap-1", "execute-snapshot", request), [], tx(0x10)) == []
    assert store.saved["snap-1"].state == RUNNING and not chunks.reads

    snapshotter.on_acknowledged(0x11)  # the signal delivered: the first chunk is read
    ((low, high),) = chunks.reads
    assert snapshotter.on_change(signal(low, "snapshot-window-open"), [], tx(0x20)) == []
    change, records = update(2, "B")  # between the watermarks: key 2's read row is stale
    assert snapshotter.on_change(change, records, tx(0x30)) == []
    out = snapshotter.on_change(signal(high, "snapshot-window-close"), [], tx(0x40))
    assert out == [KafkaRecord(TOPIC, b"1", b"r:a")]  # in the high watermark's transaction

    # the second (last) chunk was read at the close; the first one's position waits for
    # the flush position to pass the high watermark's commit
    assert len(chunks.reads) == 2
    snapshotter.on_acknowledged(0x40)
    assert store.saved["snap-1"].detail["last_key"] is None
    snapshotter.on_acknowledged(0x41)
    assert store.saved["snap-1"].detail["last_key"] == ("2",)

    low, high = chunks.reads[1]
    snapshotter.on_change(signal(low, "snapshot-window-open"), [], tx(0x50))
    out = snapshotter.on_change(signal(high, "snapshot-window-close"), [], tx(0x60))
    assert out == [KafkaRecord(TOPIC, b"3", b"r:c")]
    snapshotter.on_acknowledged(0x61)  # the table is done: the run completes
    snapshotter.on_acknowledged(0x62)
    assert store.saved["snap-1"].state == DONE
    snapshotter.close()
    assert chunks.closed


def test_an_unknown_table_ends_its_run_without_a_read() -> None:
    chunks, store = FakeChunks([(1, "a")], limit=10), MemoryStore()
    snapshotter = shell(chunks, store)
    request = '{"data-collections": ["public.nope"]}'
    snapshotter.on_change(signal("snap-2", "execute-snapshot", request), [], tx(0x10))
    snapshotter.on_acknowledged(0x11)
    snapshotter.on_acknowledged(0x12)
    assert not chunks.reads and store.saved["snap-2"].state == DONE


def test_a_restart_resumes_a_stored_run_where_it_was() -> None:
    chunks, store = FakeChunks([(1, "a"), (2, "b"), (3, "c")], limit=2), MemoryStore()
    detail = {"data-collections": ["public.t"], "conditions": {}, "index": 0}
    store.begin("snap-3", "incremental", RUNNING, {**detail, "last_key": ["2"], "max_key": ["3"]})
    snapshotter = shell(chunks, store)
    snapshotter.on_acknowledged(0x10)
    assert len(chunks.reads) == 1
    low, high = chunks.reads[0]
    snapshotter.on_change(signal(low, "snapshot-window-open"), [], tx(0x20))
    out = snapshotter.on_change(signal(high, "snapshot-window-close"), [], tx(0x30))
    assert [r.key for r in out] == [b"3"]  # only what was not confirmed before
