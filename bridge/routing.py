"""Which tables are captured, and the topic each one goes to."""

from __future__ import annotations

import re
from typing import Final

from bridge.config import TOPIC_TEMPLATE, Config, FiltersConfig
from bridge.decode.messages import Relation

_TOPIC_INVALID: Final = re.compile(r"[^A-Za-z0-9._-]")


def kafka_safe(name: str) -> str:
    """Characters Kafka refuses in a topic name become `_` (as Debezium does)."""
    return _TOPIC_INVALID.sub("_", name)


class Routing:
    """Table filters and topic names, decided once per relation version."""

    def __init__(self, prefix: str, filters: FiltersConfig, template: str = TOPIC_TEMPLATE) -> None:
        self.prefix = prefix
        self.template = template  # validated by KafkaConfig
        self._include = [re.compile(p) for p in filters.include_tables]
        self._exclude = [re.compile(p) for p in filters.exclude_tables]
        self.skipped_ops = frozenset(filters.skipped_operations)
        self._decided: dict[int, tuple[Relation, bool]] = {}

    @classmethod
    def from_config(cls, cfg: Config) -> Routing:
        return cls(cfg.kafka.topic_prefix, cfg.filters, cfg.kafka.topic_template)

    def matches(self, schema: str, table: str) -> bool:
        name = f"{schema}.{table}"
        if self._include and not any(p.fullmatch(name) for p in self._include):
            return False
        return not any(p.fullmatch(name) for p in self._exclude)

    def captured(self, relation: Relation) -> bool:
        entry = self._decided.get(relation.oid)
        if entry is None or entry[0] is not relation:
            entry = (relation, self.matches(relation.namespace, relation.name))
            self._decided[relation.oid] = entry
        return entry[1]

    def topic(self, relation: Relation) -> str:
        """`kafka.topic_template` filled in; characters Kafka refuses in a topic name become
        `_` (as Debezium does), so a table named "order items" still streams."""
        name = self.template.format(
            prefix=self.prefix, schema=relation.namespace, table=relation.name
        )
        return kafka_safe(name)
