"""Schema registration: one registry round trip per new schema version, then cached.

Subjects follow Confluent's naming strategies; `topic` (`<topic>-key`,
`<topic>-value`) is the default, as with Debezium.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any, Literal

from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from confluent_kafka.schema_registry.error import SchemaRegistryError

from bridge.errors import SchemaError

Strategy = Literal["topic", "record", "topic_record"]


def subject_name(strategy: Strategy, topic: str, record_fullname: str, is_key: bool) -> str:
    if strategy == "record":
        return record_fullname
    if strategy == "topic_record":
        return f"{topic}-{record_fullname}"
    return f"{topic}-{'key' if is_key else 'value'}"


def fingerprint(schema: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(schema, sort_keys=True).encode()).hexdigest()


class Registry:
    """Registers schemas once per (subject, fingerprint) and remembers the ids."""

    def __init__(self, client: SchemaRegistryClient, strategy: Strategy = "topic") -> None:
        self.client = client
        self.strategy = strategy
        self._ids: dict[tuple[str, str], int] = {}

    def register(self, subject: str, schema: dict[str, Any], *, table: str) -> int:
        key = (subject, fingerprint(schema))
        found = self._ids.get(key)
        if found is not None:
            return found
        try:
            schema_id: int = self.client.register_schema(
                subject, Schema(json.dumps(schema), "AVRO")
            )
        except SchemaRegistryError as exc:
            if exc.http_status_code == 409:
                raise SchemaError(
                    f"schema registry rejected the new schema of table {table} under subject "
                    f"{subject!r} as incompatible: {exc.error_message}",
                    hint="nothing past the last delivered transaction was acknowledged; relax "
                    "the subject's compatibility level or migrate the consumers, then restart",
                ) from None
            raise SchemaError(
                f"schema registry error for table {table}, subject {subject!r}: "
                f"HTTP {exc.http_status_code} {exc.error_message}",
                hint="check registry.url and that the registry is up",
            ) from None
        except Exception as exc:  # the client raises plain requests/httpx errors when down
            raise SchemaError(
                f"schema registry unreachable while registering {subject!r}: {exc}",
                hint="check registry.url and that the registry is up; the bridge will resume "
                "from the last acknowledged LSN on restart",
            ) from None
        self._ids[key] = schema_id
        return schema_id
