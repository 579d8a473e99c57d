"""Spark apply throughput: a backlog of changes across N tables MERGEd into Delta (or Iceberg),
local[2].

    python bench/spark_apply.py [--changes 1000000] [--tables 10] [--txn 500]
                                [--max-offsets N] [--format delta|iceberg] [--stack-json FILE]

The backlog is the bridge's own bytes: each table is played by tests/spark/feed.py's
`TableFeed` (schemas registered in the real registry, records built by the bridge's
encoders, `id int, name text, amount numeric(10,2), ts timestamptz, qty int8`), into a topic
of 2 partitions per table, in transactions of `--txn` changes: inserts of new keys (70%),
updates (20%) and deletes (10%) of keys inserted earlier. Producing is not timed.

Then, timed: one streaming `read_changes` of all the topics + `apply_tables` (the
many-tables job: each micro-batch split by table, each table MERGEd with its key) with
trigger availableNow (so exactly the backlog, in one micro-batch, or in batches of
`--max-offsets` records per trigger: maxOffsetsPerTrigger) into fresh Delta tables
(`--format iceberg`: tables of an Iceberg Hadoop catalog in the work directory).
Reported: changes, seconds from the query's start until it finished, changes/s, and CPU
seconds of the Spark JVM (from /proc) and of this Python driver. The final tables are
checked against the keyed state the feed produced (live row count per table).

Without `--stack-json` (the JSON line `python deploy/local/stack.py up` prints) the local
stack is started and stopped here.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import sys
import tempfile
import time
import uuid
from pathlib import Path
from types import SimpleNamespace
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from e2e import load_stack  # noqa: E402

from bridge.spark.formats import FORMATS, target_table  # noqa: E402
from bridge.spark.jars import iceberg_catalog, spark_session  # noqa: E402
from bridge.spark.reader import read_changes  # noqa: E402
from bridge.spark.tables import apply_tables  # noqa: E402
from tests.spark.feed import TableFeed, numeric_typmod  # noqa: E402

COLUMNS = [
    ("id", "int4", -1),
    ("name", "text", -1),
    ("amount", "numeric", numeric_typmod(10, 2)),
    ("ts", "timestamptz", -1),
    ("qty", "int8", -1),
]


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
        print(f"  produced {per_table} changes into {feed.topic}", file=sys.stderr)
    return out


def _row(key: int, rnd: random.Random) -> dict[str, Any]:
    return {
        "id": str(key),
        "name": f"name {key} {rnd.randrange(10**6)}",
        "amount": f"{rnd.randrange(10**7) / 100:.2f}",
        "ts": "2024-05-06 07:08:09.123456+00",
        "qty": str(rnd.randrange(10**9)),
    }


def jvm_cpu_seconds(spark: Any) -> float:
    pid = spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid()
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--changes", type=int, default=1_000_000)
    parser.add_argument("--tables", type=int, default=10)
    parser.add_argument("--txn", type=int, default=500, help="changes per transaction")
    parser.add_argument("--max-offsets", type=int, default=0, help="maxOffsetsPerTrigger")
    parser.add_argument("--format", choices=FORMATS, default="delta", help="table format")
    parser.add_argument("--stack-json")
    args = parser.parse_args()

    info, stack = start_stack(args.stack_json)
    work = Path(tempfile.mkdtemp(prefix="bench-spark-apply-"))
    try:
        started = time.monotonic()
        topics = produce_backlog(info, args.tables, args.changes, args.txn)
        print(f"backlog produced in {time.monotonic() - started:.0f}s", file=sys.stderr)
        conf = {"spark.sql.warehouse.dir": str(work)}
        if args.format == "iceberg":
            conf |= iceberg_catalog("bench", str(work / "warehouse"))
        spark = spark_session("bench-spark-apply", extra_conf=conf)

        names = {topic: f"t{n}" for n, (topic, _) in enumerate(topics)}
        base = f"{work}/" if args.format == "delta" else "bench.apply."

        def table_of(topic: str) -> str:
            return base + names[topic]

        kafka = {"kafka.bootstrap.servers": info.kafka_bootstrap}
        if args.max_offsets:
            kafka["maxOffsetsPerTrigger"] = str(args.max_offsets)
        cpu0, py0, t0 = jvm_cpu_seconds(spark), time.process_time(), time.monotonic()
        stream = read_changes(
            spark,
            [topic for topic, _ in topics],
            kafka_options=kafka,
            registry_url=info.registry_url,
            streaming=True,
        )
        query = apply_tables(
            stream,
            table_of,
            checkpoint=str(work / "checkpoint"),
            trigger={"availableNow": True},
            table_format=args.format,
        )
        query.awaitTermination()
        seconds = time.monotonic() - t0
        jvm, py = jvm_cpu_seconds(spark) - cpu0, time.process_time() - py0
        for topic, live in topics:
            got = target_table(spark, table_of(topic), args.format).read()
            got_live = got.where("NOT _deleted").count()
            assert got_live == live, f"{topic}: {got_live} live rows, the feed left {live}"
        changes = args.changes // args.tables * args.tables
        batches = (
            f"maxOffsetsPerTrigger {args.max_offsets}" if args.max_offsets else "one micro-batch"
        )
        print(
            f"{args.format}: {changes} changes, {args.tables} tables, {batches}: "
            f"{seconds:.1f}s, {changes / seconds:,.0f} changes/s, "
            f"CPU {jvm:.0f}s JVM + {py:.1f}s Python driver "
            f"({changes / (jvm + py):,.0f} changes per CPU-second)"
        )
        spark.stop()
    finally:
        shutil.rmtree(work, ignore_errors=True)
        if stack is not None:
            stack.stop()


if __name__ == "__main__":
    main()
