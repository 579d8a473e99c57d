"""`bridge verify --lake TABLE=TARGET` (alias `--delta`): a Delta or Iceberg table written by
`bridge.spark.apply` checked against PostgreSQL at the verification point, its format decided
as the apply decides it (`bridge.spark.formats.target_table`).

The lake has no position of its own that says "everything before L is applied": a
streaming apply's micro-batch may end at different offsets per partition, and an idle
database never produces a change at or after L. What the lake table does keep is the
position of the change that wrote each row (`_lsn`, the commit LSN; `_deleted` for a soft
delete), and verify has just folded the topic up to L: for each key it knows the commit
LSN of the newest change before L. So the check is made per key, on one pinned version
(Delta's version, Iceberg's snapshot), with no assumption about how far the apply got:

- a lake row whose `_lsn` is at or after L changed after the point: left out (as a key
  that is absent while the topic holds a change of it at or after L: a hard delete);
- a lake row older than the topic's change of that key (or absent while the topic has
  the key alive, or alive and older than a TRUNCATE the topic holds) is behind: the
  apply has not reached it yet (or the row was removed from the lake: the two look alike).
  verify re-reads the newest version until no key is behind, and reports the keys
  still behind after `--timeout` as a mismatch;
- every other key is where the apply must have left it, and its row must equal
  PostgreSQL's at L: missing (PostgreSQL has it, the lake not or soft-deleted), ghost (the
  lake has it alive, PostgreSQL not) or different (with the columns that differ).

Both sides are brought to one form by the reader the apply itself uses: PostgreSQL's rows
are encoded by the bridge's encoder (op "r", as `compare` does) and decoded with
`bridge.spark.reader.ChangeDecoder`, the topic keys too, so every documented conversion
lands in the same Spark types as the lake's columns. A row changed in the lake behind the
apply's back keeps its `_lsn`, so it is compared, and differs.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Final

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as sf
from pyspark.sql.types import (
    BinaryType,
    BooleanType,
    DataType,
    IntegerType,
    LongType,
    MapType,
    StringType,
    StructField,
    StructType,
)

from bridge.config import Config
from bridge.errors import VerifyError
from bridge.spark.apply import TARGET_META
from bridge.spark.formats import Target, target_table
from bridge.spark.reader import META_TYPES, ChangeDecoder
from bridge.spark.registry import SchemaSource
from bridge.verify.compare import LAKE_FORMATS, LAKE_KINDS, SAMPLES, LakeResult
from bridge.verify.state import TopicState, schema_id
from bridge.verify.store import Kept

POLL_S: Final = 1.0
FIX_KINDS: Final = ("missing", "ghost", "different", "behind")  # the kinds --repair fixes
_RAW = StructType(
    [
        StructField("topic", StringType(), False),
        StructField("partition", IntegerType(), False),
        StructField("offset", LongType(), False),
        StructField("key", BinaryType(), True),
        StructField("value", BinaryType(), True),
    ]
)
_SIDE = StructType(
    [
        StructField("__row", LongType(), False),
        StructField("__t_lsn", LongType(), True),
        StructField("__t_deleted", BooleanType(), True),
        StructField("__later", BooleanType(), False),
    ]
)


def _latest(target: Target) -> tuple[int, DataFrame]:
    """The newest version of the lake table and that version, pinned (`Target.pinned`)."""
    try:
        return target.pinned()
    except Exception as exc:  # Spark's AnalysisException and friends: no such table
        raise VerifyError(
            f"cannot open the {LAKE_FORMATS[target.format]} table {target.name}: "
            + str(exc).splitlines()[0],
            hint="--lake names the Delta path or table, or the Iceberg catalog table, the Spark "
            "apply writes (an Iceberg catalog configured with --spark-conf)",
        ) from None


class LakeSide:
    """PostgreSQL's rows and the topic's positions of one table, as Spark rows keyed like
    the lake (`add_row` per PostgreSQL row while `compare` reads them, then `compare`).

    Each row's key (`Decoder.key`) and PostgreSQL's key text (None for a key PostgreSQL
    lacks) are kept by row number, for the keys `--repair` must fix (`LakeFix`)."""

    def __init__(self, topic: str, state: TopicState) -> None:
        self.topic = topic
        self.state = state
        self._raw: list[tuple[str, int, int, bytes | None, bytes | None]] = []
        self._side: list[tuple[int, int | None, bool | None, bool]] = []
        self._keys: list[tuple[bytes, tuple[str, ...] | None]] = []
        self._seen: set[bytes] = set()
        self._groups: set[tuple[str, int | None, int | None, int | None]] = set()

    def add_row(self, name: bytes, key: bytes, value: bytes, text: tuple[str, ...]) -> None:
        self._add(name, key, value, text)
        self._seen.add(name)

    def _add(
        self, name: bytes, key: bytes, value: bytes | None, text: tuple[str, ...] | None = None
    ) -> None:
        """One raw Kafka row for the reader (offset = row number) and its side columns."""
        kept = self.state.get(name)
        later = self.state.later is not None and name in self.state.later
        row = len(self._raw)
        self._raw.append((self.topic, 0, row, key, value))
        self._keys.append((name, text))
        # the reader's (topic, value id, key id of a key-only row, old key id), known here:
        # no Spark job to find them
        self._groups.add(
            (self.topic, None, schema_id(key, self.topic), None)
            if value is None
            else (self.topic, schema_id(value, self.topic), None, None)
        )
        self._side.append(
            (row, None if kept is None else kept.lsn, None if kept is None else kept.deleted, later)
        )

    def _finish(self) -> None:
        """Keys the topic knows and PostgreSQL does not: key-only rows."""
        for name, kept in self.state.items():
            if name not in self._seen:
                self._add(name, kept.raw_key, None)
                self._seen.add(name)
        for name, raw in (self.state.later or {}).items():
            if name not in self._seen:
                self._add(name, raw, None)
                self._seen.add(name)

    def compare(
        self,
        spark: SparkSession,
        cfg: Config,
        target: str,
        key_columns: list[str],
        timeout: float,
        fix: LakeFix | None = None,
    ) -> LakeResult:
        """Judge the newest version of the lake table, re-read while keys are behind (module
        docstring); with `fix`, the keys of the last judgement that differ go there."""
        self._finish()
        schemas = SchemaSource(cfg.registry.url, _auth(cfg))
        try:
            raw = spark.createDataFrame(self._raw, _RAW)
            decoded = ChangeDecoder(schemas, "keep").decode(raw, self._groups)
        finally:
            schemas.close()
        data = [c for c in decoded.columns if c not in META_TYPES and c not in key_columns]
        side = spark.createDataFrame(self._side, _SIDE)
        ours = (
            decoded.join(side, decoded["_offset"] == side["__row"])
            .select(
                *key_columns,
                *(sf.col(c).alias(f"__p_{c}") for c in data),
                (~sf.col("_tombstone")).alias("__pg"),
                "__row",
                "__t_lsn",
                "__t_deleted",
                "__later",
            )
            .persist()
        )
        table = target_table(spark, target)  # the format as the apply decides it
        deadline = time.monotonic() + timeout
        try:
            while True:
                version, lake = _latest(table)
                judged = _judge(ours, lake, key_columns, data, self.state)
                result = _summarise(judged, table, version, key_columns, data)
                if not result.counts["behind"] or time.monotonic() > deadline:
                    if fix is not None and not result.ok:
                        self._to_fix(judged, fix)
                    return result
                time.sleep(POLL_S)
        finally:
            ours.unpersist()

    def _to_fix(self, judged: DataFrame, fix: LakeFix) -> None:
        """The rows behind the keys that differ: PostgreSQL's to re-read, the others
        (alive in the lake, not in PostgreSQL) to delete through the topic."""
        differ = judged.where(sf.col("__kind").isin(*FIX_KINDS)).select("__row").collect()
        for (row,) in differ:
            if row is None:  # a key neither PostgreSQL nor the topic has
                fix.left += 1
                continue
            name, text = self._keys[row]
            kept = self.state.get(name)
            if text is not None:
                fix.reread.append(text)
            elif kept is not None:  # the topic knows the key: its newest record says where
                fix.delete[name] = kept
            else:  # changed after the point only (`state.later`)
                fix.left += 1


@dataclass
class LakeFix:
    """What `--repair` does for the lake's differing keys, through the topic: `reread`
    (PostgreSQL's key text), `delete` (topic key states, deleted or not), and `left`: keys
    it cannot fix, lake keys the topic never held (no key bytes nor partition to delete
    them with: delete them from the lake) or changed only after the point (the next verify
    judges them)."""

    reread: list[tuple[str, ...]] = field(default_factory=list)
    delete: dict[bytes, Kept] = field(default_factory=dict)
    left: int = 0


def _auth(cfg: Config) -> tuple[str, str] | None:
    user, secret = cfg.registry.basic_auth_user, cfg.registry.basic_auth_password
    if user is None:
        return None
    return user, "" if secret is None else secret.get_secret_value()


def _judge(
    ours: DataFrame, lake: DataFrame, keys: list[str], data: list[str], state: TopicState
) -> DataFrame:
    """Each key with its kind (`KINDS`, or null when neither side has it alive) and the
    columns that differ."""
    check_meta(lake)
    have = dict(zip(lake.columns, (f.dataType for f in lake.schema.fields), strict=True))
    ours_types = {f.name: f.dataType for f in ours.schema.fields}
    theirs = lake.select(
        *keys,
        *(
            (
                sf.col(c).cast(ours_types[f"__p_{c}"])
                if c in have
                else sf.lit(None).cast(ours_types[f"__p_{c}"])
            ).alias(f"__d_{c}")
            for c in data
        ),
        sf.col("_lsn").alias("__d_lsn"),
        sf.coalesce(sf.col("_deleted"), sf.lit(False)).alias("__d_deleted"),
        sf.lit(True).alias("__d"),
    )
    both = ours.join(theirs, keys, "full_outer")
    differ = [
        sf.when(~_same(sf.col(f"__p_{c}"), sf.col(f"__d_{c}"), ours_types[f"__p_{c}"]), sf.lit(c))
        for c in data
    ]
    columns = sf.filter(sf.array(*differ), lambda x: x.isNotNull()) if differ else sf.array()
    kind = lake_kind(columns, state.point, state.truncated)
    return both.select(*keys, "__row", kind.alias("__kind"), columns.alias("__columns"))


def check_meta(lake: DataFrame) -> None:
    """The columns that say which change wrote a lake row (`_lsn`, `_deleted`) are there."""
    missing_meta = [m for m in ("_lsn", "_deleted") if m not in lake.columns]
    if missing_meta:
        raise VerifyError(
            f"the lake table lacks {', '.join(missing_meta)}",
            hint="verify reads tables written by bridge.spark.apply, which keeps "
            + ", ".join(TARGET_META),
        )


def lake_kind(columns: Column, point: int, truncated: int) -> Column:
    """A key's kind (`LAKE_KINDS`, or null when neither side has it alive) from the lake's
    row (`__d` present, `__d_lsn`, `__d_deleted`), the topic's newest change before the
    point (`__t_lsn`, `__t_deleted`), `__pg` (PostgreSQL has the key), `__later` (the
    topic changed it at or after the point) and the `columns` that differ; also
    `bridge verify --spark --delta`'s (`bridge.verify.distributed`)."""
    d = sf.coalesce(sf.col("__d"), sf.lit(False))
    d_lsn = sf.coalesce(sf.col("__d_lsn"), sf.lit(0))
    d_live = d & ~sf.col("__d_deleted")
    t = sf.col("__t_lsn").isNotNull()
    t_live = t & ~sf.coalesce(sf.col("__t_deleted"), sf.lit(False))
    pg = sf.coalesce(sf.col("__pg"), sf.lit(False))
    later = sf.coalesce(sf.col("__later"), sf.lit(False))
    return (
        sf.when(d & (d_lsn >= point), "after_point")
        .when(~d & later, "after_point")
        .when(t & ((~d & t_live) | (d & (d_lsn < sf.col("__t_lsn")))), "behind")
        .when(~t & d_live & (d_lsn < truncated), "behind")
        .when(pg & ~d_live, "missing")
        .when(~pg & d_live, "ghost")
        .when(pg & d_live & (sf.size(columns) == 0), "equal")
        .when(pg & d_live, "different")
    )


def _same(a: Column, b: Column, kind: DataType) -> Column:
    """Null-safe equality (NaN equals NaN in Spark); maps are not comparable: as JSON."""
    if "map<" in kind.simpleString() or isinstance(kind, MapType):
        return sf.to_json(sf.struct(a.alias("v"))).eqNullSafe(sf.to_json(sf.struct(b.alias("v"))))
    return a.eqNullSafe(b)


def _summarise(
    judged: DataFrame, target: Target, version: int, keys: list[str], data: list[str]
) -> LakeResult:
    """The lake's verdict from `tally`."""
    mismatches = [k for k in LAKE_KINDS if k not in ("equal", "after_point")]
    result = LakeResult(target.name, version, target.format)
    counts, columns, samples = tally(judged, LAKE_KINDS, mismatches, keys, data)
    result.counts.update(counts)
    result.columns.update(columns)
    result.samples = samples
    return result


def tally(
    judged: DataFrame,
    kinds: Sequence[str],
    sampled: Sequence[str],
    keys: list[str],
    data: list[str],
) -> tuple[dict[str, int], dict[str, int], dict[str, list[str]]]:
    """Keys per kind (`__kind`) and keys "different" per column (`__columns`) in one pass,
    then the first few keys (in key order, as JSON) of each kind in `sampled` that has any,
    a bounded top-n each however many keys differ; zero counts left out. Also `bridge verify
    --spark`'s (`bridge.verify.distributed`), which persists `judged` for the passes."""
    kind = sf.col("__kind")
    row = judged.agg(
        *(sf.count_if(kind == k).alias(f"n_{k}") for k in kinds),
        *(
            sf.count_if((kind == "different") & sf.array_contains("__columns", c)).alias(f"c{i}")
            for i, c in enumerate(data)
        ),
    ).first()
    assert row is not None  # a global aggregate has one row
    counts = {k: int(row[f"n_{k}"]) for k in kinds if row[f"n_{k}"]}
    columns = {c: int(row[f"c{i}"]) for i, c in enumerate(data) if row[f"c{i}"]}
    first = sf.to_json(sf.struct(*keys)).alias("k")
    samples = {
        k: [
            json.dumps(json.loads(r["k"]), sort_keys=True, ensure_ascii=False)
            for r in judged.where(kind == k).orderBy(*keys).limit(SAMPLES).select(first).collect()
        ]
        for k in sampled
        if counts.get(k)
    }
    return counts, columns, samples
