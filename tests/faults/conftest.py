"""The fault suite's fixtures: the delivery suite's (settings, bridge_process, ledger_stream),
plus a bridge cut off by veth links.

Module scope (started on first use, stopped after the module):
    bridge_netns  `netns.Netns` with links "postgres" and "kafka" (the registry shares the
                  Kafka link); run the bridge with `bridge_process(settings,
                  bridge_netns.exec_prefix)`. Skips the test where namespaces cannot be made.
    netns_stack   a `Stack` of its own whose PostgreSQL listens on the root end of the
                  "postgres" link and whose Kafka (advertised there too) and registry listen on
                  the root end of the "kafka" link: the session's stack stays on loopback,
                  which a namespace cannot reach. A module selects it by overriding `stack`,
                  `kafka_bootstrap` and `registry_url` (see test_network_cut.py).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from delivery.conftest import bridge_process, ledger_stream, settings
from stack_module import load_stack_module

from .netns import Netns, NetnsUnavailableError, unavailable

__all__ = ["bridge_netns", "bridge_process", "ledger_stream", "netns_stack", "settings"]


@pytest.fixture(scope="module")
def bridge_netns() -> Iterator[Netns]:
    reason = unavailable()
    if reason is not None:
        pytest.skip(reason)
    ns = Netns(["postgres", "kafka"])
    try:
        ns.open()
    except NetnsUnavailableError as exc:
        pytest.skip(f"cannot make a network namespace here: {exc}")
    try:
        yield ns
    finally:
        ns.close()


@pytest.fixture(scope="module")
def netns_stack(bridge_netns: Netns) -> Iterator[Any]:
    pg, kafka = bridge_netns.links["postgres"], bridge_netns.links["kafka"]
    stack = load_stack_module().Stack(
        pg_host=pg.server, pg_clients=pg.network, kafka_host=kafka.server
    )
    try:
        yield stack.start()
    finally:
        stack.stop()
