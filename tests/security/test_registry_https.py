"""The registry on HTTPS only, with HTTP basic auth (Apicurio 2.4 checks it at an OpenID Connect
issuer: tests/security/oidc.py)."""

from __future__ import annotations

import ssl
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest
from running import running

from bridge.check import run_checks
from bridge.config import Config
from bridge.errors import SchemaError

from .helpers import Credentials, changed, other_ca

pytestmark = pytest.mark.live


def registry_check(cfg: Config) -> tuple[bool, str]:
    (result,) = [r for r in run_checks(cfg) if r.name == "schema registry reachable"]
    return result.ok, result.detail


def test_only_authenticated_https_requests_are_served(
    secure_stack: Any, credentials: Credentials
) -> None:
    url = f"{secure_stack.registry_url}/subjects"
    with httpx.Client(verify=ssl.create_default_context(cafile=secure_stack.ca.cert_path)) as http:
        assert http.get(url).status_code == 401
        assert http.get(url, auth=(credentials.registry_user, "wrong")).status_code == 401
        user = (credentials.registry_user, credentials.registry_password)
        assert http.get(url, auth=user).status_code == 200
    with pytest.raises(httpx.TransportError):  # plain HTTP on the HTTPS port: no answer
        httpx.get(url.replace("https://", "http://", 1), timeout=10)


def test_check_accepts_the_configured_credentials(settings: dict[str, Any]) -> None:
    ok, detail = registry_check(Config(**settings))
    assert ok, detail


def test_check_names_refused_credentials(settings: dict[str, Any]) -> None:
    ok, detail = registry_check(changed(settings, "registry", basic_auth_password="not-it"))
    assert not ok
    assert "refused the credentials (HTTP 401)" in detail
    assert "registry.basic_auth_password" in detail
    assert "not-it" not in detail


def test_a_server_certificate_from_another_ca_is_refused(
    settings: dict[str, Any], tmp_path: Path
) -> None:
    ok, detail = registry_check(
        changed(settings, "registry", ssl_ca_location=str(other_ca(tmp_path)))
    )
    assert not ok
    assert "CERTIFICATE_VERIFY_FAILED" in detail


def test_pipeline_stops_on_refused_registry_credentials(
    settings: dict[str, Any], secure_stack: Any, secure_db: str
) -> None:
    cfg = changed(settings, "registry", basic_auth_password="not-it")
    with psycopg.connect(secure_stack.dsn(secure_db), autocommit=True) as conn:
        conn.execute("CREATE TABLE t (id int PRIMARY KEY)")
        with running(cfg) as bridge:
            conn.execute("INSERT INTO t VALUES (1)")  # its schema is registered first
            error = bridge.join()
    assert isinstance(error, SchemaError), error
    assert "HTTP 401" in str(error)
