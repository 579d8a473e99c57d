"""The nemesis soak, long: tests/soak's run for as long as asked, with its own environment.

    python bench/soak.py [--minutes 60] [--seed N] [--exactly-once] [--mean-gap 20]

A network namespace for the bridge, a Kafka stack and a PostgreSQL 18 primary + standby
behind its links, a mixed workload over three tables, and a seeded schedule of overlapping
faults of every kind the fault suite has (tests/soak/nemesis.py); at the end the oracle
(tests/soak/oracle.py). Prints the fault timeline, the verdict and the figures
bench/README.md keeps; exits 1 unless nothing was lost, phantom, forbidden-duplicated or
out of order and the rebuilt tables equal PostgreSQL's. Without --seed a seed is drawn
and printed: the same seed replays the same schedule. Needs root (namespaces, tmpfs).
"""

from __future__ import annotations

import argparse
import random
import shutil
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "tests"), str(ROOT)]

from tests.soak.run import run_soak, soak_environment  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=60.0)
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--exactly-once", action="store_true")
    parser.add_argument("--mean-gap", type=float, default=20.0, help="seconds between faults")
    args = parser.parse_args()
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(10**6)
    print(f"soak seed {seed}, {args.minutes:g} minutes", flush=True)
    # Kept when the run fails (the bridge's log, the records read): removed only on success.
    scratch = Path(tempfile.mkdtemp(prefix="pgkb-soak-"))
    scratch.chmod(0o755)
    try:
        with soak_environment(scratch) as env:
            report = run_soak(
                env,
                seed,
                args.minutes * 60,
                exactly_once=args.exactly_once,
                mean_gap_s=args.mean_gap,
                drain_timeout_s=1800,
            )
    except BaseException:
        print(f"\nFAILED; replay with: {_replay(args, seed)}\nkept: {scratch}", flush=True)
        raise
    print("\n" + report.table())
    s = report.summary
    found = (s.lost, s.phantom, s.bad_duplicates, s.out_of_order, report.state_mismatches)
    clean = not any(found)
    if not clean:
        print(f"\nFAILED; replay with: {_replay(args, seed)}\nkept: {scratch}")
        return 1
    shutil.rmtree(scratch)
    return 0


def _replay(args: argparse.Namespace, seed: int) -> str:
    mode = " --exactly-once" if args.exactly_once else ""
    return f"python bench/soak.py --seed {seed} --minutes {args.minutes:g}{mode}"


if __name__ == "__main__":
    sys.exit(main())
