-- postgres/postgres src/test/subscription/t/001_rep_changes.pl
-- commit 50e6eb731d98ab6d0e625a0b87fb327b172bbebd
--
-- The publisher's statements of the TAP, in its order. The subscription follows two
-- publications: one bridge each. Left out: the subscriber's own DDL and deletes (the
-- conflict checks), the second subscription's bridges (its tables are still created,
-- written and dropped), the subscription's renames, and the closing wal_level=minimal
-- restart. The publisher's restart is a restart of the bridges here.
--! bridge tap_pub
--! bridge tap_pub_ins_only

CREATE FUNCTION public.pg_get_replica_identity_index(int)
  RETURNS regclass LANGUAGE sql AS 'SELECT 1/0';
CREATE TABLE tab_notrep AS SELECT generate_series(1,10) AS a;
CREATE TABLE tab_ins AS SELECT generate_series(1,1002) AS a;
CREATE TABLE tab_full AS SELECT generate_series(1,10) AS a;
CREATE TABLE tab_full2 (x text);
INSERT INTO tab_full2 VALUES ('a'), ('b'), ('b');
CREATE TABLE tab_rep (a int primary key);
CREATE TABLE tab_mixed (a int primary key, b text, c numeric);
INSERT INTO tab_mixed (a, b, c) VALUES (1, 'foo', 1.1);
CREATE TABLE tab_include (a int, b text, CONSTRAINT covering PRIMARY KEY(a) INCLUDE(b));
CREATE TABLE tab_full_pk (a int primary key, b text);
ALTER TABLE tab_full_pk REPLICA IDENTITY FULL;
CREATE TABLE tab_nothing (a int);
ALTER TABLE tab_nothing REPLICA IDENTITY NOTHING;
CREATE TABLE tab_no_replidentity_index(c1 int);
CREATE INDEX idx_no_replidentity_index ON tab_no_replidentity_index(c1);
CREATE TABLE tab_no_col();
INSERT INTO tab_no_col default VALUES;

CREATE PUBLICATION tap_pub;
CREATE PUBLICATION tap_pub_ins_only WITH (publish = insert);
ALTER PUBLICATION tap_pub ADD TABLE tab_rep, tab_full, tab_full2, tab_mixed, tab_include, tab_nothing, tab_full_pk, tab_no_replidentity_index, tab_no_col;
ALTER PUBLICATION tap_pub_ins_only ADD TABLE tab_ins;
--! start
--! diverges tab_ins: publish = insert, so its deletes and updates are not sent
--! expect tab_ins: SELECT count(*) FROM tab_ins => 1002
--! check

INSERT INTO tab_ins SELECT generate_series(1,50);
DELETE FROM tab_ins WHERE a > 20;
UPDATE tab_ins SET a = -a;
INSERT INTO tab_rep SELECT generate_series(1,50);
DELETE FROM tab_rep WHERE a > 20;
UPDATE tab_rep SET a = -a;
INSERT INTO tab_mixed VALUES (2, 'bar', 2.2);
INSERT INTO tab_full_pk VALUES (1, 'foo'), (2, 'baz');
INSERT INTO tab_nothing VALUES (generate_series(1,20));
INSERT INTO tab_include SELECT generate_series(1,50);
DELETE FROM tab_include WHERE a > 20;
UPDATE tab_include SET a = -a;
INSERT INTO tab_no_replidentity_index VALUES(1);
INSERT INTO tab_no_col default VALUES;
--! expect tab_ins: SELECT count(*), min(a), max(a) FROM tab_ins => 1052|1|1002
--! expect tab_rep: SELECT count(*), min(a), max(a) FROM tab_rep => 20|-20|-1
--! expect tab_nothing: SELECT count(*) FROM tab_nothing => 20
--! expect tab_include: SELECT count(*), min(a), max(a) FROM tab_include => 20|-20|-1
--! expect tab_no_replidentity_index: SELECT c1 FROM tab_no_replidentity_index => 1
--! expect tab_no_col: SELECT count(*) FROM tab_no_col => 2
--! check

