"""pgoutput decoder: real captured bytes, hand-built edge cases, and fuzzing.

The encoder below is the decoder's inverse, written from the protocol docs; it is
first checked against the captured server bytes, then used to build protocol 4
messages (no PG16 here) and to generate valid messages for property tests.
"""

from __future__ import annotations

import datetime as dt
import struct
from collections.abc import Callable, Iterator

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from bridge.decode.messages import (
    PG_EPOCH_OFFSET_US,
    Begin,
    BeginPrepare,
    Column,
    Commit,
    CommitPrepared,
    Delete,
    Insert,
    LogicalMessage,
    Message,
    Origin,
    Prepare,
    Relation,
    RollbackPrepared,
    StreamAbort,
    StreamCommit,
    StreamPrepare,
    StreamStart,
    StreamStop,
    Truncate,
    TupleData,
    TypeMessage,
    Update,
)
from bridge.decode.pgoutput import PgoutputDecoder, pgoutput_options
from bridge.errors import ConfigError, ProtocolError

from .pgoutput_golden import BIG, FACTS, V1_TEXT, V2_TEXT_STREAM, V3_BINARY_ALL

# --------------------------------------------------------------------------- encoder


def _s(text: str) -> bytes:
    return text.encode() + b"\0"


def _xid(xid: int | None) -> bytes:
    return b"" if xid is None else struct.pack(">I", xid)


def enc_tuple(t: TupleData) -> bytes:
    out = bytearray(struct.pack(">H", len(t.kinds)))
    for kind, value in zip(t.kinds, t.values, strict=True):
        out.append(kind)
        if kind in b"tb":
            assert value is not None
            out += struct.pack(">I", len(value)) + value
    return bytes(out)


def encode(m: Message) -> bytes:
    """Serialize like proto.c; `xid` fields are written when not None (streamed)."""
    if isinstance(m, Begin):
        return b"B" + struct.pack(">QqI", *m)
    if isinstance(m, Commit):
        return b"C" + struct.pack(">BQQq", *m)
    if isinstance(m, Origin):
        return b"O" + struct.pack(">Q", m.commit_lsn) + _s(m.name)
    if isinstance(m, Relation):
        ns = "" if m.namespace == "pg_catalog" else m.namespace
        out = b"R" + _xid(m.xid) + struct.pack(">I", m.oid) + _s(ns) + _s(m.name)
        out += struct.pack(">BH", ord(m.replica_identity), len(m.columns))
        for c in m.columns:
            out += (
                struct.pack(">B", c.flags) + _s(c.name) + struct.pack(">Ii", c.type_oid, c.typmod)
            )
        return out
    if isinstance(m, TypeMessage):
        ns = "" if m.namespace == "pg_catalog" else m.namespace
        return b"Y" + _xid(m.xid) + struct.pack(">I", m.oid) + _s(ns) + _s(m.name)
    if isinstance(m, Insert):
        return b"I" + _xid(m.xid) + struct.pack(">I", m.relid) + b"N" + enc_tuple(m.new)
    if isinstance(m, Update):
        old = b"" if m.old is None else m.old_kind.encode() + enc_tuple(m.old)
        return b"U" + _xid(m.xid) + struct.pack(">I", m.relid) + old + b"N" + enc_tuple(m.new)
    if isinstance(m, Delete):
        head = b"D" + _xid(m.xid) + struct.pack(">I", m.relid)
        return head + m.old_kind.encode() + enc_tuple(m.old)
    if isinstance(m, Truncate):
        out = b"T" + _xid(m.xid) + struct.pack(">IB", len(m.relids), m.options)
        return out + struct.pack(f">{len(m.relids)}I", *m.relids)
    if isinstance(m, LogicalMessage):
        out = b"M" + _xid(m.xid) + struct.pack(">BQ", int(m.transactional), m.lsn)
        return out + _s(m.prefix) + struct.pack(">I", len(m.content)) + m.content
    if isinstance(m, StreamStart):
        return b"S" + struct.pack(">IB", m.xid, int(m.first_segment))
    if isinstance(m, StreamStop):
        return b"E"
    if isinstance(m, StreamCommit):
        return b"c" + struct.pack(">IBQQq", *m)
    if isinstance(m, StreamAbort):
        out = b"A" + struct.pack(">II", m.xid, m.subxid)
        if m.abort_lsn is not None:
            out += struct.pack(">Qq", m.abort_lsn, m.abort_ts)
        return out
    if isinstance(m, BeginPrepare):
        return b"b" + struct.pack(">QQqI", *m[:4]) + _s(m.gid)
    if isinstance(m, Prepare | CommitPrepared | StreamPrepare):
        code = {Prepare: b"P", CommitPrepared: b"K", StreamPrepare: b"p"}[type(m)]
        return code + struct.pack(">BQQqI", *m[:5]) + _s(m.gid)
    if isinstance(m, RollbackPrepared):
        return b"r" + struct.pack(">BQQqqI", *m[:6]) + _s(m.gid)
    raise AssertionError(f"no encoder for {m!r}")


