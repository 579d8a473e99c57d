"""The whole pipeline with every connection secured: PostgreSQL over TLS (verify-full), Kafka
over SASL_SSL with SCRAM-SHA-512, the registry over HTTPS with basic auth."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest
from running import running

from bridge.config import Config
from bridge.demo import consume

pytestmark = pytest.mark.live


def test_changes_stream_end_to_end_over_secured_connections(
    secure_stack: Any, secure_db: str, names: str, settings: dict[str, Any]
) -> None:
    cfg = Config(**settings)
    topic = f"{names}.public.accounts"
    with psycopg.connect(secure_stack.dsn(secure_db), autocommit=True) as conn:
        conn.execute("CREATE TABLE accounts (id int PRIMARY KEY, owner text, balance numeric)")
        conn.execute("INSERT INTO accounts VALUES (1, 'ada', 10)")  # read by the snapshot
        with running(cfg):
            conn.execute("INSERT INTO accounts VALUES (2, 'grace', 20)")
            conn.execute("UPDATE accounts SET balance = 25 WHERE id = 2")
            conn.execute("DELETE FROM accounts WHERE id = 1")
            # Read back through the same secured Kafka and registry settings.
            records = consume(cfg, topic, 5, timeout=60)
            sessions = conn.execute(
                "SELECT a.backend_type, s.ssl, s.version FROM pg_stat_activity a "
                "JOIN pg_stat_ssl s USING (pid) WHERE a.application_name = %s",
                (f"bridge:{names}",),
            ).fetchall()

    assert [(key["id"], value and value["op"]) for key, value in records] == [
        (1, "r"),
        (2, "c"),
        (2, "u"),
        (1, "d"),
        (1, None),  # tombstone
    ]
    assert records[2][1]["after"] == {"id": 2, "owner": "grace", "balance": "25"}
    # Every session the bridge holds, the replication connection among them, is TLS.
    assert any(kind == "walsender" for kind, _, _ in sessions), sessions
    assert all(ssl and version.startswith("TLSv1.") for _, ssl, version in sessions), sessions
