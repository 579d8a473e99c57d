"""Configuration: one pydantic model, loaded from YAML, overridable by `BRIDGE_…` env vars.

Environment variables win over the file (`BRIDGE_SOURCE__PASSWORD` sets
`source.password`), so a Kubernetes Secret can fill credentials without touching
the ConfigMap. Unknown keys are rejected everywhere: a typo must not silently
fall back to a default.
"""

from __future__ import annotations

import hashlib
import logging
import re
import string
from pathlib import Path
from typing import Annotated, Any, Final, Literal

import yaml
from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    SecretStr,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    SettingsError,
)

from bridge import hosts, log
from bridge.errors import ConfigError

_SECRET_WORDS = ("password", "secret", "token")


def _compiles(pattern: str) -> str:
    """A regular expression setting is checked when the file is read, not at first use."""
    try:
        re.compile(pattern)
    except re.error as exc:
        raise ValueError(f"invalid regular expression {pattern!r}: {exc}") from None
    return pattern


Regex = Annotated[str, AfterValidator(_compiles)]
# What a table's change the bridge cannot encode or register does (pipeline.on_error).
OnError = Literal["fail", "dlq", "skip"]


def _upper(value: object) -> object:
    """A level may be written as the logging module names it or in lower case."""
    return value.upper() if isinstance(value, str) else value


TOPIC_TEMPLATE = "{prefix}.{schema}.{table}"


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class SourceConfig(_Section):
    """The PostgreSQL server, the slot and the output plugin."""

    host: str = Field(
        "127.0.0.1",
        description='one host, or several ("a,b:5433", each with an optional port): the primary '
        "is chosen (docs: operations/high-availability)",
    )
    port: int = Field(5432, ge=1, le=65535, description="for every host without its own :port")
    target_session_attrs: (
        Literal["any", "read-write", "read-only", "primary", "standby", "prefer-standby"] | None
    ) = Field(None, description="libpq's; null = primary with several hosts, any with one")
    dbname: str = Field("postgres", description="the database whose changes are captured")
    user: str = Field(
        "postgres", description="a role with LOGIN REPLICATION and SELECT on the captured tables"
    )
    password: SecretStr | None = Field(
        None, description="set it by environment (BRIDGE_SOURCE__PASSWORD); masked in every log"
    )
    sslmode: Literal["disable", "allow", "prefer", "require", "verify-ca", "verify-full"] = Field(
        "prefer",
        description="libpq's sslmode; verify-full checks the server's certificate and name",
    )
    sslrootcert: Path | None = Field(
        None, description="CA certificate file for verify-ca and verify-full"
    )
    connect_timeout_s: int = Field(10, ge=1, description="seconds to wait for a connection")
    tcp_user_timeout_s: int = Field(
        60, ge=0, description="drop a link whose sent data stays unacknowledged; 0 = OS default"
    )

    plugin: Literal["pgoutput", "pglogical_output"] = Field(
        "pgoutput", description="the logical decoding output plugin the slot uses"
    )
    slot_name: str = Field(
        "bridge",
        pattern=r"^[a-z0-9_]{1,63}$",
        description="the replication slot: one bridge process per slot",
    )
    create_slot: bool = Field(True, description="create the slot when it is missing")
    publication_name: str = Field("bridge", description="pgoutput's publication")
    publication_mode: Literal["all_tables", "filtered", "disabled"] = Field(
        "all_tables",
        description="a missing publication: created FOR ALL TABLES, FOR TABLE the tables the "
        "filters match at start-up, or never (disabled: it must exist)",
    )
    publish_via_partition_root: bool = Field(
        True, description="a publication the bridge creates: one topic per partitioned table"
    )
    publish_generated_columns: bool = Field(
        False,
        description="a publication the bridge creates publishes stored generated columns "
        "(PostgreSQL 18 on; virtual ones are never published)",
    )
    proto_version: int | None = Field(
        None, ge=1, le=4, description="pgoutput protocol; null = highest the server supports"
    )
    binary: bool = Field(
        False,
        description="pgoutput's binary tuples (PostgreSQL 14+): less CPU per row; every column "
        "type must have a binary form",
    )
    streaming: Literal["off", "on", "parallel"] = Field(
        "off",
        description="large transactions arrive while still in progress (pgoutput 2+), buffered "
        "up to pipeline.memory_limit_mb and spilled to disk until their commit",
    )
    two_phase: bool = Field(
        False, description="decode prepared transactions at PREPARE (pgoutput 3+), sent at commit"
    )
    messages: bool = Field(
        True, description="pg_logical_emit_message messages, to the <topic_prefix>.message topic"
    )
    origin: Literal["any", "none"] | None = Field(
        None,
        description="pgoutput's origin filter: none skips changes replicated in from elsewhere; "
        "null leaves the server's default (any)",
    )
    replication_sets: tuple[str, ...] = Field(
        ("default",), description="pglogical_output: the replication sets captured"
    )

    status_interval_s: float = Field(
        10.0,
        gt=0,
        le=3600,
        description="seconds between status updates to PostgreSQL (keep wal_sender_timeout "
        "well above it)",
    )
    slot_busy_timeout_s: float = Field(
        60.0,
        ge=0,
        description="how long to wait for a slot still active in another process (a pod "
        "being replaced) before failing",
    )
    failover_slot: bool = Field(
        False, description="create the slot with FAILOVER (PostgreSQL 17+): synced to standbys"
    )
    on_slot_lost: Literal["fail", "resnapshot"] = Field(
        "fail",
        description="a slot lost, dropped or re-created: stop naming the gap, or re-create it "
        "and snapshot again (docs: operations/lost-slots)",
    )
    resnapshots_per_hour: int = Field(
        3, ge=1, description="on_slot_lost: resnapshot at most this often, then fail"
    )

    @field_validator("host")
    @classmethod
    def _hosts(cls, host: str) -> str:
        hosts.parse_hosts(host, 5432)
        return host

    def endpoints(self) -> tuple[hosts.Endpoint, ...]:
        return hosts.parse_hosts(self.host, self.port)

    @model_validator(mode="after")
    def _check_protocol(self) -> SourceConfig:
        v = self.proto_version
        if v is not None:
            if self.streaming == "on" and v < 2:
                raise ValueError("streaming needs proto_version >= 2")
            if self.streaming == "parallel" and v < 4:
                raise ValueError("streaming=parallel needs proto_version 4")
            if self.two_phase and v < 3:
                raise ValueError("two_phase needs proto_version >= 3")
        return self

    def conninfo(self, *, replication: bool = False) -> dict[str, Any]:
        """psycopg connection keywords (the password stays out of any string)."""
        params: dict[str, Any] = {
            **hosts.libpq_params(self.endpoints(), self.target_session_attrs),
            "dbname": self.dbname,
            "user": self.user,
            "sslmode": self.sslmode,
            "connect_timeout": self.connect_timeout_s,
            # Status updates go out every few seconds, so a black-holed link shows up as
            # unacknowledged data: give up after this instead of the OS's ~15 minutes.
            "tcp_user_timeout": self.tcp_user_timeout_s * 1000,
            "application_name": f"bridge:{self.slot_name}",
        }
        if self.password is not None:
            params["password"] = self.password.get_secret_value()
        if self.sslrootcert is not None:
            params["sslrootcert"] = str(self.sslrootcert)
        if replication:
            params["replication"] = "database"
        return params


