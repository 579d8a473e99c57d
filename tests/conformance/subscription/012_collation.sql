-- postgres/postgres src/test/subscription/t/012_collation.pl
-- commit 50e6eb731d98ab6d0e625a0b87fb327b172bbebd
--
-- The TAP's nondeterministic collation is the subscriber's (its pre-inserted rows equal the
-- publisher's under that collation, in another normal form). Here the bridge's initial
-- snapshot stands for those rows (the subscription copies none), and the publisher's
-- updates are compared, under a primary key and under REPLICA IDENTITY FULL. A key with a
-- nondeterministic collation on the publisher is tests/test_row_identity.py's.
--! bridge pub1

CREATE TABLE tab1 (a text PRIMARY KEY, b text);
INSERT INTO tab1 VALUES (U&'\00E4bc', 'foo');
CREATE TABLE tab2 (a text, b text);
ALTER TABLE tab2 REPLICA IDENTITY FULL;
INSERT INTO tab2 VALUES (U&'\00E4bc', 'foo');
CREATE PUBLICATION pub1 FOR ALL TABLES;
--! start
--! check

UPDATE tab1 SET b = 'bar' WHERE b = 'foo';
--! expect tab1: SELECT b FROM tab1 => bar
--! check
UPDATE tab2 SET b = 'bar' WHERE b = 'foo';
--! expect tab2: SELECT b FROM tab2 => bar
--! check
