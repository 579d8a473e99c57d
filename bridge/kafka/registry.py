"""Schema registration: one registry round trip per new schema version, then cached.

Subjects follow Confluent's naming strategies; `topic` (`<topic>-key`,
`<topic>-value`) is the default, as with Debezium. Each subject may have generations
(`<subject>-v2`, ...: below); the newest is found by looking the next one up (one round
trip more per subject, then cached).

A version the registry refuses as incompatible with its subject (the stack runs BACKWARD),
or one that changes a decimal's scale (which the registry accepts though reader-schema
consumers would misread older values), is registered under the subject's next generation,
`<subject>-v2`, `-v3`... (`registry.on_incompatible: new_subject`, the default: the ALTER is
a valid PostgreSQL change, and records carry their schema id, so deserializers read them
whatever the subject; a consumer that looks schemas up by subject must follow). Nothing
moves to a new subject silently: each move is one WARNING naming the table, the columns
that changed and both subjects, and counted (`on_move`). `registry.on_incompatible: stop`
stops the bridge instead, with an `IncompatibleSchemaError` naming the same.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Final, Literal, NamedTuple, Protocol

from bridge.config import Config, subject_generation
from bridge.errors import IncompatibleSchemaError, RegistryHTTPError, SchemaError

if TYPE_CHECKING:
    from confluent_kafka.schema_registry import SchemaRegistryClient

Strategy = Literal["topic", "record", "topic_record"]
OnIncompatible = Literal["stop", "new_subject"]
_MAX_GENERATIONS: Final = 1000  # <subject>-v2 ... : a bound, not a limit anyone reaches
_RESCALED: Final = "the bridge (the registry would accept it, and consumers misread old values)"
log: Final = logging.getLogger("bridge.registry")


def subject_name(strategy: Strategy, topic: str, record_fullname: str, is_key: bool) -> str:
    if strategy == "record":
        return record_fullname
    if strategy == "topic_record":
        return f"{topic}-{record_fullname}"
    return f"{topic}-{'key' if is_key else 'value'}"


def fingerprint(schema: dict[str, Any] | list[Any]) -> str:
    return hashlib.sha256(json.dumps(schema, sort_keys=True).encode()).hexdigest()


class RegistryClient(Protocol):
    """What `Registry` asks of a registry client, schemas as their JSON text: the
    stream's `ConfluentClient`, or `bridge.verify.schemas.Lookups` (look-ups over the
    standard library). An HTTP error answer is raised as `RegistryHTTPError`; any other
    exception is taken for the registry being unreachable."""

    def get_latest_version(self, subject_name: str) -> str: ...

    def register_schema(self, subject_name: str, schema: str) -> int: ...


class KnownSchemas(NamedTuple):
    """A `Registry`'s caches, handed to another process (`Registry.known`)."""

    ids: dict[tuple[str, str], int]
    latest: dict[str, dict[str, Any] | None]


