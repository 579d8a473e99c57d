"""A network namespace for the bridge, joined to the servers by one veth pair per server.

Each server listens on the root-side end of its own link, so the kernel carries every
byte between the bridge and that server over that link and nothing else:

    cut      sets the root-side end down. Packets between the bridge and the server are
             dropped in both directions and neither side gets an error: a partition (the
             bridge's connects time out, its sockets retransmit into silence). The bridge's
             side knows the server's hardware address for good (a permanent neighbour
             entry), so it does not fail ARP and report "no route to host" instead.
    restore  sets it up again; TCP connections that survived resume where they stopped.
    reset    aborts every TCP connection over the link on the server side (`ss -K`, the
             kernel's sock_destroy), which sends the bridge a RST: a link dropped by a
             firewall or a crashed NAT.
    slow     throttles the link both ways to a rate (a token bucket filter on each end,
             `tc qdisc tbf`; the kernels here have no netem for plain delay): a congested
             or far-away link, slow but never dropping what it accepted.
    unslow   removes the throttle.

The test's own clients stay in the root namespace and reach the same addresses locally:
a down interface keeps its local route, so the writer and the checker never see a cut.
Names carry the creating process id; a namespace or link left by a dead process (a
crashed run) is removed before a new one is made.
"""

from __future__ import annotations

import ipaddress
import itertools
import os
import re
import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType
from typing import NamedTuple

NS_PREFIX = "pgkbf"  # namespaces: pgkbf-<pid>-<n>
DEVICE_PREFIX = "pgf"  # root-side link ends: pgf<pid hex>-<n hex><i hex> (15 characters at most)
SUPERNET = ipaddress.IPv4Network("10.231.0.0/16")  # one /24 per namespace, one /30 per link
_serial = itertools.count()


class NetnsUnavailableError(RuntimeError):
    """This machine cannot make namespaces (not root, no iproute2, no privilege)."""


class Link(NamedTuple):
    name: str  # what the link leads to, also the interface name inside the namespace
    device: str  # the root-side end
    server: str  # address of the root-side end: where the server listens
    bridge: str  # address of the namespace end: where the bridge's connections come from
    network: str  # the /30 both ends are on


def _ip(*args: str) -> str:
    try:
        done = subprocess.run(["ip", *args], capture_output=True, text=True, check=False)
    except OSError as exc:  # no iproute2
        raise NetnsUnavailableError(f"cannot run ip: {exc}") from exc
    if done.returncode != 0:
        raise RuntimeError(f"ip {' '.join(args)}: {done.stderr.strip()}")
    return done.stdout


def _tc(*args: str) -> None:
    done = subprocess.run(["tc", *args], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"tc {' '.join(args)}: {done.stderr.strip()}")


def unavailable() -> str | None:
    """Why namespaces cannot be made here, or None."""
    if os.geteuid() != 0:
        return "network namespaces need root"
    missing = [tool for tool in ("ip", "ss") if shutil.which(tool) is None]
    if missing:
        return f"{' and '.join(missing)} (iproute2) not installed"
    return None


def _alive(pid: int) -> bool:
    return Path(f"/proc/{pid}").exists()


def remove_leftovers() -> None:
    """Delete the namespaces and root-side links of processes that no longer exist.

    Deleting a root-side end removes its pair even while a stray process keeps the
    namespace alive, so a leftover never holds on to an address.
    """
    for line in _ip("netns", "list").splitlines():
        found = re.match(rf"({NS_PREFIX}-(\d+)-\d+)\b", line)
        if found and not _alive(int(found[2])):
            _ip("netns", "delete", found[1])
    for line in _ip("-o", "link", "show").splitlines():
        found = re.match(rf"\d+: ({DEVICE_PREFIX}([0-9a-f]+)-[0-9a-f]+)@", line)
        if found and not _alive(int(found[2], 16)):
            _ip("link", "delete", found[1])


