"""Table topics created with chosen settings (`kafka.topic_creation`, Debezium's
`topic.creation.*`): partitions, replication factor and topic configs per topic-name regex.

A topic is created the first time a relation maps to it, before its schemas are
registered and its first record produced; one that exists already is left as it is (as
Debezium does). The encoders ask once per relation version, so this costs nothing per row.
Without rules nothing is created here: the broker's auto-create (or the operator) decides.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from typing import Any, Final

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient, NewTopic

from bridge.config import Config, TopicRule
from bridge.decode.messages import Relation
from bridge.errors import DeliveryError
from bridge.kafka.producer import kafka_client_config

log: Final = logging.getLogger("bridge.topics")
BROKER_DEFAULT: Final = -1  # NewTopic's "use the broker's default" (KIP-464)


class TopicCreator:
    """Creates each topic once, by the first rule whose regex matches its name."""

    def __init__(
        self, rules: tuple[TopicRule, ...], admin: Callable[[], Any], timeout: float
    ) -> None:
        self._rules = [(re.compile(rule.match), rule) for rule in rules]
        self._admin = admin
        self._client: Any = None
        self._timeout = timeout
        self._seen: set[str] = set()

    def rule_for(self, topic: str) -> TopicRule | None:
        return next((rule for pattern, rule in self._rules if pattern.fullmatch(topic)), None)

    def ensure(self, topic: str) -> None:
        if topic in self._seen:
            return
        rule = self.rule_for(topic)
        if rule is not None:
            self._create(topic, rule)
        self._seen.add(topic)

    def _create(self, topic: str, rule: TopicRule) -> None:
        spec = NewTopic(
            topic,
            num_partitions=rule.partitions or BROKER_DEFAULT,
            replication_factor=rule.replication_factor or BROKER_DEFAULT,
            config=dict(rule.config),
        )
        if self._client is None:
            self._client = self._admin()
        futures = self._client.create_topics([spec], request_timeout=self._timeout)
        try:
            futures[topic].result(self._timeout)
        except KafkaException as exc:
            error = exc.args[0]
            if error.name() == "TOPIC_ALREADY_EXISTS":
                return
            raise DeliveryError(
                f"cannot create topic {topic!r} (kafka.topic_creation rule {rule.match!r}): "
                f"{error.str()}",
                hint="fix the rule's settings, grant the bridge's user CreateTopics, or "
                "create the topic beforehand",
            ) from None
        log.info("created topic %s (rule %r)", topic, rule.match)

    def wrap(self, topic_for: Callable[[Relation], str]) -> Callable[[Relation], str]:
        """`topic_for` that also makes sure the topic exists with its rule's settings."""

        def topic(relation: Relation) -> str:
            name = topic_for(relation)
            self.ensure(name)
            return name

        return topic


def topic_creator(cfg: Config) -> TopicCreator:
    """The configured creator; its admin client is made on the first creation."""
    return TopicCreator(
        cfg.kafka.topic_creation,
        lambda: AdminClient(kafka_client_config(cfg.kafka)),
        cfg.kafka.request_timeout_s,
    )
