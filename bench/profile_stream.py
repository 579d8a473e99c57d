"""Where the bridge's CPU goes: py-spy sampling `python -m bridge run` as it drains a backlog.

    python bench/profile_stream.py [--rows 300000] [--txn-rows 100000] [--top 25] [--raw PATH]

On the local stack (started and stopped here): the compare table of bench/compare.py,
a bridge run once to create its slot and stopped, `--rows` rows committed in
transactions of `--txn-rows`, then the bridge started again and sampled by
`py-spy record --format raw` until its slot confirms the last transaction. Prints
rows/s, the bridge's CPU µs per row, how busy the machine's cores were, and the top
functions by own time and including callees. py-spy is the `profile` extra.

py-spy sees no frames inside modules compiled by mypyc (setup.py): their time lands on
the nearest uncompiled caller. For a per-function profile, install uncompiled first
(`BRIDGE_PURE_PYTHON=1 pip install -e .`); the figures then are the pure-Python ones.
"""

from __future__ import annotations

import argparse
import collections
import importlib.util
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psycopg

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import compare_workloads as workloads
import e2e


def busy_jiffies() -> tuple[int, int]:
    """(all, idle) jiffies of the whole machine since boot."""
    values = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    return sum(values), values[3] + values[4]


def top(raw: Path, count: int) -> str:
    """Own-time and inclusive-time tables of a py-spy raw (collapsed stacks) file."""
    own: collections.Counter[str] = collections.Counter()
    inclusive: collections.Counter[str] = collections.Counter()
    total = 0
    for line in raw.read_text().splitlines():
        stack, _, n = line.rpartition(" ")
        frames = [f.split(" (")[0] for f in stack.split(";") if f]
        if not frames:
            continue
        samples = int(n)
        total += samples
        own[frames[-1]] += samples
        if "Pipeline._loop" in frames:  # the frames above it (CLI, run) hold every sample
            for frame in set(frames[frames.index("Pipeline._loop") + 1 :]):
                inclusive[frame] += samples
    out = [f"{total} samples", "own time:"]
    out += [f"  {n / total:6.1%}  {name}" for name, n in own.most_common(count)]
    out.append("including callees (below the pipeline loop):")
    out += [f"  {n / total:6.1%}  {name}" for name, n in inclusive.most_common(count)]
    return "\n".join(out)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--rows", type=int, default=300_000)
    parser.add_argument("--txn-rows", type=int, default=100_000)
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument("--raw", type=Path, help="keep py-spy's raw samples here")
    parser.add_argument(
        "--native", action="store_true", help="sample C frames too (the compiled hot path)"
    )
    args = parser.parse_args()
    # the profile extra's py-spy sits beside this interpreter; the venv's bin/ need not be on PATH
    py_spy = Path(sys.executable).parent / "py-spy"
    if not py_spy.is_file():
        raise SystemExit(f"py-spy is missing from {py_spy.parent}: pip install -e '.[profile]'")
    spec = importlib.util.find_spec("bridge.pipeline")
    if spec is not None and spec.origin is not None and spec.origin.endswith(".so"):
        print("note: the hot path is compiled; py-spy attributes its time to the callers")
    stack = e2e.load_stack().Stack()
    stack.start()
    try:
        stack.create_database(e2e.DB)
        dsn = str(stack.dsn(e2e.DB))
        with tempfile.TemporaryDirectory(prefix="bench-profile-") as tmp:
            raw = args.raw or Path(tmp) / "profile.raw"
            with psycopg.connect(dsn, autocommit=True) as conn:
                workloads.prepare(conn)
                slot = e2e.Slot(conn, "profiled")
                bridge = e2e.Bridge(stack, "profiled", Path(tmp), exactly_once=False)
                bridge.start()
                e2e.wait(lambda: slot.state()[0], 60, "the slot", bridge.check)
                bridge.stop()
                e2e.wait(lambda: not slot.state()[0], 60, "the slot released", lambda: None)
                backlog = workloads.load(dsn, "insert", args.rows, args.txn_rows)
                bridge.start()
                e2e.wait(lambda: slot.state()[0], 60, "the slot", bridge.check)
                assert bridge.proc is not None
                cpu0, machine0, t0 = bridge.cpu_s(), busy_jiffies(), time.monotonic()
                spy_args = ["--pid", str(bridge.proc.pid), "--rate", "250", "--format", "raw"]
                # native unwinding needs the process paused while sampled
                spy_args += ["--native"] if args.native else ["--nonblocking"]
                spy = subprocess.Popen(
                    [str(py_spy), "record", *spy_args, "--output", str(raw)],
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                )
                done = lambda: slot.state()[1] > backlog.last_start  # noqa: E731
                e2e.wait(done, 600, "the last transaction confirmed", bridge.check)
                seconds, cpu = time.monotonic() - t0, bridge.cpu_s() - cpu0
                machine1 = busy_jiffies()
                spy.send_signal(2)  # py-spy writes its file on SIGINT
                spy.wait(60)
                bridge.stop()
            busy = 1 - (machine1[1] - machine0[1]) / (machine1[0] - machine0[0])
            print(
                f"{args.rows:,} rows in transactions of {args.txn_rows:,}: "
                f"{args.rows / seconds:,.0f} rows/s, bridge {cpu / args.rows * 1e6:.1f} µs "
                f"CPU per row, machine {busy:.0%} busy"
            )
            print(top(raw, args.top))
    finally:
        stack.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
