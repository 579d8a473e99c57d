-- postgres/postgres src/test/subscription/t/013_partition.pl
-- commit 50e6eb731d98ab6d0e625a0b87fb327b172bbebd
--
-- Partitioned tables in both root modes. First pub1 (tab1 and tab1_1) and pub_all (FOR ALL
-- TABLES) publish each leaf as itself: a topic per partition, an update that moves a row
-- to another partition a delete in one topic and an insert in the other. Then pub_all
-- switches to publish_via_partition_root while its bridge streams, and pub_viaroot and
-- pub_lower_level publish through the topmost published ancestor: one topic per root,
-- except tab3_1 (its parent is in no publication: published as itself) and tab4_1 on
-- pub_lower_level (the topmost ancestor that publication names). A TRUNCATE of single
-- partitions is not sent through a root: those roots' topics keep the rows (the TAP's
-- "NOT replicated"), until the roots themselves are truncated. The subscribers'
-- partitioning, triggers, local rows and conflicts are the subscribers'. The TAP's
-- subscriber follows pub_lower_level and pub_all together (the topmost ancestor over both,
-- tab4); here each publication has a bridge of its own.
--! bridge pub1
--! bridge pub_all
--! bridge pub_viaroot later
--! bridge pub_lower_level later

CREATE PUBLICATION pub1;
CREATE PUBLICATION pub_all FOR ALL TABLES;
CREATE TABLE tab1 (a int PRIMARY KEY, b text) PARTITION BY LIST (a);
CREATE TABLE tab1_1 (b text, a int NOT NULL);
ALTER TABLE tab1 ATTACH PARTITION tab1_1 FOR VALUES IN (1, 2, 3);
CREATE TABLE tab1_2 PARTITION OF tab1 FOR VALUES IN (4, 5, 6);
CREATE TABLE tab1_def PARTITION OF tab1 DEFAULT;
ALTER PUBLICATION pub1 ADD TABLE tab1, tab1_1;
--! start
--! check

-- Tests for replication using leaf partition identity and schema
INSERT INTO tab1 VALUES (1);
INSERT INTO tab1_1 (a) VALUES (3);
INSERT INTO tab1_2 VALUES (5);
INSERT INTO tab1 VALUES (0);
--! check

-- update (replicated as update)
UPDATE tab1 SET a = 2 WHERE a = 1;
UPDATE tab1 SET a = 6 WHERE a = 5;
UPDATE tab1 SET a = 4 WHERE a = 6;
UPDATE tab1 SET a = 6 WHERE a = 4;
--! check

-- update (replicated as delete+insert)
UPDATE tab1 SET a = 1 WHERE a = 0;
UPDATE tab1 SET a = 4 WHERE a = 1;
--! expect tab1_def: SELECT a FROM tab1_def ORDER BY 1 => (none)
--! expect tab1_2: SELECT a FROM tab1_2 ORDER BY 1 => 4; 6
--! check

-- delete
DELETE FROM tab1 WHERE a IN (2, 3, 5);
DELETE FROM tab1_2;
--! check

-- truncate
TRUNCATE tab1_2;
--! check
TRUNCATE tab1;
--! check

INSERT INTO tab1 VALUES (1, 'foo'), (4, 'bar'), (10, 'baz');
--! check
UPDATE tab1 SET b = 'quux' WHERE a = 4;
DELETE FROM tab1;
--! check

-- Tests for replication using root table identity and schema
--! stop pub1
DROP PUBLICATION pub1;
CREATE TABLE tab2 (a int PRIMARY KEY, b text) PARTITION BY LIST (a);
CREATE TABLE tab2_1 (b text, a int NOT NULL);
ALTER TABLE tab2 ATTACH PARTITION tab2_1 FOR VALUES IN (0, 1, 2, 3);
CREATE TABLE tab2_2 PARTITION OF tab2 FOR VALUES IN (5, 6);
CREATE TABLE tab3 (a int PRIMARY KEY, b text) PARTITION BY LIST (a);
CREATE TABLE tab3_1 PARTITION OF tab3 FOR VALUES IN (0, 1, 2, 3, 5, 6);
CREATE TABLE tab4 (a int PRIMARY KEY) PARTITION BY LIST (a);
CREATE TABLE tab4_1 PARTITION OF tab4 FOR VALUES IN (-1, 0, 1) PARTITION BY LIST (a);
CREATE TABLE tab4_1_1 PARTITION OF tab4_1 FOR VALUES IN (-1, 0, 1);
ALTER PUBLICATION pub_all SET (publish_via_partition_root = true);
CREATE PUBLICATION pub_viaroot FOR TABLE tab2, tab2_1, tab3_1 WITH (publish_via_partition_root = true);
CREATE PUBLICATION pub_lower_level FOR TABLE tab4_1 WITH (publish_via_partition_root = true);
INSERT INTO tab2 VALUES (1);
INSERT INTO tab4 VALUES (-1);
--! start pub_viaroot
--! start pub_lower_level
--! check

