"""CPU per single-row transaction on the data path, no servers: a count to compare across
machines and commits with callgrind.

    python bench/pertxn.py [--transactions 20000] [--rows 1]
    valgrind --tool=callgrind python bench/pertxn.py --transactions 2000   # then 4000:
    # (Ir at 4000 - Ir at 2000) / 2000 = instructions per transaction, start-up removed
    # --rows 100: transactions of 100 inserts, (Ir difference) / rows = per row

pgoutput bytes (Begin, `--rows` Inserts, Commit per transaction, bench/encode.py's
10-column row) go through what the pipeline runs for each: PgoutputDecoder, EventAssembler,
a new TxSource, ChangeEncoder.records, the AckTracker's open/close and the commit times
kept for the source-lag metric (`Metrics.commits`). The
pipeline's own dispatch, librdkafka and the socket are left out: they are the same for
every commit, and out of reach of callgrind's determinism. Single-row transactions are
the case where per-transaction work (the source block, the ack bookkeeping) weighs most.
"""

from __future__ import annotations

import argparse
import struct
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from encode import RELATION, text_rows  # bench/encode.py

from bridge.decode.messages import TupleData
from bridge.decode.pgoutput import PgoutputDecoder
from bridge.encode.records import ChangeEncoder, SourceBlock, TxSource
from bridge.events.assembler import EventAssembler
from bridge.events.model import Change, TxBegin, TxCommit
from bridge.kafka.acks import AckTracker, TxHandle
from bridge.metrics import Metrics
from bridge.schema import DEFAULT_OPTIONS, StaticCatalog
from bridge.schema.table import TableCodec, TableDetails

_WARM = 200  # transactions before the clock starts: relation, encoder and caches built


def _cstring(text: str) -> bytes:
    return text.encode() + b"\0"


def _relation() -> bytes:
    columns = b"".join(
        bytes([c.flags]) + _cstring(c.name) + struct.pack(">Ii", c.type_oid, c.typmod)
        for c in RELATION.columns
    )
    head = b"R" + struct.pack(">I", RELATION.oid) + _cstring(RELATION.namespace)
    return (
        head + _cstring(RELATION.name) + b"d" + struct.pack(">H", len(RELATION.columns)) + columns
    )


def _insert(row: TupleData) -> bytes:
    out = b"I" + struct.pack(">I", RELATION.oid) + b"N" + struct.pack(">H", len(row.values))
    for value in row.values:
        raw = value.encode() if isinstance(value, str) else bytes(value or b"")
        out += b"t" + struct.pack(">I", len(raw)) + raw
    return out


def messages(transactions: int, rows: int = 1) -> list[bytes]:
    """pgoutput (protocol 1) payloads: one Relation, then the transactions of `rows`
    inserts each."""
    inserts = [_insert(row) for row in text_rows(2000)]
    out = [_relation()]
    lsn = 0x1_0000_0000
    for i in range(transactions):
        lsn += 300
        ts = 800_000_000_000_000 + i
        out.append(b"B" + struct.pack(">QqI", lsn, ts, 1000 + i))
        out.extend(inserts[(i * rows + r) % len(inserts)] for r in range(rows))
        out.append(b"C" + struct.pack(">BQQq", 0, lsn, lsn + 100, ts))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--transactions", type=int, default=20_000)
    parser.add_argument("--rows", type=int, default=1, help="inserts per transaction")
    args = parser.parse_args()
    decoder = PgoutputDecoder(1)
    with tempfile.TemporaryDirectory(prefix="bench-pertxn-") as spill:
        assembler = EventAssembler(
            decode=decoder.decode,
            decode_streamed=decoder.decode,
            spill_dir=spill,
            memory_limit_bytes=64 << 20,
        )
        details = TableDetails(("id",), {})
        encoder = ChangeEncoder(
            TableCodec(RELATION, StaticCatalog(), details, DEFAULT_OPTIONS, "b"),
            1,
            2,
            topic="bench",
        )
        block = SourceBlock("bench", "bench", "bench")
        tracker, metrics = AckTracker(0), Metrics()
        sizes: list[int] = []
        handle: TxHandle | None = None
        source: TxSource | None = None

        def run(payloads: list[bytes]) -> None:
            nonlocal handle, source
            for raw in payloads:
                for event in assembler.feed(decoder.decode(raw), raw, 0, 0):
                    match event:
                        case Change():
                            assert handle is not None and source is not None
                            for record in encoder.records(event, source):
                                handle.add_record(len(record.value or b""))
                                sizes.append(len(record.key or b""))
                        case TxBegin():
                            handle = tracker.open_tx()
                            source = TxSource(block, event.xid, event.commit_lsn, event.commit_ts)
                        case TxCommit():
                            assert handle is not None
                            tracker.close_tx(handle, event.end_lsn)
                            metrics.commits.committed(event.end_lsn, event.commit_ts)
                if len(sizes) > 1000:
                    sizes.clear()

        warm = 1 + (2 + args.rows) * _WARM
        payloads = messages(_WARM + args.transactions, args.rows)
        run(payloads[:warm])
        start = time.process_time()
        run(payloads[warm:])
        cpu = time.process_time() - start
    print(
        f"{args.transactions} transactions of {args.rows} rows: "
        f"{cpu / args.transactions * 1e6:.2f} CPU-us each, "
        f"{cpu / (args.transactions * args.rows) * 1e6:.2f} per row"
    )


if __name__ == "__main__":
    main()