STREAMABLE = (Relation, TypeMessage, Insert, Update, Delete, Truncate, LogicalMessage)


def decoder_for(proto: int, m: Message) -> PgoutputDecoder:
    """A decoder in the state `m` can occur in (inside a stream block iff it has an xid)."""
    dec = PgoutputDecoder(proto)
    if isinstance(m, STREAMABLE) and m.xid is not None:
        dec.decode(b"S" + struct.pack(">IB", m.xid, 1))
    return dec


def decode_or_error(dec: PgoutputDecoder, data: bytes) -> Message | ProtocolError:
    """Anything other than a message or ProtocolError escapes and fails the test."""
    try:
        return dec.decode(data)
    except ProtocolError as exc:
        assert isinstance(exc.offset, int)
        assert 0 <= exc.offset <= len(data)
        return exc


# --------------------------------------------------------------------------- golden bytes

SEQUENCES = {"v1_text": (1, V1_TEXT), "v2_stream": (2, V2_TEXT_STREAM), "v3": (3, V3_BINARY_ALL)}
ALL_GOLDEN = [
    pytest.param(proto, bytes.fromhex(hx), msg, id=f"{name}-{i}-{type(msg).__name__}")
    for name, (proto, seq) in SEQUENCES.items()
    for i, (hx, msg) in enumerate(seq)
]


def replay(proto: int, seq: list[tuple[str, Message]]) -> Iterator[tuple[bytes, Message, bool]]:
    """Decode a captured stream in order; yields (bytes, expected, in_stream before it)."""
    dec = PgoutputDecoder(proto)
    for hx, expected in seq:
        before = dec.in_stream
        data = bytes.fromhex(hx)
        assert dec.decode(data) == expected
        yield data, expected, before


@pytest.mark.parametrize("name", SEQUENCES)
@pytest.mark.parametrize("wrap", [bytes, bytearray, memoryview])
def test_captured_stream_decodes(name: str, wrap: Callable[[bytes], bytes]) -> None:
    proto, seq = SEQUENCES[name]
    dec = PgoutputDecoder(proto)
    for hx, expected in seq:
        got = dec.decode(wrap(bytes.fromhex(hx)))
        assert got == expected
        if isinstance(got, StreamStart):
            assert dec.in_stream
        elif isinstance(got, StreamStop):
            assert not dec.in_stream
        elif isinstance(got, STREAMABLE):
            assert dec.in_stream == (got.xid is not None)


def test_captured_covers_every_message_type_and_tuple_kind() -> None:
    golden = [p.values for p in ALL_GOLDEN]
    types = {chr(data[0]) for _, data, _ in golden}  # type: ignore[index]
    assert types == set("BCORYIUDTMSEcAbPKrp")
    kinds: set[int] = set()
    for _, _, msg in golden:
        for t in (getattr(msg, "new", None), getattr(msg, "old", None)):
            if isinstance(t, TupleData):
                kinds |= set(t.kinds)
    assert kinds == set(b"ntub")
    streamed = {type(m) for _, _, m in golden if isinstance(m, STREAMABLE) and m.xid}
    assert streamed == set(STREAMABLE)


@pytest.mark.parametrize("proto, data, expected", ALL_GOLDEN)
def test_encoder_reproduces_captured_bytes(proto: int, data: bytes, expected: Message) -> None:
    assert encode(expected) == data


