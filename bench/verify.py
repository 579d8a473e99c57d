"""`bridge verify` throughput on a large table, clean and with scattered mismatches, with
the topic's per-key states in memory and on disk.

    python bench/verify.py [--rows 1000000] [--mismatches 100] [--disk-limit-mb 16]
                           [--modes default,disk] [--no-repair] [--stack-json FILE]
                           [--tree OTHER_CHECKOUT] [--stream-rows N]
                           [--state FILE [--setup-only]]

bench/snapshot.py's table (`id bigint PRIMARY KEY, v int, s text, n numeric(12,2),
ts timestamptz, flag bool`) of `--rows` rows is streamed by the bridge (initial snapshot,
in this process); then, with the bridge still running, `bridge verify` runs as a process
of its own (so its CPU time and peak RSS are its own: wait4 in a small launcher,
tests/peak_rss.py), once with the default memory limit (the states in a dict, or in hash
partitions on disk past it) and once with `--memory-limit-mb` = `--disk-limit-mb` (the
states on disk); `--modes` picks one:
1. on the clean table: seconds, rows/s, CPU µs per row of verify and of PostgreSQL (the
   stack's server and its backends), verify's peak RSS, PostgreSQL rows returned, and how
   many rows needed decoding (the others were settled by their Avro bytes);
2. after `--mismatches` rows were updated while the table was out of the publication
   (changes Kafka never gets): the same, and each must find exactly those;
3. (unless `--no-repair`) `--repair` of them, timed, then a verify that must report 0;
4. the stream in the same sitting (`stream_cost`): the bridge's CPU µs per row streaming
   an update of every row (or of the first `--stream-rows`: at 10M rows the update
   would take longer than the verifications) in 100-row transactions, the figure
   verify's compare with.
`--setup-only --state FILE` (with `--stack-json`) loads and streams the table and stops;
a later run with the same `--state` measures on it (a 10M-row table takes longer to load
and stream than its verifications: the setup can run apart, niced).
Memory: bytes per key the states take in the dict (tracemalloc over 100,000 keys of this
table's shape, beside the store's estimate) and the width of an entry on disk.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
import tracemalloc
import uuid
from pathlib import Path
from typing import Any

import psycopg

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "bench"))  # bench/snapshot.py before the tests' snapshot package

from snapshot import dsn, prepare, start_stack  # noqa: E402

from bridge.build import build_pipeline  # noqa: E402
from bridge.config import Config  # noqa: E402
from bridge.verify import scan  # noqa: E402
from bridge.verify.repair import repair  # noqa: E402
from bridge.verify.run import verify  # noqa: E402
from bridge.verify.store import ENTRY_OVERHEAD, PG_FIXED  # noqa: E402
from tests.peak_rss import Alone  # noqa: E402
from tests.snapshot.helpers import settings, snapshot_tables  # noqa: E402
from tests.waiting import wait_for  # noqa: E402

DB = "bench_snapshot"  # bench/snapshot.py's prepare() fills it


def returned(conn: psycopg.Connection[Any]) -> int:
    row = conn.execute(
        "SELECT tup_returned FROM pg_stat_database WHERE datname = current_database()"
    ).fetchone()
    return int(row[0]) if row else 0


def postgres_cpu(conn: psycopg.Connection[Any]) -> float:
    """CPU seconds used so far by the stack's PostgreSQL: its postmaster, its live
    processes, and the ones that ended (the postmaster's reaped children's time), so a
    backend that verify opened and closed counts too. Other servers on the machine do not."""
    row = conn.execute("SELECT pg_backend_pid()").fetchone()
    assert row is not None
    status = Path(f"/proc/{row[0]}/status").read_text()
    postmaster = int(next(x for x in status.splitlines() if x.startswith("PPid:")).split()[1])
    total = 0
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:  # the process ended meanwhile
            continue
        pid, parent = int(stat.parent.name), int(fields[1])
        if pid == postmaster:
            total += sum(int(f) for f in fields[11:15])  # utime, stime, cutime, cstime
        elif parent == postmaster:
            total += int(fields[11]) + int(fields[12])
    return total / os.sysconf("SC_CLK_TCK")


def _tree(root: int) -> list[int]:
    """`root` and every process below it, now."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            parent = int(stat.read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):  # ended meanwhile
            continue
        children.setdefault(parent, []).append(int(stat.parent.name))
    found, todo = [], [root]
    while todo:
        pid = todo.pop()
        found.append(pid)
        todo += children.get(pid, [])
    return found


