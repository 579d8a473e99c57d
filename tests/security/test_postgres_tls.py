"""PostgreSQL only over TLS: `sslmode=verify-full` against the test CA, nothing else gets in."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from bridge.build import build_pipeline
from bridge.config import Config
from bridge.errors import SourceError
from bridge.source import libpq

from .helpers import changed, other_ca

pytestmark = pytest.mark.live


def test_plain_tcp_is_refused(settings: dict[str, Any]) -> None:
    with pytest.raises(SourceError) as caught:
        build_pipeline(changed(settings, "source", sslmode="disable"))
    assert "pg_hba.conf rejects connection" in str(caught.value)
    assert "no encryption" in str(caught.value)


def test_a_server_certificate_from_another_ca_is_refused(
    settings: dict[str, Any], tmp_path: Path
) -> None:
    with pytest.raises(SourceError) as caught:
        build_pipeline(changed(settings, "source", sslrootcert=str(other_ca(tmp_path))))
    message = str(caught.value)
    assert "cannot connect to PostgreSQL" in message
    assert "certificate verify failed" in message
    assert "sslrootcert" in message  # the hint names the setting to fix


def test_verify_full_checks_the_host_name(settings: dict[str, Any]) -> None:
    """The certificate names 127.0.0.1 and localhost; the same server under another name fails."""
    conninfo = Config(**settings).source.conninfo()
    libpq.connect(
        {**conninfo, "host": "localhost", "hostaddr": "127.0.0.1"}, replication=True
    ).close()
    with pytest.raises(SourceError, match="does not match host name"):
        libpq.connect({**conninfo, "host": "pg.invalid", "hostaddr": "127.0.0.1"}, replication=True)