def test_captured_values_match_what_the_workload_did() -> None:
    """Fields checked against facts known independently of the decoder."""
    msgs = [m for _, m in V3_BINARY_ALL]
    begins = [m for m in msgs if isinstance(m, Begin)]
    assert [b.xid for b in begins] == list(range(FACTS["xid_ins"], FACTS["xid_origin"] + 1))
    rels = {m.name: m.oid for m in msgs if isinstance(m, Relation)}
    assert rels == {k[4:]: v for k, v in FACTS.items() if k.startswith("oid_t")}
    typ = next(m for m in msgs if isinstance(m, TypeMessage))
    assert (typ.oid, typ.namespace, typ.name) == (FACTS["oid_mood"], "public", "mood")
    t_pk = next(m for m in msgs if isinstance(m, Relation) and m.name == "t_pk")
    assert [c.typmod for c in t_pk.columns][2] == (10 << 16 | 2) + 4  # numeric(10,2)
    assert t_pk.columns[4].type_oid == FACTS["oid_mood"]
    origin = next(m for m in msgs if isinstance(m, Origin))
    assert origin == Origin(0xABCDEF, "src_origin")
    ts = dt.datetime(2024, 1, 2, 3, 4, 5, tzinfo=dt.UTC).timestamp()
    origin_begin = next(b for b in begins if b.xid == FACTS["xid_origin"])
    assert origin_begin.commit_ts == int(ts * 1_000_000) - PG_EPOCH_OFFSET_US
    aborts = [m for m in msgs if isinstance(m, StreamAbort)]
    assert [(a.xid, a.subxid) for a in aborts] == [
        (FACTS["xid_stream_abort"], FACTS["xid_stream_abort"]),
        (FACTS["xid_stream_subabort"], FACTS["subxid_stream_subabort"]),
    ]
    truncs = [m for m in msgs if isinstance(m, Truncate)]
    assert truncs[0].relids == (FACTS["oid_t_trunc"], FACTS["oid_t_full"])
    assert truncs[0].options == 3  # CASCADE | RESTART IDENTITY
    first = next(m for m in msgs if isinstance(m, Insert))
    numeric_12_50 = struct.pack(">hhhhhh", 2, 0, 0, 2, 12, 5000)  # ndigits weight sign dscale
    assert first.new.values[:4] == (struct.pack(">i", 1), b"alpha", numeric_12_50, BIG)
    two_phase = BeginPrepare | Prepare | CommitPrepared | RollbackPrepared | StreamPrepare
    gids = [m.gid for m in msgs if isinstance(m, two_phase)]
    assert gids == ["gid_commit"] * 3 + ["gid_rollback"] * 3 + ["gid_stream"] * 2


@pytest.mark.parametrize("name", SEQUENCES)
def test_captured_lsns_are_mutually_consistent(name: str) -> None:
    """Begin.final_lsn == Commit.commit_lsn etc.: misread offsets would break these."""
    open_begin: Begin | BeginPrepare | None = None
    stream_xid = None
    for _, msg, _ in replay(*SEQUENCES[name]):
        if isinstance(msg, Begin | BeginPrepare):
            open_begin = msg
        elif isinstance(msg, Commit):
            assert isinstance(open_begin, Begin)
            assert (msg.commit_lsn, msg.commit_ts) == (open_begin.final_lsn, open_begin.commit_ts)
            assert msg.end_lsn > msg.commit_lsn
        elif isinstance(msg, Prepare):
            assert isinstance(open_begin, BeginPrepare)
            assert msg[1:] == tuple(open_begin)
        elif isinstance(msg, StreamStart):
            stream_xid = msg.xid
        elif isinstance(msg, StreamCommit | StreamAbort | StreamPrepare) or (
            isinstance(msg, STREAMABLE) and msg.xid is not None
        ):
            assert msg.xid == stream_xid


def test_values_are_copied_out_of_a_reused_buffer() -> None:
    data = bytes.fromhex(V1_TEXT[3][0])
    buf = bytearray(data)
    msg = PgoutputDecoder(1).decode(memoryview(buf))
    buf[:] = b"\xff" * len(buf)
    assert msg == V1_TEXT[3][1]
    assert isinstance(msg, Insert)
    assert all(type(v) is bytes for v in msg.new.values)


