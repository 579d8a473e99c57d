-- postgres/postgres src/test/subscription/t/011_generated.pl
-- commit 50e6eb731d98ab6d0e625a0b87fb327b172bbebd
--
-- Generated columns. Each of the TAP's subscriptions is a bridge here, started where the
-- subscription is created (an initial snapshot of what the publication sends) and stopped
-- where it is dropped. Before PostgreSQL 18 no generated column is published (and a column
-- list may not name one): only the first part runs there. The subscriber-side trigger and
-- the subscriber's generated-column error have no publisher side. The TAP's
-- publish_generated_columns = false/true are written none/stored, as PostgreSQL 18's
-- release takes them.
--! bridge pub1
--! bridge gen_to_nogen_1 publication=regress_pub1_gen_to_nogen later
--! bridge gen_to_nogen_2 publication=regress_pub2_gen_to_nogen later
--! bridge tab2_pub publication=pub1 later
--! bridge tab3_pub publication=pub1 later
--! bridge t1_pub publication=pub1 later

CREATE TABLE tab1 (a int PRIMARY KEY, b int GENERATED ALWAYS AS (a * 2) STORED);
INSERT INTO tab1 (a) VALUES (1), (2), (3);
CREATE PUBLICATION pub1 FOR ALL TABLES;
--! start
--! check

INSERT INTO tab1 VALUES (4), (5);
UPDATE tab1 SET a = 6 WHERE a = 5;
--! check
INSERT INTO tab1 VALUES (7), (8);
UPDATE tab1 SET a = 9 WHERE a = 7;
--! check
--! stop pub1
DROP PUBLICATION pub1;

--! if 18
CREATE TABLE tab_gen_to_nogen (a int, b int GENERATED ALWAYS AS (a * 2) STORED);
INSERT INTO tab_gen_to_nogen (a) VALUES (1), (2), (3);
CREATE PUBLICATION regress_pub1_gen_to_nogen FOR TABLE tab_gen_to_nogen WITH (publish_generated_columns = none);
CREATE PUBLICATION regress_pub2_gen_to_nogen FOR TABLE tab_gen_to_nogen WITH (publish_generated_columns = stored);
--! start gen_to_nogen_1
--! start gen_to_nogen_2
--! expect tab_gen_to_nogen@gen_to_nogen_1: SELECT a FROM tab_gen_to_nogen ORDER BY a => 1; 2; 3
--! expect tab_gen_to_nogen@gen_to_nogen_2: SELECT a, b FROM tab_gen_to_nogen ORDER BY a => 1|2; 2|4; 3|6
--! check
INSERT INTO tab_gen_to_nogen VALUES (4), (5);
--! check
--! stop gen_to_nogen_1
--! stop gen_to_nogen_2
DROP PUBLICATION regress_pub1_gen_to_nogen;
DROP PUBLICATION regress_pub2_gen_to_nogen;

CREATE TABLE tab2 (a int, gen1 int GENERATED ALWAYS AS (a * 2) STORED);
INSERT INTO tab2 (a) VALUES (1), (2);
CREATE PUBLICATION pub1 FOR table tab2(gen1) WITH (publish_generated_columns=none);
--! start tab2_pub
--! expect tab2: SELECT * FROM tab2 ORDER BY gen1 => 2; 4
--! check
INSERT INTO tab2 VALUES (3), (4);
--! expect tab2: SELECT * FROM tab2 ORDER BY gen1 => 2; 4; 6; 8
--! check
--! stop tab2_pub
DROP PUBLICATION pub1;

CREATE TABLE tab3 (a int, gen1 int GENERATED ALWAYS AS (a * 2) STORED, gen2 int GENERATED ALWAYS AS (a * 2) STORED);
INSERT INTO tab3 (a) VALUES (1), (2);
CREATE PUBLICATION pub1 FOR table tab3(gen1) WITH (publish_generated_columns=stored);
--! start tab3_pub
--! check
INSERT INTO tab3 VALUES (3), (4);
--! expect tab3: SELECT * FROM tab3 ORDER BY gen1 => 2; 4; 6; 8
--! check
--! stop tab3_pub
DROP PUBLICATION pub1;

CREATE TABLE t1(c1 int, c2 int, c3 int GENERATED ALWAYS AS (c1 * 2) STORED);
CREATE PUBLICATION pub1 for table t1(c1, c2, c3);
INSERT INTO t1 VALUES (1);
--! start t1_pub
--! check
--! stop t1_pub
DROP PUBLICATION pub1;
--! endif
