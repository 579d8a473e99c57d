"""Compiles the per-row hot path with mypyc; everything else stays plain Python.

The modules below are already `mypy --strict` clean, so mypyc turns them into C
extensions as they are (about 1.4x less CPU per row, see bench/README.md). Set
BRIDGE_PURE_PYTHON=1 to install without compiling (no C compiler needed); the
behaviour is the same, only slower.

Only modules whose code runs for every replication message, row or Kafka record are
compiled; only they are written for the compiler where it pays: module constants are
`Final` (read as C statics, not looked up in the module's dict on every use), per-row
integer work that may exceed 2**62 uses `mypy_extensions.i64` (native arithmetic, not
boxed ints) and NamedTuples are built with `tuple.__new__`. Everything else reads as
plain Python. Left out on purpose, because they run once per relation version, per
transaction or per connection (the pipeline caches their answers per relation):
routing (topic and filter decisions), oversized (the size limit per topic; diverting
is per oversized row only), metrics (counters the pipeline bumps itself; `committed`
and `confirmed` per transaction), snapshot/manager (start-up and `is_private` per
relation). Measured with bench/compare.py (1M rows, transactions of 100, insert):
see bench/README.md, "What is compiled".
"""

import hashlib
import os
from pathlib import Path

from setuptools import setup

HOT_PATH = [
    # per replication message: the COPY data read, the envelope, the status positions
    "bridge/source/wire.py",
    "bridge/source/envelope.py",
    "bridge/source/status.py",
    "bridge/source/stream.py",
    "bridge/source/copyboth.py",
    # (bridge/source/libpq.py is not: its psycopg.Connection subclass cannot be compiled:
    # psycopg's types are Any to the compiler, which then drops the base class; its one
    # per-message method, the CopyData read, is copyboth.py's compiled reader)
    # per message and row: pgoutput / pglogical bytes -> messages
    "bridge/decode/reader.py",
    "bridge/decode/messages.py",
    "bridge/decode/pgoutput.py",
    "bridge/decode/pgoutput_rows.py",
    "bridge/decode/pglogical.py",
    # per row: messages -> events in commit order
    "bridge/events/model.py",
    "bridge/events/relations.py",
    "bridge/events/transaction.py",
    "bridge/events/assembler.py",
    # per row: values -> Avro, the one encoder of keys, rows and envelopes
    "bridge/encode/textvalues.py",
    "bridge/encode/temporal.py",
    "bridge/encode/binvalues.py",
    "bridge/encode/columns.py",
    "bridge/schema/table.py",
    "bridge/encode/avro.py",
    "bridge/encode/plan.py",
    "bridge/encode/records.py",
    # per snapshot row: COPY output -> the encoder above
    "bridge/encode/copyrows.py",
    # per Kafka record: the record, produce, the delivery callback, the LSN watermark
    "bridge/record.py",
    "bridge/kafka/acks.py",
    "bridge/kafka/producer.py",
    # per message and row: the loop that moves events through the above
    # (bridge/build.py, which opens everything once, is plain Python)
    "bridge/pipeline.py",
    # bridge verify, per topic record and per PostgreSQL row: scanned in place, folded
    "bridge/verify/scan.py",
]

# What this build compiled, so that the test session can refuse to run extensions older
# than their sources (tests/compiled.py; dev.sh rebuilds when a source changed).
RECORD = Path("bridge/.compiled.sha256")

if os.environ.get("BRIDGE_PURE_PYTHON"):
    ext_modules = []
    RECORD.unlink(missing_ok=True)
else:
    RECORD.write_text(
        "".join(f"{hashlib.sha256(Path(p).read_bytes()).hexdigest()}  {p}\n" for p in HOT_PATH)
    )
    from mypyc.build import mypycify

    # Third-party packages are invisible to the compiler wherever it runs (pip's build
    # environment may or may not see them), so their types are always Any: plain
    # Python objects, checked by `mypy --strict` in development, and the compiled
    # code is the same on every machine. pyproject's mypy section (with its pydantic
    # plugin) is for that check, not for this build.
    options = ["--config-file=", "--no-site-packages", "--ignore-missing-imports"]
    ext_modules = mypycify([*options, *HOT_PATH], opt_level="3")

setup(ext_modules=ext_modules)