# --------------------------------------------------------------------------- hand-built cases


def test_empty_namespace_means_pg_catalog() -> None:
    rel = b"R" + struct.pack(">I", 1259) + b"\0pg_class\0d" + struct.pack(">H", 0)
    typ = b"Y" + struct.pack(">I", 16) + b"\0bool\0"
    dec = PgoutputDecoder(1)
    assert dec.decode(rel) == Relation(None, 1259, "pg_catalog", "pg_class", "d", ())
    assert dec.decode(typ) == TypeMessage(None, 16, "pg_catalog", "bool")


def test_oids_are_unsigned_and_typmod_signed() -> None:
    col = b"\x01k\0" + struct.pack(">Ii", 0xFFFFFFF0, -1)
    rel = b"R" + struct.pack(">I", 0x80000001) + b"s\0t\0i" + struct.pack(">H", 1) + col
    got = PgoutputDecoder(1).decode(rel)
    assert got == Relation(None, 0x80000001, "s", "t", "i", (Column(1, "k", 0xFFFFFFF0, -1),))
    assert isinstance(got, Relation)
    assert got.columns[0].is_key
    ins = b"I" + struct.pack(">I", 0xFFFFFFFF) + b"N" + enc_tuple(TupleData(b"", ()))
    assert PgoutputDecoder(1).decode(ins) == Insert(None, 0xFFFFFFFF, TupleData(b"", ()))


def test_stream_abort_v4_both_forms() -> None:
    short = StreamAbort(7, 8, None, None)
    long = StreamAbort(7, 8, 0x1_0000_0000, -5)
    dec = PgoutputDecoder(4)
    assert dec.decode(encode(short)) == short
    assert dec.decode(encode(long)) == long
    for proto in (2, 3):
        with pytest.raises(ProtocolError, match="proto_version 4"):
            PgoutputDecoder(proto).decode(encode(long))
    for size in (8, 10, 17, 24, 26):
        with pytest.raises(ProtocolError):
            dec.decode(encode(long)[:size] + b"\0" * max(0, size - 25))


def test_v4_streams_like_v2() -> None:
    dec = PgoutputDecoder(4)
    assert dec.proto_version == 4
    ins = Insert(99, 5, TupleData(b"tb", (b"x", b"\x00")))
    seq: list[Message] = [StreamStart(99, True), ins, StreamStop(), StreamAbort(99, 99, 10, 20)]
    assert [dec.decode(encode(m)) for m in seq] == seq


def test_decoder_started_inside_a_stream_reads_the_xid_prefix() -> None:
    """The state buffered streamed records are replayed in: after Stream Stop, still with xid."""
    ins = Insert(99, 5, TupleData(b"tb", (b"x", b"\x00")))
    dec = PgoutputDecoder(2, in_stream=True)
    assert dec.in_stream
    assert dec.decode(encode(ins)) == ins
    assert dec.decode(encode(StreamStop())) == StreamStop()
    assert not dec.in_stream


def test_proto_1_has_no_stream_state_to_start_in() -> None:
    with pytest.raises(ProtocolError, match="no stream blocks"):
        PgoutputDecoder(1, in_stream=True)


def error_of(proto: int, data: bytes, *, in_stream: bool = False) -> ProtocolError:
    dec = PgoutputDecoder(proto)
    if in_stream:
        dec.decode(b"S\0\0\0\x01\x01")
    with pytest.raises(ProtocolError) as info:
        dec.decode(data)
    return info.value


INSERT = encode(Insert(None, 1, TupleData(b"tn", (b"ab", None))))


