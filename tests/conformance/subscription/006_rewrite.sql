-- postgres/postgres src/test/subscription/t/006_rewrite.pl
-- commit 50e6eb731d98ab6d0e625a0b87fb327b172bbebd
--
-- ADD COLUMN ... NOT NULL DEFAULT on a table without a key: the rows written before read
-- the default, as a consumer reading their records with the newer schema must see.
--! bridge mypub

CREATE TABLE test1 (a int, b text);
CREATE PUBLICATION mypub FOR ALL TABLES;
--! start
--! check

INSERT INTO test1 (a, b) VALUES (1, 'one'), (2, 'two');
--! check

ALTER TABLE test1 ADD c int NOT NULL DEFAULT 0;
--! check

INSERT INTO test1 (a, b, c) VALUES (3, 'three', 33);
--! expect test1: SELECT a, b, c FROM test1 ORDER BY a => 1|one|0; 2|two|0; 3|three|33
--! check
