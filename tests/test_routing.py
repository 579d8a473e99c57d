from pathlib import Path

import pytest
import yaml

from bridge.config import FiltersConfig, KafkaConfig, load_config
from bridge.decode.messages import Column, Relation
from bridge.errors import ConfigError
from bridge.routing import Routing


def rel(schema: str, table: str, oid: int = 1) -> Relation:
    return Relation(None, oid, schema, table, "d", (Column(1, "id", 23, -1),))


def test_topic_names_are_valid_kafka_names() -> None:
    routing = Routing("shop", FiltersConfig())
    assert routing.topic(rel("public", "orders")) == "shop.public.orders"
    assert routing.topic(rel("Sales", "order items")) == "shop.Sales.order_items"
    assert routing.topic(rel("public", 'zürich"x')) == "shop.public.z_rich_x"


def test_include_exclude_full_match() -> None:
    routing = Routing(
        "p", FiltersConfig(include_tables=("public\\..*",), exclude_tables=("public\\.audit.*",))
    )
    assert routing.captured(rel("public", "orders", 1))
    assert not routing.captured(rel("public", "audit_log", 2))
    assert not routing.captured(rel("other", "orders", 3))
    assert not routing.matches("xpublic", "orders")


def test_decision_follows_relation_versions() -> None:
    routing = Routing("p", FiltersConfig(exclude_tables=("public\\.t",)))
    assert not routing.captured(rel("public", "t", 7))
    assert routing.captured(rel("public", "renamed", 7))  # ALTER TABLE RENAME: new decision


def test_topic_template_fills_placeholders_and_keeps_the_replacement() -> None:
    routing = Routing("shop", FiltersConfig(), "cdc-{table}.{schema}.v1")
    assert routing.topic(rel("public", "orders")) == "cdc-orders.public.v1"
    assert routing.topic(rel("Sales", "order items")) == "cdc-order_items.Sales.v1"
    assert Routing("shop", FiltersConfig(), "{table}").topic(rel("s", "zürich")) == "z_rich"


@pytest.mark.parametrize(
    ("template", "problem"),
    [
        ("{prefix}.{tabel}", "unknown placeholder {tabel}"),
        ("{prefix}.{schema}", "must contain {table}"),
        ("{prefix}.{table", "cannot format"),
        ("{0}.{table}", "unknown placeholder {0}"),
        ("{table!r}", "unknown placeholder {table}"),
        ("{table.upper}", "unknown placeholder {table.upper}"),
    ],
)
def test_topic_template_is_checked_at_config_load(
    template: str, problem: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("BRIDGE_KAFKA__TOPIC_TEMPLATE", raising=False)
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump({"kafka": {"topic_template": template}}), encoding="utf-8")
    with pytest.raises(ConfigError, match=r"^invalid configuration: kafka\.topic_template: ") as e:
        load_config(path)
    assert problem in str(e.value) and repr(template) in str(e.value)


def test_default_topic_template_matches_the_old_naming() -> None:
    assert KafkaConfig().topic_template == "{prefix}.{schema}.{table}"
