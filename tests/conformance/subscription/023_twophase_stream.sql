-- postgres/postgres src/test/subscription/t/023_twophase_stream.pl
-- commit 50e6eb731d98ab6d0e625a0b87fb327b172bbebd
--
-- Prepared transactions streamed while in progress (streaming and two_phase on, every
-- change streamed at once: debug_logical_replication_streaming = immediate for the case's
-- database, PostgreSQL 16 on), committed or rolled back, also after a restart while
-- prepared (the TAP crashes both servers; here the bridge restarts) and with a commit of
-- another transaction between PREPARE and its end. The body runs with streaming = on and
-- then parallel, a bridge each.
--! bridge tap_pub streaming=on two_phase=true
--! bridge tap_pub_parallel publication=tap_pub streaming=parallel two_phase=true later

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
INSERT INTO test_tab SELECT i, sha256(i::text::bytea) FROM generate_series(3, 5) s(i);
UPDATE test_tab SET b = sha256(b) WHERE mod(a,2) = 0;
DELETE FROM test_tab WHERE mod(a,3) = 0;
PREPARE TRANSACTION 'test_prepared_tab';
--! check
COMMIT PREPARED 'test_prepared_tab';
--! expect test_tab: SELECT count(*) FROM test_tab => 4
--! check
DELETE FROM test_tab WHERE a > 2;
BEGIN;
INSERT INTO test_tab SELECT i, sha256(i::text::bytea) FROM generate_series(3, 5) s(i);
UPDATE test_tab SET b = sha256(b) WHERE mod(a,2) = 0;
DELETE FROM test_tab WHERE mod(a,3) = 0;
PREPARE TRANSACTION 'test_prepared_tab';
--! check
ROLLBACK PREPARED 'test_prepared_tab';
--! expect test_tab: SELECT count(*) FROM test_tab => 2
--! check
BEGIN;
INSERT INTO test_tab SELECT i, sha256(i::text::bytea) FROM generate_series(3, 5) s(i);
UPDATE test_tab SET b = sha256(b) WHERE mod(a,2) = 0;
DELETE FROM test_tab WHERE mod(a,3) = 0;
PREPARE TRANSACTION 'test_prepared_tab';
--! restart
COMMIT PREPARED 'test_prepared_tab';
--! expect test_tab: SELECT count(*) FROM test_tab => 4
--! check
DELETE FROM test_tab WHERE a > 2;
BEGIN;
INSERT INTO test_tab SELECT i, sha256(i::text::bytea) FROM generate_series(3, 5) s(i);
UPDATE test_tab SET b = sha256(b) WHERE mod(a,2) = 0;
DELETE FROM test_tab WHERE mod(a,3) = 0;
PREPARE TRANSACTION 'test_prepared_tab';
--! check
INSERT INTO test_tab VALUES (99999, 'foobar');
ROLLBACK PREPARED 'test_prepared_tab';
--! expect test_tab: SELECT count(*) FROM test_tab => 3
--! check
DELETE FROM test_tab WHERE a > 2;
BEGIN;
INSERT INTO test_tab SELECT i, sha256(i::text::bytea) FROM generate_series(3, 5) s(i);
UPDATE test_tab SET b = sha256(b) WHERE mod(a,2) = 0;
DELETE FROM test_tab WHERE mod(a,3) = 0;
PREPARE TRANSACTION 'test_prepared_tab';
--! check
INSERT INTO test_tab VALUES (99999, 'foobar');
COMMIT PREPARED 'test_prepared_tab';
--! expect test_tab: SELECT count(*) FROM test_tab => 5
--! check
DELETE FROM test_tab WHERE a > 2;
--! check

--! if 16
--! stop tap_pub
--! start tap_pub_parallel
--! check
BEGIN;
INSERT INTO test_tab SELECT i, sha256(i::text::bytea) FROM generate_series(3, 5) s(i);
UPDATE test_tab SET b = sha256(b) WHERE mod(a,2) = 0;
DELETE FROM test_tab WHERE mod(a,3) = 0;
PREPARE TRANSACTION 'test_prepared_tab';
--! check
COMMIT PREPARED 'test_prepared_tab';
--! expect test_tab: SELECT count(*) FROM test_tab => 4
--! check
DELETE FROM test_tab WHERE a > 2;
BEGIN;
INSERT INTO test_tab SELECT i, sha256(i::text::bytea) FROM generate_series(3, 5) s(i);
UPDATE test_tab SET b = sha256(b) WHERE mod(a,2) = 0;
DELETE FROM test_tab WHERE mod(a,3) = 0;
PREPARE TRANSACTION 'test_prepared_tab';
--! check
ROLLBACK PREPARED 'test_prepared_tab';
--! expect test_tab: SELECT count(*) FROM test_tab => 2
--! check
BEGIN;
INSERT INTO test_tab SELECT i, sha256(i::text::bytea) FROM generate_series(3, 5) s(i);
UPDATE test_tab SET b = sha256(b) WHERE mod(a,2) = 0;
DELETE FROM test_tab WHERE mod(a,3) = 0;
PREPARE TRANSACTION 'test_prepared_tab';
--! restart
COMMIT PREPARED 'test_prepared_tab';
--! expect test_tab: SELECT count(*) FROM test_tab => 4
--! check
DELETE FROM test_tab WHERE a > 2;
BEGIN;
INSERT INTO test_tab SELECT i, sha256(i::text::bytea) FROM generate_series(3, 5) s(i);
UPDATE test_tab SET b = sha256(b) WHERE mod(a,2) = 0;
DELETE FROM test_tab WHERE mod(a,3) = 0;
PREPARE TRANSACTION 'test_prepared_tab';
--! check
INSERT INTO test_tab VALUES (99999, 'foobar');
ROLLBACK PREPARED 'test_prepared_tab';
--! expect test_tab: SELECT count(*) FROM test_tab => 3
--! check
DELETE FROM test_tab WHERE a > 2;
BEGIN;
INSERT INTO test_tab SELECT i, sha256(i::text::bytea) FROM generate_series(3, 5) s(i);
UPDATE test_tab SET b = sha256(b) WHERE mod(a,2) = 0;
DELETE FROM test_tab WHERE mod(a,3) = 0;
PREPARE TRANSACTION 'test_prepared_tab';
--! check
INSERT INTO test_tab VALUES (99999, 'foobar');
COMMIT PREPARED 'test_prepared_tab';
--! expect test_tab: SELECT count(*) FROM test_tab => 5
--! check
DELETE FROM test_tab WHERE a > 2;
--! check
--! endif

BEGIN;
INSERT INTO test_tab_2 values(1);
PREPARE TRANSACTION 'xact';
--! check
COMMIT PREPARED 'xact';
--! expect test_tab_2: SELECT count(*) FROM test_tab_2 => 1
--! check
