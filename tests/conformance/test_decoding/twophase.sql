-- postgres/postgres contrib/test_decoding/sql/twophase.sql
-- commit 19890a064ebf53dedcefed0d8339ed3d449b06e6
--
-- Two-phase decoding (the script's slot has two_phase; the bridge runs with two_phase on):
-- a prepared transaction is decoded at PREPARE and its rows reach Kafka only at COMMIT
-- PREPARED, never after ROLLBACK PREPARED, also with DDL, CLUSTER and a rolled-back
-- savepoint inside, and with a GID containing "_nodecode". Compared wherever the script
-- reads its slot, also inside an open transaction and while a transaction is prepared.
--! bridge regression publication_mode=all_tables two_phase=true

SET synchronous_commit = on;
--! start
CREATE TABLE test_prepared1(id integer primary key);
CREATE TABLE test_prepared2(id integer primary key);

BEGIN;
INSERT INTO test_prepared1 VALUES (1);
INSERT INTO test_prepared1 VALUES (2);
--! check
PREPARE TRANSACTION 'test_prepared#1';
--! check
COMMIT PREPARED 'test_prepared#1';
--! check

BEGIN;
INSERT INTO test_prepared1 VALUES (3);
PREPARE TRANSACTION 'test_prepared#2';
--! check
ROLLBACK PREPARED 'test_prepared#2';
--! check

BEGIN;
ALTER TABLE test_prepared1 ADD COLUMN data text;
INSERT INTO test_prepared1 VALUES (4, 'frakbar');
PREPARE TRANSACTION 'test_prepared#3';
SELECT 'test_prepared_1' AS relation, locktype, mode
FROM pg_locks
WHERE locktype = 'relation'
  AND relation = 'test_prepared1'::regclass;
--! locked test_prepared1: the prepared ALTER TABLE holds it under an ACCESS EXCLUSIVE lock until COMMIT PREPARED (the script's pg_locks query shows it)
--! check

INSERT INTO test_prepared2 VALUES (5);
--! locked test_prepared1: still held by the prepared ALTER TABLE; the script checks that test_prepared2's insert is decoded meanwhile
--! check

COMMIT PREPARED 'test_prepared#3';
--! check
INSERT INTO test_prepared1 VALUES (6);
INSERT INTO test_prepared2 VALUES (7);
--! check

BEGIN;
INSERT INTO test_prepared1 VALUES (8, 'othercol');
CLUSTER test_prepared1 USING test_prepared1_pkey;
INSERT INTO test_prepared1 VALUES (9, 'othercol2');
PREPARE TRANSACTION 'test_prepared_lock';
SELECT 'test_prepared1' AS relation, locktype, mode
FROM pg_locks
WHERE locktype = 'relation'
  AND relation = 'test_prepared1'::regclass;
SET statement_timeout = '180s';
--! locked test_prepared1: the prepared CLUSTER holds it under an ACCESS EXCLUSIVE lock until COMMIT PREPARED; the script checks that decoding is not blocked, which the check's wait for delivery shows
--! check
RESET statement_timeout;
COMMIT PREPARED 'test_prepared_lock';
--! check

BEGIN;
CREATE TABLE test_prepared_savepoint (a int);
INSERT INTO test_prepared_savepoint VALUES (1);
SAVEPOINT test_savepoint;
INSERT INTO test_prepared_savepoint VALUES (2);
ROLLBACK TO SAVEPOINT test_savepoint;
PREPARE TRANSACTION 'test_prepared_savepoint';
--! check
COMMIT PREPARED 'test_prepared_savepoint';
--! check

BEGIN;
INSERT INTO test_prepared1 VALUES (20);
PREPARE TRANSACTION 'test_prepared_nodecode';
--! check
COMMIT PREPARED 'test_prepared_nodecode';
--! check

DROP TABLE test_prepared1;
DROP TABLE test_prepared2;
--! check
