"""The JVM half of the Spark side: Kafka source, spark-avro, Delta and Iceberg jars, plus a tuned
session.

Maven (deploy/local/spark/pom.xml) copies the artifacts and their dependencies into a
per-user cache, leaving out every artifact pyspark already ships: two versions of one library
on a classpath fail at run time, not at start. The cache directory is named after the pinned
versions and a digest of the POM, so a jar added to the POM is fetched on the next start
rather than missed in an old cache. A marker written after a complete copy makes
every later start skip Maven; a file lock serialises concurrent first runs. Spark's own
`spark.jars.packages` is not used: its Ivy chain also consults a repository besides Maven
Central, and it resolves again at every session start.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from importlib import metadata
from pathlib import Path

import pyspark
from pyspark.sql import SparkSession

from bridge.errors import ConfigError

# delta-spark 4.0.0 is built on Spark 4.0.0; these must match the installed Python packages.
SPARK_VERSION = "4.0.0"
DELTA_VERSION = "4.0.0"
SCALA_BINARY_VERSION = "2.13"
SPARK_BINARY_VERSION = "4.0"
# The newest Iceberg whose Spark 4.0 runtime (iceberg-spark-runtime-4.0_2.13) resolves from
# Maven Central (1.12.0's did not); the runtime jar shades its dependencies: one jar more.
ICEBERG_VERSION = "1.11.0"
ICEBERG_EXTENSIONS = "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions"

_REPO = Path(__file__).resolve().parents[2]
POM = _REPO / "deploy" / "local" / "spark" / "pom.xml"
MAVEN_SETTINGS = _REPO / "deploy" / "local" / "maven-settings.xml"
COMPLETE_MARKER = ".complete"
SPARK_JAVA = (17, 21)  # Spark 4.0's JDKs; newer ones break Hadoop's login code at start
JVM_DIR = Path("/usr/lib/jvm")
_ARTIFACT = re.compile(r"^(?P<name>.+?)-\d[^-]*(?:-.*)?\.jar$")
_INSTALL_HINT = f"pip install 'pyspark=={SPARK_VERSION}' 'delta-spark=={DELTA_VERSION}'"


def cache_root() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "pg-kafka-bridge"


def check_versions() -> None:
    """Refuse mismatched Python and JVM halves before Spark starts and fails obscurely."""
    for package, wanted in (("pyspark", SPARK_VERSION), ("delta-spark", DELTA_VERSION)):
        try:
            found = metadata.version(package)
        except metadata.PackageNotFoundError:
            found = "not installed"
        if found != wanted:
            raise ConfigError(
                f"the Spark side needs {package} {wanted}, found {found}", hint=_INSTALL_HINT
            )


def pyspark_artifacts() -> set[str]:
    """Artifact ids of the jars inside the installed pyspark (from `name-version.jar`)."""
    jars = Path(pyspark.__file__).resolve().parent / "jars"
    names = set()
    for jar in jars.glob("*.jar"):
        match = _ARTIFACT.match(jar.name)
        if match:
            names.add(match.group("name"))
    return names


def _java_major(home: Path) -> int | None:
    try:
        release = (home / "release").read_text(errors="replace")
    except OSError:
        return None
    match = re.search(r'JAVA_VERSION="(\d+)', release)
    return int(match.group(1)) if match and (home / "bin" / "java").is_file() else None


def java_home() -> Path:
    """A JDK Spark runs on: JAVA_HOME, else the `java` on PATH, else one under /usr/lib/jvm."""
    candidates = [Path(p) for p in [os.environ.get("JAVA_HOME")] if p]
    on_path = shutil.which("java")
    if on_path:
        candidates.append(Path(on_path).resolve().parent.parent)
    candidates += sorted(JVM_DIR.glob("*")) if JVM_DIR.is_dir() else []
    for home in candidates:
        if _java_major(home) in SPARK_JAVA:
            return home
    raise ConfigError(
        f"Spark {SPARK_VERSION} needs Java {' or '.join(map(str, SPARK_JAVA))}; none was found",
        hint="apt-get install openjdk-17-jdk-headless, or set JAVA_HOME to such a JDK",
    )


@contextmanager
def file_lock(path: Path) -> Iterator[None]:
    """Hold an exclusive lock on the file `path` (created with its directory): processes
    that fill one cache at once (parallel test sessions, two drivers) build it once."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _maven(scratch: Path, output: Path) -> None:
    if shutil.which("mvn") is None:
        raise ConfigError(
            "Maven (mvn) is needed once to fetch the Spark Kafka, Avro and Delta jars",
            hint="apt-get install maven, then retry",
        )
    if not POM.is_file() or not MAVEN_SETTINGS.is_file():
        raise ConfigError(
            f"{POM} or {MAVEN_SETTINGS} is missing: the Spark jars are resolved from the "
            "project's source tree",
            hint="run from a checkout of the project",
        )
    shutil.copy(POM, scratch / "pom.xml")  # Maven writes next to the POM: keep the repo clean
    argv = [
        "mvn",
        "-B",
        "-ntp",
        "-q",
        "-s",
        str(MAVEN_SETTINGS),
        f"-Dspark.version={SPARK_VERSION}",
        f"-Ddelta.version={DELTA_VERSION}",
        f"-Diceberg.version={ICEBERG_VERSION}",
        f"-Dspark.binary.version={SPARK_BINARY_VERSION}",
        f"-Dscala.binary.version={SCALA_BINARY_VERSION}",
        "dependency:copy-dependencies",
        "-DincludeScope=runtime",
        f"-DoutputDirectory={output}",
        f"-DexcludeArtifactIds={','.join(sorted(pyspark_artifacts()))}",
    ]
    result = subprocess.run(
        argv, cwd=scratch, capture_output=True, text=True, timeout=1800, check=False
    )
    if result.returncode != 0:
        tail = "\n".join((result.stdout + result.stderr).strip().splitlines()[-15:])
        raise ConfigError(
            f"Maven could not fetch the Spark jars:\n{tail}",
            hint="check access to Maven Central; the command was: " + " ".join(argv),
        )


