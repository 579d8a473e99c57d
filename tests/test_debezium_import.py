"""`bridge import-debezium` over real Debezium PostgreSQL connector configurations.

The files in tests/debezium_configs/ follow Debezium's documentation (the PostgreSQL
connector's example with Confluent's Avro converter, the Apicurio converter set-up) and a
production-style connector using the filter, snapshot and delivery properties.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from bridge.cli import app
from bridge.config import FiltersConfig, KafkaConfig, load_config
from bridge.debezium_import import import_connector, parse_properties, read_connector_file
from bridge.errors import ConfigError
from bridge.kafka.topics import TopicCreator
from bridge.routing import Routing

CONFIGS = Path(__file__).resolve().parent / "debezium_configs"


def imported(name: str) -> tuple[dict[str, dict[str, object]], list[str]]:
    result = import_connector(read_connector_file(CONFIGS / name), "kafka:9092")
    return result.settings, result.unsupported


def test_documented_example_with_confluent_avro() -> None:
    settings, unsupported = imported("inventory-avro.json")
    assert settings == {
        "avro": {
            "timestamptz_mode": "iso",
            "numeric_mode": "variable",
            "time_precision_mode": "adaptive",
            "interval_mode": "numeric",
            "hstore_mode": "json",
        },
        "filters": {"include_tables": ["public.inventory"], "skipped_operations": ["t"]},
        "kafka": {"bootstrap_servers": "kafka:9092", "topic_prefix": "fulfillment"},
        "registry": {"url": "http://schema-registry:8081"},
        "source": {
            "host": "192.168.99.100",
            "port": 5432,
            "user": "postgres",
            "dbname": "postgres",
            "slot_name": "debezium",
            "publication_name": "dbz_publication",
            "plugin": "pgoutput",
        },
    }
    assert [line.split(":")[0] for line in unsupported] == ["transforms", "transforms.unwrap.type"]


def test_secrets_never_reach_the_file(tmp_path: Path) -> None:
    out = tmp_path / "bridge.yaml"
    result = CliRunner().invoke(
        app, ["import-debezium", str(CONFIGS / "inventory-avro.json"), "-o", str(out)]
    )
    assert result.exit_code == 0, result.output
    text = out.read_text()
    assert "postgres" not in [line.split(": ")[-1] for line in text.splitlines() if "pass" in line]
    assert "password" not in yaml.safe_load(text)["source"]
    assert "database.password -> environment BRIDGE_SOURCE__PASSWORD" in text
    assert load_config(out).source.host == "192.168.99.100"  # the file loads as written


def test_apicurio_properties() -> None:
    settings, unsupported = imported("apicurio.properties")
    assert settings["registry"] == {"url": "http://apicurio:8080/apis/ccompat/v7"}
    assert settings["source"]["slot_name"] == "inventory_slot"
    assert settings["source"]["publication_mode"] == "filtered"
    assert "password" not in settings["source"]
    assert not any(line.startswith("database.password") for line in unsupported)
    routing = Routing("p", load_filters(settings))
    assert routing.matches("inventory", "orders")
    assert not routing.matches("public", "orders")


def load_filters(settings: dict[str, dict[str, object]]) -> FiltersConfig:
    return FiltersConfig.model_validate(settings.get("filters", {}))


def test_tuned_connector() -> None:
    settings, unsupported = imported("tuned.properties")
    assert settings["snapshot"] == {
        "incremental_chunk_size": 2048,
        "signal_table": "public.debezium_signal",
        "workers": 4,
        "mode": "no_data",
    }
    assert settings["filters"] == {
        "exclude_columns": [r"public\.customers\.ssn"],
        "skipped_operations": [],
        "exclude_tables": [r"public\.orders_archive"],
        "include_tables": [r"public\.orders", r"public\.order_lines", r"billing\..*"],
    }
    assert settings["pipeline"] == {
        "heartbeat_interval_s": 5.0,
        "transaction_metadata": True,
        "tombstones": False,
    }
    assert settings["source"]["slot_busy_timeout_s"] == 6.0
    assert settings["source"]["status_interval_s"] == 2.0
    assert settings["source"]["sslmode"] == "verify-full"
    assert settings["avro"]["numeric_mode"] == "string"
    assert settings["avro"]["timestamptz_mode"] == "iso"
    assert settings["avro"]["hstore_mode"] == "json"
    assert settings["avro"]["interval_mode"] == "numeric"
    listed = {line.split(":")[0] for line in unsupported}
    assert {"heartbeat.action.query", "slot.drop.on.stop", "some.typo.property"} <= listed
    assert not {"hstore.handling.mode", "interval.handling.mode"} & listed
    assert not any(line.startswith("topic.creation") for line in listed)
    assert "(worker) bootstrap.servers" not in listed  # given on the command line


def test_message_key_columns() -> None:
    settings, _ = imported("tuned.properties")
    assert settings["avro"]["key_columns"] == {"public.orders": ["order_no"]}
    props = {
        "connector.class": "io.debezium.connector.postgresql.PostgresConnector",
        "message.key.columns": "inventory.customers:pk1,pk2;(.*).purchaseorders:pk3,pk4",
    }
    assert import_connector(props).settings["avro"]["key_columns"] == {
        "inventory.customers": ["pk1", "pk2"],
        "(.*).purchaseorders": ["pk3", "pk4"],
    }


def test_column_rules() -> None:
    settings, unsupported = imported("tuned.properties")
    assert settings["avro"]["column_rules"] == [
        {"match": r"public\.customers\.phone", "action": "hash", "algorithm": "SHA-256",
         "salt": "CzQMA0cB5K"},
        {"match": r"public\.customers\.email", "action": "mask", "length": 8},
        {"match": r"public\.customers\.notes", "action": "truncate", "length": 20},
        {"match": r"public\.orders\.comment", "action": "truncate", "length": 20},
    ]  # fmt: skip
    assert not any(line.startswith("column.") for line in unsupported)
    v1 = import_connector(
        {
            "connector.class": "io.debezium.connector.postgresql.PostgresConnector",
            "column.mask.hash.MD5.with.salt.s.a.l.t": "public.t.c",
        }
    )
    assert v1.settings["avro"]["column_rules"] == [
        {"match": "public.t.c", "action": "hash", "algorithm": "MD5", "salt": "s.a.l.t"}
    ]
    assert any("v1" in line for line in v1.unsupported)


def test_topic_creation_groups_then_default() -> None:
    settings, _ = imported("tuned.properties")
    rules = settings["kafka"]["topic_creation"]
    assert rules == [
        {
            "match": r"(?!(?:shop\.public\.customers_log)$)(?:shop\.public\.customers.*)",
            "partitions": 3,
            "config": {"cleanup.policy": "compact"},
        },
        {
            "match": "(?:.*)",
            "partitions": 6,
            "replication_factor": 1,
            "config": {"retention.ms": "604800000"},
        },
    ]
    creator = TopicCreator(load_config_kafka(settings).topic_creation, lambda: None, 1.0)
    assert creator.rule_for("shop.public.customers").partitions == 3  # type: ignore[union-attr]
    assert creator.rule_for("shop.public.customers_log").partitions == 6  # type: ignore[union-attr]
    assert creator.rule_for("shop.public.orders").partitions == 6  # type: ignore[union-attr]


def load_config_kafka(settings: dict[str, dict[str, object]]) -> KafkaConfig:
    return KafkaConfig.model_validate(settings["kafka"])


def test_schema_and_table_include_lists_combine() -> None:
    settings = import_connector(
        {
            "connector.class": "io.debezium.connector.postgresql.PostgresConnector",
            "schema.include.list": "sales,hr",
            "table.include.list": r".*\.orders,hr\.staff",
        }
    ).settings
    routing = Routing("p", load_filters(settings))
    assert routing.matches("sales", "orders")
    assert routing.matches("hr", "staff")
    assert not routing.matches("public", "orders")
    assert not routing.matches("sales", "staff")


def test_column_include_list_excludes_the_rest() -> None:
    settings = import_connector(
        {
            "connector.class": "io.debezium.connector.postgresql.PostgresConnector",
            "column.include.list": r"public\.t\.(id|name)",
        }
    ).settings
    (pattern,) = settings["filters"]["exclude_columns"]
    assert re.fullmatch(pattern, "public.t.secret")
    assert not re.fullmatch(pattern, "public.t.id")


@pytest.mark.parametrize(
    ("mode", "expected"),
    [("initial", "initial"), ("never", "no_data"), ("no_data", "no_data"), ("always", "always")],
)
def test_snapshot_modes(mode: str, expected: str) -> None:
    props = {"connector.class": "io.debezium.connector.postgresql.PostgresConnector"}
    settings = import_connector({**props, "snapshot.mode": mode}).settings
    assert settings["snapshot"]["mode"] == expected


def test_a_mode_without_equivalent_is_listed() -> None:
    props = {
        "connector.class": "io.debezium.connector.postgresql.PostgresConnector",
        "snapshot.mode": "configuration_based",
        "plugin.name": "decoderbufs",
    }
    result = import_connector(props)
    assert "snapshot" not in result.settings
    assert any(line.startswith("snapshot.mode: configuration_based") for line in result.unsupported)
    assert any(line.startswith("plugin.name: decoderbufs") for line in result.unsupported)


def test_another_connector_is_refused() -> None:
    with pytest.raises(ConfigError, match="not Debezium's PostgreSQL connector"):
        import_connector({"connector.class": "io.debezium.connector.mysql.MySqlConnector"})
    with pytest.raises(ConfigError, match=r"no connector\.class"):
        import_connector({"topic.prefix": "x"})


def test_an_invalid_result_names_the_field() -> None:
    props = {
        "connector.class": "io.debezium.connector.postgresql.PostgresConnector",
        "slot.name": "Bad-Slot",
    }
    with pytest.raises(ConfigError, match=r"source\.slot_name"):
        import_connector(props)


def test_java_properties_syntax() -> None:
    text = (
        "# comment\n! also a comment\n"
        "a=1\n"
        "b : two words\n"
        "c three\n"
        "d = first,\\\n    second\n"
        "e = tab\\there \\u00e9\n"
        "f\\=g = escaped key\n"
        "h = ends with backslash\\\\\n"
    )
    assert parse_properties(text) == {
        "a": "1",
        "b": "two words",
        "c": "three",
        "d": "first,second",
        "e": "tab\there é",
        "f=g": "escaped key",
        "h": "ends with backslash\\",
    }


def test_cli_lists_what_is_not_carried_over() -> None:
    result = CliRunner().invoke(app, ["import-debezium", str(CONFIGS / "tuned.properties")])
    assert result.exit_code == 0
    assert "not carried over: some.typo.property" in result.stderr
    assert yaml.safe_load(result.stdout)["kafka"]["topic_prefix"] == "shop"


def test_cli_bad_file() -> None:
    result = CliRunner().invoke(app, ["import-debezium", "/nonexistent/connector.json"])
    assert result.exit_code == 2
    assert "cannot read" in result.stderr


def test_snapshot_select_statement_overrides() -> None:
    prefix = "snapshot.select.statement.overrides"
    props = {
        "connector.class": "io.debezium.connector.postgresql.PostgresConnector",
        prefix: "public.orders,public.items",
        f"{prefix}.public.orders": "SELECT * FROM public.orders WHERE region = 'eu'",
        f"{prefix}.public.stale": "SELECT * FROM public.stale WHERE false",
    }
    result = import_connector(props, "kafka:9092")
    assert result.settings["snapshot"] == {
        "select_overrides": {"public.orders": "SELECT * FROM public.orders WHERE region = 'eu'"}
    }
    assert f"{prefix}.public.orders -> snapshot.select_overrides" in result.mapped
    assert sorted(result.unsupported) == sorted(
        [
            f"{prefix}: no {prefix}.public.items statement: public.items is read whole",
            f"{prefix}.public.stale: public.stale is not in {prefix}: Debezium ignores it too",
        ]
    )


def test_outbox_event_router() -> None:
    """Debezium's outbox documentation example: routed by aggregate type, a header alias."""
    props = {
        "connector.class": "io.debezium.connector.postgresql.PostgresConnector",
        "table.include.list": r"public\.outboxevent",
        "transforms": "outbox,unwrap",
        "transforms.outbox.type": "io.debezium.transforms.outbox.EventRouter",
        "transforms.outbox.table.fields.additional.placement": "type:header:eventType,seq:header,"
        "version:envelope:v",
        "transforms.outbox.route.topic.replacement": "${routedByValue}.events",
        "transforms.outbox.table.field.event.timestamp": "timestamp",
        "transforms.outbox.table.op.invalid.behavior": "fatal",
        "transforms.outbox.route.tombstone.on.empty.payload": "true",
        "transforms.unwrap.type": "io.debezium.transforms.ExtractNewRecordState",
    }
    result = import_connector(props, "kafka:9092")
    assert result.settings["outbox"] == {
        "tables": [".*"],
        "headers": {"type": "eventType", "seq": "seq"},
        "topic_replacement": "${routedByValue}.events",
        "on_update": "fatal",
        "tombstone_on_empty_payload": True,
    }
    listed = sorted(line.split(": ")[0] for line in result.unsupported)
    assert listed == [
        "transforms",  # unwrap
        "transforms.outbox.table.field.event.timestamp",
        "transforms.outbox.table.fields.additional.placement",  # the envelope placement
        "transforms.unwrap.type",
    ]