class TopicRule(_Section):
    """How the bridge creates a table topic whose name matches `match` (Debezium's
    `topic.creation.<group>.*`); None leaves a setting to the broker's default."""

    match: Regex = Field(".*", description="regular expression over the topic name, full match")
    partitions: int | None = Field(None, ge=1, description="null: the broker's default")
    replication_factor: int | None = Field(None, ge=1, description="null: the broker's default")
    config: dict[str, str] = Field(
        default_factory=dict, description="topic settings: cleanup.policy, retention.ms, ..."
    )


class KafkaConfig(_Section):
    """The Kafka cluster, topic names, producer settings and exactly-once delivery."""

    bootstrap_servers: str = Field(
        "127.0.0.1:9092", description="comma-separated host:port list of brokers"
    )
    topic_prefix: str = Field(
        "bridge",
        pattern=r"^[A-Za-z0-9._-]+$",
        description="first part of every topic name, and of the bridge's own topics",
    )
    topic_template: str = Field(
        TOPIC_TEMPLATE, description="placeholders {prefix}, {schema} and {table}"
    )
    security_protocol: Literal["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"] = Field(
        "PLAINTEXT", description="librdkafka's security.protocol"
    )
    sasl_mechanism: Literal["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"] | None = Field(
        None, description="with SASL_PLAINTEXT or SASL_SSL"
    )
    sasl_username: str | None = Field(None, description="the SASL user")
    sasl_password: SecretStr | None = Field(
        None, description="set it by environment (BRIDGE_KAFKA__SASL_PASSWORD); masked in logs"
    )
    ssl_ca_location: Path | None = Field(
        None, description="CA certificate file for the brokers' TLS certificates"
    )
    request_timeout_s: float = Field(
        10.0, gt=0, description="seconds a broker request (metadata, topic creation) may take"
    )
    producer: dict[str, str | int | float | bool] = Field(
        default_factory=dict, description="extra librdkafka producer settings"
    )
    exactly_once: bool = Field(
        False,
        description="Kafka transactions that also record the LSN: read_committed consumers see "
        "each change once (docs: concepts/delivery)",
    )
    transactional_id: str | None = Field(None, description="default: bridge-<slot_name>")
    offsets_topic: str | None = Field(None, description="default: <topic_prefix>.bridge_offsets")
    state_topic: str | None = Field(
        None, description="slot positions and cluster ids; default: <topic_prefix>.bridge_state"
    )
    transaction_max_records: int = Field(
        10_000, ge=1, description="exactly-once: records per Kafka transaction, at most"
    )
    transaction_interval_ms: int = Field(
        100,
        ge=1,
        description="exactly-once: milliseconds a Kafka transaction stays open, at most "
        "(whole PostgreSQL transactions are never split)",
    )
    topic_creation: tuple[TopicRule, ...] = Field(
        (),
        description="the bridge creates each table topic by the first rule matching its name; "
        "empty: topics are left to the broker (auto-create) or made beforehand",
    )

    @field_validator("topic_template")
    @classmethod
    def _placeholders(cls, template: str) -> str:
        """Checked here so a typo fails at start, not at a table's first row.

        `{table}` is required: without it every table would share one topic."""
        allowed = {"prefix", "schema", "table"}
        try:
            parts = list(string.Formatter().parse(template))
        except ValueError as exc:
            raise ValueError(f"cannot format {template!r}: {exc}") from None
        used = set()
        for _, field, spec, conversion in parts:
            if field is None:
                continue
            if field not in allowed or spec or conversion:
                raise ValueError(
                    f"{template!r}: unknown placeholder {{{field}}}; use only plain "
                    "{prefix}, {schema} and {table}"
                )
            used.add(field)
        if "table" not in used:
            raise ValueError(f"{template!r} must contain {{table}} (one topic per table)")
        template.format(prefix="p", schema="s", table="t")
        return template

    def client_config(self) -> dict[str, Any]:
        """librdkafka settings shared by every client the bridge makes.

        Without an `error_cb`: which client errors stop the bridge is produce's policy
        (`bridge.kafka.producer.kafka_client_config` adds it)."""
        conf: dict[str, Any] = {
            "bootstrap.servers": self.bootstrap_servers,
            "security.protocol": self.security_protocol,
            "socket.timeout.ms": int(self.request_timeout_s * 1000),
            # librdkafka's own log lines go through Python logging (and its secret mask),
            # each distinct problem once with a count of its repeats (bridge.log.ClientLog).
            "logger": log.ClientLog(logging.getLogger("bridge.kafka")),
        }
        if self.sasl_mechanism:
            conf["sasl.mechanism"] = self.sasl_mechanism
        if self.sasl_username:
            conf["sasl.username"] = self.sasl_username
        if self.sasl_password is not None:
            conf["sasl.password"] = self.sasl_password.get_secret_value()
        if self.ssl_ca_location is not None:
            conf["ssl.ca.location"] = str(self.ssl_ca_location)
        return conf


