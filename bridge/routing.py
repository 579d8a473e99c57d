"""Which tables are captured, and the topic each one goes to."""

from __future__ import annotations

import re

from bridge.config import FiltersConfig
from bridge.decode.messages import Relation

_TOPIC_INVALID = re.compile(r"[^A-Za-z0-9._-]")


class Routing:
    """Table filters and topic names, decided once per relation version."""

    def __init__(self, prefix: str, filters: FiltersConfig) -> None:
        self.prefix = prefix
        self._include = [re.compile(p) for p in filters.include_tables]
        self._exclude = [re.compile(p) for p in filters.exclude_tables]
        self.skipped_ops = frozenset(filters.skipped_operations)
        self._decided: dict[int, tuple[Relation, bool]] = {}

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
        """`<prefix>.<schema>.<table>`; characters Kafka refuses in a topic name become `_`
        (as Debezium does), so a table named "order items" still streams."""
        name = f"{relation.namespace}.{relation.name}"
        return f"{self.prefix}.{_TOPIC_INVALID.sub('_', name)}"
