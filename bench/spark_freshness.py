"""Freshness of the lake: PostgreSQL commit -> row readable in the Delta table, at a steady
offered rate, with the streaming apply on a trigger interval.

    python bench/spark_freshness.py [--rates 1000,5000] [--seconds 90] [--warmup 20]
                                    [--triggers "5 seconds"] [--master local[2]]

Everything is real: PostgreSQL 18 (deploy/local/stack_pg_npm.py), Kafka and the registry of
deploy/local/stack.py, the bridge as `python -m bridge run` streaming one table
(bench/e2e.py's `Bridge`), and one Spark session running `read_changes(...,
streaming=True)` + `apply_changes(..., trigger={"processingTime": ...})` into a Delta table.
The writer is bench/latency.py's: every 10 ms one transaction holding that tick's share of
the offered rate, 50% inserts, 40% updates of live rows, 10% deletes of the oldest rows
(10 changes per transaction at 1,000/s, 50 at 5,000/s). The first `--warmup` seconds of each
run (Delta table creation, the first micro-batches, the JIT) are written but not measured.

Per change (every insert, update and delete committed in the measured window):
* commit time = `source.ts_ms` of the bridge's record: the commit timestamp pgoutput sends
  in the transaction's BEGIN, the same one `pg_xact_commit_timestamp` returns (to the ms);
* commit -> Kafka = the record's CreateTime (set by the bridge's producer) - commit time;
* commit -> visible in Delta = the Delta commit timestamp of the first table version holding
  this change or a newer one of its key - commit time. The target has the change data feed
  on (`delta.enableChangeDataFeed` as a session default, so from version 0); every row
  version the apply wrote is a feed row (insert / update_postimage; deletes are soft, so a
  delete is a row version too) with its `_seq` and `_commit_timestamp`. That timestamp is the
  modification time of the version's `_delta_log/N.json`, written just before the rename
  that makes the version readable: exact to the ms and with no sampling error, where polling
  the table's history would add the poll interval. A change the micro-batch folded into a
  newer one of its key (insert then update in one batch) became readable with that newer
  version, so it counts from there, not as lost; a change with no version at or after it
  fails the run.

Reported per run: offered and achieved changes/s, changes measured, p50/p95/p99/max of both
figures, and the CPU the bridge process and the Spark side (the Python driver + the driver
JVM's process tree, spark_common.Meter) used during the measured window, as % of one core;
the micro-batches that had input (warm-up included) and their durations: a batch longer than
the trigger interval runs the query back to back, and then the batch time, not the trigger,
sets the freshness.
The 1-minute load average before and after each run is printed too: the machine is shared.
"""

from __future__ import annotations

import argparse
import bisect
import importlib
import json
import multiprocessing
import os
import shutil
import sys
import tempfile
import time
import uuid
from collections.abc import Iterable, Sequence
from pathlib import Path
from types import SimpleNamespace
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import psycopg  # noqa: E402
from e2e import DB, Bridge, Slot, Visible, create_topic, insert_lsn, load_stack, wait  # noqa: E402
from latency import DDL, summary, write  # noqa: E402
from spark_common import Meter, session_conf  # noqa: E402

Seq = tuple[int, int, int]  # bridge.spark.reader.SEQ_TYPE: commit LSN, change LSN, offset
Change = tuple[Any, Seq, int, int]  # key, _seq, commit ms, Kafka CreateTime ms
Version = tuple[Any, Seq, int]  # key, _seq, Delta commit timestamp ms


def lags(changes: Iterable[Change], versions: Iterable[Version]) -> list[tuple[int, int]]:
    """(commit -> Kafka, commit -> visible) ms of each change: visible = the earliest Delta
    commit among the versions of its key at or after its `_seq` (a change folded into a newer
    one became readable with it). A change with no such version is a lost change: error."""
    by_key: dict[Any, list[tuple[Seq, int]]] = {}
    for key, seq, at in versions:
        by_key.setdefault(key, []).append((seq, at))
    earliest: dict[Any, tuple[list[Seq], list[int]]] = {}
    for key, found in by_key.items():
        found.sort()
        suffix = [at for _, at in found]
        for i in range(len(suffix) - 2, -1, -1):
            suffix[i] = min(suffix[i], suffix[i + 1])
        earliest[key] = ([seq for seq, _ in found], suffix)
    out = []
    for key, seq, commit_ms, kafka_ms in changes:
        seqs, suffix = earliest.get(key, ([], []))
        i = bisect.bisect_left(seqs, seq)
        if i == len(seqs):
            raise SystemExit(f"key {key!r}: no table version at or after {seq}: change lost")
        out.append((kafka_ms - commit_ms, suffix[i] - commit_ms))
    return out