def subject_generation(subject: str, n: int) -> str:
    """The subject a schema incompatible with `subject`'s n-1 earlier generations goes to
    (`registry.on_incompatible: new_subject`): `subject` itself, then `<subject>-v2`, ...
    The bridge registers there (`bridge.kafka.registry`), its Spark reader looks there
    (`bridge.spark.registry`)."""
    return subject if n == 1 else f"{subject}-v{n}"


class RegistryConfig(_Section):
    """The Confluent-compatible schema registry that holds each table's key and value schemas."""

    url: str = Field(
        "http://127.0.0.1:8081",
        description="base URL of the registry's Confluent-compatible API",
    )
    basic_auth_user: str | None = Field(None, description="HTTP basic auth user")
    basic_auth_password: SecretStr | None = Field(
        None,
        description="set it by environment (BRIDGE_REGISTRY__BASIC_AUTH_PASSWORD); masked in logs",
    )
    ssl_ca_location: Path | None = Field(
        None, description="CA certificate file for the registry's TLS certificate"
    )
    on_incompatible: Literal["stop", "new_subject"] = Field(
        "new_subject",
        description="a schema the registry refuses as incompatible: register it under "
        "<subject>-v2, -v3... with one WARNING per move, or stop naming the columns "
        "(docs: concepts/schema-evolution)",
    )

    def client_config(self) -> dict[str, Any]:
        """Settings for confluent_kafka.schema_registry.SchemaRegistryClient."""
        conf: dict[str, Any] = {"url": self.url}
        if self.basic_auth_user is not None:
            secret = self.basic_auth_password
            password = secret.get_secret_value() if secret is not None else ""
            conf["basic.auth.user.info"] = f"{self.basic_auth_user}:{password}"
        if self.ssl_ca_location is not None:
            conf["ssl.ca.location"] = str(self.ssl_ca_location)
        return conf


