"""The standby suite's fixtures: the fault suite's (settings, bridge_process, ledger_stream, and
the namespaced bridge of bridge_netns / netns_stack)."""

from __future__ import annotations

from faults.conftest import bridge_netns, bridge_process, ledger_stream, netns_stack, settings

__all__ = ["bridge_netns", "bridge_process", "ledger_stream", "netns_stack", "settings"]
