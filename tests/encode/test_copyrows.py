"""COPY output → records: the framing read, the values left to the stream's encoder.

Pure unit tests on hand-built COPY bytes; tests/snapshot/test_reader.py shows against a
real server that COPY's values are pgoutput's, byte for byte.
"""

from __future__ import annotations

import io
import itertools
import struct
from typing import Any

import fastavro
import pytest
from hypothesis import given
from hypothesis import strategies as st

from bridge.decode.messages import KIND_BINARY, KIND_TEXT, Column, Relation, TupleData
from bridge.encode.copyrows import (
    BINARY_SIGNATURE,
    CopyRows,
    binary_start,
    read_binary_row,
    read_text_row,
    text_lines,
    unpack_records,
)
from bridge.encode.records import ChangeEncoder, SourceBlock, TxSource
from bridge.errors import ProtocolError
from bridge.events.model import Change
from bridge.record import KafkaRecord
from bridge.schema import DEFAULT_OPTIONS, StaticCatalog
from bridge.schema.table import TableCodec, TableDetails
from encode.support import TOPIC

RELATION = Relation(
    None, 16384, "public", "items", "d", (Column(1, "id", 20, -1), Column(0, "body", 25, -1))
)
TABLE = TableCodec(RELATION, StaticCatalog(), TableDetails(("id",), {}), DEFAULT_OPTIONS, "srv")
SNAPSHOT_LSN = 0x1_0000_0028
TX = TxSource(SourceBlock("srv", "shop", "9.9", "true"), None, SNAPSHOT_LSN, 0)
ENVELOPE = fastavro.parse_schema(TABLE.envelope_schema)
KEY = fastavro.parse_schema(TABLE.key_schema or {})
HEADER = BINARY_SIGNATURE + struct.pack(">ii", 0, 0)
TRAILER = struct.pack(">h", -1)
BINARY_KINDS = bytes((KIND_BINARY,)) * 2
TEXT_KINDS = bytes((KIND_TEXT,)) * 2


def encoder() -> ChangeEncoder:
    return ChangeEncoder(TABLE, 7, 8, topic=TOPIC)


def binary_row(*values: bytes | None) -> bytes:
    out = struct.pack(">h", len(values))
    for v in values:
        out += struct.pack(">i", -1) if v is None else struct.pack(">i", len(v)) + v
    return out


def int8(n: int) -> bytes:
    return struct.pack(">q", n)


def copy_records(
    data: bytes, binary: bool, blocks: int = 1, table: ChangeEncoder | None = None
) -> tuple[list[KafkaRecord], Change | None]:
    """`data`'s records, fed to `CopyRows` whole or cut into `blocks` at row boundaries
    (binary COPY's header and first row together, as the server sends them), unpacked
    as the producing process unpacks them."""
    encoding = table or encoder()
    rows = CopyRows(binary, encoding, TX)
    for block in cut(data, binary, blocks):
        rows.feed(block)
    packed, last = rows.finish()
    return unpack_records(packed, encoding.topic), last