class ColumnRule(_Section):
    """A value rewrite for text columns matched by `match` ("schema.table.column", full
    match), Debezium's `column.mask.with.N.chars` (mask: N asterisks),
    `column.truncate.to.N.chars` (truncate: the first N characters) and
    `column.mask.hash.<algorithm>.with.salt.<salt>` (hash: hex digest of salt + value)."""

    match: Regex = Field(description='regular expression over "schema.table.column", full match')
    action: Literal["mask", "truncate", "hash"] = Field(
        description="mask: N asterisks; truncate: the first N characters; hash: hex digest"
    )
    length: int | None = Field(None, ge=0, description="mask and truncate: N characters")
    algorithm: str | None = Field(None, description='hash: e.g. "SHA-256" or "sha256"')
    salt: str = Field("", description="hash: prepended to the value before hashing")

    @model_validator(mode="after")
    def _complete(self) -> ColumnRule:
        if self.action in ("mask", "truncate") and self.length is None:
            raise ValueError(f"action {self.action} needs length (N characters)")
        if self.action == "hash":
            if self.algorithm is None:
                raise ValueError("action hash needs algorithm")
            if hash_name(self.algorithm) not in hashlib.algorithms_available:
                raise ValueError(f"unknown hash algorithm {self.algorithm!r}")
        return self


def hash_name(algorithm: str) -> str:
    """Java's MessageDigest names (SHA-256, MD5) as hashlib's (sha256, md5)."""
    return algorithm.lower().replace("-", "")


class AvroConfig(_Section):
    """How PostgreSQL values become Avro (docs: concepts/types, and the type mapping table)."""

    timestamptz_mode: Literal["micros", "iso"] = Field(
        "micros",
        description="timestamptz: timestamp-micros in UTC, or an ISO-8601 string (Debezium's "
        "ZonedTimestamp)",
    )
    numeric_mode: Literal["string", "double", "variable"] = Field(
        "string",
        description="numeric without a precision: its exact text, a double, or "
        "{scale, value} (Debezium's VariableScaleDecimal)",
    )
    timestamp_mode: Literal["local", "instant"] = Field(
        "local", description="timestamp: local-timestamp-micros, or timestamp-micros (UTC)"
    )
    wide_decimal_mode: Literal["string", "double", "decimal"] = Field(
        "string", description="numeric(p, s) with p > 38, which Spark's decimal cannot hold"
    )
    out_of_range: Literal["clamp", "sentinel"] = Field(
        "clamp",
        description="dates/timestamps outside 0001..9999 and time 24:00: clamped and listed "
        "in special_values, or Debezium's int32/int64 sentinels",
    )
    decimal_mode: Literal["precise", "double", "string"] = Field(
        "precise", description="Debezium's decimal.handling.mode, for numeric(p, s)"
    )
    binary_mode: Literal["bytes", "base64", "hex"] = Field(
        "bytes", description="Debezium's binary.handling.mode, for bytea"
    )
    time_precision_mode: Literal["micros", "connect", "adaptive"] = Field(
        "micros", description="Debezium's time.precision.mode, for date, time and timestamp"
    )
    interval_mode: Literal["string", "record", "numeric"] = Field(
        "string",
        description="interval as Debezium's ISO 8601 string (Debezium's JDBC sink "
        "has no column type for a record), {months, days, micros} or Debezium's "
        "MicroDuration (interval.handling.mode)",
    )
    hstore_mode: Literal["map", "json"] = Field(
        "map", description="Debezium's hstore.handling.mode"
    )
    array_mode: Literal["portable", "typed"] = Field(
        "portable",
        description="portable: numeric(p, s) array elements as their text and arrays of 2+ "
        "dimensions as PostgreSQL's array text (forms Debezium's JDBC sink can apply); "
        "typed: decimal elements and nested arrays",
    )
    toast_mode: Literal["list", "placeholder"] = Field(
        "list",
        description="an unchanged TOASTed value: null and named in unchanged_fields, or "
        "__bridge_unavailable_value in string and bytes fields",
    )
    toast_reselect: bool = Field(
        False,
        description="re-read unchanged TOASTed columns by key before producing "
        "(a plain SELECT; the value read may be newer than the event: docs: concepts/records)",
    )
    subject_strategy: Literal["topic", "record", "topic_record"] = Field(
        "topic",
        description="registry subjects: <topic>-key/-value, <record name>, or "
        "<topic>-<record name>",
    )
    column_rules: tuple[ColumnRule, ...] = Field(
        (), description="mask, truncate or hash text columns; every matching rule, in order"
    )
    key_columns: dict[str, tuple[str, ...]] = Field(
        default_factory=dict,
        description='"schema.table" regex (full match) -> the columns of its record key, '
        "instead of the primary key (Debezium's message.key.columns); the first match wins",
    )

    @field_validator("key_columns")
    @classmethod
    def _key_patterns(cls, keys: dict[str, tuple[str, ...]]) -> dict[str, tuple[str, ...]]:
        for pattern, columns in keys.items():
            _compiles(pattern)
            if not columns:
                raise ValueError(f"{pattern!r}: name at least one key column")
        return keys


