"""The downstream Spark side: read the bridge's topics, apply them to Delta Lake tables.

    spark = spark_session("cdc")                                   # bridge.spark.jars
    changes = read_changes(spark, ["srv.public.items"], kafka_options={
        "kafka.bootstrap.servers": "host:9092"}, registry_url=url)  # bridge.spark.reader
    apply_batch(changes, "/lake/items", ["id"])                     # bridge.spark.apply

    stream = read_changes(..., streaming=True)
    apply_changes(stream, "/lake/items", ["id"], checkpoint="/lake/_chk/items")

Needs the `spark` extra (pyspark and delta-spark at the versions in `bridge.spark.jars`) and,
once, Maven to fetch the JVM jars.
"""

from bridge.spark.apply import apply_batch, apply_changes
from bridge.spark.jars import spark_session
from bridge.spark.reader import ChangeStream, read_changes

__all__ = ["ChangeStream", "apply_batch", "apply_changes", "read_changes", "spark_session"]
