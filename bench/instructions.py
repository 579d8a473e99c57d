"""The whole bridge's instructions per row, counted by callgrind: a figure machines share.

    python bench/instructions.py [--rows 10000] [--txn-rows 100] [--op insert] [--top 0]
                                  [--components] [--inclusive FUNCTION ...] [--tree DIR]
                                  [--keep DIR] [--producer KEY=VALUE ...]

Wall-clock rates and CPU seconds move with the machine (cores of our kind differ up to
3x, and one VM drifts by half that within an hour); instruction counts do not. On the
local stack (started and stopped here) with the compare table of bench/compare.py, it
drains a backlog of `--rows` rows in transactions of `--txn-rows`, and then one of
twice as many, each time with `python -m bridge run` under `valgrind --tool=callgrind`
from its start until its slot confirms the last transaction. The second count minus
the first, over `--rows`, is the instructions per row: start-up, connections and
shutdown are the same in both runs and cancel out. Every thread of the process counts
(librdkafka's too), the walsender and Kafka do not.

What the count holds constant (bench/README.md, "instructions"): a row under callgrind
takes ~50x as long, and a loaded machine stretches that further, so work the bridge
does per second instead of per row would grow with the drain's wall time:

* librdkafka's statistics (`statistics.interval.ms`, every 5 s: histograms walked and a
  JSON document built, then parsed by the bridge's metrics) are counted apart, as the
  inclusive cost of `rd_kafka_stats_emit_tmr_cb` and of the client's `stats_cb`, and
  subtracted: "time-driven" in the output;
* the producer's look for new broker connections to arm (`Producer._arm_sockets`, at most
  once a second: bridge/kafka/sockets.py) is subtracted the same way (inclusive);
* the pipeline's idle turns (`Pipeline._idle`: nothing to read, mostly the drain's tail
  waiting for its last batches' `linger.ms`: their number is the wait over the turn's
  wall time) are subtracted the same way (inclusive);
* librdkafka cuts a partition's batch when `linger.ms` (5 ms) runs out, i.e. after a few
  records under callgrind instead of hundreds at full speed, and each batch costs the
  same set-up (LZ4's frame context, the request): the measured bridge gets
  `kafka.producer` `linger.ms: --linger-ms` and `batch.num.messages: --batch`, so a
  batch holds up to `--batch` records, hundreds whatever the machine's speed (the output
  shows the records per produce request: 263-556 in bench/README.md's runs, the linger
  ending some batches early at callgrind's pace on a loaded machine). 500 is about what a
  full-speed drain of this table gets at 100k rows/s over the topic's 3 partitions
  (compare.py's). Each drain's line prints the load average at its start and end.

Two builds compare by running the script with `--tree DIR` (a checkout with its own
`.venv`, built with `pip install -e .`): the bridge of that tree is measured, under the
same measuring settings. `--top N` prints the N functions whose own instructions grew
most per row between the two drains, `--components` the per-row instructions by the
code they ran in (bridge compiled, CPython, confluent-kafka, librdkafka, psycopg/libpq,
libc), `--inclusive FUNCTION` (repeatable) one function's inclusive instructions per row
(everything it calls; e.g. `CPyDef_stream___ReplicationStream___read`, the stream's read of
each message, as callgrind names the compiled function); `--keep DIR` keeps both
callgrind files there, for `callgrind_annotate`.

The envelope's tail (ts_ms) is encoded once per millisecond: under callgrind nearly
every record gets a new one, a few hundred instructions per row that a real drain
spends once per ~100 rows (counted in the figure, not held constant).
"""

from __future__ import annotations

import argparse
import collections
import os
import re
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg
import yaml
from confluent_kafka.admin import AdminClient, NewTopic

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import compare_workloads as workloads
import e2e

# The per-second work subtracted from the count (inclusive: everything they call).
# The pipeline's idle turn (compiled), subtracted inclusive like the statistics. (Turning
# callgrind's collection off inside it with --toggle-collect counted nothing outside it,
# even with --collect-atstart=yes.) A stats callback or socket look it polls is then
# subtracted twice.
IDLE_TURN = "CPyDef_pipeline___Pipeline____idle"
# The producer's look for new broker connections to arm (bridge/kafka/sockets.py), made
# from its polls at most once a second.
ARM_SOCKETS = "CPyDef_producer___Producer____arm_sockets"
TIME_DRIVEN = ("rd_kafka_stats_emit_tmr_cb", "stats_cb", IDLE_TURN, ARM_SOCKETS)
PRODUCE_REQUEST = "rd_kafka_msgset_create_ProduceRequest"
# Where a function's own instructions are counted, by the file its code is in.
COMPONENTS = (
    ("bridge, compiled (mypyc)", re.compile(r"__mypyc|/bridge/")),
    ("confluent-kafka C (cimpl)", re.compile(r"confluent_kafka/cimpl")),
    ("librdkafka (incl. LZ4)", re.compile(r"librdkafka")),
    ("psycopg, libpq, TLS", re.compile(r"psycopg|libpq|libssl|libcrypto")),
    ("CPython runtime", re.compile(r"libpython|/bin/python|lib-dynload|site-packages")),
    ("libc (malloc, memcpy, locks)", re.compile(r"libc\.so|libm\.so|ld-linux|libpthread")),
)
_NAMED = re.compile(r"\((\d+)\)(?: (.*))?")


