"""The soak's environment (run.py's `soak_environment`) on the fault suite's namespace and
the Kafka stack behind its links (tests/faults/conftest.py), once per module."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from faults.conftest import bridge_netns, netns_stack
from faults.netns import Netns

from .run import SoakEnv, soak_environment

__all__ = ["bridge_netns", "netns_stack", "soak_env"]


@pytest.fixture(scope="module")
def soak_env(
    bridge_netns: Netns, netns_stack: Any, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[SoakEnv]:
    with soak_environment(tmp_path_factory.mktemp("soak"), bridge_netns, netns_stack) as env:
        yield env
