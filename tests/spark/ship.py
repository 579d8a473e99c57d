"""What a Spark application on a cluster ships to its executors, built the way a user builds
it: a packed virtualenv with the bridge installed from its wheel (what `venv-pack` makes of
`python -m venv env && env/bin/pip install pg-kafka-bridge`), for `spark.archives`.

    archive = executor_env()              # a .tar.gz, cached under ~/.cache/pg-kafka-bridge
    conf = executor_conf(archive)         # spark.archives=...#env, spark.pyspark.python

The virtualenv gets the bridge's runtime dependencies (psycopg, fastavro, confluent-kafka
with its registry client, pydantic, ...) copied from the distributions installed here, file
by file from their RECORD, rather than downloaded again (the same files pip would unpack;
no network and seconds instead of minutes), and the bridge itself installed by pip from a
wheel built from this checkout without compiling (BRIDGE_PURE_PYTHON: the compiled and the
plain build behave the same). Nothing of the checkout or of the test virtualenv is on the
executors' path: an executor imports the bridge from the archive or not at all.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import sysconfig
import tarfile
import tempfile
from importlib import metadata
from pathlib import Path

from packaging.requirements import Requirement

from bridge.spark.jars import file_lock

ROOT = Path(__file__).resolve().parents[2]
PROJECT = "pg-kafka-bridge"
CACHE = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / PROJECT / "spark-ship"
ALIAS = "env"  # the directory the archive is unpacked into in each executor's working dir
SOURCES = ("pyproject.toml", "setup.py", "README.md")


def executor_conf(archive: Path) -> dict[str, str]:
    """The session settings that ship `archive` to every executor and run their Python
    workers with its interpreter (`bridge.spark.jars.spark_session` passes the latter to
    pyspark as PYSPARK_PYTHON)."""
    return {
        "spark.archives": f"{archive}#{ALIAS}",
        "spark.pyspark.python": f"./{ALIAS}/bin/python",
    }


# What the executors take from the cluster's Spark (its python/lib on their PYTHONPATH),
# not from the archive: a second pyspark would have to match the workers' jars exactly.
FROM_SPARK = frozenset({"pyspark", "py4j"})


def runtime_distributions(name: str = PROJECT) -> list[metadata.Distribution]:
    """The installed distributions `name` needs at run time with its `spark` extra
    (delta-spark: bridge.spark imports it) but without pyspark and py4j (FROM_SPARK), and
    theirs, with the extras each requirement asks for."""
    found: dict[str, metadata.Distribution] = {}
    todo: list[tuple[str, frozenset[str]]] = [(name, frozenset({"spark"}))]
    seen: set[tuple[str, frozenset[str]]] = set()
    while todo:
        item = todo.pop()
        if item in seen:
            continue
        seen.add(item)
        dist_name, extras = item
        if dist_name.lower().replace("_", "-") in FROM_SPARK:
            continue
        dist = metadata.distribution(dist_name)
        key = dist.metadata["Name"].lower().replace("_", "-")
        if dist_name != name:
            found[key] = dist
        for text in dist.requires or []:
            req = Requirement(text)
            wanted = req.marker is None or any(
                req.marker.evaluate({"extra": e}) for e in (extras or {""})
            )
            if wanted:
                todo.append((req.name, frozenset(req.extras)))
    return sorted(found.values(), key=lambda d: d.metadata["Name"].lower())


def _digest(dists: list[metadata.Distribution]) -> str:
    text = "\n".join(
        [sys.version, *(f"{d.metadata['Name']}=={d.version}" for d in dists), _source_digest()]
    )
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _source_files() -> list[Path]:
    files = [ROOT / s for s in SOURCES]
    files += sorted((ROOT / "bridge").rglob("*.py"))
    files += sorted((ROOT / "schemas").glob("*.avsc"))
    return files


def _source_digest() -> str:
    h = hashlib.sha256()
    for path in _source_files():
        h.update(str(path.relative_to(ROOT)).encode())
        h.update(path.read_bytes())
    return h.hexdigest()


def executor_env() -> Path:
    """The packed virtualenv for the executors (module docstring), built once per set of
    dependency versions and bridge sources."""
    dists = runtime_distributions()
    archive = CACHE / f"executor-env-{_digest(dists)}.tar.gz"
    if archive.is_file():
        return archive
    with file_lock(CACHE / ".lock"):
        if archive.is_file():
            return archive
        for old in CACHE.glob("executor-env-*.tar.gz"):
            old.unlink()  # an older build of the sources: not needed again
        with tempfile.TemporaryDirectory(prefix="executor-env-", dir=CACHE) as scratch:
            work = Path(scratch)
            env = work / ALIAS
            subprocess.run(
                [_base_python(), "-m", "venv", str(env)],
                check=True,
                capture_output=True,
            )
            _copy_distributions(dists, _site_packages(env))
            _install_bridge(env, work)
            partial = work / "env.tar.gz"
            with tarfile.open(partial, "w:gz", compresslevel=1) as tar:
                for entry in sorted(env.iterdir()):
                    tar.add(entry, arcname=entry.name)
            partial.rename(archive)
    return archive


def _base_python() -> str:
    """The interpreter this virtualenv was made from: a new virtualenv is made from it, not
    from this one (whose site-packages it must not see)."""
    return str(getattr(sys, "_base_executable", sys.executable))


def _site_packages(env: Path) -> Path:
    relative = Path(sysconfig.get_path("purelib")).relative_to(sys.prefix)
    return env / relative


def _copy_distributions(dists: list[metadata.Distribution], target: Path) -> None:
    """Each distribution's installed files (its RECORD) below site-packages, as installed."""
    for dist in dists:
        base = Path(str(dist.locate_file("")))
        for item in dist.files or []:
            source = Path(str(dist.locate_file(item))).resolve()
            try:
                relative = source.relative_to(base.resolve())
            except ValueError:
                continue  # a console script in bin/: the executors run none
            if "__pycache__" in relative.parts or not source.is_file():
                continue
            dest = target / relative
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, dest)


def _build_tools() -> Path:
    """A cached virtualenv with the setuptools pyproject.toml's build needs, so the wheel
    builds without fetching a build environment each time."""
    tools = CACHE / "build-tools"
    python = tools / "bin" / "python"
    if not (tools / ".complete").is_file():
        shutil.rmtree(tools, ignore_errors=True)
        subprocess.run([_base_python(), "-m", "venv", str(tools)], check=True)
        subprocess.run(
            [str(python), "-m", "pip", "install", "-q", "setuptools>=77", "wheel"], check=True
        )
        (tools / ".complete").write_text("ok\n")
    return python


def _install_bridge(env: Path, work: Path) -> None:
    """The bridge's wheel (plain Python) built from a copy of the sources, installed by pip."""
    source = work / "source"
    for path in _source_files():
        dest = source / path.relative_to(ROOT)
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(path, dest)
    wheels = work / "wheels"
    pure = {**os.environ, "BRIDGE_PURE_PYTHON": "1"}
    subprocess.run(
        [
            str(_build_tools()),
            "-m",
            "pip",
            "wheel",
            "-q",
            "--no-deps",
            "--no-build-isolation",
            "-w",
            str(wheels),
            str(source),
        ],
        check=True,
        env=pure,
        capture_output=True,
    )
    (wheel,) = wheels.glob("*.whl")
    subprocess.run(
        [
            str(env / "bin" / "python"),
            "-m",
            "pip",
            "install",
            "-q",
            "--no-deps",
            "--no-index",
            "--disable-pip-version-check",
            str(wheel),
        ],
        check=True,
        capture_output=True,
    )