-- insert
INSERT INTO tab1 VALUES (1), (0);
INSERT INTO tab1_1 (a) VALUES (3);
INSERT INTO tab1_2 VALUES (5);
INSERT INTO tab2 VALUES (0), (3), (5);
INSERT INTO tab3 VALUES (1), (0), (3), (5);
INSERT INTO tab4 VALUES (0);
--! expect tab4@pub_all: SELECT a FROM tab4 ORDER BY 1 => -1; 0
--! expect tab4_1@pub_lower_level: SELECT a FROM tab4_1 ORDER BY 1 => -1; 0
--! check
INSERT INTO tab4 VALUES (1);
--! check

-- update (replicated as update)
UPDATE tab1 SET a = 6 WHERE a = 5;
UPDATE tab2 SET a = 6 WHERE a = 5;
UPDATE tab3 SET a = 6 WHERE a = 5;
--! check

-- update (replicated as delete+insert)
UPDATE tab1 SET a = 2 WHERE a = 6;
UPDATE tab2 SET a = 2 WHERE a = 6;
UPDATE tab3 SET a = 2 WHERE a = 6;
--! check

-- delete
DELETE FROM tab1;
DELETE FROM tab2;
DELETE FROM tab3;
--! check

-- truncate
INSERT INTO tab1 VALUES (1), (2), (5);
INSERT INTO tab2 VALUES (1), (2), (5);
-- these will NOT be replicated
TRUNCATE tab1_2, tab2_1, tab3_1;
--! diverges tab1@pub_all: a TRUNCATE of a single partition is not sent through its root
--! diverges tab2@pub_all: a TRUNCATE of a single partition is not sent through its root
--! diverges tab2@pub_viaroot: a TRUNCATE of a single partition is not sent through its root
--! expect tab1@pub_all: SELECT a FROM tab1 ORDER BY 1 => 1; 2; 5
--! expect tab2@pub_all: SELECT a FROM tab2 ORDER BY 1 => 1; 2; 5
--! expect tab2@pub_viaroot: SELECT a FROM tab2 ORDER BY 1 => 1; 2; 5
--! check

TRUNCATE tab1, tab2, tab3;
--! converges tab1@pub_all
--! converges tab2@pub_all
--! converges tab2@pub_viaroot
--! check

-- the map from leaf partition to root rebuilt for a new column
ALTER TABLE tab2 DROP b, ADD COLUMN c text DEFAULT 'pub_tab2', ADD b text;
INSERT INTO tab2 (a, b) VALUES (1, 'xxx'), (3, 'yyy'), (5, 'zzz');
INSERT INTO tab2 (a, b, c) VALUES (6, 'aaa', 'xxx_c');
--! expect tab2: SELECT c, a, b FROM tab2 ORDER BY 1, 2 => pub_tab2|1|xxx; pub_tab2|3|yyy; pub_tab2|5|zzz; xxx_c|6|aaa
--! check
UPDATE tab2 SET b = 'quux' WHERE a = 5;
DELETE FROM tab2 WHERE a = 1;
--! check
UPDATE tab2 SET b = 'quux' WHERE a = 3;
--! check

CREATE TABLE tab5 (a int NOT NULL, b int);
CREATE UNIQUE INDEX tab5_a_idx ON tab5 (a);
ALTER TABLE tab5 REPLICA IDENTITY USING INDEX tab5_a_idx;
INSERT INTO tab5 VALUES (1, 1);
UPDATE tab5 SET a = 2 WHERE a = 1;
--! check
UPDATE tab5 SET a = 3 WHERE a = 2;
--! check
ALTER TABLE tab5 DROP COLUMN b, ADD COLUMN c INT;
ALTER TABLE tab5 ADD COLUMN b INT;
UPDATE tab5 SET c = 1 WHERE a = 3;
--! check
UPDATE tab5 SET a = 4 WHERE a = 3;
--! check
