"""START_REPLICATION options for pgoutput, validated per protocol version.

Checked here rather than left to the server: the server's errors arrive only after
the slot is in use and do not say which bridge setting to change.
"""

from __future__ import annotations

from collections.abc import Sequence

from bridge.errors import ConfigError


def check_proto_version(proto_version: int) -> None:
    """Reject protocol versions this bridge cannot decode."""
    if proto_version not in (1, 2, 3, 4):
        raise ConfigError(
            f"unsupported pgoutput proto_version {proto_version!r}",
            hint="use 1 (PG10+), 2 (PG14+), 3 (PG15+) or 4 (PG16+)",
        )


def _quote_ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def pgoutput_options(
    proto_version: int,
    publication_names: Sequence[str],
    *,
    binary: bool = False,
    messages: bool = False,
    streaming: str = "off",
    two_phase: bool = False,
    origin: str | None = None,
) -> list[tuple[str, str]]:
    """START_REPLICATION options for pgoutput, checked against `proto_version`.

    Options left at their default are omitted, so older servers that do not know
    them (binary/messages/streaming: PG14, two_phase: PG15, origin: PG16) still work.
    Values are raw; quoting them as SQL literals is the caller's job.
    """
    check_proto_version(proto_version)
    _check_publications(publication_names)
    _check_features(proto_version, streaming, two_phase, origin)
    options = [
        ("proto_version", str(proto_version)),
        ("publication_names", ",".join(_quote_ident(p) for p in publication_names)),
    ]
    if binary:
        options.append(("binary", "true"))
    if messages:
        options.append(("messages", "true"))
    if streaming != "off":
        options.append(("streaming", streaming))
    if two_phase:
        options.append(("two_phase", "true"))
    if origin is not None:
        options.append(("origin", origin))
    return options


def _check_publications(publication_names: Sequence[str]) -> None:
    if isinstance(publication_names, str) or not publication_names:
        raise ConfigError(
            "publication_names must be a non-empty list of publication names",
            hint="e.g. ['bridge']",
        )
    for pub in publication_names:
        if not pub or "\x00" in pub:
            raise ConfigError(
                f"invalid publication name {pub!r}", hint="use the name given to CREATE PUBLICATION"
            )


def _check_features(
    proto_version: int, streaming: str, two_phase: bool, origin: str | None
) -> None:
    """Each option against the protocol version that introduced it."""
    if streaming not in ("off", "on", "parallel"):
        raise ConfigError(f"invalid streaming mode {streaming!r}", hint="use off, on or parallel")
    if streaming == "on" and proto_version < 2:
        raise ConfigError(
            "streaming=on needs pgoutput proto_version >= 2",
            hint="set proto_version to 2 or higher (PG14+), or streaming=off",
        )
    if streaming == "parallel" and proto_version < 4:
        raise ConfigError(
            "streaming=parallel needs pgoutput proto_version 4",
            hint="set proto_version to 4 (PG16+), or use streaming=on",
        )
    if two_phase and proto_version < 3:
        raise ConfigError(
            "two_phase needs pgoutput proto_version >= 3",
            hint="set proto_version to 3 or higher (PG15+), or disable two_phase",
        )
    if origin not in (None, "any", "none"):
        raise ConfigError(
            f"invalid origin filter {origin!r}",
            hint="use 'any' (all changes) or 'none' (only changes without a replication origin)",
        )
