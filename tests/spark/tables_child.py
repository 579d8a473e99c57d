"""The Spark driver the kill test (tests/spark/test_tables.py) runs in its own process group.

Runs `apply_tables` over a topic pattern until its first micro-batch (the whole backlog: one
batch keeps the test short on two cores) has applied exactly one table, then writes what it did
to the marker file and blocks (reading stdin) until the test kills the whole process group, JVM
included: a driver dying inside a micro-batch, with one table of the batch committed and the
others not.

argv[1]: JSON {"bootstrap", "registry", "pattern", "target", "checkpoint", "marker",
"conf"}: "conf" the session settings the test's session has for its tables (the warehouse
directory, the Iceberg catalog).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import bridge.spark.tables as tables
from bridge.spark.apply import apply_batch
from bridge.spark.jars import spark_session
from bridge.spark.reader import ChangeStream, read_changes

args = json.loads(sys.argv[1])
batches: list[int] = []  # one entry per micro-batch started; its value = tables applied
applied: list[str] = []
apply_tables_batch = tables.apply_tables_batch


def counting_batch(*a: Any, **kw: Any) -> None:
    batches.append(0)
    apply_tables_batch(*a, **kw)


def stopping_apply(changes: Any, target: str, *a: Any, **kw: Any) -> None:
    if batches == [1]:
        Path(args["marker"]).write_text(json.dumps({"batch": 0, "applied": applied}))
        sys.stdin.read()  # until killed
    apply_batch(changes, target, *a, **kw)
    batches[-1] += 1
    applied.append(target)


setattr(tables, "apply_tables_batch", counting_batch)  # noqa: B010 (replaced for the test)
setattr(tables, "apply_batch", stopping_apply)  # noqa: B010

spark = spark_session("kill-test", extra_conf=args["conf"])
stream = read_changes(
    spark,
    pattern=args["pattern"],
    kafka_options={"kafka.bootstrap.servers": args["bootstrap"]},
    registry_url=args["registry"],
    streaming=True,
)
assert isinstance(stream, ChangeStream)
query = tables.apply_tables(
    stream, args["target"], checkpoint=args["checkpoint"], trigger={"availableNow": True}
)
query.awaitTermination()
sys.exit("the query ended without being stopped")