class Lake:
    """One Spark session; per run a streaming apply of one topic into a Delta table with the
    change data feed on, and what it read back afterwards."""

    def __init__(self, master: str, work: Path) -> None:
        from bridge.spark.jars import spark_session  # noqa: PLC0415 (pyspark: slow to import)

        conf = {
            "spark.sql.warehouse.dir": str(work),
            "spark.databricks.delta.properties.defaults.enableChangeDataFeed": "true",
            # every micro-batch's progress kept (100 by default): their durations are reported
            "spark.sql.streaming.numRecentProgressUpdates": "100000",
            **session_conf(),
        }
        self.spark = spark_session("bench-spark-freshness", master, extra_conf=conf)
        self.meter = Meter(self.spark)
        self.work = work

    def start(self, info: Any, topic: str, trigger: str) -> Any:
        from bridge.spark.apply import apply_changes  # noqa: PLC0415
        from bridge.spark.reader import read_changes  # noqa: PLC0415

        stream = read_changes(
            self.spark,
            topic,
            kafka_options={"kafka.bootstrap.servers": info.kafka_bootstrap},
            registry_url=info.registry_url,
            streaming=True,
        )
        return apply_changes(
            stream,
            str(self.work / topic),
            ["id"],
            checkpoint=str(self.work / f"{topic}-checkpoint"),
            trigger={"processingTime": trigger},
        )

    @staticmethod
    def applied(query: Any) -> int:
        """Records the query's finished micro-batches covered (their end offsets' sum)."""
        progress = query.lastProgress
        if progress is None:
            return 0
        ends = json.loads(progress.json)["sources"][0]["endOffset"]
        return sum(int(n) for parts in ends.values() for n in parts.values())

    def readback(
        self, info: Any, topic: str, since_ms: float
    ) -> tuple[list[Change], list[Version]]:
        """The changes committed since `since_ms` with their Kafka CreateTime, and every row
        version of the target with its Delta commit timestamp."""
        from pyspark.sql import functions as sf  # noqa: PLC0415

        from bridge.spark.reader import read_changes  # noqa: PLC0415

        kafka = {"kafka.bootstrap.servers": info.kafka_bootstrap}
        changes = read_changes(
            self.spark, topic, kafka_options=kafka, registry_url=info.registry_url
        )
        created = (
            self.spark.read.format("kafka")
            .options(**kafka, subscribe=topic, startingOffsets="earliest")
            .load()
            .select(
                sf.col("partition").alias("_partition"),
                sf.col("offset").alias("_offset"),
                sf.unix_millis("timestamp").alias("created"),
            )
        )
        rows = (
            changes.select(
                "id", "_seq", sf.unix_millis("_commit_ts").alias("commit"), "_partition", "_offset"
            )
            .where(sf.col("commit") >= sf.lit(int(since_ms)))
            .join(created, ["_partition", "_offset"])
            .select("id", "_seq", "commit", "created")
            .collect()
        )
        feed = (
            self.spark.read.format("delta")
            .option("readChangeFeed", "true")
            .option("startingVersion", 0)
            .load(str(self.work / topic))
            .where("_change_type IN ('insert', 'update_postimage')")
            .select("id", "_seq", sf.unix_millis("_commit_timestamp").alias("at"))
            .collect()
        )
        return (
            [(r.id, tuple(r._seq), r.commit, r.created) for r in rows],
            [(r.id, tuple(r._seq), r.at) for r in feed],
        )


def postgres_18(stack: Any) -> tuple[Any, Any]:
    """(PostgreSQL 18 beside the stack's Kafka and registry, as `Bridge` reads a stack; the
    cluster to stop)."""
    # deploy/local, where stack_pg_npm lives, is on sys.path once stack.py is loaded
    cluster = importlib.import_module("stack_pg_npm").ModernPostgres()
    pg = cluster.start()
    pg.create_database(DB)
    info = SimpleNamespace(
        pg_host=pg.host,
        pg_port=pg.port,
        pg_user=pg.user,
        pg_password=pg.password,
        dsn=pg.dsn,
        kafka_bootstrap=stack.kafka_bootstrap,
        registry_url=stack.registry_url,
    )
    return info, cluster


