"""Schema look-ups for the Spark reader over the registry's Confluent-compatible REST API.

Plain HTTP rather than confluent_kafka's client: the reader needs "latest version of a subject"
to be re-read exactly when a new writer id shows up, which that client's own caching hides.
Writer schemas never change for an id, so each is fetched once.

A subject has generations (`bridge.config.subject_generation`: `<subject>`, `<subject>-v2`,
...): a version the registry refused as incompatible is registered by the bridge under the
next one (`registry.on_incompatible: new_subject`, its default). A writer id belongs to one
generation, and is read with that generation's latest version.
"""

from __future__ import annotations

import json
from typing import Any

import httpx

from bridge.config import subject_generation
from bridge.errors import SchemaError

_HINT = "check registry_url / registry_auth and that the registry is up"
_HEADERS = {"Content-Type": "application/vnd.schemaregistry.v1+json"}


class SchemaSource:
    """Writer schemas by id (immutable, cached) and latest reader schemas by subject."""

    def __init__(
        self, url: str, auth: tuple[str, str] | None = None, timeout: float = 30.0
    ) -> None:
        self._http = httpx.Client(base_url=url.rstrip("/"), auth=auth, timeout=timeout)
        self._writers: dict[int, str] = {}
        self._latest: dict[str, str | None] = {}
        self._holders: dict[tuple[str, int], str] = {}  # (subject, id) -> its generation

    def close(self) -> None:
        self._http.close()

    def writer(self, schema_id: int) -> str:
        found = self._writers.get(schema_id)
        if found is None:
            body = self._request("GET", f"/schemas/ids/{schema_id}")
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
            body = self._request("GET", f"/subjects/{subject}/versions/latest")
            self._latest[subject] = None if body is None else _schema_text(body, subject)
        return self._latest[subject]

    def generations(self, subject: str, *, refresh: bool = False) -> list[str]:
        """The generations of `subject` the registry has, oldest first (`[]`: no subject);
        their latest versions read (again with `refresh`)."""
        found: list[str] = []
        while self.latest(subject_generation(subject, len(found) + 1), refresh=refresh):
            found.append(subject_generation(subject, len(found) + 1))
        return found

    def newest(self, subject: str) -> str | None:
        """The latest schema of `subject`'s newest generation, None when there is none."""
        found = self.generations(subject)
        return self.latest(found[-1]) if found else None

    def holder(self, generations: list[str], schema_id: int) -> str:
        """The generation (of `generations`, oldest first) that holds writer `schema_id`:
        the newest whose look-up of the writer schema finds it, else the oldest."""
        subject = generations[0]
        found = self._holders.get((subject, schema_id))
        if found is None:
            text = self.writer(schema_id)
            found = next((g for g in reversed(generations[1:]) if self._holds(g, text)), subject)
            self._holders[subject, schema_id] = found
        return found

    def _holds(self, subject: str, schema_text: str) -> bool:
        """Whether `subject` has a version of that schema (Confluent's look-up)."""
        return self._request("POST", f"/subjects/{subject}", {"schema": schema_text}) is not None

    def _request(
        self, method: str, path: str, body: dict[str, Any] | None = None
    ) -> dict[str, Any] | None:
        try:
            response = self._http.request(method, path, json=body, headers=_HEADERS)
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
            answer = response.json()
        except ValueError:
            answer = None
        if not isinstance(answer, dict):
            raise SchemaError(f"schema registry sent no JSON object for {path}", hint=_HINT)
        return answer


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


def changed_fields(old_text: str, new_text: str) -> set[str]:
    """The row columns (of an envelope, or a key record) whose Avro type differs between
    two schemas: a retype the registry refused, read across subject generations."""
    before = {str(f["name"]): f.get("type") for f in _row_record(old_text).get("fields", [])}
    after = {str(f["name"]): f.get("type") for f in _row_record(new_text).get("fields", [])}
    return {name for name, kind in after.items() if name in before and before[name] != kind}


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