def _rss(pid: int) -> int:
    """Resident bytes of one process (0 once it ended)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return 0
    line = next((x for x in status.splitlines() if x.startswith("VmRSS:")), None)
    return 0 if line is None else int(line.split()[1]) * 1024


def cpu_seconds(pid: int) -> float:
    """user + system CPU seconds of a live process (all its threads)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class TreeSampler:
    """Peak resident memory of a process and its children, sampled every 20 ms (a peak
    between two samples is missed; the launcher's `ru_maxrss` (`peak_rss.Alone`), printed
    beside it, is verify's own exact high-water mark)."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        pids = [self.pid]
        turn = 0
        while not self._stop.wait(0.02):
            if turn % 25 == 0:  # the tree again twice a second: /proc is slow to walk
                pids = _tree(self.pid)
            turn += 1
            self.peak = max(self.peak, sum(_rss(p) for p in pids))

    def stop(self) -> int:
        self._stop.set()
        self._thread.join()
        return self.peak


# verify's INFO line once a table's topic is read (bridge.verify.run): the CPU it used up
# to then is the topic side's
TOPIC_READ = ": topic read"


def timed(
    config: Path,
    conn: psycopg.Connection[Any],
    what: str,
    limit_mb: int | None,
    tree: Path | None = None,
) -> dict[str, Any]:
    """One `bridge verify` process on public.t (`limit_mb`: its --memory-limit-mb, None for
    the default), of this checkout or of `tree` (its `.venv`'s interpreter where it has
    one); returns the table's JSON verdict."""
    before, pg_before = returned(conn), postgres_cpu(conn)
    python = sys.executable
    if tree is not None:
        what = f"{what} [{tree.name}]"
        if (tree / ".venv/bin/python").exists():
            python = str(tree / ".venv/bin/python")
    command = [python, "-m", "bridge", "verify", "-c", str(config), "--format", "json"]
    command += ["--tables", "public.t", "--timeout", "1800"]
    if limit_mb is not None:
        command += ["--memory-limit-mb", str(limit_mb)]
    t0 = time.monotonic()
    env = {**os.environ, "BRIDGE_LOG__LEVEL": "INFO"}  # its progress lines, for TOPIC_READ
    # Under a small launcher: a child of this process (the bridge runs in it) would report
    # this process's peak as its own ru_maxrss (tests/peak_rss.py).
    launched = Alone(command)
    process = subprocess.Popen(
        launched.argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, cwd=tree
    )
    assert process.stdout is not None and process.stderr is not None
    sampler = TreeSampler(process.pid)
    err: list[str] = []
    topic_cpu: list[float] = []

    def read_err() -> None:
        assert process.stderr is not None
        for raw in process.stderr:
            line = raw.decode(errors="replace")
            if TOPIC_READ in line and not topic_cpu:
                pid = launched.command_pid(process.pid)
                topic_cpu.append(0.0 if pid is None else cpu_seconds(pid))
            err.append(line)

    reader = threading.Thread(target=read_err, daemon=True)
    reader.start()
    out = process.stdout.read()
    _, status, _ = os.wait4(process.pid, 0)
    usage = launched.usage()  # verify's own CPU and peak RSS
    reader.join()
    tree_peak = sampler.stop()
    process.returncode = os.waitstatus_to_exitcode(status)
    seconds = time.monotonic() - t0
    if process.returncode not in (0, 1) or not out:
        raise SystemExit(f"bridge verify failed ({process.returncode}): {''.join(err)}")
    (t,) = json.loads(out)["tables"]
    used = usage.cpu
    pg_used = postgres_cpu(conn) - pg_before
    conn.execute("SELECT pg_stat_clear_snapshot()")
    rows = t["rows"]
    records = t["kafka_records"]
    where = "on disk" if t["kafka_state_on_disk"] else "in memory"
    topic = (
        f"topic side {topic_cpu[0]:.1f}s = {topic_cpu[0] / records * 1e6:.1f} µs/record; "
        if topic_cpu and records
        else ""
    )
    print(
        f"{what}, states {where}: {rows:,} rows, {records:,} records in "
        f"{seconds:.1f}s = {rows / seconds:,.0f} rows/s; verify CPU {used:.1f}s = "
        f"{used / rows * 1e6:.1f} µs/row ({topic}the rest "
        f"{(used - (topic_cpu or [0.0])[0]) / rows * 1e6:.1f} µs/row); peak RSS of the "
        f"process tree {tree_peak / 2**20:,.0f} MiB (sampled), ru_maxrss "
        f"{usage.peak / 2**20:,.0f} MiB; "
        f"{t['rows_decoded']:,} rows decoded; missing {t['missing']}, ghosts {t['ghosts']}, "
        f"different {t['different']}; PostgreSQL tuples returned {returned(conn) - before:,}, "
        f"PostgreSQL CPU {pg_used:.1f}s = {pg_used / rows * 1e6:.1f} µs/row; "
        f"load average {os.getloadavg()[0]:.1f}",
        flush=True,
    )
    return dict(t)


