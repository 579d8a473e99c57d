"""One table compared: PostgreSQL's rows at the point against a folded topic.

PostgreSQL's rows are read inside the point's exported snapshot with the snapshot reader's
query and raw-text loaders and encoded by the bridge's own encoder, the row's Avro body
alone (`ChangeEncoder.row_bodies`, as the `after` of a snapshot record holds it), so every
documented conversion (numeric modes, timestamptz, infinity sentinels, TOAST placeholders)
is applied on both sides, and equal rows are equal bytes.

The topic side is already reduced to one state per key (`bridge.verify.state`). With the
states in memory the comparison is one ordered pass over the table, each row taking its
key's state out of the dict; with them in hash partitions on disk
(`bridge.verify.store`) each row's digests go to its key's partition, and the partitions
are compared one at a time. Either way the states left at the end are the ghosts, and
most rows are settled by one comparison: the digest of the row's body against the row
digest of the key's newest record (Avro's binary encoding of a value is unique). Only the
others (mismatches, rows completed by carried TOAST values, records of older schema
versions) are compared column by column, and the column digests say which columns
differ. The verdict is the same in both storages: mismatches are reported in the
table's order (by row number), ghosts by key.

Why no pass of order-independent hashes per key range first: both sides are read in full
whatever it finds (the topic is a log whose every record changes the fold, and a row's
digest needs the row encoded by the bridge), so such a pass could only save the look-up,
which costs a fraction of a microsecond against the several per row of reading the two
sides; and descending into a range that differs would
read that range of PostgreSQL a second time. Worse, a key range means PostgreSQL's order
(collations, numeric and composite keys), which the Avro key bytes do not keep, so the
topic side could not even place its keys in the ranges. Hashing ranges pays when rows
would otherwise cross a network to be compared; here they are streamed here anyway.
"""

from __future__ import annotations

import functools
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Final, NamedTuple, Protocol

import psycopg

from bridge.decode.messages import KIND_TEXT, KIND_UNCHANGED
from bridge.errors import ValueConversionError
from bridge.snapshot.catalog import SnapshotTable
from bridge.snapshot.chunks import Chunk, chunk_query
from bridge.snapshot.reader import TableJob, encode_rows, snapshot_source
from bridge.verify import scan
from bridge.verify.deadletters import DeadLetter, Explained
from bridge.verify.state import Decoder, TopicState, differing_columns, kept
from bridge.verify.store import Kept, KeyStore

SAMPLES = 5  # keys shown per kind of mismatch
DEAD_LETTERED_KEYS: Final = 100  # dead-lettered keys listed per table, with their letters
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
    on_disk: bool = False  # the topic's key states passed the memory budget: on disk
    lake: LakeResult | None = None  # with --lake: the lake table's verdict
    # for --repair: what was compared, how far the topic was read, and the keys to fix
    snapshot_table: SnapshotTable | None = None
    job: TableJob | None = None
    decoder: Decoder | None = None
    ends: dict[int, int] = field(default_factory=dict)
    reread_keys: list[tuple[str, ...]] = field(default_factory=list)
    ghost_keys: dict[bytes, Kept] = field(default_factory=dict)
    lake_left: int = 0  # lake keys to fix that --repair cannot (`bridge.verify.lake.LakeFix`)
    # keys that differ because their changes were dead-lettered (not in missing, ghosts or
    # different), with the letter of each (`bridge.verify.deadletters`), and the table's
    # letters before the point
    dead_lettered: int = 0
    dead_lettered_keys: list[dict[str, str]] = field(default_factory=list)
    dead_letters: int = 0
    # of `equal`: rows an external load read, unchanged since, their keys never in the
    # topic (`Loaded`)
    loaded: int = 0

    @property
    def ok(self) -> bool:
        kafka = not (self.missing or self.ghosts or self.different or self.dead_lettered)
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
            "loaded": self.loaded,
            "rows_decoded": self.decoded,
            "missing": self.missing,
            "ghosts": self.ghosts,
            "different": self.different,
            "different_columns": dict(sorted(self.columns.items())),
            "sample_keys": self.samples,
            "dead_lettered": self.dead_lettered,
            "dead_lettered_keys": self.dead_lettered_keys,
            "dead_letters": self.dead_letters,
            "skipped": self.skipped,
            "kafka_state_on_disk": self.on_disk,
            **({} if self.lake is None else {"lake": self.lake.as_dict()}),
        }


