-- postgres/postgres src/test/subscription/t/031_column_list.pl
-- commit 50e6eb731d98ab6d0e625a0b87fb327b172bbebd
--
-- Publication column lists: the records carry only the listed columns, from the initial
-- snapshot as from the stream (inserts, updates of listed and unlisted columns, old rows of
-- key changes), through a partition root or per partition, with weird column names, an
-- enum, a dropped and a generated column, and primary keys moved to other columns while
-- streaming. The TAP re-creates its subscription for each part, often over two
-- publications at once (PostgreSQL then combines their column lists, or refuses different
-- ones); here each publication has a bridge, started where the subscription that follows
-- it is created and stopped where that subscription is dropped. tab2, added to pub1 with
-- rows, is copied by the TAP's REFRESH PUBLICATION: an incremental snapshot here. The
-- TAP's peek at its own slot (test_slot) is the bridge pub_check_oldtuple's stream here.
--! bridge pub1 later
--! bridge pub2 later
--! bridge pub3 later
--! bridge pub4 later
--! bridge pub5 later
--! bridge pub6 later
--! bridge pub7 later
--! bridge pub8 later
--! bridge pub8_again publication=pub8 later
--! bridge pub9 later
--! bridge pub_mix_3 later
--! bridge pub_mix_4 later
--! bridge pub_mix_5 later
--! bridge pub_mix_6 later
--! bridge pub_test_root later
--! bridge pub_test_root_1 later
--! bridge pub1_s1 publication=pub1 later
--! bridge pub2_t_1 publication=pub2 later
--! bridge pub3_t publication=pub3 later
--! bridge pub4_t publication=pub4 later
--! bridge pub_check_oldtuple later
--! bridge pub_mix_7 later
--! bridge pub_mix_8 later
--! bridge pub_mix_1 later

CREATE TABLE tab1 (a int PRIMARY KEY, "B" int, c int);
CREATE TABLE tab2 (a int PRIMARY KEY, b varchar, c int);
CREATE TABLE tab3 ("a'" int PRIMARY KEY, "B" varchar, "c'" int);
CREATE TABLE test_part (a int PRIMARY KEY, b text, c timestamptz) PARTITION BY LIST (a);
CREATE TABLE test_part_1_1 PARTITION OF test_part FOR VALUES IN (1,2,3,4,5,6);
CREATE TABLE test_part_2_1 PARTITION OF test_part FOR VALUES IN (7,8,9,10,11,12) PARTITION BY LIST (a);
CREATE TABLE test_part_2_2 PARTITION OF test_part_2_1 FOR VALUES IN (7,8,9,10);
CREATE TYPE test_typ AS ENUM ('blue', 'red');
CREATE TABLE tab4 (a INT PRIMARY KEY, b test_typ, c int, d text);
CREATE PUBLICATION pub1
   FOR TABLE tab1 (a, "B"), tab3 ("a'", "c'"), test_part (a, b), tab4 (a, b, d)
  WITH (publish_via_partition_root = 'true');
INSERT INTO tab1 VALUES (1, 2, 3);
INSERT INTO tab1 VALUES (4, 5, 6);
INSERT INTO tab3 VALUES (1, 2, 3);
INSERT INTO tab3 VALUES (4, 5, 6);
INSERT INTO tab4 VALUES (1, 'red', 3, 'oh my');
INSERT INTO tab4 VALUES (2, 'blue', 4, 'hello');
INSERT INTO test_part VALUES (1, 'abc', '2021-07-04 12:00:00');
INSERT INTO test_part VALUES (2, 'bcd', '2021-07-03 11:12:13');
INSERT INTO test_part VALUES (7, 'abc', '2021-07-04 12:00:00');
INSERT INTO test_part VALUES (8, 'bcd', '2021-07-03 11:12:13');
--! start
--! start pub1
--! expect tab1: SELECT * FROM tab1 ORDER BY a => 1|2; 4|5
--! expect tab3: SELECT * FROM tab3 ORDER BY "a'" => 1|3; 4|6
--! expect tab4: SELECT * FROM tab4 ORDER BY a => 1|red|oh my; 2|blue|hello
--! expect test_part: SELECT * FROM test_part ORDER BY a => 1|abc; 2|bcd; 7|abc; 8|bcd
--! check

