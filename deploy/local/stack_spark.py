"""A Spark standalone cluster from the installed pyspark: one master and N workers.

Each worker is its own JVM (`spark-class org.apache.spark.deploy.worker.Worker`), and the
executors it launches for an application are JVMs of their own with their own Python
workers: nothing runs in the driver's process, as on a real cluster. Started as the stack
starts Kafka: free ports on loopback, a throwaway directory, bounded waits (the master's
status page lists its workers), and every process in its own group, so stop() (or the
watchdog, when the Python process dies) leaves nothing behind.

Workers run with an environment of their own: a minimal PATH, no PYTHONPATH, no virtualenv,
and their own directory as the working directory. An executor can import only what the
application ships to it (`spark.archives` with a packed virtualenv, `spark.submit.pyFiles`,
`spark.jars`): a driver that forgot to ship the bridge gets ModuleNotFoundError from its
tasks instead of silently using the driver's checkout.

    cluster = SparkCluster(workdir, log_dir, workers=2)
    cluster.install(); cluster.start()
    cluster.master_url                  # spark://127.0.0.1:PORT
    cluster.kill_worker(0)              # SIGKILL: its JVM, executors and Python workers
    cluster.start_worker(0)             # a fresh worker in its place
    cluster.stop()
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import urllib.request
from pathlib import Path

from stack_install import _java_major
from stack_proc import ManagedProcess, StackError, free_port, port_open, wait_until

COMPONENT = "spark"
START_TIMEOUT = 120.0
SPARK_JAVA = (17, 21)  # Spark 4.0's JDKs
DAEMON_MEMORY = "256m"  # the master's and each worker's own JVM; executors get their own
LOG4J2 = """\
rootLogger.level = warn
rootLogger.appenderRef.stdout.ref = console
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{HH:mm:ss.SSS} %p %c{1}: %m%n
logger.master.name = org.apache.spark.deploy.master.Master
logger.master.level = info
logger.worker.name = org.apache.spark.deploy.worker.Worker
logger.worker.level = info
"""


def spark_home() -> Path:
    """The installed pyspark: it carries bin/spark-class and every jar Spark needs."""
    try:
        import pyspark  # noqa: PLC0415 (only the cluster needs it)
    except ImportError as exc:
        raise StackError(
            COMPONENT, f"pyspark is not installed ({exc}): pip install pyspark"
        ) from exc
    home = Path(pyspark.__file__).resolve().parent
    if not (home / "bin" / "spark-class").is_file():
        raise StackError(COMPONENT, f"{home} has no bin/spark-class")
    return home


def spark_java_home() -> Path:
    """A JDK Spark 4.0 runs on (17 or 21): JAVA_HOME, else one under /usr/lib/jvm."""
    candidates = [Path(p) for p in [os.environ.get("JAVA_HOME")] if p]
    root = Path("/usr/lib/jvm")
    candidates += sorted(root.iterdir()) if root.is_dir() else []
    for home in candidates:
        if _java_major(home.resolve()) in SPARK_JAVA:
            return home.resolve()
    raise StackError(COMPONENT, "Spark 4.0 needs Java 17 or 21; none under /usr/lib/jvm")


class SparkCluster:
    """A master and `workers` workers of `cores` cores and `memory` each, on `host`."""

    def __init__(
        self,
        workdir: Path,
        log_dir: Path,
        *,
        workers: int = 2,
        cores: int = 1,
        memory: str = "1g",
        host: str = "127.0.0.1",
    ) -> None:
        self.root = workdir / "spark"
        self.log_dir = log_dir
        self.host = host
        self.cores = cores
        self.memory = memory
        self.port = free_port(host)
        self.webui_port = free_port(host)
        self._count = workers
        self._master: ManagedProcess | None = None
        self._workers: list[ManagedProcess | None] = [None] * workers
        self._started = 0  # workers started so far: each gets a directory of its own
        self._home = Path()
        self._java = Path()

    @property
    def master_url(self) -> str:
        return f"spark://{self.host}:{self.port}"

    @property
    def spark_home(self) -> Path:
        """The Spark the cluster runs: the installed pyspark's directory."""
        return self._home

    def install(self) -> None:
        self._home = spark_home()
        self._java = spark_java_home()

    def _env(self, cwd: Path) -> dict[str, str]:
        """A worker's (and the master's) environment: nothing of the caller's Python."""
        conf = self.root / "conf"
        return {
            "PATH": "/usr/local/bin:/usr/bin:/bin",
            "HOME": str(cwd),
            "LANG": "C.UTF-8",
            "JAVA_HOME": str(self._java),
            "SPARK_HOME": str(self._home),
            "SPARK_CONF_DIR": str(conf),
            "SPARK_LOCAL_IP": self.host,
            "SPARK_LOCAL_DIRS": str(cwd / "tmp"),
            "SPARK_DAEMON_MEMORY": DAEMON_MEMORY,
            "SPARK_NO_DAEMONIZE": "1",
        }

    def _spark_class(self, main: str, *args: str) -> list[str]:
        return [str(self._home / "bin" / "spark-class"), main, *args]

    def start(self) -> SparkCluster:
        """The master, then every worker; returns once all are registered."""
        conf = self.root / "conf"
        conf.mkdir(parents=True, exist_ok=True)
        (conf / "log4j2.properties").write_text(LOG4J2)
        home = self.root / "master"
        (home / "tmp").mkdir(parents=True, exist_ok=True)
        self._master = ManagedProcess(
            COMPONENT,
            self._spark_class(
                "org.apache.spark.deploy.master.Master",
                "--host",
                self.host,
                "--port",
                str(self.port),
                "--webui-port",
                str(self.webui_port),
            ),
            self.log_dir / "spark-master.log",
            env=self._env(home),
            cwd=home,
        )
        self._master.start()
        wait_until(
            self._master,
            lambda: self._status() is not None,
            timeout=START_TIMEOUT,
            what="serving its status page",
        )
        for index in range(self._count):
            self._launch(index)
        self.wait_workers(self._count)
        return self

    def _launch(self, index: int) -> None:
        self._started += 1
        home = self.root / f"worker-{self._started}"
        (home / "tmp").mkdir(parents=True)
        process = ManagedProcess(
            COMPONENT,
            self._spark_class(
                "org.apache.spark.deploy.worker.Worker",
                "--host",
                self.host,
                "--port",
                str(free_port(self.host)),
                "--webui-port",
                str(free_port(self.host)),
                "--cores",
                str(self.cores),
                "--memory",
                self.memory,
                "--work-dir",
                str(home / "work"),
                self.master_url,
            ),
            self.log_dir / f"spark-worker-{index}.log",
            env=self._env(home),
            cwd=home,
            stop_signal=signal.SIGTERM,
        )
        process.start()
        self._workers[index] = process

    def _status(self) -> dict[str, object] | None:
        """The master's status page as JSON, None while it does not answer."""
        if not port_open(self.webui_port, self.host):
            return None
        url = f"http://{self.host}:{self.webui_port}/json/"
        with urllib.request.urlopen(url, timeout=5) as response:
            found = json.loads(response.read())
        return found if isinstance(found, dict) else None

    def alive_workers(self) -> int:
        status = self._status() or {}
        workers = status.get("workers", [])
        assert isinstance(workers, list)
        return sum(1 for w in workers if isinstance(w, dict) and w.get("state") == "ALIVE")

    def wait_workers(self, count: int, timeout: float = START_TIMEOUT) -> None:
        """Until `count` workers are registered with the master and alive."""
        assert self._master is not None
        for process in self._workers:
            if process is not None and not process.alive():
                raise StackError(COMPONENT, "a worker exited", process.log_path)
        wait_until(
            self._master,
            lambda: self.alive_workers() >= count,
            timeout=timeout,
            what=f"{count} workers registered",
        )

    def worker_pids(self) -> list[int]:
        """The workers' JVMs: each the root of its executors and their Python workers."""
        return [p.pid for p in self._workers if p is not None and p.pid is not None]

    def kill_worker(self, index: int) -> None:
        """SIGKILL worker `index` with its executors and their Python workers (one process
        group): a machine of the cluster lost."""
        process = self._workers[index]
        if process is not None:
            process.stop(graceful=False)
        self._workers[index] = None

    def start_worker(self, index: int) -> None:
        """A fresh worker in slot `index` (new ports and directory), once registered."""
        if self._workers[index] is not None:
            return
        self._launch(index)
        self.wait_workers(sum(1 for p in self._workers if p is not None))

    def running(self) -> bool:
        return self._master is not None and self._master.alive()

    def stop(self, *, graceful: bool = True) -> None:
        for index, process in enumerate(self._workers):
            if process is not None:
                process.stop(graceful=graceful, timeout=30.0)
            self._workers[index] = None
        if self._master is not None:
            self._master.stop(graceful=graceful, timeout=30.0)
        shutil.rmtree(self.root, ignore_errors=True)