def spark_jars(root: Path | None = None) -> list[Path]:
    """The extra jars for the pinned Spark, Delta and Iceberg versions, fetched on first use."""
    check_versions()
    root = root or cache_root()
    target = root / jars_dir_name()
    if not (target / COMPLETE_MARKER).is_file():
        with file_lock(root / ".spark-jars.lock"):
            if not (target / COMPLETE_MARKER).is_file():
                shutil.rmtree(target, ignore_errors=True)
                with tempfile.TemporaryDirectory(prefix="pgkb-spark-jars-", dir=root) as scratch:
                    output = Path(scratch) / "jars"
                    _maven(Path(scratch), output)
                    output.rename(target)
                (target / COMPLETE_MARKER).write_text("ok\n")
    return sorted(target.glob("*.jar"))


def jars_dir_name() -> str:
    """The cache directory of this jar set: the versions, and the POM's digest (a changed
    dependency list is a different set)."""
    pom = hashlib.sha256(POM.read_bytes()).hexdigest()[:12] if POM.is_file() else "no-pom"
    return f"spark-jars-{SPARK_VERSION}-delta-{DELTA_VERSION}-iceberg-{ICEBERG_VERSION}-{pom}"


def iceberg_catalog(name: str, warehouse: str) -> dict[str, str]:
    """Session settings for an Iceberg catalog `name` over the directory `warehouse` (a
    Hadoop catalog: no metastore; a local path, hdfs:// or any file system Hadoop reaches).
    Pass them as `spark_session(extra_conf=...)`; its tables are `name.namespace.table`. A
    REST, Hive or Glue catalog takes Iceberg's own settings instead."""
    prefix = f"spark.sql.catalog.{name}"
    return {
        prefix: "org.apache.iceberg.spark.SparkCatalog",
        f"{prefix}.type": "hadoop",
        f"{prefix}.warehouse": warehouse,
    }


def spark_session(
    app_name: str,
    master: str = "local[2]",
    extra_conf: Mapping[str, str] | None = None,
) -> SparkSession:
    """A session with the Kafka, Avro, Delta and Iceberg jars, sized for a small (2-core)
    machine. An Iceberg catalog is configured through `extra_conf` (`iceberg_catalog`).

    On a cluster (`master` spark://..., yarn, k8s://...) the jars go to the executors as
    `spark.jars` does (the driver serves them), and everything Python the executors run
    (the initial load's and verify's tasks) needs the bridge there: ship a packed
    virtualenv with `spark.archives` = `env.tar.gz#env` and `spark.pyspark.python` =
    `./env/bin/python` in `extra_conf` (docs/spark/cluster.md). A local session binds to
    loopback; a cluster's driver binds where Spark's defaults put it (or
    `spark.driver.host` in `extra_conf`), so that executors elsewhere reach it."""
    local = master.startswith("local")
    conf = {
        "spark.jars": ",".join(str(p) for p in spark_jars()),
        "spark.sql.extensions": f"io.delta.sql.DeltaSparkSessionExtension,{ICEBERG_EXTENSIONS}",
        "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
        "spark.driver.memory": "2g",
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.shuffle.partitions": "2",
        "spark.default.parallelism": "2",
        "spark.sql.session.timeZone": "UTC",
        "spark.databricks.delta.snapshotPartitions": "2",
        "spark.log.level": "WARN",
        # Spark keeps 100 compiled classes by default; one apply of one table's batch
        # (decode, fold, MERGE, the format's own jobs) needs about 90, so each batch would
        # compile them again. They are the same for every table of one layout.
        "spark.sql.codegen.cache.maxEntries": "1000",
    }
    if local:
        conf |= {"spark.driver.host": "127.0.0.1", "spark.driver.bindAddress": "127.0.0.1"}
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")  # a local session stays on loopback
    conf.update(extra_conf or {})
    # The interpreter of the Python workers (Python functions over RDDs, e.g. the initial
    # load's tasks): a session started from Python takes it from PYSPARK_PYTHON, not from
    # spark.pyspark.python, so a setting of the latter is passed on. By default it is this
    # interpreter, which has the bridge and its dependencies (in local mode, and on a
    # cluster whose nodes have the same environment at the same path).
    if "spark.pyspark.python" in conf:
        os.environ["PYSPARK_PYTHON"] = conf["spark.pyspark.python"]
    else:
        conf["spark.pyspark.python"] = os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ["JAVA_HOME"] = str(java_home())  # read by pyspark when it launches the JVM
    builder = SparkSession.builder.master(master).appName(app_name)
    for key, value in conf.items():
        builder = builder.config(key, value)
    return builder.getOrCreate()
