"""Notifications of snapshot progress, and of tables degraded by `pipeline.on_error`, to a
topic (`snapshot.notification_topic`), shaped like Debezium's sink notification channel
(`notification.enabled.channels=sink`, `notification.sink.topic.name`).

Each notification is one JSON record: key `{"id": ...}`, value
`{"id", "aggregate_type", "type", "additional_data", "timestamp"}` with the fields of
Debezium's `io.debezium.connector.common.Notification` (Debezium's JSON converter would wrap
them in its schema envelope; these are the payload alone). `aggregate_type` is
"Initial Snapshot" or "Incremental Snapshot"; `type` one of Debezium's snapshot statuses
(STARTED, IN_PROGRESS, TABLE_SCAN_COMPLETED, PAUSED, RESUMED, ABORTED, COMPLETED);
`additional_data` a string map that always holds `connector_name` (kafka.topic_prefix).
An incremental snapshot's notifications carry the signal's id as their id (Debezium's
correlation id); an initial snapshot's a fresh UUID each.

A table whose change the bridge dead-lettered or skipped (`pipeline.on_error`) is told
once per table version (at its first such change, with the WARNING log line): the
aggregate_type "Table", type DEGRADED (Debezium has no such notification: the names
follow its pattern), `additional_data` naming the table (`data_collection`), the policy
(dlq or skip), the error and its coordinates, and the dead-letter topic.

All go to partition 0, so a consumer reads them in the order they were sent. They are
sent as progress is made, by a producer of their own outside the records' (exactly-once)
transactions: a notification says what the bridge did, not what Kafka confirmed, and one
lost in a crash is not sent again.
"""

from __future__ import annotations

import json
import logging
import time
import uuid
from typing import Final

from confluent_kafka import KafkaError, Message
from confluent_kafka import Producer as KafkaProducer

from bridge.config import Config
from bridge.errors import BridgeError
from bridge.kafka.producer import kafka_client_config
from bridge.kafka.topics import topic_creator
from bridge.snapshot import store
from bridge.snapshot.progress import TABLE_STARTED, TableStatus

log: Final = logging.getLogger("bridge.snapshot")

INITIAL: Final = "Initial Snapshot"
INCREMENTAL: Final = "Incremental Snapshot"
# Debezium's SnapshotStatus names
STARTED: Final = "STARTED"
IN_PROGRESS: Final = "IN_PROGRESS"
TABLE_SCAN_COMPLETED: Final = "TABLE_SCAN_COMPLETED"
PAUSED: Final = "PAUSED"
RESUMED: Final = "RESUMED"
ABORTED: Final = "ABORTED"
COMPLETED: Final = "COMPLETED"
TABLE: Final = "Table"
DEGRADED: Final = "DEGRADED"  # a table's change dead-lettered or skipped (pipeline.on_error)
# Debezium's table scan completion statuses
SUCCEEDED: Final = "SUCCEEDED"
EMPTY: Final = "EMPTY"
NO_PRIMARY_KEY: Final = "NO_PRIMARY_KEY"
SKIPPED: Final = "SKIPPED"
UNKNOWN_SCHEMA: Final = "UNKNOWN_SCHEMA"
_PARTITION: Final = 0


class Notifier:
    """Sends notifications without waiting; `close` waits for the ones still in flight."""

    def __init__(self, cfg: Config) -> None:
        topic = cfg.snapshot.notification_topic
        assert topic is not None
        self.topic = topic
        self._connector = cfg.kafka.topic_prefix
        self._timeout = cfg.kafka.request_timeout_s
        if cfg.kafka.topic_creation:
            topic_creator(cfg).ensure(topic)
        self._producer = KafkaProducer(
            {**kafka_client_config(cfg.kafka), "enable.idempotence": True, "linger.ms": 5}
        )

    def send(
        self, aggregate: str, kind: str, data: dict[str, str], ident: str | None = None
    ) -> None:
        """One notification; `ident` None: a fresh UUID (Debezium's initial snapshot)."""
        ident = ident or str(uuid.uuid4())
        value = {
            "id": ident,
            "aggregate_type": aggregate,
            "type": kind,
            "additional_data": {**data, "connector_name": self._connector},
            "timestamp": time.time_ns() // 1_000_000,
        }
        self._producer.produce(
            self.topic,
            json.dumps(value).encode(),
            json.dumps({"id": ident}).encode(),
            partition=_PARTITION,
            on_delivery=_delivered,
        )
        self._producer.poll(0)

    def initial_table(self, event: str, status: TableStatus) -> None:
        """`SnapshotProgress.on_table`: an initial snapshot's table started or done (an
        incremental snapshot's tables are told by its run, which knows their signal)."""
        if status.kind != store.INITIAL:
            return
        if event == TABLE_STARTED:
            self.send(INITIAL, IN_PROGRESS, {"current_collection_in_progress": status.table})
        else:
            rows = {"total_rows_scanned": str(status.rows_done), "status": SUCCEEDED}
            self.send(INITIAL, TABLE_SCAN_COMPLETED, {"scanned_collection": status.table, **rows})

    def degraded(self, table: str, policy: str, error: BridgeError, where: dict[str, str]) -> None:
        """`table`'s first change of a table version dead-lettered or skipped (`policy`),
        at `where` (lsn, commit_lsn and, for dlq, dead_letter_topic)."""
        data = {"data_collection": table, "policy": policy, **where}
        data.update(error_type=type(error).__name__, error=error.message)
        self.send(TABLE, DEGRADED, data)

    def close(self) -> None:
        if self._producer.flush(self._timeout):
            log.warning("snapshot notifications still unsent at shutdown are dropped")


def _delivered(err: KafkaError | None, msg: Message) -> None:
    if err is not None:
        log.warning("a snapshot notification to %s was not delivered: %s", msg.topic(), err.str())


def collections(names: list[str]) -> str:
    """Debezium's `data_collections` value: the names joined by commas."""
    return ",".join(names)
