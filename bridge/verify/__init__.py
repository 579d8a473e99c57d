"""`bridge verify`: Kafka's topics checked against PostgreSQL at one consistent point.

`run` takes the point and reads the topics, `state` folds records the way a key-based
consumer does (the rules of `bridge.spark.apply`), `compare` checks each table's rows
against that state, `report` prints the verdict and `repair` re-emits what differs.
"""
