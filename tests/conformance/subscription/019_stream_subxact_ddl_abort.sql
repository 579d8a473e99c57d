-- postgres/postgres src/test/subscription/t/019_stream_subxact_ddl_abort.pl
-- commit 50e6eb731d98ab6d0e625a0b87fb327b172bbebd
--
-- A streamed transaction whose subtransactions add and drop columns, rolled back to the
-- first savepoint: the rows that survive carry the table versions they were written in.
-- Every change is streamed at once (debug_logical_replication_streaming = immediate,
-- PostgreSQL 16 on, set for the case's database).
--! bridge tap_pub streaming=on

--! if 16
DO $$ BEGIN EXECUTE format('ALTER DATABASE %I SET debug_logical_replication_streaming = immediate', current_database()); END $$;
--! endif
CREATE TABLE test_tab (a int primary key, b bytea);
INSERT INTO test_tab VALUES (1, 'foo'), (2, 'bar');
CREATE PUBLICATION tap_pub FOR TABLE test_tab;
--! start
--! check

BEGIN;
INSERT INTO test_tab VALUES (3, sha256(3::text::bytea));
ALTER TABLE test_tab ADD COLUMN c INT;
SAVEPOINT s1;
INSERT INTO test_tab VALUES (4, sha256(4::text::bytea), -4);
ALTER TABLE test_tab ADD COLUMN d INT;
SAVEPOINT s2;
INSERT INTO test_tab VALUES (5, sha256(5::text::bytea), -5, 5*2);
ALTER TABLE test_tab ADD COLUMN e INT;
SAVEPOINT s3;
INSERT INTO test_tab VALUES (6, sha256(6::text::bytea), -6, 6*2, -6*3);
ALTER TABLE test_tab DROP COLUMN c;
ROLLBACK TO s1;
INSERT INTO test_tab VALUES (4, sha256(4::text::bytea), 4);
COMMIT;
--! expect test_tab: SELECT count(*), count(c) FROM test_tab => 4|1
--! check
