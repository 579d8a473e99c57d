"""Structured mutations of valid wire messages, for the bad-input campaigns.

Random bytes alone rarely get past a decoder's first check, so most inputs start
from a real message (the golden captures) and break it the ways a corrupt stream
would: flipped bits, truncation, inserted or deleted bytes, a wrong type byte,
spliced messages and, above all, corrupted length and count fields, the fields a
decoder might trust to size a loop or an allocation. Everything is drawn from one
seeded `random.Random`, so a campaign is reproducible from its seed.
"""

from __future__ import annotations

import random
import struct
from collections.abc import Callable, Sequence

# Boundary values for a field of each width: zero, one, sign boundaries, all ones.
_INTERESTING = {
    1: (0, 1, 2, 0x7F, 0x80, 0xFE, 0xFF),
    2: (0, 1, 2, 0x7F, 0x80, 0xFF, 0x100, 0x7FFF, 0x8000, 0xFFFE, 0xFFFF),
    4: (0, 1, 2, 0x7F, 0xFF, 0xFFFF, 0x7FFFFFFF, 0x80000000, 0xFFFFFFFE, 0xFFFFFFFF),
    8: (0, 1, 0x7FFFFFFFFFFFFFFF, 0x8000000000000000, 0xFFFFFFFFFFFFFFFF),
}
_FORMATS = {
    1: struct.Struct(">B"),
    2: struct.Struct(">H"),
    4: struct.Struct(">I"),
    8: struct.Struct(">Q"),
}
# TupleData value kinds of both protocols, and the row/tuple role letters.
_KINDS = b"ntubiNKOTAC"


def length_fields(data: bytes) -> list[tuple[int, int]]:
    """(offset, width) of every place that could hold a length or count.

    A heuristic, computed once per seed: a big-endian u32 or u16 whose value fits in
    the rest of the message, or a u8 followed, that many bytes later, by a NUL (the
    length-prefixed names of pglogical). False positives only cost a wasted mutation.
    """
    found = []
    size = len(data)
    for pos in range(1, size):
        rest = size - pos
        if rest >= 4 and 0 < int.from_bytes(data[pos : pos + 4]) <= rest - 4:
            found.append((pos, 4))
        if rest >= 2 and 0 < int.from_bytes(data[pos : pos + 2]) <= rest - 2:
            found.append((pos, 2))
        n = data[pos]
        if 0 < n < rest and data[pos + n] == 0:
            found.append((pos, 1))
    return found


class Mutator:
    """Turns a seed message into a broken variant, or makes up random bytes."""

    def __init__(self, rng: random.Random, type_bytes: bytes, tokens: Sequence[bytes] = ()) -> None:
        self.rng = rng
        self.type_bytes = type_bytes
        self.tokens = tokens
        self._fields: dict[bytes, list[tuple[int, int]]] = {}
        self._ops: tuple[Callable[[bytearray, Sequence[bytes]], None], ...] = (
            self._flip_bits,
            self._truncate,
            self._insert,
            self._delete,
            self._interesting,
            self._type_byte,
            self._duplicate,
            self._splice,
            self._kind,
            *((self._token,) if tokens else ()),
        )

    def random_bytes(self) -> bytes:
        """Unstructured input: mostly short, sometimes led by a valid type byte."""
        rng = self.rng
        size = rng.choice((rng.randrange(9), rng.randrange(65), rng.randrange(2049)))
        data = rng.randbytes(size)
        if data and rng.random() < 0.5:
            data = bytes([rng.choice(self.type_bytes)]) + data[1:]
        return data

    def mutate(self, seed: bytes, pool: Sequence[bytes]) -> bytes:
        """One to four stacked mutations; a length-field corruption first, half the time."""
        rng = self.rng
        buf = bytearray(seed)
        if rng.random() < 0.5:
            self._corrupt_length(buf, seed)
        for _ in range(rng.randrange(1, 5) if rng.random() < 0.6 else 0):
            rng.choice(self._ops)(buf, pool)
        return bytes(buf)

    def _corrupt_length(self, buf: bytearray, seed: bytes) -> None:
        fields = self._fields.get(seed)
        if fields is None:
            fields = self._fields[seed] = length_fields(seed)
        if not fields:
            return
        pos, width = self.rng.choice(fields)
        rest = len(buf) - pos - width
        value = self.rng.choice((*_INTERESTING[width], rest - 1, rest + 1, rest * 2))
        buf[pos : pos + width] = _FORMATS[width].pack(value % (1 << (8 * width)))

    def _flip_bits(self, buf: bytearray, pool: Sequence[bytes]) -> None:
        for _ in range(self.rng.randrange(1, 5)):
            if buf:
                buf[self.rng.randrange(len(buf))] ^= 1 << self.rng.randrange(8)

    def _truncate(self, buf: bytearray, pool: Sequence[bytes]) -> None:
        del buf[self.rng.randrange(len(buf) + 1) :]

    def _insert(self, buf: bytearray, pool: Sequence[bytes]) -> None:
        rng = self.rng
        junk = rng.randbytes(rng.randrange(1, 17)) if rng.random() < 0.5 else bytes([0])
        pos = rng.randrange(len(buf) + 1)
        buf[pos:pos] = junk

    def _delete(self, buf: bytearray, pool: Sequence[bytes]) -> None:
        if buf:
            pos = self.rng.randrange(len(buf))
            del buf[pos : pos + self.rng.randrange(1, 17)]

    def _interesting(self, buf: bytearray, pool: Sequence[bytes]) -> None:
        width = self.rng.choice((1, 2, 4, 8))
        if len(buf) > width:
            pos = self.rng.randrange(len(buf) - width + 1)
            buf[pos : pos + width] = _FORMATS[width].pack(self.rng.choice(_INTERESTING[width]))

    def _type_byte(self, buf: bytearray, pool: Sequence[bytes]) -> None:
        new = (
            self.rng.choice(self.type_bytes) if self.rng.random() < 0.7 else self.rng.randrange(256)
        )
        if buf:
            buf[0] = new
        else:
            buf.append(new)

    def _duplicate(self, buf: bytearray, pool: Sequence[bytes]) -> None:
        if buf:
            start = self.rng.randrange(len(buf))
            chunk = buf[start : start + self.rng.randrange(1, 65)]
            pos = self.rng.randrange(len(buf) + 1)
            buf[pos:pos] = chunk * self.rng.randrange(1, 4)

    def _splice(self, buf: bytearray, pool: Sequence[bytes]) -> None:
        other = self.rng.choice(pool)
        buf[self.rng.randrange(len(buf) + 1) :] = other[self.rng.randrange(len(other) + 1) :]

    def _kind(self, buf: bytearray, pool: Sequence[bytes]) -> None:
        """Swap one tuple kind or role letter for another: the structure-level confusions."""
        places = [i for i in range(1, min(len(buf), 256)) if buf[i] in _KINDS]
        if places:
            buf[self.rng.choice(places)] = self.rng.choice(_KINDS)

    def _token(self, buf: bytearray, pool: Sequence[bytes]) -> None:
        """Insert or overwrite with a token of the input's own syntax (text values)."""
        token = self.rng.choice(self.tokens)
        pos = self.rng.randrange(len(buf) + 1)
        end = pos + (len(token) if self.rng.random() < 0.5 else 0)
        buf[pos:end] = token
