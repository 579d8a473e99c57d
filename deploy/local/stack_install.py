"""Getting the stack's software onto a fresh machine: Debian packages, a JDK, Maven-built jars.

Maven output is copied into a per-user cache keyed by component and version, and a marker file
is written only after a complete copy, so an interrupted build is redone and every later start
skips Maven entirely. A file lock serialises builds between concurrent stacks (tests + demo).
"""

from __future__ import annotations

import fcntl
import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from stack_proc import StackError, run_logged

HERE = Path(__file__).resolve().parent
MAVEN_SETTINGS = HERE / "maven-settings.xml"
CACHE_ROOT = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "pg-kafka-bridge"
COMPLETE_MARKER = ".complete"
MIN_JAVA = 17  # Kafka 4 brokers need 17+


def dpkg_installed(package: str) -> bool:
    result = subprocess.run(
        ["dpkg-query", "-W", "-f=${Status}", package],
        capture_output=True,
        text=True,
        check=False,
    )
    return result.returncode == 0 and "install ok installed" in result.stdout


def ensure_apt_packages(component: str, packages: list[str], log_path: Path) -> None:
    """Install missing Debian packages; refresh the package lists only if the first try fails."""
    missing = [p for p in packages if not dpkg_installed(p)]
    if not missing:
        return
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    install = ["apt-get", "install", "-y", "--no-install-recommends", *missing]
    try:
        run_logged(component, install, log_path, env=env)
    except StackError:
        run_logged(component, ["apt-get", "update"], log_path, env=env)
        run_logged(component, install, log_path, env=env)


def _java_major(home: Path) -> int | None:
    release = home / "release"
    if not (home / "bin" / "java").is_file() or not release.is_file():
        return None
    match = re.search(r'JAVA_VERSION="(\d+)(?:\.(\d+))?', release.read_text(errors="replace"))
    if match is None:
        return None
    major = int(match.group(1))
    return int(match.group(2) or 0) if major == 1 else major


def find_java_home(component: str, log_path: Path) -> Path:
    """The newest JDK under /usr/lib/jvm (installing Debian's default JDK when none fits)."""
    for attempt in range(2):
        candidates: list[tuple[int, str, Path]] = []
        jvm_root = Path("/usr/lib/jvm")
        if jvm_root.is_dir():
            for home in jvm_root.iterdir():
                major = _java_major(home.resolve())
                if major is not None and major >= MIN_JAVA:
                    candidates.append((major, home.name, home.resolve()))
        if candidates:
            return max(candidates)[2]
        if attempt == 0:
            ensure_apt_packages(component, ["default-jdk-headless"], log_path)
    raise StackError(component, f"no JDK >= {MIN_JAVA} found under /usr/lib/jvm", log_path)


@contextmanager
def cache_lock() -> Iterator[None]:
    """The one lock of the cache: stacks started at once (parallel test sessions) build
    each component once."""
    CACHE_ROOT.mkdir(parents=True, exist_ok=True)
    with (CACHE_ROOT / ".lock").open("w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def cached_build(
    component: str,
    name: str,
    log_path: Path,
    build: Callable[[Path], Path],
) -> Path:
    """Return the cache dir `name`, running `build(scratch_dir) -> output_dir` only when absent.

    `build` produces its output anywhere under the scratch dir; it is copied into the cache and
    marked complete afterwards.
    """
    target = CACHE_ROOT / name
    if (target / COMPLETE_MARKER).is_file():
        return target
    with cache_lock():
        if (target / COMPLETE_MARKER).is_file():
            return target
        shutil.rmtree(target, ignore_errors=True)
        with tempfile.TemporaryDirectory(prefix=f"pgkb-build-{name}-") as scratch:
            output = build(Path(scratch))
            partial = CACHE_ROOT / f".{name}.partial"
            shutil.rmtree(partial, ignore_errors=True)
            shutil.copytree(output, partial)
            partial.rename(target)
        (target / COMPLETE_MARKER).write_text("ok\n")
    return target


def run_maven(
    component: str,
    pom: Path,
    goals: list[str],
    scratch: Path,
    java_home: Path,
    log_path: Path,
) -> Path:
    """Run Maven on a scratch copy of `pom` (keeping the repo clean); returns the project dir."""
    ensure_apt_packages(component, ["maven"], log_path)
    project = scratch / "project"
    project.mkdir()
    shutil.copy(pom, project / "pom.xml")
    maven_opts = f"{os.environ.get('MAVEN_OPTS', '')} -Xmx1g".strip()
    env = {**os.environ, "JAVA_HOME": str(java_home), "MAVEN_OPTS": maven_opts}
    argv = ["mvn", "-B", "-ntp", "-q", "-s", str(MAVEN_SETTINGS), *goals]
    run_logged(component, argv, log_path, env=env, cwd=project, timeout=1800.0)
    return project


def maven_libs(component: str, pom: Path, name: str, java_home: Path, log_path: Path) -> Path:
    """Directory of the runtime jars `pom` depends on, resolved from Maven Central once per
    machine into the cache dir `name` (Kafka Connect workers and their plugins)."""

    def build(scratch: Path) -> Path:
        out = scratch / "out" / "libs"
        goals = [
            "dependency:copy-dependencies",
            "-DincludeScope=runtime",
            f"-DoutputDirectory={out}",
        ]
        run_maven(component, pom, goals, scratch, java_home, log_path)
        return scratch / "out"

    return cached_build(component, name, log_path, build) / "libs"
