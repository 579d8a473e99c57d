"""Schema look-ups for the Spark reader over the registry's Confluent-compatible REST API.

Plain HTTP rather than confluent_kafka's client: the reader needs "latest version of a subject"
to be re-read exactly when a new writer id shows up, which that client's own caching hides.
Writer schemas never change for an id, so each is fetched once.
"""

from __future__ import annotations

import json
from typing import Any

import httpx

from bridge.errors import SchemaError

_HINT = "check registry_url / registry_auth and that the registry is up"


class SchemaSource:
    """Writer schemas by id (immutable, cached) and latest reader schemas by subject."""

    def __init__(
        self, url: str, auth: tuple[str, str] | None = None, timeout: float = 30.0
    ) -> None:
        self._http = httpx.Client(base_url=url.rstrip("/"), auth=auth, timeout=timeout)
        self._writers: dict[int, str] = {}
        self._latest: dict[str, str | None] = {}

    def close(self) -> None:
        self._http.close()

    def writer(self, schema_id: int) -> str:
        found = self._writers.get(schema_id)
        if found is None:
            body = self._get(f"/schemas/ids/{schema_id}")
            if body is None:
                raise SchemaError(
                    f"schema id {schema_id} is not in the registry",
                    hint="the records were written against another registry; point "
                    "registry_url at the one the bridge uses",
                )
            found = self._writers[schema_id] = _schema_text(body, f"id {schema_id}")
        return found

    def latest(self, subject: str, *, refresh: bool = False) -> str | None:
        """Newest schema of `subject`, None when the subject does not exist."""
        if refresh or subject not in self._latest:
            body = self._get(f"/subjects/{subject}/versions/latest")
            self._latest[subject] = None if body is None else _schema_text(body, subject)
        return self._latest[subject]

    def _get(self, path: str) -> dict[str, Any] | None:
        try:
            response = self._http.get(path)
        except httpx.HTTPError as exc:
            raise SchemaError(f"schema registry unreachable ({path}): {exc}", hint=_HINT) from None
        if response.status_code == 404:
            return None
        if response.status_code != 200:
            raise SchemaError(
                f"schema registry answered HTTP {response.status_code} for {path}: "
                f"{response.text[:200]}",
                hint=_HINT,
            )
        try:
            body = response.json()
        except ValueError:
            body = None
        if not isinstance(body, dict):
            raise SchemaError(f"schema registry sent no JSON object for {path}", hint=_HINT)
        return body


def _schema_text(body: dict[str, Any], what: str) -> str:
    text = body.get("schema")
    if not isinstance(text, str):
        raise SchemaError(f"schema registry answer for {what} has no schema", hint=_HINT)
    return text


def source_fields(schema_text: str) -> list[str]:
    """Field names of a change envelope's `source` record; none for a key record."""
    schema = json.loads(schema_text)
    for field in schema.get("fields", []):
        if isinstance(field, dict) and field.get("name") == "source":
            kind = field.get("type")
            if isinstance(kind, dict):
                return [str(f["name"]) for f in kind.get("fields", [])]
    return []


def row_fields(schema_text: str) -> list[str]:
    """Column names of a change envelope's row record (or of a key record)."""
    return [str(f["name"]) for f in _row_record(schema_text).get("fields", [])]


def defaulted_row(schema_text: str) -> tuple[str, list[str]] | None:
    """(the row record's schema as JSON, its fields with a non-null default) of a change
    envelope, or None when no field has one: the apply fills those columns of rows already in
    a table with the default (`bridge.spark.apply`)."""
    row = _row_record(schema_text)
    named = [str(f["name"]) for f in row.get("fields", []) if f.get("default") is not None]
    return (json.dumps(row), named) if named and "name" in row else None


def _row_record(schema_text: str) -> dict[str, Any]:
    """A change envelope's row record, or the record itself (a key record)."""
    try:
        schema = json.loads(schema_text)
    except ValueError:
        schema = None
    if not isinstance(schema, dict) or not isinstance(schema.get("fields"), list):
        raise SchemaError("registry schema is not an Avro record", hint=_HINT)
    fields: list[dict[str, Any]] = [f for f in schema["fields"] if isinstance(f, dict)]
    by_name = {f.get("name"): f for f in fields}
    if "before" not in by_name:
        return {"fields": fields}  # a key record: its fields are the columns
    for name in ("before", "after"):
        branches = by_name[name].get("type")
        for branch in branches if isinstance(branches, list) else [branches]:
            if isinstance(branch, dict) and branch.get("type") == "record":
                return branch
    raise SchemaError(
        "registry schema has no before/after row record: not a change envelope",
        hint="read only the bridge's table topics",
    )