class Registry:
    """Registers schemas once per (subject, fingerprint) and remembers the ids.

    confluent-kafka's registry client is imported on the first registry round trip, not
    with this module: ~0.2 s of imports (its OAuth and HTTP stacks) that a snapshot
    reader, answered from its parent's `known` schemas, never needs.
    """

    def __init__(
        self,
        client: RegistryClient,
        strategy: Strategy = "topic",
        on_incompatible: OnIncompatible = "new_subject",
        known: KnownSchemas | None = None,
        on_move: Callable[[str], None] | None = None,
    ) -> None:
        """`on_move(table)`: called for each move of a table's schema to a new subject
        (`Metrics.subject_moved`)."""
        self.client = client
        self.strategy = strategy
        self.on_incompatible: OnIncompatible = on_incompatible
        self._on_move = on_move
        self._ids: dict[tuple[str, str], int] = {} if known is None else dict(known.ids)
        # subject -> the schema this process registered last (or the registry's latest)
        self._latest: dict[str, dict[str, Any] | None] = {} if known is None else dict(known.latest)

    def known(self) -> KnownSchemas:
        """Every id registered and subject read so far: a registry built with them answers
        the same schemas without a round trip."""
        return KnownSchemas(dict(self._ids), dict(self._latest))

    def latest(self, subject: str) -> dict[str, Any] | None:
        """The subject's newest schema (None for a new subject): one round trip per subject,
        then what this process registered there last."""
        if subject not in self._latest:
            try:
                found = self.client.get_latest_version(subject)
            except RegistryHTTPError as exc:
                if exc.status != 404:
                    raise _registry_error(f"subject {subject!r}", exc) from None
                self._latest[subject] = None
            except Exception as exc:  # the HTTP stack's own errors when down
                raise _unreachable(f"while reading {subject!r}", exc) from None
            else:
                self._latest[subject] = json.loads(found)
        return self._latest[subject]

    def newest(self, subject: str) -> int:
        """The subject's newest generation (`subject_generation`): 1, or n where `<subject>-vn`
        exists and the next does not. A new version is tried there first, never in an
        older one: generations only go forward, so a consumer that follows subjects
        follows the newest (a retype reverted is a move again, not a silent return)."""
        # The subject itself first (its schema is read next anyway): a registry that does
        # not answer is then reported for the subject the user knows, not for `-v2`.
        self.latest(subject)
        n = 1
        while n < _MAX_GENERATIONS - 1 and self.latest(subject_generation(subject, n + 1)):
            n += 1
        return n

    def current(self, subject: str) -> dict[str, Any] | None:
        """The newest schema of the subject's newest generation (None for a new subject):
        the version a table's next one follows (its carried defaults)."""
        return self.latest(subject_generation(subject, self.newest(subject)))

    def register(self, subject: str, schema: dict[str, Any] | list[Any], *, table: str) -> int:
        """The id of `schema` under `subject` (a record, or a union such as an outbox
        event's `["null", T]`: the rescaling check applies to records only)."""
        key = (subject, fingerprint(schema))
        found = self._ids.get(key)
        if found is not None:
            return found
        refused: str | None = None  # why the generation before `target` refused it
        for n in range(self.newest(subject), _MAX_GENERATIONS):
            target = subject_generation(subject, n)
            previous = self.latest(target)
            outcome = self._try(target, previous, schema, table)
            if isinstance(outcome, str):
                refused = outcome
                continue
            if refused is not None and previous is None:
                self._moved(table, refused, subject_generation(subject, n - 1), target)
            if isinstance(schema, dict):
                self._latest[target] = schema
            else:
                self._latest.pop(target, None)  # read again when asked
            self._ids[key] = outcome
            return outcome
        raise SchemaError(f"subject {subject!r}: {_MAX_GENERATIONS} generations refused")

    def _try(
        self,
        target: str,
        previous: dict[str, Any] | None,
        schema: dict[str, Any] | list[Any],
        table: str,
    ) -> int | str:
        """The id of `schema` registered under `target` (whose newest is `previous`), or
        why it was refused there; under `stop` the refusal is raised."""
        rescaled = _rescaled(previous, schema)
        if rescaled:
            refused = self._refusal(target, schema, table, _RESCALED, rescaled)
        else:
            try:
                return self._register(target, json.dumps(schema))
            except RegistryHTTPError as exc:
                if exc.status != 409:
                    raise _registry_error(f"table {table}, subject {target!r}", exc) from None
                refused = self._refusal(target, schema, table, f"the registry: {exc.detail}")
            except Exception as exc:
                raise _unreachable(f"while registering {target!r}", exc) from None
        if self.on_incompatible == "stop":
            raise self._incompatible(target, refused)
        return refused

    def _moved(self, table: str, refused: str, old: str, new: str) -> None:
        """The one WARNING of a move to a new subject (it created `new`), and its count. A
        schema registered again in a generation that existed already (a restart replaying
        the move) is no new move."""
        log.warning(
            "%s; registered under the new subject %r instead (registry.on_incompatible: "
            "new_subject). Records carry their schema id: deserializers that read by id "
            "read old and new records alike. A consumer that looks schemas up by subject "
            "must read %r for the records written from now on and keep %r for the older "
            "ones; set registry.on_incompatible: stop to stop the bridge on such a change "
            "instead",
            refused,
            new,
            new,
            old,
        )
        if self._on_move is not None:
            self._on_move(table)

    def _register(self, subject: str, schema: str) -> int:
        """Register `schema` under `subject`, once more if the registry refused it for a
        race, not for the schema: Apicurio's Confluent-compatible API answers one of two
        concurrent first registrations of a subject (the bridge's stream and an external
        load, say) with 409 "already exists". The subject exists by then, and the second
        try registers as any later one does."""
        try:
            return self.client.register_schema(subject, schema)
        except RegistryHTTPError as exc:
            if exc.status != 409 or "already exists" not in exc.detail:
                raise
        return self.client.register_schema(subject, schema)

    def _refusal(
        self,
        subject: str,
        schema: dict[str, Any] | list[Any],
        table: str,
        by: str,
        changes: list[str] | None = None,
    ) -> str:
        """What was refused, the columns that changed named: the error's message under
        `stop`, the move's warning under `new_subject`."""
        old = self.latest(subject)
        if changes is None:
            changes = (
                incompatible_columns(old, schema)
                if isinstance(old, dict) and isinstance(schema, dict)
                else []
            )
        what = f" ({'; '.join(changes)})" if changes else ""
        return (
            f"the new schema of table {table}{what} under subject {subject!r} was refused "
            f"as incompatible: by {by}"
        )

    @staticmethod
    def _incompatible(subject: str, refusal: str) -> IncompatibleSchemaError:
        return IncompatibleSchemaError(
            refusal,
            hint="nothing past the last delivered transaction was acknowledged; revert the "
            "ALTER, relax the subject's compatibility level or migrate the consumers, or set "
            "registry.on_incompatible: new_subject to register it under a new subject "
            f"({subject_generation(subject, 2)!r}), then restart",
        )


