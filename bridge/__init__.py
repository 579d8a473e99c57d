"""PostgreSQL logical replication → Kafka (Avro) change-data-capture bridge."""

from pathlib import Path

__version__ = "0.1.0"


def stale_compiled_modules(package: Path) -> list[Path]:
    """Compiled sources edited after the last build (see setup.py).

    Python imports an extension module before the `.py` beside it, so in a source
    checkout an edit would silently not run until the next build. A build rewrites
    at least the shared library (`*__mypyc*.so` beside the package) whenever a source
    changed, while per-module stubs may keep older times: the newest `.so` dates it.
    """
    stubs = list(package.rglob("*.so"))
    if not stubs:
        return []
    built = max(p.stat().st_mtime for p in (*stubs, *package.parent.glob("*__mypyc*.so")))
    sources = (stub.with_name(stub.name.split(".", 1)[0] + ".py") for stub in stubs)
    return sorted(s for s in sources if s.exists() and s.stat().st_mtime > built)


def _refuse_stale_build() -> None:
    package = Path(__file__).parent
    if not (package.parent / "setup.py").exists():
        return  # an installed wheel: sources and extensions come from one build
    stale = stale_compiled_modules(package)
    if stale:
        names = ", ".join(str(p.relative_to(package.parent)) for p in stale)
        raise ImportError(
            f"{names} changed after it was compiled, so the old compiled code would run; "
            "rebuild with `pip install -e .` (./deploy/local/dev.sh does it when sources "
            "change) or install with BRIDGE_PURE_PYTHON=1 to skip compiling"
        )


_refuse_stale_build()
