"""Apache Flink SQL reading the bridge's topics with its `debezium-avro-confluent` format.

PyFlink (`apache-flink` from PyPI) and two SQL jars from Maven Central
(tests/consumers/flink/pom.xml: the Kafka connector and flink-sql-avro-confluent-registry)
are installed once per machine into ~/.cache/pg-kafka-bridge/ like the stack's jars.

PyFlink cannot live in the project's .venv: it pins py4j 0.10.9.7 and pyspark 4.0 pins
0.10.9.9. So it is `pip install --target`-ed into the cache (relocatable, unlike a venv)
and each job (tests/consumers/flink_job.py) runs in the base interpreter with that
directory on PYTHONPATH. Flink 2.x supports Java 11, 17 and 21: a JDK of those majors
is preferred over a newer default.
"""

from __future__ import annotations

import importlib
import json
import os
import pickle
import subprocess
import sys
from pathlib import Path
from typing import Any

from confluent_kafka import KafkaException, TopicCollection
from confluent_kafka.admin import AdminClient
from waiting import wait_for

ROOT = Path(__file__).resolve().parents[2]
_LOCAL = str(ROOT / "deploy" / "local")
if _LOCAL not in sys.path:  # the stack_* modules live beside stack.py, outside any package
    sys.path.insert(0, _LOCAL)

_install = importlib.import_module("stack_install")

PYFLINK_VERSION = "2.3.0"  # keep equal to tests/consumers/flink/pom.xml <flink.version>
POM = Path(__file__).resolve().parent / "flink" / "pom.xml"
JOB = Path(__file__).resolve().parent / "flink_job.py"
COMPONENT = "flink"
JOB_TIMEOUT_S = 600.0  # a cold JVM, the planner and a bounded Kafka read on 2 busy cores
SUPPORTED_JAVA = (21, 17, 11)


def _java_home(log: Path) -> Path:
    """A JDK Flink supports, else the stack's choice (the newest)."""
    jvm = Path("/usr/lib/jvm")
    homes = sorted(jvm.iterdir()) if jvm.is_dir() else []
    for major in SUPPORTED_JAVA:
        for home in homes:
            if _install._java_major(home.resolve()) == major:
                return home.resolve()
    return Path(_install.find_java_home(COMPONENT, log))


class FlinkSQL:
    """PyFlink and the format's jars, installed once; `run` executes one bounded job."""

    def __init__(self, workdir: Path) -> None:
        workdir.mkdir(parents=True, exist_ok=True)
        self.workdir = workdir
        self.log = workdir / "flink.log"
        self.java_home = _java_home(self.log)
        self.site = self._pyflink()
        self.jars = sorted(f"file://{p}" for p in (self._jars()).glob("*.jar"))

    def _pyflink(self) -> Path:
        def build(scratch: Path) -> Path:
            target = scratch / "out" / "site"
            argv = [
                sys.executable,
                "-m",
                "pip",
                "install",
                "--quiet",
                "--no-warn-script-location",
                "--target",
                str(target),
                f"apache-flink=={PYFLINK_VERSION}",
            ]
            _install.run_logged(COMPONENT, argv, self.log, timeout=1800.0)
            return scratch / "out"

        name = f"pyflink-{PYFLINK_VERSION}"
        return Path(_install.cached_build(COMPONENT, name, self.log, build)) / "site"

    def _jars(self) -> Path:
        def build(scratch: Path) -> Path:
            out = scratch / "out" / "jars"
            goals = ["dependency:copy", f"-DoutputDirectory={out}"]
            _install.run_maven(COMPONENT, POM, goals, scratch, self.java_home, self.log)
            return scratch / "out"

        name = f"flink-sql-jars-{PYFLINK_VERSION}"
        return Path(_install.cached_build(COMPONENT, name, self.log, build)) / "jars"

    def run(self, spec: dict[str, Any]) -> dict[str, Any]:
        """Run flink_job.py with `spec` (plus the jars); its result (flink_job.py says what)."""
        _await_described(spec["bootstrap"], spec["topic"])
        python = Path(sys.base_prefix) / "bin" / f"python{sys.version_info[0]}"
        env = {
            **os.environ,
            "JAVA_HOME": str(self.java_home),
            "PYTHONPATH": str(self.site),
            "PYTHONNOUSERSITE": "1",
        }
        env.pop("VIRTUAL_ENV", None)
        out = self.workdir / f"{spec['group']}.pickle"
        argv = [str(python), str(JOB), json.dumps({**spec, "jars": self.jars, "out": str(out)})]
        done = subprocess.run(
            argv, env=env, capture_output=True, text=True, timeout=JOB_TIMEOUT_S, check=False
        )
        with self.log.open("a") as log:
            log.write(done.stderr)
        if done.returncode != 0:
            # From the job's Python traceback on (Flink's own log lines come before it).
            start = max(done.stderr.rfind("Traceback (most recent call last)"), 0)
            raise AssertionError(
                f"the Flink job failed ({done.returncode}):\n{done.stderr[start:][:6000]}"
            )
        with out.open("rb") as result:
            return dict(pickle.load(result))  # our own job's output


def _await_described(bootstrap: str, topic: str) -> None:
    """Wait until the broker describes `topic` to an admin client with a leader for every
    partition: Flink's Kafka source lists partitions that way and fails the job outright
    ("This server does not host this topic-partition") on a topic the broker's metadata
    does not serve yet, as it can just after the topic was created."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    seen: list[object] = ["nothing yet"]

    def described() -> bool:
        try:
            found = admin.describe_topics(TopicCollection([topic]))[topic].result(timeout=10)
        except KafkaException as exc:
            seen[0] = exc
            return False
        seen[0] = found
        return bool(found.partitions) and all(p.leader is not None for p in found.partitions)

    wait_for(
        described,
        60,
        f"the broker to describe topic {topic}",
        every=0.2,
        detail=lambda: f"last answer: {seen[0]!r}",
    )
