"""The two upstream output plugins behind one small contract.

Each plugin knows its START_REPLICATION options, its decoder, and what it needs on
the server (a publication for pgoutput; a pglogical node and replication sets for
pglogical_output).
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from bridge.config import Config
from bridge.decode.messages import Message
from bridge.decode.pgoutput import PgoutputDecoder, pgoutput_options
from bridge.source import slots
from bridge.source.stream import ReplicationStream

_STREAM_START = b"S" + struct.pack(">IB", 0, 1)


class Plugin(Protocol):
    @property
    def options(self) -> Sequence[tuple[str, str]]: ...

    @property
    def decode(self) -> Callable[[bytes], Message]:
        """Payload → message (a bound method: called once per message)."""

    @property
    def decode_streamed(self) -> Callable[[bytes], Message]:
        """Decoder for buffered streamed records replayed after their stream block."""

    def after_start(self, stream: ReplicationStream) -> None: ...

    def describe(self) -> str: ...


def default_proto_version(server_version: int) -> int:
    """The highest pgoutput protocol the server speaks."""
    if server_version >= 160000:
        return 4
    if server_version >= 150000:
        return 3
    if server_version >= 140000:
        return 2
    return 1


class Pgoutput:
    def __init__(self, cfg: Config, server_version: int, conn: Any) -> None:
        src = cfg.source
        self.proto_version = src.proto_version or default_proto_version(server_version)
        slots.ensure_publication(conn, src.publication_name, src.publication_mode)
        self.options = pgoutput_options(
            self.proto_version,
            [src.publication_name],
            binary=src.binary,
            messages=src.messages,
            streaming=src.streaming,
            two_phase=src.two_phase,
            origin=src.origin,
        )
        self.decode = PgoutputDecoder(self.proto_version).decode
        # Buffered stream records are replayed outside their S…E block: a decoder
        # kept inside a stream reads their xid prefix.
        streamed = PgoutputDecoder(self.proto_version)
        if self.proto_version >= 2:
            streamed.decode(_STREAM_START)
        self.decode_streamed = streamed.decode

    def after_start(self, stream: ReplicationStream) -> None:
        return None

    def describe(self) -> str:
        return "pgoutput " + ", ".join(f"{k}={v}" for k, v in self.options)


def open_plugin(cfg: Config, server_version: int, conn: Any) -> Plugin:
    return Pgoutput(cfg, server_version, conn)
