"""The Kafka side: encoded records in, delivery confirmed, the flush position out.

Above `bridge.encode` (whose records it produces), below the wiring (`bridge.pipeline`,
`bridge.build`), which runs it:

- `producer`: confluent-kafka's producer with the settings the guarantees depend on,
  delivery reports wired to each record's transaction, backpressure that keeps
  PostgreSQL answered while Kafka is slow;
- `acks`: the LSN watermark (pure): the flush position is the end of the newest
  transaction that, with every earlier one, Kafka confirmed;
- `eos`: exactly-once, Kafka transactions committed with the LSN they reach;
- `topics`: table topics created by rule (`kafka.topic_creation`);
- `sidetopics`: the transaction-metadata, logical-message and heartbeat topics;
- `oversized`: rows over their topic's size limit, stopped or dead-lettered, and the
  dead-letter topic for changes of `pipeline.on_error: dlq` tables;
- `registry`: schema registration, one round trip per new schema version.

It talks to Kafka and the schema registry only; the slot position recorded in Kafka
(`bridge.slotstate`) is wiring, since it also reads and drops the slot in PostgreSQL.
"""
