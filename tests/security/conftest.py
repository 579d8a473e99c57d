"""A second, secured stack for the security tests; the session's plain stack stays plain.

Session scope (started on first use):
    credentials   what the bridge logs in with: a Kafka SCRAM user, a registry client.
    registry_reader  a registry client with the read-only role (sr-readonly): what a
                  `bridge verify` CronJob may be given.
    oidc_issuer   tests/security/oidc.py, the identity provider the registry checks logins with.
    secure_stack  deploy/local/stack.py `Stack(tls=True, ...)`: PostgreSQL that refuses TCP
                  without TLS (hostssl / hostnossl reject), Kafka with one SASL_SSL listener
                  (SCRAM-SHA-512), the registry on HTTPS only with basic auth and roles (the
                  bridge's client sr-developer, the stack's sr-admin); every certificate from
                  the test CA `secure_stack.ca` (SAN 127.0.0.1 and localhost).

Function scope:
    secure_db     a fresh database on the secured PostgreSQL, dropped (slots first) afterwards.
    names         unique slot / publication / topic prefix for one test.
    settings      bridge settings (a config file's content) for secure_db as the superuser:
                  verify-full TLS, SASL_SSL, HTTPS with basic auth (helpers.secure_settings).
"""

from __future__ import annotations

import secrets
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from stack_module import load_stack_module

from .helpers import Credentials, secure_settings
from .oidc import OidcIssuer


@pytest.fixture(scope="session")
def credentials() -> Credentials:
    # Hex passwords: the SCRAM credential syntax of the storage tool has no quoting.
    return Credentials(
        "bridge",
        f"kafka-{secrets.token_hex(12)}",
        "bridge-registry",
        f"reg-{secrets.token_hex(12)}",
    )


@pytest.fixture(scope="session")
def registry_reader() -> tuple[str, str]:
    return "bridge-verify", f"read-{secrets.token_hex(12)}"


@pytest.fixture(scope="session")
def oidc_issuer(credentials: Credentials, registry_reader: tuple[str, str]) -> Iterator[OidcIssuer]:
    reader, reader_password = registry_reader
    issuer = OidcIssuer(
        {credentials.registry_user: credentials.registry_password, reader: reader_password},
        {credentials.registry_user: ["sr-developer"], reader: ["sr-readonly"]},
    )
    try:
        yield issuer
    finally:
        issuer.stop()


@pytest.fixture(scope="session")
def secure_stack(credentials: Credentials, oidc_issuer: OidcIssuer) -> Iterator[Any]:
    module = load_stack_module()
    admin, admin_password = "stack-admin", secrets.token_hex(12)
    oidc_issuer.clients[admin] = admin_password
    oidc_issuer.roles[admin] = ["sr-admin"]
    stack = module.Stack(
        tls=True,
        kafka_users={credentials.kafka_user: credentials.kafka_password},
        registry_auth=module.RegistryAuth(
            oidc_issuer.url, oidc_issuer.token_endpoint, admin, admin_password, roles=True
        ),
    )
    stack.start()
    try:
        yield stack
    finally:
        stack.stop()


@pytest.fixture
def secure_db(secure_stack: Any) -> Iterator[str]:
    name = f"sec_{uuid.uuid4().hex[:12]}"
    secure_stack.create_database(name)
    try:
        yield name
    finally:
        secure_stack.drop_database(name)


@pytest.fixture
def names() -> str:
    return f"sec_{uuid.uuid4().hex[:12]}"


@pytest.fixture
def settings(
    secure_stack: Any, credentials: Credentials, secure_db: str, names: str
) -> dict[str, Any]:
    return secure_settings(secure_stack, credentials, secure_db, names)
