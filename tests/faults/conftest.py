"""The fault suite's fixtures: the delivery suite's, plus a bridge cut off by veth links.

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

import importlib.util
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from delivery.conftest import bridge_process, settings

from .netns import Netns, NetnsUnavailableError, unavailable

__all__ = ["bridge_netns", "bridge_process", "netns_stack", "settings"]

STACK_PATH = Path(__file__).resolve().parents[2] / "deploy" / "local" / "stack.py"
STACK_MODULE = "pgkb_local_stack"  # the name tests/conftest.py loads it under: one copy only


def _stack_module() -> ModuleType:
    if STACK_MODULE in sys.modules:
        return sys.modules[STACK_MODULE]
    spec = importlib.util.spec_from_file_location(STACK_MODULE, STACK_PATH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[STACK_MODULE] = module
    spec.loader.exec_module(module)
    return module


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
    hosts = {"host": pg.server, "clients": pg.network, "kafka": kafka.server}
    stack = _stack_module().Stack(hosts=hosts)
    try:
        yield stack.start()
    finally:
        stack.stop()
