-- postgres/postgres src/test/subscription/t/008_diff_schema.pl
-- commit 50e6eb731d98ab6d0e625a0b87fb327b172bbebd
--
-- The subscriber's extra columns and local values are the subscriber's; the publisher's
-- rows and updates are compared.
--! bridge tap_pub

CREATE TABLE test_tab (a int primary key, b varchar);
INSERT INTO test_tab VALUES (1, 'foo'), (2, 'bar');
CREATE PUBLICATION tap_pub FOR ALL TABLES;
--! start
--! check

UPDATE test_tab SET b = encode(sha256(b::bytea), 'hex');
--! check
UPDATE test_tab SET b = encode(sha256(a::text::bytea), 'hex');
--! check
INSERT INTO test_tab VALUES (3, 'baz');
--! check

CREATE TABLE test_tab2 (a int);
--! check
INSERT INTO test_tab2 VALUES (1);
--! expect test_tab2: SELECT count(*), min(a), max(a) FROM test_tab2 => 1|1|1
--! check
