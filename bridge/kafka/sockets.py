"""Broker connections that die with the bridge: SO_LINGER {on, 0} on the client's sockets.

Why: a producer that is not transactional has no fencing. When a bridge exits (an error,
a stop, kill -9) while produce requests still sit in its kernel's send queue (the link to
Kafka slow or cut), the kernel keeps retransmitting them after the process is gone, and
the broker appends them whenever they arrive: after the records its successor has resent
from the slot's position meanwhile. A key's older version then lands after its newer one
and a consumer that keeps state by key keeps the older one (the nemesis soak caught it:
tests/soak, at-least-once). With linger 0 the kernel aborts a connection when its socket
closes, the process's death included: a RST goes out and the unsent queue is dropped.
What librdkafka already put on the wire still arrives, ahead of anything a successor sends
on the same path.

librdkafka has no setting for it and the Python client exposes no socket callback, so the
sockets are found in /proc/self: the TCP sockets whose peer is a broker (the bootstrap
servers and the brokers named in the client's statistics). Armed when the client is made
(nothing is connected yet, so at the first statistics), at every statistics report and
just before the client is closed. Without /proc (not Linux) it does nothing.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import socket
import struct
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Final

log: Final = logging.getLogger("bridge.kafka")

_LINGER_ABORT: Final = struct.pack("ii", 1, 0)
_PROC: Final = Path("/proc/self")


def endpoint(address: str) -> tuple[str, int] | None:
    """`host:port` (a bootstrap entry, a statistics nodename; IPv6 in brackets)."""
    address = address.strip()
    if "://" in address:
        address = address.split("://", 1)[1]
    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit():
        return None
    return host.strip("[]"), int(port)


def stats_endpoints(stats: str) -> set[tuple[str, int]]:
    """The brokers a librdkafka statistics report names (`brokers.*.nodename`)."""
    try:
        brokers = json.loads(stats).get("brokers", {})
        names = [b.get("nodename", "") for b in brokers.values()]
    except (ValueError, AttributeError):
        return set()
    return {e for name in names if (e := endpoint(name)) is not None}


def _proc_address(text: str) -> tuple[str, int]:
    """`/proc/net/tcp{,6}`'s hex address:port (the address in host byte order per word)."""
    addr, port = text.split(":")
    raw = bytes.fromhex(addr)
    words = b"".join(raw[i : i + 4][::-1] for i in range(0, len(raw), 4))
    family = socket.AF_INET if len(words) == 4 else socket.AF_INET6
    return socket.inet_ntop(family, words), int(port, 16)


def peers_by_inode(table: str) -> Iterator[tuple[int, tuple[str, int]]]:
    """(socket inode, remote (address, port)) of every entry of a /proc/net/tcp{,6} text."""
    for line in table.splitlines()[1:]:
        fields = line.split()
        if len(fields) > 9 and fields[9].isdigit():
            yield int(fields[9]), _proc_address(fields[2])


def _normal(address: str) -> str:
    """An IPv4-mapped IPv6 address as the IPv4 one."""
    return address[7:] if address.startswith("::ffff:") and "." in address else address


class BrokerSockets:
    """Finds this process's connections to the brokers and makes them abort on close."""

    def __init__(self, bootstrap: str) -> None:
        self._names = {e for part in bootstrap.split(",") if (e := endpoint(part)) is not None}
        self._addresses: set[tuple[str, int]] = set()
        self._resolved: set[tuple[str, int]] = set()
        self._armed: set[int] = set()  # socket inodes done

    def learn(self, stats: str) -> None:
        """Take the brokers a statistics report names, then arm their sockets."""
        self._names |= stats_endpoints(stats)
        self.arm()

    def _resolve(self) -> None:
        for host, port in self._names - self._resolved:
            self._resolved.add((host, port))
            with contextlib.suppress(OSError):
                for *_, sockaddr in socket.getaddrinfo(host, port, proto=socket.IPPROTO_TCP):
                    self._addresses.add((_normal(str(sockaddr[0])), port))

    def arm(self) -> int:
        """Set linger 0 on every broker connection not yet armed; how many were armed."""
        try:
            sockets = dict(self._socket_fds())
        except OSError:
            return 0  # no /proc: not Linux
        self._resolve()
        armed = 0
        for inode, peer in self._peers():
            fd = sockets.get(inode)
            if (
                fd is None
                or inode in self._armed
                or (_normal(peer[0]), peer[1]) not in (self._addresses)
            ):
                continue
            try:
                # A duplicate of librdkafka's descriptor: options belong to the socket.
                with socket.socket(fileno=os.dup(fd)) as sock:
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, _LINGER_ABORT)
            except OSError:
                continue  # closed meanwhile
            self._armed.add(inode)
            armed += 1
        return armed

    @staticmethod
    def _socket_fds() -> Iterable[tuple[int, int]]:
        for entry in os.scandir(_PROC / "fd"):
            with contextlib.suppress(OSError):
                target = os.readlink(entry.path)
                if target.startswith("socket:["):
                    yield int(target[8:-1]), int(entry.name)

    @staticmethod
    def _peers() -> Iterator[tuple[int, tuple[str, int]]]:
        for name in ("tcp", "tcp6"):
            with contextlib.suppress(OSError):
                yield from peers_by_inode((_PROC / "net" / name).read_text())
