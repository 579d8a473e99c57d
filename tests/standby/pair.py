"""Two bridge processes on one slot (`ha.enabled`, exactly-once): the active one and its standby.

Who holds the lease is read from each bridge's own log: a standby logs "standing by" when it
starts waiting and "taking over" when it got the lease (bridge/standby.py).
"""

from __future__ import annotations

import copy
from typing import Any

from delivery.helpers import BridgeProcess
from waiting import checked, wait_for

LEASE_TIMEOUT_S = 3.0  # short, so a frozen or cut-off active loses its lease quickly


def pair_settings(
    settings: dict[str, Any], lease_timeout_s: float = LEASE_TIMEOUT_S
) -> dict[str, Any]:
    """The delivery suite's settings for a bridge of a standby pair."""
    paired = copy.deepcopy(settings)
    paired["kafka"].update(exactly_once=True, transaction_max_records=50)
    paired["ha"] = {"enabled": True, "lease_timeout_s": lease_timeout_s}
    return paired


def takeovers(bridge: BridgeProcess) -> int:
    """How many times this bridge (over all its runs) got the lease."""
    return bridge.log().count("taking over")


def standbys(bridge: BridgeProcess) -> int:
    return bridge.log().count("standing by for slot")


def wait_standing_by(bridge: BridgeProcess, before: int, timeout: float = 60.0) -> None:
    """Wait until `bridge` (started) stands by for the `before + 1`-th time."""
    wait_for(
        checked(bridge.check, lambda: standbys(bridge) > before),
        timeout,
        "the bridge to stand by",
        detail=bridge.log,
    )


def wait_taking_over(bridge: BridgeProcess, before: int, timeout: float = 60.0) -> None:
    """Wait until `bridge` got the lease once more than `before` times."""
    wait_for(
        checked(bridge.check, lambda: takeovers(bridge) > before),
        timeout,
        "the standby to take over",
        detail=lambda: bridge.log()[-2000:],
    )
