"""COPY TO STDOUT output → records: the snapshot's rows through the stream's encoder.

A snapshot chunk is read with `COPY (SELECT …) TO STDOUT` in the binary format when
every column has a binary reader (snapshot.copy_format binary, the default), else in
text (`bridge.snapshot.reader`). Both carry each value exactly as pgoutput does:
binary COPY fields are the type's send format (pgoutput's binary TupleData values),
text COPY fields are its output function's text (pgoutput's text values) with COPY's
backslash escapes on top. So this module only reads COPY's framing into `TupleData`
and hands each row to the table version's `ChangeEncoder`, the one that encodes the
stream's rows; no value is converted here.

Binary COPY: a signature, flags and header extension, then per row an int16 field count
and per field an int32 length (-1: NULL) and the bytes, and an int16 -1 at the end.
Text COPY: one line per row, fields separated by tabs, `\\N` for NULL, and the
backslash escapes COPY TO writes (`\\\\`, `\\t`, `\\n`, `\\r`, `\\b`, `\\f`, `\\v`).
Anything else is a `ProtocolError`: a chunk is encoded whole or not at all.

A chunk's records are packed as they are encoded (`PackedRecords`): the form in which a
reader process hands them to the producing process (`unpack_records`).
"""

from __future__ import annotations

import re
from typing import Final

from mypy_extensions import i64

from bridge.decode.messages import KIND_BINARY, KIND_NULL, KIND_TEXT, TupleData
from bridge.encode.records import ChangeEncoder, SourceBlock, TxSource
from bridge.errors import ProtocolError
from bridge.events.model import Change
from bridge.record import KafkaRecord
from bridge.source.wire import u16, u32

OP_READ: Final = "r"  # Debezium's op for rows read by a snapshot
BINARY_SIGNATURE: Final = b"PGCOPY\n\xff\r\n\x00"
_HEADER_END: Final = len(BINARY_SIGNATURE) + 8  # then the header extension's bytes
_OIDS_FLAG: Final = 1 << 16  # rows carry an OID field first (WITH OIDS, before PG 12)
_WHAT: Final = "COPY"  # ProtocolError's message type
_NULL_TEXT: Final = b"\\N"
_BACKSLASH: Final = 92
_NEWLINE_BYTE: Final = b"\n"
_TAB: Final = b"\t"
_NO_KEY: Final = b""
_SPLIT: Final = bytes.split  # called unbound: no method lookup per row
_ESCAPED: Final = re.compile(rb"\\(.)", re.DOTALL)
_UNESCAPED: Final = {
    b"\\": b"\\",
    b"t": b"\t",
    b"n": b"\n",
    b"r": b"\r",
    b"b": b"\b",
    b"f": b"\f",
    b"v": b"\v",
}


class SnapshotSource(TxSource):
    """The source block of a snapshot's records: every one carries the snapshot's LSN
    as its own, so a table's block is the same for all its rows and encoded once."""

    __slots__ = ("_blocks",)

    def __init__(self, block: SourceBlock, lsn: int, ts: int) -> None:
        super().__init__(block, None, lsn, ts)
        self._blocks: dict[bytes, bytes] = {}

    def block_parts(self, parts: list[bytes], tables: bytes, lsn: int) -> None:
        if lsn != self.commit_lsn:  # not a snapshot read: written as the stream's are
            super().block_parts(parts, tables, lsn)
            return
        block = self._blocks.get(tables)
        if block is None:
            written: list[bytes] = []
            super().block_parts(written, tables, lsn)
            block = self._blocks[tables] = b"".join(written)
        parts.append(block)


def binary_start(buf: bytes) -> int:
    """Offset of the first row of binary COPY output: past signature, flags and header
    extension."""
    if buf[: len(BINARY_SIGNATURE)] != BINARY_SIGNATURE:
        raise ProtocolError(_WHAT, 0, "no binary COPY signature")
    if len(buf) < _HEADER_END:
        raise ProtocolError(_WHAT, len(buf), "truncated binary COPY header")
    flags = u32(buf, len(BINARY_SIGNATURE))
    if flags & _OIDS_FLAG:
        raise ProtocolError(_WHAT, len(BINARY_SIGNATURE), "rows with OIDs")
    return _HEADER_END + u32(buf, _HEADER_END - 4)


