"""verify's registry look-ups over the standard library (`bridge.verify.schemas.Lookups`):
the requests it makes, what each answer of a registry becomes (an id, a local id, a typed
error with a hint), and that verify's code never imports confluent-kafka's registry
client (httpx, authlib, cryptography, attrs: ~14 MiB of verify's resident memory, issue
48). The registry is a small HTTP server on loopback answering as a registry would;
tests/security/test_verify_read_only.py runs the look-ups against the stack's registry
with a read-only user, over TLS."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from bridge.errors import SchemaError, VerifyError
from bridge.kafka.registry import Registry
from bridge.verify import schemas
from bridge.verify.schemas import Lookups, is_local

SCHEMA: dict[str, Any] = {
    "type": "record",
    "name": "Row",
    "fields": [{"name": "id", "type": "int"}],
}
TEXT = json.dumps(SCHEMA)
SUBJECT = "p.public.t-value"
LATEST = f"/subjects/{SUBJECT}/versions/latest"
NEXT = f"/subjects/{SUBJECT}-v2/versions/latest"  # its next generation: asked second
LOOKUP = f"/subjects/{SUBJECT}?normalize=false&deleted=false"
NOT_FOUND = (404, {"error_code": 40401, "message": f"Subject '{SUBJECT}' not found."})


class Answers(ThreadingHTTPServer):
    """A registry that answers each (method, path) with the next of its answers, or 404,
    and keeps what it was asked: (method, path, Authorization header, JSON body)."""

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.answers: dict[tuple[str, str], list[tuple[int, Any]]] = {}
        self.asked: list[tuple[str, str, str | None, Any]] = []

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"

    def answer(self, method: str, path: str, *answers: tuple[int, Any]) -> None:
        self.answers[method, path] = list(answers)


class _Handler(BaseHTTPRequestHandler):
    server: Answers

    def do_GET(self) -> None:
        self._answer("GET")

    def do_POST(self) -> None:
        self._answer("POST")

    def _answer(self, method: str) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = json.loads(self.rfile.read(length)) if length else None
        self.server.asked.append((method, self.path, self.headers.get("Authorization"), body))
        queue = self.server.answers.get((method, self.path), [])
        status, answer = queue.pop(0) if queue else NOT_FOUND
        data = (answer if isinstance(answer, str) else json.dumps(answer)).encode()
        self.send_response(status)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet."""


