"""Live replication through the real path: source → plugin decoder → EventAssembler.

`LiveSource` wires the production pieces exactly as `bridge.pipeline.Pipeline`
does (libpq connections, `open_plugin`, `ensure_slot`, `start_replication`,
`ReplicationStream`, `EventAssembler`), minus Kafka. Tests make changes with
their own connection, then `collect()` events until a transaction commits.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from encode.oracle import Oracle
from waiting import wait_for

from bridge.config import Config
from bridge.decode.messages import Relation, TupleData
from bridge.encoders import load_table_details
from bridge.events.assembler import EventAssembler
from bridge.events.model import Change, Event, TxBegin, TxCommit
from bridge.lsn import LSN
from bridge.plugins import Plugin, open_plugin
from bridge.schema.catalog import PgCatalog
from bridge.schema.pgtypes import CodecOptions
from bridge.schema.table import TableCodec
from bridge.source import libpq, slots
from bridge.source.status import StatusTracker
from bridge.source.stream import ReplicationStream

Open = Callable[..., "LiveSource"]
"""The `open_source` fixtures: a LiveSource with these `source` settings, closed after the test."""


def source_config(stack: Any, dbname: str, **source: Any) -> Config:
    return Config(
        source={
            "host": stack.pg_host,
            "port": stack.pg_port,
            "dbname": dbname,
            "user": stack.pg_user,
            "password": stack.pg_password,
            "status_interval_s": 1.0,
            **source,
        }
    )


class LiveSource:
    """One slot streamed from its creation point; closed by `close()`."""

    def __init__(self, cfg: Config, spill_dir: Path) -> None:
        src = cfg.source
        self.cfg = cfg
        self.catalog = libpq.connect(src.conninfo(), replication=False)
        self.rc = libpq.ReplicationConnection(libpq.connect(src.conninfo(), replication=True))
        self.server_version = slots.check_prerequisites(self.rc)
        self.plugin: Plugin = open_plugin(cfg, self.server_version, self.catalog)
        slot = slots.ensure_slot(
            self.rc, src.slot_name, src.plugin, create=True, two_phase=src.two_phase
        )
        slots.start_replication(
            self.rc,
            src.slot_name,
            slot.confirmed_flush or LSN(0),
            self.plugin.options,
            busy_timeout_s=10,
        )
        self.stream = ReplicationStream(self.rc, StatusTracker(src.status_interval_s))
        self.assembler = EventAssembler(
            decode=self.plugin.decode,
            decode_streamed=self.plugin.decode_streamed,
            spill_dir=spill_dir,
            memory_limit_bytes=64 * 1024,  # small: streamed transactions really spill
        )
        self.messages: list[Any] = []  # every decoded message, for protocol-level checks
        self._codecs: dict[Relation, TableCodec] = {}

    def collect(self, timeout: float = 30.0) -> list[Event]:
        """Events up to and including the next TxCommit; fails after `timeout` seconds."""
        events: list[Event] = []
        decode, feed = self.plugin.decode, self.assembler.feed

        def committed() -> bool:
            data = self.stream.read(0.5)
            if data is None:
                return False
            raw = data.payload
            msg = decode(raw)
            self.messages.append(msg)
            for event in feed(msg, raw, data.wal_start, data.wal_end):
                events.append(event)
                if type(event) is TxCommit:
                    self.stream.confirm(event.end_lsn)
                    return True
            return False

        wait_for(committed, timeout, "a TxCommit", every=0, detail=lambda: f"got {events[-5:]}")
        return events

    def close(self) -> None:
        self.assembler.close()
        try:
            self.stream.close()
        finally:
            self.catalog.close()

    def codec(self, relation: Relation) -> TableCodec:
        """The schema layer's view of `relation`, to turn tuples into Python values."""
        codec = self._codecs.get(relation)
        if codec is None:
            codec = TableCodec(
                relation,
                PgCatalog(self.catalog),
                load_table_details(self.catalog, relation.oid),
                CodecOptions(interval_mode="record"),  # the tests compare interval fields
                "live",
            )
            self._codecs[relation] = codec
        return codec

    def row(
        self, change: Change, which: str = "new", unchanged: list[str] | None = None
    ) -> dict[str, Any]:
        """The tuple's values as the encoder's converters read them; the names of
        unchanged TOASTed columns go to `unchanged`."""
        assert change.relation is not None
        data = change.new if which == "new" else change.old
        assert data is not None, f"{change.op} change has no {which} tuple"
        return Oracle(self.codec(change.relation), None, 0).row(data, unchanged)


def changes(events: list[Event]) -> list[Change]:
    return [e for e in events if type(e) is Change]


def one_transaction(events: list[Event]) -> list[Change]:
    """The changes of `events`, checking they form exactly one TxBegin … TxCommit."""
    assert type(events[0]) is TxBegin and type(events[-1]) is TxCommit, events
    assert sum(type(e) is TxBegin for e in events) == 1, events
    return changes(events)


def table(change: Change) -> str:
    assert change.relation is not None, change
    return change.relation.name


def text(data: TupleData | None) -> list[str | None]:
    """Text-format tuple values as str (None for null or unchanged)."""
    assert data is not None
    return [None if v is None else v.decode() for v in data.values]
