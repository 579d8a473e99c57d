"""The bridge configuration the verify tests run with (one slot, publication and topic
prefix per test)."""

from __future__ import annotations

from typing import Any

from schema.live import unique

from bridge.config import Config


def bridge_config(
    stack: Any,
    pg_db: str,
    publication: str,
    signal_table: str | None = "public.signals",
    pipeline: dict[str, Any] | None = None,
) -> Config:
    """The bridge on `publication` (made by the test), with an initial snapshot and the
    signal table `signal_table` that --repair writes to (None: none); `pipeline`: its
    pipeline settings."""
    return Config(
        pipeline=pipeline or {},
        source={
            "host": stack.pg_host,
            "port": stack.pg_port,
            "dbname": pg_db,
            "user": stack.pg_user,
            "password": stack.pg_password,
            "slot_name": unique("slot"),
            "publication_name": publication,
            "publication_mode": "disabled",
            "status_interval_s": 1.0,
        },
        kafka={"bootstrap_servers": stack.kafka_bootstrap, "topic_prefix": unique("v")},
        registry={"url": stack.registry_url},
        snapshot={"mode": "initial", "progress_bar": "never", "signal_table": signal_table},
        http={"port": 0},
    )
