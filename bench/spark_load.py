"""Spark initial load throughput (snapshot.mode external), local[2], on the real local stack.

    python bench/spark_load.py [--rows 1000000] [--chunk-size 100000] [--rate 100]
                               [--stack-json FILE]

One table (`id int PRIMARY KEY, v int, s text`, tests/snapshot/helpers.make_table) of
`--rows` rows. The bridge runs in this process (`Pipeline` on a thread, mode external):
it creates the slot, holds its snapshot and streams. A writer keeps updating, deleting and
inserting rows (`--rate` transactions a second, 1 to 5 changes each; 0 for none) while
`initial_load` reads the table in chunks of `--chunk-size` rows into Delta. Reported: the
load's seconds from `open_external_load` (planning included) to its return, rows/s, CPU
seconds of the Spark JVM and of its Python workers (the tasks' read and encoding; from
/proc), and the writer's transactions meanwhile. Then the writes stop, the stream is
applied (availableNow) and the Delta table is compared with PostgreSQL row for row.

Without `--stack-json` (the JSON line `python deploy/local/stack.py up` prints) the local
stack is started and stopped here.
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

from spark_apply import start_stack  # noqa: E402
from spark_common import jvm_cpu_seconds  # noqa: E402

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
    table_state,
)
from tests.waiting import wait_for  # noqa: E402

DB = "bench_spark_load"


def python_workers_cpu(jvm_pid: int) -> float:
    """CPU seconds of this JVM's pyspark.daemon processes and their forked workers (alive
    ones, plus those the daemon reaped)."""
    procs: dict[int, tuple[int, float]] = {}
    tick = os.sysconf("SC_CLK_TCK")
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        cpu = sum(int(f) for f in fields[11:15]) / tick  # utime, stime, cutime, cstime
        procs[int(stat.parent.name)] = (int(fields[1]), cpu)
    daemons = {pid for pid, (ppid, _) in procs.items() if ppid == jvm_pid}
    return sum(cpu for pid, (ppid, cpu) in procs.items() if pid in daemons or ppid in daemons)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--chunk-size", type=int, default=100_000)
    parser.add_argument("--rate", type=float, default=100.0, help="writer txn/s; 0: none")
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
        with psycopg.connect(dsn, autocommit=True) as conn:
            make_table(conn, "items", args.rows)
            conn.execute("VACUUM ANALYZE items")
        spark = spark_session("bench-spark-load", extra_conf={"spark.sql.warehouse.dir": str(work)})
        same = run(spark, info, dsn, work, args)
        spark.stop()
        if not same:
            raise SystemExit(1)
    finally:
        shutil.rmtree(work, ignore_errors=True)
        if stack is not None:
            stack.stop()


def run(spark: Any, info: Any, dsn: str, work: Path, args: argparse.Namespace) -> bool:
    """Load with the bridge streaming and the writer writing, then hand over and compare."""
    name = uuid.uuid4().hex[:8]
    cfg = Config(
        **settings(
            info,
            DB,
            f"bench_{name}",
            f"bench_{name}",
            f"bench{name}",
            work / "spill",
            mode="external",
            chunk_size=args.chunk_size,
        )
    )
    topic, target = f"bench{name}.public.items", str(work / "items")
    jvm_pid = spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid()
    bridge = PipelineThread(build_pipeline(cfg))
    writer = Writer(dsn, "items", args.rows, rate=args.rate or None)
    if args.rate:
        writer.start()
    try:
        jvm0, py0, t0 = jvm_cpu_seconds(spark), python_workers_cpu(jvm_pid), time.monotonic()
        tx0 = writer.transactions
        load = open_external_load(cfg)
        written = initial_load(spark, load, {topic: target}, registry_url=info.registry_url)
        seconds = time.monotonic() - t0
        jvm, py = jvm_cpu_seconds(spark) - jvm0, python_workers_cpu(jvm_pid) - py0
        during = writer.transactions - tx0
    finally:
        if args.rate:
            writer.stop()
    rows = written[target]
    tasks = sum(len(t.tasks) for t in load.tables())
    print(
        f"initial load: {rows} rows in {tasks} tasks, {seconds:.1f}s, {rows / seconds:,.0f} "
        f"rows/s, CPU {jvm:.0f}s JVM + {py:.0f}s Python workers, {during} writer "
        "transactions meanwhile"
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
            stream, target, ["id"], checkpoint=str(work / "chk"), trigger={"availableNow": True}
        )
        assert query is not None
        query.awaitTermination()
        got = spark.read.format("delta").load(target).where("NOT _deleted").collect()
        lake = {r["id"]: {"id": r["id"], "v": r["v"], "s": r["s"]} for r in got}
        same = lake == table_state(conn, "items")
    print(f"hand-over: target {'equals' if same else 'DIFFERS FROM'} the table ({len(lake)} rows)")
    return same


if __name__ == "__main__":
    main()
