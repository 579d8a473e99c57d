-- postgres/postgres contrib/test_decoding/sql/prepared.sql
-- commit d900e192a3ef2dd73fae4522c35aadce6d72a534
--
-- Prepared transactions without two_phase decoding (the default: each arrives at its
-- COMMIT PREPARED), one rolled back, one with DDL left prepared while another commits. The
-- script reads its slot only after dropping its tables; the topics are also compared
-- before the drop (an added comparison point, no added SQL).
--! bridge regression publication_mode=all_tables

SET synchronous_commit = on;
--! start
CREATE TABLE test_prepared1(id int);
CREATE TABLE test_prepared2(id int);

-- test simple successful use of a prepared xact
BEGIN;
INSERT INTO test_prepared1 VALUES (1);
PREPARE TRANSACTION 'test_prepared#1';
COMMIT PREPARED 'test_prepared#1';
INSERT INTO test_prepared1 VALUES (2);

-- test abort of a prepared xact
BEGIN;
INSERT INTO test_prepared1 VALUES (3);
PREPARE TRANSACTION 'test_prepared#2';
ROLLBACK PREPARED 'test_prepared#2';

INSERT INTO test_prepared1 VALUES (4);

-- test prepared xact containing ddl
BEGIN;
INSERT INTO test_prepared1 VALUES (5);
ALTER TABLE test_prepared1 ADD COLUMN data text;
INSERT INTO test_prepared1 VALUES (6, 'frakbar');
PREPARE TRANSACTION 'test_prepared#3';

-- separate table because of the lock from the ALTER
-- this will come before the '5' row above, as this commits before it.
INSERT INTO test_prepared2 VALUES (7);

COMMIT PREPARED 'test_prepared#3';

-- make sure stuff still works
INSERT INTO test_prepared1 VALUES (8);
INSERT INTO test_prepared2 VALUES (9);
--! check

-- cleanup
DROP TABLE test_prepared1;
DROP TABLE test_prepared2;
--! check
