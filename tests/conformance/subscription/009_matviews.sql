-- postgres/postgres src/test/subscription/t/009_matviews.pl
-- commit 549ec201d6132b7c7ee11ee90a4e02119259ba5b
--
-- Logical decoding produces changes for a materialized view's rows, which are never
-- published: no topic for testmv1, and the bridge goes on.
--! bridge mypub

CREATE PUBLICATION mypub FOR ALL TABLES;
--! start
CREATE TABLE test1 (a int PRIMARY KEY, b text);
INSERT INTO test1 (a, b) VALUES (1, 'one'), (2, 'two');
--! check
CREATE MATERIALIZED VIEW testmv1 AS SELECT * FROM test1;
--! check