INSERT INTO tab1 VALUES (2, 3, 4);
INSERT INTO tab1 VALUES (5, 6, 7);
INSERT INTO tab3 VALUES (2, 3, 4);
INSERT INTO tab3 VALUES (5, 6, 7);
INSERT INTO tab4 VALUES (3, 'red', 5, 'foo');
INSERT INTO tab4 VALUES (4, 'blue', 6, 'bar');
INSERT INTO test_part VALUES (3, 'xxx', '2022-02-01 10:00:00');
INSERT INTO test_part VALUES (4, 'yyy', '2022-03-02 15:12:13');
INSERT INTO test_part VALUES (9, 'zzz', '2022-04-03 21:00:00');
INSERT INTO test_part VALUES (10, 'qqq', '2022-05-04 22:12:13');
--! check

UPDATE tab1 SET "B" = 2 * "B" where a = 1;
UPDATE tab1 SET c = 2*c where a = 4;
UPDATE tab3 SET "B" = "B" || ' updated' where "a'" = 4;
UPDATE tab3 SET "c'" = 2 * "c'" where "a'" = 1;
UPDATE tab4 SET b = 'blue', c = c * 2, d = d || ' updated' where a = 1;
UPDATE tab4 SET b = 'red', c = c * 2, d = d || ' updated' where a = 2;
--! expect tab1: SELECT * FROM tab1 ORDER BY a => 1|4; 2|3; 4|5; 5|6
--! expect tab3: SELECT * FROM tab3 ORDER BY "a'" => 1|6; 2|4; 4|6; 5|7
--! expect tab4: SELECT * FROM tab4 ORDER BY a => 1|blue|oh my updated; 2|red|hello updated; 3|red|foo; 4|blue|bar
--! check

INSERT INTO tab2 VALUES (1, 'abc', 3);
ALTER PUBLICATION pub1 ADD TABLE tab2 (a, b);
--! resync pub1 tab2
INSERT INTO tab2 VALUES (2, 'def', 6);
--! expect tab2: SELECT * FROM tab2 ORDER BY a => 1|abc; 2|def
--! check
UPDATE tab2 SET c = 5 where a = 1;
UPDATE tab2 SET b = 'xyz' where a = 2;
--! expect tab2: SELECT * FROM tab2 ORDER BY a => 1|abc; 2|xyz
--! check

CREATE TABLE tab5 (a int PRIMARY KEY, b int, c int, d int);
CREATE PUBLICATION pub2 FOR TABLE tab5 (a, b);
CREATE PUBLICATION pub3 FOR TABLE tab5 (a, b);
INSERT INTO tab5 VALUES (1, 11, 111, 1111);
INSERT INTO tab5 VALUES (2, 22, 222, 2222);
--! stop pub1
--! start pub2
--! start pub3
--! check
INSERT INTO tab5 VALUES (3, 33, 333, 3333);
INSERT INTO tab5 VALUES (4, 44, 444, 4444);
--! expect tab5: SELECT * FROM tab5 ORDER BY a => 1|11; 2|22; 3|33; 4|44
--! check

CREATE TABLE tab6 (a int PRIMARY KEY, b int, c int, d int);
CREATE PUBLICATION pub4 FOR TABLE tab6 (a, b);
INSERT INTO tab6 VALUES (1, 22, 333, 4444);
--! stop pub2
--! stop pub3
--! start pub4
--! check
INSERT INTO tab6 VALUES (2, 33, 444, 5555);
UPDATE tab6 SET b = b * 2, c = c * 3, d = d * 4;
--! expect tab6: SELECT * FROM tab6 ORDER BY a => 1|44; 2|66
--! check
-- A primary key on another column is a key schema the registry refuses under BACKWARD:
-- pub4's bridge registers it under the key subject's next generation (the default).
ALTER TABLE tab6 DROP CONSTRAINT tab6_pkey;
ALTER TABLE tab6 ADD PRIMARY KEY (b);
INSERT INTO tab6 VALUES (3, 55, 666, 8888);
UPDATE tab6 SET b = b * 2, c = c * 3, d = d * 4;
--! expect tab6: SELECT * FROM tab6 ORDER BY a => 1|88; 2|132; 3|110
--! check