class Loaded(NamedTuple):
    """A table's rows came with an external load (`bridge.snapshot.external`, snapshot.mode
    external) at `lsn`, not through its topic: the rows PostgreSQL has at the point that
    `condition` (`bridge.snapshot.external.loaded_condition`) selects are row versions the
    load read, unchanged since. A key-based consumer of the load and the topic holds such a
    row from the load as long as the topic has no record of its key; any record (a change,
    a delete) would have replaced the row version, so with one the row is compared with the
    topic as every other. Rows the load read and deleted since, whose delete the topic
    lacks, are not seen (no row is left to tell): the lake comparison finds those."""

    lsn: int
    condition: str


# framed keys of records by (partition, offset), read from the topic: ghosts whose state
# does not hold their key's bytes (`bridge.verify.topic.record_keys`)
RecordKeys = Callable[[list[tuple[int, int]]], dict[tuple[int, int], bytes]]


def compare_table(
    conn: psycopg.Connection[Any],
    table: SnapshotTable,
    job: TableJob,
    state: TopicState,
    result: TableResult,
    record_keys: RecordKeys,
    lake: LakeSink | None = None,
    letters: Explained | None = None,
    loaded: Loaded | None = None,
) -> None:
    """Fill `result` from the table read on `conn` (inside the point's snapshot); each row's
    key (as `Decoder.key`), framed key and value also go to `lake` when given. The rows'
    states are taken out of `state.keys`: what is left are the keys PostgreSQL lacks.

    With `loaded` (the table came with an external load: `Loaded`), the rows the load read
    and nothing changed since are read after the others, and each of them whose key has
    no record in the topic before the point is equal: the load holds it, not the topic.

    With `letters` (a table that dead-letters or skips its troubles), a difference whose
    key a letter names is counted as dead-lettered, and a row the bridge's encoder cannot
    encode (the trouble that got its change dead-lettered or skipped) is compared by its
    key alone instead of stopping verify: it differs from whatever Kafka holds."""
    decoder = state.decoder
    store = state.keys
    result.records = state.records
    result.after_point = state.after_point
    result.on_disk = store.on_disk
    names = [c.name for c in table.relation.columns]
    key_at = [names.index(k.name) for k in table.key]
    found = _Found(decoder, result, state.placed, letters)
    bodies: _Bodies = job.encoder.row_bodies
    if letters is not None:
        key_only = bytes(KIND_TEXT if i in key_at else KIND_UNCHANGED for i in range(len(names)))
        bodies = _by_key_when_unencodable(bodies, key_only, found.unencodable)
    if not store.on_disk:
        result.live_keys = store.live_count()
    read = functools.partial(_read_rows, conn, job, state, found, bodies, key_at, lake)
    if loaded is None or state.truncated >= loaded.lsn:  # a TRUNCATE since: no loaded row left
        read(table, 0)
    else:  # the rows changed since the load first, then those it read (`Loaded`)
        found.loaded_from = read(restricted(table, f"NOT {loaded.condition}"), 0)
        read(restricted(table, loaded.condition), found.loaded_from)
    if store.on_disk:
        ghosts = _partitions(store, found)
    else:
        ghosts = [(k, s) for k, s in store.states() if scan.live(s)]
    found.finish(ghosts, record_keys)


