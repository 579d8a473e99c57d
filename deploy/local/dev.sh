#!/usr/bin/env bash
# One command from a fresh Debian machine to tests or the demo:
#   ./deploy/local/dev.sh test                    lint, then the whole test suite (real local stack)
#   ./deploy/local/dev.sh test [pytest args...]   only those tests (no lint)
#   ./deploy/local/dev.sh lint                    ruff and mypy --strict alone
#   ./deploy/local/dev.sh demo [bridge demo args...]
# Both first make sure the prerequisites exist: Debian packages (PostgreSQL 15 + pglogical,
# Maven, a JDK) and a virtualenv at .venv with the project installed in editable mode. The
# Kafka and schema-registry jars are built by deploy/local/stack.py on first use and cached
# under ~/.cache/pg-kafka-bridge/.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$ROOT"

APT_PACKAGES=(postgresql-15 postgresql-15-pglogical maven gcc libc6-dev libpq-dev)  # gcc: setup.py's mypyc build; libpq-dev: bench/drain.c
VENV="$ROOT/.venv"
STAMP="$VENV/.pgkb-installed-sources.sha256"

log() { printf 'dev.sh: %s\n' "$*" >&2; }

as_root() {
    if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi
}

apt_install() {
    export DEBIAN_FRONTEND=noninteractive
    if ! as_root apt-get install -y --no-install-recommends "$@"; then
        as_root apt-get update
        as_root apt-get install -y --no-install-recommends "$@"
    fi
}

have_jdk() {
    local java
    for java in /usr/lib/jvm/*/bin/java; do
        [ -x "$java" ] && return 0
    done
    return 1
}

ensure_system_packages() {
    local missing=() pkg
    for pkg in "${APT_PACKAGES[@]}"; do
        if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed"; then
            missing+=("$pkg")
        fi
    done
    have_jdk || missing+=(default-jdk-headless)
    if [ "${#missing[@]}" -gt 0 ]; then
        log "installing ${missing[*]}"
        apt_install "${missing[@]}"
    fi
}

ensure_venv() {
    local python="${PYTHON:-python3}" want
    if ! "$python" -c 'import sys; sys.exit(sys.version_info < (3, 11))'; then
        log "$python is older than 3.11; set PYTHON to a 3.11+ interpreter"
        exit 1
    fi
    if [ ! -x "$VENV/bin/python" ]; then
        log "creating $VENV"
        "$python" -m venv "$VENV"
    fi
    # The install compiles the hot path (setup.py): redo it when any source changes,
    # or when BRIDGE_PURE_PYTHON (install without compiling) is switched.
    want="$( (echo "pure=${BRIDGE_PURE_PYTHON:-}"; find pyproject.toml setup.py bridge -name '*.py' -o -name '*.toml' | sort | xargs sha256sum) | sha256sum | cut -d' ' -f1)"
    if [ "$(cat "$STAMP" 2>/dev/null)" != "$want" ]; then
        log "installing the project into $VENV"
        if [ -n "${BRIDGE_PURE_PYTHON:-}" ]; then
            find bridge -name '*.so' -delete
        elif ! "$VENV/bin/python" -c 'import os, sys, sysconfig; sys.exit(not os.path.exists(sysconfig.get_paths()["include"] + "/Python.h"))'; then
            log "no Python.h for $python: install its headers (python3-dev) to compile the hot path, or set BRIDGE_PURE_PYTHON=1 to run it uncompiled"
            exit 1
        fi
        "$VENV/bin/python" -m pip install --quiet --upgrade pip
        "$VENV/bin/python" -m pip install --quiet -e '.[dev,spark]'
        printf '%s\n' "$want" >"$STAMP"
    fi
}

# The checks a submission must pass before its tests count: ruff's lint rules and formatting,
# then mypy --strict over what [tool.mypy] in pyproject.toml names (the package and the
# tests) and, in a run of its own, over bench/ (pyproject.toml says why two runs). Run by
# `test` without arguments (the README's command, and .ci/run's), so CI refuses what
# breaks them.
lint() {
    log "ruff check"
    "$VENV/bin/ruff" check --quiet .
    log "ruff format --check bridge"
    "$VENV/bin/ruff" format --check bridge
    log "mypy (bridge, docs/hooks, tests)"
    "$VENV/bin/python" -m mypy
    log "mypy bench"
    "$VENV/bin/python" -m mypy bench
}

usage() {
    echo "usage: $0 {test|lint|demo} [args...]" >&2
    exit 2
}

[ "$#" -ge 1 ] || usage
command="$1"
shift
case "$command" in
    test)
        ensure_system_packages
        ensure_venv
        [ "$#" -gt 0 ] || lint
        exec "$VENV/bin/python" -m pytest "$@"
        ;;
    lint)
        ensure_venv
        lint
        ;;
    demo)
        ensure_system_packages
        ensure_venv
        # The demo imports the local stack (deploy/local/stack.py) as module `stack`.
        PYTHONPATH="$ROOT/deploy/local${PYTHONPATH:+:$PYTHONPATH}" exec "$VENV/bin/bridge" demo "$@"
        ;;
    *)
        usage
        ;;
esac