CREATE TABLE tab7 (a int PRIMARY KEY, b int, c int, d int);
CREATE PUBLICATION pub5 FOR TABLE tab7 (a, b);
INSERT INTO tab7 VALUES (1, 22, 333, 4444);
--! stop pub4
--! start pub5
--! check
INSERT INTO tab7 VALUES (2, 33, 444, 5555);
UPDATE tab7 SET b = b * 2, c = c * 3, d = d * 4;
--! check
-- A primary key of more columns is again a key schema the registry refuses (a key field
-- without a default): pub5's bridge too registers under the key subject's next generation.
ALTER TABLE tab7 DROP CONSTRAINT tab7_pkey;
ALTER TABLE tab7 ADD PRIMARY KEY (a, b);
INSERT INTO tab7 VALUES (3, 55, 666, 7777);
UPDATE tab7 SET b = b * 2, c = c * 3, d = d * 4;
--! expect tab7: SELECT * FROM tab7 ORDER BY a => 1|88; 2|132; 3|110
--! check
ALTER TABLE tab7 DROP CONSTRAINT tab7_pkey;
INSERT INTO tab7 VALUES (4, 77, 888, 9999);
ALTER TABLE tab7 ADD PRIMARY KEY (b, a);
UPDATE tab7 SET b = b * 2, c = c * 3, d = d * 4;
DELETE FROM tab7 WHERE a = 1;
--! expect tab7: SELECT * FROM tab7 ORDER BY a => 2|264; 3|220; 4|154
--! check

CREATE TABLE test_part_a (a int, b int, c int) PARTITION BY LIST (a);
CREATE TABLE test_part_a_1 PARTITION OF test_part_a FOR VALUES IN (1,2,3,4,5);
ALTER TABLE test_part_a_1 ADD PRIMARY KEY (a);
ALTER TABLE test_part_a_1 REPLICA IDENTITY USING INDEX test_part_a_1_pkey;
CREATE TABLE test_part_a_2 PARTITION OF test_part_a FOR VALUES IN (6,7,8,9,10);
ALTER TABLE test_part_a_2 ADD PRIMARY KEY (b);
ALTER TABLE test_part_a_2 REPLICA IDENTITY USING INDEX test_part_a_2_pkey;
INSERT INTO test_part_a VALUES (1, 3);
INSERT INTO test_part_a VALUES (6, 4);
CREATE PUBLICATION pub6 FOR TABLE test_part_a (b, a) WITH (publish_via_partition_root = true);
ALTER PUBLICATION pub6 ADD TABLE test_part_a_1 (a);
ALTER PUBLICATION pub6 ADD TABLE test_part_a_2 (b);
--! stop pub5
--! start pub6
--! check
INSERT INTO test_part_a VALUES (2, 5);
INSERT INTO test_part_a VALUES (7, 6);
--! expect test_part_a: SELECT a, b FROM test_part_a ORDER BY a, b => 1|3; 2|5; 6|4; 7|6
--! check

CREATE TABLE test_part_b (a int, b int) PARTITION BY LIST (a);
CREATE TABLE test_part_b_1 PARTITION OF test_part_b FOR VALUES IN (1,2,3,4,5);
ALTER TABLE test_part_b_1 ADD PRIMARY KEY (a);
ALTER TABLE test_part_b_1 REPLICA IDENTITY USING INDEX test_part_b_1_pkey;
CREATE TABLE test_part_b_2 PARTITION OF test_part_b FOR VALUES IN (6,7,8,9,10);
ALTER TABLE test_part_b_2 ADD PRIMARY KEY (b);
ALTER TABLE test_part_b_2 REPLICA IDENTITY USING INDEX test_part_b_2_pkey;
INSERT INTO test_part_b VALUES (1, 1);
INSERT INTO test_part_b VALUES (6, 2);
CREATE PUBLICATION pub7 FOR TABLE test_part_b (a, b) WITH (publish_via_partition_root = true);
--! stop pub6
--! start pub7
--! check
INSERT INTO test_part_b VALUES (2, 3);
INSERT INTO test_part_b VALUES (7, 4);
--! expect test_part_b: SELECT * FROM test_part_b ORDER BY a, b => 1|1; 2|3; 6|2; 7|4
--! check

