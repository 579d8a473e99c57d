"""Calendar arithmetic against datetime (years 1-9999) and over PostgreSQL's whole range."""

from __future__ import annotations

import datetime as dt

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bridge.encode import temporal as t

EPOCH = dt.date(1970, 1, 1)


@given(st.dates())
def test_days_from_civil_matches_datetime(day: dt.date) -> None:
    days = (day - EPOCH).days
    assert t.days_from_civil(day.year, day.month, day.day) == days
    assert t.civil_from_days(days) == (day.year, day.month, day.day)


@given(st.integers(-2_440_550, 2_145_042_905))
def test_civil_round_trip_over_postgres_date_range(days: int) -> None:
    assert t.days_from_civil(*t.civil_from_days(days)) == days


@pytest.mark.parametrize(
    ("east", "text"),
    [(0, "+00"), (19800, "+05:30"), (-28800, "-08"), (1172, "+00:19:32"), (-57599, "-15:59:59")],
)
def test_format_offset(east: int, text: str) -> None:
    assert t.format_offset(east) == text


def test_sentinels_and_clamping() -> None:
    assert t.clamp_us(2**63) == t.INT64_MAX
    assert t.clamp_us(-(2**63) - 1) == t.INT64_MIN
    assert t.format_date(t.INT32_MAX) == "infinity"
    assert t.format_timestamp(t.INT64_MIN, utc=True) == "-infinity"
    assert t.iso_utc(t.INT64_MAX) == "infinity"
    assert t.iso_utc(-1) == "1969-12-31T23:59:59.999999Z"
    assert t.format_time(86_400_000_000) == "24:00:00"
