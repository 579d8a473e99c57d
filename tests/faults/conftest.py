"""The delivery suite's per-test fixtures (bridge settings, reaped bridge processes)."""

from delivery.conftest import bridge_process, settings

__all__ = ["bridge_process", "settings"]
