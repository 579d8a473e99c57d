"""PostgreSQL logical replication → Kafka (Avro) change-data-capture bridge."""

import hashlib
from pathlib import Path

__version__ = "0.1.0"

# Written by setup.py when it compiles: "<sha256>  <path>" per compiled source.
BUILD_RECORD = "bridge/.compiled.sha256"


def stale_compiled_modules(root: Path) -> list[str]:
    """Compiled sources of checkout `root` whose text changed since the last build.

    Python imports an extension module before the `.py` beside it, so an edit
    would silently not run until the next build.
    """
    record = root / BUILD_RECORD
    if not record.exists():
        return []  # nothing compiled (BRIDGE_PURE_PYTHON install)
    stale = []
    for line in record.read_text(encoding="utf-8").splitlines():
        digest, _, path = line.partition("  ")
        source = root / path
        if not source.exists() or hashlib.sha256(source.read_bytes()).hexdigest() != digest:
            stale.append(path)
    return stale


def _refuse_stale_build() -> None:
    root = Path(__file__).parent.parent
    if not (root / "setup.py").exists():
        return  # an installed wheel: sources and extensions come from one build
    stale = stale_compiled_modules(root)
    if stale:
        raise ImportError(
            f"{', '.join(stale)} changed after it was compiled, so the old compiled code "
            "would run; rebuild with `pip install -e .` (./deploy/local/dev.sh does it "
            "when sources change) or install with BRIDGE_PURE_PYTHON=1 to skip compiling"
        )


_refuse_stale_build()
