"""The one error hierarchy: every failure the bridge reports is a `BridgeError`.

Each error carries a `hint` telling the operator what to do next; the CLI prints
`str(err)` (message + hint) and exits non-zero, never a traceback for these.
"""

from __future__ import annotations


class BridgeError(Exception):
    """Base of every error the bridge raises on purpose."""

    exit_code: int = 1

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return f"{self.message} ({self.hint})" if self.hint else self.message


class ConfigError(BridgeError):
    """The configuration file or environment is invalid."""

    exit_code = 2


class SourceError(BridgeError):
    """PostgreSQL cannot be used as a replication source as configured."""


class SourceTimeoutError(SourceError):
    """PostgreSQL did not answer within the deadline of the call (`bridge.source.libpq`):
    the query was cancelled, or its connection closed when the cancel went unanswered too."""


class StopRequestedError(BridgeError):
    """A stop (SIGTERM) ended a wait on PostgreSQL: not a failure. Whatever was under way
    is dropped unacknowledged; the run ends as stopped and resumes from the slot's
    confirmed position."""

    exit_code = 0


class ProtocolError(BridgeError):
    """Malformed or unsupported bytes on the replication stream.

    Raised by the decoders for truncated messages, unknown message types or tuple
    kinds, and by the startup check of pglogical_output; the pipeline stops without
    acknowledging anything past the last good transaction.
    """

    def __init__(self, message_type: str, offset: int, reason: str) -> None:
        super().__init__(
            f"malformed replication message {message_type!r} at byte {offset}: {reason}",
            hint="the stream cannot be decoded safely; nothing past the last good "
            "transaction was acknowledged. Check plugin and protocol options.",
        )
        self.message_type = message_type
        self.offset = offset
        self.reason = reason


class StreamSequenceError(ProtocolError):
    """Well-formed replication messages in an order the protocol does not allow: a commit
    without its begin, a row for a relation never described, a stream segment or prepared
    transaction never started. Each message decoded; the stream as a whole cannot be
    trusted, so the pipeline stops as for any ProtocolError."""

    def __init__(self, message_type: str, reason: str) -> None:
        BridgeError.__init__(
            self,
            f"replication message {message_type!r} out of sequence: {reason}",
            hint="nothing past the last good transaction was acknowledged; restart the "
            "bridge to replay from there, and report it with the plugin and server version "
            "if it repeats",
        )
        self.message_type = message_type
        self.offset = 0
        self.reason = reason


class SchemaError(BridgeError):
    """A relation cannot be mapped to Avro, or the registry refused a schema."""


class IncompatibleSchemaError(SchemaError):
    """The registry refused a table's new schema version as incompatible with its subject
    (a column's type changed, a key column added...): the message names the columns."""


class RegistryHTTPError(SchemaError):
    """The schema registry answered a request with an HTTP error status: what a registry
    client raises (`bridge.kafka.registry.RegistryClient`, whichever HTTP stack it uses),
    so callers tell a 404 (not registered) or a 409 (refused) from the registry being
    down. The hint says what an operator does about the status."""

    def __init__(self, status: int, detail: str) -> None:
        super().__init__(f"HTTP {status} {detail}", hint=_registry_hint(status))
        self.status = status
        self.detail = detail


def _registry_hint(status: int) -> str:
    if status == 401:
        return (
            "the registry refused the credentials: check registry.basic_auth_user and its "
            "password (set by environment, BRIDGE_REGISTRY__BASIC_AUTH_PASSWORD)"
        )
    if status == 403:
        return (
            "registry.basic_auth_user may not do this: the bridge needs a role that "
            "registers schemas (Apicurio's sr-developer), bridge verify one that reads "
            "(sr-readonly)"
        )
    return "check registry.url and that the registry is up"


class TableDroppedError(SchemaError):
    """A table's catalog row is gone: the table was dropped before the stream reached its
    changes (the changes committed before the DROP are still in the stream)."""


class RenamedRelationError(SourceError):
    """A change of a relation whose name, as of that change, the bridge cannot know: another
    relation was described with the name it had, and PostgreSQL sent no new description of
    it (pgoutput before PostgreSQL 16 does not announce ALTER SCHEMA ... RENAME, upstream
    commit cd4b2334db49), and the catalog cannot show that its name now is the one it had
    at that change (renamed again or dropped since, or renamed by a transaction the bridge
    cannot place before the change). Never guessed: the bridge stops before acknowledging
    the transaction, so the change lands in no table's topic by mistake."""

    def __init__(self, message: str) -> None:
        super().__init__(
            message,
            hint="nothing past the last good transaction was acknowledged. Restart the "
            "bridge: a new replication connection makes PostgreSQL describe each relation "
            "again, as of its next change, so once the slot's position passes the rename "
            "this does not recur; if it recurs at the same LSN, see 'Renamed schemas and "
            "tables' in docs/concepts/filters-and-routing.md",
        )


class DeliveryError(BridgeError):
    """Kafka did not accept a record after the client's own retries."""


class RecordTooLargeError(DeliveryError):
    """A table's record over its topic's size limit, found before producing it: a
    table's trouble like a value it cannot encode, so `pipeline.on_error` (and, for
    `fail` tables, `pipeline.oversized`) decides whether it stops the bridge."""


class FencedError(DeliveryError):
    """Kafka refuses this bridge's transactional writes: another instance initialised the
    same transactional id since (a standby pair's new active, or a second bridge with the
    same `kafka.transactional_id`). It stops and never retries a write: anything it wrote
    now would land after the newer instance's records."""


class SlotLostError(SourceError):
    """Changes between two LSNs can no longer be streamed: the slot was invalidated,
    dropped, recreated, or is missing on the server now primary (an unsynchronised
    failover). Raised instead of resuming from a new slot, which would skip them silently."""


class ValueConversionError(BridgeError):
    """A column value that cannot be written as its Avro type.

    Raised by the encoder for a value its converter cannot read (corrupt or unexpected
    text or binary form), a value outside its Avro type (an xid8 above 2**63, a
    numeric beyond its precision), or a NULL where the record key needs a value. The
    message names table, column and PostgreSQL type; the change is not produced and
    nothing past the last good transaction is acknowledged.
    """

    def __init__(
        self,
        table: str | None,
        column: str | None,
        pg_type: str,
        value: object,
        reason: object,
    ) -> None:
        where = ".".join(p for p in (table, column) if p) or "a column"
        shown = repr(value)
        if len(shown) > 80:
            shown = shown[:77] + "..."
        detail = f"{type(reason).__name__}: {reason}" if isinstance(reason, Exception) else reason
        super().__init__(
            f"{where} ({pg_type}): cannot encode the value {shown}: {detail}",
            hint="the change was not produced and nothing after the last good transaction "
            "was acknowledged; if PostgreSQL accepts this value, report it with the "
            "table definition, or leave the column out with filters.exclude_columns",
        )
        self.table = table
        self.column = column
        self.pg_type = pg_type
        self.value = value
        self.reason = detail


class VerifyError(BridgeError):
    """`bridge verify` could not reach a verdict: the bridge never delivered up to the
    verification point, a topic could not be read to its end, or a repair failed."""