_JAVA_GROUP: Final = re.compile(r"\(\?<(?=[A-Za-z])")  # (?<name> but not (?<= or (?<!
_JAVA_REFERENCE: Final = re.compile(r"\$\{([A-Za-z][A-Za-z0-9]*)\}|\$(\d+)")


def java_regex(pattern: str) -> str:
    """A Java regular expression's named groups `(?<name>…)` in Python's `(?P<name>…)`."""
    return _JAVA_GROUP.sub("(?P<", pattern)


def java_replacement(template: str) -> str:
    """A Java replacement's `${name}` and `$1` as `re.Match.expand`'s `\\g<…>`."""
    escaped = template.replace("\\", "\\\\")
    return _JAVA_REFERENCE.sub(lambda m: f"\\g<{m.group(1) or m.group(2)}>", escaped)


class OutboxConfig(_Section):
    """Debezium's outbox event router (`io.debezium.transforms.outbox.EventRouter`) with
    its defaults: inserts (and snapshot reads) of an outbox table become events on a topic
    per `route_by_column` value, keyed by `key_column`, the payload column as the value,
    the `id` header and `headers`; updates are skipped as `on_update` says, deletes and
    TRUNCATE skipped (docs: concepts/filters-and-routing)."""

    tables: tuple[Regex, ...] = Field(
        (), description='regexes over "schema.table" (full match); empty: no outbox'
    )
    id_column: str = Field("id", description='the event id, sent as header "id"')
    key_column: str = Field("aggregateid", description="the record key")
    payload_column: str = Field("payload", description="the record value")
    route_by_column: str = Field(
        "aggregatetype", description="its value names the topic (topic_regex, topic_replacement)"
    )
    topic_regex: str = Field(
        "(?<routedByValue>.*)", description="Java syntax, over the route_by_column value"
    )
    topic_replacement: str = Field(
        "outbox.event.${routedByValue}", description="Java syntax: ${name} and $1 groups"
    )
    headers: dict[str, str] = Field(
        default_factory=dict,
        description="column -> header name (table.fields.additional.placement col:header:alias)",
    )
    on_update: Literal["warn", "error", "fatal"] = Field(
        "warn",
        description="an update of an outbox row is skipped with a warning or an error, or stops "
        "the bridge (fatal)",
    )
    tombstone_on_empty_payload: bool = Field(
        False, description="a blank payload, not only a NULL one, gives a record without a value"
    )

    def holds(self, schema: str, table: str) -> bool:
        """Whether `schema.table` is an outbox table (asked once per relation version)."""
        return any(re.fullmatch(p, f"{schema}.{table}") for p in self.tables)

    @field_validator("topic_regex")
    @classmethod
    def _topic_regex_compiles(cls, pattern: str) -> str:
        _compiles(java_regex(pattern))
        return pattern


