"""pglogical_output decoder: real captured bytes, hand-built edge cases, and fuzzing.

The encoder below is the decoder's inverse, written from the protocol document in
the form pglogical 2.4 actually emits (names and text values carry their NUL). It
is first checked against the captured server bytes, then used to build edge cases
and to generate valid messages for the property tests.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bridge.decode.messages import (
    KIND_BINARY,
    KIND_INTERNAL,
    KIND_NULL,
    KIND_TEXT,
    KIND_UNCHANGED,
    PG_EPOCH_OFFSET_US,
    Begin,
    Column,
    Commit,
    Delete,
    Insert,
    Message,
    Origin,
    Relation,
    Startup,
    TupleData,
    Update,
)
from bridge.decode.pglogical import PglogicalDecoder, check_startup, pglogical_options
from bridge.errors import ConfigError, ProtocolError

from .pglogical_golden import (
    BINARY_OPTIONS,
    BINARY_STREAM,
    BLOB,
    INTERNAL_OPTIONS,
    INTERNAL_STREAM,
    TEXT_OPTIONS,
    TEXT_STREAM,
)

# --------------------------------------------------------------------------- encoder


def _name(text: str) -> bytes:
    raw = text.encode() + b"\0"
    return bytes([len(raw)]) + raw


def enc_startup(params: dict[str, str], version: int = 1) -> bytes:
    body = b"".join(k.encode() + b"\0" + v.encode() + b"\0" for k, v in params.items())
    return b"S" + bytes([version]) + body


def enc_tuple(role: str, t: TupleData) -> bytes:
    out = bytearray(role.encode() + b"T" + struct.pack(">H", len(t.kinds)))
    for kind, value in zip(t.kinds, t.values, strict=True):
        out.append(kind)
        if value is None:
            continue
        data = value + b"\0" if kind == KIND_TEXT else value
        out += struct.pack(">i", len(data)) + data
    return bytes(out)


def enc_column(c: Column) -> bytes:
    raw = c.name.encode() + b"\0"
    return b"C" + bytes([c.flags]) + b"N" + struct.pack(">H", len(raw)) + raw


def encode(m: Message, flags: int = 0) -> bytes:
    if isinstance(m, Startup):
        return enc_startup(m.params, m.version)
    if isinstance(m, Begin):
        return b"B" + struct.pack(">BQqI", flags, m.final_lsn, m.commit_ts, m.xid)
    if isinstance(m, Commit):
        return b"C" + struct.pack(">BQQq", flags, m.commit_lsn, m.end_lsn, m.commit_ts)
    if isinstance(m, Origin):
        return b"O" + struct.pack(">BQ", flags, m.commit_lsn) + _name(m.name)
    if isinstance(m, Relation):
        head = b"R" + struct.pack(">BI", flags, m.oid) + _name(m.namespace) + _name(m.name)
        cols = b"".join(enc_column(c) for c in m.columns)
        return head + b"A" + struct.pack(">H", len(m.columns)) + cols
    if isinstance(m, Insert):
        return b"I" + struct.pack(">BI", flags, m.relid) + enc_tuple("N", m.new)
    if isinstance(m, Update):
        old = enc_tuple(m.old_kind, m.old) if m.old is not None else b""
        return b"U" + struct.pack(">BI", flags, m.relid) + old + enc_tuple("N", m.new)
    if isinstance(m, Delete):
        return b"D" + struct.pack(">BI", flags, m.relid) + enc_tuple(m.old_kind, m.old)
    raise AssertionError(f"pglogical has no {type(m).__name__}")


def decode_all(stream: list[tuple[str, Message]]) -> list[Message]:
    decoder = PglogicalDecoder()
    return [decoder.decode(bytes.fromhex(h)) for h, _ in stream]


def row(*values: bytes | None, kinds: bytes | None = None) -> TupleData:
    if kinds is None:
        kinds = bytes(KIND_NULL if v is None else KIND_TEXT for v in values)
    return TupleData(kinds, values)


TEXT_STARTUP = bytes.fromhex(TEXT_STREAM[0][0])
BINARY_STARTUP = bytes.fromhex(BINARY_STREAM[0][0])
ALL_STREAMS = {"text": TEXT_STREAM, "binary": BINARY_STREAM, "internal": INTERNAL_STREAM}
ALL_GOLDEN = [
    pytest.param(bytes.fromhex(h), m, id=f"{name}-{i}-{h[:2]}")
    for name, stream in ALL_STREAMS.items()
    for i, (h, m) in enumerate(stream)
]


def pg_us(text: str) -> int:
    stamp = dt.datetime.fromisoformat(text)
    return round(stamp.timestamp() * 1_000_000) - PG_EPOCH_OFFSET_US


# --------------------------------------------------------------------------- golden bytes


@pytest.mark.parametrize("name", list(ALL_STREAMS))
def test_golden_streams_decode_to_expected(name: str) -> None:
    stream = ALL_STREAMS[name]
    assert decode_all(stream) == [m for _, m in stream]


def test_memoryview_input_decodes_like_bytes() -> None:
    decoder = PglogicalDecoder()
    for h, expected in TEXT_STREAM:
        assert decoder.decode(memoryview(bytes.fromhex(h))) == expected


@pytest.mark.parametrize(("data", "expected"), ALL_GOLDEN)
def test_encoder_reproduces_server_bytes(data: bytes, expected: Message) -> None:
    assert encode(expected) == data


def test_golden_covers_every_message_type_and_value_kind() -> None:
    types = {bytes.fromhex(h)[:1] for s in ALL_STREAMS.values() for h, _ in s}
    assert types == {b"S", b"B", b"C", b"O", b"R", b"I", b"U", b"D"}
    kinds: set[int] = set()
    for stream in ALL_STREAMS.values():
        for _, m in stream:
            for t in (getattr(m, "new", None), getattr(m, "old", None)):
                if t is not None:
                    kinds.update(t.kinds)
    assert kinds == {KIND_NULL, KIND_UNCHANGED, KIND_TEXT, KIND_BINARY, KIND_INTERNAL}


def test_golden_matches_the_sql_that_produced_it() -> None:
    msgs = [m for _, m in TEXT_STREAM]
    items = msgs[2]
    assert isinstance(items, Relation)
    assert (items.namespace, items.name, items.columns[0]) == (
        "public",
        "items",
        Column(1, "id", 0, -1),
    )
    assert all(c.flags == 0 for c in items.columns[1:])
    first = msgs[3]
    assert isinstance(first, Insert) and first.relid == items.oid
    assert first.new.values[1] == b"first"  # text values arrive without their NUL
    assert first.new.values[8] == b"2024-05-06 07:08:09.123456+00"
    assert first.new.values[-1] == BLOB
    # The relation is sent once per session: the next insert relies on the cache.
    assert not any(isinstance(m, Relation) and m.oid == items.oid for m in msgs[4:])
    update = msgs[9]
    assert isinstance(update, Update) and update.old is None
    assert update.new.kinds[-1] == KIND_UNCHANGED and update.new.values[-1] is None
    key_change = msgs[10]
    assert isinstance(key_change, Update) and key_change.old_kind == "K"
    assert key_change.old is not None and key_change.old.values[0] == b"2"
    mixed = next(m for m in msgs if isinstance(m, Relation) and m.name == "Mixed Case")
    assert [c.name for c in mixed.columns] == ["Key Col", "välue"]
    # The forwarded transaction: origin LSN and the origin's commit time (PG epoch µs).
    i = next(i for i, m in enumerate(msgs) if isinstance(m, Origin))
    begin, origin = msgs[i - 1], msgs[i]
    assert isinstance(begin, Begin) and begin.commit_ts == pg_us("2024-01-01T00:00:00+00:00")
    assert origin == Origin(0x0ABCDEF0, "bdr_upstream")


def test_golden_binary_values_are_send_recv_format() -> None:
    insert = BINARY_STREAM[3][1]
    assert isinstance(insert, Insert)
    values = insert.new.values
    assert values[0] == struct.pack(">i", 1)
    assert values[2] == struct.pack(">q", 9_000_000_000)
    created = struct.unpack(">q", values[8] or b"")[0]
    assert created == pg_us("2024-05-06T07:08:09.123456+00:00")


# --------------------------------------------------------------------------- negotiation


def test_options_start_with_the_format_and_name_what_pglogical_needs() -> None:
    opts = pglogical_options()
    assert opts[0] == ("startup_params_format", "1")
    d = dict(opts)
    assert d["min_proto_version"] == d["max_proto_version"] == "1"
    assert d["expected_encoding"] == "UTF8"
    assert d["binary.want_internal_basetypes"] == "false"
    assert d["binary.want_binary_basetypes"] == "false"
    assert "binary.basetypes_major_version" not in d
    assert d["pglogical.replication_set_names"] == '"default"'
    assert "pglogical.forward_origins" not in d
    assert len(d) == len(opts)


def test_options_quote_names_and_ask_for_binary_of_the_server_version() -> None:
    d = dict(
        pglogical_options(
            replication_sets=["default", 'My "Set"'],
            forward_origins=["all"],
            binary=True,
            server_version_num=150018,
        )
    )
    assert d["pglogical.replication_set_names"] == '"default","My ""Set"""'
    assert d["pglogical.forward_origins"] == '"all"'
    assert d["binary.want_binary_basetypes"] == "true"
    assert d["binary.basetypes_major_version"] == "1500"
    for key in ("bigendian", "sizeof_int", "sizeof_long", "sizeof_datum", "integer_datetimes"):
        assert f"binary.{key}" in d


