"""How long the pipeline's loop blocks on PostgreSQL between idle turns."""

from __future__ import annotations

from bridge.pipeline import idle_wait_s


def test_records_in_flight_bring_the_idle_turn_sooner() -> None:
    # their delivery reports move the flush position: served within 10 ms of quiet
    assert idle_wait_s(1, exactly_once=False) == 0.01


def test_nothing_in_flight_waits_the_long_interval() -> None:
    assert idle_wait_s(0, exactly_once=False) == 0.2


def test_exactly_once_keeps_the_long_wait_with_records_in_flight() -> None:
    # an idle turn commits the Kafka transaction: a short wait would commit on every pause
    assert idle_wait_s(5, exactly_once=True) == 0.2