INSERT INTO tab_full SELECT generate_series(1,10);
ALTER PUBLICATION tap_pub_ins_only DROP TABLE tab_ins;
INSERT INTO tab_ins VALUES(8888);
--! check
DELETE FROM tab_ins WHERE a = 8888;
ALTER PUBLICATION tap_pub_ins_only ADD TABLE tab_ins;

CREATE TABLE temp1 (a int);
CREATE TABLE temp2 (a int);
CREATE PUBLICATION tap_pub_temp1 FOR TABLE temp1 WITH (publish = insert);
CREATE PUBLICATION tap_pub_temp2 FOR TABLE temp2;
INSERT INTO temp1 VALUES (1);
DROP PUBLICATION tap_pub_temp1;
DROP PUBLICATION tap_pub_temp2;
DROP TABLE temp1;
DROP TABLE temp2;

ALTER TABLE tab_full REPLICA IDENTITY FULL;
ALTER TABLE tab_full2 REPLICA IDENTITY FULL;
ALTER TABLE tab_ins REPLICA IDENTITY FULL;
UPDATE tab_full SET a = a * a;
UPDATE tab_full2 SET x = 'bb' WHERE x = 'b';
UPDATE tab_mixed SET b = 'baz' WHERE a = 1;
UPDATE tab_full_pk SET b = 'bar' WHERE a = 1;
--! expect tab_full: SELECT count(*), min(a), max(a) FROM tab_full => 20|1|100
--! expect tab_full2: SELECT x FROM tab_full2 ORDER BY 1 => a; bb; bb
--! expect tab_mixed: SELECT * FROM tab_mixed ORDER BY a => 1|baz|1.1; 2|bar|2.2
--! expect tab_full_pk: SELECT * FROM tab_full_pk ORDER BY a => 1|bar; 2|baz
--! check

UPDATE tab_full_pk SET b = 'quux' WHERE a = 1;
UPDATE tab_full SET a = a + 1 WHERE a = 25;
DELETE FROM tab_full_pk WHERE a = 2;
--! check

UPDATE tab_mixed SET b = repeat('xyzzy', 100000) WHERE a = 2;
--! expect tab_mixed: SELECT a, length(b), c FROM tab_mixed ORDER BY a => 1|3|1.1; 2|500000|2.2
--! check
UPDATE tab_mixed SET c = 3.3 WHERE a = 2;
--! expect tab_mixed: SELECT a, length(b), c FROM tab_mixed ORDER BY a => 1|3|1.1; 2|500000|3.3
--! check

UPDATE tab_mixed SET b = 'bar', c = 2.2 WHERE a = 2;
ALTER TABLE tab_mixed DROP COLUMN b;
UPDATE tab_mixed SET c = 11.11 WHERE a = 1;
--! check
UPDATE tab_mixed SET c = 22.22 WHERE a = 2;
--! check

INSERT INTO tab_ins SELECT generate_series(1001,1100);
DELETE FROM tab_rep;
--! restart
--! expect tab_ins: SELECT count(*), min(a), max(a) FROM tab_ins => 1152|1|1100
--! check

ALTER PUBLICATION tap_pub_ins_only SET (publish = 'insert, delete');
ALTER PUBLICATION tap_pub_ins_only ADD TABLE tab_full;
DELETE FROM tab_ins WHERE a > 0;
INSERT INTO tab_full VALUES(0);
--! diverges tab_full@tap_pub_ins_only: added to the publication after the start and not copied (copy_data = false): only its later changes are sent
--! expect tab_ins: SELECT count(*), min(a), max(a) FROM tab_ins => 1052|1|1002
--! expect tab_full@tap_pub_ins_only: SELECT count(*), min(a), max(a) FROM tab_full => 1|0|0
--! check

INSERT INTO tab_notrep VALUES (11);
--! check
