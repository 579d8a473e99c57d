-- postgres/postgres src/test/subscription/t/028_row_filter.pl
-- commit 50e6eb731d98ab6d0e625a0b87fb327b172bbebd
--
-- Publication row filters. The TAP's subscriptions follow several publications at once,
-- whose filters PostgreSQL ORs together (and a publication without a filter, FOR ALL
-- TABLES or FOR TABLES IN SCHEMA, unfilters); a bridge follows one publication, so each
-- publication has a bridge here and every topic is compared with its table's rows that
-- match that publication's filter: the initial snapshot applies the filter as the stream
-- does, an UPDATE whose old row matches and new row does not is a delete, the reverse an
-- insert, an unchanged TOASTed column is evaluated, and a partition is filtered by its own
-- filter or, through its root, by the root's. tap_pub_3 switches to
-- publish_via_partition_root mid-stream: the TAP's subscriber copies the root again
-- (REFRESH PUBLICATION with copy_data), here an incremental snapshot of the root does.
--! bridge tap_pub_x_forall publication=tap_pub_x later
--! bridge tap_pub_forall later
--! bridge tap_pub_x_schema publication=tap_pub_x later
--! bridge tap_pub_allinschema later
--! bridge tap_pub_1 later
--! bridge tap_pub_2 later
--! bridge tap_pub_3 later
--! bridge tap_pub_4a later
--! bridge tap_pub_4b later
--! bridge tap_pub_5a later
--! bridge tap_pub_5b later
--! bridge tap_pub_toast later
--! bridge tap_pub_inherits later
--! bridge tap_pub_viaroot_1 later
--! bridge tap_pub_viaroot_2 later
--! bridge tap_pub_parent_sync later
--! bridge tap_pub_child_sync later

-- FOR ALL TABLES
CREATE TABLE tab_rf_x (x int primary key);
INSERT INTO tab_rf_x (x) VALUES (0), (5), (10), (15), (20);
CREATE PUBLICATION tap_pub_x FOR TABLE tab_rf_x WHERE (x > 10);
CREATE PUBLICATION tap_pub_forall FOR ALL TABLES;
--! start
--! start tap_pub_x_forall
--! start tap_pub_forall
--! expect tab_rf_x@tap_pub_forall: SELECT count(x) FROM tab_rf_x => 5
--! expect tab_rf_x@tap_pub_x_forall: SELECT count(x) FROM tab_rf_x => 2
--! check
INSERT INTO tab_rf_x (x) VALUES (-99), (99);
--! expect tab_rf_x@tap_pub_forall: SELECT count(x) FROM tab_rf_x => 7
--! check
--! stop tap_pub_forall
--! stop tap_pub_x_forall
DROP PUBLICATION tap_pub_forall;
DROP PUBLICATION tap_pub_x;
DROP TABLE tab_rf_x;

