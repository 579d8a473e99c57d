"""`bridge verify --spark`'s settings (pure, no servers): Spark's Kafka options from the
bridge's Kafka section and the session's settings."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import SecretStr

from bridge.config import KafkaConfig
from bridge.errors import ConfigError
from bridge.verify.command import parse_settings
from bridge.verify.distributed import kafka_options

REPO = Path(__file__).resolve().parents[2]


def test_plaintext_brokers_read_committed_records() -> None:
    assert kafka_options(KafkaConfig(bootstrap_servers="k1:9092,k2:9092")) == {
        "kafka.bootstrap.servers": "k1:9092,k2:9092",
        "kafka.security.protocol": "PLAINTEXT",
        "kafka.isolation.level": "read_committed",
    }


def test_sasl_and_tls_in_the_java_clients_names() -> None:
    kafka = KafkaConfig(
        bootstrap_servers="k:9093",
        security_protocol="SASL_SSL",
        sasl_mechanism="SCRAM-SHA-512",
        sasl_username="bridge",
        sasl_password=SecretStr('se"cr\\et'),
        ssl_ca_location=Path("/etc/kafka/ca.pem"),
    )
    assert kafka_options(kafka) == {
        "kafka.bootstrap.servers": "k:9093",
        "kafka.security.protocol": "SASL_SSL",
        "kafka.isolation.level": "read_committed",
        "kafka.sasl.mechanism": "SCRAM-SHA-512",
        "kafka.sasl.jaas.config": "org.apache.kafka.common.security.scram.ScramLoginModule "
        'required username="bridge" password="se\\"cr\\\\et";',
        "kafka.ssl.truststore.type": "PEM",
        "kafka.ssl.truststore.location": "/etc/kafka/ca.pem",
    }
    plain = KafkaConfig(sasl_mechanism="PLAIN", sasl_username="u")
    assert kafka_options(plain)["kafka.sasl.jaas.config"] == (
        'org.apache.kafka.common.security.plain.PlainLoginModule required username="u" password="";'
    )


def test_spark_conf_settings() -> None:
    assert parse_settings(["spark.driver.host=10.0.0.5", "spark.executor.memory=4g", "a=b=c"]) == {
        "spark.driver.host": "10.0.0.5",
        "spark.executor.memory": "4g",
        "a": "b=c",
    }
    for bad in ("spark.driver.host", "=value"):
        with pytest.raises(ConfigError, match="--spark-conf"):
            parse_settings([bad])