@pytest.mark.parametrize(
    "kwargs",
    [
        {"replication_sets": []},
        {"replication_sets": [""]},
        {"replication_sets": ["a\0b"]},
        {"binary": True},
        {"binary": True, "server_version_num": 904},
    ],
)
def test_options_reject_bad_configuration(kwargs: dict[str, object]) -> None:
    with pytest.raises(ConfigError):
        pglogical_options(**kwargs)  # type: ignore[arg-type]


def _startup(data: bytes) -> Startup:
    msg = PglogicalDecoder().decode(data)
    assert isinstance(msg, Startup)
    return msg


def test_check_startup_accepts_the_real_replies() -> None:
    check_startup(_startup(TEXT_STARTUP), TEXT_OPTIONS)
    # pglogical 2.4 claims integer_datetimes=f on PG 15; it is not believed.
    check_startup(_startup(BINARY_STARTUP), BINARY_OPTIONS)


def test_check_startup_refuses_internal_format() -> None:
    with pytest.raises(ProtocolError, match="want_internal_basetypes=false"):
        check_startup(_startup(bytes.fromhex(INTERNAL_STREAM[0][0])), INTERNAL_OPTIONS)


def _patched(data: bytes, **changes: str | None) -> Startup:
    params = dict(_startup(data).params)
    for name, value in changes.items():
        key = name.replace("__", ".")
        if value is None:
            params.pop(key, None)
        else:
            params[key] = value
    return Startup(1, params)


