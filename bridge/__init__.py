"""PostgreSQL logical replication → Kafka (Avro) change-data-capture bridge."""

__version__ = "0.1.0"
