"""The Spark apply's cost side by side: `apply_tables` against the MERGE a user writes by hand
and against a floor, one backlog, one session, interleaved.

    python bench/spark_apply.py [--changes 200000] [--tables 10] [--formats delta,iceberg]
                                [--jobs ours,hand,floor] [--rounds 1] [--txn 500]
                                [--max-offsets N] [--master URL] [--stack-json FILE]

The backlog is the bridge's own bytes: each table is played by tests/spark/feed.py's
`TableFeed` (schemas registered in the real registry, records built by the bridge's
encoders, `id int, name text, amount numeric(10,2), ts timestamptz, qty int8`), into a topic
of 2 partitions per table, in transactions of `--txn` changes: inserts of new keys (70%),
updates (20%) and deletes (10%, each followed by its tombstone) of keys inserted earlier.
Producing is not timed; every topic is then read once, untimed, and every job runs once,
untimed, on a warm-up backlog of `--warmup` changes over 2 other topics (the JVM's JIT and
Spark's compiled classes are warm for every job alike).

The jobs, each into fresh tables, in one session (local[2], or `--master`):
* ours: one streaming `read_changes` of all the topics + `apply_tables`, trigger
  availableNow (one micro-batch, or batches of `--max-offsets` records: maxOffsetsPerTrigger);
* hand: what a user writes from the Delta/Iceberg docs: per topic, a Kafka batch read,
  the 5-byte header stripped, `from_avro` with the topic's one writer schema, the newest
  change per key by (commit LSN, offset) with one `max_by`, one `MERGE INTO` (deletes
  delete, no replay guard, no soft deletes, no TRUNCATE, no key-change carry-over, no
  schema evolution);
* floor: the same read, decode and newest per key, written as plain parquet (overwrite).
Rounds rotate the order (ours, hand, floor; then hand, floor, ours; ...) so that no job
always runs on the warmest JVM.

Reported per job: wall s, CPU s (the Python driver + the driver JVM's process tree from
/proc; with --master, the workers' trees too: `--worker-pids`), changes/s, changes per
CPU-s, CPU-µs per change and the CPU ratio to the hand-written job of the same round;
of the JVM's CPU, what its JIT compiler threads and its executor task threads took (the
rest is the driver's planning, GC and bookkeeping); Spark's generated classes and their
compile ms, HotSpot JIT ms, tasks. The tables of ours
(live rows) and of hand must be equal (row count and a hash of every row), and equal the
feed's live key count.

Without `--stack-json` (the JSON line `python deploy/local/stack.py up` prints) the local
stack is started and stopped here.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from e2e import load_stack  # noqa: E402
from spark_common import Counters, Meter, session_conf  # noqa: E402

from bridge.spark.formats import FORMATS, target_table  # noqa: E402
from bridge.spark.jars import iceberg_catalog, spark_session  # noqa: E402
from bridge.spark.reader import read_changes  # noqa: E402
from bridge.spark.registry import SchemaSource  # noqa: E402
from bridge.spark.tables import apply_tables  # noqa: E402
from tests.spark.feed import TableFeed, numeric_typmod  # noqa: E402

COLUMNS = [
    ("id", "int4", -1),
    ("name", "text", -1),
    ("amount", "numeric", numeric_typmod(10, 2)),
    ("ts", "timestamptz", -1),
    ("qty", "int8", -1),
]
DATA = [c for c, _, _ in COLUMNS]
JOBS = ("ours", "hand", "floor")


def start_stack(stack_json: str | None) -> tuple[Any, Any]:
    """(connection info, the stack to stop or None) from a JSON file or a fresh stack."""
    if stack_json:
        info = json.loads(Path(stack_json).read_text().splitlines()[0])
        return SimpleNamespace(**info), None
    stack = load_stack().Stack()
    stack.start()
    return stack, stack


def produce_backlog(stack: Any, tables: int, changes: int, txn: int) -> list[tuple[str, int]]:
    """`changes` changes spread over `tables` topics; returns (topic, live keys) per table."""
    rnd = random.Random(21)
    out = []
    run = uuid.uuid4().hex[:6]
    per_table = changes // tables
    for t in range(tables):
        feed = TableFeed(
            stack.kafka_bootstrap, stack.registry_url, f"bench{run}t{t}", COLUMNS, ["id"]
        )
        live: list[int] = []
        next_id = 1
        done = 0
        while done < per_table:
            batch = []
            for _ in range(min(txn, per_table - done)):
                action = rnd.random() if live else 0.0
                if action < 0.7:
                    key = next_id
                    next_id += 1
                    live.append(key)
                    batch.append(feed.insert(_row(key, rnd)))
                elif action < 0.9:
                    batch.append(feed.update(_row(live[rnd.randrange(len(live))], rnd)))
                else:
                    key = live.pop(rnd.randrange(len(live)))
                    batch.append(feed.delete({"id": str(key)}))
            # Duplicated keys within one transaction are fine: the apply keeps the last.
            feed.commit(*batch)
            done += len(batch)
        feed.producer.flush(60)
        out.append((feed.topic, len(live)))
    print(f"  produced {per_table} changes into each of {tables} topics", file=sys.stderr)
    return out


def _row(key: int, rnd: random.Random) -> dict[str, Any]:
    return {
        "id": str(key),
        "name": f"name {key} {rnd.randrange(10**6)}",
        "amount": f"{rnd.randrange(10**7) / 100:.2f}",
        "ts": "2024-05-06 07:08:09.123456+00",
        "qty": str(rnd.randrange(10**9)),
    }


class Bench:
    """The backlog's topics, the session and where each job's tables go."""

    def __init__(
        self, spark: Any, info: Any, topics: list[str], work: Path, args: Any, tag: str = ""
    ) -> None:
        self.spark = spark
        self.info = info
        self.topics = topics
        self.work = work
        self.args = args
        self.kafka = {"kafka.bootstrap.servers": info.kafka_bootstrap}
        schemas = SchemaSource(info.registry_url)
        try:  # the one writer schema of each topic, as a user would paste it
            writers = {t: schemas.latest(f"{t}-value") for t in topics}
        finally:
            schemas.close()
        missing = sorted(t for t, schema in writers.items() if schema is None)
        if missing:
            raise SystemExit(f"no value schema registered for {', '.join(missing)}")
        self.writers = {t: schema for t, schema in writers.items() if schema is not None}
        self.names = {topic: f"t{n}" for n, topic in enumerate(topics)}
        self.tag = tag  # a warm-up's tables apart from the measured ones

    def target(self, fmt: str, job: str, run: int) -> Callable[[str], str]:
        if fmt == "delta" or job == "floor":
            base = f"{self.work}/{fmt}-{job}{self.tag}{run}/"
        else:
            base = f"bench.{job}{self.tag}{run}."
        return lambda topic: base + self.names[topic]

    def ours(self, fmt: str, run: int) -> None:
        kafka = dict(self.kafka)
        if self.args.max_offsets:
            kafka["maxOffsetsPerTrigger"] = str(self.args.max_offsets)
        stream = read_changes(
            self.spark,
            self.topics,
            kafka_options=kafka,
            registry_url=self.info.registry_url,
            streaming=True,
        )
        query = apply_tables(
            stream,
            self.target(fmt, "ours", run),
            checkpoint=str(self.work / f"checkpoint-{fmt}{self.tag}-{run}"),
            trigger={"availableNow": True},
            table_format=fmt,  # type: ignore[arg-type]
        )
        query.awaitTermination()
        if query.exception() is not None:
            raise RuntimeError(str(query.exception()))

    def newest(self, topic: str) -> Any:
        """The hand-written job's source: the topic's newest change per key."""
        from pyspark.sql import functions as sf  # noqa: PLC0415
        from pyspark.sql.avro.functions import from_avro  # noqa: PLC0415

        raw = (
            self.spark.read.format("kafka")
            .options(**self.kafka)
            .option("subscribe", topic)
            .option("startingOffsets", "earliest")
            .load()
        )
        body = sf.expr("substring(value, 6, length(value) - 5)")
        e = from_avro(body, self.writers[topic]).alias("e")
        row = sf.when(sf.col("e.op") == "d", sf.col("e.before")).otherwise(sf.col("e.after"))
        changes = (
            raw.where("value IS NOT NULL")
            .select(e, "offset")
            .select(
                sf.col("e.op").alias("op"),
                sf.col("e.source.commit_lsn").alias("lsn"),
                "offset",
                row.alias("r"),
            )
        )
        newest = sf.max_by(
            sf.struct(*(sf.col(f"r.{c}").alias(c) for c in DATA[1:]), "op"),
            sf.struct("lsn", "offset"),
        )
        return (
            changes.groupBy(sf.col("r.id").alias("id"))
            .agg(newest.alias("n"))
            .select("id", *(f"n.{c}" for c in DATA[1:]), "n.op")
        )

    def hand(self, fmt: str, run: int) -> None:
        target = self.target(fmt, "hand", run)
        for topic in self.topics:
            source = self.newest(topic)
            name = target(topic)
            if fmt == "delta":
                sql = f"delta.`{name}`"
                if not Path(name).exists():
                    source.drop("op").limit(0).write.format("delta").save(name)
            else:
                sql = name
                if not self.spark.catalog.tableExists(name):
                    source.drop("op").limit(0).writeTo(name).using("iceberg").create()
            source.createOrReplaceTempView("hand_source")
            sets = ", ".join(f"t.{c} = s.{c}" for c in DATA[1:])
            values = ", ".join(f"s.{c}" for c in DATA)
            self.spark.sql(
                f"MERGE INTO {sql} t USING hand_source s ON t.id = s.id "
                "WHEN MATCHED AND s.op = 'd' THEN DELETE "
                f"WHEN MATCHED THEN UPDATE SET {sets} "
                f"WHEN NOT MATCHED AND s.op <> 'd' THEN INSERT ({', '.join(DATA)}) "
                f"VALUES ({values})"
            )

    def floor(self, fmt: str, run: int) -> None:
        target = self.target(fmt, "floor", run)
        for topic in self.topics:
            source = self.newest(topic)
            source.where("op <> 'd'").drop("op").write.mode("overwrite").parquet(target(topic))

    def digest(self, fmt: str, job: str, run: int) -> list[tuple[int, int]]:
        """(live rows, sum of a hash of each live row) per table of a job's run."""
        from pyspark.sql import functions as sf  # noqa: PLC0415

        target = self.target(fmt, job, run)
        out = []
        for topic in self.topics:
            name = target(topic)
            if job == "floor":
                rows = self.spark.read.parquet(name)
            else:
                rows = target_table(self.spark, name, fmt).read()  # type: ignore[arg-type]
            if job == "ours":
                rows = rows.where("NOT _deleted")
            found = rows.agg(sf.count("*"), sf.sum(sf.xxhash64(*DATA) % sf.lit(1 << 40))).first()
            out.append((int(found[0]), int(found[1] or 0)))
        return out


