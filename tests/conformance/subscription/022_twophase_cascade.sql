-- postgres/postgres src/test/subscription/t/022_twophase_cascade.pl
-- commit 50e6eb731d98ab6d0e625a0b87fb327b172bbebd
--
-- node_A's side of the cascade node_A -> node_B -> node_C: prepared transactions
-- committed, rolled back and with a nested ROLLBACK TO SAVEPOINT, first without and then
-- with streaming (the TAP switches its subscription to streaming = on: a second bridge
-- here). node_B and node_C, subscribers, have no part. CREATE PUBLICATION tap_pub_A names
-- publication tap_pub_a (an unquoted identifier is folded to lower case); a bridge's
-- source.publication_name is the name itself.
--! bridge tap_pub_A publication=tap_pub_a two_phase=true streaming=off
--! bridge tap_pub_A_streaming publication=tap_pub_a two_phase=true streaming=on later

CREATE TABLE tab_full (a int PRIMARY KEY);
INSERT INTO tab_full SELECT generate_series(1,10);
CREATE TABLE test_tab (a int primary key, b bytea);
INSERT INTO test_tab VALUES (1, 'foo'), (2, 'bar');
CREATE PUBLICATION tap_pub_A FOR TABLE tab_full, test_tab;
--! start
--! check

BEGIN;
INSERT INTO tab_full VALUES (11);
PREPARE TRANSACTION 'test_prepared_tab_full';
--! check
COMMIT PREPARED 'test_prepared_tab_full';
--! check
BEGIN;
INSERT INTO tab_full VALUES (12);
PREPARE TRANSACTION 'test_prepared_tab_full';
--! check
ROLLBACK PREPARED 'test_prepared_tab_full';
--! check
BEGIN;
INSERT INTO tab_full VALUES (21);
SAVEPOINT sp_inner;
INSERT INTO tab_full VALUES (22);
ROLLBACK TO SAVEPOINT sp_inner;
PREPARE TRANSACTION 'outer';
--! check
COMMIT PREPARED 'outer';
--! expect tab_full: SELECT a FROM tab_full where a IN (21,22) => 21
--! check

--! stop tap_pub_A
--! start tap_pub_A_streaming
BEGIN;
INSERT INTO test_tab SELECT i, sha256(i::text::bytea) FROM generate_series(3, 5000) s(i);
UPDATE test_tab SET b =  sha256(b) WHERE mod(a,2) = 0;
DELETE FROM test_tab WHERE mod(a,3) = 0;
PREPARE TRANSACTION 'test_prepared_tab';
--! check
COMMIT PREPARED 'test_prepared_tab';
--! expect test_tab: SELECT count(*) FROM test_tab => 3334
--! check
DELETE FROM test_tab WHERE a > 2;
BEGIN;
INSERT INTO test_tab VALUES (9999, 'foobar');
SAVEPOINT sp_inner;
INSERT INTO test_tab SELECT i, sha256(i::text::bytea) FROM generate_series(3, 5000) s(i);
UPDATE test_tab SET b = sha256(b) WHERE mod(a,2) = 0;
DELETE FROM test_tab WHERE mod(a,3) = 0;
ROLLBACK TO SAVEPOINT sp_inner;
PREPARE TRANSACTION 'outer';
--! check
COMMIT PREPARED 'outer';
--! expect test_tab: SELECT count(*) FROM test_tab => 3
--! check