CREATE TABLE test_part_c (a int, b int, c int) PARTITION BY LIST (a);
CREATE TABLE test_part_c_1 PARTITION OF test_part_c FOR VALUES IN (1,3);
ALTER TABLE test_part_c_1 ADD PRIMARY KEY (a);
ALTER TABLE test_part_c_1 REPLICA IDENTITY USING INDEX test_part_c_1_pkey;
CREATE TABLE test_part_c_2 PARTITION OF test_part_c FOR VALUES IN (2,4);
ALTER TABLE test_part_c_2 ADD PRIMARY KEY (b);
ALTER TABLE test_part_c_2 REPLICA IDENTITY USING INDEX test_part_c_2_pkey;
INSERT INTO test_part_c VALUES (1, 3, 5);
INSERT INTO test_part_c VALUES (2, 4, 6);
CREATE PUBLICATION pub8 FOR TABLE test_part_c WITH (publish_via_partition_root = false);
ALTER PUBLICATION pub8 ADD TABLE test_part_c_1 (a,c);
ALTER PUBLICATION pub8 ADD TABLE test_part_c_2 (a,b);
--! stop pub7
--! start pub8
--! check
INSERT INTO test_part_c VALUES (3, 7, 8);
INSERT INTO test_part_c VALUES (4, 9, 10);
--! expect test_part_c_1: SELECT * FROM test_part_c_1 ORDER BY a => 1|5; 3|8
--! expect test_part_c_2: SELECT * FROM test_part_c_2 ORDER BY a => 2|4; 4|9
--! check
--! stop pub8
DROP PUBLICATION pub8;
CREATE PUBLICATION pub8 FOR TABLE test_part_c WITH (publish_via_partition_root = false);
ALTER PUBLICATION pub8 ADD TABLE test_part_c_1 (a);
ALTER PUBLICATION pub8 ADD TABLE test_part_c_2 (a,b);
--! start pub8_again
--! check
TRUNCATE test_part_c;
INSERT INTO test_part_c VALUES (1, 3, 5);
INSERT INTO test_part_c VALUES (2, 4, 6);
--! check

CREATE TABLE test_part_d (a int, b int) PARTITION BY LIST (a);
CREATE TABLE test_part_d_1 PARTITION OF test_part_d FOR VALUES IN (1,3);
ALTER TABLE test_part_d_1 ADD PRIMARY KEY (a);
ALTER TABLE test_part_d_1 REPLICA IDENTITY USING INDEX test_part_d_1_pkey;
INSERT INTO test_part_d VALUES (1, 2);
CREATE PUBLICATION pub9 FOR TABLE test_part_d (a) WITH (publish_via_partition_root = true);
--! stop pub8_again
--! start pub9
--! check
INSERT INTO test_part_d VALUES (3, 4);
--! expect test_part_d: SELECT * FROM test_part_d ORDER BY a => 1; 3
--! check
--! stop pub9

DROP TABLE tab1, tab2, tab3, tab4, tab5, tab6, tab7,
		   test_part, test_part_a, test_part_b, test_part_c, test_part_d;
CREATE TABLE test_mix_2 (a int PRIMARY KEY, b int, c int);
CREATE PUBLICATION pub_mix_3 FOR TABLE test_mix_2 (a, b, c);
CREATE PUBLICATION pub_mix_4 FOR ALL TABLES;
INSERT INTO test_mix_2 VALUES (1, 2, 3);
--! start pub_mix_3
--! start pub_mix_4
--! check
INSERT INTO test_mix_2 VALUES (4, 5, 6);
--! expect test_mix_2: SELECT * FROM test_mix_2 ORDER BY a => 1|2|3; 4|5|6
--! check
--! stop pub_mix_3
--! stop pub_mix_4

DROP TABLE test_mix_2;
CREATE TABLE test_mix_3 (a int PRIMARY KEY, b int, c int);
CREATE PUBLICATION pub_mix_5 FOR TABLE test_mix_3 (a, b, c);
CREATE PUBLICATION pub_mix_6 FOR TABLES IN SCHEMA public;
INSERT INTO test_mix_3 VALUES (1, 2, 3);
--! start pub_mix_5
--! start pub_mix_6
--! check
INSERT INTO test_mix_3 VALUES (4, 5, 6);
--! expect test_mix_3: SELECT * FROM test_mix_3 ORDER BY a => 1|2|3; 4|5|6
--! check
--! stop pub_mix_5
--! stop pub_mix_6

CREATE TABLE test_root (a int PRIMARY KEY, b int, c int) PARTITION BY RANGE (a);
CREATE TABLE test_root_1 PARTITION OF test_root FOR VALUES FROM (1) TO (10);
CREATE TABLE test_root_2 PARTITION OF test_root FOR VALUES FROM (10) TO (20);
CREATE PUBLICATION pub_test_root FOR TABLE test_root (a) WITH (publish_via_partition_root = true);
CREATE PUBLICATION pub_test_root_1 FOR TABLE test_root_1 (a, b);
INSERT INTO test_root VALUES (1, 2, 3);
INSERT INTO test_root VALUES (10, 20, 30);
--! start pub_test_root
--! start pub_test_root_1
--! check
INSERT INTO test_root VALUES (2, 3, 4);
INSERT INTO test_root VALUES (11, 21, 31);
--! expect test_root: SELECT * FROM test_root ORDER BY a => 1; 2; 10; 11
--! check
--! stop pub_test_root
--! stop pub_test_root_1

