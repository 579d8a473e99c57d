"""Real pgoutput bytes captured from PostgreSQL 15.18 (Debian), with their meaning.

Captured with `pg_logical_slot_peek_binary_changes` on a throwaway cluster
(wal_level=logical, logical_decoding_work_mem=64kB so the 1000-row transactions
stream). Slot `s1` is a plain pgoutput slot, `s3` was created with two_phase=true.
Options: V1_TEXT proto 1 + messages; V2_TEXT_STREAM proto 2 + messages + streaming
(only the part from the first Stream Start; the earlier bytes equal V1_TEXT's);
V3_BINARY_ALL proto 3 + binary + messages + streaming + two_phase. Each list is the
stream in server order, minus most of the 1000-row filler inserts into t_stream
(the first one after each Begin / first Stream Start is kept). V3_BINARY_ALL is
written as what it adds to the text captures: their row messages in binary
(`_binary_rows`) and the two-phase messages.

Workload (xids from txid_current(), OIDs from ::regclass / ::regtype, see FACTS):
insert two t_pk rows (one with a 6400-byte EXTERNAL-storage text, BIG), update a
non-key column (the TOASTed column comes back as 'u'), update the key (K), delete
(K), insert/update/delete on the REPLICA IDENTITY FULL table t_full (O), TRUNCATE
t_trunc, t_full RESTART IDENTITY CASCADE, a transactional and a non-transactional
logical message, a UTF-8 table/column name, a transaction with replication origin
`src_origin` (origin LSN 0/ABCDEF, xact timestamp 2024-01-02 03:04:05+00), PREPARE +
COMMIT PREPARED 'gid_commit', PREPARE + ROLLBACK PREPARED 'gid_rollback', a streamed
commit (message, enum-typed row, update, key update, delete, truncate, 1000 rows),
a streamed ROLLBACK, a streamed commit with a rolled-back savepoint (subxact 739:
the only xid assigned between 738 and 740), and a streamed PREPARE 'gid_stream' +
COMMIT PREPARED.
"""

from __future__ import annotations

import hashlib