def _free_subnet() -> ipaddress.IPv4Network:
    """A /24 of SUPERNET no interface has an address in, starting from one the pid picks."""
    used = [
        ipaddress.IPv4Interface(word).network
        for line in _ip("-4", "-o", "addr", "show").splitlines()
        for word in line.split()[3:4]
    ]
    subnets = list(SUPERNET.subnets(new_prefix=24))
    start = os.getpid() % len(subnets)
    for net in subnets[start:] + subnets[:start]:
        if not any(net.overlaps(other) for other in used):
            return net
    raise RuntimeError(f"every /24 of {SUPERNET} is in use")


class Netns:
    """`with Netns(["postgres", "kafka"]) as ns:` — a namespace and one link per name."""

    def __init__(self, links: Sequence[str]) -> None:
        assert len(links) <= 16 and all(len(n) <= 15 for n in links), links
        serial = next(_serial)
        self.name = f"{NS_PREFIX}-{os.getpid()}-{serial}"
        self._device = f"{DEVICE_PREFIX}{os.getpid():x}-{serial:x}"
        self._wanted = list(links)
        self.links: dict[str, Link] = {}

    @property
    def exec_prefix(self) -> list[str]:
        """Prepend to a command line to run it inside the namespace."""
        return ["ip", "netns", "exec", self.name]

    def __enter__(self) -> Netns:
        return self.open()

    def open(self) -> Netns:
        """Make the namespace and its links; NetnsUnavailableError if no namespace can be made."""
        remove_leftovers()
        try:
            _ip("netns", "add", self.name)
        except RuntimeError as exc:
            raise NetnsUnavailableError(str(exc)) from exc
        try:
            _ip("-n", self.name, "link", "set", "lo", "up")
            nets = list(_free_subnet().subnets(new_prefix=30))
            for i, name in enumerate(self._wanted):
                self._add_link(name, f"{self._device}{i:x}", nets[i])
        except BaseException:
            self.close()
            raise
        return self

    def _add_link(self, name: str, device: str, net: ipaddress.IPv4Network) -> None:
        server, bridge = (str(host) for host in net.hosts())
        _ip("link", "add", device, "type", "veth", "peer", "name", name, "netns", self.name)
        self.links[name] = Link(name, device, server, bridge, str(net))
        _ip("addr", "add", f"{server}/30", "dev", device)
        _ip("-n", self.name, "addr", "add", f"{bridge}/30", "dev", name)
        _ip("link", "set", device, "up")
        _ip("-n", self.name, "link", "set", name, "up")
        mac = Path(f"/sys/class/net/{device}/address").read_text().strip()
        _ip(
            "-n",
            self.name,
            *f"neigh replace {server} lladdr {mac} dev {name} nud permanent".split(),
        )

    def cut(self, link: str) -> None:
        _ip("link", "set", self.links[link].device, "down")

    def restore(self, link: str) -> None:
        _ip("link", "set", self.links[link].device, "up")

    def slow(self, link: str, rate_kbit: int = 256) -> None:
        """Throttle `link` to `rate_kbit` in each direction (queueing up to 2 s of it)."""
        spec = f"root tbf rate {rate_kbit}kbit burst 16kb latency 2000ms".split()
        _tc("qdisc", "replace", "dev", self.links[link].device, *spec)
        _tc("-n", self.name, "qdisc", "replace", "dev", link, *spec)

    def unslow(self, link: str) -> None:
        _tc("qdisc", "delete", "dev", self.links[link].device, "root")
        _tc("-n", self.name, "qdisc", "delete", "dev", link, "root")

    def reset(self, link: str) -> int:
        """RST the bridge's TCP connections over `link` (from the server side); how many."""
        peer = self.links[link].bridge
        done = subprocess.run(
            ["ss", "-K", "-H", "-t", "-n", "dst", peer], capture_output=True, text=True, check=False
        )
        if done.returncode != 0:
            raise RuntimeError(f"ss -K dst {peer}: {done.stderr.strip()}")
        return len(done.stdout.splitlines())

    def close(self) -> None:
        """Delete the namespace and every link, whatever state they are in (idempotent)."""
        for link in self.links.values():
            if Path(f"/sys/class/net/{link.device}").exists():
                _ip("link", "delete", link.device)
        self.links.clear()
        if Path(f"/run/netns/{self.name}").exists():
            _ip("netns", "delete", self.name)

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