def run(
    info: Any, lake: Lake, workdir: Path, *, rate: float, trigger: str, args: Any
) -> dict[str, Any]:
    prefix = f"fresh_{uuid.uuid4().hex[:8]}"
    topic = f"{prefix}.public.lat"
    dsn = str(info.dsn(DB))
    load_before = os.getloadavg()[0]
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("DROP TABLE IF EXISTS lat")
        conn.execute(DDL)
        create_topic(info.kafka_bootstrap, topic)
        bridge = Bridge(info, prefix, workdir, exactly_once=False)
        slot = Slot(conn, prefix)
        bridge.start()
        wait(lambda: slot.state()[0], 60, "the slot", bridge.check)
        query = lake.start(info, topic, trigger)
        ours, theirs = multiprocessing.Pipe()
        writer = multiprocessing.Process(
            target=write, args=(dsn, rate, args.seconds, 100, theirs, args.warmup)
        )
        writer.start()
        started = time.monotonic()
        time.sleep(args.warmup)  # the measured window starts with the writer's
        bridge0, spark0 = bridge.cpu_s(), lake.meter.read(tasks=False).cpu
        window0 = time.monotonic()

        def query_alive() -> None:
            bridge.check()
            if query.exception() is not None:
                raise SystemExit(f"the streaming apply failed: {query.exception()}")

        wait(
            lambda: not writer.is_alive(),
            args.warmup + args.seconds + 120,
            "the writer",
            query_alive,
        )
        window = time.monotonic() - window0
        bridge_cpu = bridge.cpu_s() - bridge0
        spark_cpu = lake.meter.read(tasks=False).cpu - spark0
        if not ours.poll():
            raise SystemExit("the writer did not report")
        total, ops, took, measure_ms = ours.recv()
        writer.join()
        end = insert_lsn(conn)
        wait(lambda: slot.state()[1] >= end, 120, "the bridge's acknowledgement", bridge.check)
        visible = Visible(info.kafka_bootstrap, topic, prefix, exactly_once=False)
        records = visible()
        visible.close()
        wait(lambda: lake.applied(query) >= records, 1200, "the apply to catch up", query_alive)
        caught_up = time.monotonic() - started
        batches = [
            json.loads(p.json)["durationMs"]["triggerExecution"] / 1000
            for p in query.recentProgress
            if p["numInputRows"]
        ]
        query.stop()
        bridge.stop()
        slot.drop()
    changes, versions = lake.readback(info, topic, measure_ms)
    measured = lags(changes, versions)
    if len(measured) < ops:
        raise SystemExit(f"{len(measured)} changes read back, the writer measured {ops}")
    return {
        "offered_changes_per_s": int(rate),
        "trigger": trigger,
        "seconds": args.seconds,
        "achieved_changes_per_s": round(ops / took),
        "changes": len(measured),
        "commit_to_kafka_ms": summary([float(k) for k, _ in measured]),
        "commit_to_delta_ms": summary([float(v) for _, v in measured]),
        "bridge_cpu_pct": round(bridge_cpu / window * 100),
        "spark_cpu_pct": round(spark_cpu / window * 100),
        "all_applied_after_s": round(caught_up, 1),
        "batches": len(batches),
        "batch_s": summary(batches),
        "writes_total": total,
        "load_avg_1m": [round(load_before, 2), round(os.getloadavg()[0], 2)],
    }


def table(results: Sequence[dict[str, Any]]) -> str:
    """The runs as one markdown table."""
    lines = [
        "| offered /s | trigger | changes | commit->Kafka p50 / p95 / p99 / max ms "
        "| commit->Delta p50 / p95 / p99 / max ms | achieved /s | bridge CPU % | Spark CPU % "
        "| micro-batches, s p50 / max | load avg |",
        "|---:|---|---:|---:|---:|---:|---:|---:|---|---|",
    ]
    for r in results:
        k, d = r["commit_to_kafka_ms"], r["commit_to_delta_ms"]
        lines.append(
            f"| {r['offered_changes_per_s']:,} | {r['trigger']} | {r['changes']:,} "
            f"| {k['p50']:.0f} / {k['p95']:.0f} / {k['p99']:.0f} / {k['max']:.0f} "
            f"| {d['p50']:.0f} / {d['p95']:.0f} / {d['p99']:.0f} / {d['max']:.0f} "
            f"| {r['achieved_changes_per_s']:,} | {r['bridge_cpu_pct']} | {r['spark_cpu_pct']} "
            f"| {r['batches']}, {r['batch_s']['p50']:.1f} / {r['batch_s']['max']:.1f} "
            f"| {r['load_avg_1m'][0]} -> {r['load_avg_1m'][1]} |"
        )
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--rates", default="1000,5000", help="offered changes/s, comma list")
    parser.add_argument("--seconds", type=float, default=90.0, help="measured seconds per run")
    parser.add_argument("--warmup", type=float, default=20.0, help="unmeasured seconds first")
    parser.add_argument("--triggers", default="5 seconds", help="processingTime intervals")
    parser.add_argument("--master", default="local[2]")
    args = parser.parse_args()
    stack = load_stack().Stack()
    stack.start()
    cluster = None
    work = Path(tempfile.mkdtemp(prefix="bench-spark-freshness-"))
    try:
        info, cluster = postgres_18(stack)
        lake = Lake(args.master, work)
        results = []
        for trigger in args.triggers.split(","):
            for rate in args.rates.split(","):
                figures = run(
                    info, lake, work, rate=float(rate), trigger=trigger.strip(), args=args
                )
                print(json.dumps(figures), flush=True)
                results.append(figures)
        print(table(results))
        lake.spark.stop()
    finally:
        shutil.rmtree(work, ignore_errors=True)  # the Delta tables, checkpoints, bridge logs
        if cluster is not None:
            cluster.stop()
        stack.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