DROP PUBLICATION pub1, pub2, pub3, pub4, pub5, pub6, pub7, pub8;
CREATE SCHEMA s1;
CREATE TABLE s1.t (a int, b int, c int) PARTITION BY RANGE (a);
CREATE TABLE t_1 PARTITION OF s1.t FOR VALUES FROM (1) TO (10);
CREATE PUBLICATION pub1 FOR TABLES IN SCHEMA s1;
CREATE PUBLICATION pub2 FOR TABLE t_1(a, b, c);
INSERT INTO s1.t VALUES (1, 2, 3);
--! start pub1_s1
--! start pub2_t_1
--! check
INSERT INTO s1.t VALUES (4, 5, 6);
--! check
INSERT INTO s1.t VALUES (7, 8, 9);
--! check
--! stop pub1_s1
--! stop pub2_t_1

DROP SCHEMA s1 CASCADE;
CREATE TABLE t (a int, b int, c int) PARTITION BY RANGE (a);
CREATE TABLE t_1 PARTITION OF t FOR VALUES FROM (1) TO (10)
	   PARTITION BY RANGE (a);
CREATE TABLE t_2 PARTITION OF t_1 FOR VALUES FROM (1) TO (10);
CREATE PUBLICATION pub3 FOR TABLE t_1 (a), t_2
  WITH (PUBLISH_VIA_PARTITION_ROOT);
INSERT INTO t VALUES (1, 2, 3);
--! start pub3_t
--! check
INSERT INTO t VALUES (4, 5, 6);
--! expect t_1: SELECT * FROM t_1 ORDER BY a => 1; 4
--! check
--! stop pub3_t

DROP TABLE t;
CREATE TABLE t (a int, b int, c int) PARTITION BY RANGE (a);
CREATE TABLE t_1 PARTITION OF t FOR VALUES FROM (1) TO (10)
	   PARTITION BY RANGE (a);
CREATE TABLE t_2 PARTITION OF t_1 FOR VALUES FROM (1) TO (10);
CREATE PUBLICATION pub4 FOR TABLE t_1 (a), t_2 (b)
  WITH (PUBLISH_VIA_PARTITION_ROOT);
INSERT INTO t VALUES (1, 2, 3);
--! start pub4_t
--! check
INSERT INTO t VALUES (4, 5, 6);
--! expect t_1: SELECT * FROM t_1 ORDER BY a => 1; 4
--! check
--! stop pub4_t

CREATE TABLE test_oldtuple_col (a int PRIMARY KEY, b int, c int);
CREATE PUBLICATION pub_check_oldtuple FOR TABLE test_oldtuple_col (a, b);
INSERT INTO test_oldtuple_col VALUES(1, 2, 3);
--! start pub_check_oldtuple
UPDATE test_oldtuple_col SET a = 2;
--! check
DELETE FROM test_oldtuple_col;
--! check
--! stop pub_check_oldtuple

CREATE TABLE test_mix_4 (a int PRIMARY KEY, b int, c int, d int GENERATED ALWAYS AS (a + 1) STORED);
ALTER TABLE test_mix_4 DROP COLUMN c;
CREATE PUBLICATION pub_mix_7 FOR TABLE test_mix_4 (a, b);
CREATE PUBLICATION pub_mix_8 FOR TABLE test_mix_4;
INSERT INTO test_mix_4 VALUES (1, 2);
--! start pub_mix_7
--! start pub_mix_8
--! check
INSERT INTO test_mix_4 VALUES (3, 4);
--! check
--! stop pub_mix_7
--! stop pub_mix_8

CREATE TABLE test_mix_1 (a int PRIMARY KEY, b int, c int);
CREATE PUBLICATION pub_mix_1 FOR TABLE test_mix_1 (a, b);
CREATE PUBLICATION pub_mix_2 FOR TABLE test_mix_1 (a, c);
ALTER PUBLICATION pub_mix_1 SET TABLE test_mix_1 (a, c);
--! start pub_mix_1
--! check
ALTER PUBLICATION pub_mix_1 SET TABLE test_mix_1 (a, b);
INSERT INTO test_mix_1 VALUES(1, 1, 1);
--! check
