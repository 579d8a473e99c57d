-- postgres/postgres contrib/test_decoding/sql/twophase_stream.sql
-- commit a271a1b50e9bec07e2ef3a05e38e7285113e4ce6
--
-- Streamed prepared transactions (streaming and two_phase on): a subtransaction with a
-- message and a TRUNCATE rolled back, then PREPARE and COMMIT PREPARED, twice (once with
-- a "_nodecode" GID). Compared wherever the script reads its slot and before it drops
-- its table.
-- The transactional message of each rolled-back savepoint reaches the message topic: the
-- transaction is streamed before its ROLLBACK TO is decoded, and PostgreSQL streams a
-- message under the top-level transaction's xid (the reorder buffer hands the message
-- callback the top-level transaction, not the subtransaction), so the Stream Abort of the
-- subtransaction cannot tell it apart from a message of the top level. The script's own
-- expected output shows it streamed in both transactions ("streaming message:
-- transactional: 1 prefix: test, sz: 50", twophase_stream.out); docs/concepts/delivery.md
-- says what a consumer of the message topic sees.
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
--! messages test => aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa; aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa
--! check

DROP TABLE stream_test;
--! check
