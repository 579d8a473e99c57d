"""Compiles the per-row hot path with mypyc; everything else stays plain Python.

The modules below are already `mypy --strict` clean, so mypyc turns them into C
extensions as they are (about 1.4x less CPU per row, see bench/README.md). Set
BRIDGE_PURE_PYTHON=1 to install without compiling (no C compiler needed); the
behaviour is the same, only slower.

Written for the compiler where it pays: module constants are `Final` (read as C
statics, not looked up in the module's dict on every use), and per-row integer work
that may exceed 2**62 uses `mypy_extensions.i64` (native arithmetic, not boxed ints).
"""

import hashlib
import os
from pathlib import Path

from setuptools import setup

HOT_PATH = [
    "bridge/source/envelope.py",
    "bridge/source/status.py",
    "bridge/source/stream.py",
    "bridge/source/libpq.py",
    "bridge/decode/reader.py",
    "bridge/decode/messages.py",
    "bridge/decode/pgoutput.py",
    "bridge/decode/pgoutput_rows.py",
    "bridge/decode/pglogical.py",
    "bridge/events/model.py",
    "bridge/events/relations.py",
    "bridge/events/transaction.py",
    "bridge/events/assembler.py",
    "bridge/encode/textvalues.py",
    "bridge/encode/temporal.py",
    "bridge/encode/binvalues.py",
    "bridge/encode/columns.py",
    "bridge/schema/table.py",
    "bridge/encode/avro.py",
    "bridge/encode/plan.py",
    "bridge/encoders.py",
    "bridge/routing.py",
    "bridge/oversized.py",
    "bridge/metrics.py",
    "bridge/snapshot/manager.py",
    "bridge/encode/records.py",
    "bridge/acks.py",
    "bridge/produce.py",
    "bridge/pipeline.py",
]

# What this build compiled, so that `import bridge` in a source checkout can refuse
# to run extensions older than their sources (bridge/__init__.py).
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
