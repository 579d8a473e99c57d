"""The schema registry killed (SIGKILL) right after it answered a registration.

A record in Kafka carries the schema id the registry answered with; the registry must still
serve that id after any restart, a kill included (the soak's registry outage stops it
gracefully, but a stop that outlasts its grace ends in SIGKILL). H2's default write delay
left the last half second of commits unwritten: the exactly-once soak (seed 4713) read a
record whose id 7 the restarted registry answered 404 "No content with id/hash
'contentId-7'". deploy/local/stack_registry.py's H2 URL now writes each commit (WRITE_DELAY=0).
"""

from __future__ import annotations

import json
import uuid
from typing import Any

import httpx
import pytest

HEADERS = {"Content-Type": "application/vnd.schemaregistry.v1+json"}


@pytest.mark.fault
def test_registered_id_survives_registry_kill(stack: Any, registry_url: str) -> None:
    name = f"Killed_{uuid.uuid4().hex}"
    schema = json.dumps({"type": "record", "name": name, "fields": [{"name": "a", "type": "int"}]})
    response = httpx.post(
        f"{registry_url}/subjects/{name}-value/versions",
        json={"schema": schema},
        headers=HEADERS,
        timeout=30.0,
    )
    assert response.status_code == 200, response.text
    schema_id = response.json()["id"]
    stack.stop_registry(graceful=False)  # at once: within H2's old write delay
    stack.start_registry()
    for query in ({}, {"subject": f"{name}-value"}):  # the subject confluent-kafka's serde sends
        found = httpx.get(f"{registry_url}/schemas/ids/{schema_id}", params=query, timeout=30.0)
        assert found.status_code == 200, f"id {schema_id} {query}: {found.text}"
        assert json.loads(found.json()["schema"])["name"] == name