def bytes_per_key(columns: int) -> float:
    """What one key costs the topic-side state in memory: its identity and its entry
    (`bridge.verify.scan`) in the fold's dict, measured with tracemalloc over 100,000 keys
    of bigint ids."""
    n = 100_000
    fold = scan.Fold(bytes(scan.DIGEST * columns))
    tracemalloc.start()
    start = tracemalloc.get_traced_memory()[0]
    for i in range(10_000_000, 10_000_000 + n):
        key = scan.ident(i.to_bytes(4, "big"))
        fold.add(key, i.to_bytes(8, "little") + bytes(scan.REST - 8 + scan.DIGEST * columns))
    used = tracemalloc.get_traced_memory()[0] - start
    tracemalloc.stop()
    return used / n


def released(conn: psycopg.Connection[Any], slot: str) -> bool:
    row = conn.execute(
        "SELECT active FROM pg_replication_slots WHERE slot_name = %s", (slot,)
    ).fetchone()
    return row is not None and not row[0]


def unpublished_updates(
    conn: psycopg.Connection[Any], publication: str, rows: int, count: int
) -> None:
    """`count` scattered rows changed while the table is out of the publication."""
    conn.execute(f"ALTER PUBLICATION {publication} DROP TABLE t")
    step = max(rows // max(count, 1), 1)
    conn.execute(
        "UPDATE t SET v = -v WHERE id IN (SELECT g FROM generate_series(1, %s, %s) g LIMIT %s)",
        (rows, step, count),
    )
    conn.execute(f"ALTER PUBLICATION {publication} ADD TABLE t")


def stream_cost(conn: psycopg.Connection[Any], slot: str, rows: int) -> None:
    """The stream's cost in this sitting, for the ratio: rows 1..`rows` of t updated in 100-row
    transactions and streamed by the bridge in this process; its CPU (this process: the
    bridge's threads, the rest idles) from the first update until the slot confirms the
    last."""
    t0, cpu0 = time.monotonic(), sum(os.times()[:2])
    conn.execute(
        "DO $$ BEGIN FOR i IN 0.." + str((rows - 1) // 100) + " LOOP "
        "UPDATE t SET v = v + 1 WHERE id > i * 100 AND id <= i * 100 + 100; COMMIT; "
        "END LOOP; END $$"
    )
    row = conn.execute("SELECT pg_current_wal_insert_lsn() - '0/0'").fetchone()
    assert row is not None
    end = int(row[0])

    def confirmed() -> bool:
        got = conn.execute(
            "SELECT confirmed_flush_lsn - '0/0' FROM pg_replication_slots WHERE slot_name = %s",
            (slot,),
        ).fetchone()
        return got is not None and int(got[0]) >= end

    wait_for(confirmed, 1800, "the stream's acknowledgement", every=0.2)
    seconds, used = time.monotonic() - t0, sum(os.times()[:2]) - cpu0
    print(
        f"stream: {rows:,} updates in 100-row transactions in {seconds:.1f}s = "
        f"{rows / seconds:,.0f} rows/s; bridge CPU {used:.1f}s = {used / rows * 1e6:.1f} µs/row; "
        f"load average {os.getloadavg()[0]:.1f}",
        flush=True,
    )


def state_sizes() -> None:
    """The per-key state of this table's shape, in memory and on disk."""
    per_key = bytes_per_key(6)
    width = scan.IDENT + scan.REST + scan.DIGEST * 6
    estimate = ENTRY_OVERHEAD + width
    print(
        f"topic-side state: in memory {per_key:.0f} bytes per key (6 columns; KeyStore's "
        f"estimate {estimate}) = {per_key * 10_000_000 / 2**30:.1f} GiB for 10M keys; "
        f"on disk {width} bytes per record and {scan.IDENT + PG_FIXED + scan.DIGEST * 6} "
        "per PostgreSQL row, written and read once",
        flush=True,
    )


def measure(
    args: argparse.Namespace,
    cfg: Config,
    path: Path,
    conn: psycopg.Connection[Any],
    publication: str,
    slot: str,
) -> None:
    """The runs of the module docstring, with the bridge running on `cfg` (also in `path`),
    then the stream's cost (`stream_cost`), last: its records would add to verify's."""
    limits = {"default": None, "disk": args.disk_limit_mb}
    modes = {mode: limits[mode] for mode in args.modes.split(",")}
    trees = [None] if args.tree is None else [Path(args.tree).resolve(), None]
    for limit in modes.values():
        for tree in trees:  # side by side: the other checkout, then this one
            clean = timed(path, conn, "clean", limit, tree)
            assert clean["status"] == "equal", clean
    unpublished_updates(conn, publication, args.rows, args.mismatches)
    for mode, limit in modes.items():
        for tree in trees:
            found = timed(path, conn, f"{args.mismatches} mismatches", limit, tree)
            counts = (found["different"], found["equal"], found["missing"], found["ghosts"])
            assert counts == (args.mismatches, args.rows - args.mismatches, 0, 0), found
            # The default limit (2 GiB) spills too past about 6M keys of this shape.
            assert found["kafka_state_on_disk"] or mode != "disk"
    if not args.no_repair:
        mismatched = verify(cfg, ["public.t"], timeout=1800)  # in process, for repair
        t0 = time.monotonic()
        done = repair(cfg, mismatched, timeout=1800)
        seconds = time.monotonic() - t0
        print(f"repair: {done.reread} rows re-emitted in {seconds:.1f}s", flush=True)
        after = timed(path, conn, "after repair", next(reversed(modes.values())))
        assert after["status"] == "equal", after
    stream_cost(conn, slot, args.stream_rows or args.rows)


def arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--mismatches", type=int, default=100)
    parser.add_argument(
        "--disk-limit-mb", type=int, default=16, help="verify's --memory-limit-mb in disk mode"
    )
    parser.add_argument(
        "--modes",
        default="default,disk",
        choices=["default,disk", "default", "disk"],
        help="verify's --memory-limit-mb: its default, --disk-limit-mb, or both",
    )
    parser.add_argument("--no-repair", action="store_true", help="skip --repair and its check")
    parser.add_argument(
        "--tree",
        help="another checkout whose `bridge verify` runs before this one's, each time "
        "(python -m bridge there, with its .venv if it has one): before/after in one sitting",
    )
    parser.add_argument(
        "--stream-rows", type=int, help="rows the stream's cost updates (default: --rows)"
    )
    parser.add_argument(
        "--state",
        help="a file that keeps the loaded, streamed table between --setup-only and the "
        "measuring run (with --stack-json), so a long setup runs apart from the measurement",
    )
    parser.add_argument(
        "--setup-only", action="store_true", help="load and stream the table, save --state, stop"
    )
    parser.add_argument("--stack-json", help="connection info of a running local stack")
    args = parser.parse_args()
    if (args.state or args.setup_only) and not (args.state and args.stack_json):
        parser.error("--state and --setup-only need --state and --stack-json")
    return args


def setup(stack: Any, rows: int) -> dict[str, Any]:
    """The table of `rows` rows, its publication and the bridge's configuration: what the
    runs need, kept in --state between a --setup-only process and the measuring one."""
    prepare(stack, rows)
    with psycopg.connect(dsn(stack, DB), autocommit=True) as conn:
        publication = f"bench_{uuid.uuid4().hex[:8]}"
        conn.execute(f"CREATE PUBLICATION {publication} FOR TABLE t")
        conn.execute("DROP TABLE IF EXISTS signals")
        conn.execute("CREATE TABLE signals (id text PRIMARY KEY, type text NOT NULL, data text)")
        conn.execute(f"ALTER PUBLICATION {publication} ADD TABLE signals")
    workdir = Path(tempfile.mkdtemp(prefix="bench-verify-"))
    slot = f"bench_{uuid.uuid4().hex[:8]}"
    config = settings(stack, DB, slot, publication, f"bv{uuid.uuid4().hex[:8]}", workdir)
    config["source"]["publication_mode"] = "disabled"
    config["snapshot"].update(signal_table="public.signals", progress_bar="never")
    config["log"] = {"level": "WARNING"}
    return {"publication": publication, "slot": slot, "workdir": str(workdir), "config": config}


def main() -> None:
    args = arguments()
    stack, owned = start_stack(args.stack_json)
    state = Path(args.state) if args.state else None
    try:
        resumed = state is not None and state.exists()  # a --setup-only run streamed it
        kept = json.loads(state.read_text()) if state and resumed else setup(stack, args.rows)
        publication, slot, workdir = kept["publication"], kept["slot"], Path(kept["workdir"])
        conn = psycopg.connect(dsn(stack, DB), autocommit=True)
        cfg = Config(**kept["config"])
        pipeline = build_pipeline(cfg)
        thread = threading.Thread(target=pipeline.run, name="bridge", daemon=True)
        thread.start()

        def streamed() -> bool:  # a resumed bridge keeps no progress of its done snapshot
            if resumed:
                return not released(conn, slot)  # it streams
            tables = snapshot_tables(pipeline)
            return bool(tables) and all(s.done for s in tables)

        wait_for(streamed, 3600, "the initial snapshot", every=0.5)
        if args.setup_only:
            assert state is not None
            pipeline.stop()
            thread.join(120)
            state.write_text(json.dumps(kept))
            print(f"set up: {args.rows:,} rows streamed; measure with --state {state}", flush=True)
            return
        # settings left at their defaults are left out: an older --tree's Config may not
        # know them (extra keys are refused)
        dumped = cfg.model_dump(mode="json", exclude_none=True, exclude_defaults=True)
        dumped["source"]["password"] = stack.pg_password  # dumped masked
        path = workdir / "bridge.yaml"
        path.write_text(json.dumps(dumped))
        try:
            measure(args, cfg, path, conn, publication, slot)
        finally:
            pipeline.stop()
            thread.join(120)
            wait_for(lambda: released(conn, slot), 60, "the slot to be released")
            conn.execute("SELECT pg_drop_replication_slot(%s)", (slot,))
            conn.execute(f"DROP PUBLICATION {publication}")
            conn.execute("DROP SCHEMA IF EXISTS bridge CASCADE")
            if state is not None:
                state.unlink(missing_ok=True)
        state_sizes()
    finally:
        if owned is not None:
            owned.stop()


if __name__ == "__main__":
    main()