@pytest.mark.parametrize(
    ("base", "changes", "requested", "match"),
    [
        (
            TEXT_STARTUP,
            {"min_proto_version": "2", "max_proto_version": "3"},
            TEXT_OPTIONS,
            "protocol",
        ),
        (TEXT_STARTUP, {"encoding": "SQL_ASCII"}, TEXT_OPTIONS, "UTF8"),
        (TEXT_STARTUP, {"encoding": None}, TEXT_OPTIONS, "lacks 'encoding'"),
        (TEXT_STARTUP, {"max_proto_version": "x"}, TEXT_OPTIONS, "not an integer"),
        (TEXT_STARTUP, {"proto_format": "json"}, TEXT_OPTIONS, "proto_format"),
        (TEXT_STARTUP, {"binary__internal_basetypes": "maybe"}, TEXT_OPTIONS, "not a boolean"),
        (BINARY_STARTUP, {}, TEXT_OPTIONS, "not requested"),
        (BINARY_STARTUP, {"binary__binary_pg_version": "1400"}, BINARY_OPTIONS, "1400"),
        (
            BINARY_STARTUP,
            {"binary__binary_pg_version": "906"},
            [*BINARY_OPTIONS, ("binary.basetypes_major_version", "906")],
            "floating-point",
        ),
    ],
)
def test_check_startup_explains_what_to_change(
    base: bytes,
    changes: dict[str, str | None],
    requested: list[tuple[str, str]],
    match: str,
) -> None:
    with pytest.raises(ProtocolError, match=match) as info:
        check_startup(_patched(base, **changes), requested)
    assert info.value.message_type == "S"


def test_check_startup_accepts_utf8_spelled_differently() -> None:
    check_startup(_patched(TEXT_STARTUP, encoding="utf-8"), TEXT_OPTIONS)


# --------------------------------------------------------------------------- edge cases

REL = Relation(None, 42, "s", "t", "", (Column(1, "id", 0, -1), Column(0, "v", 0, -1)))
INS = Insert(None, 42, row(b"1", None))


def fails(data: bytes, match: str = "", decoder: PglogicalDecoder | None = None) -> ProtocolError:
    with pytest.raises(ProtocolError, match=match) as info:
        (decoder or PglogicalDecoder()).decode(data)
    return info.value


@pytest.mark.parametrize(
    "msg",
    [
        Begin(1, 2, 3),
        Commit(0, 1, 2, 3),
        Origin(5, "o"),
        REL,
        INS,
        Update(None, 42, "", None, row(b"1", b"x")),
        Delete(None, 42, "K", row(b"1", None)),
    ],
)
def test_reserved_flags_are_refused(msg: Message) -> None:
    assert PglogicalDecoder().decode(encode(msg)) == msg
    for bit in range(8):
        err = fails(encode(msg, flags=1 << bit), "reserved flags")
        assert err.offset == 1


