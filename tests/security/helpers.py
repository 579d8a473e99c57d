"""Bridge settings for the secured stack, and another CA."""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any, NamedTuple

from bridge.config import Config


class Credentials(NamedTuple):
    """What the bridge logs in with besides the PostgreSQL role."""

    kafka_user: str
    kafka_password: str
    registry_user: str
    registry_password: str


def secure_settings(
    stack: Any, credentials: Credentials, dbname: str, names: str
) -> dict[str, Any]:
    """Bridge settings (a config file's content) for the secured stack, as its superuser."""
    ca = str(stack.ca.cert_path)
    return {
        "source": {
            "host": stack.pg_host,
            "port": stack.pg_port,
            "dbname": dbname,
            "user": stack.pg_user,
            "password": stack.pg_password,
            "sslmode": "verify-full",
            "sslrootcert": ca,
            "slot_name": names,
            "publication_name": names,
            "status_interval_s": 1.0,
            "connect_timeout_s": 5,
        },
        "kafka": {
            "bootstrap_servers": stack.kafka_bootstrap,
            "topic_prefix": names,
            "security_protocol": "SASL_SSL",
            "sasl_mechanism": "SCRAM-SHA-512",
            "sasl_username": credentials.kafka_user,
            "sasl_password": credentials.kafka_password,
            "ssl_ca_location": ca,
            "request_timeout_s": 3.0,
        },
        "registry": {
            "url": stack.registry_url,
            "basic_auth_user": credentials.registry_user,
            "basic_auth_password": credentials.registry_password,
            "ssl_ca_location": ca,
        },
        "http": {"port": 0},
    }


def changed(settings: dict[str, Any], section: str, **changes: Any) -> Config:
    """The configuration with some keys of one section replaced."""
    return Config(**{**settings, section: {**settings[section], **changes}})


def other_ca(directory: Path) -> Path:
    """The certificate of a CA that signed none of the stack's servers."""
    stack_tls = importlib.import_module("stack_tls")  # deploy/local is on sys.path by now
    return Path(stack_tls.CertificateAuthority(directory, "other").cert_path)
