"""Calendar arithmetic and PostgreSQL's text forms for date/time values.

PostgreSQL dates run from 4713 BC to 5874897 AD (timestamps to 294276 AD), far
outside `datetime`, so everything here is integer arithmetic on days and
microseconds since the Unix epoch, on the proleptic Gregorian calendar. Years are
astronomical internally (1 BC = 0) and printed the way PostgreSQL prints them with
DateStyle=ISO ("0044-03-15 BC").
"""

from __future__ import annotations

from typing import Final

from mypy_extensions import i64

# Final: the compiled modules read these as constants instead of from a module's dict.
US_PER_SECOND: Final = 1_000_000
US_PER_DAY: Final = 86_400 * US_PER_SECOND
PG_EPOCH_DAYS: Final = 10_957  # 2000-01-01 in days since 1970-01-01
PG_EPOCH_US: Final = PG_EPOCH_DAYS * US_PER_DAY

INT32_MIN: Final = -(2**31)
INT32_MAX: Final = 2**31 - 1
INT64_MIN: Final = -(2**63)
INT64_MAX: Final = 2**63 - 1


def clamp_us(us: int) -> int:
    """Fit Unix microseconds into an Avro long; out-of-range values become the infinity sentinels.

    Only timestamps after 294247 AD (still valid in PostgreSQL) are affected.
    """
    if us > INT64_MAX:
        return INT64_MAX
    if us < INT64_MIN:
        return INT64_MIN
    return us


def days_from_civil(year: i64, month: i64, day: i64) -> i64:
    """Days since 1970-01-01 of an astronomical-year Gregorian date (H. Hinnant's algorithm).

    i64 throughout (every PostgreSQL date's year fits): once compiled, native arithmetic
    instead of tagged ints' checked divisions, for every date and timestamp parsed."""
    if month <= 2:
        year -= 1
    era = year // 400
    yoe = year - era * 400
    doy = (153 * (month + (-3 if month > 2 else 9)) + 2) // 5 + day - 1
    return era * 146_097 + yoe * 365 + yoe // 4 - yoe // 100 + doy - 719_468


def civil_from_days(days: int) -> tuple[int, int, int]:
    """Inverse of `days_from_civil`."""
    days += 719_468
    era = days // 146_097
    doe = days - era * 146_097
    yoe = (doe - doe // 1460 + doe // 36_524 - doe // 146_096) // 365
    doy = doe - (365 * yoe + yoe // 4 - yoe // 100)
    mp = (5 * doy + 2) // 153
    day = doy - (153 * mp + 2) // 5 + 1
    month = mp + 3 if mp < 10 else mp - 9
    return yoe + era * 400 + (month <= 2), month, day


def _pg_date(days: int) -> tuple[str, bool]:
    year, month, day = civil_from_days(days)
    bc = year <= 0
    return f"{1 - year if bc else year:04d}-{month:02d}-{day:02d}", bc


def format_date(days: int) -> str:
    """PostgreSQL's ISO output of a date given as Unix days (sentinels print as infinity)."""
    if days == INT32_MAX:
        return "infinity"
    if days == INT32_MIN:
        return "-infinity"
    text, bc = _pg_date(days)
    return text + " BC" if bc else text


def format_time(us: int) -> str:
    """HH:MM:SS[.ffffff] with trailing fraction zeros dropped, as time_out prints it."""
    seconds, frac = divmod(us, US_PER_SECOND)
    minutes, sec = divmod(seconds, 60)
    hours, minute = divmod(minutes, 60)
    text = f"{hours:02d}:{minute:02d}:{sec:02d}"
    return f"{text}.{frac:06d}".rstrip("0") if frac else text


def format_offset(east_seconds: int) -> str:
    """A UTC offset the way PostgreSQL prints it: +HH, +HH:MM or +HH:MM:SS."""
    sign = "+" if east_seconds >= 0 else "-"
    minutes, sec = divmod(abs(east_seconds), 60)
    hours, minute = divmod(minutes, 60)
    if sec:
        return f"{sign}{hours:02d}:{minute:02d}:{sec:02d}"
    if minute:
        return f"{sign}{hours:02d}:{minute:02d}"
    return f"{sign}{hours:02d}"


def format_timestamp(pg_us: int, utc: bool) -> str:
    """PostgreSQL's ISO output of a raw (2000-based) timestamp; `utc` adds the "+00" of
    timestamptz as printed with TimeZone=UTC."""
    if pg_us == INT64_MAX:
        return "infinity"
    if pg_us == INT64_MIN:
        return "-infinity"
    days, us = divmod(pg_us + PG_EPOCH_US, US_PER_DAY)
    date, bc = _pg_date(days)
    text = f"{date} {format_time(us)}{'+00' if utc else ''}"
    return text + " BC" if bc else text


def iso_utc(us: int) -> str:
    """ISO 8601 UTC text of Unix microseconds ("2020-01-01T12:00:00.5Z").

    Years outside 0000-9999 use the ISO expanded form (-0043, +10000); the
    infinity sentinels print as "infinity" / "-infinity" like PostgreSQL.
    """
    if us == INT64_MAX:
        return "infinity"
    if us == INT64_MIN:
        return "-infinity"
    days, rest = divmod(us, US_PER_DAY)
    year, month, day = civil_from_days(days)
    if year < 0:
        ytext = f"-{-year:04d}"
    elif year > 9999:
        ytext = f"+{year}"
    else:
        ytext = f"{year:04d}"
    return f"{ytext}-{month:02d}-{day:02d}T{format_time(rest)}Z"


def millis_of(us: int) -> int:
    """Microseconds -> milliseconds (floor), the infinity sentinels kept."""
    if us in (INT64_MAX, INT64_MIN):
        return us
    return us // 1000


# Debezium's average month (365.25 / 12 days) in µs: MicroDuration's DAYS_PER_MONTH_AVG.
US_PER_AVERAGE_MONTH: Final = 2_629_800 * US_PER_SECOND


def interval_micros(interval: dict[str, int]) -> int:
    """Debezium's MicroDuration: an interval as one length in µs, a month counted as
    30.4375 days (exact integer arithmetic; ±infinity as the int64 sentinels)."""
    micros = interval["micros"]
    if micros in (INT64_MAX, INT64_MIN):
        return micros
    return interval["months"] * US_PER_AVERAGE_MONTH + interval["days"] * US_PER_DAY + micros


def _toward_zero(n: int, unit: int) -> tuple[int, int]:
    """(quotient, remainder) truncated toward zero, as Java's / and % (PGInterval)."""
    q = abs(n) // unit
    q = -q if n < 0 else q
    return q, n - q * unit


def interval_iso(interval: dict[str, int]) -> str:
    """Debezium's io.debezium.time.Interval text ("P1Y2M3DT4H5M6.78S"): every component
    written, each with the interval's own sign as PGInterval splits it."""
    micros = interval["micros"]
    if micros == INT64_MAX:
        return "infinity"
    if micros == INT64_MIN:
        return "-infinity"
    years, months = _toward_zero(interval["months"], 12)
    hours, rest = _toward_zero(micros, 3600 * US_PER_SECOND)
    minutes, rest = _toward_zero(rest, 60 * US_PER_SECOND)
    seconds, frac = _toward_zero(rest, US_PER_SECOND)
    sec = str(seconds)
    if frac:
        sign = "-" if rest < 0 and seconds == 0 else ""
        sec = f"{sign}{seconds}.{abs(frac):06d}".rstrip("0")
    return f"P{years}Y{months}M{interval['days']}DT{hours}H{minutes}M{sec}S"
