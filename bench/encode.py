"""Avro encode rate for a 10-column row, through the real serializer; CPU only, no stack.

    python bench/encode.py                # 200k rows, best of 3 runs per line
    python bench/encode.py --rows 50000 --repeat 1

Rates are per CPU second of this process (time.process_time), so other load on the
machine inflates them less than wall-clock rates would.

Rows are text-mode TupleData (what pgoutput sends by default) for a table of int,
bigint, text, numeric(12,2), timestamptz, bool, jsonb, uuid, float8 and date. Lines:

  records   ChangeEncoder.records on an insert: the whole Debezium envelope
            (before/after/source/op/ts_ms/...) and the key, both framed, by the one
            encoder of the table version (bridge/encode/plan.py) the pipeline uses
  defaulted the `records` line for the table whose columns were all added with a
            DEFAULT (each field a [T, "null"] union with the first row's values as
            defaults, as the catalog's attmissingval makes them)
  convert   the column converters alone (PostgreSQL text -> Python values, a dict)
  envelope  fastavro schemaless_writer of the envelope for already converted rows
  flat      fastavro schemaless_writer of the converted row as a flat record (the
            row's own schema, no envelope): the floor for any fastavro-based writer
  avro      the `envelope` line with bridge/encode/avro.py's compiled writer instead
"""

from __future__ import annotations

import argparse
import io
import random
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from fastavro import parse_schema, schemaless_writer

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bridge.decode.messages import KIND_TEXT, Column, Relation, TupleData
from bridge.encode.avro import compile_writer
from bridge.encode.columns import codec_of
from bridge.encode.defaults import missing_defaults, without_key
from bridge.encode.records import ChangeEncoder, SourceBlock, TxSource
from bridge.events.model import Change
from bridge.schema import DEFAULT_OPTIONS, StaticCatalog
from bridge.schema.table import TableCodec, TableDetails

NUMERIC_12_2 = ((12 << 16) | 2) + 4
COLUMNS = (
    ("id", 23, -1),
    ("big", 20, -1),
    ("label", 25, -1),
    ("amount", 1700, NUMERIC_12_2),
    ("created", 1184, -1),
    ("active", 16, -1),
    ("doc", 3802, -1),
    ("ref", 2950, -1),
    ("score", 701, -1),
    ("day", 1082, -1),
)
RELATION = Relation(
    None,
    16384,
    "public",
    "bench",
    "d",
    tuple(Column(1 if name == "id" else 0, name, oid, typmod) for name, oid, typmod in COLUMNS),
)


def text_rows(n: int, seed: int = 1) -> list[TupleData]:
    """PostgreSQL's text output for n plausible rows."""
    rng = random.Random(seed)
    rows = []
    for i in range(n):
        values = (
            str(i),
            str(rng.getrandbits(62)),
            f"customer {rng.randrange(10**6)} of the bench",
            f"{rng.randrange(10**9)}.{rng.randrange(100):02d}",
            f"2024-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d} "
            f"{rng.randrange(24):02d}:{rng.randrange(60):02d}:{rng.randrange(60):02d}"
            f".{rng.randrange(10**6):06d}+00",
            rng.choice(("t", "f")),
            f'{{"k": {rng.randrange(1000)}, "tags": ["a", "b"]}}',
            str(uuid.UUID(int=rng.getrandbits(128))),
            repr(rng.random() * 1e6),
            f"20{rng.randint(10, 30)}-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}",
        )
        rows.append(TupleData(bytes([KIND_TEXT]) * len(values), tuple(v.encode() for v in values)))
    return rows


def best_rate(n: int, repeat: int, run: Callable[[], object]) -> float:
    best = float("inf")
    for _ in range(repeat):
        start = time.process_time()
        run()
        best = min(best, time.process_time() - start)
    return n / best


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)
    n = args.rows

    details = TableDetails(("id",), {})
    table = TableCodec(RELATION, StaticCatalog(), details, DEFAULT_OPTIONS, "b")
    encoder = ChangeEncoder(table, 1, 2, topic="bench")
    assert table.key_schema is not None
    tx = TxSource(SourceBlock("b", "bench", "bench"), 1234, 0x1_0000_0000, 0)
    rows = text_rows(n)
    relation, keyless = without_key(RELATION, details)
    first = zip(RELATION.columns, rows[0].values, strict=True)
    missing = {column.name: (v or b"").decode() for column, v in first}
    defaults = missing_defaults(
        TableCodec(relation, StaticCatalog(), keyless, DEFAULT_OPTIONS, "b"), missing
    )
    defaulted = ChangeEncoder(
        TableCodec(RELATION, StaticCatalog(), details, DEFAULT_OPTIONS, "b", defaults=defaults),
        1,
        2,
        topic="bench",
    )
    changes = [Change("c", RELATION, "", None, row, i, (), 0, None) for i, row in enumerate(rows)]
    parsers = [
        (name, codec_of(t).text) for name, t in zip(table.field_names, table.types, strict=True)
    ]

    def row_of(r: TupleData) -> dict[str, Any]:
        return {
            name: None if v is None else parse(v)
            for (name, parse), v in zip(parsers, r.values, strict=True)
        }

    converted = [row_of(r) for r in rows]
    envelope_schema = parse_schema(table.envelope_schema)
    flat_schema = parse_schema(table.envelope_schema["fields"][0]["type"][1])
    source = {**tx.base, "schema": "public", "table": "bench"}
    size = sum(len(r.value or b"") for r in encoder.records(changes[0], tx)) if changes else 0

    def records(using: ChangeEncoder) -> None:
        for change in changes:
            using.records(change, tx)

    def convert() -> None:
        for r in rows:
            row_of(r)

    def write_all(schema: Any, data: list[Any]) -> None:
        buf = io.BytesIO()
        for datum in data:
            buf.seek(0)
            schemaless_writer(buf, schema, datum)

    envelopes: list[Any] = [
        {
            "before": None,
            "after": (table.row_name, row),
            "source": source,
            "op": "c",
            "ts_ms": 0,
            "transaction": None,
            "unchanged_fields": None,
            "special_values": None,
        }
        for row in converted
    ]
    fast_envelope = compile_writer(table.envelope_schema)
    for datum in envelopes[:1000]:  # same bytes, or the comparison is meaningless
        buf = io.BytesIO()
        schemaless_writer(buf, envelope_schema, datum)
        assert fast_envelope(datum) == buf.getvalue()
    lines = {
        "records": best_rate(n, args.repeat, lambda: records(encoder)),
        "defaulted": best_rate(n, args.repeat, lambda: records(defaulted)),
        "convert": best_rate(n, args.repeat, convert),
        "envelope": best_rate(n, args.repeat, lambda: write_all(envelope_schema, envelopes)),
        "flat": best_rate(n, args.repeat, lambda: write_all(flat_schema, converted)),
        "avro": best_rate(n, args.repeat, lambda: list(map(fast_envelope, envelopes))),
    }
    print(f"python {sys.version.split()[0]}, {n} rows, best of {args.repeat}, CPU time")
    print(f"one insert = key + value, {size} bytes framed")
    for name, rate in lines.items():
        print(f"{name:18} {rate:>10,.0f} records/s  {1e6 / rate:6.2f} µs/record")


if __name__ == "__main__":
    main()
