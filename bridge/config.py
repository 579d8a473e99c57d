"""Configuration: one pydantic model, loaded from YAML, overridable by `BRIDGE_…` env vars.

Environment variables win over the file (`BRIDGE_SOURCE__PASSWORD` sets
`source.password`), so a Kubernetes Secret can fill credentials without touching
the ConfigMap. Unknown keys are rejected everywhere: a typo must not silently
fall back to a default.
"""

from __future__ import annotations

import logging
import re
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SecretStr,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict

from bridge.errors import ConfigError

_SECRET_WORDS = ("password", "secret", "token")


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class SourceConfig(_Section):
    """The PostgreSQL server, the slot and the output plugin."""

    host: str = "127.0.0.1"
    port: int = Field(5432, ge=1, le=65535)
    dbname: str = "postgres"
    user: str = "postgres"
    password: SecretStr | None = None
    sslmode: Literal["disable", "allow", "prefer", "require", "verify-ca", "verify-full"] = "prefer"
    sslrootcert: Path | None = None
    connect_timeout_s: int = Field(10, ge=1)

    plugin: Literal["pgoutput", "pglogical_output"] = "pgoutput"
    slot_name: str = Field("bridge", pattern=r"^[a-z0-9_]{1,63}$")
    create_slot: bool = True
    publication_name: str = "bridge"
    publication_mode: Literal["all_tables", "filtered", "disabled"] = "all_tables"
    proto_version: int | None = Field(
        None, ge=1, le=4, description="pgoutput protocol; None = highest the server supports"
    )
    binary: bool = False
    streaming: Literal["off", "on", "parallel"] = "off"
    two_phase: bool = False
    messages: bool = True
    origin: Literal["any", "none"] | None = None
    replication_sets: tuple[str, ...] = ("default",)

    status_interval_s: float = Field(10.0, gt=0, le=3600)
    slot_busy_timeout_s: float = Field(60.0, ge=0)

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
            "host": self.host,
            "port": self.port,
            "dbname": self.dbname,
            "user": self.user,
            "sslmode": self.sslmode,
            "connect_timeout": self.connect_timeout_s,
            "application_name": f"bridge:{self.slot_name}",
        }
        if self.password is not None:
            params["password"] = self.password.get_secret_value()
        if self.sslrootcert is not None:
            params["sslrootcert"] = str(self.sslrootcert)
        if replication:
            params["replication"] = "database"
        return params


class KafkaConfig(_Section):
    bootstrap_servers: str = "127.0.0.1:9092"
    topic_prefix: str = Field("bridge", pattern=r"^[A-Za-z0-9._-]+$")
    security_protocol: Literal["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"] = "PLAINTEXT"
    sasl_mechanism: Literal["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"] | None = None
    sasl_username: str | None = None
    sasl_password: SecretStr | None = None
    ssl_ca_location: Path | None = None
    request_timeout_s: float = Field(10.0, gt=0)
    producer: dict[str, str | int | float | bool] = Field(
        default_factory=dict, description="extra librdkafka producer settings"
    )
    exactly_once: bool = False
    transactional_id: str | None = Field(None, description="default: bridge-<slot_name>")
    offsets_topic: str | None = Field(None, description="default: <topic_prefix>.bridge_offsets")
    transaction_max_records: int = Field(10_000, ge=1)
    transaction_interval_ms: int = Field(100, ge=1)

    def client_config(self) -> dict[str, Any]:
        """librdkafka settings shared by every client the bridge makes."""
        conf: dict[str, Any] = {
            "bootstrap.servers": self.bootstrap_servers,
            "security.protocol": self.security_protocol,
            "socket.timeout.ms": int(self.request_timeout_s * 1000),
            # librdkafka's own log lines go through Python logging (and its secret mask).
            "logger": logging.getLogger("bridge.kafka"),
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


class RegistryConfig(_Section):
    url: str = "http://127.0.0.1:8081"
    basic_auth_user: str | None = None
    basic_auth_password: SecretStr | None = None
    ssl_ca_location: Path | None = None

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


class AvroConfig(_Section):
    """How PostgreSQL values become Avro (see README, "Type mapping")."""

    timestamptz_mode: Literal["micros", "iso"] = "micros"
    numeric_mode: Literal["string", "double", "variable"] = "string"
    toast_mode: Literal["list", "placeholder"] = "list"
    subject_strategy: Literal["topic", "record", "topic_record"] = "topic"


class PipelineConfig(_Section):
    spill_dir: Path = Path("/tmp/bridge-spill")
    memory_limit_mb: int = Field(256, ge=1, description="streamed/prepared txn buffer in RAM")
    max_in_flight_records: int = Field(100_000, ge=1)
    max_in_flight_mb: int = Field(256, ge=1)
    tombstones: bool = True
    shutdown_timeout_s: float = Field(30.0, gt=0)
    heartbeat_interval_s: float = Field(0.0, ge=0, description="0 disables heartbeats")
    transaction_metadata: bool = False


class FiltersConfig(_Section):
    """Which tables are captured: regular expressions over `schema.table` (full match)."""

    include_tables: tuple[str, ...] = ()
    exclude_tables: tuple[str, ...] = ()
    skipped_operations: tuple[Literal["c", "u", "d", "t"], ...] = ()

    @field_validator("include_tables", "exclude_tables")
    @classmethod
    def _compiles(cls, patterns: tuple[str, ...]) -> tuple[str, ...]:
        for pattern in patterns:
            try:
                re.compile(pattern)
            except re.error as exc:
                raise ValueError(f"invalid regular expression {pattern!r}: {exc}") from None
        return patterns


class HttpConfig(_Section):
    """Prometheus metrics and health endpoints (/metrics, /healthz, /readyz)."""

    host: str = "0.0.0.0"
    port: int = Field(9187, ge=0, le=65535, description="0 disables the endpoint")


class LogConfig(_Section):
    level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = "INFO"
    format: Literal["text", "json"] = "text"


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
    log: LogConfig = Field(default_factory=LogConfig)

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
    """Read the YAML file (if any), apply `BRIDGE_…` overrides, validate."""
    data: Any = {}
    if path is not None:
        try:
            data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
        except OSError as exc:
            raise ConfigError(
                f"cannot read config file {path}: {exc.strerror}",
                hint="pass an existing YAML file with --config",
            ) from None
        except yaml.YAMLError as exc:
            raise ConfigError(
                f"{path}: not valid YAML: {exc}", hint="fix the YAML syntax"
            ) from None
        if not isinstance(data, dict):
            raise ConfigError(
                f"{path}: top level must be a mapping, got {type(data).__name__}",
                hint="start the file with keys such as 'source:' and 'kafka:'",
            )
    try:
        return Config(**data)
    except ValidationError as exc:
        raise ConfigError(
            f"invalid configuration ({exc.error_count()} problem(s)):\n"
            + "\n".join(describe_errors(exc)),
            hint="fix the listed fields in the file or the BRIDGE_* environment",
        ) from None


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