def test_kafka_signal_channel() -> None:
    props = {
        "connector.class": "io.debezium.connector.postgresql.PostgresConnector",
        "signal.data.collection": "public.debezium_signal",
        "signal.enabled.channels": "source,kafka,jmx",
        "signal.kafka.topic": "dbz-signals",
        "signal.kafka.groupId": "my-signals",
        "signal.kafka.bootstrap.servers": "kafka:9092",
        "signal.consumer.security.protocol": "SSL",
    }
    result = import_connector(props, "kafka:9092")
    assert result.settings["snapshot"] == {
        "signal_table": "public.debezium_signal",
        "signal_kafka_topic": "dbz-signals",
        "signal_kafka_group": "my-signals",
    }
    assert sorted(line.split(": ")[0] for line in result.unsupported) == [
        "signal.consumer.security.protocol",
        "signal.enabled.channels",
    ]


def test_read_only_snapshots_and_sink_notifications() -> None:
    props = {
        "connector.class": "io.debezium.connector.postgresql.PostgresConnector",
        "read.only": "true",
        "signal.enabled.channels": "kafka",
        "signal.kafka.topic": "dbz-signals",
        "notification.enabled.channels": "sink,log,carrier-pigeon",
        "notification.sink.topic.name": "dbz-notifications",
    }
    result = import_connector(props, "kafka:9092")
    assert result.settings["snapshot"] == {
        "read_only": True,
        "signal_kafka_topic": "dbz-signals",
        "notification_topic": "dbz-notifications",
    }
    assert [line.split(": ")[0] for line in result.unsupported] == [
        "notification.enabled.channels"  # carrier-pigeon
    ]
    no_sink = {**props, "notification.enabled.channels": "log"}
    assert "notification_topic" not in import_connector(no_sink).settings["snapshot"]


def test_mode_properties_map_and_default_to_debeziums() -> None:
    """Absent mode properties mean Debezium's defaults, so the value schemas stay versions
    of the subjects Debezium wrote; given ones map one to one."""
    base = {"connector.class": "io.debezium.connector.postgresql.PostgresConnector"}
    avro = import_connector(base).settings["avro"]
    assert (avro["time_precision_mode"], avro["interval_mode"], avro["hstore_mode"]) == (
        "adaptive",
        "numeric",
        "json",
    )
    given = {
        **base,
        "time.precision.mode": "adaptive_time_microseconds",
        "interval.handling.mode": "string",
        "hstore.handling.mode": "map",
        "binary.handling.mode": "hex",
    }
    avro = import_connector(given).settings["avro"]
    assert (avro["time_precision_mode"], avro["interval_mode"], avro["hstore_mode"]) == (
        "micros",
        "string",
        "map",
    )
    assert avro["binary_mode"] == "hex"
    unsupported = import_connector({**base, "binary.handling.mode": "base64-url-safe"}).unsupported
    assert any(line.startswith("binary.handling.mode: base64-url-safe") for line in unsupported)
