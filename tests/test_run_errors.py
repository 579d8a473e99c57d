"""`bridge run`'s errors: whatever ends a run ends it with a typed error, not a traceback."""

from __future__ import annotations

import signal

import psycopg
import pytest

from bridge import build
from bridge.config import Config
from bridge.errors import SourceError


def test_a_connection_lost_in_a_catalog_query_is_a_typed_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Found by the soak (seed 4711): PostgreSQL restarted while the stream looked up a new
    table's key columns; psycopg's OperationalError escaped as a traceback."""

    def lost(*args: object, **kwargs: object) -> None:
        raise psycopg.OperationalError("consuming input failed: server closed the connection")

    monkeypatch.setattr(build, "build_pipeline", lost)
    monkeypatch.setattr(signal, "signal", lambda *args: None)  # pytest keeps its own
    with pytest.raises(SourceError, match="connection to PostgreSQL was lost"):
        build.run_pipeline(Config(http={"port": 0}))
