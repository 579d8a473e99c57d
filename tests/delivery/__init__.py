"""Delivery guarantees proven with real processes: PostgreSQL, Kafka, registry, bridge."""
