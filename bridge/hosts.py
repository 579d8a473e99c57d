"""`source.host` as one server or several: libpq's multi-host connection strings.

With several hosts libpq tries them in order and keeps the first whose role matches
`target_session_attrs`; for a bridge that must follow a failover that is `primary`
(the default with several hosts), so after a promotion the next start lands on
whichever server is primary now. The slot it resumes from must exist there: see
bridge/source/failover.py and bridge/slotstate.py.
"""

from __future__ import annotations

from typing import Any, NamedTuple


class Endpoint(NamedTuple):
    host: str
    port: int


def parse_hosts(text: str, default_port: int) -> tuple[Endpoint, ...]:
    """`"a"`, `"a,b:5433"`, `"[::1]:5433"`: every item may carry its own port.

    Raises ValueError (a config validation message) for an empty item or a bad port.
    """
    found = []
    for raw in text.split(","):
        item = raw.strip()
        if not item:
            raise ValueError(f"{text!r}: empty host between commas")
        host, port = item, default_port
        if item.startswith("["):  # IPv6 literal, optionally followed by :port
            end = item.find("]")
            if end < 0:
                raise ValueError(f"{item!r}: missing ']' after an IPv6 address")
            host, rest = item[1:end], item[end + 1 :]
            if rest:
                port = _port(item, rest.removeprefix(":"))
        elif item.count(":") == 1:
            host, port_text = item.split(":")
            port = _port(item, port_text)
        found.append(Endpoint(host, port))
    return tuple(found)


def _port(item: str, text: str) -> int:
    if not text.isdigit() or not 1 <= int(text) <= 65535:
        raise ValueError(f"{item!r}: port must be a number from 1 to 65535")
    return int(text)


def libpq_params(
    endpoints: tuple[Endpoint, ...], target_session_attrs: str | None
) -> dict[str, Any]:
    """host/port (comma lists when several) and target_session_attrs for psycopg.

    One host keeps libpq's default (`any`): a single server is used whatever its role,
    as before multi-host support existed.
    """
    params: dict[str, Any] = {
        "host": ",".join(e.host for e in endpoints),
        "port": ",".join(str(e.port) for e in endpoints)
        if len(endpoints) > 1
        else endpoints[0].port,
    }
    attrs = target_session_attrs or ("primary" if len(endpoints) > 1 else None)
    if attrs is not None:
        params["target_session_attrs"] = attrs
    return params


def describe(endpoints: tuple[Endpoint, ...]) -> str:
    return ",".join(f"{e.host}:{e.port}" for e in endpoints)
