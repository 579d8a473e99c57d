"""A reader process of the initial snapshot: COPY a chunk, encode it, send the records back.

Processes, not threads: Avro encoding is Python work that holds the GIL, so only
separate interpreters read and encode in parallel. A reader imports the exported
snapshot, builds its own encoders from the schema ids its parent registered
(`Registry.known`: no registry round trip, nor its client's imports), and answers
each `Chunk` it receives with
`("chunk", chunk, packed, last_value)`, where `packed` holds its records as
`copyrows.CopyRows` packs them and `last_value` is the chunk's final
record encoded again with `source.snapshot = "last"`. It never writes progress:
only the parent, once Kafka confirmed a chunk, records it. A reader ends when its
pipes close, so it does not outlive a parent killed with SIGKILL.

Started as `python -m bridge.snapshot.worker` with two pipe descriptors rather than
through multiprocessing: spawning would re-run the parent's main module, which
breaks any program embedding the pipeline without a `__main__` guard. The parent starts
it before it has anything to send (its first message may be `None`: stop), so the
interpreter's start and imports overlap the parent's own set-up.
"""

from __future__ import annotations

import ctypes
import signal
import sys
from multiprocessing.connection import Connection

from bridge import log
from bridge.config import Config
from bridge.errors import BridgeError
from bridge.kafka.registry import KnownSchemas, open_registry
from bridge.snapshot.catalog import SnapshotTable
from bridge.snapshot.reader import (
    build_jobs,
    connect,
    import_snapshot,
    read_records,
    snapshot_source,
)
from bridge.source import libpq

_PR_SET_PDEATHSIG = 1


def main(argv: list[str]) -> None:
    """`python -m bridge.snapshot.worker IN_FD OUT_FD`: serve chunks until told to stop."""
    inbox = Connection(int(argv[0]), writable=False)
    outbox = Connection(int(argv[1]), readable=False)
    _die_with_parent()
    # A terminal's Ctrl-C or a service manager's SIGTERM may reach the whole process group:
    # the parent alone stops the snapshot, gracefully, and then stops its readers.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    try:
        args = inbox.recv()
        if args is None:
            return
        cfg, snapshot_name, tables, lsn, known = args
        log.setup(cfg.log.level, cfg.log.format, cfg.secrets())
        _serve(cfg, snapshot_name, tables, lsn, known, inbox, outbox)
    except (EOFError, BrokenPipeError):
        return  # the parent is gone
    except BaseException as exc:
        message = str(exc) if isinstance(exc, BridgeError) else f"{type(exc).__name__}: {exc}"
        try:
            outbox.send(("error", message.strip()))
        except OSError:
            return


def _serve(
    cfg: Config,
    snapshot_name: str,
    tables: list[SnapshotTable],
    lsn: int,
    known: KnownSchemas,
    inbox: Connection,
    outbox: Connection,
) -> None:
    conninfo = cfg.source.conninfo()
    conn = connect(conninfo)
    import_snapshot(conn, snapshot_name)
    catalog_conn = libpq.connect(conninfo, replication=False)
    jobs = build_jobs(cfg, catalog_conn, tables, open_registry(cfg, known))
    prefix, db = cfg.kafka.topic_prefix, cfg.source.dbname
    source = snapshot_source(prefix, db, lsn, "true")
    last_source = snapshot_source(prefix, db, lsn, "last")
    outbox.send(("ready",))
    try:
        while True:
            chunk = inbox.recv()
            if chunk is None:
                return
            job = jobs[chunk.table]
            packed, last = read_records(conn, job, chunk, source)
            last_value = None if last is None else job.encoder.records(last, last_source)[0].value
            outbox.send(("chunk", chunk, packed, last_value))
    finally:
        conn.close()
        catalog_conn.close()


def _die_with_parent() -> None:
    """Linux: SIGKILL this process when the parent dies, even mid-query."""
    if sys.platform.startswith("linux"):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


if __name__ == "__main__":
    main(sys.argv[1:])
