"""The hot-path modules setup.py compiles with mypyc, read from setup.py itself, and the
stale-build guard the test session runs before importing anything of `bridge`.

Python imports an extension module before the `.py` beside it, so a compiled source
edited after the build would silently not run. `./deploy/local/dev.sh` reinstalls
(recompiles) whenever a source changed; this guard catches the same mistake when the
suite is run directly (`.venv/bin/python -m pytest ...`). It lives here, not in
`bridge/__init__.py`, so that `import bridge` hashes nothing in production.
"""

from __future__ import annotations

import ast
import hashlib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# Written by setup.py when it compiles: "<sha256>  <path>" per compiled source.
BUILD_RECORD = "bridge/.compiled.sha256"


def hot_path() -> list[str]:
    """Module paths (bridge/...py) of setup.py's HOT_PATH list."""
    tree = ast.parse((ROOT / "setup.py").read_text(encoding="utf-8"))
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "HOT_PATH" for t in node.targets
        ):
            value = ast.literal_eval(node.value)
            assert isinstance(value, list)
            return [str(v) for v in value]
    raise AssertionError("setup.py has no HOT_PATH list")


def stale_compiled_modules(root: Path) -> list[str]:
    """Compiled sources of checkout `root` whose text changed since the last build."""
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


def stale_build_message(root: Path) -> str | None:
    """Why the suite must not run on `root`'s build, or None when the build is current."""
    stale = stale_compiled_modules(root)
    if not stale:
        return None
    return (
        f"{', '.join(stale)} changed after it was compiled, so the old compiled code "
        "would run; rebuild with `pip install -e .` (./deploy/local/dev.sh does it "
        "when sources change) or install with BRIDGE_PURE_PYTHON=1 to skip compiling"
    )
