"""PostgreSQL log sequence numbers (64-bit WAL positions, written `X/Y`)."""

from __future__ import annotations

from bridge.errors import ConfigError

_MAX = (1 << 64) - 1


class LSN(int):
    """A WAL position: an `int` that formats as PostgreSQL does (`16/B374D848`).

    An `int` subclass so that ordering and arithmetic stay native and cheap.
    """

    __slots__ = ()

    def __new__(cls, value: int = 0) -> LSN:
        if not 0 <= value <= _MAX:
            raise ValueError(f"LSN out of range: {value}")
        return super().__new__(cls, value)

    @classmethod
    def parse(cls, text: str) -> LSN:
        """Parse `X/Y` (hex halves), as printed by PostgreSQL."""
        hi, sep, lo = text.strip().partition("/")
        if not sep or not hi or not lo or len(hi) > 8 or len(lo) > 8:
            raise ConfigError(f"invalid LSN {text!r}", hint="expected the form 16/B374D848")
        try:
            return cls((int(hi, 16) << 32) | int(lo, 16))
        except ValueError:
            raise ConfigError(
                f"invalid LSN {text!r}", hint="expected hexadecimal halves like 16/B374D848"
            ) from None

    def __str__(self) -> str:
        return f"{self >> 32:X}/{self & 0xFFFFFFFF:X}"

    def __repr__(self) -> str:
        return f"LSN('{self}')"


ZERO = LSN(0)
