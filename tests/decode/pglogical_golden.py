"""Golden pglogical_output messages captured from the real extension.

pglogical 2.4.2 (Debian postgresql-15-pglogical) on PostgreSQL 15, throwaway
cluster with shared_preload_libraries=pglogical, wal_level=logical,
track_commit_timestamp=on. SETUP_SQL then CHANGES_SQL were run, and each stream
was read with `pg_logical_slot_peek_binary_changes('golden_slot', NULL, NULL,
<options>)`; the same bytes (the startup message aside, whose walsender_pid
differs) arrived over a `replication=database` connection with START_REPLICATION.
The expected objects were checked by hand against CHANGES_SQL.
"""

from bridge.decode.messages import (
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

# Run in a fresh UTF8 database ("golden").
SETUP_SQL = """\
CREATE EXTENSION pglogical;
SELECT pglogical.create_node(node_name := 'golden_node',
  dsn := 'host=127.0.0.1 port=55433 dbname=golden');
CREATE TYPE mood AS ENUM ('sad', 'ok', 'happy');
CREATE TABLE public.items (
  id integer PRIMARY KEY, name text, big bigint, small smallint, price numeric(10,2),
  ratio double precision, r4 real, flag boolean, created timestamptz, ts timestamp,
  day date, tm time, uid uuid, doc jsonb, js json, raw bytea, tags text[], ints int4[],
  feeling mood, ch varchar(20), fixed char(3), iv interval, addr inet, blob text
);
ALTER TABLE public.items ALTER COLUMN blob SET STORAGE EXTERNAL;
CREATE TABLE public."Mixed Case" ("Key Col" int PRIMARY KEY, "välue" text);
CREATE TABLE public.notinset (id int PRIMARY KEY, v text);
SELECT pglogical.replication_set_add_table('default', 'public.items');
SELECT pglogical.replication_set_add_table('default', 'public."Mixed Case"');
SELECT pg_replication_origin_create('bdr_upstream');
SELECT 'slot', * FROM pg_create_logical_replication_slot('golden_slot', 'pglogical_output');
"""

CHANGES_SQL = r"""\
INSERT INTO public.items VALUES (1, 'first', 9000000000, -7, 12.34, 3.5, 1.25, true,
  '2024-05-06 07:08:09.123456+00', '2024-05-06 07:08:09', '2024-05-06', '07:08:09',
  'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', '{"k": [1, 2]}', '{"j": null}', '\xdeadbeef',
  ARRAY['a', 'b c', NULL], ARRAY[1, 2, 3], 'happy', 'vc', 'ab', '1 day 02:03:04',
  '10.1.2.3/32', repeat('0123456789', 210));
INSERT INTO public.items (id) VALUES (2);
BEGIN;
UPDATE public.items SET name = 'second', big = NULL WHERE id = 1;
UPDATE public.items SET id = 3 WHERE id = 2;
COMMIT;
DELETE FROM public.items WHERE id = 3;
INSERT INTO public."Mixed Case" VALUES (1, 'ü');
INSERT INTO public.notinset VALUES (1, 'not replicated');
SELECT pg_replication_origin_session_setup('bdr_upstream');
BEGIN;
SELECT pg_replication_origin_xact_setup('0/ABCDEF0', '2024-01-01 00:00:00+00');
INSERT INTO public."Mixed Case" VALUES (2, 'forwarded');
COMMIT;
SELECT pg_replication_origin_session_reset();
"""

# pglogical_options(replication_sets=["default"], forward_origins=["all"]) on x86-64.
TEXT_OPTIONS = [
    ("startup_params_format", "1"),
    ("min_proto_version", "1"),
    ("max_proto_version", "1"),
    ("proto_format", "native"),
    ("expected_encoding", "UTF8"),
    ("binary.want_internal_basetypes", "false"),
    ("binary.want_binary_basetypes", "false"),
    ("binary.bigendian", "false"),
    ("binary.sizeof_int", "4"),
    ("binary.sizeof_long", "8"),
    ("binary.sizeof_datum", "8"),
    ("binary.float4_byval", "true"),
    ("binary.float8_byval", "true"),
    ("binary.integer_datetimes", "true"),
    ("relmeta_cache_size", "-1"),
    ("pglogical.replication_set_names", '"default"'),
    ("pglogical.forward_origins", '"all"'),
]

# The same with binary=True, server_version_num=150018.
BINARY_OPTIONS = [
    ("startup_params_format", "1"),
    ("min_proto_version", "1"),
    ("max_proto_version", "1"),
    ("proto_format", "native"),
    ("expected_encoding", "UTF8"),
    ("binary.want_internal_basetypes", "false"),
    ("binary.want_binary_basetypes", "true"),
    ("binary.basetypes_major_version", "1500"),
    ("binary.bigendian", "false"),
    ("binary.sizeof_int", "4"),
    ("binary.sizeof_long", "8"),
    ("binary.sizeof_datum", "8"),
    ("binary.float4_byval", "true"),
    ("binary.float8_byval", "true"),
    ("binary.integer_datetimes", "true"),
    ("relmeta_cache_size", "-1"),
    ("pglogical.replication_set_names", '"default"'),
    ("pglogical.forward_origins", '"all"'),
]

# Internal format forced on by declaring the server's own (stale) binary.* values.
INTERNAL_OPTIONS = [
    ("startup_params_format", "1"),
    ("min_proto_version", "1"),
    ("max_proto_version", "1"),
    ("proto_format", "native"),
    ("expected_encoding", "UTF8"),
    ("binary.want_binary_basetypes", "true"),
    ("binary.basetypes_major_version", "1500"),
    ("binary.bigendian", "false"),
    ("binary.sizeof_int", "4"),
    ("binary.sizeof_long", "8"),
    ("binary.sizeof_datum", "8"),
    ("binary.float8_byval", "true"),
    ("relmeta_cache_size", "-1"),
    ("pglogical.replication_set_names", '"default"'),
    ("binary.want_internal_basetypes", "true"),
    ("binary.integer_datetimes", "false"),
    ("binary.float4_byval", "false"),
]

BLOB = b"0123456789" * 210

TEXT_STREAM: list[tuple[str, Message]] = [
    (
        (
            "53016d61785f70726f746f5f76657273696f6e0031006d696e5f70726f746f5f76657273696f6e003100636f"
            "6c747970657300660070675f76657273696f6e5f6e756d003135303030320070675f76657273696f6e003135"
            "2e32202844656269616e2031352e322d31290070675f63617476657273696f6e003230323230393036310064"
            "617461626173655f656e636f64696e67005554463800656e636f64696e67005554463800666f72776172645f"
            "6368616e67657365745f6f726967696e7300740077616c73656e6465725f7069640032313630300070676c6f"
            "676963616c5f76657273696f6e00322e342e320070676c6f676963616c5f76657273696f6e5f6e756d003230"
            "3430320062696e6172792e696e7465726e616c5f62617365747970657300660062696e6172792e62696e6172"
            "795f62617365747970657300660062696e6172792e6261736574797065735f6d616a6f725f76657273696f6e"
            "00313530300062696e6172792e73697a656f665f696e7400340062696e6172792e73697a656f665f6c6f6e67"
            "00380062696e6172792e73697a656f665f646174756d00380062696e6172792e6d6178616c69676e00380062"
            "696e6172792e626967656e6469616e00660062696e6172792e666c6f6174345f627976616c00660062696e61"
            "72792e666c6f6174385f627976616c00740062696e6172792e696e74656765725f6461746574696d65730066"
            "0062696e6172792e62696e6172795f70675f76657273696f6e0031353030006e6f5f7478696e666f006600"
        ),
        Startup(
            version=1,
            params={
                "max_proto_version": "1",
                "min_proto_version": "1",
                "coltypes": "f",
                "pg_version_num": "150002",
                "pg_version": "15.2 (Debian 15.2-1)",
                "pg_catversion": "202209061",
                "database_encoding": "UTF8",
                "encoding": "UTF8",
                "forward_changeset_origins": "t",
                "walsender_pid": "21600",
                "pglogical_version": "2.4.2",
                "pglogical_version_num": "20402",
                "binary.internal_basetypes": "f",
                "binary.binary_basetypes": "f",
                "binary.basetypes_major_version": "1500",
                "binary.sizeof_int": "4",
                "binary.sizeof_long": "8",
                "binary.sizeof_datum": "8",
                "binary.maxalign": "8",
                "binary.bigendian": "f",
                "binary.float4_byval": "f",
                "binary.float8_byval": "t",
                "binary.integer_datetimes": "f",
                "binary.binary_pg_version": "1500",
                "no_txinfo": "f",
            },
        ),
    ),
    (
        "42000000000001e5ddc8000303d31e3bb8cf00000301",
        Begin(final_lsn=31841736, commit_ts=848630210345167, xid=769),
    ),
    (
        (
            "520000004175077075626c696300066974656d730041001843014e000369640043004e00056e616d65004300"
            "4e00046269670043004e0006736d616c6c0043004e000670726963650043004e0006726174696f0043004e00"
            "0372340043004e0005666c61670043004e0008637265617465640043004e000374730043004e000464617900"
            "43004e0003746d0043004e00047569640043004e0004646f630043004e00036a730043004e00047261770043"
            "004e0005746167730043004e0005696e74730043004e00086665656c696e670043004e000363680043004e00"
            "0666697865640043004e000369760043004e0005616464720043004e0005626c6f6200"
        ),
        Relation(
            xid=None,
            oid=16757,
            namespace="public",
            name="items",
            replica_identity="",
            columns=(
                Column(flags=1, name="id", type_oid=0, typmod=-1),
                Column(flags=0, name="name", type_oid=0, typmod=-1),
                Column(flags=0, name="big", type_oid=0, typmod=-1),
                Column(flags=0, name="small", type_oid=0, typmod=-1),
                Column(flags=0, name="price", type_oid=0, typmod=-1),
                Column(flags=0, name="ratio", type_oid=0, typmod=-1),
                Column(flags=0, name="r4", type_oid=0, typmod=-1),
                Column(flags=0, name="flag", type_oid=0, typmod=-1),
                Column(flags=0, name="created", type_oid=0, typmod=-1),
                Column(flags=0, name="ts", type_oid=0, typmod=-1),
                Column(flags=0, name="day", type_oid=0, typmod=-1),
                Column(flags=0, name="tm", type_oid=0, typmod=-1),
                Column(flags=0, name="uid", type_oid=0, typmod=-1),
                Column(flags=0, name="doc", type_oid=0, typmod=-1),
                Column(flags=0, name="js", type_oid=0, typmod=-1),
                Column(flags=0, name="raw", type_oid=0, typmod=-1),
                Column(flags=0, name="tags", type_oid=0, typmod=-1),
                Column(flags=0, name="ints", type_oid=0, typmod=-1),
                Column(flags=0, name="feeling", type_oid=0, typmod=-1),
                Column(flags=0, name="ch", type_oid=0, typmod=-1),
                Column(flags=0, name="fixed", type_oid=0, typmod=-1),
                Column(flags=0, name="iv", type_oid=0, typmod=-1),
                Column(flags=0, name="addr", type_oid=0, typmod=-1),
                Column(flags=0, name="blob", type_oid=0, typmod=-1),
            ),
        ),
    ),
    (
        (
            "4900000041754e540018740000000231007400000006666972737400740000000b3930303030303030303000"
            "74000000032d3700740000000631322e3334007400000004332e35007400000005312e323500740000000274"
            "00740000001e323032342d30352d30362030373a30383a30392e3132333435362b3030007400000014323032"
            "342d30352d30362030373a30383a303900740000000b323032342d30352d303600740000000930373a30383a"
            "303900740000002561306565626339392d396330622d346566382d626236642d366262396264333830613131"
            "00740000000e7b226b223a205b312c20325d7d00740000000c7b226a223a206e756c6c7d00740000000b5c78"
            "646561646265656600740000000f7b612c22622063222c4e554c4c7d0074000000087b312c322c337d007400"
            "0000066861707079007400000003766300740000000461622000740000000f31206461792030323a30333a30"
            "3400740000000931302e312e322e330074000008353031323334353637383930313233343536373839303132"
            "3334353637383930313233343536373839303132333435363738393031323334353637383930313233343536"
            "3738393031323334353637383930313233343536373839303132333435363738393031323334353637383930"
            "3132333435363738393031323334353637383930313233343536373839303132333435363738393031323334"
            "3536373839303132333435363738393031323334353637383930313233343536373839303132333435363738"
            "3930313233343536373839303132333435363738393031323334353637383930313233343536373839303132"
            "3334353637383930313233343536373839303132333435363738393031323334353637383930313233343536"
            "3738393031323334353637383930313233343536373839303132333435363738393031323334353637383930"
            "3132333435363738393031323334353637383930313233343536373839303132333435363738393031323334"
            "3536373839303132333435363738393031323334353637383930313233343536373839303132333435363738"
            "3930313233343536373839303132333435363738393031323334353637383930313233343536373839303132"
            "3334353637383930313233343536373839303132333435363738393031323334353637383930313233343536"
            "3738393031323334353637383930313233343536373839303132333435363738393031323334353637383930"
            "3132333435363738393031323334353637383930313233343536373839303132333435363738393031323334"
            "3536373839303132333435363738393031323334353637383930313233343536373839303132333435363738"
            "3930313233343536373839303132333435363738393031323334353637383930313233343536373839303132"
            "3334353637383930313233343536373839303132333435363738393031323334353637383930313233343536"
            "3738393031323334353637383930313233343536373839303132333435363738393031323334353637383930"
            "3132333435363738393031323334353637383930313233343536373839303132333435363738393031323334"
            "3536373839303132333435363738393031323334353637383930313233343536373839303132333435363738"
            "3930313233343536373839303132333435363738393031323334353637383930313233343536373839303132"
            "3334353637383930313233343536373839303132333435363738393031323334353637383930313233343536"
            "3738393031323334353637383930313233343536373839303132333435363738393031323334353637383930"
            "3132333435363738393031323334353637383930313233343536373839303132333435363738393031323334"
            "3536373839303132333435363738393031323334353637383930313233343536373839303132333435363738"
            "3930313233343536373839303132333435363738393031323334353637383930313233343536373839303132"
            "3334353637383930313233343536373839303132333435363738393031323334353637383930313233343536"
            "3738393031323334353637383930313233343536373839303132333435363738393031323334353637383930"
            "3132333435363738393031323334353637383930313233343536373839303132333435363738393031323334"
            "3536373839303132333435363738393031323334353637383930313233343536373839303132333435363738"
            "3930313233343536373839303132333435363738393031323334353637383930313233343536373839303132"
            "3334353637383930313233343536373839303132333435363738393031323334353637383930313233343536"
            "3738393031323334353637383930313233343536373839303132333435363738393031323334353637383930"
            "3132333435363738393031323334353637383930313233343536373839303132333435363738393031323334"
            "3536373839303132333435363738393031323334353637383930313233343536373839303132333435363738"
            "3930313233343536373839303132333435363738393031323334353637383930313233343536373839303132"
            "3334353637383930313233343536373839303132333435363738393031323334353637383930313233343536"
            "3738393031323334353637383930313233343536373839303132333435363738393031323334353637383930"
            "3132333435363738393031323334353637383930313233343536373839303132333435363738393031323334"
            "3536373839303132333435363738393031323334353637383930313233343536373839303132333435363738"
            "3930313233343536373839303132333435363738393031323334353637383930313233343536373839303132"
            "3334353637383930313233343536373839303132333435363738393031323334353637383930313233343536"
            "3738393031323334353637383930313233343536373839303132333435363738393031323334353637383930"
            "3132333435363738393031323334353637383930313233343536373839303132333435363738393031323334"
            "3536373839303132333435363738393031323334353637383930313233343536373839303132333435363738"
            "3930313233343536373839303132333435363738393031323334353637383930313233343536373839303132"
            "3334353637383930313233343536373839303132333435363738393031323334353637383930313233343536"
            "3738393031323334353637383930313233343536373839303132333435363738393031323334353637383930"
            "31323334353637383900"
        ),
        Insert(
            xid=None,
            relid=16757,
            new=TupleData(
                kinds=b"tttttttttttttttttttttttt",
                values=(
                    b"1",
                    b"first",
                    b"9000000000",
                    b"-7",
                    b"12.34",
                    b"3.5",
                    b"1.25",
                    b"t",
                    b"2024-05-06 07:08:09.123456+00",
                    b"2024-05-06 07:08:09",
                    b"2024-05-06",
                    b"07:08:09",
                    b"a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11",
                    b'{"k": [1, 2]}',
                    b'{"j": null}',
                    b"\\xdeadbeef",
                    b'{a,"b c",NULL}',
                    b"{1,2,3}",
                    b"happy",
                    b"vc",
                    b"ab ",
                    b"1 day 02:03:04",
                    b"10.1.2.3",
                    b"0123456789" * 210,
                ),
            ),
        ),
    ),
    (
        "43000000000001e5ddc80000000001e5ddf8000303d31e3bb8cf",
        Commit(flags=0, commit_lsn=31841736, end_lsn=31841784, commit_ts=848630210345167),
    ),
    (
        "42000000000001e5de80000303d31e3bb9e200000302",
        Begin(final_lsn=31841920, commit_ts=848630210345442, xid=770),
    ),
    (
        "4900000041754e540018740000000232006e6e6e6e6e6e6e6e6e6e6e6e6e6e6e6e6e6e6e6e6e6e6e",
        Insert(
            xid=None,
            relid=16757,
            new=TupleData(
                kinds=b"tnnnnnnnnnnnnnnnnnnnnnnn",
                values=(
                    b"2",
                    None,
                    None,
                    None,
                    None,
                    None,
                    None,
                    None,
                    None,
                    None,
                    None,
                    None,
                    None,
                    None,
                    None,
                    None,
                    None,
                    None,
                    None,
                    None,
                    None,
                    None,
                    None,
                    None,
                ),
            ),
        ),
    ),
    (
        "43000000000001e5de800000000001e5deb0000303d31e3bb9e2",
        Commit(flags=0, commit_lsn=31841920, end_lsn=31841968, commit_ts=848630210345442),
    ),
    (
        "42000000000001e5e108000303d31e3bbb6900000303",
        Begin(final_lsn=31842568, commit_ts=848630210345833, xid=771),
    ),
    (
        (
            "5500000041754e5400187400000002310074000000077365636f6e64006e74000000032d3700740000000631"
            "322e3334007400000004332e35007400000005312e32350074000000027400740000001e323032342d30352d"
            "30362030373a30383a30392e3132333435362b3030007400000014323032342d30352d30362030373a30383a"
            "303900740000000b323032342d30352d303600740000000930373a30383a3039007400000025613065656263"
            "39392d396330622d346566382d626236642d36626239626433383061313100740000000e7b226b223a205b31"
            "2c20325d7d00740000000c7b226a223a206e756c6c7d00740000000b5c78646561646265656600740000000f"
            "7b612c22622063222c4e554c4c7d0074000000087b312c322c337d0074000000066861707079007400000003"
            "766300740000000461622000740000000f31206461792030323a30333a303400740000000931302e312e322e"
            "330075"
        ),
        Update(
            xid=None,
            relid=16757,
            old_kind="",
            old=None,
            new=TupleData(
                kinds=b"ttnttttttttttttttttttttu",
                values=(
                    b"1",
                    b"second",
                    None,
                    b"-7",
                    b"12.34",
                    b"3.5",
                    b"1.25",
                    b"t",
                    b"2024-05-06 07:08:09.123456+00",
                    b"2024-05-06 07:08:09",
                    b"2024-05-06",
                    b"07:08:09",
                    b"a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11",
                    b'{"k": [1, 2]}',
                    b'{"j": null}',
                    b"\\xdeadbeef",
                    b'{a,"b c",NULL}',
                    b"{1,2,3}",
                    b"happy",
                    b"vc",
                    b"ab ",
                    b"1 day 02:03:04",
                    b"10.1.2.3",
                    None,
                ),
            ),
        ),
    ),
    (
        (
            "5500000041754b540018740000000232006e6e6e6e6e6e6e6e6e6e6e6e6e6e6e6e6e6e6e6e6e6e6e4e540018"
            "740000000233006e6e6e6e6e6e6e6e6e6e6e6e6e6e6e6e6e6e6e6e6e6e6e"
        ),
        Update(
            xid=None,
            relid=16757,
            old_kind="K",
            old=TupleData(
                kinds=b"tnnnnnnnnnnnnnnnnnnnnnnn",
                values=(
                    b"2",
                    None,
                    None,
                    None,
                    None,
                    None,
                    None,
                    None,
                    None,
                    None,
                    None,
                    None,
                    None,
                    None,
                    None,
                    None,
                    None,
                    None,
                    None,
                    None,
                    None,
                    None,
                    None,
                    None,
                ),
            ),
            new=TupleData(
                kinds=b"tnnnnnnnnnnnnnnnnnnnnnnn",
                values=(
                    b"3",
                    None,
                    None,
                    None,
                    None,
                    None,
                    None,
                    None,
                    None,
                    None,
                    None,
                    None,
                    None,
                    None,
                    None,
                    None,
                    None,
                    None,
                    None,
                    None,
                    None,
                    None,
                    None,
                    None,
                ),
            ),
        ),
    ),
    (
        "43000000000001e5e1080000000001e5e138000303d31e3bbb69",
        Commit(flags=0, commit_lsn=31842568, end_lsn=31842616, commit_ts=848630210345833),
    ),
    (
        "42000000000001e5e180000303d31e3bbbc100000304",
        Begin(final_lsn=31842688, commit_ts=848630210345921, xid=772),
    ),
    (
        "4400000041754b540018740000000233006e6e6e6e6e6e6e6e6e6e6e6e6e6e6e6e6e6e6e6e6e6e6e",
        Delete(
            xid=None,
            relid=16757,
            old_kind="K",
            old=TupleData(
                kinds=b"tnnnnnnnnnnnnnnnnnnnnnnn",
                values=(
                    b"3",
                    None,
                    None,
                    None,
                    None,
                    None,
                    None,
                    None,
                    None,
                    None,
                    None,
                    None,
                    None,
                    None,
                    None,
                    None,
                    None,
                    None,
                    None,
                    None,
                    None,
                    None,
                    None,
                    None,
                ),
            ),
        ),
    ),
    (
        "43000000000001e5e1800000000001e5e1b0000303d31e3bbbc1",
        Commit(flags=0, commit_lsn=31842688, end_lsn=31842736, commit_ts=848630210345921),
    ),
    (
        "42000000000001e5e290000303d31e3bbc6f00000305",
        Begin(final_lsn=31842960, commit_ts=848630210346095, xid=773),
    ),
    (
        (
            "52000000417c077075626c6963000b4d6978656420436173650041000243014e00084b657920436f6c004300"
            "4e000776c3a46c756500"
        ),
        Relation(
            xid=None,
            oid=16764,
            namespace="public",
            name="Mixed Case",
            replica_identity="",
            columns=(
                Column(flags=1, name="Key Col", type_oid=0, typmod=-1),
                Column(flags=0, name="välue", type_oid=0, typmod=-1),
            ),
        ),
    ),
    (
        "49000000417c4e540002740000000231007400000003c3bc00",
        Insert(xid=None, relid=16764, new=TupleData(kinds=b"tt", values=(b"1", b"\xc3\xbc"))),
    ),
    (
        "43000000000001e5e2900000000001e5e2c0000303d31e3bbc6f",
        Commit(flags=0, commit_lsn=31842960, end_lsn=31843008, commit_ts=848630210346095),
    ),
    (
        "42000000000001e5e3b0000303d31e3bbce400000306",
        Begin(final_lsn=31843248, commit_ts=848630210346212, xid=774),
    ),
    (
        "43000000000001e5e3b00000000001e5e3e0000303d31e3bbce4",
        Commit(flags=0, commit_lsn=31843248, end_lsn=31843296, commit_ts=848630210346212),
    ),
    (
        "42000000000001e5e4680002b0d5d4e9400000000307",
        Begin(final_lsn=31843432, commit_ts=757382400000000, xid=775),
    ),
    (
        "4f00000000000abcdef00d6264725f757073747265616d00",
        Origin(commit_lsn=180150000, name="bdr_upstream"),
    ),
    (
        "49000000417c4e54000274000000023200740000000a666f7277617264656400",
        Insert(xid=None, relid=16764, new=TupleData(kinds=b"tt", values=(b"2", b"forwarded"))),
    ),
    (
        "43000000000001e5e4680000000001e5e4b00002b0d5d4e94000",
        Commit(flags=0, commit_lsn=31843432, end_lsn=31843504, commit_ts=757382400000000),
    ),
    (
        "42000000000001e60308000303d31f3e7d8e00000308",
        Begin(final_lsn=31851272, commit_ts=848630227303822, xid=776),
    ),
    (
        "43000000000001e603080000000001e60440000303d31f3e7d8e",
        Commit(flags=0, commit_lsn=31851272, end_lsn=31851584, commit_ts=848630227303822),
    ),
]

# Send/recv values: the first transaction only.
BINARY_STREAM: list[tuple[str, Message]] = [
    (
        (
            "53016d61785f70726f746f5f76657273696f6e0031006d696e5f70726f746f5f76657273696f6e003100636f"
            "6c747970657300660070675f76657273696f6e5f6e756d003135303030320070675f76657273696f6e003135"
            "2e32202844656269616e2031352e322d31290070675f63617476657273696f6e003230323230393036310064"
            "617461626173655f656e636f64696e67005554463800656e636f64696e67005554463800666f72776172645f"
            "6368616e67657365745f6f726967696e7300740077616c73656e6465725f7069640032313636320070676c6f"
            "676963616c5f76657273696f6e00322e342e320070676c6f676963616c5f76657273696f6e5f6e756d003230"
            "3430320062696e6172792e696e7465726e616c5f62617365747970657300660062696e6172792e62696e6172"
            "795f62617365747970657300740062696e6172792e6261736574797065735f6d616a6f725f76657273696f6e"
            "00313530300062696e6172792e73697a656f665f696e7400340062696e6172792e73697a656f665f6c6f6e67"
            "00380062696e6172792e73697a656f665f646174756d00380062696e6172792e6d6178616c69676e00380062"
            "696e6172792e626967656e6469616e00660062696e6172792e666c6f6174345f627976616c00660062696e61"
            "72792e666c6f6174385f627976616c00740062696e6172792e696e74656765725f6461746574696d65730066"
            "0062696e6172792e62696e6172795f70675f76657273696f6e0031353030006e6f5f7478696e666f006600"
        ),
        Startup(
            version=1,
            params={
                "max_proto_version": "1",
                "min_proto_version": "1",
                "coltypes": "f",
                "pg_version_num": "150002",
                "pg_version": "15.2 (Debian 15.2-1)",
                "pg_catversion": "202209061",
                "database_encoding": "UTF8",
                "encoding": "UTF8",
                "forward_changeset_origins": "t",
                "walsender_pid": "21662",
                "pglogical_version": "2.4.2",
                "pglogical_version_num": "20402",
                "binary.internal_basetypes": "f",
                "binary.binary_basetypes": "t",
                "binary.basetypes_major_version": "1500",
                "binary.sizeof_int": "4",
                "binary.sizeof_long": "8",
                "binary.sizeof_datum": "8",
                "binary.maxalign": "8",
                "binary.bigendian": "f",
                "binary.float4_byval": "f",
                "binary.float8_byval": "t",
                "binary.integer_datetimes": "f",
                "binary.binary_pg_version": "1500",
                "no_txinfo": "f",
            },
        ),
    ),
    (
        "42000000000001e5ddc8000303d31e3bb8cf00000301",
        Begin(final_lsn=31841736, commit_ts=848630210345167, xid=769),
    ),
    (
        (
            "520000004175077075626c696300066974656d730041001843014e000369640043004e00056e616d65004300"
            "4e00046269670043004e0006736d616c6c0043004e000670726963650043004e0006726174696f0043004e00"
            "0372340043004e0005666c61670043004e0008637265617465640043004e000374730043004e000464617900"
            "43004e0003746d0043004e00047569640043004e0004646f630043004e00036a730043004e00047261770043"
            "004e0005746167730043004e0005696e74730043004e00086665656c696e670043004e000363680043004e00"
            "0666697865640043004e000369760043004e0005616464720043004e0005626c6f6200"
        ),
        Relation(
            xid=None,
            oid=16757,
            namespace="public",
            name="items",
            replica_identity="",
            columns=(
                Column(flags=1, name="id", type_oid=0, typmod=-1),
                Column(flags=0, name="name", type_oid=0, typmod=-1),
                Column(flags=0, name="big", type_oid=0, typmod=-1),
                Column(flags=0, name="small", type_oid=0, typmod=-1),
                Column(flags=0, name="price", type_oid=0, typmod=-1),
                Column(flags=0, name="ratio", type_oid=0, typmod=-1),
                Column(flags=0, name="r4", type_oid=0, typmod=-1),
                Column(flags=0, name="flag", type_oid=0, typmod=-1),
                Column(flags=0, name="created", type_oid=0, typmod=-1),
                Column(flags=0, name="ts", type_oid=0, typmod=-1),
                Column(flags=0, name="day", type_oid=0, typmod=-1),
                Column(flags=0, name="tm", type_oid=0, typmod=-1),
                Column(flags=0, name="uid", type_oid=0, typmod=-1),
                Column(flags=0, name="doc", type_oid=0, typmod=-1),
                Column(flags=0, name="js", type_oid=0, typmod=-1),
                Column(flags=0, name="raw", type_oid=0, typmod=-1),
                Column(flags=0, name="tags", type_oid=0, typmod=-1),
                Column(flags=0, name="ints", type_oid=0, typmod=-1),
                Column(flags=0, name="feeling", type_oid=0, typmod=-1),
                Column(flags=0, name="ch", type_oid=0, typmod=-1),
                Column(flags=0, name="fixed", type_oid=0, typmod=-1),
                Column(flags=0, name="iv", type_oid=0, typmod=-1),
                Column(flags=0, name="addr", type_oid=0, typmod=-1),
                Column(flags=0, name="blob", type_oid=0, typmod=-1),
            ),
        ),
    ),
    (
        (
            "4900000041754e5400186200000004000000016200000005666972737462000000080000000218711a006200"
            "000002fff9620000000c0002000000000002000c0d486200000008400c00000000000062000000043fa00000"
            "62000000010162000000080002bac2801b6a8062000000080002bac2801988406200000004000022bc620000"
            "000800000005fb2f08406200000010a0eebc999c0b4ef8bb6d6bb9bd380a11620000000e017b226b223a205b"
            "312c20325d7d620000000b7b226a223a206e756c6c7d6200000004deadbeef62000000240000000100000001"
            "000000190000000300000001000000016100000003622063ffffffff620000002c0000000100000000000000"
            "1700000003000000010000000400000001000000040000000200000004000000036200000005686170707962"
            "0000000276636200000003616220620000001000000001b81ee6000000000100000000620000000802200004"
            "0a01020362000008343031323334353637383930313233343536373839303132333435363738393031323334"
            "3536373839303132333435363738393031323334353637383930313233343536373839303132333435363738"
            "3930313233343536373839303132333435363738393031323334353637383930313233343536373839303132"
            "3334353637383930313233343536373839303132333435363738393031323334353637383930313233343536"
            "3738393031323334353637383930313233343536373839303132333435363738393031323334353637383930"
            "3132333435363738393031323334353637383930313233343536373839303132333435363738393031323334"
            "3536373839303132333435363738393031323334353637383930313233343536373839303132333435363738"
            "3930313233343536373839303132333435363738393031323334353637383930313233343536373839303132"
            "3334353637383930313233343536373839303132333435363738393031323334353637383930313233343536"
            "3738393031323334353637383930313233343536373839303132333435363738393031323334353637383930"
            "3132333435363738393031323334353637383930313233343536373839303132333435363738393031323334"
            "3536373839303132333435363738393031323334353637383930313233343536373839303132333435363738"
            "3930313233343536373839303132333435363738393031323334353637383930313233343536373839303132"
            "3334353637383930313233343536373839303132333435363738393031323334353637383930313233343536"
            "3738393031323334353637383930313233343536373839303132333435363738393031323334353637383930"
            "3132333435363738393031323334353637383930313233343536373839303132333435363738393031323334"
            "3536373839303132333435363738393031323334353637383930313233343536373839303132333435363738"
            "3930313233343536373839303132333435363738393031323334353637383930313233343536373839303132"
            "3334353637383930313233343536373839303132333435363738393031323334353637383930313233343536"
            "3738393031323334353637383930313233343536373839303132333435363738393031323334353637383930"
            "3132333435363738393031323334353637383930313233343536373839303132333435363738393031323334"
            "3536373839303132333435363738393031323334353637383930313233343536373839303132333435363738"
            "3930313233343536373839303132333435363738393031323334353637383930313233343536373839303132"
            "3334353637383930313233343536373839303132333435363738393031323334353637383930313233343536"
            "3738393031323334353637383930313233343536373839303132333435363738393031323334353637383930"
            "3132333435363738393031323334353637383930313233343536373839303132333435363738393031323334"
            "3536373839303132333435363738393031323334353637383930313233343536373839303132333435363738"
            "3930313233343536373839303132333435363738393031323334353637383930313233343536373839303132"
            "3334353637383930313233343536373839303132333435363738393031323334353637383930313233343536"
            "3738393031323334353637383930313233343536373839303132333435363738393031323334353637383930"
            "3132333435363738393031323334353637383930313233343536373839303132333435363738393031323334"
            "3536373839303132333435363738393031323334353637383930313233343536373839303132333435363738"
            "3930313233343536373839303132333435363738393031323334353637383930313233343536373839303132"
            "3334353637383930313233343536373839303132333435363738393031323334353637383930313233343536"
            "3738393031323334353637383930313233343536373839303132333435363738393031323334353637383930"
            "3132333435363738393031323334353637383930313233343536373839303132333435363738393031323334"
            "3536373839303132333435363738393031323334353637383930313233343536373839303132333435363738"
            "3930313233343536373839303132333435363738393031323334353637383930313233343536373839303132"
            "3334353637383930313233343536373839303132333435363738393031323334353637383930313233343536"
            "3738393031323334353637383930313233343536373839303132333435363738393031323334353637383930"
            "3132333435363738393031323334353637383930313233343536373839303132333435363738393031323334"
            "3536373839303132333435363738393031323334353637383930313233343536373839303132333435363738"
            "3930313233343536373839303132333435363738393031323334353637383930313233343536373839303132"
            "3334353637383930313233343536373839303132333435363738393031323334353637383930313233343536"
            "3738393031323334353637383930313233343536373839303132333435363738393031323334353637383930"
            "3132333435363738393031323334353637383930313233343536373839303132333435363738393031323334"
            "3536373839303132333435363738393031323334353637383930313233343536373839303132333435363738"
            "3930313233343536373839303132333435363738393031323334353637383930313233343536373839"
        ),
        Insert(
            xid=None,
            relid=16757,
            new=TupleData(
                kinds=b"bbbbbbbbbbbbbbbbbbbbbbbb",
                values=(
                    b"\x00\x00\x00\x01",
                    b"first",
                    b"\x00\x00\x00\x02\x18q\x1a\x00",
                    b"\xff\xf9",
                    b"\x00\x02\x00\x00\x00\x00\x00\x02\x00\x0c\rH",
                    b"@\x0c\x00\x00\x00\x00\x00\x00",
                    b"?\xa0\x00\x00",
                    b"\x01",
                    b"\x00\x02\xba\xc2\x80\x1bj\x80",
                    b"\x00\x02\xba\xc2\x80\x19\x88@",
                    b'\x00\x00"\xbc',
                    b"\x00\x00\x00\x05\xfb/\x08@",
                    b"\xa0\xee\xbc\x99\x9c\x0bN\xf8\xbbmk\xb9\xbd8\n\x11",
                    b'\x01{"k": [1, 2]}',
                    b'{"j": null}',
                    b"\xde\xad\xbe\xef",
                    (
                        b"\x00\x00\x00\x01\x00\x00\x00\x01\x00\x00\x00\x19\x00\x00\x00\x03\x00"
                        b"\x00\x00\x01\x00\x00\x00\x01a\x00\x00\x00\x03b c\xff\xff\xff\xff"
                    ),
                    (
                        b"\x00\x00\x00\x01\x00\x00\x00\x00\x00\x00\x00\x17\x00\x00\x00\x03\x00"
                        b"\x00\x00\x01\x00\x00\x00\x04\x00\x00\x00\x01\x00\x00\x00\x04\x00\x00"
                        b"\x00\x02\x00\x00\x00\x04\x00\x00\x00\x03"
                    ),
                    b"happy",
                    b"vc",
                    b"ab ",
                    b"\x00\x00\x00\x01\xb8\x1e\xe6\x00\x00\x00\x00\x01\x00\x00\x00\x00",
                    b"\x02 \x00\x04\n\x01\x02\x03",
                    b"0123456789" * 210,
                ),
            ),
        ),
    ),
    (
        "43000000000001e5ddc80000000001e5ddf8000303d31e3bb8cf",
        Commit(flags=0, commit_lsn=31841736, end_lsn=31841784, commit_ts=848630210345167),
    ),
]

# Internal values (arrays fall back to send/recv): the first transaction only.
INTERNAL_STREAM: list[tuple[str, Message]] = [
    (
        (
            "53016d61785f70726f746f5f76657273696f6e0031006d696e5f70726f746f5f76657273696f6e003100636f"
            "6c747970657300660070675f76657273696f6e5f6e756d003135303030320070675f76657273696f6e003135"
            "2e32202844656269616e2031352e322d31290070675f63617476657273696f6e003230323230393036310064"
            "617461626173655f656e636f64696e67005554463800656e636f64696e67005554463800666f72776172645f"
            "6368616e67657365745f6f726967696e7300740077616c73656e6465725f7069640032323035320070676c6f"
            "676963616c5f76657273696f6e00322e342e320070676c6f676963616c5f76657273696f6e5f6e756d003230"
            "3430320062696e6172792e696e7465726e616c5f62617365747970657300740062696e6172792e62696e6172"
            "795f62617365747970657300740062696e6172792e6261736574797065735f6d616a6f725f76657273696f6e"
            "00313530300062696e6172792e73697a656f665f696e7400340062696e6172792e73697a656f665f6c6f6e67"
            "00380062696e6172792e73697a656f665f646174756d00380062696e6172792e6d6178616c69676e00380062"
            "696e6172792e626967656e6469616e00660062696e6172792e666c6f6174345f627976616c00660062696e61"
            "72792e666c6f6174385f627976616c00740062696e6172792e696e74656765725f6461746574696d65730066"
            "0062696e6172792e62696e6172795f70675f76657273696f6e0031353030006e6f5f7478696e666f006600"
        ),
        Startup(
            version=1,
            params={
                "max_proto_version": "1",
                "min_proto_version": "1",
                "coltypes": "f",
                "pg_version_num": "150002",
                "pg_version": "15.2 (Debian 15.2-1)",
                "pg_catversion": "202209061",
                "database_encoding": "UTF8",
                "encoding": "UTF8",
                "forward_changeset_origins": "t",
                "walsender_pid": "22052",
                "pglogical_version": "2.4.2",
                "pglogical_version_num": "20402",
                "binary.internal_basetypes": "t",
                "binary.binary_basetypes": "t",
                "binary.basetypes_major_version": "1500",
                "binary.sizeof_int": "4",
                "binary.sizeof_long": "8",
                "binary.sizeof_datum": "8",
                "binary.maxalign": "8",
                "binary.bigendian": "f",
                "binary.float4_byval": "f",
                "binary.float8_byval": "t",
                "binary.integer_datetimes": "f",
                "binary.binary_pg_version": "1500",
                "no_txinfo": "f",
            },
        ),
    ),
    (
        "42000000000001e5ddc8000303d31e3bb8cf00000301",
        Begin(final_lsn=31841736, commit_ts=848630210345167, xid=769),
    ),
    (
        (
            "520000004175077075626c696300066974656d730041001843014e000369640043004e00056e616d65004300"
            "4e00046269670043004e0006736d616c6c0043004e000670726963650043004e0006726174696f0043004e00"
            "0372340043004e0005666c61670043004e0008637265617465640043004e000374730043004e000464617900"
            "43004e0003746d0043004e00047569640043004e0004646f630043004e00036a730043004e00047261770043"
            "004e0005746167730043004e0005696e74730043004e00086665656c696e670043004e000363680043004e00"
            "0666697865640043004e000369760043004e0005616464720043004e0005626c6f6200"
        ),
        Relation(
            xid=None,
            oid=16757,
            namespace="public",
            name="items",
            replica_identity="",
            columns=(
                Column(flags=1, name="id", type_oid=0, typmod=-1),
                Column(flags=0, name="name", type_oid=0, typmod=-1),
                Column(flags=0, name="big", type_oid=0, typmod=-1),
                Column(flags=0, name="small", type_oid=0, typmod=-1),
                Column(flags=0, name="price", type_oid=0, typmod=-1),
                Column(flags=0, name="ratio", type_oid=0, typmod=-1),
                Column(flags=0, name="r4", type_oid=0, typmod=-1),
                Column(flags=0, name="flag", type_oid=0, typmod=-1),
                Column(flags=0, name="created", type_oid=0, typmod=-1),
                Column(flags=0, name="ts", type_oid=0, typmod=-1),
                Column(flags=0, name="day", type_oid=0, typmod=-1),
                Column(flags=0, name="tm", type_oid=0, typmod=-1),
                Column(flags=0, name="uid", type_oid=0, typmod=-1),
                Column(flags=0, name="doc", type_oid=0, typmod=-1),
                Column(flags=0, name="js", type_oid=0, typmod=-1),
                Column(flags=0, name="raw", type_oid=0, typmod=-1),
                Column(flags=0, name="tags", type_oid=0, typmod=-1),
                Column(flags=0, name="ints", type_oid=0, typmod=-1),
                Column(flags=0, name="feeling", type_oid=0, typmod=-1),
                Column(flags=0, name="ch", type_oid=0, typmod=-1),
                Column(flags=0, name="fixed", type_oid=0, typmod=-1),
                Column(flags=0, name="iv", type_oid=0, typmod=-1),
                Column(flags=0, name="addr", type_oid=0, typmod=-1),
                Column(flags=0, name="blob", type_oid=0, typmod=-1),
            ),
        ),
    ),
    (
        (
            "4900000041754e54001869000000040100000069000000060d66697273746900000008001a71180200000069"
            "00000002f9ff69000000070f00810c00480d69000000080000000000000c4069000000040000a03f69000000"
            "01016900000008806a1b80c2ba0200690000000840881980c2ba02006900000004bc22000069000000084008"
            "2ffb050000006900000010a0eebc999c0b4ef8bb6d6bb9bd380a11690000002d5b01000020010000801f0000"
            "506b00000002000040080000900800001020000000008001002000000000800200690000000c197b226a223a"
            "206e756c6c7d69000000050bdeadbeef62000000240000000100000001000000190000000300000001000000"
            "016100000003622063ffffffff620000002c0000000100000000000000170000000300000001000000040000"
            "0001000000040000000200000004000000036200000005686170707969000000030776636900000004096162"
            "20690000001000e61eb801000000010000000000000069000000070f02200a0102036900000838e020000030"
            "3132333435363738393031323334353637383930313233343536373839303132333435363738393031323334"
            "3536373839303132333435363738393031323334353637383930313233343536373839303132333435363738"
            "3930313233343536373839303132333435363738393031323334353637383930313233343536373839303132"
            "3334353637383930313233343536373839303132333435363738393031323334353637383930313233343536"
            "3738393031323334353637383930313233343536373839303132333435363738393031323334353637383930"
            "3132333435363738393031323334353637383930313233343536373839303132333435363738393031323334"
            "3536373839303132333435363738393031323334353637383930313233343536373839303132333435363738"
            "3930313233343536373839303132333435363738393031323334353637383930313233343536373839303132"
            "3334353637383930313233343536373839303132333435363738393031323334353637383930313233343536"
            "3738393031323334353637383930313233343536373839303132333435363738393031323334353637383930"
            "3132333435363738393031323334353637383930313233343536373839303132333435363738393031323334"
            "3536373839303132333435363738393031323334353637383930313233343536373839303132333435363738"
            "3930313233343536373839303132333435363738393031323334353637383930313233343536373839303132"
            "3334353637383930313233343536373839303132333435363738393031323334353637383930313233343536"
            "3738393031323334353637383930313233343536373839303132333435363738393031323334353637383930"
            "3132333435363738393031323334353637383930313233343536373839303132333435363738393031323334"
            "3536373839303132333435363738393031323334353637383930313233343536373839303132333435363738"
            "3930313233343536373839303132333435363738393031323334353637383930313233343536373839303132"
            "3334353637383930313233343536373839303132333435363738393031323334353637383930313233343536"
            "3738393031323334353637383930313233343536373839303132333435363738393031323334353637383930"
            "3132333435363738393031323334353637383930313233343536373839303132333435363738393031323334"
            "3536373839303132333435363738393031323334353637383930313233343536373839303132333435363738"
            "3930313233343536373839303132333435363738393031323334353637383930313233343536373839303132"
            "3334353637383930313233343536373839303132333435363738393031323334353637383930313233343536"
            "3738393031323334353637383930313233343536373839303132333435363738393031323334353637383930"
            "3132333435363738393031323334353637383930313233343536373839303132333435363738393031323334"
            "3536373839303132333435363738393031323334353637383930313233343536373839303132333435363738"
            "3930313233343536373839303132333435363738393031323334353637383930313233343536373839303132"
            "3334353637383930313233343536373839303132333435363738393031323334353637383930313233343536"
            "3738393031323334353637383930313233343536373839303132333435363738393031323334353637383930"
            "3132333435363738393031323334353637383930313233343536373839303132333435363738393031323334"
            "3536373839303132333435363738393031323334353637383930313233343536373839303132333435363738"
            "3930313233343536373839303132333435363738393031323334353637383930313233343536373839303132"
            "3334353637383930313233343536373839303132333435363738393031323334353637383930313233343536"
            "3738393031323334353637383930313233343536373839303132333435363738393031323334353637383930"
            "3132333435363738393031323334353637383930313233343536373839303132333435363738393031323334"
            "3536373839303132333435363738393031323334353637383930313233343536373839303132333435363738"
            "3930313233343536373839303132333435363738393031323334353637383930313233343536373839303132"
            "3334353637383930313233343536373839303132333435363738393031323334353637383930313233343536"
            "3738393031323334353637383930313233343536373839303132333435363738393031323334353637383930"
            "3132333435363738393031323334353637383930313233343536373839303132333435363738393031323334"
            "3536373839303132333435363738393031323334353637383930313233343536373839303132333435363738"
            "3930313233343536373839303132333435363738393031323334353637383930313233343536373839303132"
            "3334353637383930313233343536373839303132333435363738393031323334353637383930313233343536"
            "3738393031323334353637383930313233343536373839303132333435363738393031323334353637383930"
            "3132333435363738393031323334353637383930313233343536373839303132333435363738393031323334"
            "3536373839303132333435363738393031323334353637383930313233343536373839303132333435363738"
            "39303132333435363738393031323334353637383930313233343536373839"
        ),
        Insert(
            xid=None,
            relid=16757,
            new=TupleData(
                kinds=b"iiiiiiiiiiiiiiiibbbiiiii",
                values=(
                    b"\x01\x00\x00\x00",
                    b"\rfirst",
                    b"\x00\x1aq\x18\x02\x00\x00\x00",
                    b"\xf9\xff",
                    b"\x0f\x00\x81\x0c\x00H\r",
                    b"\x00\x00\x00\x00\x00\x00\x0c@",
                    b"\x00\x00\xa0?",
                    b"\x01",
                    b"\x80j\x1b\x80\xc2\xba\x02\x00",
                    b"@\x88\x19\x80\xc2\xba\x02\x00",
                    b'\xbc"\x00\x00',
                    b"@\x08/\xfb\x05\x00\x00\x00",
                    b"\xa0\xee\xbc\x99\x9c\x0bN\xf8\xbbmk\xb9\xbd8\n\x11",
                    (
                        b"[\x01\x00\x00 \x01\x00\x00\x80\x1f\x00\x00Pk\x00\x00\x00\x02\x00\x00@"
                        b"\x08\x00\x00\x90\x08\x00\x00\x10 \x00\x00\x00\x00\x80\x01\x00 \x00"
                        b"\x00\x00\x00\x80\x02\x00"
                    ),
                    b'\x19{"j": null}',
                    b"\x0b\xde\xad\xbe\xef",
                    (
                        b"\x00\x00\x00\x01\x00\x00\x00\x01\x00\x00\x00\x19\x00\x00\x00\x03\x00"
                        b"\x00\x00\x01\x00\x00\x00\x01a\x00\x00\x00\x03b c\xff\xff\xff\xff"
                    ),
                    (
                        b"\x00\x00\x00\x01\x00\x00\x00\x00\x00\x00\x00\x17\x00\x00\x00\x03\x00"
                        b"\x00\x00\x01\x00\x00\x00\x04\x00\x00\x00\x01\x00\x00\x00\x04\x00\x00"
                        b"\x00\x02\x00\x00\x00\x04\x00\x00\x00\x03"
                    ),
                    b"happy",
                    b"\x07vc",
                    b"\tab ",
                    b"\x00\xe6\x1e\xb8\x01\x00\x00\x00\x01\x00\x00\x00\x00\x00\x00\x00",
                    b"\x0f\x02 \n\x01\x02\x03",
                    (
                        b"\xe0 \x00\x0001234567890123456789012345678901234567890123456789012345"
                        b"678901234567890123456789012345678901234567890123456789012345678901234"
                        b"567890123456789012345678901234567890123456789012345678901234567890123"
                        b"456789012345678901234567890123456789012345678901234567890123456789012"
                        b"345678901234567890123456789012345678901234567890123456789012345678901"
                        b"234567890123456789012345678901234567890123456789012345678901234567890"
                        b"123456789012345678901234567890123456789012345678901234567890123456789"
                        b"012345678901234567890123456789012345678901234567890123456789012345678"
                        b"901234567890123456789012345678901234567890123456789012345678901234567"
                        b"890123456789012345678901234567890123456789012345678901234567890123456"
                        b"789012345678901234567890123456789012345678901234567890123456789012345"
                        b"678901234567890123456789012345678901234567890123456789012345678901234"
                        b"567890123456789012345678901234567890123456789012345678901234567890123"
                        b"456789012345678901234567890123456789012345678901234567890123456789012"
                        b"345678901234567890123456789012345678901234567890123456789012345678901"
                        b"234567890123456789012345678901234567890123456789012345678901234567890"
                        b"123456789012345678901234567890123456789012345678901234567890123456789"
                        b"012345678901234567890123456789012345678901234567890123456789012345678"
                        b"901234567890123456789012345678901234567890123456789012345678901234567"
                        b"890123456789012345678901234567890123456789012345678901234567890123456"
                        b"789012345678901234567890123456789012345678901234567890123456789012345"
                        b"678901234567890123456789012345678901234567890123456789012345678901234"
                        b"567890123456789012345678901234567890123456789012345678901234567890123"
                        b"456789012345678901234567890123456789012345678901234567890123456789012"
                        b"345678901234567890123456789012345678901234567890123456789012345678901"
                        b"234567890123456789012345678901234567890123456789012345678901234567890"
                        b"123456789012345678901234567890123456789012345678901234567890123456789"
                        b"012345678901234567890123456789012345678901234567890123456789012345678"
                        b"901234567890123456789012345678901234567890123456789012345678901234567"
                        b"890123456789012345678901234567890123456789012345678901234567890123456"
                        b"7890123456789012345678901234567890123456789"
                    ),
                ),
            ),
        ),
    ),
    (
        "43000000000001e5ddc80000000001e5ddf8000303d31e3bb8cf",
        Commit(flags=0, commit_lsn=31841736, end_lsn=31841784, commit_ts=848630210345167),
    ),
]
