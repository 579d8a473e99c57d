"""One table compared: PostgreSQL's rows at the point against a folded topic.

PostgreSQL's rows are read inside the point's exported snapshot with the snapshot reader's
query and raw-text loaders, encoded by the bridge's own encoder (op "r", as a snapshot
would produce them) and decoded like the topic's records (`state.Decoder`), so every
documented conversion (numeric modes, timestamptz, infinity sentinels, TOAST placeholders)
is applied on both sides and compares equal.

The topic side is already reduced to one `Kept` per key, so the comparison is one ordered
pass over the table, taking each fetched batch's states out of the key store
(`KeyStore.claim`: dict pops, or one SQLite query per batch once the store spilled to
disk); the states left at the end are the ghosts. Most rows are settled without decoding:
the bridge's encoder writes the row's Avro body alone (`ChangeEncoder.row_bodies`), and
its digest equals the key's row digest when the topic's newest record holds the same
bytes (Avro's binary encoding of a value is unique). Only the others (mismatches, rows
completed by carried TOAST values, records of older schema versions) are encoded as
records and decoded as above, and then the column digests say which columns differ.

Why no pass of order-independent hashes per key range first: both sides are read in full
whatever it finds (the topic is a log whose every record changes the fold, and a row's
digest needs the row encoded by the bridge), so such a pass could only save the look-up,
which costs a fraction of a microsecond in the dict and a few on disk against some fifty
per row for reading the two sides; and descending into a range that differs would
read that range of PostgreSQL a second time. Worse, a key range means PostgreSQL's order
(collations, numeric and composite keys), which the Avro key bytes do not keep, so the
topic side could not even place its keys in the ranges. Hashing ranges pays when rows
would otherwise cross a network to be compared; here they are streamed here anyway.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Final, Protocol

import psycopg

from bridge.decode.messages import KIND_TEXT
from bridge.snapshot.catalog import SnapshotTable
from bridge.snapshot.chunks import Chunk, chunk_query
from bridge.snapshot.reader import Row, TableJob, encode_rows, row_kinds, snapshot_source
from bridge.verify.state import Decoder, TopicState, differing_columns, row_digest
from bridge.verify.store import ROW_DIGEST, Kept, KeyStore

SAMPLES = 5  # keys shown per kind of mismatch
REPAIR_KEY_LIMIT: Final = 100_000  # keys of one table verify --spark --repair collects
_FETCH = 2000


# a lake key's kinds; `behind` keys (not yet applied) are not judged
LAKE_KINDS: Final = ("equal", "missing", "ghost", "different", "behind", "after_point")


# a lake table's format (`bridge.spark.formats.TableFormat`) as people read it, and what its
# pinned version is called there
LAKE_FORMATS: Final = {"delta": "Delta", "iceberg": "Iceberg"}
LAKE_VERSIONS: Final = {"delta": "version", "iceberg": "snapshot"}


@dataclass
class LakeResult:
    """One table's verdict on its lake table (`bridge.verify.lake`), `counts` by `LAKE_KINDS`;
    `version`: the Delta version or Iceberg snapshot id judged."""

    target: str
    version: int = -1
    format: str = "delta"
    counts: Counter[str] = field(default_factory=Counter)
    columns: Counter[str] = field(default_factory=Counter)
    samples: dict[str, list[str]] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not any(self.counts[k] for k in ("missing", "ghost", "different", "behind"))

    def as_dict(self) -> dict[str, Any]:
        return {
            "target": self.target,
            "format": self.format,
            "version": self.version,
            "status": "equal" if self.ok else "differs",
            **{k: self.counts[k] for k in LAKE_KINDS},
            "different_columns": dict(sorted(self.columns.items())),
            "sample_keys": self.samples,
        }


class LakeSink(Protocol):
    """Takes PostgreSQL's rows for the lake comparison (`bridge.verify.lake.LakeSide`, which
    imports pyspark: this module does not)."""

    def add_row(self, name: bytes, key: bytes, value: bytes, text: tuple[str, ...]) -> None: ...


@dataclass
class TableResult:
    """A table's verdict; the fields after `skipped` feed `--repair` and are not printed
    (`reread_keys`: PostgreSQL's key text of missing and different rows, in Kafka or the
    lake; `ghost_keys`: the topic's state of keys PostgreSQL does not have, alive in Kafka
    or the lake)."""

    table: str
    topic: str
    rows: int = 0  # rows in PostgreSQL at the point
    live_keys: int = 0  # keys alive in the topic at the point
    records: int = 0  # records read from the topic
    after_point: int = 0  # of them, committed at or after the point: left out
    equal: int = 0
    decoded: int = 0  # rows compared by decoding, not settled by their bytes alone
    missing: int = 0
    ghosts: int = 0
    different: int = 0
    columns: Counter[str] = field(default_factory=Counter)
    samples: dict[str, list[str]] = field(default_factory=dict)
    skipped: str | None = None
    on_disk: bool = False  # the topic's key states passed the memory budget: SQLite
    lake: LakeResult | None = None  # with --lake: the lake table's verdict
    # for --repair: what was compared, how far the topic was read, and the keys to fix
    snapshot_table: SnapshotTable | None = None
    job: TableJob | None = None
    decoder: Decoder | None = None
    ends: dict[int, int] = field(default_factory=dict)
    reread_keys: list[tuple[str, ...]] = field(default_factory=list)
    ghost_keys: dict[bytes, Kept] = field(default_factory=dict)
    lake_left: int = 0  # lake keys to fix that --repair cannot (`bridge.verify.lake.LakeFix`)

    @property
    def ok(self) -> bool:
        kafka = not (self.missing or self.ghosts or self.different)
        return self.skipped is None and kafka and (self.lake is None or self.lake.ok)

    @property
    def status(self) -> str:
        if self.skipped is not None:
            return "skipped"
        return "equal" if self.ok else "differs"

    def sample(self, kind: str, decoder: Decoder, key: bytes) -> None:
        found = self.samples.setdefault(kind, [])
        if len(found) < SAMPLES:
            found.append(decoder.show_key(key))

    def as_dict(self) -> dict[str, Any]:
        return {
            "table": self.table,
            "topic": self.topic,
            "status": self.status,
            "rows": self.rows,
            "kafka_keys": self.live_keys,
            "kafka_records": self.records,
            "kafka_records_after_point": self.after_point,
            "equal": self.equal,
            "rows_decoded": self.decoded,
            "missing": self.missing,
            "ghosts": self.ghosts,
            "different": self.different,
            "different_columns": dict(sorted(self.columns.items())),
            "sample_keys": self.samples,
            "skipped": self.skipped,
            "kafka_state_on_disk": self.on_disk,
            **({} if self.lake is None else {"lake": self.lake.as_dict()}),
        }


def compare_table(
    conn: psycopg.Connection[Any],
    table: SnapshotTable,
    job: TableJob,
    state: TopicState,
    result: TableResult,
    lake: LakeSink | None = None,
) -> None:
    """Fill `result` from the table read on `conn` (inside the point's snapshot); each row's
    key (as `Decoder.key`), framed key and value also go to `lake` when given. The rows'
    states are taken out of `state.keys`: what is left are the keys PostgreSQL lacks."""
    decoder = state.decoder
    store = state.keys
    result.records = state.records
    result.after_point = state.after_point
    result.live_keys = store.live_count()
    result.on_disk = store.on_disk
    names = [c.name for c in table.relation.columns]
    key_at = [names.index(k.name) for k in table.key]
    all_text = bytes((KIND_TEXT,)) * len(names)
    query, params = chunk_query(table, Chunk(table.label, 0, table.method, None, None))
    source = snapshot_source("", "", state.point, "true")
    where = f"{table.label} row"
    with conn.cursor(name=f"verify_{table.relation.oid}") as cursor:
        cursor.itersize = _FETCH
        cursor.execute(query, params)
        while rows := cursor.fetchmany(_FETCH):
            claimed: dict[bytes, Kept] = {}
            if lake is None:
                rows, claimed = _unequal(rows, job, all_text, store, result)
            records, _ = encode_rows(rows, job, source)
            keys = []
            for record in records:
                key, value = record.key, record.value
                assert key is not None and value is not None  # a keyed table's "r" record
                keys.append((decoder.key(key, where), key, value))
            if lake is not None:
                for (name, key, value), row in zip(keys, rows, strict=True):
                    text = tuple(_text(row[i]) for i in key_at)
                    lake.add_row(name, key, value, text)  # it reads the key's state: claim after
                claimed = store.claim([name for name, _, _ in keys])
            for (name, _, value), row in zip(keys, rows, strict=True):
                after = decoder.envelope(value, where).get("after") or {}
                columns = b"".join(decoder.digests(after))
                result.rows += 1
                result.decoded += 1
                kept = claimed.get(name)
                if kept is None or kept.deleted:
                    result.missing += 1
                    result.sample("missing", decoder, name)
                elif kept.digests == columns:
                    result.equal += 1
                    continue
                else:
                    result.different += 1
                    result.columns.update(differing_columns(decoder.fields, kept.digests, columns))
                    result.sample("different", decoder, name)
                result.reread_keys.append(tuple(_text(row[i]) for i in key_at))
    result.ghost_keys = {name: kept for name, kept in store.items() if not kept.deleted}
    result.ghosts = len(result.ghost_keys)
    for name in sorted(result.ghost_keys):  # the same samples whatever the store's order
        result.sample("ghost", decoder, name)


def _unequal(
    rows: list[Row], job: TableJob, all_text: bytes, store: KeyStore, result: TableResult
) -> tuple[list[Row], dict[bytes, Kept]]:
    """The rows whose Avro body differs from their key's row digest (or that have no live
    key in the topic, or no digest there), and the states of all the rows' keys, taken out
    of `store`; the equal rows are counted here. A row's key body is its `Decoder.key`
    (written with the current key schema)."""
    bodies = job.encoder.row_bodies
    encoded = [bodies(row_kinds(row, all_text), row) for row in rows]
    claimed = store.claim([key for key, _ in encoded])
    rest = []
    for row, (key, body) in zip(rows, encoded, strict=True):
        kept = claimed.get(key)
        if kept is not None and not kept.deleted and kept.columns[:ROW_DIGEST] == row_digest(body):
            result.rows += 1
            result.equal += 1
        else:
            rest.append(row)
    return rest, claimed


def _text(value: bytes | None) -> str:
    assert value is not None  # key columns are NOT NULL
    return value.decode()