@pytest.fixture
def registry() -> Iterator[Answers]:
    server = Answers()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def waits(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """The backoff waits between retries, recorded instead of slept."""
    waited: list[float] = []
    monkeypatch.setattr(time, "sleep", waited.append)
    return waited


def test_a_registered_schema_is_looked_up_with_basic_auth_never_registered(
    registry: Answers,
) -> None:
    registry.answer("GET", LATEST, (200, {"id": 7, "version": 1, "schema": TEXT}))
    registry.answer("POST", LOOKUP, (200, {"id": 7, "version": 1, "subject": SUBJECT}))
    lookups = Lookups({"url": registry.url, "basic.auth.user.info": "reader:secret"})
    assert Registry(lookups).register(SUBJECT, SCHEMA, table="public.t") == 7
    auth = "Basic cmVhZGVyOnNlY3JldA=="  # base64 of reader:secret
    assert registry.asked == [
        ("GET", LATEST, auth, None),
        ("GET", NEXT, auth, None),
        ("POST", LOOKUP, auth, {"schema": TEXT, "schemaType": "AVRO", "references": []}),
    ]


def test_a_schema_not_registered_gets_a_local_id_and_its_text(registry: Answers) -> None:
    """A new subject (404 for both requests): a local id, whose text is answered here."""
    lookups = Lookups({"url": registry.url})
    found = Registry(lookups).register(SUBJECT, SCHEMA, table="public.t")
    assert is_local(found)
    assert json.loads(lookups.text(found)) == SCHEMA
    assert [(m, p) for m, p, _, _ in registry.asked] == [
        ("GET", LATEST),
        ("GET", NEXT),
        ("POST", LOOKUP),
    ]


def test_a_schema_moved_to_a_new_subject_is_looked_up_there(registry: Answers) -> None:
    """The bridge registered the table's schema under the value subject's next generation
    (the registry refused it under the first): verify looks it up there."""
    moved = f"/subjects/{SUBJECT}-v2?normalize=false&deleted=false"
    registry.answer("GET", NEXT, (200, {"id": 9, "version": 1, "schema": TEXT}))
    registry.answer("POST", moved, (200, {"id": 9, "version": 1, "subject": f"{SUBJECT}-v2"}))
    assert Registry(Lookups({"url": registry.url})).register(SUBJECT, SCHEMA, table="t") == 9
    assert [(m, p) for m, p, _, _ in registry.asked] == [
        ("GET", LATEST),
        ("GET", NEXT),
        ("GET", f"/subjects/{SUBJECT}-v3/versions/latest"),
        ("POST", moved),
    ]


def test_a_schema_by_id_is_fetched_once(registry: Answers) -> None:
    registry.answer("GET", "/schemas/ids/5", (200, {"schema": TEXT}))
    lookups = Lookups({"url": registry.url})
    assert lookups.text(5) == lookups.text(5) == TEXT
    assert len(registry.asked) == 1


def test_an_unknown_schema_id_is_a_verify_error_naming_the_registry(registry: Answers) -> None:
    registry.answer("GET", "/schemas/ids/5", (404, {"error_code": 40403, "message": "nope"}))
    with pytest.raises(VerifyError, match="schema id 5 from the registry: HTTP 404 nope") as err:
        Lookups({"url": registry.url}).text(5)
    assert "is registry.url the registry the bridge writes to" in str(err.value.hint)


@pytest.mark.parametrize(
    ("status", "hint"),
    [(401, "check registry.basic_auth_user and its password"), (403, "(sr-readonly)")],
)
def test_credentials_refused_are_a_schema_error_saying_which(
    registry: Answers, status: int, hint: str
) -> None:
    registry.answer("GET", LATEST, (status, {"error_code": status, "message": "Unauthorized"}))
    lookups = Lookups({"url": registry.url, "basic.auth.user.info": "reader:wrong"})
    match = f"subject '{SUBJECT}': HTTP {status} Unauthorized"
    with pytest.raises(SchemaError, match=match) as err:
        Registry(lookups).register(SUBJECT, SCHEMA, table="public.t")
    assert hint in str(err.value.hint)
    assert "wrong" not in str(err.value)


def test_a_busy_registry_is_asked_again_with_backoff(registry: Answers, waits: list[float]) -> None:
    registry.answer("GET", "/schemas/ids/5", (503, "<html>busy</html>"), (200, {"schema": TEXT}))
    assert Lookups({"url": registry.url}).text(5) == TEXT
    assert len(registry.asked) == 2
    assert len(waits) == 1
    assert 0 <= waits[0] <= 1.0


def test_the_next_base_url_answers_when_the_first_is_down(
    registry: Answers, waits: list[float]
) -> None:
    registry.answer("GET", "/schemas/ids/5", (200, {"schema": TEXT}))
    down = _closed_port_url()
    assert Lookups({"url": f"{down}, {registry.url}/"}).text(5) == TEXT
    assert len(waits) == schemas._RETRIES  # the first URL tried 1 + 3 times


def test_a_registry_down_is_a_schema_error_after_the_retries(waits: list[float]) -> None:
    lookups = Lookups({"url": _closed_port_url()})
    with pytest.raises(SchemaError, match="schema registry unreachable") as err:
        Registry(lookups).latest(SUBJECT)
    assert "check registry.url and that the registry is up" in str(err.value.hint)
    assert len(waits) == schemas._RETRIES
    with pytest.raises(VerifyError, match="schema id 5: schema registry unreachable"):
        lookups.text(5)


def _closed_port_url() -> str:
    """A loopback URL nothing listens on: a port just bound and closed."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    port = server.server_address[1]
    server.server_close()
    return f"http://127.0.0.1:{port}"


# verify's whole command as `bridge verify` loads it, and its look-ups made through it
_VERIFY_PATH = """
import sys
import bridge.cli
from bridge.config import Config
from bridge.verify.schemas import lookup_registry
registry, lookups = lookup_registry(Config(registry={"url": sys.argv[1]}))
registry.register("p.public.t-value", {"type": "record", "name": "R", "fields": []}, table="t")
lookups.text(5)
print(" ".join(sorted(sys.modules)))
"""
# confluent-kafka's registry client and what it alone brings (~14 MiB), and what verify
# needs only for other commands or options: the snapshot's module with its progress bars
# (rich) and processes, prometheus_client (written metrics only; ~4 MiB together)
_NOT_LOADED = (
    "confluent_kafka.schema_registry",
    "httpx",
    "authlib",
    "cryptography",
    "attrs",
    "bridge.snapshot.initial",
    "rich",
    "multiprocessing",
    "prometheus_client",
)


def test_verify_never_imports_the_registry_client_nor_what_it_does_not_need(
    registry: Answers,
) -> None:
    registry.answer("GET", "/schemas/ids/5", (200, {"schema": TEXT}))
    done = subprocess.run(
        [sys.executable, "-c", _VERIFY_PATH, registry.url],
        check=True,
        capture_output=True,
        text=True,
        timeout=120,
    )
    loaded = done.stdout.split()
    assert "bridge.verify.command" in loaded
    assert "bridge.verify.schemas" in loaded
    assert len(registry.asked) == 4  # the look-ups went through the loaded code
    found = [m for m in loaded if m.split(".")[0] in _NOT_LOADED or m.startswith(_NOT_LOADED)]
    assert found == [], found
