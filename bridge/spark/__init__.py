"""The downstream Spark side: read the bridge's topics, apply them to Delta Lake or Apache
Iceberg tables (`bridge.spark.formats`).

    spark = spark_session("cdc")                                   # bridge.spark.jars
    changes = read_changes(spark, ["srv.public.items"], kafka_options={
        "kafka.bootstrap.servers": "host:9092"}, registry_url=url)  # bridge.spark.reader
    apply_batch(changes, "/lake/items", ["id"])                     # bridge.spark.apply

    stream = read_changes(..., streaming=True)
    apply_changes(stream, "/lake/items", ["id"], checkpoint="/lake/_chk/items")

    stream = read_changes(spark, pattern=r"srv\\.public\\..*", ..., streaming=True)
    apply_tables(stream, "/lake/{schema}/{table}", checkpoint="/lake/_chk/all")  # .tables

    spark = spark_session("cdc", extra_conf=iceberg_catalog("ice", "/warehouse"))  # .jars
    apply_tables(stream, "ice.{schema}.{table}", checkpoint="/lake/_chk/ice")   # Iceberg

Needs the `spark` extra (pyspark and delta-spark at the versions in `bridge.spark.jars`) and,
once, Maven to fetch the JVM jars.
"""

from bridge.spark.apply import apply_batch, apply_changes
from bridge.spark.history import apply_history
from bridge.spark.jars import spark_session
from bridge.spark.reader import ChangeStream, read_changes
from bridge.spark.tables import TableOptions, apply_tables

__all__ = [
    "ChangeStream",
    "TableOptions",
    "apply_batch",
    "apply_changes",
    "apply_history",
    "apply_tables",
    "read_changes",
    "spark_session",
]
