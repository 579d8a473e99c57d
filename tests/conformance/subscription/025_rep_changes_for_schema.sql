-- postgres/postgres src/test/subscription/t/025_rep_changes_for_schema.pl
-- commit 50e6eb731d98ab6d0e625a0b87fb327b172bbebd
--
-- FOR TABLES IN SCHEMA publications: tables created in the schema join it at once (the
-- rows CREATE TABLE ... AS writes are sent; the TAP's subscriber skips them until it
-- refreshes), a partitioned table whose partitions live in another schema is published
-- through its partitions, a table moved out of the schema and the schema dropped from the
-- publication stop being sent.
--! bridge tap_pub_schema

CREATE SCHEMA sch1;
CREATE TABLE sch1.tab1 AS SELECT generate_series(1,10) AS a;
CREATE TABLE sch1.tab2 AS SELECT generate_series(1,10) AS a;
CREATE TABLE sch1.tab1_parent (a int PRIMARY KEY, b text) PARTITION BY LIST (a);
CREATE TABLE public.tab1_child1 PARTITION OF sch1.tab1_parent FOR VALUES IN (1, 2, 3);
CREATE TABLE public.tab1_child2 PARTITION OF sch1.tab1_parent FOR VALUES IN (4, 5, 6);
INSERT INTO sch1.tab1_parent values (1),(4);
CREATE PUBLICATION tap_pub_schema FOR TABLES IN SCHEMA sch1;
--! start
--! check

INSERT INTO sch1.tab1 VALUES(generate_series(11,20));
INSERT INTO sch1.tab1_parent values (2),(5);
--! expect sch1.tab1: SELECT count(*), min(a), max(a) FROM tab1 => 20|1|20
--! check

CREATE TABLE sch1.tab3 AS SELECT generate_series(1,10) AS a;
--! check
INSERT INTO sch1.tab3 VALUES(11);
--! expect sch1.tab3: SELECT count(*), min(a), max(a) FROM tab3 => 11|1|11
--! check
ALTER TABLE sch1.tab3 SET SCHEMA public;
INSERT INTO public.tab3 VALUES(12);
--! check
DROP TABLE sch1.tab2;
--! check
INSERT INTO sch1.tab1 VALUES(21);
ALTER PUBLICATION tap_pub_schema DROP TABLES IN SCHEMA sch1;
INSERT INTO sch1.tab1 values(22);
--! check