@pytest.mark.parametrize(
    "proto, data, in_stream, offset, reason",
    [
        (1, b"", False, 0, "empty message"),
        (1, b"Z", False, 0, "unknown message type"),
        (4, b"\x00", False, 0, "unknown message type"),
        (1, b"S\0\0\0\x01\x01", False, 0, "needs proto_version >= 2"),
        (2, b"E", False, 0, "Stream Stop without"),
        (2, b"b" + b"\0" * 28 + b"g\0", False, 0, "needs proto_version >= 3"),
        (2, b"S\0\0\0\x02\x00", True, 0, "already open"),
        (2, b"B" + b"\0" * 20, True, 0, "not allowed inside"),
        (2, b"c" + b"\0" * 29, True, 0, "not allowed inside"),
        (1, INSERT[:-1], False, len(INSERT) - 1, "truncated"),
        (1, INSERT + b"\0", False, len(INSERT), "trailing"),
        (1, INSERT[:8] + b"x" + INSERT[9:], False, 8, "unknown TupleData kind 'x'"),
        (1, INSERT[:5] + b"X" + INSERT[6:], False, 5, "expected submessage tag 'N'"),
        (1, b"U\0\0\0\x01X" + INSERT[6:], False, 5, "'K', 'O' or 'N'"),
        (1, b"U\0\0\0\x01K" + INSERT[6:] + b"O" + INSERT[6:], False, 16, "tag 'N', got 'O'"),
        (1, b"D\0\0\0\x01N" + INSERT[6:], False, 5, "'K' or 'O'"),
        (1, b"O" + b"\0" * 8 + b"abc", False, 9, "not NUL-terminated"),
        (1, b"O" + b"\0" * 8 + b"a\xffc\0", False, 10, "not valid UTF-8"),
        (1, b"M\x01" + b"\0" * 8 + b"p\0" + b"\0\0\0\x09abc", False, 16, "runs past the end"),
        (1, b"M\x01" + b"\0" * 8 + b"p\0" + b"\xff\xff\xff\xffabc", False, 16, "runs past"),
        (1, b"T\xff\xff\xff\xff\x00\0\0\0\x01", False, 10, "truncated"),
        (1, b"B" + b"\0" * 21, False, 21, "trailing"),
        (2, b"I\0\0", True, 3, "truncated"),
    ],
)
def test_protocol_errors(
    proto: int, data: bytes, in_stream: bool, offset: int, reason: str
) -> None:
    err = error_of(proto, data, in_stream=in_stream)
    assert reason in err.reason
    assert err.offset == offset
    assert err.message_type == (chr(data[0]) if data else "")


def test_failed_decode_keeps_stream_state() -> None:
    dec = PgoutputDecoder(2)
    with pytest.raises(ProtocolError):
        dec.decode(b"S\0\0\0\x01")
    assert not dec.in_stream
    dec.decode(b"S\0\0\0\x01\x01")
    with pytest.raises(ProtocolError):
        dec.decode(b"E\0")
    assert dec.in_stream


@pytest.mark.parametrize("proto", [0, 5, -1])
def test_decoder_rejects_unknown_proto(proto: int) -> None:
    with pytest.raises(ConfigError, match="proto_version"):
        PgoutputDecoder(proto)


# --------------------------------------------------------------------------- properties

u8 = st.integers(0, 0xFF)
u32 = st.integers(0, 0xFFFFFFFF)
i32 = st.integers(-(2**31), 2**31 - 1)
u64 = st.integers(0, 2**64 - 1)
i64 = st.integers(-(2**63), 2**63 - 1)
text = st.text(st.characters(exclude_categories=["Cs"], exclude_characters="\0"), max_size=12)
maybe_xid = st.none() | u32


@st.composite
def tuples(draw: st.DrawFn) -> TupleData:
    kinds = draw(st.lists(st.sampled_from(b"ntub"), max_size=8))
    values = tuple(draw(st.binary(max_size=20)) if k in b"tb" else None for k in kinds)
    return TupleData(bytes(kinds), values)


@st.composite
def updates(draw: st.DrawFn) -> Update:
    old_kind = draw(st.sampled_from(["", "K", "O"]))
    old = draw(tuples()) if old_kind else None
    return Update(draw(maybe_xid), draw(u32), old_kind, old, draw(tuples()))