from bridge.decode.messages import (
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

BIG = "".join(hashlib.md5(str(i).encode()).hexdigest() for i in range(1, 201)).encode()
"""`SELECT string_agg(md5(i::text), '') FROM generate_series(1, 200) i`"""

PAD = b"x" * 200
"""The text column of every filler row of t_stream (`repeat('x', 200)`)."""

FACTS = {
    "oid_t_pk": 16391,
    "oid_t_full": 16398,
    "oid_t_stream": 16401,
    "oid_t_trunc": 16408,
    "oid_tä_ünï": 16413,
    "oid_mood": 16385,
    "xid_ins": 726,
    "xid_upd_plain": 727,
    "xid_upd_key": 728,
    "xid_del_key": 729,
    "xid_full": 730,
    "xid_trunc": 731,
    "xid_msg": 732,
    "xid_origin": 733,
    "xid_prep_commit": 734,
    "xid_prep_rollback": 735,
    "xid_stream_commit": 736,
    "xid_stream_abort": 737,
    "xid_stream_subabort": 738,
    "subxid_stream_subabort": 739,
    "xid_stream_prepare": 740,
}


def _t_stream(xid: int | None) -> Relation:
    """t_stream's Relation message: sent again in every transaction that writes to it."""
    return Relation(
        xid=xid,
        oid=16401,
        namespace="public",
        name="t_stream",
        replica_identity="d",
        columns=(
            Column(flags=1, name="id", type_oid=23, typmod=-1),
            Column(flags=0, name="payload", type_oid=25, typmod=-1),
        ),
    )


V1_TEXT: list[tuple[str, Message]] = [
    (
        "42000000000153d2b8000303d31d508d3f000002d6",
        Begin(final_lsn=22270648, commit_ts=848630194933055, xid=726),
    ),
    (
        "59000040017075626c6963006d6f6f6400",
        TypeMessage(xid=None, oid=16385, namespace="public", name="mood"),
    ),
    (
        (
            "52000040077075626c696300745f706b006400060169640000000017ffffffff006e616d65000000"
            "0019ffffffff00616d6f756e7400000006a4000a0006006269670000000019ffffffff006d000000"
            "4001ffffffff00666c61670000000010ffffffff"
        ),
        Relation(
            xid=None,
            oid=16391,
            namespace="public",
            name="t_pk",
            replica_identity="d",
            columns=(
                Column(flags=1, name="id", type_oid=23, typmod=-1),
                Column(flags=0, name="name", type_oid=25, typmod=-1),
                Column(flags=0, name="amount", type_oid=1700, typmod=655366),
                Column(flags=0, name="big", type_oid=25, typmod=-1),
                Column(flags=0, name="m", type_oid=16385, typmod=-1),
                Column(flags=0, name="flag", type_oid=16, typmod=-1),
            ),
        ),
    ),
    (
        "49000040074e00067400000001317400000005616c706861740000000531322e35307400001900"
        + BIG.hex()
        + "74000000056861707079740000000174",
        Insert(
            xid=None,
            relid=16391,
            new=TupleData(kinds=b"tttttt", values=(b"1", b"alpha", b"12.50", BIG, b"happy", b"t")),
        ),
    ),
    (
        "49000040074e00067400000001326e74000000052d332e30307400000005736d616c6c6e740000000166",
        Insert(
            xid=None,
            relid=16391,
            new=TupleData(kinds=b"tnttnt", values=(b"2", None, b"-3.00", b"small", None, b"f")),
        ),
    ),
    (
        "4300000000000153d2b8000000000153d2e8000303d31d508d3f",
        Commit(flags=0, commit_lsn=22270648, end_lsn=22270696, commit_ts=848630194933055),
    ),
    (
        "42000000000153d390000303d31d508f7a000002d7",
        Begin(final_lsn=22270864, commit_ts=848630194933626, xid=727),
    ),
    (
        (
            "55000040074e0006740000000131740000000462657461740000000531322e353075740000000568"
            "61707079740000000174"
        ),
        Update(
            xid=None,
            relid=16391,
            old_kind="",
            old=None,
            new=TupleData(kinds=b"tttutt", values=(b"1", b"beta", b"12.50", None, b"happy", b"t")),
        ),
    ),
    (
        "4300000000000153d390000000000153d3c0000303d31d508f7a",
        Commit(flags=0, commit_lsn=22270864, end_lsn=22270912, commit_ts=848630194933626),
    ),
    (
        "42000000000153d460000303d31d50902f000002d8",
        Begin(final_lsn=22271072, commit_ts=848630194933807, xid=728),
    ),
    (
        (
            "55000040074b00067400000001326e6e6e6e6e4e0006740000000231306e74000000052d332e3030"
            "7400000005736d616c6c6e740000000166"
        ),
        Update(
            xid=None,
            relid=16391,
            old_kind="K",
            old=TupleData(kinds=b"tnnnnn", values=(b"2", None, None, None, None, None)),
            new=TupleData(kinds=b"tnttnt", values=(b"10", None, b"-3.00", b"small", None, b"f")),
        ),
    ),
    (
        "4300000000000153d460000000000153d490000303d31d50902f",
        Commit(flags=0, commit_lsn=22271072, end_lsn=22271120, commit_ts=848630194933807),
    ),
    (
        "42000000000153d4d0000303d31d5090be000002d9",
        Begin(final_lsn=22271184, commit_ts=848630194933950, xid=729),
    ),
    (
        "44000040074b0006740000000231306e6e6e6e6e",
        Delete(
            xid=None,
            relid=16391,
            old_kind="K",
            old=TupleData(kinds=b"tnnnnn", values=(b"10", None, None, None, None, None)),
        ),
    ),
    (
        "4300000000000153d4d0000000000153d500000303d31d5090be",
        Commit(flags=0, commit_lsn=22271184, end_lsn=22271232, commit_ts=848630194933950),
    ),
    (
        "42000000000153d5f0000303d31d5091eb000002da",
        Begin(final_lsn=22271472, commit_ts=848630194934251, xid=730),
    ),
    (
        (
            "520000400e7075626c696300745f66756c6c006600020169640000000017ffffffff016e6f746500"
            "0000041300000018"
        ),
        Relation(
            xid=None,
            oid=16398,
            namespace="public",
            name="t_full",
            replica_identity="f",
            columns=(
                Column(flags=1, name="id", type_oid=23, typmod=-1),
                Column(flags=1, name="note", type_oid=1043, typmod=24),
            ),
        ),
    ),
    (
        "490000400e4e00027400000001377400000005736576656e",
        Insert(xid=None, relid=16398, new=TupleData(kinds=b"tt", values=(b"7", b"seven"))),
    ),
    (
        "550000400e4f00027400000001377400000005736576656e4e00027400000001377400000005534556454e",
        Update(
            xid=None,
            relid=16398,
            old_kind="O",
            old=TupleData(kinds=b"tt", values=(b"7", b"seven")),
            new=TupleData(kinds=b"tt", values=(b"7", b"SEVEN")),
        ),
    ),
    (
        "440000400e4f00027400000001377400000005534556454e",
        Delete(
            xid=None, relid=16398, old_kind="O", old=TupleData(kinds=b"tt", values=(b"7", b"SEVEN"))
        ),
    ),
    (
        "4300000000000153d5f0000000000153d620000303d31d5091eb",
        Commit(flags=0, commit_lsn=22271472, end_lsn=22271520, commit_ts=848630194934251),
    ),
    (
        "42000000000153de70000303d31d509409000002db",
        Begin(final_lsn=22273648, commit_ts=848630194934793, xid=731),
    ),
    (
        "52000040187075626c696300745f7472756e63006400010169640000000017ffffffff",
        Relation(
            xid=None,
            oid=16408,
            namespace="public",
            name="t_trunc",
            replica_identity="d",
            columns=(Column(flags=1, name="id", type_oid=23, typmod=-1),),
        ),
    ),
    (
        (
            "520000400e7075626c696300745f66756c6c006600020169640000000017ffffffff016e6f746500"
            "0000041300000018"
        ),
        Relation(
            xid=None,
            oid=16398,
            namespace="public",
            name="t_full",
            replica_identity="f",
            columns=(
                Column(flags=1, name="id", type_oid=23, typmod=-1),
                Column(flags=1, name="note", type_oid=1043, typmod=24),
            ),
        ),
    ),
    (
        "540000000203000040180000400e",
        Truncate(xid=None, options=3, relids=(16408, 16398)),
    ),
    (
        "4300000000000153de70000000000153df80000303d31d509409",
        Commit(flags=0, commit_lsn=22273648, end_lsn=22273920, commit_ts=848630194934793),
    ),
    (
        "4d00000000000153e00070667832000000000300ff01",
        LogicalMessage(
            xid=None, transactional=False, lsn=22274048, prefix="pfx2", content=b"\x00\xff\x01"
        ),
    ),
    (
        "42000000000153e100000303d31d5099b1000002dc",
        Begin(final_lsn=22274304, commit_ts=848630194936241, xid=732),
    ),
    (
        "4d01000000000153dfc0706678000000000568656c6c6f",
        LogicalMessage(xid=None, transactional=True, lsn=22273984, prefix="pfx", content=b"hello"),
    ),
    (
        (
            "520000401d7075626c69630074c3a45fc3bc6ec3af006400020169640000000017ffffffff0063c3"
            "b66c756d6e0000000019ffffffff"
        ),
        Relation(
            xid=None,
            oid=16413,
            namespace="public",
            name="tä_ünï",
            replica_identity="d",
            columns=(
                Column(flags=1, name="id", type_oid=23, typmod=-1),
                Column(flags=0, name="cölumn", type_oid=25, typmod=-1),
            ),
        ),
    ),
    (
        "490000401d4e0002740000000131740000000b6772c3bcc39f6520e29c93",
        Insert(
            xid=None,
            relid=16413,
            new=TupleData(kinds=b"tt", values=(b"1", b"gr\xc3\xbc\xc3\x9fe \xe2\x9c\x93")),
        ),
    ),
    (
        "4300000000000153e100000000000153e130000303d31d5099b1",
        Commit(flags=0, commit_lsn=22274304, end_lsn=22274352, commit_ts=848630194936241),
    ),
    (
        "42000000000153e2100002b0ec8515f340000002dd",
        Begin(final_lsn=22274576, commit_ts=757479845000000, xid=733),
    ),
    (
        "4f0000000000abcdef7372635f6f726967696e00",
        Origin(commit_lsn=11259375, name="src_origin"),
    ),
    (
        "52000040187075626c696300745f7472756e63006400010169640000000017ffffffff",
        Relation(
            xid=None,
            oid=16408,
            namespace="public",
            name="t_trunc",
            replica_identity="d",
            columns=(Column(flags=1, name="id", type_oid=23, typmod=-1),),
        ),
    ),
    (
        "49000040184e000174000000023432",
        Insert(xid=None, relid=16408, new=TupleData(kinds=b"t", values=(b"42",))),
    ),
    (
        "4300000000000153e210000000000153e2580002b0ec8515f340",
        Commit(flags=0, commit_lsn=22274576, end_lsn=22274648, commit_ts=757479845000000),
    ),
    (
        "42000000000153e3d8000303d31d509bec000002de",
        Begin(final_lsn=22275032, commit_ts=848630194936812, xid=734),
    ),
    (
        "49000040184e000174000000023433",
        Insert(xid=None, relid=16408, new=TupleData(kinds=b"t", values=(b"43",))),
    ),
    (
        "4300000000000153e3d8000000000153e418000303d31d509bec",
        Commit(flags=0, commit_lsn=22275032, end_lsn=22275096, commit_ts=848630194936812),
    ),
    (
        "42000000000158f940000303d31d50a433000002e0",
        Begin(final_lsn=22608192, commit_ts=848630194938931, xid=736),
    ),
    (
        "4d01000000000153e618737066780000000009696e2073747265616d",
        LogicalMessage(
            xid=None, transactional=True, lsn=22275608, prefix="spfx", content=b"in stream"
        ),
    ),
    (
        (
            "49000040074e0006740000000133740000000567616d6d617400000004312e303074000000016274"
            "000000026f6b6e"
        ),
        Insert(
            xid=None,
            relid=16391,
            new=TupleData(kinds=b"tttttn", values=(b"3", b"gamma", b"1.00", b"b", b"ok", None)),
        ),
    ),
    (
        (
            "55000040074e0006740000000133740000000547414d4d417400000004312e303074000000016274"
            "000000026f6b6e"
        ),
        Update(
            xid=None,
            relid=16391,
            old_kind="",
            old=None,
            new=TupleData(kinds=b"tttttn", values=(b"3", b"GAMMA", b"1.00", b"b", b"ok", None)),
        ),
    ),
    (
        (
            "55000040074b00067400000001336e6e6e6e6e4e0006740000000134740000000547414d4d417400"
            "000004312e303074000000016274000000026f6b6e"
        ),
        Update(
            xid=None,
            relid=16391,
            old_kind="K",
            old=TupleData(kinds=b"tnnnnn", values=(b"3", None, None, None, None, None)),
            new=TupleData(kinds=b"tttttn", values=(b"4", b"GAMMA", b"1.00", b"b", b"ok", None)),
        ),
    ),
    (
        "44000040074b00067400000001346e6e6e6e6e",
        Delete(
            xid=None,
            relid=16391,
            old_kind="K",
            old=TupleData(kinds=b"tnnnnn", values=(b"4", None, None, None, None, None)),
        ),
    ),
    (
        "52000040187075626c696300745f7472756e63006400010169640000000017ffffffff",
        Relation(
            xid=None,
            oid=16408,
            namespace="public",
            name="t_trunc",
            replica_identity="d",
            columns=(Column(flags=1, name="id", type_oid=23, typmod=-1),),
        ),
    ),
    (
        "54000000010000004018",
        Truncate(xid=None, options=0, relids=(16408,)),
    ),
    (
        (
            "52000040117075626c696300745f73747265616d006400020169640000000017ffffffff00706179"
            "6c6f61640000000019ffffffff"
        ),
        _t_stream(None),
    ),
    (
        "49000040114e000274000000013174000000c8" + PAD.hex(),
        Insert(xid=None, relid=16401, new=TupleData(kinds=b"tt", values=(b"1", PAD))),
    ),
    (
        "4300000000000158f940000000000158fa10000303d31d50a433",
        Commit(flags=0, commit_lsn=22608192, end_lsn=22608400, commit_ts=848630194938931),
    ),
    (
        "420000000001682230000303d31d50bb97000002e2",
        Begin(final_lsn=23601712, commit_ts=848630194944919, xid=738),
    ),
    (
        "49000040114e000274000000043330303174000000c8" + PAD.hex(),
        Insert(xid=None, relid=16401, new=TupleData(kinds=b"tt", values=(b"3001", PAD))),
    ),
    (
        "430000000000016822300000000001682260000303d31d50bb97",
        Commit(flags=0, commit_lsn=23601712, end_lsn=23601760, commit_ts=848630194944919),
    ),
    (
        "4200000000016d3148000303d31d50c293000002e4",
        Begin(final_lsn=23933256, commit_ts=848630194946707, xid=740),
    ),
    (
        "49000040114e000274000000043530303174000000c8" + PAD.hex(),
        Insert(xid=None, relid=16401, new=TupleData(kinds=b"tt", values=(b"5001", PAD))),
    ),
    (
        "430000000000016d314800000000016d3188000303d31d50c293",
        Commit(flags=0, commit_lsn=23933256, end_lsn=23933320, commit_ts=848630194946707),
    ),
]


def _later_segments(hx: str, xid: int, count: int) -> list[tuple[str, Message]]:
    """`count` further segments of streamed transaction `xid` whose rows were all filler
    (dropped): a Stream Start (bytes `hx`) and a Stream Stop each."""
    return [(hx, StreamStart(xid=xid, first_segment=False)), ("45", StreamStop())] * count


V2_TEXT_STREAM: list[tuple[str, Message]] = [
    (
        "53000002e001",
        StreamStart(xid=736, first_segment=True),
    ),
    (
        "4d000002e001000000000153e618737066780000000009696e2073747265616d",
        LogicalMessage(
            xid=736, transactional=True, lsn=22275608, prefix="spfx", content=b"in stream"
        ),
    ),
    (
        "59000002e0000040017075626c6963006d6f6f6400",
        TypeMessage(xid=736, oid=16385, namespace="public", name="mood"),
    ),
    (
        (
            "52000002e0000040077075626c696300745f706b006400060169640000000017ffffffff006e616d"
            "650000000019ffffffff00616d6f756e7400000006a4000a0006006269670000000019ffffffff00"
            "6d0000004001ffffffff00666c61670000000010ffffffff"
        ),
        Relation(
            xid=736,
            oid=16391,
            namespace="public",
            name="t_pk",
            replica_identity="d",
            columns=(
                Column(flags=1, name="id", type_oid=23, typmod=-1),
                Column(flags=0, name="name", type_oid=25, typmod=-1),
                Column(flags=0, name="amount", type_oid=1700, typmod=655366),
                Column(flags=0, name="big", type_oid=25, typmod=-1),
                Column(flags=0, name="m", type_oid=16385, typmod=-1),
                Column(flags=0, name="flag", type_oid=16, typmod=-1),
            ),
        ),
    ),
    (
        (
            "49000002e0000040074e0006740000000133740000000567616d6d617400000004312e3030740000"
            "00016274000000026f6b6e"
        ),
        Insert(
            xid=736,
            relid=16391,
            new=TupleData(kinds=b"tttttn", values=(b"3", b"gamma", b"1.00", b"b", b"ok", None)),
        ),
    ),
    (
        (
            "55000002e0000040074e0006740000000133740000000547414d4d417400000004312e3030740000"
            "00016274000000026f6b6e"
        ),
        Update(
            xid=736,
            relid=16391,
            old_kind="",
            old=None,
            new=TupleData(kinds=b"tttttn", values=(b"3", b"GAMMA", b"1.00", b"b", b"ok", None)),
        ),
    ),
    (
        (
            "55000002e0000040074b00067400000001336e6e6e6e6e4e0006740000000134740000000547414d"
            "4d417400000004312e303074000000016274000000026f6b6e"
        ),
        Update(
            xid=736,
            relid=16391,
            old_kind="K",
            old=TupleData(kinds=b"tnnnnn", values=(b"3", None, None, None, None, None)),
            new=TupleData(kinds=b"tttttn", values=(b"4", b"GAMMA", b"1.00", b"b", b"ok", None)),
        ),
    ),
    (
        "44000002e0000040074b00067400000001346e6e6e6e6e",
        Delete(
            xid=736,
            relid=16391,
            old_kind="K",
            old=TupleData(kinds=b"tnnnnn", values=(b"4", None, None, None, None, None)),
        ),
    ),
    (
        "52000002e0000040187075626c696300745f7472756e63006400010169640000000017ffffffff",
        Relation(
            xid=736,
            oid=16408,
            namespace="public",
            name="t_trunc",
            replica_identity="d",
            columns=(Column(flags=1, name="id", type_oid=23, typmod=-1),),
        ),
    ),
    (
        "54000002e0000000010000004018",
        Truncate(xid=736, options=0, relids=(16408,)),
    ),
    (
        (
            "52000002e0000040117075626c696300745f73747265616d006400020169640000000017ffffffff"
            "007061796c6f61640000000019ffffffff"
        ),
        _t_stream(736),
    ),
    (
        "49000002e0000040114e000274000000013174000000c8" + PAD.hex(),
        Insert(xid=736, relid=16401, new=TupleData(kinds=b"tt", values=(b"1", PAD))),
    ),
    (
        "45",
        StreamStop(),
    ),
    *_later_segments("53000002e000", 736, 5),
    (
        "63000002e000000000000158f940000000000158fa10000303d31d50a433",
        StreamCommit(
            xid=736, flags=0, commit_lsn=22608192, end_lsn=22608400, commit_ts=848630194938931
        ),
    ),
    (
        "53000002e101",
        StreamStart(xid=737, first_segment=True),
    ),
    (
        (
            "52000002e1000040117075626c696300745f73747265616d006400020169640000000017ffffffff"
            "007061796c6f61640000000019ffffffff"
        ),
        _t_stream(737),
    ),
    (
        "49000002e1000040114e000274000000043230303174000000c8" + PAD.hex(),
        Insert(xid=737, relid=16401, new=TupleData(kinds=b"tt", values=(b"2001", PAD))),
    ),
    (
        "45",
        StreamStop(),
    ),
    *_later_segments("53000002e100", 737, 4),
    (
        "41000002e1000002e1",
        StreamAbort(xid=737, subxid=737, abort_lsn=None, abort_ts=None),
    ),
    (
        "53000002e201",
        StreamStart(xid=738, first_segment=True),
    ),
    (
        (
            "52000002e2000040117075626c696300745f73747265616d006400020169640000000017ffffffff"
            "007061796c6f61640000000019ffffffff"
        ),
        _t_stream(738),
    ),
    (
        "49000002e2000040114e000274000000043330303174000000c8" + PAD.hex(),
        Insert(xid=738, relid=16401, new=TupleData(kinds=b"tt", values=(b"3001", PAD))),
    ),
    (
        "45",
        StreamStop(),
    ),
    *_later_segments("53000002e200", 738, 5),
    (
        "41000002e2000002e3",
        StreamAbort(xid=738, subxid=739, abort_lsn=None, abort_ts=None),
    ),
    (
        "63000002e20000000000016822300000000001682260000303d31d50bb97",
        StreamCommit(
            xid=738, flags=0, commit_lsn=23601712, end_lsn=23601760, commit_ts=848630194944919
        ),
    ),
    (
        "53000002e401",
        StreamStart(xid=740, first_segment=True),
    ),
    (
        (
            "52000002e4000040117075626c696300745f73747265616d006400020169640000000017ffffffff"
            "007061796c6f61640000000019ffffffff"
        ),
        _t_stream(740),
    ),
    (
        "49000002e4000040114e000274000000043530303174000000c8" + PAD.hex(),
        Insert(xid=740, relid=16401, new=TupleData(kinds=b"tt", values=(b"5001", PAD))),
    ),
    (
        "45",
        StreamStop(),
    ),
    *_later_segments("53000002e400", 740, 5),
    (
        "63000002e40000000000016d314800000000016d3188000303d31d50c293",
        StreamCommit(
            xid=740, flags=0, commit_lsn=23933256, end_lsn=23933320, commit_ts=848630194946707
        ),
    ),
]


def _binary_rows(
    text: list[tuple[str, Message]], rows: list[tuple[str, Message]]
) -> list[tuple[str, Message]]:
    """`text` with its row messages (Insert, Update, Delete) replaced, in order, by `rows`.

    With binary = true the server sends the same stream but for the row messages'
    values, so V3_BINARY_ALL lists only those and takes everything else from the
    text captures.
    """
    replacements = iter(rows)
    out = [
        next(replacements) if isinstance(msg, Insert | Update | Delete) else (hx, msg)
        for hx, msg in text
    ]
    assert next(replacements, None) is None, "more binary rows than row messages"
    return out


V3_BINARY_ALL: list[tuple[str, Message]] = [
    # V1_TEXT up to the first prepared transaction (which V1 sees only once committed).
    *_binary_rows(
        V1_TEXT[:37],
        [
            (
                (
                    "49000040074e00066200000004000000016200000005616c706861620000000c0002000000000002"
                    "000c13886200001900"
                )
                + BIG.hex()
                + "62000000056861707079620000000101",
                Insert(
                    xid=None,
                    relid=16391,
                    new=TupleData(
                        kinds=b"bbbbbb",
                        values=(
                            b"\x00\x00\x00\x01",
                            b"alpha",
                            b"\x00\x02\x00\x00\x00\x00\x00\x02\x00\x0c\x13\x88",
                            BIG,
                            b"happy",
                            b"\x01",
                        ),
                    ),
                ),
            ),
            (
                (
                    "49000040074e00066200000004000000026e620000000a000100004000000200036200000005736d"
                    "616c6c6e620000000100"
                ),
                Insert(
                    xid=None,
                    relid=16391,
                    new=TupleData(
                        kinds=b"bnbbnb",
                        values=(
                            b"\x00\x00\x00\x02",
                            None,
                            b"\x00\x01\x00\x00@\x00\x00\x02\x00\x03",
                            b"small",
                            None,
                            b"\x00",
                        ),
                    ),
                ),
            ),
            (
                (
                    "55000040074e0006620000000400000001620000000462657461620000000c000200000000000200"
                    "0c13887562000000056861707079620000000101"
                ),
                Update(
                    xid=None,
                    relid=16391,
                    old_kind="",
                    old=None,
                    new=TupleData(
                        kinds=b"bbbubb",
                        values=(
                            b"\x00\x00\x00\x01",
                            b"beta",
                            b"\x00\x02\x00\x00\x00\x00\x00\x02\x00\x0c\x13\x88",
                            None,
                            b"happy",
                            b"\x01",
                        ),
                    ),
                ),
            ),
            (
                (
                    "55000040074b00066200000004000000026e6e6e6e6e4e000662000000040000000a6e620000000a"
                    "000100004000000200036200000005736d616c6c6e620000000100"
                ),
                Update(
                    xid=None,
                    relid=16391,
                    old_kind="K",
                    old=TupleData(
                        kinds=b"bnnnnn", values=(b"\x00\x00\x00\x02", None, None, None, None, None)
                    ),
                    new=TupleData(
                        kinds=b"bnbbnb",
                        values=(
                            b"\x00\x00\x00\n",
                            None,
                            b"\x00\x01\x00\x00@\x00\x00\x02\x00\x03",
                            b"small",
                            None,
                            b"\x00",
                        ),
                    ),
                ),
            ),
            (
                "44000040074b000662000000040000000a6e6e6e6e6e",
                Delete(
                    xid=None,
                    relid=16391,
                    old_kind="K",
                    old=TupleData(
                        kinds=b"bnnnnn", values=(b"\x00\x00\x00\n", None, None, None, None, None)
                    ),
                ),
            ),
            (
                "490000400e4e00026200000004000000076200000005736576656e",
                Insert(
                    xid=None,
                    relid=16398,
                    new=TupleData(kinds=b"bb", values=(b"\x00\x00\x00\x07", b"seven")),
                ),
            ),
            (
                (
                    "550000400e4f00026200000004000000076200000005736576656e4e000262000000040000000762"
                    "00000005534556454e"
                ),
                Update(
                    xid=None,
                    relid=16398,
                    old_kind="O",
                    old=TupleData(kinds=b"bb", values=(b"\x00\x00\x00\x07", b"seven")),
                    new=TupleData(kinds=b"bb", values=(b"\x00\x00\x00\x07", b"SEVEN")),
                ),
            ),
            (
                "440000400e4f00026200000004000000076200000005534556454e",
                Delete(
                    xid=None,
                    relid=16398,
                    old_kind="O",
                    old=TupleData(kinds=b"bb", values=(b"\x00\x00\x00\x07", b"SEVEN")),
                ),
            ),
            (
                "490000401d4e0002620000000400000001620000000b6772c3bcc39f6520e29c93",
                Insert(
                    xid=None,
                    relid=16413,
                    new=TupleData(
                        kinds=b"bb",
                        values=(b"\x00\x00\x00\x01", b"gr\xc3\xbc\xc3\x9fe \xe2\x9c\x93"),
                    ),
                ),
            ),
            (
                "49000040184e000162000000040000002a",
                Insert(
                    xid=None, relid=16408, new=TupleData(kinds=b"b", values=(b"\x00\x00\x00*",))
                ),
            ),
        ],
    ),
    # Two-phase transactions, decoded as such only here (two_phase=true).
    (
        "62000000000153e2d8000000000153e3d8000303d31d509ba3000002de6769645f636f6d6d697400",
        BeginPrepare(
            prepare_lsn=22274776,
            end_lsn=22275032,
            prepare_ts=848630194936739,
            xid=734,
            gid="gid_commit",
        ),
    ),
    (
        "49000040184e000162000000040000002b",
        Insert(xid=None, relid=16408, new=TupleData(kinds=b"b", values=(b"\x00\x00\x00+",))),
    ),
    (
        "5000000000000153e2d8000000000153e3d8000303d31d509ba3000002de6769645f636f6d6d697400",
        Prepare(
            flags=0,
            prepare_lsn=22274776,
            end_lsn=22275032,
            prepare_ts=848630194936739,
            xid=734,
            gid="gid_commit",
        ),
    ),
    (
        "4b00000000000153e3d8000000000153e418000303d31d509bec000002de6769645f636f6d6d697400",
        CommitPrepared(
            flags=0,
            commit_lsn=22275032,
            end_lsn=22275096,
            commit_ts=848630194936812,
            xid=734,
            gid="gid_commit",
        ),
    ),
    (
        "62000000000153e498000000000153e598000303d31d509c6f000002df6769645f726f6c6c6261636b00",
        BeginPrepare(
            prepare_lsn=22275224,
            end_lsn=22275480,
            prepare_ts=848630194936943,
            xid=735,
            gid="gid_rollback",
        ),
    ),
    (
        "49000040184e000162000000040000002c",
        Insert(xid=None, relid=16408, new=TupleData(kinds=b"b", values=(b"\x00\x00\x00,",))),
    ),
    (
        "5000000000000153e498000000000153e598000303d31d509c6f000002df6769645f726f6c6c6261636b00",
        Prepare(
            flags=0,
            prepare_lsn=22275224,
            end_lsn=22275480,
            prepare_ts=848630194936943,
            xid=735,
            gid="gid_rollback",
        ),
    ),
    (
        (
            "7200000000000153e598000000000153e5d8000303d31d509c6f000303d31d509caa000002df6769"
            "645f726f6c6c6261636b00"
        ),
        RollbackPrepared(
            flags=0,
            prepare_end_lsn=22275480,
            rollback_end_lsn=22275544,
            prepare_ts=848630194936943,
            rollback_ts=848630194937002,
            xid=735,
            gid="gid_rollback",
        ),
    ),
    # V2_TEXT_STREAM up to the last transaction, again with binary rows ...
    *_binary_rows(
        V2_TEXT_STREAM[:-1],
        [
            (
                (
                    "49000002e0000040074e0006620000000400000003620000000567616d6d61620000000a00010000"
                    "00000002000162000000016262000000026f6b6e"
                ),
                Insert(
                    xid=736,
                    relid=16391,
                    new=TupleData(
                        kinds=b"bbbbbn",
                        values=(
                            b"\x00\x00\x00\x03",
                            b"gamma",
                            b"\x00\x01\x00\x00\x00\x00\x00\x02\x00\x01",
                            b"b",
                            b"ok",
                            None,
                        ),
                    ),
                ),
            ),
            (
                (
                    "55000002e0000040074e0006620000000400000003620000000547414d4d41620000000a00010000"
                    "00000002000162000000016262000000026f6b6e"
                ),
                Update(
                    xid=736,
                    relid=16391,
                    old_kind="",
                    old=None,
                    new=TupleData(
                        kinds=b"bbbbbn",
                        values=(
                            b"\x00\x00\x00\x03",
                            b"GAMMA",
                            b"\x00\x01\x00\x00\x00\x00\x00\x02\x00\x01",
                            b"b",
                            b"ok",
                            None,
                        ),
                    ),
                ),
            ),
            (
                (
                    "55000002e0000040074b00066200000004000000036e6e6e6e6e4e00066200000004000000046200"
                    "00000547414d4d41620000000a0001000000000002000162000000016262000000026f6b6e"
                ),
                Update(
                    xid=736,
                    relid=16391,
                    old_kind="K",
                    old=TupleData(
                        kinds=b"bnnnnn", values=(b"\x00\x00\x00\x03", None, None, None, None, None)
                    ),
                    new=TupleData(
                        kinds=b"bbbbbn",
                        values=(
                            b"\x00\x00\x00\x04",
                            b"GAMMA",
                            b"\x00\x01\x00\x00\x00\x00\x00\x02\x00\x01",
                            b"b",
                            b"ok",
                            None,
                        ),
                    ),
                ),
            ),
            (
                "44000002e0000040074b00066200000004000000046e6e6e6e6e",
                Delete(
                    xid=736,
                    relid=16391,
                    old_kind="K",
                    old=TupleData(
                        kinds=b"bnnnnn", values=(b"\x00\x00\x00\x04", None, None, None, None, None)
                    ),
                ),
            ),
            (
                "49000002e0000040114e000262000000040000000162000000c8" + PAD.hex(),
                Insert(
                    xid=736,
                    relid=16401,
                    new=TupleData(kinds=b"bb", values=(b"\x00\x00\x00\x01", PAD)),
                ),
            ),
            (
                "49000002e1000040114e00026200000004000007d162000000c8" + PAD.hex(),
                Insert(
                    xid=737,
                    relid=16401,
                    new=TupleData(kinds=b"bb", values=(b"\x00\x00\x07\xd1", PAD)),
                ),
            ),
            (
                "49000002e2000040114e0002620000000400000bb962000000c8" + PAD.hex(),
                Insert(
                    xid=738,
                    relid=16401,
                    new=TupleData(kinds=b"bb", values=(b"\x00\x00\x0b\xb9", PAD)),
                ),
            ),
            (
                "49000002e4000040114e000262000000040000138962000000c8" + PAD.hex(),
                Insert(
                    xid=740,
                    relid=16401,
                    new=TupleData(kinds=b"bb", values=(b"\x00\x00\x13\x89", PAD)),
                ),
            ),
        ],
    ),
    # ... whose end is a streamed PREPARE and its COMMIT PREPARED here, not a StreamCommit.
    (
        "700000000000016d304800000000016d3148000303d31d50c1d9000002e46769645f73747265616d00",
        StreamPrepare(
            flags=0,
            prepare_lsn=23933000,
            end_lsn=23933256,
            prepare_ts=848630194946521,
            xid=740,
            gid="gid_stream",
        ),
    ),
    (
        "4b0000000000016d314800000000016d3188000303d31d50c293000002e46769645f73747265616d00",
        CommitPrepared(
            flags=0,
            commit_lsn=23933256,
            end_lsn=23933320,
            commit_ts=848630194946707,
            xid=740,
            gid="gid_stream",
        ),
    ),
]