class PipelineConfig(_Section):
    """Buffers, limits and side topics between the replication stream and Kafka."""

    spill_dir: Path = Field(
        Path("/tmp/bridge-spill"),
        description="streamed and prepared transactions beyond memory_limit_mb go to files here",
    )
    memory_limit_mb: int = Field(256, ge=1, description="streamed/prepared txn buffer in RAM")
    max_in_flight_records: int = Field(
        100_000, ge=1, description="records handed to Kafka and not yet acknowledged, at most"
    )
    max_in_flight_mb: int = Field(
        256, ge=1, description="MiB of records handed to Kafka and not yet acknowledged, at most"
    )
    tombstones: bool = Field(
        True, description="a delete is followed by a tombstone (a record without a value)"
    )
    shutdown_timeout_s: float = Field(
        30.0, gt=0, description="on SIGTERM: seconds to wait for Kafka to confirm what is in flight"
    )
    heartbeat_interval_s: float = Field(0.0, ge=0, description="0 disables heartbeats")
    heartbeat_topic_prefix: str = Field(
        "__bridge-heartbeat",
        pattern=r"^[A-Za-z0-9._-]+$",
        description="heartbeat topic <this>.<topic_prefix>; Debezium's topic.heartbeat.prefix "
        "is __debezium-heartbeat",
    )
    transaction_metadata: bool = Field(
        False, description="BEGIN/END records with per-table counts on <topic_prefix>.transaction"
    )
    oversized: Literal["stop", "dead_letter"] = Field(
        "stop",
        description="a record over its topic's max.message.bytes (or the producer's "
        "message.max.bytes) in a table whose on_error is fail: stop, or dead-letter it "
        "(counted and marked degraded as a dlq table's); a dlq or skip table's on_error "
        "governs its oversized records whatever this says",
    )
    dead_letter_topic: str | None = Field(None, description="default: <topic_prefix>.dlq")
    on_error: OnError = Field(
        "fail",
        description="a change of a table the bridge cannot encode or register a schema for, "
        "or a record of it over its topic's size limit (Debezium's "
        "event.processing.failure.handling.mode, errors.tolerance): fail stops "
        "with nothing acknowledged past the last good transaction; dlq sends it with its "
        "coordinates and the error to dead_letter_topic and streams on; skip counts and "
        "logs it and streams on",
    )
    on_error_tables: dict[Regex, OnError] = Field(
        default_factory=dict,
        description='regexes over "schema.table" (full match) -> fail, dlq or skip, for '
        "those tables instead of on_error; the first that matches, in file order",
    )

    def on_error_for(self, schema: str, table: str) -> OnError:
        """The failure policy of `schema.table` (asked once per relation version)."""
        name = f"{schema}.{table}"
        for pattern, mode in self.on_error_tables.items():
            if re.fullmatch(pattern, name):
                return mode
        return self.on_error

    def oversized_for(self, schema: str, table: str) -> OnError:
        """The policy of a record of `schema.table` over its topic's size limit: the
        table's own `on_error` when it is dlq or skip (the table's setting is the more
        specific one); for a fail table `oversized`, whose dead_letter is dlq."""
        mode = self.on_error_for(schema, table)
        return "dlq" if mode == "fail" and self.oversized == "dead_letter" else mode


class FiltersConfig(_Section):
    """Which tables and columns are captured: regular expressions, always a full match."""

    include_tables: tuple[Regex, ...] = Field(
        (), description='regexes over "schema.table" (full match); empty: every table'
    )
    exclude_tables: tuple[Regex, ...] = Field(
        (), description='regexes over "schema.table" (full match), left out'
    )
    exclude_columns: tuple[Regex, ...] = Field(
        (), description='regexes over "schema.table.column" (full match); not key columns'
    )
    skipped_operations: tuple[Literal["c", "u", "d", "t"], ...] = Field(
        (), description="operations not produced: c insert, u update, d delete, t truncate"
    )