columns = st.builds(Column, u8, text, u32, i32)
V1_MESSAGES = st.one_of(
    st.builds(Begin, u64, i64, u32),
    st.builds(Commit, u8, u64, u64, i64),
    st.builds(Origin, u64, text),
    st.builds(
        Relation,
        maybe_xid,
        u32,
        text.filter(bool),
        text,
        st.sampled_from("dnfi"),
        st.lists(columns, max_size=5).map(tuple),
    ),
    st.builds(TypeMessage, maybe_xid, u32, text.filter(bool), text),
    st.builds(Insert, maybe_xid, u32, tuples()),
    updates(),
    st.builds(Delete, maybe_xid, u32, st.sampled_from(["K", "O"]), tuples()),
    st.builds(Truncate, maybe_xid, st.integers(0, 3), st.lists(u32, max_size=5).map(tuple)),
    st.builds(LogicalMessage, maybe_xid, st.booleans(), u64, text, st.binary(max_size=30)),
)
V3_MESSAGES = st.one_of(
    V1_MESSAGES,
    st.builds(StreamStart, u32, st.booleans()),
    st.just(StreamStop()),
    st.builds(StreamCommit, u32, u8, u64, u64, i64),
    st.builds(StreamAbort, u32, u32, st.none(), st.none()),
    st.builds(BeginPrepare, u64, u64, i64, u32, text),
    st.builds(Prepare, u8, u64, u64, i64, u32, text),
    st.builds(CommitPrepared, u8, u64, u64, i64, u32, text),
    st.builds(RollbackPrepared, u8, u64, u64, i64, i64, u32, text),
    st.builds(StreamPrepare, u8, u64, u64, i64, u32, text),
)
V4_MESSAGES = st.one_of(V3_MESSAGES, st.builds(StreamAbort, u32, u32, u64, i64))


def _stateful_decoder(proto: int, m: Message) -> PgoutputDecoder:
    """Like decoder_for, plus Stream Stop needs an open stream block."""
    dec = decoder_for(proto, m)
    if isinstance(m, StreamStop):
        dec.decode(b"S\0\0\0\x01\x01")
    return dec


def _normalize(m: Message, proto: int) -> Message:
    """Inside a stream (v2+) an xid is mandatory; at v1 none is ever read."""
    if proto == 1 and isinstance(m, STREAMABLE) and m.xid is not None:
        return m._replace(xid=None)
    return m


@given(m=V1_MESSAGES)
def test_roundtrip_v1(m: Message) -> None:
    m = _normalize(m, 1)
    assert PgoutputDecoder(1).decode(encode(m)) == m


@given(m=V3_MESSAGES, proto=st.sampled_from([2, 3, 4]))
def test_roundtrip_v2_to_v4(m: Message, proto: int) -> None:
    if proto == 2 and encode(m)[:1] in b"bPKrp":
        return
    assert _stateful_decoder(proto, m).decode(encode(m)) == m


@given(m=V4_MESSAGES)
def test_roundtrip_v4(m: Message) -> None:
    assert _stateful_decoder(4, m).decode(encode(m)) == m


