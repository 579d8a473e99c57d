"""`bridge check`'s line on a major upgrade: what pg_upgrade will do to the slot."""

from __future__ import annotations

from bridge.check import upgrade_outlook


def test_17_and_later_keep_the_slot() -> None:
    line = upgrade_outlook(17, "bridge", "fail")
    assert "keeps slot 'bridge'" in line and "WARNING" not in line


def test_older_servers_warn_and_say_what_the_bridge_will_do() -> None:
    fail = upgrade_outlook(16, "bridge", "fail")
    assert fail.startswith("WARNING: PostgreSQL 16: pg_upgrade drops logical slots")
    assert "SlotLostError" in fail and "verify --repair" in fail
    assert "re-read the captured tables" in upgrade_outlook(15, "bridge", "resnapshot")
