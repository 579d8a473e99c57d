-- postgres/postgres src/test/subscription/t/021_twophase.pl
-- commit 50e6eb731d98ab6d0e625a0b87fb327b172bbebd
--
-- Two-phase commit with two_phase on: a prepared transaction's rows reach Kafka only with
-- its COMMIT PREPARED, never with a ROLLBACK PREPARED, also across a restart while it is
-- prepared (the TAP crashes the publisher and the subscriber; here the bridge restarts, the
-- shared server stays up), with a subtransaction rolled back inside it and with an empty
-- GID. The subscriber's max_prepared_transactions error and two_phase/failover switches
-- have no publisher side; the publisher's writes around them are kept.
--! bridge tap_pub two_phase=true
--! bridge tap_pub_copy two_phase=true later

CREATE TABLE tab_full (a int PRIMARY KEY);
BEGIN;
INSERT INTO tab_full SELECT generate_series(1,10);
PREPARE TRANSACTION 'some_initial_data';
COMMIT PREPARED 'some_initial_data';
CREATE PUBLICATION tap_pub FOR TABLE tab_full;
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
INSERT INTO tab_full VALUES (12);
INSERT INTO tab_full VALUES (13);
PREPARE TRANSACTION 'test_prepared_tab';
--! restart
ROLLBACK PREPARED 'test_prepared_tab';
--! check

BEGIN;
INSERT INTO tab_full VALUES (12);
INSERT INTO tab_full VALUES (13);
PREPARE TRANSACTION 'test_prepared_tab';
--! restart
COMMIT PREPARED 'test_prepared_tab';
--! expect tab_full: SELECT count(*) FROM tab_full where a IN (12,13) => 2
--! check

BEGIN;
INSERT INTO tab_full VALUES (14);
INSERT INTO tab_full VALUES (15);
PREPARE TRANSACTION 'test_prepared_tab';
--! restart
COMMIT PREPARED 'test_prepared_tab';
--! check

BEGIN;
INSERT INTO tab_full VALUES (16);
INSERT INTO tab_full VALUES (17);
PREPARE TRANSACTION 'test_prepared_tab';
--! restart
COMMIT PREPARED 'test_prepared_tab';
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

BEGIN;
INSERT INTO tab_full VALUES (51);
PREPARE TRANSACTION '';
--! check
ROLLBACK PREPARED '';
--! check

CREATE TABLE tab_copy (a int PRIMARY KEY);
INSERT INTO tab_copy SELECT generate_series(1,5);
CREATE PUBLICATION tap_pub_copy FOR TABLE tab_copy;
--! start tap_pub_copy
--! check
BEGIN;
INSERT INTO tab_copy VALUES (99);
PREPARE TRANSACTION 'mygid';
--! check
COMMIT PREPARED 'mygid';
--! check
--! stop tap_pub

BEGIN;
INSERT INTO tab_copy VALUES (100);
PREPARE TRANSACTION 'newgid';
--! check
COMMIT PREPARED 'newgid';
--! check
--! stop tap_pub_copy
DROP PUBLICATION tap_pub_copy;