def read_binary_row(buf: bytes, pos: i64, kinds: bytes) -> tuple[TupleData | None, i64]:
    """The binary COPY row at `pos` and the offset past it; None at the end-of-data
    marker. `kinds` is all KIND_BINARY, one per column the row must have. Offsets and
    sizes are i64: compiled, native arithmetic, where ints are tagged and checked."""
    if pos + 2 > len(buf):
        raise ProtocolError(_WHAT, pos, "truncated binary COPY row")
    natts = u16(buf, pos)
    pos += 2
    if natts == 0xFFFF:
        return None, pos
    width: i64 = len(kinds)
    if natts != width:
        raise ProtocolError(_WHAT, pos - 2, f"a row of {natts} fields, expected {width}")
    values: list[bytes | None] = [None] * natts
    nulls: bytearray | None = None
    end: i64 = len(buf)
    for i in range(natts):
        if pos + 4 > end:
            raise ProtocolError(_WHAT, pos, "truncated binary COPY field")
        size = u32(buf, pos)
        pos += 4
        if size == 0xFFFFFFFF:
            if nulls is None:
                nulls = bytearray(kinds)
            nulls[i] = KIND_NULL
            continue
        if pos + size > end:
            raise ProtocolError(_WHAT, pos, f"a field of {size} bytes runs past the data")
        values[i] = buf[pos : pos + size]
        pos += size
    return TupleData(kinds if nulls is None else bytes(nulls), tuple(values)), pos


def text_lines(data: bytes, offset: int = 0) -> list[bytes]:
    """The rows of a block of text COPY output (at `offset` of the whole output, which
    errors name), one line each without its newline: one split of the whole block, where
    finding and slicing each line was two calls per row."""
    lines = _SPLIT(data, _NEWLINE_BYTE)
    last = lines.pop()  # b"" after the final newline
    if last:
        where = offset + len(data) - len(last)
        raise ProtocolError(_WHAT, where, "a text COPY row without its newline")
    return lines


def read_text_row(line: bytes, pos: int, kinds: bytes) -> TupleData:
    """One text COPY row (`line`, without its newline, at offset `pos` of the output,
    which errors name). `kinds` is all KIND_TEXT, one per column the row must have."""
    fields = _SPLIT(line, _TAB)
    width = len(kinds)
    if len(fields) != width:
        raise ProtocolError(_WHAT, pos, f"a row of {len(fields)} fields, expected {width}")
    if _BACKSLASH not in line:  # the common row: no NULL, nothing escaped
        return TupleData(kinds, tuple(fields))
    values: list[bytes | None] = []
    row_kinds = bytearray(kinds)
    for i, field in enumerate(fields):
        if field == _NULL_TEXT:
            row_kinds[i] = KIND_NULL
            values.append(None)
        elif _BACKSLASH in field:
            values.append(_unescape(field, pos))
        else:
            values.append(field)
    return TupleData(bytes(row_kinds), tuple(values))


def _unescape(field: bytes, pos: int) -> bytes:
    try:
        return _ESCAPED.sub(_unescaped, field)
    except KeyError as exc:
        raise ProtocolError(_WHAT, pos, f"unknown text COPY escape {exc.args[0]!r}") from None


def _unescaped(match: re.Match[bytes]) -> bytes:
    return _UNESCAPED[match.group(1)]


# A chunk's records: every key and value joined into one buffer, with their sizes in
# turn (-1: None). Pickled, that is one buffer and a list of ints, where a tuple per
# record cost a reader three times as much (bench/README.md, snapshot). Snapshot reads
# carry no headers.
PackedRecords = tuple[bytes, list[int]]


