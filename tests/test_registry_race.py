"""A first registration that loses a race is tried again; a refused schema is not."""

from __future__ import annotations

from typing import Any

import pytest

from bridge.errors import IncompatibleSchemaError, RegistryHTTPError
from bridge.kafka.registry import Registry

SCHEMA: dict[str, Any] = {
    "type": "record",
    "name": "Row",
    "fields": [{"name": "id", "type": "int"}],
}
# Apicurio's answer to the loser of two concurrent first registrations of a subject
RACE = RegistryHTTPError(
    409, "An artifact with ID 'p.public.t-value' in group 'null' already exists."
)
REFUSED = RegistryHTTPError(409, "Incompatible schema")


class Client:
    """A registry that answers each registration with the next of `answers`."""

    def __init__(self, *answers: int | RegistryHTTPError) -> None:
        self.answers = list(answers)
        self.registered: list[str] = []

    def get_latest_version(self, subject_name: str) -> str:
        raise RegistryHTTPError(404, "Subject not found")

    def register_schema(self, subject_name: str, schema: str) -> int:
        self.registered.append(subject_name)
        answer = self.answers.pop(0)
        if isinstance(answer, RegistryHTTPError):
            raise answer
        return answer


def test_a_registration_that_lost_a_race_for_a_new_subject_is_tried_again() -> None:
    client = Client(RACE, 7)
    assert Registry(client).register("p.public.t-value", SCHEMA, table="public.t") == 7
    assert client.registered == ["p.public.t-value", "p.public.t-value"]


def test_a_refused_schema_is_not_tried_again() -> None:
    client = Client(REFUSED)
    with pytest.raises(IncompatibleSchemaError, match="Incompatible schema"):
        Registry(client, on_incompatible="stop").register(
            "p.public.t-value", SCHEMA, table="public.t"
        )
    assert client.registered == ["p.public.t-value"]


def test_a_race_lost_twice_is_an_error_not_a_loop() -> None:
    client = Client(RACE, RACE)
    with pytest.raises(IncompatibleSchemaError, match="already exists"):
        Registry(client, on_incompatible="stop").register(
            "p.public.t-value", SCHEMA, table="public.t"
        )
    assert len(client.registered) == 2