def _line(fmt: str, job: str, run: int, changes: int, got: Counters, hand: Counters | None) -> str:
    ratio = f"{got.cpu / hand.cpu:.2f}" if hand is not None and hand.cpu else "-"
    return (
        f"{fmt:7} {job:5} round {run}: {got.wall:7.1f} s wall, CPU {got.cpu:7.1f} s "
        f"({got.driver:.1f} driver + {got.jvm:.1f} JVM + {got.workers:.1f} workers), "
        f"{changes / got.wall:8,.0f} changes/s, {changes / got.cpu:8,.0f} changes per CPU-s, "
        f"{got.cpu * 1e6 / changes:6.1f} CPU-us/change, CPU/hand {ratio}; "
        f"of the JVM's CPU: JIT compiler threads {got.jit_cpu:.1f} s, task threads "
        f"{got.task_cpu:.1f} s; "
        f"{got.classes} classes compiled in {got.compile_ms:,.0f} ms, JIT {got.jit_ms:,.0f} ms, "
        f"{got.tasks} tasks"
    )


def _arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--changes", type=int, default=200_000)
    parser.add_argument("--tables", type=int, default=10)
    parser.add_argument("--formats", default="delta,iceberg")
    parser.add_argument("--jobs", default=",".join(JOBS))
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--txn", type=int, default=500, help="changes per transaction")
    parser.add_argument("--max-offsets", type=int, default=0, help="maxOffsetsPerTrigger")
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--worker-pids", default="", help="with --master: the workers' pids")
    parser.add_argument("--warmup", type=int, default=10_000, help="warm-up changes; 0: none")
    parser.add_argument("--stack-json")
    parser.add_argument("--json", help="append the figures to this file as JSON lines")
    return parser.parse_args()


