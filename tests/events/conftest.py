"""Hand-built messages and a fake decoder: the raw payload is the pickled message."""

from __future__ import annotations

import pickle
from collections.abc import Callable, Iterable
from pathlib import Path

import pytest

from bridge.decode.messages import (
    Column,
    Delete,
    Insert,
    LogicalMessage,
    Message,
    Relation,
    Truncate,
    TupleData,
    TypeMessage,
    Update,
)
from bridge.events import Event, EventAssembler

RELID = 16384
REL = Relation(None, RELID, "public", "t", "d", (Column(1, "id", 23, -1),))
REL_V2 = REL._replace(columns=(*REL.columns, Column(0, "note", 25, -1)))
OTHER = Relation(None, 16390, "app", "u", "f", (Column(1, "k", 20, -1),))

_ROWS = (Relation, TypeMessage, Insert, Update, Delete, Truncate, LogicalMessage)


def row(*values: bytes) -> TupleData:
    return TupleData(b"t" * len(values), values)


def ins(value: bytes, xid: int | None = None, relid: int = RELID) -> Insert:
    return Insert(xid, relid, row(value))


def raw(msg: Message) -> bytes:
    return pickle.dumps(msg)


def decode_plain(data: bytes) -> Message:
    """The decoder outside stream blocks: row-level messages carry no xid."""
    msg: Message = pickle.loads(data)
    assert not isinstance(msg, _ROWS) or msg.xid is None, "streamed record given to decode"
    return msg


def decode_streamed(data: bytes) -> Message:
    """The decoder inside stream blocks: row-level messages carry the (sub)xid."""
    msg: Message = pickle.loads(data)
    assert isinstance(msg, _ROWS) and msg.xid is not None, "plain record given to stream decode"
    return msg


def feed(asm: EventAssembler, *msgs: Message, wal_end: int = 0, wal_start: int = 0) -> list[Event]:
    """Feed messages in order, consuming each returned iterable before the next feed;
    all at XLogData start `wal_start`."""
    out: list[Event] = []
    for msg in msgs:
        out.extend(asm.feed(msg, raw(msg), wal_start, wal_end))
    return out


def spill_files(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir()) if directory.exists() else []


@pytest.fixture
def spill_dir(tmp_path: Path) -> Path:
    return tmp_path / "spill" / "nested"


@pytest.fixture
def make(spill_dir: Path) -> Iterable[Callable[..., EventAssembler]]:
    made: list[EventAssembler] = []

    def factory(memory_limit_bytes: int = 1 << 20) -> EventAssembler:
        asm = EventAssembler(
            decode=decode_plain,
            decode_streamed=decode_streamed,
            spill_dir=spill_dir,
            memory_limit_bytes=memory_limit_bytes,
        )
        made.append(asm)
        return asm

    yield factory
    for asm in made:
        asm.close()
