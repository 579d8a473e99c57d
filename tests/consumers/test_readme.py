"""README's type table is the measured consumer matrix (tests/consumers/matrix.json),
rendered by tests/consumers/matrix.py: a unit test, so the docs cannot drift."""

from __future__ import annotations

import json

from tests.consumers.matrix import BEGIN, END, MATRIX_FILE, README, render


def test_readme_block_is_generated_from_the_matrix() -> None:
    text = README.read_text()
    block = text[text.index(BEGIN) : text.index(END) + len(END)]
    assert block == render(json.loads(MATRIX_FILE.read_text())), (
        "README's type table is stale: run python -m tests.consumers.matrix"
    )