class SnapshotConfig(_Section):
    """Initial and incremental snapshots; modes and guarantees in bridge/snapshot/modes.py."""

    mode: Literal["initial", "initial_only", "no_data", "when_needed", "always", "external"] = (
        Field(
            "initial",
            description="Debezium's snapshot modes, plus external: Spark's executors load the "
            "rows (docs: concepts/snapshots)",
        )
    )
    tables: tuple[str, ...] = Field(
        (), description='"schema.table" names; empty = every table the plugin sends'
    )
    workers: int = Field(2, ge=1, le=64, description="reader threads, each with a connection")
    chunk_size: int = Field(10_000, ge=1, description="rows per chunk of the initial snapshot")
    copy_format: Literal["text", "binary"] = Field(
        "binary",
        description="COPY format of the initial snapshot's chunks; binary falls back to text "
        "for a table with a column whose binary form the encoder cannot read. Binary is the "
        "default: the encoder writes the common types' send format inline, at the reader's "
        "CPU per row of text, and the server spends less on it than on printing text "
        "(bench/README.md, snapshot)",
    )
    progress_schema: str = Field(
        "bridge",
        pattern=r"^[a-z_][a-z0-9_]{0,62}$",
        description="schema of the snapshot progress tables (created; needs CREATE on the "
        "database)",
    )
    progress_bar: Literal["auto", "always", "never"] = Field(
        "auto", description="snapshot progress bars on stderr; auto: when it is a terminal"
    )
    signal_table: str | None = Field(
        None,
        pattern=r"^[A-Za-z_][A-Za-z0-9_]*\.[A-Za-z_][A-Za-z0-9_]*$",
        description='"schema.table" for execute-snapshot signals; null disables them',
    )
    incremental_chunk_size: int = Field(
        1024, ge=1, description="rows per chunk of an incremental snapshot"
    )
    signal_kafka_topic: str | None = Field(
        None,
        description="a topic of signals (Debezium's signal.kafka.topic): execute-snapshot, "
        "stop-snapshot, pause-snapshot, resume-snapshot keyed by kafka.topic_prefix",
    )
    signal_kafka_group: str = Field(
        "kafka-signal", description="consumer group of signal_kafka_topic (signal.kafka.groupId)"
    )
    read_only: bool = Field(
        False,
        description="incremental snapshots write nothing to the source (Debezium's read.only): "
        "watermarks from transaction snapshots instead of signal_table rows, run state in "
        "the state topic (kafka.state_topic) instead of progress_schema; PostgreSQL 13+, "
        "a primary",
    )
    notification_topic: str | None = Field(
        None,
        description="a topic for JSON notifications (Debezium's notification.sink.topic.name) "
        "of snapshot progress, initial and incremental, and of tables degraded by "
        "pipeline.on_error (one per table version); null sends none",
    )
    select_overrides: dict[str, str] = Field(
        default_factory=dict,
        description='"schema.table" -> the SELECT the initial snapshot reads instead of the '
        "table (Debezium's snapshot.select.statement.overrides); every published column "
        "must be among its output columns",
    )
    row_filters: dict[str, str] = Field(
        default_factory=dict,
        description='"schema.table" -> an SQL condition: the initial snapshot reads only '
        "the rows it holds for",
    )

    @model_validator(mode="after")
    def _kafka_signals_need_watermarks(self) -> SnapshotConfig:
        if self.signal_kafka_topic is not None and self.signal_table is None and not self.read_only:
            raise ValueError(
                "snapshot.signal_kafka_topic needs somewhere for the watermarks: "
                "snapshot.signal_table (rows written there), or snapshot.read_only: true "
                "(nothing written to the source)"
            )
        if self.read_only and self.signal_kafka_topic is None and self.signal_table is None:
            raise ValueError(
                "snapshot.read_only: true without snapshot.signal_kafka_topic (or a "
                "signal_table that others write): nothing could start an incremental snapshot"
            )
        return self

    @model_validator(mode="after")
    def _one_override_per_table(self) -> SnapshotConfig:
        both = sorted(self.select_overrides.keys() & self.row_filters.keys())
        if both:
            raise ValueError(
                f"{', '.join(both)}: in both snapshot.select_overrides and "
                "snapshot.row_filters; put the condition into the SELECT"
            )
        return self


class HttpConfig(_Section):
    """Prometheus metrics and health endpoints (/metrics, /healthz, /readyz)."""

    host: str = Field("0.0.0.0", description="address the endpoint listens on")
    port: int = Field(9187, ge=0, le=65535, description="0 disables the endpoint")


class HaConfig(_Section):
    """An active/standby pair on one slot (docs/operations/high-availability.md)."""

    enabled: bool = Field(
        False,
        description="stand by until this bridge holds the slot's lease (an advisory lock in "
        "the source database), then take over; two bridges with the same slot form a pair",
    )
    lease_timeout_s: float = Field(
        5.0,
        ge=1,
        le=300,
        description="PostgreSQL ends the lease of an active bridge silent this long (frozen, "
        "hung, cut off), and the standby takes over",
    )


class LogConfig(_Section):
    """The bridge's log on stderr (docs: operations/logs)."""

    level: Annotated[Literal["DEBUG", "INFO", "WARNING", "ERROR"], BeforeValidator(_upper)] = Field(
        "INFO",
        description="debug, info, warning or error (any case); libraries' own INFO lines "
        "(HTTP requests, py4j, Spark) show only at debug",
    )
    format: Literal["text", "json"] = Field(
        "text", description="text for people, or one JSON object per line for log collectors"
    )