-- TABLES IN SCHEMA
CREATE SCHEMA schema_rf_x;
CREATE TABLE schema_rf_x.tab_rf_x (x int primary key);
CREATE TABLE schema_rf_x.tab_rf_partitioned (x int primary key) PARTITION BY RANGE(x);
CREATE TABLE public.tab_rf_partition (LIKE schema_rf_x.tab_rf_partitioned);
ALTER TABLE schema_rf_x.tab_rf_partitioned ATTACH PARTITION public.tab_rf_partition DEFAULT;
INSERT INTO schema_rf_x.tab_rf_x (x) VALUES (0), (5), (10), (15), (20);
INSERT INTO schema_rf_x.tab_rf_partitioned (x) VALUES (1), (20);
CREATE PUBLICATION tap_pub_x FOR TABLE schema_rf_x.tab_rf_x WHERE (x > 10);
CREATE PUBLICATION tap_pub_allinschema FOR TABLES IN SCHEMA schema_rf_x, TABLE schema_rf_x.tab_rf_x WHERE (x > 10);
ALTER PUBLICATION tap_pub_allinschema ADD TABLE public.tab_rf_partition WHERE (x > 10);
--! start tap_pub_x_schema
--! start tap_pub_allinschema
--! check
INSERT INTO schema_rf_x.tab_rf_x (x) VALUES (-99), (99);
INSERT INTO schema_rf_x.tab_rf_partitioned (x) VALUES (5), (25);
--! expect tab_rf_x@tap_pub_allinschema: SELECT count(x) FROM tab_rf_x => 7
-- (the TAP's query names public.tab_rf_partition; the rebuilt rows are a temporary table)
--! expect tab_rf_partition@tap_pub_allinschema: SELECT * FROM tab_rf_partition ORDER BY 1 => 20; 25
--! check
--! stop tap_pub_allinschema
--! stop tap_pub_x_schema
DROP PUBLICATION tap_pub_allinschema;
DROP PUBLICATION tap_pub_x;
DROP TABLE public.tab_rf_partition;
DROP TABLE schema_rf_x.tab_rf_partitioned;
DROP TABLE schema_rf_x.tab_rf_x;
DROP SCHEMA schema_rf_x;

-- FOR TABLE with row filter publications
CREATE TABLE tab_rowfilter_1 (a int primary key, b text);
ALTER TABLE tab_rowfilter_1 REPLICA IDENTITY FULL;
CREATE TABLE tab_rowfilter_2 (c int primary key);
CREATE TABLE tab_rowfilter_3 (a int primary key, b boolean);
CREATE TABLE tab_rowfilter_4 (c int primary key);
CREATE TABLE tab_rowfilter_partitioned (a int primary key, b integer) PARTITION BY RANGE(a);
CREATE TABLE tab_rowfilter_less_10k (LIKE tab_rowfilter_partitioned);
ALTER TABLE tab_rowfilter_partitioned ATTACH PARTITION tab_rowfilter_less_10k FOR VALUES FROM (MINVALUE) TO (10000);
CREATE TABLE tab_rowfilter_greater_10k (LIKE tab_rowfilter_partitioned);
ALTER TABLE tab_rowfilter_partitioned ATTACH PARTITION tab_rowfilter_greater_10k FOR VALUES FROM (10000) TO (MAXVALUE);
CREATE TABLE tab_rowfilter_partitioned_2 (a int primary key, b integer) PARTITION BY RANGE(a);
CREATE TABLE tab_rowfilter_partition (LIKE tab_rowfilter_partitioned_2);
ALTER TABLE tab_rowfilter_partitioned_2 ATTACH PARTITION tab_rowfilter_partition DEFAULT;
CREATE TABLE tab_rowfilter_toast (a text NOT NULL, b text NOT NULL);
ALTER TABLE tab_rowfilter_toast ALTER COLUMN a SET STORAGE EXTERNAL;
CREATE UNIQUE INDEX tab_rowfilter_toast_ri_index on tab_rowfilter_toast (a, b);
ALTER TABLE tab_rowfilter_toast REPLICA IDENTITY USING INDEX tab_rowfilter_toast_ri_index;
CREATE TABLE tab_rowfilter_inherited (a int);
CREATE TABLE tab_rowfilter_child (b text) INHERITS (tab_rowfilter_inherited);
CREATE TABLE tab_rowfilter_viaroot_part (a int) PARTITION BY RANGE (a);
CREATE TABLE tab_rowfilter_viaroot_part_1 PARTITION OF tab_rowfilter_viaroot_part FOR VALUES FROM (1) TO (20);
CREATE TABLE tab_rowfilter_parent_sync (a int) PARTITION BY RANGE (a);
CREATE TABLE tab_rowfilter_child_sync PARTITION OF tab_rowfilter_parent_sync FOR VALUES FROM (1) TO (20);

CREATE PUBLICATION tap_pub_1 FOR TABLE tab_rowfilter_1 WHERE (a > 1000 AND b <> 'filtered');
ALTER PUBLICATION tap_pub_1 ADD TABLE tab_rowfilter_2 WHERE (c % 7 = 0);
ALTER PUBLICATION tap_pub_1 SET TABLE tab_rowfilter_1 WHERE (a > 1000 AND b <> 'filtered'), tab_rowfilter_2 WHERE (c % 2 = 0), tab_rowfilter_3;
CREATE PUBLICATION tap_pub_2 FOR TABLE tab_rowfilter_2 WHERE (c % 3 = 0);
CREATE PUBLICATION tap_pub_3 FOR TABLE tab_rowfilter_partitioned;
ALTER PUBLICATION tap_pub_3 ADD TABLE tab_rowfilter_less_10k WHERE (a < 6000);
CREATE PUBLICATION tap_pub_not_used FOR TABLE tab_rowfilter_1 WHERE (a < 0);
CREATE PUBLICATION tap_pub_4a FOR TABLE tab_rowfilter_4 WHERE (c % 2 = 0);
CREATE PUBLICATION tap_pub_4b FOR TABLE tab_rowfilter_4;
CREATE PUBLICATION tap_pub_5a FOR TABLE tab_rowfilter_partitioned_2;
CREATE PUBLICATION tap_pub_5b FOR TABLE tab_rowfilter_partition WHERE (a > 10);
CREATE PUBLICATION tap_pub_toast FOR TABLE tab_rowfilter_toast WHERE (a = repeat('1234567890', 200) AND b < '10');
CREATE PUBLICATION tap_pub_inherits FOR TABLE tab_rowfilter_inherited WHERE (a > 15);
CREATE PUBLICATION tap_pub_viaroot_1 FOR TABLE tab_rowfilter_viaroot_part WHERE (a > 15) WITH (publish_via_partition_root);
CREATE PUBLICATION tap_pub_viaroot_2 FOR TABLE tab_rowfilter_viaroot_part_1 WHERE (a < 15) WITH (publish_via_partition_root);
CREATE PUBLICATION tap_pub_parent_sync FOR TABLE tab_rowfilter_parent_sync WHERE (a > 15) WITH (publish_via_partition_root);
CREATE PUBLICATION tap_pub_child_sync FOR TABLE tab_rowfilter_child_sync WHERE (a < 15);

INSERT INTO tab_rowfilter_1 (a, b) VALUES (1, 'not replicated');
INSERT INTO tab_rowfilter_1 (a, b) VALUES (1500, 'filtered');
INSERT INTO tab_rowfilter_1 (a, b) VALUES (1980, 'not filtered');
INSERT INTO tab_rowfilter_1 (a, b) SELECT x, 'test ' || x FROM generate_series(990,1002) x;
INSERT INTO tab_rowfilter_2 (c) SELECT generate_series(1, 20);
INSERT INTO tab_rowfilter_3 (a, b) SELECT x, (x % 3 = 0) FROM generate_series(1, 10) x;
INSERT INTO tab_rowfilter_4 (c) SELECT generate_series(1, 10);
INSERT INTO tab_rowfilter_parent_sync(a) VALUES(14), (16);
INSERT INTO tab_rowfilter_partitioned (a, b) VALUES(1, 100),(7000, 101),(15000, 102),(5500, 300);
INSERT INTO tab_rowfilter_less_10k (a, b) VALUES(2, 200),(6005, 201);
INSERT INTO tab_rowfilter_greater_10k (a, b) VALUES(16000, 103);
INSERT INTO tab_rowfilter_partitioned_2 (a, b) VALUES(1, 1),(20, 20);
INSERT INTO tab_rowfilter_toast(a, b) VALUES(repeat('1234567890', 200), '1234567890');
INSERT INTO tab_rowfilter_inherited(a) VALUES(10),(20);
INSERT INTO tab_rowfilter_child(a, b) VALUES(0,'0'),(30,'30'),(40,'40');
--! start tap_pub_1
--! start tap_pub_2
--! start tap_pub_3
--! start tap_pub_4a
--! start tap_pub_4b
--! start tap_pub_5a
--! start tap_pub_5b
--! start tap_pub_toast
--! start tap_pub_inherits
--! start tap_pub_viaroot_1
--! start tap_pub_viaroot_2
--! start tap_pub_parent_sync
--! start tap_pub_child_sync
--! expect tab_rowfilter_1@tap_pub_1: SELECT a, b FROM tab_rowfilter_1 ORDER BY 1, 2 => 1001|test 1001; 1002|test 1002; 1980|not filtered
--! expect tab_rowfilter_3@tap_pub_1: SELECT count(a) FROM tab_rowfilter_3 => 10
--! expect tab_rowfilter_toast@tap_pub_toast: SELECT count(*) FROM tab_rowfilter_toast => 0
--! expect tab_rowfilter_inherited@tap_pub_inherits: SELECT a FROM tab_rowfilter_inherited ORDER BY a => 20
--! expect tab_rowfilter_parent_sync@tap_pub_parent_sync: SELECT a FROM tab_rowfilter_parent_sync ORDER BY 1 => 16
--! check

INSERT INTO tab_rowfilter_1 (a, b) VALUES (800, 'test 800');
INSERT INTO tab_rowfilter_1 (a, b) VALUES (1600, 'test 1600');
INSERT INTO tab_rowfilter_1 (a, b) VALUES (1601, 'test 1601');
INSERT INTO tab_rowfilter_1 (a, b) VALUES (1602, 'filtered');
INSERT INTO tab_rowfilter_1 (a, b) VALUES (1700, 'test 1700');
UPDATE tab_rowfilter_1 SET b = NULL WHERE a = 1600;
UPDATE tab_rowfilter_1 SET b = 'test 1601 updated' WHERE a = 1601;
UPDATE tab_rowfilter_1 SET b = 'test 1602 updated' WHERE a = 1602;
DELETE FROM tab_rowfilter_1 WHERE a = 1700;
INSERT INTO tab_rowfilter_2 (c) VALUES (21), (22), (23), (24), (25);
INSERT INTO tab_rowfilter_4 (c) VALUES (0), (11), (12);
INSERT INTO tab_rowfilter_inherited (a) VALUES (14), (16);
INSERT INTO tab_rowfilter_child (a, b) VALUES (13, '13'), (17, '17');
INSERT INTO tab_rowfilter_viaroot_part (a) VALUES (14), (15), (16);
--! expect tab_rowfilter_1@tap_pub_1: SELECT a, b FROM tab_rowfilter_1 ORDER BY 1, 2 => 1001|test 1001; 1002|test 1002; 1601|test 1601 updated; 1602|test 1602 updated; 1980|not filtered
--! expect tab_rowfilter_4@tap_pub_4b: SELECT count(c), min(c), max(c) FROM tab_rowfilter_4 => 13|0|12
--! check

ALTER PUBLICATION tap_pub_3 SET (publish_via_partition_root = true);
ALTER PUBLICATION tap_pub_3 SET TABLE tab_rowfilter_partitioned WHERE (a < 5000), tab_rowfilter_less_10k WHERE (a < 6000);
--! resync tap_pub_3 tab_rowfilter_partitioned
INSERT INTO tab_rowfilter_partitioned (a, b) VALUES(4000, 400),(4001, 401),(4002, 402);
INSERT INTO tab_rowfilter_less_10k (a, b) VALUES(4500, 450);
INSERT INTO tab_rowfilter_less_10k (a, b) VALUES(5600, 123);
INSERT INTO tab_rowfilter_greater_10k (a, b) VALUES(14000, 1950);
UPDATE tab_rowfilter_less_10k SET b = 30 WHERE a = 4001;
DELETE FROM tab_rowfilter_less_10k WHERE a = 4002;
--! expect tab_rowfilter_partitioned@tap_pub_3: SELECT a, b FROM tab_rowfilter_partitioned ORDER BY 1, 2 => 1|100; 2|200; 4000|400; 4001|30; 4500|450
--! expect tab_rowfilter_inherited@tap_pub_inherits: SELECT a FROM tab_rowfilter_inherited ORDER BY a => 16; 20
--! check

UPDATE tab_rowfilter_toast SET b = '1';
--! expect tab_rowfilter_toast@tap_pub_toast: SELECT a = repeat('1234567890', 200), b FROM tab_rowfilter_toast => t|1
--! expect tab_rowfilter_viaroot_part@tap_pub_viaroot_1: SELECT a FROM tab_rowfilter_viaroot_part => 16
--! check
