-- postgres/postgres src/test/subscription/t/005_encoding.pl
-- commit 50e6eb731d98ab6d0e625a0b87fb327b172bbebd
--
-- The publisher is UTF8 (the subscriber LATIN1, which has no part here): a hand-rolled
-- UTF-8 value arrives as the same text.
--! bridge mypub

CREATE TABLE test1 (a int, b text);
CREATE PUBLICATION mypub FOR ALL TABLES;
--! start
--! check

INSERT INTO test1 VALUES (1, E'Mot\xc3\xb6rhead');
--! expect test1: SELECT a FROM test1 WHERE b = E'Mot\xc3\xb6rhead' => 1
--! check