@dataclass
class Profile:
    """One callgrind file: own cost per (object, function), inclusive cost and calls per
    function (a function calling itself is not counted twice)."""

    total: int = 0
    own: collections.Counter[tuple[str, str]] = field(default_factory=collections.Counter)
    inclusive: collections.Counter[str] = field(default_factory=collections.Counter)
    calls: collections.Counter[str] = field(default_factory=collections.Counter)


def read_profile(path: Path) -> Profile:
    """Parse callgrind's format (name compression, `calls=` lines followed by the call's
    inclusive cost) without callgrind_annotate, which merges functions of one name
    across libraries (OpenSSL's in librdkafka, psycopg's and cryptography's wheels)."""
    profile = Profile()
    names: dict[str, dict[str, str]] = {"ob": {}, "fn": {}}
    ob = fn = cfn = ""
    in_call = False

    def named(kind: str, text: str) -> str:
        found = _NAMED.match(text)
        if found is None:
            return text
        if found.group(2) is not None:
            names[kind][found.group(1)] = found.group(2)
        return names[kind].get(found.group(1), "?")

    own: collections.Counter[tuple[str, str]] = collections.Counter()
    with path.open(errors="replace") as lines:
        for line in lines:
            head = line[:1]
            if head.isdigit() or head in "+-*":
                parts = line.split()
                cost = int(parts[1]) if len(parts) > 1 else 0
                if in_call:
                    if cfn != fn:
                        profile.inclusive[fn] += cost
                    in_call = False
                else:
                    own[(ob, fn)] += cost
            elif line.startswith("ob="):
                ob = named("ob", line[3:].strip())
            elif line.startswith("fn="):
                fn = named("fn", line[3:].strip())
            elif line.startswith("cob="):
                named("ob", line[4:].strip())  # defines a compressed name
            elif line.startswith("cfn="):
                cfn = named("fn", line[4:].strip())
            elif line.startswith("calls="):
                profile.calls[cfn] += int(line[6:].split()[0])
                in_call = True
            elif line.startswith("summary:") or line.startswith("totals:"):
                profile.total = int(line.split()[1])
    profile.own = own
    for (_, function), cost in own.items():
        profile.inclusive[function] += cost
    if not profile.total:
        raise SystemExit(f"no total in {path}")
    return profile


class TreeBridge(e2e.Bridge):
    """e2e's bridge, run from another checkout (`--tree`) with that checkout's venv."""

    tree: Path = e2e.ROOT

    def start(self) -> None:
        python = self.tree / ".venv" / "bin" / "python"
        env = {**os.environ, "PYTHONPATH": str(self.tree)}
        command = [str(python), "-m", "bridge", "run", "--config", str(self.config)]
        with self.log.open("ab") as log:
            self.proc = subprocess.Popen(
                [*self.wrapper, *command],
                cwd=self.tree,
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
            )


def measured_bridge(stack: Any, name: str, workdir: Path, args: argparse.Namespace) -> TreeBridge:
    bridge = TreeBridge(stack, name, workdir, exactly_once=False)
    bridge.tree = args.tree
    settings = yaml.safe_load(bridge.config.read_text())
    producer: dict[str, Any] = {"linger.ms": args.linger_ms, "batch.num.messages": args.batch}
    for setting in args.producer:
        name, _, value = setting.partition("=")
        producer[name] = yaml.safe_load(value)
    settings["kafka"]["producer"] = producer
    bridge.config.write_text(yaml.safe_dump(settings))
    return bridge


def create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    future = admin.create_topics([NewTopic(topic, num_partitions=partitions)])[topic]
    future.result(30)


def drain(
    stack: Any,
    dsn: str,
    conn: psycopg.Connection[Any],
    rows: int,
    args: argparse.Namespace,
    name: str,
    out: Path,
) -> Profile:
    """The bridge's callgrind profile while it drains `rows` rows."""
    if args.op == "update":  # the rows to update, written before the slot exists
        workloads.load(dsn, "insert", rows, args.txn_rows)
    create_topic(stack.kafka_bootstrap, f"{name}.public.{workloads.TABLE}", args.partitions)
    slot = e2e.Slot(conn, name)
    bridge = measured_bridge(stack, name, out.parent, args)
    bridge.start()  # creates the slot and the publication at the current position
    e2e.wait(lambda: slot.state()[0], 120, "the slot", bridge.check)
    bridge.stop()
    e2e.wait(lambda: not slot.state()[0], 60, "the slot released", lambda: None)
    backlog = workloads.load(dsn, args.op, rows, args.txn_rows)
    bridge.wrapper = [
        "valgrind",
        "--tool=callgrind",
        f"--callgrind-out-file={out}",
    ]
    bridge.start()
    # Start-up under callgrind is ~3.4 billion instructions: niced on a machine whose cores
    # others hold, it took more than 10 minutes (three counts timed out at 600 s).
    e2e.wait(lambda: slot.state()[0], 3600, "the slot (under callgrind)", bridge.check)
    done = lambda: slot.state()[1] > backlog.last_start  # noqa: E731
    e2e.wait(done, 3600, "the last transaction confirmed", bridge.check)
    bridge.stop(timeout=600)  # callgrind writes its file as the process exits
    slot.drop()
    conn.execute(f"TRUNCATE {workloads.TABLE}")
    return read_profile(out)


