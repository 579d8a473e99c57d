"""`bridge verify`: Kafka's topics (and lake tables) checked against PostgreSQL at one
consistent point.

`run` takes the point and reads the topics, `state` folds records the way a key-based
consumer does (the rules of `bridge.spark.apply`), `compare` checks each table's rows
against that state, `lake` checks a Delta or Iceberg table written by the Spark apply
(`--lake`), `distributed` runs the comparison (and the lake's) as a Spark job (`--spark`),
`report` prints the verdict, `metrics` writes or pushes it, and `repair` re-emits what
differs, in Kafka or the lake, whichever comparison found it.
"""
