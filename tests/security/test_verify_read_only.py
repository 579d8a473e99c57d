"""`bridge verify` with a registry user that may only read (Apicurio's sr-readonly role, from
the token the registry gets for its basic credentials): verify looks schemas up, it never
registers one, also when the table's current schema is not in the registry yet."""

from __future__ import annotations

import ssl
from typing import Any

import httpx
import psycopg
import pytest
from running import running

from bridge.config import Config
from bridge.verify.report import as_json
from bridge.verify.run import verify

from .helpers import changed

pytestmark = pytest.mark.live


def test_verify_reads_with_a_read_only_registry_user(
    secure_stack: Any,
    secure_db: str,
    names: str,
    settings: dict[str, Any],
    registry_reader: tuple[str, str],
) -> None:
    reader, password = registry_reader
    cfg = Config(**settings)
    read_only = changed(settings, "registry", basic_auth_user=reader, basic_auth_password=password)
    url = secure_stack.registry_url
    subject = f"{names}.public.accounts-value"
    tls = ssl.create_default_context(cafile=secure_stack.ca.cert_path)
    with httpx.Client(verify=tls, auth=(reader, password), timeout=30) as http:
        # the role is enforced: this user reads, and may not register
        assert http.get(f"{url}/subjects").status_code == 200
        probe = http.post(f"{url}/subjects/{names}-probe/versions", json={"schema": '"string"'})
        assert probe.status_code == 403, probe.text

        def versions() -> list[int]:
            answer = http.get(f"{url}/subjects/{subject}/versions")
            assert answer.status_code == 200, answer.text
            return list(answer.json())

        with psycopg.connect(secure_stack.dsn(secure_db), autocommit=True) as conn:
            conn.execute("CREATE TABLE accounts (id int PRIMARY KEY, owner text, balance int)")
            conn.execute("INSERT INTO accounts SELECT g, 'o' || g, g FROM generate_series(1, 50) g")
            with running(cfg) as bridge:
                conn.execute("UPDATE accounts SET balance = 0 WHERE id <= 10")
                found = verify(read_only, timeout=120)
                bridge.check()
                assert found.ok, as_json(found)
                registered = versions()
                # a new column, and no change streamed since: the current schema is in no
                # registry yet; verify compares with it all the same, registering nothing
                conn.execute("ALTER TABLE accounts ADD COLUMN note text")
                altered = verify(read_only, timeout=120)
                bridge.check()
                assert altered.ok, as_json(altered)
                assert versions() == registered
    (table,) = [t for t in altered.tables if t.table == "public.accounts"]
    assert (table.rows, table.equal) == (50, 50)
