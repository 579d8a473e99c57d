"""The Spark driver program of the cluster tests (tests/spark/test_cluster.py), a process of
its own as a user's job is: a session on the stack's standalone cluster (`--master`) that
ships the bridge to the executors as a user does (a packed virtualenv in `spark.archives`,
tests/spark/ship.py; the jars through `spark.jars`, as `spark_session` sets them), then
runs the steps the test sends.

Protocol: one JSON object per line on stdin, {"step": name, ...arguments}; for each, one
line `@@ {"ok": result}` or `@@ {"error": text}` on stdout, and on the way `@@ {"event":
...}` lines. After the event "applied" of the step "many" the driver waits for a line
`{"step": "go"}` (the test kills a worker in between). Spark's own output goes to stderr.

argv[1]: JSON {"master", "conf"}: the session's settings beyond `spark_session`'s.
"""

from __future__ import annotations

import json
import sys
import time
import traceback
from collections.abc import Callable
from typing import Any

import bridge.spark.tables as tables
from bridge.config import Config
from bridge.snapshot.external import open_external_load
from bridge.spark.apply import apply_batch, apply_changes
from bridge.spark.initial_load import initial_load
from bridge.spark.jars import spark_session
from bridge.spark.reader import read_changes

ARGS = json.loads(sys.argv[1])
spark = spark_session("cluster-test", ARGS["master"], extra_conf=ARGS["conf"])


def send(message: dict[str, Any]) -> None:
    sys.stdout.write("@@ " + json.dumps(message) + "\n")
    sys.stdout.flush()


def _where(_index: int) -> dict[str, Any]:
    """Run by a Python worker of an executor: where its interpreter and the bridge's
    packages come from."""
    import os  # noqa: PLC0415 (imported where the task runs)
    import sys  # noqa: PLC0415

    import confluent_kafka  # noqa: PLC0415
    import psycopg  # noqa: PLC0415

    import bridge  # noqa: PLC0415

    return {
        "cwd": os.getcwd(),
        "python": sys.executable,
        "prefix": sys.prefix,
        "modules": [m.__file__ for m in (bridge, psycopg, confluent_kafka)],
        "pythonpath": os.environ.get("PYTHONPATH", ""),
    }


def _import_bridge(_index: int) -> str:
    import bridge  # noqa: PLC0415

    return str(bridge.__file__)


def where(tasks: int, executors: int, timeout: float) -> dict[str, Any]:
    """What the executors' Python workers run with, and what a job gets whose Python is
    not the shipped one (the worker's own interpreter): it cannot import the bridge. Runs
    once `executors` executors are registered (they start after the session), so that the
    tasks are spread over them."""
    deadline = time.monotonic() + timeout
    while sum(e["active"] for e in executors_seen()) < executors:
        if time.monotonic() > deadline:
            raise TimeoutError(f"fewer than {executors} executors in {timeout:.0f}s")
        time.sleep(0.5)  # polling the driver's own status store
    sc = spark.sparkContext
    found = sc.parallelize(range(tasks), tasks).map(_where).collect()
    shipped = sc.pythonExec
    sc.pythonExec = "/usr/bin/python3"  # what runs without spark.pyspark.python
    try:
        sc.parallelize(range(1), 1).map(_import_bridge).collect()
        unshipped = "imported"
    except Exception as exc:
        unshipped = str(exc)
    finally:
        sc.pythonExec = shipped
    return {"tasks": found, "unshipped": unshipped[-2000:]}


def load(config: dict[str, Any], targets: dict[str, str], registry: str) -> dict[str, int]:
    """The Spark initial load (snapshot.mode external) of every table the bridge holds."""
    return initial_load(spark, open_external_load(Config(**config)), targets, registry_url=registry)


def apply(
    topics: list[str], target: str, keys: list[str], checkpoint: str, kafka: dict[str, str]
) -> None:
    """A streaming apply of `topics` into one table, until the topics' end."""
    registry = kafka.pop("registry")
    stream = read_changes(spark, topics, kafka_options=kafka, registry_url=registry, streaming=True)
    query = apply_changes(
        stream, target, keys, checkpoint=checkpoint, trigger={"availableNow": True}
    )
    assert query is not None
    _finish(query)


def many(pattern: str, target: str, checkpoint: str, kafka: dict[str, str]) -> dict[str, Any]:
    """`apply_tables` over every topic of `pattern` in one micro-batch; after its first
    table an event, on which the test kills a worker, and the batch held until the test
    says go, so that the other tables run with the worker lost however fast they would
    have been. Returns the tables applied (a table may be applied again: its task failed)
    and what Spark saw of its executors."""
    registry = kafka.pop("registry")
    applied: list[str] = []
    original: Callable[..., None] = apply_batch  # what bridge.spark.tables calls

    def reporting(changes: Any, target: str, *a: Any, **kw: Any) -> None:
        original(changes, target, *a, **kw)
        applied.append(target)
        if len(applied) == 1:
            send({"event": "applied", "target": target})
            # the main thread is inside this step, not reading stdin: the line is ours
            # (or EOF: the test closed the driver)
            line = sys.stdin.readline()
            assert not line or json.loads(line) == {"step": "go"}, line

    setattr(tables, "apply_batch", reporting)  # noqa: B010 (wrapped for the event)
    try:
        stream = read_changes(
            spark, pattern=pattern, kafka_options=kafka, registry_url=registry, streaming=True
        )
        query = tables.apply_tables(
            stream, target, checkpoint=checkpoint, trigger={"availableNow": True}
        )
        _finish(query)
    finally:
        setattr(tables, "apply_batch", original)  # noqa: B010
    return {"applied": applied, "executors": executors_seen()}


def executors_seen() -> list[dict[str, Any]]:
    """Every executor the application had (the driver left out), live or lost."""
    store = spark.sparkContext._jsc.sc().statusStore()
    found = store.executorList(False)
    out = []
    for i in range(found.size()):
        e = found.apply(i)
        if e.id() != "driver":
            out.append(
                {
                    "id": e.id(),
                    "active": bool(e.isActive()),
                    "failed_tasks": int(e.failedTasks()),
                    "completed_tasks": int(e.completedTasks()),
                }
            )
    return out


def _finish(query: Any) -> None:
    query.awaitTermination()
    if query.exception() is not None:
        raise RuntimeError(str(query.exception()))


STEPS: dict[str, Callable[..., Any]] = {
    "where": where,
    "load": load,
    "apply": apply,
    "many": many,
    "executors": executors_seen,
}

send({"event": "ready"})
for line in sys.stdin:
    request = json.loads(line)
    step = STEPS[request.pop("step")]
    try:
        send({"ok": step(**request)})
    except Exception:
        send({"error": traceback.format_exc()[-6000:]})
spark.stop()
