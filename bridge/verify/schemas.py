"""What verify asks of the schema registry: look-ups only, so it runs with credentials
that may only read (a CronJob's read-only registry user).

verify encodes PostgreSQL's rows with the bridge's own encoders (`build_jobs`), whose
`Registry` would register each table's key and envelope schema. Here that registry is
given a client whose `register_schema` only looks the schema up (`POST
/subjects/{subject}`, Confluent's look-up, which registers nothing) and answers with the
id the bridge registered it under. A schema the registry does not hold yet (the table
was altered and the bridge has not streamed a change of it since) gets a local id,
known only to this process: PostgreSQL's rows framed with it are decoded here from the
schema itself, never fetched, and no record with a local id leaves the process
(`--repair` registers the schema before it produces one: it writes anyway). The topic's
records carry the ids they were written with; their schemas are fetched by id
(`GET /schemas/ids/{id}`), a read too.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

from bridge.config import Config
from bridge.errors import VerifyError
from bridge.kafka.registry import Registry

if TYPE_CHECKING:
    from confluent_kafka.schema_registry import RegisteredSchema, Schema, SchemaRegistryClient

# Local ids count up from here: far above any id a registry hands out (Confluent's and
# Apicurio's count up from 1), inside the 4 bytes of the wire format's id.
LOCAL_IDS: Final = 0x7FFF_0000


class Lookups:
    """A `bridge.kafka.registry.RegistryClient` that never writes (module docstring), and
    the schemas' texts by id for the topic's records (`text`)."""

    def __init__(self, config: dict[str, Any]) -> None:
        self._config = config
        self._client: SchemaRegistryClient | None = None
        self._texts: dict[int, str] = {}  # id -> schema text: local ones, and those fetched
        self._next = LOCAL_IDS

    def _get(self) -> SchemaRegistryClient:
        if self._client is None:
            from confluent_kafka.schema_registry import SchemaRegistryClient  # noqa: PLC0415

            self._client = SchemaRegistryClient(self._config)
        return self._client

    def get_latest_version(self, subject_name: str) -> RegisteredSchema:
        return self._get().get_latest_version(subject_name)

    def register_schema(self, subject_name: str, schema: Schema) -> int:
        """The id `schema` is registered under in `subject_name`, or a local id."""
        from confluent_kafka.schema_registry import SchemaRegistryError  # noqa: PLC0415

        try:
            found = self._get().lookup_schema(subject_name, schema).schema_id
        except SchemaRegistryError as exc:
            if exc.http_status_code != 404:  # 40401 no such subject, 40403 no such schema
                raise
        else:
            if found is not None:
                return int(found)
        local = self._next
        self._next += 1
        self._texts[local] = str(schema.schema_str)
        return local

    def text(self, schema_id: int) -> str:
        """The text of schema `schema_id`: a local one, or the registry's (cached)."""
        if schema_id not in self._texts:
            try:
                found = self._get().get_schema(schema_id)
            except Exception as exc:  # SchemaRegistryError, or plain HTTP errors when down
                raise VerifyError(
                    f"schema id {schema_id} from the registry: {exc}",
                    hint="check registry.url, the registry's credentials and that it is up",
                ) from None
            self._texts[schema_id] = str(found.schema_str)
        return self._texts[schema_id]


def is_local(schema_id: int) -> bool:
    """Whether `schema_id` is one `Lookups` made up (never registered)."""
    return schema_id >= LOCAL_IDS


def lookup_registry(cfg: Config) -> tuple[Registry, Lookups]:
    """The `Registry` for `build_jobs` that only looks up, and its client."""
    lookups = Lookups(cfg.registry.client_config())
    return Registry(lookups, cfg.avro.subject_strategy, cfg.registry.on_incompatible), lookups