def _rescaled(old: dict[str, Any] | None, new: dict[str, Any] | list[Any]) -> list[str]:
    """`rescaled_columns` of two records, none for a union or a new subject."""
    return rescaled_columns(old, new) if isinstance(old, dict) and isinstance(new, dict) else []


def rescaled_columns(old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    """Decimal columns whose scale changed or precision shrank: Avro's compatibility rules
    ignore logical types, so the registry accepts these, but a consumer reading an older
    record with the newer schema would read its unscaled digits at the new scale."""
    before, after = _columns(old), _columns(new)
    out = []
    for name, field in after.items():
        was, now = _value_type(before.get(name, field)), _value_type(field)
        if not (_is_decimal(was) and _is_decimal(now)):
            continue
        if was["scale"] != now["scale"] or was["precision"] > now["precision"]:
            out.append(
                f"column {field.get('pg.name', name)}: numeric scale {was['scale']} -> "
                f"{now['scale']}, precision {was['precision']} -> {now['precision']}"
            )
    return out


def _is_decimal(kind: Any) -> bool:
    return isinstance(kind, dict) and kind.get("logicalType") == "decimal"


def incompatible_columns(old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    """What changed between two versions of a key or envelope schema, column by column:
    a type that changed, a column without a default that appeared (key schemas)."""
    before, after = _columns(old), _columns(new)
    out = []
    for name, field in after.items():
        was = before.get(name)
        if was is None:
            if "default" not in field:
                out.append(f"column {field.get('pg.name', name)} added without a default")
        elif _value_type(was) != _value_type(field):
            out.append(
                f"column {field.get('pg.name', name)}: {_type_name(was)} -> {_type_name(field)}"
            )
    out.extend(
        f"column {field.get('pg.name', name)} removed"
        for name, field in before.items()
        if name not in after and "default" not in field
    )
    return out


def _columns(schema: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The row fields of an envelope (its `before` record), or a key record's fields."""
    fields = schema.get("fields", [])
    if fields and fields[0].get("name") == "before":
        row = next(t for t in fields[0]["type"] if isinstance(t, dict))
        fields = row["fields"]
    return {f["name"]: f for f in fields}


def _value_type(field: dict[str, Any]) -> Any:
    kind = field["type"]
    if isinstance(kind, list):
        kind = next((t for t in kind if t != "null"), "null")
    return kind


def _type_name(field: dict[str, Any]) -> str:
    pg = field.get("pg.type")
    kind = _value_type(field)
    avro = kind.get("logicalType", kind.get("type")) if isinstance(kind, dict) else kind
    return f"{pg} ({avro})" if pg else str(avro)


def _registry_error(what: str, exc: RegistryHTTPError) -> SchemaError:
    return SchemaError(f"schema registry error for {what}: {exc.message}", hint=exc.hint)


def _unreachable(what: str, exc: Exception) -> SchemaError:
    return SchemaError(
        f"schema registry unreachable {what}: {exc}",
        hint="check registry.url and that the registry is up; the bridge will resume "
        "from the last acknowledged LSN on restart",
    )


class ConfluentClient:
    """confluent-kafka's `SchemaRegistryClient` as a `RegistryClient`, imported and made
    at its first call; its `SchemaRegistryError`s raised as `RegistryHTTPError`s."""

    def __init__(self, config: dict[str, Any]) -> None:
        self._config = config
        self._client: SchemaRegistryClient | None = None

    def _get(self) -> SchemaRegistryClient:
        if self._client is None:
            from confluent_kafka.schema_registry import SchemaRegistryClient  # noqa: PLC0415

            self._client = SchemaRegistryClient(self._config)
        return self._client

    def get_latest_version(self, subject_name: str) -> str:
        client = self._get()
        with _statuses():
            return client.get_latest_version(subject_name).schema.schema_str or "null"

    def register_schema(self, subject_name: str, schema: str) -> int:
        from confluent_kafka.schema_registry import Schema  # noqa: PLC0415

        client = self._get()
        with _statuses():
            return client.register_schema(subject_name, Schema(schema, "AVRO"))


@contextmanager
def _statuses() -> Iterator[None]:
    """confluent-kafka's error answers as `RegistryHTTPError`s."""
    from confluent_kafka.schema_registry import SchemaRegistryError  # noqa: PLC0415

    try:
        yield
    except SchemaRegistryError as exc:
        raise RegistryHTTPError(exc.http_status_code, str(exc.error_message)) from None


def open_registry(
    cfg: Config,
    known: KnownSchemas | None = None,
    on_move: Callable[[str], None] | None = None,
) -> Registry:
    """The registry client as configured (the stream and the snapshot readers share this),
    answering `known` schemas (`Registry.known`) without a round trip; `on_move` as
    `Registry`'s."""
    return Registry(
        ConfluentClient(cfg.registry.client_config()),
        cfg.avro.subject_strategy,
        cfg.registry.on_incompatible,
        known,
        on_move,
    )
