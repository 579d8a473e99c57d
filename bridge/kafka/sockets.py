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
sockets are found in /proc/self/fd and asked for their peer: the TCP connections to a
broker (the bootstrap servers and the brokers named in the client's statistics). Armed
about once a second from the producer's poll path (a connection made after a broker
restart is armed within a second, not at the next 5 s statistics report), at every
statistics report and just before the client is closed. A pass lists /proc/self/fd
(~60 us) and opens only the sockets it has not seen (a dup and a getpeername each);
/proc/net/tcp, 8 ms a read on a busy host, is not read. A broker that neither the
bootstrap list nor a statistics report has named yet (one learned from metadata, in the
first seconds of a run) has its connections armed once a report names it. Without /proc
(not Linux) it does nothing.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import struct
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Final

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


def _normal(address: str) -> str:
    """An IPv4-mapped IPv6 address as the IPv4 one."""
    return address[7:] if address.startswith("::ffff:") and "." in address else address


class BrokerSockets:
    """Finds this process's connections to the brokers and makes them abort on close.

    `tick` is for a hot loop: it does nothing until `interval_s` has passed since the
    last pass (`clock` is for tests).
    """

    def __init__(
        self,
        bootstrap: str,
        *,
        interval_s: float = 1.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._names = {e for part in bootstrap.split(",") if (e := endpoint(part)) is not None}
        self._addresses: set[tuple[str, int]] = set()
        self._resolved: set[tuple[str, int]] = set()
        # Socket inodes passed over on later passes: armed, and the others (not a TCP
        # connection, listening, a peer not named as a broker: rechecked once more when
        # a new broker is named).
        self._armed: set[int] = set()
        self._others: set[int] = set()
        self._interval_s = interval_s
        self._clock = clock
        self._next = clock()

    def learn(self, stats: str) -> None:
        """Take the brokers a statistics report names, then arm their sockets."""
        self._names |= stats_endpoints(stats)
        self.arm()

    def tick(self) -> int:
        """`arm` at most once per interval; how many were armed."""
        now = self._clock()
        if now < self._next:
            return 0
        self._next = now + self._interval_s
        return self.arm()

    def _resolve(self) -> None:
        known = len(self._addresses)
        for host, port in self._names - self._resolved:
            self._resolved.add((host, port))
            with contextlib.suppress(OSError):
                for *_, sockaddr in socket.getaddrinfo(host, port, proto=socket.IPPROTO_TCP):
                    self._addresses.add((_normal(str(sockaddr[0])), port))
        if len(self._addresses) > known:
            self._others.clear()

    def arm(self) -> int:
        """Set linger 0 on every broker connection not yet armed; how many were armed."""
        try:
            sockets = dict(self._socket_fds())
        except OSError:
            return 0  # no /proc: not Linux
        self._armed &= sockets.keys()  # closed ones: their inodes may come back
        self._others &= sockets.keys()
        self._resolve()
        armed = 0
        for inode, fd in sockets.items():
            if inode in self._armed or inode in self._others:
                continue
            try:
                armed += self._arm_one(inode, fd)
            except OSError:
                continue  # closed meanwhile, or still connecting: the next pass
        return armed

    def _arm_one(self, inode: int, fd: int) -> int:
        # A duplicate of librdkafka's descriptor: options belong to the socket.
        with socket.socket(fileno=os.dup(fd)) as sock:
            if (
                sock.family not in (socket.AF_INET, socket.AF_INET6)
                or sock.type != socket.SOCK_STREAM
                or sock.getsockopt(socket.SOL_SOCKET, socket.SO_ACCEPTCONN)
            ):
                self._others.add(inode)
                return 0
            host, port, *_ = sock.getpeername()  # OSError while connecting: next pass
            if (_normal(str(host)), port) not in self._addresses:
                self._others.add(inode)
                return 0
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, _LINGER_ABORT)
        self._armed.add(inode)
        return 1

    @staticmethod
    def _socket_fds() -> Iterable[tuple[int, int]]:
        for entry in os.scandir(_PROC / "fd"):
            with contextlib.suppress(OSError):
                target = os.readlink(entry.path)
                if target.startswith("socket:["):
                    yield int(target[8:-1]), int(entry.name)
