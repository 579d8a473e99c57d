"""bench/<name>.py loaded by path, for the tests that reuse a bench's code.

bench/ itself stays off the tests' sys.path, where its scripts (decode.py, encode.py,
snapshot.py, ...) would shadow the tests' packages. A bench module that imports a sibling
(`from e2e import ...`) finds it once that sibling was loaded here first.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent.parent / "bench"


def load_bench_module(name: str) -> Any:
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, BENCH / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module