def component(obj: str) -> str:
    for label, pattern in COMPONENTS:
        if pattern.search(obj):
            return label
    return "other"


def report(first: Profile, second: Profile, args: argparse.Namespace) -> None:
    rows: int = args.rows

    def per_row(a: int, b: int) -> float:
        return (b - a) / rows

    total = per_row(first.total, second.total)
    timed = sum(per_row(first.inclusive[f], second.inclusive[f]) for f in TIME_DRIVEN)
    requests = second.calls[PRODUCE_REQUEST] - first.calls[PRODUCE_REQUEST]
    what = f"{args.op}s in transactions of {args.txn_rows:,}"
    print(f"{total - timed:,.0f} instructions per row ({what}; the time-driven part left out)")
    print(f"  {total:,.0f} in all, {timed:,.0f} of them time-driven:")
    for function in TIME_DRIVEN:
        share = per_row(first.inclusive[function], second.inclusive[function])
        calls = second.calls[function] - first.calls[function]
        print(f"    {share:9,.0f}  {function} ({calls:+,} calls)")
    if requests > 0:
        print(f"  {rows / requests:,.0f} records per produce request ({requests:,} more requests)")
    if args.components:
        parts: dict[str, float] = collections.defaultdict(float)
        for (obj, function), cost in second.own.items():
            parts[component(obj)] += per_row(first.own.get((obj, function), 0), cost)
        print("  own instructions per row by where the code is (time-driven part included):")
        for label, share in sorted(parts.items(), key=lambda item: -item[1]):
            print(f"    {share:9,.0f}  {label}")
    for function in args.inclusive:
        share = per_row(first.inclusive[function], second.inclusive[function])
        calls = second.calls[function] - first.calls[function]
        print(f"  {share:9,.0f}  inclusive per row: {function} ({calls:+,} calls)")
    if args.top:
        grown: dict[str, float] = collections.defaultdict(float)
        for (obj, function), cost in second.own.items():
            grown[function] += per_row(first.own.get((obj, function), 0), cost)
        print("  functions whose own instructions grew most per row:")
        for function, share in sorted(grown.items(), key=lambda item: -item[1])[: args.top]:
            print(f"    {share:9,.0f}  {function}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--rows", type=int, default=10_000, help="the first drain; then twice")
    parser.add_argument("--txn-rows", type=int, default=100)
    parser.add_argument("--op", choices=("insert", "update"), default="insert")
    parser.add_argument("--partitions", type=int, default=e2e.PARTITIONS)
    parser.add_argument("--batch", type=int, default=500, help="records per Kafka batch")
    parser.add_argument("--linger-ms", type=int, default=10_000, help="longer than a batch takes")
    parser.add_argument(
        "--producer",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="another kafka.producer setting of the measured bridge (compression.type=lz4)",
    )
    parser.add_argument("--tree", type=Path, default=e2e.ROOT, help="the checkout to measure")
    parser.add_argument("--top", type=int, default=0, help="functions to list")
    parser.add_argument("--components", action="store_true", help="per row by component")
    parser.add_argument(
        "--inclusive", action="append", default=[], help="a function's inclusive cost per row"
    )
    parser.add_argument("--keep", type=Path, help="a directory to keep the callgrind files in")
    args = parser.parse_args()
    args.tree = args.tree.resolve()
    stack = e2e.load_stack().Stack()
    stack.start()
    try:
        stack.create_database(e2e.DB)
        dsn = str(stack.dsn(e2e.DB))
        with (
            tempfile.TemporaryDirectory(prefix="bench-instructions-") as tmp,
            psycopg.connect(dsn, autocommit=True) as conn,
        ):
            workloads.prepare(conn)
            # Under callgrind on a loaded machine one start-up step (the first schema
            # registration, the catalog's queries) can outlast the walsender's 60 s without
            # a status update, and the server then drops the stream mid-drain.
            conn.execute("ALTER SYSTEM SET wal_sender_timeout = 0")
            conn.execute("SELECT pg_reload_conf()")
            profiles = []
            if args.keep:
                args.keep.mkdir(parents=True, exist_ok=True)
            for index, rows in enumerate((args.rows, 2 * args.rows)):
                out = (args.keep or Path(tmp)) / f"callgrind.{rows}"
                before = os.getloadavg()[0]
                profiles.append(drain(stack, dsn, conn, rows, args, f"instructions{index}", out))
                print(
                    f"{rows:,} rows: {profiles[-1].total:,} instructions "
                    f"(load average {before:.1f} at the drain's start, "
                    f"{os.getloadavg()[0]:.1f} at its end)",
                    flush=True,
                )
            report(profiles[0], profiles[1], args)
    finally:
        stack.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