def test_unknown_column_flags_are_refused() -> None:
    data = encode(REL._replace(columns=(Column(3, "id", 0, -1),)))
    fails(data, "column flags 0x03")


@pytest.mark.parametrize("data", [b"X", b"M\x00", b"Y" + encode(INS)[1:]])
def test_unknown_message_types(data: bytes) -> None:
    assert fails(data, "unknown pglogical message type").offset == 0


def test_empty_message() -> None:
    assert fails(b"", "empty").message_type == ""


@pytest.mark.parametrize("msg", [m for _, m in TEXT_STREAM[1:12]])
def test_trailing_bytes_are_refused(msg: Message) -> None:
    if isinstance(msg, Relation):
        # After the last column anything but 'C' reads as one more metadata block.
        fails(encode(msg) + b"C", "trailing")
        fails(encode(msg) + b"\0", "truncated")
    else:
        fails(encode(msg) + b"\0", "trailing")


def test_unknown_value_kind() -> None:
    fails(encode(INS).replace(b"n", b"x"), "unknown value kind")


def test_kinds_not_enabled_by_the_startup_are_refused() -> None:
    decoder = PglogicalDecoder()
    decoder.decode(TEXT_STARTUP)
    binary = Insert(None, 42, row(b"\0\0\0\1", None, kinds=b"bn"))
    fails(encode(binary), "'b' was not enabled", decoder)
    fails(encode(binary._replace(new=row(b"x", None, kinds=b"in"))), "'i' was not", decoder)
    assert decoder.decode(encode(INS)) == INS
    decoder.decode(BINARY_STARTUP)
    assert decoder.decode(encode(binary)) == binary


def test_update_and_delete_with_old_row() -> None:
    old, new = row(b"1", b"a"), row(b"1", b"b")
    for msg in (Update(None, 7, "O", old, new), Delete(None, 7, "O", old)):
        assert PglogicalDecoder().decode(encode(msg)) == msg


@pytest.mark.parametrize(
    ("data", "match"),
    [
        (b"I\0\0\0\0\x2aK" + encode(INS)[7:], "expected the new tuple 'N'"),
        (b"D\0\0\0\0\x2aN" + encode(INS)[7:], "'K' or old row 'O'"),
        (b"U\0\0\0\0\x2aK" + encode(INS)[7:], "truncated"),
        (b"U\0\0\0\0\x2aK" + encode(INS)[7:] + b"K" + encode(INS)[7:], "expected the new tuple"),
        (b"I\0\0\0\0\x2aNX\0\0", "expected the tuple format 'T'"),
        (b"I\0\0\0\0\x2aNT\0\1t\xff\xff\xff\xff", "runs past"),
        (b"I\0\0\0\0\x2aNT\0\1t\0\0\0\5ab", "runs past"),
    ],
)
def test_malformed_rows(data: bytes, match: str) -> None:
    fails(data, match)


def test_text_values_without_nul_are_kept_whole() -> None:
    data = b"I\0\0\0\0\x2aNT\0\2t\0\0\0\2abt\0\0\0\0"
    assert PglogicalDecoder().decode(data) == Insert(None, 42, row(b"ab", b""))


def test_names_must_carry_their_nul_as_pglogical_2_sends_them() -> None:
    pre_2 = b"R\0\0\0\0\x2a\1s\0\1t\0A\0\0"
    fails(pre_2, "pre-2.0")


@pytest.mark.parametrize(
    ("tail", "match"),
    [
        (b"\0", "namespace is empty"),
        (b"\4a\0b\0\2t\0A\0\0", "contains a NUL"),
        (b"\2s\0\3\xff\xfe\0A\0\0", "not UTF-8"),
        (b"\2s\0\2t\0B\0\0", "attribute block 'A'"),
        (b"\2s\0\2t\0A\0\1X\0", "column block 'C'"),
        (b"\2s\0\2t\0A\0\1C\0", "column has no name"),
        (b"\2s\0\2t\0A\0\1C\0N\0\2a\0N\0\2b\0", "two name blocks"),
        (b"\2s\0\2t\0A\0\1C\0N\0\5a\0", "truncated"),
        (b"\2s\0\2t\0A\0\2C\0N\0\2a\0", "truncated"),
    ],
)
def test_malformed_relations(tail: bytes, match: str) -> None:
    fails(b"R\0\0\0\0\x2a" + tail, match)


