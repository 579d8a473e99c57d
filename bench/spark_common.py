"""What the Spark benches share: CPU of whole process trees from /proc, Spark's own counters
(generated classes, their compile time, HotSpot's JIT time, tasks run), and the path set-up.

CPU is read from /proc, not taken from the clock: a process tree's CPU is the sum, over its
live processes, of their user + system time and that of their reaped children (so a
Python worker that exited is counted once, through its parent). The Spark side's cost is
the driver's JVM and everything below it (Python workers), the Python driver itself, and
on a cluster the workers' process trees (their executors and Python workers).
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

_TICK = os.sysconf("SC_CLK_TCK")


def _stat(pid: int) -> tuple[int, float, float] | None:
    """(parent pid, own CPU s, CPU s of reaped children) of a live process."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    own = (int(fields[11]) + int(fields[12])) / _TICK
    reaped = (int(fields[13]) + int(fields[14])) / _TICK
    return int(fields[1]), own, reaped


def tree_cpu(roots: Iterable[int]) -> float:
    """CPU seconds of the processes `roots` and all their descendants, reaped ones too."""
    procs: dict[int, tuple[int, float, float]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            found = _stat(int(entry.name))
            if found is not None:
                procs[int(entry.name)] = found
    children: dict[int, list[int]] = {}
    for pid, (ppid, _, _) in procs.items():
        children.setdefault(ppid, []).append(pid)
    total, todo, seen = 0.0, [r for r in roots if r in procs], set()
    while todo:
        pid = todo.pop()
        if pid in seen:
            continue
        seen.add(pid)
        _, own, reaped = procs[pid]
        total += own + reaped
        todo += children.get(pid, [])
    return total


def thread_cpu(pid: int) -> dict[str, float]:
    """CPU seconds of the live threads of process `pid` by kind, from /proc/<pid>/task:
    "jit" (HotSpot's C1/C2 compiler threads), "tasks" (Spark's executor task threads; in
    local mode in the driver's JVM), "other". Threads that ended (an idle compiler thread
    HotSpot stopped, a task thread the pool retired) are not counted: lower bounds."""
    out = {"jit": 0.0, "tasks": 0.0, "other": 0.0}
    try:
        tasks = list(Path(f"/proc/{pid}/task").iterdir())
    except OSError:
        return out
    for task in tasks:
        try:
            raw = (task / "stat").read_text()
        except OSError:
            continue
        name = raw[raw.index("(") + 1 : raw.rindex(")")]
        fields = raw.rsplit(")", 1)[1].split()
        cpu = (int(fields[11]) + int(fields[12])) / _TICK
        kind = (
            "jit"
            if "CompilerThre" in name
            else "tasks"
            if name.startswith("Executor task")
            else "other"
        )
        out[kind] += cpu
    return out


def self_cpu() -> float:
    """This process's CPU seconds, all threads, without its children (the local stack's
    servers are children of a bench that starts them)."""
    found = _stat(os.getpid())
    assert found is not None
    return found[1]


def jvm_pid(spark: Any) -> int:
    return int(spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid())


def jvm_cpu_seconds(spark: Any) -> float:
    """CPU seconds of the session's JVM alone (not its Python workers)."""
    found = _stat(jvm_pid(spark))
    assert found is not None
    return found[1]


@dataclass
class Counters:
    """Spark's cumulative counters at one moment; `since` gives a job's share."""

    driver: float  # CPU s: the Python driver
    jvm: float  # CPU s: the driver JVM and its descendants (local mode: executors, workers)
    workers: float  # CPU s: the cluster's worker trees (0 in local mode)
    wall: float
    classes: int  # classes Spark generated and compiled (Janino)
    compile_ms: float  # their compile time
    jit_ms: float  # HotSpot's JIT compile time in the driver JVM
    tasks: int  # tasks completed
    jit_cpu: float = 0.0  # CPU s of the driver JVM's live JIT compiler threads (`thread_cpu`)
    task_cpu: float = 0.0  # CPU s of its live executor task threads (local mode)
    extra: dict[str, float] = field(default_factory=dict)

    def since(self, before: Counters) -> Counters:
        return Counters(
            self.driver - before.driver,
            self.jvm - before.jvm,
            self.workers - before.workers,
            self.wall - before.wall,
            self.classes - before.classes,
            self.compile_ms - before.compile_ms,
            self.jit_ms - before.jit_ms,
            self.tasks - before.tasks,
            self.jit_cpu - before.jit_cpu,
            self.task_cpu - before.task_cpu,
        )

    @property
    def cpu(self) -> float:
        return self.driver + self.jvm + self.workers


class Meter:
    """Reads `Counters` of one session (and, on a cluster, of its worker process trees)."""

    def __init__(self, spark: Any, worker_pids: Iterable[int] = ()) -> None:
        self.spark = spark
        self.jvm = spark.sparkContext._jvm
        self.pid = jvm_pid(spark)
        self.worker_pids = list(worker_pids)
        self._tasks = _TaskCounter(spark)

    def read(self, *, tasks: bool = True) -> Counters:
        metrics = self.jvm.org.apache.spark.metrics.source.CodegenMetrics
        compiled = metrics.METRIC_COMPILATION_TIME()
        compile_ms = float(sum(compiled.getSnapshot().getValues()))
        jit = self.jvm.java.lang.management.ManagementFactory.getCompilationMXBean()
        threads = thread_cpu(self.pid)
        return Counters(
            self_cpu(),
            tree_cpu([self.pid]),
            tree_cpu(self.worker_pids) if self.worker_pids else 0.0,
            time.monotonic(),
            int(compiled.getCount()),
            compile_ms,
            float(jit.getTotalCompilationTime()),
            self._tasks.count() if tasks else 0,
            threads["jit"],
            threads["tasks"],
        )

    @contextmanager
    def measure(self) -> Iterator[list[Counters]]:
        """`with meter.measure() as got:` ... afterwards got[0] holds the block's share. The
        tasks are counted outside the CPU readings (it takes one call per job)."""
        out: list[Counters] = []
        tasks = self._tasks.count()
        before = self.read(tasks=False)
        yield out
        after = self.read(tasks=False)
        after.tasks = self._tasks.count()
        before.tasks = tasks
        out.append(after.since(before))


class _TaskCounter:
    """Tasks completed so far in the session, from its status store (every job, the
    streaming query's included)."""

    def __init__(self, spark: Any) -> None:
        self.tracker = spark.sparkContext._jsc.sc().statusStore()

    def count(self) -> int:
        jobs = self.tracker.jobsList(None)
        total = 0
        for i in range(jobs.size()):
            total += int(jobs.apply(i).numCompletedTasks())
        return total


def session_conf() -> dict[str, str]:
    """Settings every Spark bench adds: keep every job in the status store (tasks are
    counted from it)."""
    return {"spark.ui.retainedJobs": "1000000", "spark.ui.retainedStages": "1000000"}
