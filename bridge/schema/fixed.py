"""The fixed Avro parts (source block, transaction block, metadata, heartbeat).

They live as `.avsc` files in the repository's `schemas/` directory, installed to
`<prefix>/share/pg-kafka-bridge/schemas` by the wheel; `BRIDGE_SCHEMAS_DIR`
overrides both.
"""

from __future__ import annotations

import json
import os
import sys
from functools import cache
from pathlib import Path
from typing import Any

from bridge.errors import SchemaError


def _candidates() -> list[Path]:
    found = []
    if env := os.environ.get("BRIDGE_SCHEMAS_DIR"):
        found.append(Path(env))
    found.append(Path(__file__).resolve().parents[2] / "schemas")
    found.append(Path(sys.prefix) / "share" / "pg-kafka-bridge" / "schemas")
    return found


@cache
def load_fixed(name: str) -> dict[str, Any]:
    """The parsed JSON of `schemas/<name>.avsc` (callers must not mutate it)."""
    for directory in _candidates():
        path = directory / f"{name}.avsc"
        if path.is_file():
            data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
            return data
    raise SchemaError(
        f"Avro schema file {name}.avsc not found in {', '.join(map(str, _candidates()))}",
        hint="set BRIDGE_SCHEMAS_DIR to the directory holding the project's schemas/",
    )