class Config(BaseSettings):
    """The whole bridge configuration."""

    model_config = SettingsConfigDict(
        env_prefix="BRIDGE_", env_nested_delimiter="__", extra="forbid", frozen=True
    )

    source: SourceConfig = Field(default_factory=SourceConfig)
    kafka: KafkaConfig = Field(default_factory=KafkaConfig)
    registry: RegistryConfig = Field(default_factory=RegistryConfig)
    avro: AvroConfig = Field(default_factory=AvroConfig)
    pipeline: PipelineConfig = Field(default_factory=PipelineConfig)
    http: HttpConfig = Field(default_factory=HttpConfig)
    filters: FiltersConfig = Field(default_factory=FiltersConfig)
    snapshot: SnapshotConfig = Field(default_factory=SnapshotConfig)
    outbox: OutboxConfig = Field(default_factory=OutboxConfig)
    ha: HaConfig = Field(default_factory=HaConfig)
    log: LogConfig = Field(default_factory=LogConfig)

    @model_validator(mode="after")
    def _resnapshot_needs_snapshot(self) -> Config:
        if self.source.on_slot_lost == "resnapshot" and self.snapshot.mode == "no_data":
            raise ValueError(
                "source.on_slot_lost: resnapshot re-reads the tables, which snapshot.mode "
                "no_data never does; choose initial, when_needed or always"
            )
        return self

    @model_validator(mode="after")
    def _standby_needs_fencing(self) -> Config:
        if self.ha.enabled and not self.kafka.exactly_once:
            raise ValueError(
                "ha.enabled needs kafka.exactly_once: true: the transactional id is what keeps "
                "a paused old active from writing after the standby took over "
                "(docs/operations/high-availability.md)"
            )
        return self

    def dead_letter_topic(self) -> str:
        """`pipeline.dead_letter_topic`, by default `<topic_prefix>.dlq`: written by the
        bridge, read by `bridge verify`."""
        return self.pipeline.dead_letter_topic or f"{self.kafka.topic_prefix}.dlq"

    def transactional_id(self) -> str:
        """Exactly-once: the data producer's transactional id (`kafka.transactional_id`);
        the state topic's producer uses it with `.state` appended (bridge/slotstate.py)."""
        return self.kafka.transactional_id or f"bridge-{self.source.slot_name}"

    def secrets(self) -> list[str]:
        """Every secret value in the configuration, for masking in logs."""
        found = []
        for section in (self.source, self.kafka, self.registry):
            for value in section.__dict__.values():
                if isinstance(value, SecretStr):
                    found.append(value.get_secret_value())
        return found

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        # Environment first: it overrides the YAML file, which arrives as init kwargs.
        return (env_settings, init_settings)


def load_config(path: Path | None) -> Config:
    """Read the YAML file (if any), apply `BRIDGE_…` overrides, validate.

    The first line of every error names the problem; with several invalid fields it
    names the first and the following lines list them all, one per line.
    """
    data = {} if path is None else _read_yaml(path)
    try:
        return Config(**data)
    except SettingsError as exc:
        raise ConfigError(
            f"a BRIDGE_* environment variable cannot be parsed: {exc}",
            hint="give nested sections as BRIDGE_SECTION__KEY=value, or valid JSON",
        ) from None
    except ValidationError as exc:
        problems = describe_errors(exc)
        summary = problems[0].strip()
        if len(problems) > 1:
            summary += f" (+{len(problems) - 1} more problem(s), all listed below)"
            summary += "".join(f"\n{line}" for line in problems)
        where = "the file or " if path is not None else ""
        raise ConfigError(
            f"invalid configuration: {summary}",
            hint=f"fix the field(s) in {where}the BRIDGE_* environment",
        ) from None


def _read_yaml(path: Path) -> dict[str, Any]:
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except OSError as exc:
        raise ConfigError(
            f"cannot read config file {path}: {exc.strerror}",
            hint="pass an existing YAML file with --config",
        ) from None
    except UnicodeDecodeError as exc:
        raise ConfigError(
            f"{path}: not UTF-8 text (byte {exc.start})", hint="save the file as UTF-8"
        ) from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise ConfigError(
            f"{path}: not valid YAML{where}: {problem}", hint="fix the YAML syntax"
        ) from None
    if not isinstance(data, dict):
        raise ConfigError(
            f"{path}: top level must be a mapping, got {type(data).__name__}",
            hint="start the file with keys such as 'source:' and 'kafka:'",
        )
    odd = [key for key in data if not isinstance(key, str)]
    if odd:
        raise ConfigError(
            f"{path}: top-level key {odd[0]!r} is not a section name",
            hint="use the section names source, kafka, registry, avro, pipeline, http, "
            "filters, snapshot, outbox, ha and log",
        )
    return data


def describe_errors(exc: ValidationError) -> list[str]:
    """One line per problem: field path, what is wrong, what is expected.

    Never echoes the input of a secret-looking field.
    """
    lines = []
    for err in exc.errors():
        path = ".".join(str(p) for p in err["loc"]) or "<root>"
        if err["type"] == "extra_forbidden":
            lines.append(f"  {path}: unknown key (remove it or check its spelling)")
            continue
        msg = err["msg"].removeprefix("Value error, ")
        if any(word in path.lower() for word in _SECRET_WORDS):
            got = "<hidden>"
        else:
            got = repr(err.get("input"))
            got = got if len(got) <= 60 else got[:57] + "..."
        lines.append(f"  {path}: {msg} (got {got})")
    return lines
