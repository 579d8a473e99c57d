"""By default (`registry.on_incompatible: new_subject`) a schema the registry refuses goes to
the subject's next generation, with one WARNING and one count per move; a generation that
exists already (a restart registering the moved schema again) is no new move."""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest

from bridge.config import RegistryConfig
from bridge.errors import RegistryHTTPError
from bridge.kafka.registry import Registry


def _row(kind: str) -> dict[str, Any]:
    return {
        "type": "record",
        "name": "Key",
        "namespace": "p.public.t",
        "fields": [{"name": "a", "type": kind, "pg.name": "a", "pg.type": "int4"}],
    }


OLD, NEW = _row("int"), _row("string")
NEW["fields"][0]["pg.type"] = "text"


class Subjects:
    """A registry whose subjects take only the schema they hold first: any other is
    refused as incompatible."""

    def __init__(self, **held: dict[str, Any]) -> None:
        self.held = {subject: json.dumps(schema) for subject, schema in held.items()}
        self.ids: dict[str, int] = {}

    def get_latest_version(self, subject_name: str) -> str:
        if subject_name not in self.held:
            raise RegistryHTTPError(404, "Subject not found")
        return self.held[subject_name]

    def register_schema(self, subject_name: str, schema: str) -> int:
        held = self.held.setdefault(subject_name, schema)
        if held != schema:
            raise RegistryHTTPError(409, "Incompatible schema")
        return self.ids.setdefault(schema, len(self.ids) + 1)


def test_the_default_is_new_subject() -> None:
    assert RegistryConfig().on_incompatible == "new_subject"


def test_a_refused_schema_moves_to_the_next_generation_with_one_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    client = Subjects(**{"p.public.t-key": OLD})
    moves: list[str] = []
    registry = Registry(client, on_move=moves.append)
    with caplog.at_level(logging.WARNING, logger="bridge.registry"):
        first = registry.register("p.public.t-key", NEW, table="public.t")
        assert registry.register("p.public.t-key", NEW, table="public.t") == first
    assert client.held["p.public.t-key-v2"] == json.dumps(NEW)
    (warning,) = [r for r in caplog.records if r.name == "bridge.registry"]
    assert warning.levelno == logging.WARNING
    text = warning.getMessage()
    assert "table public.t (column a: int4 (int) -> text (string))" in text
    assert "under subject 'p.public.t-key' was refused as incompatible" in text
    assert "the new subject 'p.public.t-key-v2'" in text
    assert "must read 'p.public.t-key-v2'" in text and "keep 'p.public.t-key'" in text
    assert moves == ["public.t"]


def test_a_generation_that_exists_is_no_new_move(caplog: pytest.LogCaptureFixture) -> None:
    client = Subjects(**{"p.public.t-key": OLD, "p.public.t-key-v2": NEW})
    moves: list[str] = []
    with caplog.at_level(logging.WARNING, logger="bridge.registry"):
        Registry(client, on_move=moves.append).register("p.public.t-key", NEW, table="public.t")
    assert not caplog.records
    assert moves == []


def test_generations_only_go_forward(caplog: pytest.LogCaptureFixture) -> None:
    """Back to the first generation's schema (a retype reverted) while the second is the
    newest: tried there, refused, it goes to a third, not silently back to the first."""
    client = Subjects(**{"p.public.t-key": OLD, "p.public.t-key-v2": NEW})
    registry = Registry(client)
    assert registry.current("p.public.t-key") == NEW
    with caplog.at_level(logging.WARNING, logger="bridge.registry"):
        registry.register("p.public.t-key", OLD, table="public.t")
    assert client.held["p.public.t-key-v3"] == json.dumps(OLD)
    (warning,) = caplog.records
    assert "the new subject 'p.public.t-key-v3'" in warning.getMessage()
    assert registry.current("p.public.t-key") == OLD
