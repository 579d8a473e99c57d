"""deploy/local/stack.py loaded by path, once per session, for every conftest that needs it.

Loading it also puts deploy/local (where the stack_* modules live) on sys.path.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

STACK_PATH = Path(__file__).resolve().parent.parent / "deploy" / "local" / "stack.py"
STACK_MODULE = "pgkb_local_stack"


def load_stack_module() -> ModuleType:
    if STACK_MODULE in sys.modules:
        return sys.modules[STACK_MODULE]
    spec = importlib.util.spec_from_file_location(STACK_MODULE, STACK_PATH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[STACK_MODULE] = module
    spec.loader.exec_module(module)
    return module
