"""Programs the tests run that the project's `dev` extra installs.

They live in the venv's own bin/, next to the interpreter running the tests. That
directory is not on PATH when the suite runs as `.venv/bin/python -m pytest` (what
deploy/local/dev.sh does), and a fresh machine has none of them on its system PATH, so
looking them up on PATH would find nothing there, or a stray copy installed by hand.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest


def venv_tool(name: str) -> str:
    """The path of `name` in the running interpreter's bin/; fails the test if it is missing."""
    path = Path(sys.executable).parent / name  # not resolved: a venv's python is a symlink
    if not os.access(path, os.X_OK):
        pytest.fail(
            f"{name} is not installed in {path.parent}: install the project's dev extra there "
            "(deploy/local/dev.sh does, or `pip install -e '.[dev]'`)",
            pytrace=False,
        )
    return str(path)