def main() -> None:
    args = _arguments()
    formats = args.formats.split(",")
    jobs = args.jobs.split(",")
    assert set(formats) <= set(FORMATS) and set(jobs) <= set(JOBS), (formats, jobs)

    info, stack = start_stack(args.stack_json)
    work = Path(tempfile.mkdtemp(prefix="bench-spark-apply-"))
    try:
        started = time.monotonic()
        produced = produce_backlog(info, args.tables, args.changes, args.txn)
        print(f"backlog produced in {time.monotonic() - started:.0f}s", file=sys.stderr)
        conf = {"spark.sql.warehouse.dir": str(work), **session_conf()}
        conf |= iceberg_catalog("bench", str(work / "warehouse"))
        spark = spark_session("bench-spark-apply", args.master, extra_conf=conf)
        topics = [topic for topic, _ in produced]
        bench = Bench(spark, info, topics, work, args)
        worker_pids = [int(p) for p in args.worker_pids.split(",") if p]
        meter = Meter(spark, worker_pids)
        read = spark.read.format("kafka").options(**bench.kafka, subscribe=",".join(topics))
        print(f"read once: {read.load().count()} records", file=sys.stderr)  # untimed
        if args.warmup:
            warm = [t for t, _ in produce_backlog(info, 2, args.warmup, args.txn)]
            warming = Bench(spark, info, warm, work, args, tag="warm")
            for fmt in formats:
                for job in jobs:
                    getattr(warming, job)(fmt, 0)
            print("warmed up", file=sys.stderr)
        changes = args.changes // args.tables * args.tables
        results: dict[tuple[str, str], list[Counters]] = {}
        for run in range(args.rounds):
            for fmt in formats:
                order = jobs[run % len(jobs) :] + jobs[: run % len(jobs)]
                got: dict[str, Counters] = {}
                for job in order:
                    with meter.measure() as measured:
                        getattr(bench, job)(fmt, run)
                    got[job] = measured[0]
                    results.setdefault((fmt, job), []).append(got[job])
                for job in jobs:
                    print(_line(fmt, job, run, changes, got[job], got.get("hand")), flush=True)
                _check(bench, fmt, run, jobs, [live for _, live in produced])
                if args.json:
                    _record(args.json, fmt, run, changes, args.tables, got)
        _summary(results, changes, args)
        spark.stop()
    finally:
        shutil.rmtree(work, ignore_errors=True)
        if stack is not None:
            stack.stop()


