-- postgres/postgres src/test/subscription/t/018_stream_subxact_abort.pl
-- commit 50e6eb731d98ab6d0e625a0b87fb327b172bbebd
--
-- Streamed transactions with ROLLBACK TO SAVEPOINT, RELEASE and a whole ROLLBACK, every
-- change streamed at once (debug_logical_replication_streaming = immediate, set for the
-- case's database on PostgreSQL 16 on). The body runs with streaming = on and then
-- parallel, a bridge each; then the TAP's serialized aborts on test_tab_2.
--! bridge tap_pub streaming=on
--! bridge tap_pub_parallel publication=tap_pub streaming=parallel later

--! if 16
DO $$ BEGIN EXECUTE format('ALTER DATABASE %I SET debug_logical_replication_streaming = immediate', current_database()); END $$;
--! endif
CREATE TABLE test_tab (a int primary key, b bytea);
INSERT INTO test_tab VALUES (1, 'foo'), (2, 'bar');
CREATE TABLE test_tab_2 (a int);
CREATE PUBLICATION tap_pub FOR TABLE test_tab, test_tab_2;
--! start
--! check

BEGIN;
INSERT INTO test_tab VALUES (3, sha256(3::text::bytea));
SAVEPOINT s1;
INSERT INTO test_tab VALUES (4, sha256(4::text::bytea));
SAVEPOINT s2;
INSERT INTO test_tab VALUES (5, sha256(5::text::bytea));
SAVEPOINT s3;
INSERT INTO test_tab VALUES (6, sha256(6::text::bytea));
ROLLBACK TO s2;
INSERT INTO test_tab VALUES (7, sha256(7::text::bytea));
ROLLBACK TO s1;
INSERT INTO test_tab VALUES (8, sha256(8::text::bytea));
SAVEPOINT s4;
INSERT INTO test_tab VALUES (9, sha256(9::text::bytea));
SAVEPOINT s5;
INSERT INTO test_tab VALUES (10, sha256(10::text::bytea));
COMMIT;
--! expect test_tab: SELECT count(*) FROM test_tab => 6
--! check
BEGIN;
INSERT INTO test_tab VALUES (11, sha256(11::text::bytea));
SAVEPOINT s1;
INSERT INTO test_tab VALUES (12, sha256(12::text::bytea));
SAVEPOINT s2;
INSERT INTO test_tab VALUES (13, sha256(13::text::bytea));
SAVEPOINT s3;
INSERT INTO test_tab VALUES (14, sha256(14::text::bytea));
RELEASE s2;
INSERT INTO test_tab VALUES (15, sha256(15::text::bytea));
ROLLBACK TO s1;
COMMIT;
--! expect test_tab: SELECT count(*) FROM test_tab => 7
--! check
BEGIN;
INSERT INTO test_tab VALUES (16, sha256(16::text::bytea));
SAVEPOINT s1;
INSERT INTO test_tab VALUES (17, sha256(17::text::bytea));
SAVEPOINT s2;
INSERT INTO test_tab VALUES (18, sha256(18::text::bytea));
ROLLBACK;
--! expect test_tab: SELECT count(*) FROM test_tab => 7
--! check
DELETE FROM test_tab WHERE (a > 2);
--! check

--! if 16
--! stop tap_pub
--! start tap_pub_parallel
--! check
BEGIN;
INSERT INTO test_tab VALUES (3, sha256(3::text::bytea));
SAVEPOINT s1;
INSERT INTO test_tab VALUES (4, sha256(4::text::bytea));
SAVEPOINT s2;
INSERT INTO test_tab VALUES (5, sha256(5::text::bytea));
SAVEPOINT s3;
INSERT INTO test_tab VALUES (6, sha256(6::text::bytea));
ROLLBACK TO s2;
INSERT INTO test_tab VALUES (7, sha256(7::text::bytea));
ROLLBACK TO s1;
INSERT INTO test_tab VALUES (8, sha256(8::text::bytea));
SAVEPOINT s4;
INSERT INTO test_tab VALUES (9, sha256(9::text::bytea));
SAVEPOINT s5;
INSERT INTO test_tab VALUES (10, sha256(10::text::bytea));
COMMIT;
--! expect test_tab: SELECT count(*) FROM test_tab => 6
--! check
BEGIN;
INSERT INTO test_tab VALUES (11, sha256(11::text::bytea));
SAVEPOINT s1;
INSERT INTO test_tab VALUES (12, sha256(12::text::bytea));
SAVEPOINT s2;
INSERT INTO test_tab VALUES (13, sha256(13::text::bytea));
SAVEPOINT s3;
INSERT INTO test_tab VALUES (14, sha256(14::text::bytea));
RELEASE s2;
INSERT INTO test_tab VALUES (15, sha256(15::text::bytea));
ROLLBACK TO s1;
COMMIT;
--! expect test_tab: SELECT count(*) FROM test_tab => 7
--! check
BEGIN;
INSERT INTO test_tab VALUES (16, sha256(16::text::bytea));
SAVEPOINT s1;
INSERT INTO test_tab VALUES (17, sha256(17::text::bytea));
SAVEPOINT s2;
INSERT INTO test_tab VALUES (18, sha256(18::text::bytea));
ROLLBACK;
--! expect test_tab: SELECT count(*) FROM test_tab => 7
--! check
DELETE FROM test_tab WHERE (a > 2);
--! check
--! endif

BEGIN;
INSERT INTO test_tab_2 values(1);
ROLLBACK;
--! expect test_tab_2: SELECT count(*) FROM test_tab_2 => 0
--! check
BEGIN;
INSERT INTO test_tab_2 values(1);
SAVEPOINT sp;
INSERT INTO test_tab_2 values(1);
ROLLBACK TO sp;
COMMIT;
--! expect test_tab_2: SELECT count(*) FROM test_tab_2 => 1
--! check
