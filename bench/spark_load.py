"""Spark initial load throughput (snapshot.mode external) on a standalone cluster, beside
the bridge's own snapshot of the same table, on the real local stack.

    python bench/spark_load.py [--rows 1000000] [--chunk-size 100000] [--rate 100]
                               [--workers 1,2] [--readers 1,2] [--stack-json FILE]

One table (`id int PRIMARY KEY, v int, s text`, tests/snapshot/helpers.make_table) of
`--rows` rows, vacuumed and analyzed. For each count in `--workers`, a Spark standalone
cluster of that many workers of one core each (deploy/local/stack_spark.py: each worker
its own JVM, its executor and that executor's Python workers their own processes; 0 means
local[2] instead) and a driver session in this process that ships the bridge as a user
does (the packed virtualenv in `spark.archives`, tests/spark/ship.py; the jars in
`spark.jars`). The bridge runs in this process (`Pipeline` on a thread, mode external): it
creates the slot, holds its snapshot and streams. A writer keeps updating, deleting and
inserting rows (`--rate` transactions a second, 1 to 5 changes each; 0 for none) while
`initial_load` reads the table in chunks of `--chunk-size` rows (one task each) into Delta.

Reported per run: the load's seconds from `open_external_load` (planning included) to its
return, rows/s, and CPU seconds (from /proc) of the driver's Python (the thread that plans
and waits; the bridge's and the writer's threads left out), the driver's JVM (with, in
local mode, its Python workers), and the workers' process trees (worker JVMs, executors,
their Python workers: where the rows are read, encoded and written), per row. Then the
writes stop, the stream is applied (availableNow, on the same executors) and the Delta
table is compared with PostgreSQL (row count and a hash of every row, inside each).

Then, for each count in `--readers`, the bridge's own snapshot of the same table into
Kafka (mode initial, bench/snapshot.py's run: that many reader processes, chunks of
10,000 rows), the rate it reaches on the same machine in the same sitting.

Without `--stack-json` (the JSON line `python deploy/local/stack.py up` prints) the local
stack is started and stopped here; the Spark clusters are started here either way.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import psycopg

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "bench"))  # bench/snapshot.py before the tests' snapshot package

from e2e import load_stack  # noqa: E402
from snapshot import cpu_seconds, forget  # noqa: E402
from snapshot import run as snapshot_run  # noqa: E402
from spark_apply import start_stack  # noqa: E402
from spark_common import Counters, Meter, session_conf  # noqa: E402

from bridge.build import build_pipeline  # noqa: E402
from bridge.config import Config  # noqa: E402
from bridge.snapshot.external import open_external_load  # noqa: E402
from bridge.spark.apply import apply_changes  # noqa: E402
from bridge.spark.initial_load import initial_load  # noqa: E402
from bridge.spark.jars import spark_session  # noqa: E402
from bridge.spark.reader import read_changes  # noqa: E402
from tests.running import PipelineThread  # noqa: E402
from tests.snapshot.helpers import (  # noqa: E402
    TopicReader,
    Writer,
    keyed_state,
    make_table,
    settings,
)
from tests.spark.digest import lake_digest, pg_digest  # noqa: E402
from tests.spark.ship import executor_conf, executor_env  # noqa: E402
from tests.waiting import wait_for  # noqa: E402

DB = "bench_spark_load"
COLUMNS = ["id", "v", "s"]
WORKER_MEMORY = "2g"  # each worker's executor memory (one executor of one core)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--chunk-size", type=int, default=100_000)
    parser.add_argument("--rate", type=float, default=100.0, help="writer txn/s; 0: none")
    parser.add_argument("--workers", default="1,2", help="cluster sizes; 0: local[2]")
    parser.add_argument("--readers", default="1,2", help="the bridge's own snapshot; '': none")
    parser.add_argument("--stack-json")
    args = parser.parse_args()

    info, stack = start_stack(args.stack_json)
    work = Path(tempfile.mkdtemp(prefix="bench-spark-load-"))
    try:
        stack_dsn = (
            f"host={info.pg_host} port={info.pg_port} user={info.pg_user} "
            f"password={info.pg_password}"
        )
        with psycopg.connect(stack_dsn + " dbname=postgres", autocommit=True) as admin:
            admin.execute(f"DROP DATABASE IF EXISTS {DB} WITH (FORCE)")
            admin.execute(f"CREATE DATABASE {DB}")
        dsn = f"{stack_dsn} dbname={DB}"
        t0 = time.monotonic()
        with psycopg.connect(dsn, autocommit=True) as conn:
            make_table(conn, "items", args.rows)
            conn.execute("VACUUM ANALYZE items")
        print(f"table items: {args.rows:,} rows in {time.monotonic() - t0:.0f}s", flush=True)
        results = []
        for workers in (int(w) for w in args.workers.split(",") if w):
            results.append(
                (f"Spark, {_where(workers)}", *spark_run(info, dsn, work, workers, args))
            )
        for readers in (int(r) for r in args.readers.split(",") if r):
            rate, cpu, pg = snapshot_run(
                info, "items", readers, 10_000, None, False, False, False, DB
            )
            results.append((f"bridge snapshot, {readers} reader(s)", rate, cpu, pg))
        print("| run | rows/s | CPU-µs/row | PostgreSQL CPU-µs/row |")
        for name, rate, cpu, pg in results:
            print(f"| {name} | {rate:,.0f} | {cpu:.1f} | {pg:.1f} |", flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
        if stack is not None:
            stack.stop()


def _where(workers: int) -> str:
    return "local[2]" if workers == 0 else f"{workers} worker(s) of 1 core"


def spark_run(
    info: Any, dsn: str, work: Path, workers: int, args: argparse.Namespace
) -> tuple[float, float, float]:
    """One load on a fresh cluster of `workers` workers (local[2] for 0) and a fresh
    session: (rows/s, CPU-µs/row of the driver, JVMs and Python workers, PostgreSQL's
    CPU-µs/row: its backends connected to the bench database)."""
    cluster = None
    conf = {**session_conf(), "spark.sql.warehouse.dir": str(work)}
    master = "local[2]"
    if workers:
        cluster = load_stack().SparkCluster(
            work / f"cluster-{workers}", work, workers=workers, cores=1, memory=WORKER_MEMORY
        )
        cluster.install()
        cluster.start()
        master = cluster.master_url
        conf |= {
            **executor_conf(executor_env()),
            "spark.executor.cores": "1",
            "spark.executor.memory": WORKER_MEMORY,
            "spark.driver.host": "127.0.0.1",
        }
    os.environ.pop("PYSPARK_PYTHON", None)  # spark_session sets it from spark.pyspark.python
    spark = spark_session(f"bench-spark-load-{workers}", master, extra_conf=conf)
    try:
        if cluster is not None:
            _wait_executors(spark, workers)
        meter = Meter(spark, cluster.worker_pids() if cluster is not None else ())
        return load_and_hand_over(spark, meter, info, dsn, work, workers, args)
    finally:
        spark.stop()
        if cluster is not None:
            cluster.stop()


def _wait_executors(spark: Any, count: int) -> None:
    """Until `count` executors registered (they start after the session), so the load's
    tasks are spread from its first."""
    status = spark.sparkContext._jsc.sc().statusStore()

    def registered() -> bool:
        found = status.executorList(True)
        ids = [str(found.apply(i).id()) for i in range(found.size())]
        return sum(i != "driver" for i in ids) >= count

    wait_for(registered, 300, f"{count} executors")


def load_and_hand_over(
    spark: Any, meter: Meter, info: Any, dsn: str, work: Path, workers: int, args: Any
) -> tuple[float, float, float]:
    """Load with the bridge streaming and the writer writing, then hand over and compare."""
    name = uuid.uuid4().hex[:8]
    slot = f"bench_{name}"
    cfg = Config(
        **settings(
            info,
            DB,
            slot,
            f"bench_{name}",
            f"bench{name}",
            work / "spill",
            mode="external",
            chunk_size=args.chunk_size,
        )
    )
    topic, target = f"bench{name}.public.items", str(work / f"items-{name}")
    bridge = PipelineThread(build_pipeline(cfg))
    writer = Writer(dsn, "items", args.rows, rate=args.rate or None)
    if args.rate:
        writer.start()
    try:
        tx0, load_avg = writer.transactions, os.getloadavg()[0]
        backends0 = cpu_seconds(DB)[2]
        with meter.measure() as measured:
            driver0 = time.thread_time()
            load = open_external_load(cfg)
            written = initial_load(spark, load, {topic: target}, registry_url=info.registry_url)
            driver = time.thread_time() - driver0
        backends = cpu_seconds(DB)[2]
        during = writer.transactions - tx0
    finally:
        if args.rate:
            writer.stop()
    got: Counters = measured[0]
    rows = written[target]
    tasks = sum(len(t.tasks) for t in load.tables())
    cpu = driver + got.jvm + got.workers
    pg = sum(t - backends0.get(pid, 0.0) for pid, t in backends.items())
    print(
        f"Spark, {_where(workers)}: {rows:,} rows in {tasks} tasks, {got.wall:.1f}s, "
        f"{rows / got.wall:,.0f} rows/s; CPU {cpu:.0f}s = {cpu * 1e6 / rows:.1f} µs/row "
        f"(driver Python {driver:.1f}s, driver JVM {got.jvm:.1f}s, workers {got.workers:.1f}s), "
        f"PostgreSQL {pg * 1e6 / rows:.1f} µs/row; "
        f"{during} writer transactions meanwhile (load {load_avg:.2f} -> "
        f"{os.getloadavg()[0]:.2f})",
        flush=True,
    )
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("INSERT INTO items VALUES (-1, 0, 'last')")
        reader = TopicReader(info.kafka_bootstrap, info.registry_url, topic)
        try:
            wait_for(lambda: -1 in keyed_state(reader.read()), 300, "the last change")
        finally:
            reader.close()
        bridge.stop()
        stream = read_changes(
            spark,
            [topic],
            kafka_options={"kafka.bootstrap.servers": info.kafka_bootstrap},
            registry_url=info.registry_url,
            streaming=True,
        )
        query = apply_changes(
            stream,
            target,
            ["id"],
            checkpoint=str(work / f"chk-{name}"),
            trigger={"availableNow": True},
        )
        assert query is not None
        query.awaitTermination()
        lake, source = lake_digest(spark, target, COLUMNS), pg_digest(conn, "items", COLUMNS)
        conn.execute("DELETE FROM items WHERE id = -1")  # the next run's table as this one's
        forget(conn, slot)
    same = lake == source
    print(
        f"  hand-over: target {'equals' if same else 'DIFFERS FROM'} the table ({lake[0]:,} rows)"
    )
    if not same:
        raise SystemExit(f"the lake table differs from PostgreSQL: {lake} != {source}")
    shutil.rmtree(target, ignore_errors=True)
    return rows / got.wall, cpu * 1e6 / rows, pg * 1e6 / rows


if __name__ == "__main__":
    main()
