"""The docs' type table (docs/reference/types.md) is the measured consumer matrix
(tests/consumers/matrix.json), rendered by tests/consumers/matrix.py: a unit test, so the docs
cannot drift."""

from __future__ import annotations

import json

from consumers.matrix import BEGIN, END, MATRIX_FILE, TYPE_TABLE, render


def test_type_table_is_generated_from_the_matrix() -> None:
    text = TYPE_TABLE.read_text()
    block = text[text.index(BEGIN) : text.index(END) + len(END)]
    assert block == render(json.loads(MATRIX_FILE.read_text())), (
        "docs/reference/types.md's type table is stale: run python -m tests.consumers.matrix"
    )
