"""What the encoder's unit tests share: one transaction's source block, a change's records
checked byte for byte against the fastavro oracle and read back, and numeric's binary form
built by hand. The frozen clock those comparisons need is the `frozen_clock` fixture
(tests/encode/conftest.py)."""

from __future__ import annotations

import io
import struct
from typing import Any

import fastavro

from bridge.decode.messages import Relation, TupleData
from bridge.encode.records import ChangeEncoder, SourceBlock, TxSource
from bridge.events.model import Change
from bridge.record import KafkaRecord
from bridge.schema.table import TableCodec
from encode.oracle import Oracle

BLOCK = SourceBlock("srv", "shop", "9.9")
TX = TxSource(BLOCK, 731, 0x1_0000_0028, 0)
TOPIC = "srv.public.t"  # of every record the tests encode
NUMERIC_NAN = struct.pack(">hhHh", 0, 0, 0xC000, 0)  # numeric_send of NaN


def change(
    relation: Relation,
    op: str,
    old: TupleData | None,
    new: TupleData | None,
    old_kind: str = "",
) -> Change:
    """A change of `relation` at LSN 0, its relation version the only one."""
    return Change(op, relation, old_kind, old, new, 0, (relation,), 0, None)


def insert(relation: Relation, kind: int, row: tuple[bytes, ...]) -> Change:
    """An insert of `row`, every value of one wire kind (text or binary)."""
    return change(relation, "c", None, TupleData(bytes([kind] * len(row)), row))


def checked_records(table: TableCodec, c: Change) -> list[KafkaRecord]:
    """The encoder's records of `c`, asserted equal byte for byte to the oracle's."""
    got = ChangeEncoder(table, 7, 8, topic=TOPIC).records(c, TX)
    assert got == Oracle(table, 7, 8, topic=TOPIC).records(c, TX)
    return got


def envelope_of(table: TableCodec, value: bytes | None) -> Any:
    """A record's value read back by fastavro on the envelope schema, logical types applied."""
    assert value is not None
    return fastavro.schemaless_reader(
        io.BytesIO(value[5:]), fastavro.parse_schema(table.envelope_schema)
    )


def numeric_binary(unscaled: int, dscale: int) -> bytes:
    """numeric_send of unscaled * 10**-dscale: base-10000 digits around the point."""
    groups = (dscale + 3) // 4
    rest = abs(unscaled) * 10 ** (groups * 4 - dscale)
    digits: list[int] = []
    while rest:
        digits.insert(0, rest % 10_000)
        rest //= 10_000
    weight = len(digits) - groups - 1
    while digits and digits[-1] == 0:
        digits.pop()
    sign = 0x4000 if unscaled < 0 else 0
    head = struct.pack(">hhHh", len(digits), weight if digits else 0, sign, dscale)
    return head + struct.pack(f">{len(digits)}h", *digits)