def cut(data: bytes, binary: bool, blocks: int) -> list[bytes]:
    if blocks == 1:
        return [data]
    ends: list[int] = []
    if binary:
        pos = binary_start(data)
        while pos < len(data):
            _, pos = read_binary_row(data, pos, BINARY_KINDS)
            ends.append(pos)
    else:
        ends = [i + 1 for i, byte in enumerate(data) if byte == ord("\n")]
    step = max(1, -(-len(ends) // blocks))
    starts = [0, *ends[step - 1 :: step]]
    if starts[-1] != len(data):
        starts.append(len(data))
    return [data[a:b] for a, b in itertools.pairwise(starts)]


def decoded(records: list[KafkaRecord]) -> list[tuple[Any, str, Any, int]]:
    """(key, op, after, source.lsn) of each record."""
    out = []
    for record in records:
        key, value = record.key, record.value
        assert key is not None and value is not None and record.headers is None
        env: Any = fastavro.schemaless_reader(io.BytesIO(value[5:]), ENVELOPE)
        k: Any = fastavro.schemaless_reader(io.BytesIO(key[5:]), KEY)
        assert env["source"]["snapshot"] == "true"
        out.append((k, env["op"], env["after"], env["source"]["lsn"]))
    return out


def test_binary_rows_are_encoded_as_the_streams_binary_tuples() -> None:
    data = HEADER + binary_row(int8(1), "ä\tb".encode()) + binary_row(int8(2), None) + TRAILER
    records, last = copy_records(data, True)
    assert decoded(records) == [
        ({"id": 1}, "r", {"id": 1, "body": "ä\tb"}, SNAPSHOT_LSN),
        ({"id": 2}, "r", {"id": 2, "body": None}, SNAPSHOT_LSN),
    ]
    new = TupleData(b"bn", (int8(2), None))
    assert last == Change("r", RELATION, "", None, new, 0, (), 0, None, SNAPSHOT_LSN)
    # what the stream writes for the same binary tuple, the clock's ts_ms aside
    assert without_ts(encoder().records(last, TX)) == without_ts(records[1:])


def without_ts(records: list[KafkaRecord]) -> list[tuple[bytes | None, dict[str, Any]]]:
    out = []
    for record in records:
        key, value = record.key, record.value
        assert value is not None
        env: Any = fastavro.schemaless_reader(io.BytesIO(value[5:]), ENVELOPE)
        del env["ts_ms"]
        out.append((key, env))
    return out


def test_text_rows_are_unescaped_and_null_is_backslash_n() -> None:
    data = b"1\ta\\tb\\\\c\\nd\\re\\bf\\fg\\vh\n2\t\\N\n3\t\\\\N\n4\tplain\n"
    records, last = copy_records(data, False)
    assert [after for _, _, after, _ in decoded(records)] == [
        {"id": 1, "body": "a\tb\\c\nd\re\bf\fg\vh"},
        {"id": 2, "body": None},
        {"id": 3, "body": "\\N"},
        {"id": 4, "body": "plain"},
    ]
    assert last is not None and last.new == TupleData(TEXT_KINDS, (b"4", b"plain"))


def test_text_row_kinds_mark_nulls() -> None:
    assert text_lines(b"x\n\\N\t5\n") == [b"x", b"\\N\t5"]
    assert read_text_row(b"\\N\t5", 2, TEXT_KINDS) == TupleData(b"nt", (None, b"5"))


def test_binary_header_extension_is_skipped() -> None:
    data = BINARY_SIGNATURE + struct.pack(">ii", 0, 3) + b"ext" + binary_row(int8(1), b"") + TRAILER
    pos = binary_start(data)
    assert pos == len(HEADER) + 3
    row, pos = read_binary_row(data, pos, BINARY_KINDS)
    assert row == TupleData(BINARY_KINDS, (int8(1), b""))
    assert read_binary_row(data, pos, BINARY_KINDS) == (None, len(data))


def test_empty_output_has_no_records() -> None:
    assert copy_records(HEADER + TRAILER, True) == ([], None)
    assert copy_records(b"", False) == ([], None)


@pytest.mark.parametrize(
    ("data", "binary", "reason"),
    [
        (b"PGCOPY\n\xff\r\n\x01" + bytes(8) + TRAILER, True, "no binary COPY signature"),
        (BINARY_SIGNATURE + bytes(4), True, "truncated binary COPY header"),
        (BINARY_SIGNATURE + struct.pack(">ii", 1 << 16, 0) + TRAILER, True, "rows with OIDs"),
        (HEADER + binary_row(int8(1)) + TRAILER, True, "a row of 1 fields, expected 2"),
        (HEADER + binary_row(int8(1), b"abc")[:-1], True, "runs past the data"),
        (HEADER + binary_row(int8(1), b"abc")[:4], True, "truncated binary COPY field"),
        (HEADER + binary_row(int8(1), b"a")[:1], True, "truncated binary COPY row"),
        (HEADER + binary_row(int8(1), b"a"), True, "binary COPY output without its end marker"),
        (b"", True, "no binary COPY signature"),
        (HEADER + TRAILER + b"\x00", True, "1 bytes after the end-of-data marker"),
        (b"1\tx", False, "without its newline"),
        (b"1\tx\ty\n", False, "a row of 3 fields, expected 2"),
        (b"1\tx\n2\ty\tz\n", False, "at byte 4: a row of 3 fields"),  # the second row's offset
        (b"1\tx\n2\ty", False, "at byte 4: a text COPY row without its newline"),
        (b"1\tx\\053\n", False, "unknown text COPY escape b'0'"),
    ],
)
def test_malformed_output_is_a_protocol_error(data: bytes, binary: bool, reason: str) -> None:
    with pytest.raises(ProtocolError, match=reason):
        copy_records(data, binary)


@pytest.mark.parametrize("binary", [True, False], ids=["binary", "text"])
@given(
    st.lists(st.tuples(st.integers(-(2**63), 2**63 - 1), st.none() | st.text()), max_size=12),
    st.integers(1, 13),
)
def test_rows_fed_in_blocks_are_the_rows_fed_whole(
    binary: bool, rows: list[tuple[int, str | None]], blocks: int
) -> None:
    """Blocks of whole rows, however cut, give the records (the clock's ts_ms aside) and
    last change of the output fed whole; a row cut across two blocks is an error."""
    if binary:
        data = HEADER
        for n, body in rows:
            data += binary_row(int8(n), None if body is None else body.encode())
        data += TRAILER
    else:
        data = b"".join(
            b"%d\t%s\n" % (n, b"\\N" if body is None else escaped(body)) for n, body in rows
        )
    whole = copy_records(data, binary)
    assert [after for _, _, after, _ in decoded(whole[0])] == [
        {"id": n, "body": body} for n, body in rows
    ]
    records, last = copy_records(data, binary, blocks)
    assert (without_ts(records), last) == (without_ts(whole[0]), whole[1])
    if len(data) > len(HEADER) + 3 and rows:
        split = CopyRows(binary, encoder(), TX)
        middle = len(HEADER) + 3 if binary else len(data) - 2
        with pytest.raises(ProtocolError):
            split.feed(data[:middle])
            split.feed(data[middle:])
            split.finish()


def escaped(text: str) -> bytes:
    """`text` as text COPY writes it."""
    out = text.encode().replace(b"\\", b"\\\\")
    for raw, code in ((b"\t", b"t"), (b"\n", b"n"), (b"\r", b"r")):
        out = out.replace(raw, b"\\" + code)
    return out


@given(st.lists(st.none() | st.text(max_size=40), max_size=30), st.booleans())
def test_packed_records_are_the_encoders_records(bodies: list[str | None], keyed: bool) -> None:
    """What a snapshot reader packs, the producing process unpacks: each row's key and
    value as the encoder's `records` writes them, in order, a keyless table's None keys
    kept apart from values."""
    table = ChangeEncoder(TABLE, 7 if keyed else None, 8, topic=TOPIC)
    data = b"".join(
        b"%d\t%s\n" % (n, b"\\N" if body is None else escaped(body))
        for n, body in enumerate(bodies)
    )
    records, _ = copy_records(data, False, table=table)
    expected: list[KafkaRecord] = []
    for n, body in enumerate(bodies):
        value = None if body is None else body.encode()
        new = TupleData(b"tn" if body is None else TEXT_KINDS, (b"%d" % n, value))
        change = Change("r", RELATION, "", None, new, 0, (), 0, None, SNAPSHOT_LSN)
        expected += table.records(change, TX)
    assert [r.key for r in records] == [r.key for r in expected]
    assert all(r.key is None for r in records) != keyed or not records
    assert without_ts(records) == without_ts(expected)
