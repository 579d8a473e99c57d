"""The big bad-input campaign: decoders, replication envelope and value converters.

    python bench/fuzz.py                        # 1,100,000 decoder inputs + the others
    python bench/fuzz.py --inputs 5000000 --seed 7
    python bench/fuzz.py --atheris 300          # instead: coverage-guided, 300 s

The generators are those of tests/badinput (which runs a small seeded campaign in
the normal suite): structured mutations of the golden captures of both plugins
(bit flips, truncation, insertion, deletion, corrupted length and count fields,
wrong type bytes, spliced messages, swapped tuple kinds) plus random bytes,
against every decoder state: pgoutput proto 1-4 outside and (2-4) inside a
stream block, pglogical_output before and after each kind of startup message.
The only acceptable outcomes are a result or ProtocolError (for values also
SchemaError from the Avro writer); every input is timed in thread CPU time and
aborted as a hang after --hang-limit seconds.

Prints inputs/s, counts per outcome and the maximum CPU time per input, and the
first crashes with their input in hex; exits 1 if there was any crash or hang.

--atheris runs only libFuzzer (atheris, an optional extra: `pip install atheris`)
for that many seconds on one entry point covering every decoder state (first byte
picks the state), seeded with the golden messages; it stops at the first crash.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import sys
import tempfile
from pathlib import Path
from typing import Any, NoReturn

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))  # the test helpers import their siblings by name

from bridge.errors import ProtocolError  # noqa: E402
from tests.badinput.campaign import (  # noqa: E402
    Target,
    decoder_targets,
    run_decoders,
    run_envelope,
)
from tests.badinput.harness import Report  # noqa: E402
from tests.badinput.values import WRITER_ERRORS, run_values, value_sides  # noqa: E402


def show(title: str, report: Report, per_target: bool = False) -> bool:
    print(f"\n== {title}\n{report.summary()}")
    if per_target:
        for name, count in sorted(report.per_target.items()):
            print(f"  {name:36} {count:>10,}")
    for line in report.crash_lines():
        print(f"  CRASH {line}")
    if len(report.crashes) > 10:
        print(f"  ... {len(report.crashes) - 10} more")
    return not report.crashes


def atheris_fuzz(targets: list[Target], seconds: int) -> NoReturn:
    """Coverage-guided: libFuzzer mutates towards new branches of the decoders."""
    atheris: Any = importlib.import_module("atheris")  # optional extra, only for this mode

    atheris.instrument_all()
    corpus = Path(tempfile.mkdtemp(prefix="bridge-fuzz-corpus-"))
    for i, target in enumerate(targets):
        for j, seed in enumerate(target.seeds):
            (corpus / f"{i}-{j}").write_bytes(bytes([i]) + seed)

    def one_input(data: bytes) -> None:
        if not data:
            return
        target = targets[data[0] % len(targets)]
        with contextlib.suppress(ProtocolError):
            target.make()(data[1:])

    print(f"\n== atheris for {seconds}s, corpus {corpus}", flush=True)
    args = [sys.argv[0], f"-max_total_time={seconds}", "-rss_limit_mb=4096", str(corpus)]
    atheris.Setup(args, one_input)
    atheris.Fuzz()  # exits the process: with 0 when time is up, non-zero on a crash
    sys.exit(0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--inputs", type=int, default=1_100_000, help="decoder inputs")
    parser.add_argument("--envelope-inputs", type=int, default=100_000)
    parser.add_argument("--value-inputs", type=int, default=300_000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--hang-limit", type=float, default=2.0, help="seconds per input")
    parser.add_argument("--atheris", type=int, default=0, metavar="SECONDS")
    args = parser.parse_args()

    targets = decoder_targets()
    if args.atheris:
        atheris_fuzz(targets, args.atheris)
    ok = show(
        f"decoders: {len(targets)} states",
        run_decoders(targets, args.inputs, args.seed, args.hang_limit),
        per_target=True,
    )
    ok &= show("replication envelope", run_envelope(args.envelope_inputs, args.seed))
    sides = value_sides(through_writer=True)
    ok &= show(
        f"value converters + Avro writer: {len(sides)} (type, format) pairs",
        run_values(sides, args.value_inputs, args.seed, args.hang_limit, WRITER_ERRORS),
    )
    if not ok:
        sys.exit(1)


if __name__ == "__main__":
    main()
