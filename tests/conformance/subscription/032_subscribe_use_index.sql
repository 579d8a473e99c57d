-- postgres/postgres src/test/subscription/t/032_subscribe_use_index.pl
-- commit 50e6eb731d98ab6d0e625a0b87fb327b172bbebd
--
-- Which index the subscriber finds rows with is the subscriber's; the publisher's side is
-- REPLICA IDENTITY FULL tables without a key, with duplicate rows, NULLs and a partitioned
-- table whose updates move rows between partitions: each topic a multiset of rows, every
-- update and delete carrying the whole old row. Each testcase has its publication (the
-- same name, created and dropped again) and its bridge.
--! bridge case1 publication=tap_pub_rep_full later
--! bridge case2 publication=tap_pub_rep_full later
--! bridge case3 publication=tap_pub_rep_full later
--! bridge case4 publication=tap_pub_rep_full later
--! bridge case5 publication=tap_pub_rep_full later
--! bridge case6 publication=tap_pub_rep_full later
--! bridge case7 publication=tap_pub_rep_full later
--! start

CREATE TABLE test_replica_id_full (x int, y text);
ALTER TABLE test_replica_id_full REPLICA IDENTITY FULL;
INSERT INTO test_replica_id_full SELECT (i%10), (i%10)::text FROM generate_series(0,10) i;
CREATE PUBLICATION tap_pub_rep_full FOR TABLE test_replica_id_full;
--! start case1
--! check
DELETE FROM test_replica_id_full WHERE x IN (5, 6);
UPDATE test_replica_id_full SET x = 100, y = '200' WHERE x IN (1, 2);
--! expect test_replica_id_full: SELECT count(*) FROM test_replica_id_full WHERE (x = 100 and y = '200') => 2
--! check
--! stop case1
DROP PUBLICATION tap_pub_rep_full;
DROP TABLE test_replica_id_full;

CREATE TABLE users_table_part(user_id bigint, value_1 int, value_2 int) PARTITION BY RANGE (value_1);
CREATE TABLE users_table_part_0 PARTITION OF users_table_part FOR VALUES FROM (0) TO (10);
CREATE TABLE users_table_part_1 PARTITION OF users_table_part FOR VALUES FROM (10) TO (20);
ALTER TABLE users_table_part REPLICA IDENTITY FULL;
ALTER TABLE users_table_part_0 REPLICA IDENTITY FULL;
ALTER TABLE users_table_part_1 REPLICA IDENTITY FULL;
INSERT INTO users_table_part SELECT (i%100), (i%20), i FROM generate_series(0,100) i;
CREATE PUBLICATION tap_pub_rep_full FOR TABLE users_table_part;
--! start case2
--! check
UPDATE users_table_part SET value_1 = 0 WHERE user_id = 4;
DELETE FROM users_table_part WHERE user_id = 1 and value_1 = 1;
DELETE FROM users_table_part WHERE user_id = 12 and value_1 = 12;
--! check
--! stop case2
DROP PUBLICATION tap_pub_rep_full;
DROP TABLE users_table_part;

CREATE TABLE people (firstname text, lastname text);
ALTER TABLE people REPLICA IDENTITY FULL;
INSERT INTO people SELECT 'first_name_' || i::text, 'last_name_' || i::text FROM generate_series(0,200) i;
CREATE PUBLICATION tap_pub_rep_full FOR TABLE people;
--! start case3
--! check
UPDATE people SET firstname = 'no-name' WHERE firstname = 'first_name_1';
UPDATE people SET firstname = 'no-name' WHERE firstname = 'first_name_2' AND lastname = 'last_name_2';
--! check
DELETE FROM people WHERE firstname = 'first_name_3';
DELETE FROM people WHERE firstname = 'first_name_4' AND lastname = 'last_name_4';
--! expect people: SELECT count(*) FROM people => 199
--! check
--! stop case3
DROP PUBLICATION tap_pub_rep_full;
DROP TABLE people;

CREATE TABLE people (firstname text, lastname text);
ALTER TABLE people REPLICA IDENTITY FULL;
INSERT INTO people SELECT 'first_name_' || i::text, 'last_name_' || i::text FROM generate_series(0, 20) i;
CREATE PUBLICATION tap_pub_rep_full FOR TABLE people;
--! start case4
--! check
UPDATE people SET firstname = 'no-name' WHERE firstname = 'first_name_1';
DELETE FROM people WHERE firstname = 'no-name';
--! check
DELETE FROM people WHERE lastname = 'last_name_18';
--! expect people: SELECT count(*) FROM people => 19
--! check
--! stop case4
DROP PUBLICATION tap_pub_rep_full;
DROP TABLE people;

CREATE TABLE test_replica_id_full (x int);
ALTER TABLE test_replica_id_full REPLICA IDENTITY FULL;
CREATE PUBLICATION tap_pub_rep_full FOR TABLE test_replica_id_full;
--! start case5
--! check
INSERT INTO test_replica_id_full VALUES (1), (2), (3);
UPDATE test_replica_id_full SET x = x + 1 WHERE x = 1;
--! expect test_replica_id_full: SELECT sum(x), count(*) FROM test_replica_id_full => 7|3
--! check
--! stop case5
DROP PUBLICATION tap_pub_rep_full;
DROP TABLE test_replica_id_full;

CREATE TABLE test_replica_id_full (x int, y int);
ALTER TABLE test_replica_id_full REPLICA IDENTITY FULL;
INSERT INTO test_replica_id_full SELECT i, i FROM generate_series(0,21) i;
CREATE PUBLICATION tap_pub_rep_full FOR TABLE test_replica_id_full;
--! start case6
--! check
UPDATE test_replica_id_full SET x = 2000 WHERE y = 15;
--! expect test_replica_id_full: SELECT count(*) FROM test_replica_id_full WHERE x = 2000 => 1
--! check
--! stop case6
DROP PUBLICATION tap_pub_rep_full;
DROP TABLE test_replica_id_full;

CREATE TABLE test_replica_id_full (x int, y text);
ALTER TABLE test_replica_id_full REPLICA IDENTITY FULL;
INSERT INTO test_replica_id_full SELECT i, (i%10)::text FROM generate_series(0,10) i;
CREATE PUBLICATION tap_pub_rep_full FOR TABLE test_replica_id_full;
--! start case7
--! check
DELETE FROM test_replica_id_full WHERE x IN (5, 6);
UPDATE test_replica_id_full SET x = 100, y = '200' WHERE x IN (1, 2);
--! expect test_replica_id_full: select count(*) from test_replica_id_full where x in (5, 6) => 0
--! check
--! stop case7
DROP PUBLICATION tap_pub_rep_full;
DROP TABLE test_replica_id_full;
