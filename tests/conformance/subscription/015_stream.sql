-- postgres/postgres src/test/subscription/t/015_stream.pl
-- commit 50e6eb731d98ab6d0e625a0b87fb327b172bbebd
--
-- Large transactions streamed while in progress (the stack runs with
-- logical_decoding_work_mem = 64kB, as the TAP's publisher does), two of them interleaved.
-- The TAP's test_streaming() runs twice, with streaming = on and then parallel (PostgreSQL
-- 16 on): here under a bridge with each setting (the second started when the first
-- stops). The subscriber's binary switch, local columns, unique index and deadlocks are
-- the subscriber's; the publisher's writes around them are kept.
--! bridge tap_pub streaming=on
--! bridge tap_pub_parallel publication=tap_pub streaming=parallel later

CREATE TABLE test_tab (a int primary key, b bytea);
INSERT INTO test_tab VALUES (1, 'foo'), (2, 'bar');
CREATE TABLE test_tab_2 (a int);
CREATE PUBLICATION tap_pub FOR TABLE test_tab, test_tab_2;
--! start
--! check

-- test_streaming(on)
--! session h
BEGIN;
INSERT INTO test_tab SELECT i, sha256(i::text::bytea) FROM generate_series(3, 5000) s(i);
UPDATE test_tab SET b = sha256(b) WHERE mod(a,2) = 0;
DELETE FROM test_tab WHERE mod(a,3) = 0;
--! session main
BEGIN;
INSERT INTO test_tab SELECT i, sha256(i::text::bytea) FROM generate_series(5001, 9999) s(i);
DELETE FROM test_tab WHERE a > 5000;
COMMIT;
--! session h
COMMIT;
--! session main
--! expect test_tab: SELECT count(*) FROM test_tab => 3334
--! check
BEGIN;
INSERT INTO test_tab SELECT i, sha256(i::text::bytea) FROM generate_series(5001, 10000) s(i);
UPDATE test_tab SET b = sha256(b) WHERE mod(a,2) = 0;
DELETE FROM test_tab WHERE mod(a,3) = 0;
COMMIT;
--! expect test_tab: SELECT count(*) FROM test_tab => 6667
--! check
UPDATE test_tab SET b = sha256(a::text::bytea);
--! check
DELETE FROM test_tab WHERE (a > 2);
--! check
--! stop tap_pub

--! if 16
--! start tap_pub_parallel
--! check
-- test_streaming(parallel)
--! session h
BEGIN;
INSERT INTO test_tab SELECT i, sha256(i::text::bytea) FROM generate_series(3, 5000) s(i);
UPDATE test_tab SET b = sha256(b) WHERE mod(a,2) = 0;
DELETE FROM test_tab WHERE mod(a,3) = 0;
--! session main
BEGIN;
INSERT INTO test_tab SELECT i, sha256(i::text::bytea) FROM generate_series(5001, 9999) s(i);
DELETE FROM test_tab WHERE a > 5000;
COMMIT;
--! session h
COMMIT;
--! session main
--! check
BEGIN;
INSERT INTO test_tab SELECT i, sha256(i::text::bytea) FROM generate_series(5001, 10000) s(i);
UPDATE test_tab SET b = sha256(b) WHERE mod(a,2) = 0;
DELETE FROM test_tab WHERE mod(a,3) = 0;
COMMIT;
--! check
UPDATE test_tab SET b = sha256(a::text::bytea);
--! check
DELETE FROM test_tab WHERE (a > 2);
--! check

-- deadlocks on the subscriber: the publisher's side
--! session h
BEGIN;
INSERT INTO test_tab_2 SELECT i FROM generate_series(1, 5000) s(i);
--! session main
INSERT INTO test_tab_2 values(1);
--! session h
COMMIT;
--! session main
--! expect test_tab_2: SELECT count(*) FROM test_tab_2 => 5001
--! check
TRUNCATE TABLE test_tab_2;
--! check
--! session h
BEGIN;
INSERT INTO test_tab_2 SELECT i FROM generate_series(1, 5000) s(i);
--! session main
INSERT INTO test_tab_2 SELECT i FROM generate_series(1, 5000) s(i);
--! session h
COMMIT;
--! session main
--! check
INSERT INTO test_tab_2 SELECT i FROM generate_series(1, 5000) s(i);
--! expect test_tab_2: SELECT count(*) FROM test_tab_2 => 15000
--! check
--! endif
