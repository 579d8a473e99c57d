from bridge.config import FiltersConfig
from bridge.decode.messages import Column, Relation
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