def _read_rows(
    conn: psycopg.Connection[Any],
    job: TableJob,
    state: TopicState,
    found: _Found,
    bodies: _Bodies,
    key_at: list[int],
    lake: LakeSink | None,
    table: SnapshotTable,
    number: int,
) -> int:
    """`table`'s rows read in key order and compared (or spilled), numbered from `number`;
    returns the number after the last row."""
    decoder, store = state.decoder, state.keys
    all_text = bytes((KIND_TEXT,)) * len(table.relation.columns)
    query, params = chunk_query(table, Chunk(table.label, 0, table.method, None, None))
    source = snapshot_source("", "", state.point, "true")
    with conn.cursor(name=f"verify_{table.relation.oid}") as cursor:
        cursor.itersize = _FETCH
        cursor.execute(query, params)
        while rows := cursor.fetchmany(_FETCH):
            if lake is not None:
                records, _ = encode_rows(rows, job, source)
                for record, row in zip(records, rows, strict=True):
                    key, value = record.key, record.value
                    assert key is not None and value is not None  # a keyed table's "r" record
                    text = tuple(_text(row[i]) for i in key_at)
                    lake.add_row(decoder.key(key, "row"), key, value, text)  # before the claim
            if store.on_disk:
                scan.spill_rows(store, rows, bodies, all_text, key_at, number, decoder.row_scan)
            else:
                unsettled: list[scan.Unsettled] = []
                states = store.memory
                found.equal(
                    scan.settle_rows(states, rows, bodies, all_text, key_at, number, unsettled)
                )
                for number_, key, texts, body, kept_ in unsettled:
                    if not found.from_load(number_, key, kept_):  # undecoded, as settled ones
                        found.row(number_, key, texts, decoder.columns(body), kept_)
            number += len(rows)
    return number


def restricted(table: SnapshotTable, condition: str) -> SnapshotTable:
    """`table` read only where `condition` holds too."""
    found = condition if table.row_filter is None else f"({table.row_filter}) AND {condition}"
    return table._replace(row_filter=found)


def _partitions(store: KeyStore, found: _Found) -> list[tuple[bytes, bytes]]:
    """The spilled rows compared, partition by partition; returns the ghosts."""
    ghosts = []
    for states, chunks in store.partitioned():
        found.result.live_keys += sum(1 for s in states.values() if scan.live(s))
        for chunk in chunks:
            unsettled: list[scan.Unsettled] = []
            found.equal(scan.settle_chunk(states, chunk, store.row_width, unsettled))
            for number, _, where, columns, state in unsettled:
                at = int.from_bytes(where[0][:8], "little")
                size = int.from_bytes(where[0][8:], "little")
                key, texts = scan.row_texts(store.texts(at, size))
                found.row(number, key, texts, columns, state)
        ghosts += [(k, s) for k, s in states.items() if scan.live(s)]
    return ghosts


# the encoder's `row_bodies`: (kinds, values) -> (key body, row body)
_Bodies = Callable[[bytes, tuple[bytes | None, ...]], tuple[bytes, bytes]]


def _by_key_when_unencodable(bodies: _Bodies, key_only: bytes, unencodable: set[bytes]) -> _Bodies:
    """`bodies` (the encoder's `row_bodies`) that, for a row it cannot encode, writes the
    key alone, the other columns as unchanged TOASTed values (NULL, as an old key's row
    is written), and keeps the key in `unencodable`: the row takes its key's state out
    and differs from it. A key that cannot be encoded still stops verify."""

    def write(kinds: bytes, values: tuple[bytes | None, ...]) -> tuple[bytes, bytes]:
        try:
            return bodies(kinds, values)
        except ValueConversionError:
            key, body = bodies(key_only, values)
            unencodable.add(key)
            return key, body

    return write


