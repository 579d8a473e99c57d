"""Decoder and envelope fuzz campaigns, shared by tests/badinput (small) and bench/fuzz.py (1M+).

Targets are the decoder states a real stream can be in: pgoutput for each
proto_version outside a stream block and (2+) inside one, pglogical_output before
and after each kind of startup message (a decoded startup message also goes
through `check_startup`, as the plugin does). Each input is decoded by a decoder in
its target's state; `harness.Recorder` accepts only a message or `ProtocolError`.
"""

from __future__ import annotations

import random
import struct
from collections.abc import Callable
from typing import NamedTuple

from decode.pglogical_golden import (
    BINARY_OPTIONS,
    BINARY_STREAM,
    INTERNAL_OPTIONS,
    INTERNAL_STREAM,
    TEXT_OPTIONS,
    TEXT_STREAM,
)
from decode.pgoutput_golden import V1_TEXT, V2_TEXT_STREAM, V3_BINARY_ALL

from badinput.harness import Recorder, Report
from badinput.mutate import Mutator
from bridge.decode.messages import Message, Startup
from bridge.decode.pglogical import PglogicalDecoder, check_startup
from bridge.decode.pgoutput import PgoutputDecoder
from bridge.errors import ProtocolError
from bridge.source import envelope

Decode = Callable[[bytes], Message]

# proto_version 4 only changes Stream Abort: with streaming=parallel it carries the
# abort LSN and timestamp (25 bytes). No golden capture has it, so it is built here.
_STREAM_ABORT_V4 = struct.pack(">cIIQq", b"A", 737, 737, 22271632, 848630194934251)
_PGOUTPUT_TYPES = b"BCORYIUDTMSEcAbPKrp"
_PGLOGICAL_TYPES = b"SBCORIUD"


class Target(NamedTuple):
    """One decoder state: how to get a decoder in it, and when a decoder has left it."""

    name: str
    make: Callable[[], Decode]
    left: Callable[[Decode, bytes], bool]  # did decoding this input change the state?
    seeds: tuple[bytes, ...]  # golden messages valid in this state
    others: tuple[bytes, ...]  # golden messages of other states or protocol versions
    type_bytes: bytes


def _pgoutput_seeds() -> tuple[list[bytes], list[bytes]]:
    """Golden pgoutput messages split by whether they were sent inside a stream block."""
    outside: list[bytes] = [_STREAM_ABORT_V4]
    inside: list[bytes] = []
    for stream, version in ((V1_TEXT, 1), (V2_TEXT_STREAM, 2), (V3_BINARY_ALL, 3)):
        decoder = PgoutputDecoder(version)
        for hexed, _ in stream:
            data = bytes.fromhex(hexed)
            (inside if decoder.in_stream else outside).append(data)
            decoder.decode(data)
    return outside, inside


def _pgoutput(version: int, in_stream: bool, own: list[bytes], other: list[bytes]) -> Target:
    def make() -> Decode:
        return PgoutputDecoder(version, in_stream=in_stream).decode

    def left(decode: Decode, data: bytes) -> bool:
        return decode.__self__.in_stream is not in_stream  # type: ignore[attr-defined]

    state = "in-stream" if in_stream else "outside"
    return _target(f"pgoutput-v{version}-{state}", make, left, own, other, _PGOUTPUT_TYPES)


def _pglogical(
    name: str, startup: bytes | None, requested: list[tuple[str, str]], messages: list[bytes]
) -> Target:
    def make() -> Decode:
        decoder = PglogicalDecoder()
        if startup is not None:
            decoder.decode(startup)

        def decode(data: bytes) -> Message:
            # The plugin runs the startup check on every startup message it decodes.
            msg = decoder.decode(data)
            if isinstance(msg, Startup):
                check_startup(msg, requested)
            return msg

        return decode

    def left(decode: Decode, data: bytes) -> bool:
        return data[:1] == b"S"  # a (mutated) startup message may change the value kinds

    return _target(name, make, left, messages, [], _PGLOGICAL_TYPES)


def _target(
    name: str,
    make: Callable[[], Decode],
    left: Callable[[Decode, bytes], bool],
    candidates: list[bytes],
    other_states: list[bytes],
    type_bytes: bytes,
) -> Target:
    """Seeds are the candidates valid in this state; the rest count as other states'."""
    valid, invalid = [], []
    decode = make()
    for data in candidates:
        try:
            decode(data)
            valid.append(data)
        except ProtocolError:
            invalid.append(data)
        if left(decode, data):
            decode = make()
    return Target(name, make, left, tuple(valid), tuple(invalid + other_states), type_bytes)


def decoder_targets() -> list[Target]:
    outside, inside = _pgoutput_seeds()
    targets = [_pgoutput(v, False, outside, inside) for v in (1, 2, 3, 4)]
    targets += [_pgoutput(v, True, inside, outside) for v in (2, 3, 4)]
    streams = {
        "text": (TEXT_STREAM, TEXT_OPTIONS),
        "binary": (BINARY_STREAM, BINARY_OPTIONS),
        "internal": (INTERNAL_STREAM, INTERNAL_OPTIONS),
    }
    every = [bytes.fromhex(h) for stream, _ in streams.values() for h, _ in stream]
    targets.append(_pglogical("pglogical-before-startup", None, BINARY_OPTIONS, every))
    for kind, (stream, requested) in streams.items():
        startup = bytes.fromhex(stream[0][0])
        targets.append(_pglogical(f"pglogical-after-{kind}-startup", startup, requested, every))
    return targets


def run_decoders(
    targets: list[Target], inputs: int, seed: int, hang_limit_s: float = 2.0
) -> Report:
    """`inputs` generated inputs, spread evenly over `targets`.

    15% are random bytes, 10% mutate a message valid only in another state (a
    stream's records outside it and vice versa), the rest mutate one of the
    target's own messages.
    """
    rng = random.Random(seed)
    decoders = {t.name: t.make() for t in targets}
    mutators = {t.name: Mutator(rng, t.type_bytes) for t in targets}
    with Recorder(hang_limit_s) as recorder:
        for n in range(inputs):
            target = targets[n % len(targets)]
            mutator = mutators[target.name]
            roll = rng.random()
            if roll < 0.15:
                data = mutator.random_bytes()
            else:
                pool = target.others if roll < 0.25 and target.others else target.seeds
                data = mutator.mutate(rng.choice(pool), target.seeds)
            decode = decoders[target.name]
            recorder.run(target.name, decode, data)
            if target.left(decode, data):
                decoders[target.name] = target.make()
    return recorder.report


def _envelope_seeds() -> list[bytes]:
    xlog = struct.Struct(">cQQQ")
    seeds = [struct.pack(">cQQB", b"k", 22270696, 848630194933055, flag) for flag in (0, 1)]
    for hexed, _ in V1_TEXT[:8]:
        seeds.append(xlog.pack(b"w", 22270648, 22270696, 848630194933055) + bytes.fromhex(hexed))
    return seeds


def run_envelope(inputs: int, seed: int, hang_limit_s: float = 2.0) -> Report:
    """The streaming-replication envelope parser (`w` XLogData, `k` keepalive)."""
    rng = random.Random(seed)
    seeds = _envelope_seeds()
    mutator = Mutator(rng, b"wkr")
    with Recorder(hang_limit_s) as recorder:
        for _ in range(inputs):
            if rng.random() < 0.15:
                data = mutator.random_bytes()
            else:
                data = mutator.mutate(rng.choice(seeds), seeds)
            recorder.run("envelope", envelope.parse, data)
    return recorder.report
