-- postgres/postgres contrib/test_decoding/sql/xact.sql
-- commit 6e759cefe809cb7852cdf6ea3088d8604a817185
--
-- Bug #13844: a transaction whose xid is assigned by a record decoding does not send
-- (SELECT ... FOR UPDATE) before its subtransaction inserts.
--! bridge regression publication_mode=all_tables

SET synchronous_commit = on;
--! start
CREATE TABLE xact_test(data text);
INSERT INTO xact_test VALUES ('before-test');

BEGIN;
SELECT * FROM xact_test FOR UPDATE;
SAVEPOINT foo;
INSERT INTO xact_test VALUES ('after-assignment');
COMMIT;
--! check

DROP TABLE xact_test;
--! check