def _record(
    path: str, fmt: str, run: int, changes: int, tables: int, got: dict[str, Counters]
) -> None:
    """One round's figures appended to `path`, a JSON line per job."""
    with open(path, "a") as out:
        for job, c in got.items():
            line = {"format": fmt, "job": job, "round": run, "changes": changes, "tables": tables}
            out.write(json.dumps({**line, **vars(c)}) + "\n")


def _check(bench: Bench, fmt: str, run: int, jobs: list[str], live: list[int]) -> None:
    digests = {job: bench.digest(fmt, job, run) for job in jobs}
    for job, found in digests.items():
        assert [n for n, _ in found] == live, f"{fmt} {job}: live rows {found} != feed {live}"
    assert len({json.dumps(d) for d in digests.values()}) == 1, f"{fmt}: tables differ {digests}"


def _summary(results: dict[tuple[str, str], list[Counters]], changes: int, args: Any) -> None:
    """One markdown row per format and job: medians over the rounds."""
    print(
        f"\n{changes:,} changes, {args.tables} tables, {args.rounds} round(s), medians:\n"
        "| format | job | wall s | CPU s | changes/s | changes per CPU-s | CPU-µs/change "
        "| CPU / hand | classes | compile ms | JIT ms | tasks |\n"
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
    )
    for (fmt, job), runs in results.items():
        hand = results.get((fmt, "hand"))
        ratios = [r.cpu / h.cpu for r, h in zip(runs, hand or [], strict=False)]
        wall = statistics.median(r.wall for r in runs)
        cpu = statistics.median(r.cpu for r in runs)
        print(
            f"| {fmt} | {job} | {wall:.1f} | {cpu:.1f} | {changes / wall:,.0f} "
            f"| {changes / cpu:,.0f} | {cpu * 1e6 / changes:.1f} "
            f"| {statistics.median(ratios):.2f} | "
            f"{statistics.median(r.classes for r in runs):.0f} "
            f"| {statistics.median(r.compile_ms for r in runs):,.0f} "
            f"| {statistics.median(r.jit_ms for r in runs):,.0f} "
            f"| {statistics.median(r.tasks for r in runs):.0f} |"
            if ratios
            else f"| {fmt} | {job} | {wall:.1f} | {cpu:.1f} | {changes / wall:,.0f} "
            f"| {changes / cpu:,.0f} | {cpu * 1e6 / changes:.1f} | - | | | | |"
        )


if __name__ == "__main__":
    main()
