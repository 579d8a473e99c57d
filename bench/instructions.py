"""The whole bridge's instructions per row, counted by callgrind: a figure machines share.

    python bench/instructions.py [--rows 10000] [--txn-rows 100] [--op insert] [--top 0]
                                  [--keep DIR]

Wall-clock rates and CPU seconds move with the machine (cores of our kind differ up to
3x, and one VM drifts by half that within an hour); instruction counts do not. On the
local stack (started and stopped here) with the compare table of bench/compare.py, it
drains a backlog of `--rows` rows in transactions of `--txn-rows`, and then one of
twice as many, each time with `python -m bridge run` under `valgrind --tool=callgrind`
from its start until its slot confirms the last transaction. The second count minus
the first, over `--rows`, is the instructions per row: start-up, connections and
shutdown are the same in both runs and cancel out. Every thread of the process counts
(librdkafka's too), the walsender and Kafka do not.

Two builds compare by running the script in each tree (a worktree at the older commit,
built with its own `pip install -e .`). `--top N` prints the N functions whose own
instructions grew most per row between the two drains; `--keep DIR` keeps both
callgrind files there, for `callgrind_annotate --inclusive=yes`.

A row under callgrind takes ~50x as long, so records carry more distinct ts_ms values
(the envelope's tail is encoded once per millisecond) than at full speed: a few hundred
instructions per row that a real drain does not spend.
"""

from __future__ import annotations

import argparse
import collections
import re
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import psycopg

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import compare_workloads as workloads
import e2e

_TOTAL = re.compile(r"^(?:summary|totals):\s+(\d+)", re.M)
_FUNCTION = re.compile(r"\s*([\d,]+)\s+(?:\([ \d.]+%\)\s+)?(\S.*?:.*?)(?:\s+\[.*\])?$")


def drain(
    stack: Any,
    dsn: str,
    conn: psycopg.Connection[Any],
    rows: int,
    args: argparse.Namespace,
    name: str,
    out: Path,
) -> int:
    """Instructions the bridge spent draining `rows` rows (callgrind's total)."""
    if args.op == "update":  # the rows to update, written before the slot exists
        workloads.load(dsn, "insert", rows, args.txn_rows)
    slot = e2e.Slot(conn, name)
    bridge = e2e.Bridge(stack, name, out.parent, exactly_once=False)
    bridge.start()  # creates the slot and the publication at the current position
    e2e.wait(lambda: slot.state()[0], 120, "the slot", bridge.check)
    bridge.stop()
    e2e.wait(lambda: not slot.state()[0], 60, "the slot released", lambda: None)
    backlog = workloads.load(dsn, args.op, rows, args.txn_rows)
    bridge.wrapper = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}"]
    bridge.start()
    e2e.wait(lambda: slot.state()[0], 600, "the slot (under callgrind)", bridge.check)
    done = lambda: slot.state()[1] > backlog.last_start  # noqa: E731
    e2e.wait(done, 3600, "the last transaction confirmed", bridge.check)
    bridge.stop(timeout=600)  # callgrind writes its file as the process exits
    slot.drop()
    conn.execute(f"TRUNCATE {workloads.TABLE}")
    found = _TOTAL.search(out.read_text(errors="replace"))
    if found is None:
        raise SystemExit(f"no total in {out}")
    return int(found.group(1))


def own_costs(path: Path) -> collections.Counter[str]:
    """Each function's own instructions (callgrind_annotate), keyed without its object:
    the same code may be named after either of two copies of a library."""
    text = subprocess.run(
        ["callgrind_annotate", "--inclusive=no", "--threshold=100", str(path)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    costs: collections.Counter[str] = collections.Counter()
    for line in text.splitlines():
        found = _FUNCTION.match(line)
        if found and not found.group(2).startswith(("=>", "<", "*")):
            costs[found.group(2).split(":", 1)[1].strip()] += int(found.group(1).replace(",", ""))
    return costs


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--rows", type=int, default=10_000, help="the first drain; then twice")
    parser.add_argument("--txn-rows", type=int, default=100)
    parser.add_argument("--op", choices=("insert", "update"), default="insert")
    parser.add_argument("--top", type=int, default=0, help="functions to list")
    parser.add_argument("--keep", type=Path, help="a directory to keep the callgrind files in")
    args = parser.parse_args()
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
            counts, files = [], []
            if args.keep:
                args.keep.mkdir(parents=True, exist_ok=True)
            for index, rows in enumerate((args.rows, 2 * args.rows)):
                out = (args.keep or Path(tmp)) / f"callgrind.{rows}"
                counts.append(drain(stack, dsn, conn, rows, args, f"instructions{index}", out))
                files.append(out)
                print(f"{rows:,} rows: {counts[-1]:,} instructions", flush=True)
            per_row = (counts[1] - counts[0]) / args.rows
            print(
                f"{per_row:,.0f} instructions per row ({args.op}s in transactions of "
                f"{args.txn_rows:,})"
            )
            if args.top:
                first, second = own_costs(files[0]), own_costs(files[1])
                grown = {f: (second[f] - first.get(f, 0)) / args.rows for f in second}
                for function, cost in sorted(grown.items(), key=lambda kv: -kv[1])[: args.top]:
                    print(f"  {cost:9,.0f}  {function}")
    finally:
        stack.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
