"""Hand records to Kafka; every delivery report goes to the LSN watermark (`bridge.kafka.acks`).

A thin layer over `confluent_kafka.Producer` that owns three things: the producer
settings the delivery guarantees depend on, the wiring of delivery reports to the
transaction a record belongs to, and backpressure that keeps PostgreSQL answered
while Kafka is slow.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable, Mapping
from typing import Any, Final

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka import Producer as _Client

from bridge.config import KafkaConfig
from bridge.errors import ConfigError, DeliveryError, FencedError
from bridge.kafka.acks import AckTracker, TxHandle, delivery_error
from bridge.kafka.sockets import BrokerSockets
from bridge.record import KafkaRecord

ConfigValue = str | int | float | bool
SOCKET_CHECK_INTERVAL_MS: Final = 5_000  # statistics, so new broker sockets get armed
log: Final = logging.getLogger("bridge.produce")

PRODUCER_DEFAULTS: Final[Mapping[str, ConfigValue]] = {
    # Retries can neither duplicate nor reorder records within a partition.
    "enable.idempotence": True,
    # A record counts as delivered (and its LSN may be acknowledged) only once every
    # in-sync replica has it.
    "acks": "all",
    # The most idempotence allows while still keeping order across retries.
    "max.in.flight.requests.per.connection": 5,
    # Short: a commit is acknowledged only after its records are delivered, so
    # lingering delays the flush position; 5 ms already fills batches under load.
    "linger.ms": 5,
    "batch.num.messages": 10_000,
    "batch.size": 1_000_000,  # bytes per partition batch; keep below the broker's limit
    # None, as Kafka's Java producer and so Kafka Connect and Debezium default to: LZ4
    # cost ~3,200 instructions a record in librdkafka's broker threads, 7 % of the
    # bridge's work per row (bench/README.md, "instructions"), and has no part in a
    # guarantee. Where the network or the broker's disk is the scarcer resource,
    # `kafka.producer: {compression.type: lz4}` (or zstd, which compresses Avro better)
    # is one override away.
    "compression.type": "none",
    # Give up on a record after 5 minutes of retries (alias delivery.timeout.ms): the
    # failure stops the bridge with nothing acknowledged past it, instead of hanging.
    "message.timeout.ms": 300_000,
    # Same key -> same partition as Java producers (Kafka Connect, Spark), so readers
    # mixing sources see one order per key. librdkafka's own default hashes with CRC32.
    "partitioner": "murmur2_random",
    # librdkafka's queue is a fallback; the in-flight bounds below normally bind first.
    "queue.buffering.max.messages": 1_000_000,
    "queue.buffering.max.kbytes": 1_048_576,
}

# Overrides that would void a guarantee or cut delivery reports off the watermark.
UNSAFE_OVERRIDES: Final[Mapping[str, str]] = {
    "enable.idempotence": "retries must not duplicate or reorder records",
    "acks": "a record counts as delivered only once all in-sync replicas have it",
    "request.required.acks": "a record counts as delivered only once all in-sync replicas have it",
    "delivery.report.only.error": "successful delivery reports advance the acknowledged LSN",
    "transactional.id": "transactions are managed by the bridge",
    "on_delivery": "delivery reports are wired to the acknowledged LSN",
    "dr_cb": "delivery reports are wired to the acknowledged LSN",
    "dr_msg_cb": "delivery reports are wired to the acknowledged LSN",
}

# librdkafka names a property by whichever of its spellings it likes, not the operator's.
_ALIASES: Final[tuple[frozenset[str], ...]] = tuple(
    frozenset(pair)
    for pair in (
        ("linger.ms", "queue.buffering.max.ms"),
        ("delivery.timeout.ms", "message.timeout.ms"),
        ("retries", "message.send.max.retries"),
        ("compression.type", "compression.codec"),
        ("max.in.flight", "max.in.flight.requests.per.connection"),
        ("bootstrap.servers", "metadata.broker.list"),
        ("sasl.mechanism", "sasl.mechanisms"),
    )
)
_QUOTED: Final = re.compile(r"[\"`]([A-Za-z0-9._]+)[\"`]")


def kafka_client_config(kafka: KafkaConfig) -> dict[str, Any]:
    """`kafka.client_config()` for one client, with the policy that stops it (below)."""
    return {**kafka.client_config(), "error_cb": RaiseOnRefusal()}


class RaiseOnRefusal:
    """librdkafka `error_cb`: a refused SASL login or TLS handshake ends the client's user.

    librdkafka retries both forever, yet neither heals without a configuration change, so the
    next poll/flush raises this instead of the bridge waiting out message.timeout.ms. (TLS
    disconnects are reported as transport errors, not _SSL.) Raised once per client, so
    closing the client afterwards does not raise again. `observer` (another `error_cb`, such
    as the metrics') sees every error first.
    """

    def __init__(self, observer: Callable[[KafkaError], object] | None = None) -> None:
        self.observer = observer
        self.raised = False

    def __call__(self, err: KafkaError) -> None:
        if self.observer is not None:
            self.observer(err)
        if self.raised or err.code() not in (KafkaError._AUTHENTICATION, KafkaError._SSL):
            return
        self.raised = True
        raise DeliveryError(
            f"Kafka refused the connection: {err.str()}",
            hint="check kafka.security_protocol, sasl_mechanism, sasl_username, sasl_password "
            "and ssl_ca_location against the broker's listener",
        )


# A transactional client whose id another instance initialised since (librdkafka reports it
# as _FENCED once fatal; the broker's own codes while a request is refused).
_FENCED_CODES: Final = frozenset(
    {KafkaError._FENCED, KafkaError.PRODUCER_FENCED, KafkaError.INVALID_PRODUCER_EPOCH}
)


def is_fenced(err: KafkaError) -> bool:
    return err.code() in _FENCED_CODES or "fenced" in err.str().lower()


def transaction_error(exc: KafkaException, what: str = "Kafka transaction") -> DeliveryError:
    """A transactional client's failure as the error to stop with; a fenced instance is
    told that another one took over (a standby pair's new active, or a second bridge):
    `FencedError`, which nothing retries."""
    err = exc.args[0]
    if is_fenced(err):
        return FencedError(
            f"{what} refused: this bridge was fenced: {err.str()}",
            hint="another bridge instance with the same kafka.transactional_id took over: "
            "with ha.enabled that is the standby taking over, and restarted this one stands "
            "by; otherwise stop one of them",
        )
    return DeliveryError(
        f"{what} failed: {err.str()}",
        hint="nothing past the last committed Kafka transaction was acknowledged; "
        "check the broker's transaction coordinator and restart",
    )


def producer_config(
    client_config: Mapping[str, Any], overrides: Mapping[str, ConfigValue]
) -> dict[str, Any]:
    """Defaults, then the shared client settings, then the operator's overrides."""
    for key in overrides:
        if key in UNSAFE_OVERRIDES:
            raise ConfigError(
                f"kafka.producer: {key!r} cannot be overridden ({UNSAFE_OVERRIDES[key]})",
                hint=f"remove {key!r} from kafka.producer",
            )
        if key in client_config:
            raise ConfigError(
                f"kafka.producer: {key!r} is already set by the kafka section",
                hint=f"remove {key!r} from kafka.producer and set it in the kafka section",
            )
    return {**PRODUCER_DEFAULTS, **client_config, **overrides}


def _config_error(reason: str, overrides: Mapping[str, ConfigValue]) -> ConfigError:
    """Name the operator's key librdkafka complained about (it may use an alias)."""
    named = set(_QUOTED.findall(reason))
    for group in _ALIASES:
        if named & group:
            named |= group
    culprit = next((key for key in overrides if key in named), None)
    where = f"kafka.producer.{culprit}" if culprit else "kafka.producer"
    return ConfigError(
        f"{where}: the Kafka client refused the producer settings: {reason}",
        hint="check the property name and value against librdkafka's CONFIGURATION.md",
    )


class ProducerStoppedError(Exception):
    """A stop was requested while the producer was full; the record was not queued.

    Its transaction stays unacknowledged, so PostgreSQL sends it again on restart.
    """


def _refused(topic: str, exc: KafkaException, table: str | None = None) -> DeliveryError:
    """The client refused a record outright; a fatal state has its own explanation."""
    err = exc.args[0]
    if is_fenced(err):
        return transaction_error(exc, f"a record for {topic!r}")
    if err.fatal() or err.name() == "_FATAL":
        return DeliveryError(
            f"the Kafka producer is in a fatal state and refused a record for {topic!r}: "
            f"{err.str()}",
            hint="in exactly-once mode this means another instance with the same "
            "kafka.transactional_id fenced this one; otherwise see the bridge.kafka log. "
            "Nothing past the last committed transaction was acknowledged",
        )
    return delivery_error(topic, None, err.str(), table)


def nothing_to_service() -> None:
    """The `while_blocked` of a producer whose caller has no connection to keep answered
    while it waits for Kafka (and the default of every such hook)."""
    return None


class Producer:
    """Produce records of tracked transactions with bounded records and bytes in flight.

    `while_blocked` runs on every turn spent waiting for Kafka (the pipeline passes
    `ReplicationStream.service`, so keepalives are answered and status updates sent
    while the producer is full). Record bytes are value bytes, as in `bridge.kafka.acks`.
    `client` makes the librdkafka client from the merged settings (a fake in unit tests).
    """

    def __init__(
        self,
        client_config: Mapping[str, Any],
        tracker: AckTracker,
        *,
        overrides: Mapping[str, ConfigValue] | None = None,
        max_in_flight_records: int = 100_000,
        max_in_flight_bytes: int = 256 << 20,
        while_blocked: Callable[[], None] = nothing_to_service,
        poll_every: int = 1_000,
        blocked_poll_s: float = 0.1,
        client: Callable[[dict[str, Any]], Any] = _Client,
    ) -> None:
        if max_in_flight_records < 1 or max_in_flight_bytes < 1 or poll_every < 1:
            raise ConfigError(
                "producer bounds must be positive",
                hint="set max in-flight records/bytes and poll interval to at least 1",
            )
        overrides = overrides or {}
        conf = producer_config(client_config, overrides)
        # No stale retransmission after this process: see bridge/kafka/sockets.py. Its
        # sockets are armed from every poll (at most once a second) and statistics report.
        self._sockets = BrokerSockets(str(conf.get("bootstrap.servers", "")))
        conf["stats_cb"] = self._on_stats(conf.get("stats_cb"))
        conf.setdefault("statistics.interval.ms", SOCKET_CHECK_INTERVAL_MS)
        try:
            self._client = client(conf)
        except KafkaException as exc:
            raise _config_error(exc.args[0].str(), overrides) from None
        except (TypeError, ValueError) as exc:
            raise _config_error(str(exc), overrides) from None
        self._tracker = tracker
        self._max_records = max_in_flight_records
        self._max_bytes = max_in_flight_bytes
        self._while_blocked = while_blocked
        self._poll_every = poll_every
        self._blocked_poll_s = blocked_poll_s
        self._produce = self._client.produce  # bound once: called per record
        self._poll = self._client.poll
        self._unpolled = 0
        self._closed = False
        self.blocked_turns = 0  # waits for Kafka to make room (a metric)
        self.stopping = False  # set from a signal handler: stop waiting for room

    def _on_stats(self, observer: Callable[[str], None] | None) -> Callable[[str], None]:
        def stats(report: str) -> None:
            self._sockets.learn(report)
            if observer is not None:
                observer(report)

        return stats

    def _arm_sockets(self) -> None:
        """Broker connections made since the last look abort on close (at most once a
        second: bench/instructions.py counts this apart, as time-driven)."""
        self._sockets.tick()

    def produce(self, record: KafkaRecord, handle: TxHandle) -> None:
        """Queue one record of `handle`'s transaction; blocks (serviced) while full.

        Headers (a primary-key change's `__debezium.*key`) go as a keyword, so only those
        rare records pay for the client parsing keyword arguments.

        Raises the tracker's `DeliveryError` once a poll made here learns of a failure, and
        a `DeliveryError` if the client refuses this record outright.
        """
        value = record.value
        size = 0 if value is None else len(value)
        tracker = self._tracker
        if (
            tracker.in_flight_records >= self._max_records
            or tracker.in_flight_bytes + size > self._max_bytes
        ):
            self._wait_for_room(size)
        topic, key, headers = record.topic, record.key, record.headers
        while True:
            try:
                # Positional: a keyword argument makes the client parse a kwargs dict per
                # record, ~40 % of the call.
                if headers is None:
                    self._produce(topic, value, key, record.partition, handle)
                else:
                    self._produce(topic, value, key, record.partition, handle, headers=headers)
                break
            except BufferError:  # librdkafka's own queue is full
                if self.stopping:
                    raise ProducerStoppedError from None
                self._blocked_turn()
            except KafkaException as exc:
                error = _refused(topic, exc, tracker.tables.get(topic))
                tracker.fail(handle, error)
                raise error from None
        handle.add_record(size)
        self._unpolled += 1
        if self._unpolled >= self._poll_every:
            self._unpolled = 0
            self._poll(0)
            self._arm_sockets()
            tracker.raise_if_failed()

    # Kafka transactions (exactly-once mode; bridge.kafka.eos decides when they start and end).

    def init_transactions(self, timeout: float) -> None:
        """Register the transactional id, fencing any older instance that uses it."""
        self._transactional(self._client.init_transactions, timeout)

    def begin_transaction(self) -> None:
        self._transactional(self._client.begin_transaction)

    def commit_transaction(self, timeout: float) -> None:
        """Flush and commit; while waiting, PostgreSQL keeps being answered."""
        if not self.flush(timeout):
            raise delivery_error(None, None, f"records undelivered after {timeout:.0f}s")
        self._transactional(self._client.commit_transaction, timeout)

    def produce_untracked(self, record: KafkaRecord) -> None:
        """A bookkeeping record (offsets, heartbeat) outside any PostgreSQL transaction."""
        while True:
            try:
                self._produce(
                    record.topic, record.value, record.key, record.partition, headers=record.headers
                )
                return
            except BufferError:
                self._blocked_turn()
            except KafkaException as exc:
                raise _refused(record.topic, exc) from None

    def _transactional(self, call: Callable[..., None], *args: Any) -> None:
        try:
            call(*args)
        except KafkaException as exc:
            raise transaction_error(exc) from None

    def poll(self, timeout: float = 0.0) -> None:
        """Serve delivery reports (the pipeline calls this when the source is idle)."""
        self._unpolled = 0
        self._poll(timeout)
        self._arm_sockets()
        self._tracker.raise_if_failed()

    def flush(self, timeout: float) -> bool:
        """Wait up to `timeout` s for every report; False if some are still missing.

        Raises the tracker's `DeliveryError` if any record failed.
        """
        deadline = time.monotonic() + timeout
        while True:
            try:
                left = self._client.flush(
                    min(self._blocked_poll_s, max(0.0, deadline - time.monotonic()))
                )
            except KafkaException as exc:  # a transactional client in a fatal state (fenced)
                raise transaction_error(exc) from None
            self._arm_sockets()
            self._tracker.raise_if_failed()
            if left == 0:
                return True
            if time.monotonic() >= deadline:
                return False
            self._while_blocked()

    def close(self) -> None:
        """Release the client, dropping records still undelivered.

        Their transactions stay unacknowledged (the tracker records them as failed),
        so PostgreSQL resends them: call `flush` first for a clean stop.
        """
        if self._closed:
            return
        self._closed = True
        self._sockets.arm()
        try:
            self._client.purge()
            self._client.close()
        except KafkaException as exc:  # a fatal client state (fenced) is reported elsewhere
            log.warning("closing the Kafka producer: %s", exc.args[0].str())

    def _wait_for_room(self, size: int) -> None:
        tracker = self._tracker
        # A lone record larger than the byte bound may go once nothing else is in flight.
        while (
            not self.stopping
            and tracker.in_flight_records
            and (
                tracker.in_flight_records >= self._max_records
                or tracker.in_flight_bytes + size > self._max_bytes
            )
        ):
            self._blocked_turn()

    def _blocked_turn(self) -> None:
        self.blocked_turns += 1
        self._while_blocked()
        self._poll(self._blocked_poll_s)
        self._arm_sockets()
        self._tracker.raise_if_failed()
