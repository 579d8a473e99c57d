-- postgres/postgres contrib/test_decoding/sql/twophase_stream.sql
-- commit a271a1b50e9bec07e2ef3a05e38e7285113e4ce6
--
-- Streamed prepared transactions (streaming and two_phase on): a subtransaction with a
-- message and a TRUNCATE rolled back, then PREPARE and COMMIT PREPARED, twice (once with
-- a "_nodecode" GID). Compared wherever the script reads its slot and before it drops
-- its table.
--! bridge regression publication_mode=all_tables streaming=on two_phase=true

SET synchronous_commit = on;
--! start
CREATE TABLE stream_test(data text);
--! check

BEGIN;
SAVEPOINT s1;
SELECT 'msg5' FROM pg_logical_emit_message(true, 'test', repeat('a', 50));
INSERT INTO stream_test SELECT repeat('a', 2000) || g.i FROM generate_series(1, 35) g(i);
TRUNCATE table stream_test;
ROLLBACK TO s1;
INSERT INTO stream_test SELECT repeat('a', 10) || g.i FROM generate_series(1, 20) g(i);
PREPARE TRANSACTION 'test1';
--! check
COMMIT PREPARED 'test1';
--! check

BEGIN;
SAVEPOINT s1;
SELECT 'msg5' FROM pg_logical_emit_message(true, 'test', repeat('a', 50));
INSERT INTO stream_test SELECT repeat('a', 2000) || g.i FROM generate_series(1, 35) g(i);
TRUNCATE table stream_test;
ROLLBACK to s1;
INSERT INTO stream_test SELECT repeat('a', 10) || g.i FROM generate_series(1, 20) g(i);
PREPARE TRANSACTION 'test1_nodecode';
--! check
COMMIT PREPARED 'test1_nodecode';
--! messages test => (none)
--! check

DROP TABLE stream_test;
--! check