class _Found:
    """What the comparison found, put in `result` in an order that does not depend on the
    store's: mismatches by row number, ghosts by key."""

    def __init__(
        self,
        decoder: Decoder,
        result: TableResult,
        placed: dict[bytes, bytes],
        letters: Explained | None = None,
    ) -> None:
        self.decoder = decoder
        self.result = result
        self.placed = placed  # `TopicState.placed`: keys their records do not hold
        self.letters = letters
        # (row number, kind, key body, key texts, the letter that explains it)
        self.mismatches: list[tuple[int, str, bytes, tuple[str, ...], DeadLetter | None]] = []
        self.unencodable: set[bytes] = set()  # keys of rows the encoder could not encode
        # the first row number of the rows an external load read (`compare_table`)
        self.loaded_from: int | None = None

    def equal(self, rows: int) -> None:
        self.result.rows += rows
        self.result.equal += rows

    def from_load(self, number: int, key: bytes, state: bytes | None) -> bool:
        """Count a row the external load read (numbered from `loaded_from`) whose key has
        no record in the topic as equal: the consumer holds the load's row (`Loaded`)."""
        if state is not None or self.loaded_from is None or number < self.loaded_from:
            return False
        if key in self.unencodable:  # the load could not have encoded it either
            return False
        result = self.result
        result.rows += 1
        result.equal += 1
        result.loaded += 1
        return True

    def row(
        self,
        number: int,
        key: bytes,
        texts: tuple[bytes, ...],
        columns: bytes,
        state: bytes | None,
    ) -> None:
        """A row its row digest did not settle: compared column by column."""
        if self.from_load(number, key, state):
            return
        result = self.result
        result.rows += 1
        result.decoded += 1
        unencodable = key in self.unencodable
        if state is None or not scan.live(state):
            kind = "missing"
        elif state[scan.COLUMNS_AT :] == columns and not unencodable:
            result.equal += 1
            return
        else:
            kind = "different"
        named = tuple(t.decode() for t in texts)
        letter = None if self.letters is None else self.letters.find(key, named)
        if letter is not None:
            result.dead_lettered += 1
        elif kind == "missing":
            result.missing += 1
        else:
            result.different += 1
            if state is not None and not unencodable:  # else its columns were not written
                result.columns.update(
                    differing_columns(self.decoder.fields, state[scan.COLUMNS_AT :], columns)
                )
        self.mismatches.append((number, kind, key, named, letter))

    def finish(self, ghosts: list[tuple[bytes, bytes]], record_keys: RecordKeys) -> None:
        result, decoder = self.result, self.decoder
        self.mismatches.sort(key=lambda found: found[0])
        for _, kind, key, texts, letter in self.mismatches:
            self._report(kind, key, letter)
            if key not in self.unencodable:  # re-emitting meets the same trouble
                result.reread_keys.append(texts)
        wanted = []
        raw: dict[bytes, bytes] = {}
        for key, state in ghosts:
            partition, offset, key_id = scan.where_of(state)
            body = scan.body_of(key)
            if body is None or state[scan.FLAGS_AT] & scan.RESCANNED:
                wanted.append((partition, offset))
            else:
                raw[key] = b"\0" + key_id.to_bytes(4, "big") + body
        fetched = record_keys(sorted(wanted)) if wanted else {}
        for key, state in ghosts:
            partition, offset, _ = scan.where_of(state)
            framed = raw.get(key) or fetched[partition, offset]
            name = self.placed.get(key) or decoder.key(framed, f"{result.topic} ghost")
            result.ghost_keys[name] = kept(state, framed)
        for name in sorted(result.ghost_keys):  # the same samples whatever the store's order
            letter = None if self.letters is None else self.letters.find(name, None)
            if letter is None:
                result.ghosts += 1
            else:
                result.dead_lettered += 1
            self._report("ghost", name, letter)

    def _report(self, kind: str, key: bytes, letter: DeadLetter | None) -> None:
        """A difference into the samples, or, explained by `letter`, with it into
        `dead_lettered_keys` (up to `DEAD_LETTERED_KEYS`)."""
        result = self.result
        if letter is None:
            result.sample(kind, self.decoder, key)
        elif len(result.dead_lettered_keys) < DEAD_LETTERED_KEYS:
            result.dead_lettered_keys.append(letter.shown(self.decoder.show_key(key), kind))


def _text(value: bytes | None) -> str:
    assert value is not None  # key columns are NOT NULL
    return value.decode()