def test_unknown_column_blocks_are_skipped() -> None:
    data = b"R\0\0\0\0\x2a\2s\0\2t\0A\0\2C\1Z\0\3xyzN\0\3id\0C\0N\0\1vT\0\0"
    cols = (Column(1, "id", 0, -1), Column(0, "v", 0, -1))
    assert PglogicalDecoder().decode(data) == Relation(None, 42, "s", "t", "", cols)


def test_zero_length_origin_name_means_unknown_origin() -> None:
    assert PglogicalDecoder().decode(b"O\0" + struct.pack(">Q", 9) + b"\0") == Origin(9, "")


@pytest.mark.parametrize(
    ("data", "match"),
    [
        (b"S\2a\0b\0", "version 2"),
        (b"S\1a\0", "has no value"),
        (b"S\1a\0b", "not NUL-terminated"),
        (b"S\1a\0b\0a\0c\0", "repeated"),
        (b"S\1\0b\0", "empty"),
        (b"S\1a\0\xff\0", "UTF-8"),
        (b"S\1binary.binary_basetypes\0perhaps\0", "not a boolean"),
    ],
)
def test_malformed_startup(data: bytes, match: str) -> None:
    fails(data, match)


@pytest.mark.parametrize(("data", "expected"), ALL_GOLDEN)
def test_every_truncation_is_a_protocol_error(data: bytes, expected: Message) -> None:
    decoder = PglogicalDecoder()
    for size in range(len(data)):
        try:
            got = decoder.decode(data[:size])
        except ProtocolError:
            continue
        # A startup cut at a pair boundary is a shorter, valid startup.
        assert isinstance(got, Startup) and isinstance(expected, Startup)
        assert got.params.items() <= expected.params.items()


# --------------------------------------------------------------------------- properties

chars = st.characters(blacklist_categories=["Cs"], blacklist_characters="\0")
names = st.text(chars, min_size=1, max_size=20)
u32 = st.integers(0, 2**32 - 1)
u64 = st.integers(0, 2**64 - 1)
i64 = st.integers(-(2**63), 2**63 - 1)


@st.composite
def tuples(draw: st.DrawFn) -> TupleData:
    kinds = draw(st.lists(st.sampled_from(b"nutbi"), max_size=8))
    values = tuple(None if k in b"nu" else draw(st.binary(max_size=12)) for k in kinds)
    return TupleData(bytes(kinds), values)


columns = st.builds(Column, st.sampled_from([0, 1]), names, st.just(0), st.just(-1))
messages = st.one_of(
    st.builds(Begin, u64, i64, u32),
    st.builds(Commit, st.just(0), u64, u64, i64),
    st.builds(Origin, u64, names),
    st.builds(
        Relation,
        st.none(),
        u32,
        names,
        names,
        st.just(""),
        st.lists(columns, max_size=5).map(tuple),
    ),
    st.builds(Insert, st.none(), u32, tuples()),
    st.builds(Update, st.none(), u32, st.just(""), st.none(), tuples()),
    st.builds(Update, st.none(), u32, st.sampled_from("KO"), tuples(), tuples()),
    st.builds(Delete, st.none(), u32, st.sampled_from("KO"), tuples()),
    st.builds(
        Startup,
        st.just(1),
        st.dictionaries(names, st.text(chars)),
    ),
)
FUZZ = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _only_protocol_errors(data: bytes) -> None:
    """Both before any startup (every kind allowed) and after a text-only one."""
    text_only = PglogicalDecoder()
    text_only.decode(TEXT_STARTUP)
    for decoder in (PglogicalDecoder(), text_only):
        with contextlib.suppress(ProtocolError):
            decoder.decode(data)


@FUZZ
@given(msg=messages)
def test_valid_messages_round_trip(msg: Message) -> None:
    assert PglogicalDecoder().decode(encode(msg)) == msg


@FUZZ
@given(data=st.binary(max_size=64), first=st.sampled_from(b"SBCORIUDX"))
def test_random_bytes_raise_only_protocol_errors(data: bytes, first: int) -> None:
    _only_protocol_errors(bytes([first]) + data)


@FUZZ
@given(msg=messages, data=st.data())
def test_mutated_messages_raise_only_protocol_errors(msg: Message, data: st.DataObject) -> None:
    raw = bytearray(encode(msg))
    cut = data.draw(st.integers(0, len(raw)))
    if data.draw(st.booleans()):
        _only_protocol_errors(bytes(raw[:cut]))
    elif cut < len(raw):
        raw[cut] = data.draw(st.integers(0, 255))
        _only_protocol_errors(bytes(raw))
