"""Seeded fuzz campaigns against both decoders and the replication envelope parser.

A small, deterministic slice of bench/fuzz.py (which runs 1M+ inputs): only
ProtocolError may escape, no input may hang, and no input may take long. The
time bound is on thread CPU time with a wide margin (50 ms against well under
1 ms typical), so a busy machine cannot fail it, while a decoder loop sized by an
unchecked length (65535 columns, 4 GiB values) would.
"""

from __future__ import annotations

from typing import NoReturn

import pytest

from badinput.campaign import Target, decoder_targets, run_decoders, run_envelope
from badinput.harness import Recorder
from badinput.mutate import length_fields
from bridge.decode.pgoutput import PgoutputDecoder
from bridge.errors import ProtocolError

MAX_CPU_NS_PER_INPUT = 1_000_000_000  # a hang guard, not a speed check: a GC pause once took 105 ms


def test_decoders_survive_a_seeded_campaign() -> None:
    targets = decoder_targets()
    report = run_decoders(targets, 55_000, seed=20240601)
    assert not report.crashes, "\n".join(report.crash_lines())
    assert report.max_ns < MAX_CPU_NS_PER_INPUT, report.summary()
    assert set(report.outcomes) == {"returned", "ProtocolError"}, report.summary()
    assert set(report.per_target) == {t.name for t in targets}
    assert min(report.per_target.values()) == 5_000


def test_envelope_survives_a_seeded_campaign() -> None:
    report = run_envelope(20_000, seed=20240602)
    assert not report.crashes, "\n".join(report.crash_lines())
    assert report.max_ns < MAX_CPU_NS_PER_INPUT, report.summary()
    assert set(report.outcomes) == {"returned", "ProtocolError"}, report.summary()


def test_targets_cover_every_decoder_state() -> None:
    names = {t.name for t in decoder_targets()}
    assert {f"pgoutput-v{v}-outside" for v in (1, 2, 3, 4)} <= names
    assert {f"pgoutput-v{v}-in-stream" for v in (2, 3, 4)} <= names
    assert {"pglogical-before-startup", "pglogical-after-binary-startup"} <= names


def test_seeds_are_valid_in_their_state() -> None:
    """The campaign mutates real messages: each seed decodes in its target's state."""
    for target in decoder_targets():
        decode = target.make()
        for seed in target.seeds:
            decode(seed)
            if target.left(decode, seed):
                decode = target.make()


@pytest.mark.parametrize(
    ("message", "why"),
    [
        (b"I\x00\x00@\x07N\xff\xff" + b"n" * 10, "65535 columns announced, 10 sent"),
        (b"I\x00\x00@\x07N\x00\x01t\xff\xff\xff\xff", "a 4 GiB value in a 12-byte message"),
        (b"T\xff\xff\xff\xff\x00\x00\x00@\x07", "4294967295 truncated relations"),
        (b"R\x00\x00@\x07public\x00t\x00d\xff\xff", "65535 columns, none sent"),
        (b"M\x01" + bytes(8) + b"p\x00\xff\xff\xff\xff", "a 4 GiB logical message"),
    ],
)
def test_huge_counts_are_refused_at_once(message: bytes, why: str) -> None:
    with pytest.raises(ProtocolError):
        PgoutputDecoder(1).decode(message)


def test_length_fields_finds_the_tuple_value_lengths() -> None:
    insert = b"I\x00\x00@\x07N\x00\x02t\x00\x00\x00\x01" + b"1" + b"t\x00\x00\x00\x02ab"
    fields = length_fields(insert)
    assert (6, 2) in fields  # column count
    assert (9, 4) in fields and (15, 4) in fields  # value lengths


def _forever(data: bytes) -> NoReturn:
    while True:
        pass


def _index_error(data: bytes) -> NoReturn:
    raise IndexError("a bug")


def test_the_harness_reports_hangs_and_crashes() -> None:
    """The campaign's verdict is only worth something if it can fail."""
    with Recorder(hang_limit_s=0.2) as recorder:
        recorder.run("loop", _forever, b"x")
        recorder.run("bug", _index_error, b"y")
        recorder.run("ok", len, b"z")
    report = recorder.report
    assert report.outcomes == {"hang": 1, "crash:IndexError": 1, "returned": 1}
    assert [(name, data) for name, data, _ in report.crashes] == [("loop", b"x"), ("bug", b"y")]


def test_a_crashing_decoder_fails_the_campaign() -> None:
    broken = Target("broken", lambda: _index_error, lambda d, b: False, (b"B" * 21,), (), b"B")
    report = run_decoders([broken], 10, seed=1)
    assert report.outcomes == {"crash:IndexError": 10}
