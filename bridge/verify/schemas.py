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

The three requests go over the standard library's HTTP client, not confluent-kafka's
registry client: that one brings httpx, authlib, cryptography and attrs, ~14 MiB
resident, a fifth of what `bridge verify --memory-limit-mb 16` may hold in all
(issue 48: peak RSS within the limit + 64 MiB). They do what it does with what
`registry` configures (`RegistryConfig.client_config`): each base URL of `url` in turn,
basic auth, a CA file or directory; retries on a connection error and on 408, 429 and
5xx answers, with jittered backoff.
"""

from __future__ import annotations

import base64
import json
import os
import random
import time
import urllib.error
import urllib.parse
import urllib.request
from typing import TYPE_CHECKING, Any, Final

from bridge.config import Config
from bridge.errors import RegistryHTTPError, VerifyError
from bridge.kafka.registry import Registry

if TYPE_CHECKING:
    import ssl

# Local ids count up from here: far above any id a registry hands out (Confluent's and
# Apicurio's count up from 1), inside the 4 bytes of the wire format's id.
LOCAL_IDS: Final = 0x7FFF_0000
# As confluent-kafka's client: the statuses worth a retry, 3 retries, backoff drawn from
# [0, min(20 s, 1 s * 2**retry)].
_RETRIABLE: Final = frozenset((408, 429, 500, 502, 503, 504))
_RETRIES: Final = 3
_BACKOFF_S: Final = (1.0, 20.0)
_TIMEOUT_S: Final = 30.0  # a request's connect and each read (confluent's has none)
_ACCEPT: Final = (
    "application/vnd.schemaregistry.v1+json, application/vnd.schemaregistry+json, application/json"
)


class Lookups:
    """A `bridge.kafka.registry.RegistryClient` that never writes (module docstring), and
    the schemas' texts by id for the topic's records (`text`)."""

    def __init__(self, config: dict[str, Any]) -> None:
        self._urls = [url.strip().rstrip("/") for url in str(config["url"]).split(",")]
        self._headers = {"Accept": _ACCEPT}
        user_info = config.get("basic.auth.user.info")
        if user_info is not None:
            token = base64.b64encode(str(user_info).encode()).decode()
            self._headers["Authorization"] = f"Basic {token}"
        self._ca: str | None = config.get("ssl.ca.location")
        self._tls: ssl.SSLContext | None = None
        self._texts: dict[int, str] = {}  # id -> schema text: local ones, and those fetched
        self._next = LOCAL_IDS

    def get_latest_version(self, subject_name: str) -> str:
        """The text of the subject's newest version (`RegistryHTTPError` 404: none)."""
        answer = self._request("GET", f"/subjects/{_quoted(subject_name)}/versions/latest")
        return str(answer.get("schema") or "null")

    def register_schema(self, subject_name: str, schema: str) -> int:
        """The id `schema` is registered under in `subject_name`, or a local id."""
        path = f"/subjects/{_quoted(subject_name)}?normalize=false&deleted=false"
        body = {"schema": schema, "schemaType": "AVRO", "references": []}
        try:
            found = self._request("POST", path, body).get("id")
        except RegistryHTTPError as exc:
            if exc.status != 404:  # 40401 no such subject, 40403 no such schema
                raise
        else:
            if found is not None:
                return int(found)
        local = self._next
        self._next += 1
        self._texts[local] = schema
        return local

    def text(self, schema_id: int) -> str:
        """The text of schema `schema_id`: a local one, or the registry's (cached)."""
        if schema_id not in self._texts:
            try:
                found = self._request("GET", f"/schemas/ids/{schema_id}")
            except RegistryHTTPError as exc:
                hint = exc.hint
                if exc.status == 404:
                    hint = (
                        "a record in the topic names a schema id this registry does not "
                        "hold: is registry.url the registry the bridge writes to?"
                    )
                raise VerifyError(
                    f"schema id {schema_id} from the registry: {exc.message}", hint=hint
                ) from None
            except Exception as exc:
                raise VerifyError(
                    f"schema id {schema_id}: schema registry unreachable: {exc}",
                    hint="check registry.url and that the registry is up",
                ) from None
            self._texts[schema_id] = str(found.get("schema"))
        return self._texts[schema_id]

    def _request(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        """The JSON answer from the first base URL that gives one; an error answer as
        `RegistryHTTPError`, a connection error (an `OSError`) as it came."""
        data = None if body is None else json.dumps(body).encode()
        headers = dict(self._headers)
        if data is not None:
            headers["Content-Type"] = "application/vnd.schemaregistry.v1+json"
        for n, base in enumerate(self._urls):
            request = urllib.request.Request(base + path, data, headers, method=method)
            try:
                return self._send(request)
            except RegistryHTTPError as exc:
                if exc.status not in _RETRIABLE or n == len(self._urls) - 1:
                    raise
            except OSError:
                if n == len(self._urls) - 1:
                    raise
        raise AssertionError("unreachable: registry.url names at least one URL")

    def _send(self, request: urllib.request.Request) -> Any:
        """One request, retried as confluent-kafka's client retries one."""
        tls = self._context() if request.type == "https" else None
        for retry in range(_RETRIES + 1):
            try:
                with urllib.request.urlopen(request, timeout=_TIMEOUT_S, context=tls) as answer:
                    return json.loads(answer.read() or b"{}")
            except urllib.error.HTTPError as exc:  # an answer, with an error status
                error = _answer_error(exc)
                if exc.code not in _RETRIABLE or retry == _RETRIES:
                    raise error from None
            except OSError:  # refused, reset, timed out, a TLS failure
                if retry == _RETRIES:
                    raise
            time.sleep(random.uniform(0, min(_BACKOFF_S[1], _BACKOFF_S[0] * 2**retry)))
        raise AssertionError("unreachable: the last try returns or raises")

    def _context(self) -> ssl.SSLContext:
        """`ssl.ca.location` (a file or a directory) to trust, else the system's store
        (which honours SSL_CERT_FILE and SSL_CERT_DIR): made on the first HTTPS request."""
        if self._tls is None:
            import ssl  # noqa: PLC0415

            ca = self._ca
            if ca is not None and os.path.isdir(ca):
                self._tls = ssl.create_default_context(capath=ca)
            else:
                self._tls = ssl.create_default_context(cafile=ca)
        return self._tls


def _quoted(subject: str) -> str:
    return urllib.parse.quote(subject, safe="")


def _answer_error(exc: urllib.error.HTTPError) -> RegistryHTTPError:
    """The registry's error answer: its JSON `message` (Confluent's and Apicurio's
    form), else the start of the body, else the status's reason."""
    body = exc.read()
    try:
        detail = str(json.loads(body)["message"])
    except (ValueError, KeyError, TypeError):
        detail = body[:200].decode(errors="replace").strip() or str(exc.reason)
    return RegistryHTTPError(exc.code, detail)


def is_local(schema_id: int) -> bool:
    """Whether `schema_id` is one `Lookups` made up (never registered)."""
    return schema_id >= LOCAL_IDS


def lookup_registry(cfg: Config) -> tuple[Registry, Lookups]:
    """The `Registry` for `build_jobs` that only looks up, and its client."""
    lookups = Lookups(cfg.registry.client_config())
    return Registry(lookups, cfg.avro.subject_strategy, cfg.registry.on_incompatible), lookups