@pytest.mark.parametrize("proto, data, expected", ALL_GOLDEN)
def test_every_truncation_of_captured_bytes_is_a_protocol_error(
    proto: int, data: bytes, expected: Message
) -> None:
    step = max(1, len(data) // 300)  # the 6.4 kB row: every prefix near the ends, sampled inside
    cuts = set(range(0, len(data), step)) | set(range(max(0, len(data) - 40), len(data)))
    for cut in sorted(cuts):
        dec = _stateful_decoder(proto, expected)
        err = decode_or_error(dec, data[:cut])
        assert isinstance(err, ProtocolError), (cut, err)


@given(m=V4_MESSAGES, cut=st.integers(0, 10_000), extra=st.binary(min_size=1, max_size=16))
@example(m=StreamAbort(0, 0, 0, 0), cut=9, extra=b"\x00")  # long form cut to the short one
def test_truncated_or_extended_messages_are_protocol_errors(
    m: Message, cut: int, extra: bytes
) -> None:
    data = encode(m)
    prefix = data[: cut % len(data)]
    if not (isinstance(m, StreamAbort) and len(prefix) == 9):  # 9 bytes: the valid short form
        assert isinstance(decode_or_error(_stateful_decoder(4, m), prefix), ProtocolError)
    if isinstance(m, StreamAbort) and m.abort_lsn is None and len(extra) == 16:
        return  # 9 + 16 bytes is the valid long form
    assert isinstance(decode_or_error(_stateful_decoder(4, m), data + extra), ProtocolError)


@settings(suppress_health_check=[HealthCheck.too_slow])
@given(m=V4_MESSAGES, data=st.data())
def test_flipped_bytes_decode_or_raise_protocol_error(m: Message, data: st.DataObject) -> None:
    raw = bytearray(encode(m))
    for _ in range(data.draw(st.integers(1, 3))):
        i = data.draw(st.integers(0, len(raw) - 1))
        raw[i] ^= data.draw(st.integers(1, 255))
    decode_or_error(_stateful_decoder(4, m), bytes(raw))


@given(
    proto=st.integers(1, 4),
    in_stream=st.booleans(),
    head=st.sampled_from(b"BCORYIUDTMSEcAbPKrpZ"),
    body=st.binary(max_size=64),
)
def test_random_bytes_decode_or_raise_protocol_error(
    proto: int, in_stream: bool, head: int, body: bytes
) -> None:
    dec = PgoutputDecoder(proto)
    if in_stream and proto > 1:
        dec.decode(b"S\0\0\0\x01\x01")
    decode_or_error(dec, bytes([head]) + body)
    decode_or_error(dec, body)


@given(
    proto=st.sampled_from([1, 3]),
    natts=st.integers(0, 4),
    body=st.binary(max_size=40),
)
def test_random_tuple_data_decodes_or_raises_protocol_error(
    proto: int, natts: int, body: bytes
) -> None:
    data = b"I\0\0\0\x01N" + struct.pack(">H", natts) + body
    decode_or_error(PgoutputDecoder(proto), data)


# --------------------------------------------------------------------------- options


def test_options_minimal() -> None:
    assert pgoutput_options(1, ["pub"]) == [
        ("proto_version", "1"),
        ("publication_names", '"pub"'),
    ]


def test_options_everything() -> None:
    opts = pgoutput_options(
        4,
        ["a", 'we"ird, Name'],
        binary=True,
        messages=True,
        streaming="parallel",
        two_phase=True,
        origin="none",
    )
    assert opts == [
        ("proto_version", "4"),
        ("publication_names", '"a","we""ird, Name"'),
        ("binary", "true"),
        ("messages", "true"),
        ("streaming", "parallel"),
        ("two_phase", "true"),
        ("origin", "none"),
    ]


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"proto_version": 0}, "proto_version"),
        ({"proto_version": 5}, "proto_version"),
        ({"streaming": "on", "proto_version": 1}, ">= 2"),
        ({"streaming": "parallel", "proto_version": 3}, "proto_version 4"),
        ({"streaming": "true"}, "streaming mode"),
        ({"two_phase": True, "proto_version": 2}, ">= 3"),
        ({"origin": "local"}, "origin"),
        ({"publication_names": []}, "non-empty"),
        ({"publication_names": "pub"}, "non-empty list"),
        ({"publication_names": ["ok", ""]}, "publication name"),
        ({"publication_names": ["a\0b"]}, "publication name"),
    ],
)
def test_options_validation(kwargs: dict[str, object], match: str) -> None:
    args: dict[str, object] = {"proto_version": 4, "publication_names": ["pub"]} | kwargs
    with pytest.raises(ConfigError, match=match) as info:
        pgoutput_options(**args)  # type: ignore[arg-type]
    assert info.value.hint


@pytest.mark.parametrize("proto, streaming", [(2, "on"), (3, "on"), (4, "on"), (4, "parallel")])
def test_options_streaming_allowed(proto: int, streaming: str) -> None:
    assert ("streaming", streaming) in pgoutput_options(proto, ["p"], streaming=streaming)


@pytest.mark.parametrize(
    "kinds",
    [
        b"",
        b"tttt",
        b"bbbb",
        b"nttt",
        b"tttn",
        b"bttb",
        b"tbtb",
        b"unbt",
        b"t" * 255,
        b"t" * 256,
        b"b" * 300,
        b"t" * 299 + b"u",
    ],
)
def test_tuple_kinds_uniform_or_mixed(kinds: bytes) -> None:
    """read_tuple shares the kinds of all-text and all-binary rows; every mix still reads
    back column by column."""
    values = tuple(bytes([i % 251]) * (i % 3) if k in b"tb" else None for i, k in enumerate(kinds))
    new = TupleData(kinds, values)
    decoded = PgoutputDecoder(1).decode(encode(Insert(None, 7, new)))
    assert decoded == Insert(None, 7, new)
    assert isinstance(decoded, Insert) and type(decoded.new.kinds) is bytes