class CopyRows:
    """Records (op "r") of one COPY's output, fed in blocks as it arrives (`feed`), and
    the last row's change, to encode it again as the snapshot's "last" record (`finish`).

    Blocks so that the server goes on sending the next rows while this encodes the ones
    at hand (`bridge.source.libpq.copy_out`). Every block holds whole rows: COPY TO sends
    one CopyData message per row, binary COPY's header with the first. A row cut across
    blocks is a `ProtocolError`, as a truncated one is.

    Every row goes to the encoder's `row_record` (a COPY row has no unchanged TOASTed
    value), whose parts go straight into the chunk's one list of parts: no record, value
    or change object per row, and no second copy when the chunk is packed.
    """

    def __init__(self, binary: bool, encoder: ChangeEncoder, source: TxSource) -> None:
        self._binary = binary
        self._encoder = encoder
        self._source = source
        self._relation = encoder.table.relation
        width = len(self._relation.columns)
        self._kinds = bytes((KIND_BINARY if binary else KIND_TEXT,)) * width
        self._parts: list[bytes] = []
        self._sizes: list[int] = []
        self._last: TupleData | None = None
        self._offset: i64 = 0  # of the block in the whole output, for errors
        self._started = False  # binary: the header was read
        self._ended = False  # binary: the end-of-data marker was read

    def feed(self, data: bytes) -> None:
        """Encode one block of whole rows."""
        if self._binary:
            self._feed_binary(data)
        else:
            self._feed_text(data)
        self._offset += len(data)

    def finish(self) -> tuple[PackedRecords, Change | None]:
        """Every record, packed, once the whole output was fed."""
        if self._binary and not self._ended:
            if not self._started:
                raise ProtocolError(_WHAT, 0, "no binary COPY signature")
            raise ProtocolError(_WHAT, self._offset, "binary COPY output without its end marker")
        last = self._last
        lsn = self._source.commit_lsn
        change = (
            None
            if last is None
            else Change(OP_READ, self._relation, "", None, last, 0, (), 0, None, lsn)
        )
        return (b"".join(self._parts), self._sizes), change

    def _record(self, new: TupleData) -> None:
        """Append the row's key and value to the packed records."""
        parts, sizes = self._parts, self._sizes
        slot: i64 = len(parts)
        parts.append(_NO_KEY)  # the key's place: it is known once the value is written
        key = self._encoder.row_record(parts, new, OP_READ, self._source.commit_lsn, self._source)
        size: i64 = 0
        for i in range(slot + 1, len(parts)):
            size += len(parts[i])
        if key is None:
            sizes.append(-1)
        else:
            parts[slot] = key
            sizes.append(len(key))
        sizes.append(size)

    def _feed_binary(self, data: bytes) -> None:
        kinds = self._kinds
        pos: i64 = 0
        if not self._started:
            pos = binary_start(data)
            self._started = True
        end: i64 = len(data)
        last = self._last
        ended = self._ended
        while pos < end and not ended:
            new, pos = read_binary_row(data, pos, kinds)
            if new is None:
                ended = self._ended = True
                continue
            self._record(new)
            last = new
        self._last = last
        if pos < end:
            extra, where = end - pos, self._offset + pos
            raise ProtocolError(_WHAT, where, f"{extra} bytes after the end-of-data marker")

    def _feed_text(self, data: bytes) -> None:
        kinds = self._kinds
        offset: i64 = self._offset
        last = self._last
        for line in text_lines(data, offset):
            row = read_text_row(line, offset, kinds)
            offset += len(line) + 1
            self._record(row)
            last = row
        self._last = last


def unpack_records(packed: PackedRecords, topic: str) -> list[KafkaRecord]:
    """The records for `topic` of packed records (`CopyRows`), in order."""
    data, sizes = packed
    out: list[KafkaRecord] = []
    pos: i64 = 0
    for i in range(0, len(sizes), 2):
        key: bytes | None = None
        size: i64 = sizes[i]
        if size >= 0:
            key = data[pos : pos + size]
            pos += size
        value: bytes | None = None
        size = sizes[i + 1]
        if size >= 0:
            value = data[pos : pos + size]
            pos += size
        out.append(KafkaRecord(topic, key, value))
    return out
