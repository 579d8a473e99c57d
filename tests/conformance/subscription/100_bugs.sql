-- postgres/postgres src/test/subscription/t/100_bugs.pl
-- commit 50e6eb731d98ab6d0e625a0b87fb327b172bbebd
--
-- The publisher's side of the TAP's bug regressions, one after the other in one database:
-- #15114 (an index predicate calling a function), temporary and unlogged tables under FOR
-- ALL TABLES, #16643's table added to a publication while streaming (its rows copied by
-- the TAP's REFRESH; t2 has no key, so its topic has only the later changes), a cascade's
-- first node, a replica identity index switched to another index, a schema renamed inside
-- a transaction (topics are named by the relation's name when each change was made:
-- the TAP's subscriber holds the same rows under the same names until it refreshes),
-- REPLICA IDENTITY FULL with a dropped column, and a column added with a default that old
-- rows miss. The TAP's own slots (testslot) and second cluster have no part.
--! bridge pub1 later
--! bridge pub later
--! bridge testpub later
--! bridge testpub1 later
--! bridge tap_pub later
--! bridge tap_pub_sch later
--! bridge pub_dropped_cols later
--! bridge pub1_default publication=pub1 later

CREATE TABLE tab1 (a int PRIMARY KEY, b int);
CREATE FUNCTION double(x int) RETURNS int IMMUTABLE LANGUAGE SQL AS 'select x * 2';
CREATE INDEX ON tab1 (b) WHERE a > double(1);
CREATE PUBLICATION pub1 FOR ALL TABLES;
--! start
--! start pub1
--! check
INSERT INTO tab1 VALUES (1, 2);
--! check
--! stop pub1
DROP PUBLICATION pub1;
DROP TABLE tab1;

CREATE PUBLICATION pub FOR ALL TABLES;
--! start pub
CREATE TEMPORARY TABLE tt1 AS SELECT 1 AS a;
UPDATE tt1 SET a = 2;
CREATE UNLOGGED TABLE tu1 AS SELECT 1 AS a;
UPDATE tu1 SET a = 2;
--! check
--! stop pub
DROP PUBLICATION pub;
DROP TABLE tt1;

CREATE TABLE t (f int);
CREATE TABLE t2 (f int);
INSERT INTO t SELECT * FROM generate_series(1, 3000);
INSERT INTO t2 SELECT * FROM generate_series(1, 3000);
CREATE PUBLICATION testpub FOR TABLE t;
--! start testpub
--! check
INSERT INTO t SELECT * FROM generate_series(1, 3000);
INSERT INTO t2 SELECT * FROM generate_series(1, 3000);
ALTER PUBLICATION testpub ADD TABLE t2;
--! diverges t2: added to the publication with rows, which are not sent; no key for an incremental snapshot
--! expect t2: SELECT count(f) FROM t2 => 0
--! expect t: SELECT count(f) FROM t => 6000
--! check
--! stop testpub
DROP PUBLICATION testpub;
DROP TABLE t, t2;
--! converges t2

CREATE TABLE tab1 (a int);
CREATE PUBLICATION testpub1 FOR TABLE tab1;
--! start testpub1
INSERT INTO tab1 values(generate_series(1,10));
--! check
--! stop testpub1
DROP PUBLICATION testpub1;
DROP TABLE tab1;

CREATE TABLE tab_replidentity_index(a int not null, b int not null);
CREATE UNIQUE INDEX idx_replidentity_index_a ON tab_replidentity_index(a);
CREATE UNIQUE INDEX idx_replidentity_index_b ON tab_replidentity_index(b);
ALTER TABLE tab_replidentity_index REPLICA IDENTITY USING INDEX idx_replidentity_index_a;
INSERT INTO tab_replidentity_index VALUES(1, 1),(2, 2);
CREATE PUBLICATION tap_pub FOR TABLE tab_replidentity_index;
--! start tap_pub
--! check
-- Another replica identity index is another key schema, which the registry refuses under
-- BACKWARD: tap_pub's bridge registers it under the key subject's next generation (the
-- default).
ALTER TABLE tab_replidentity_index REPLICA IDENTITY USING INDEX idx_replidentity_index_b;
UPDATE tab_replidentity_index SET a = -a WHERE a = 1;
DELETE FROM tab_replidentity_index WHERE a = 2;
--! expect tab_replidentity_index: SELECT * FROM tab_replidentity_index => -1|1
--! check
--! stop tap_pub
DROP PUBLICATION tap_pub;
DROP TABLE tab_replidentity_index;

CREATE SCHEMA sch1;
CREATE TABLE sch1.t1 (c1 int);
CREATE PUBLICATION tap_pub_sch FOR ALL TABLES;
--! start tap_pub_sch
--! check
begin;
insert into sch1.t1 values(1);
alter schema sch1 rename to sch2;
create schema sch1;
create table sch1.t1(c1 int);
insert into sch1.t1 values(2);
insert into sch2.t1 values(3);
commit;
--! diverges sch1.t1: its topic is named after the relation's name at each change: row 1 was written to the table called sch1.t1 then
--! diverges sch2.t1: its topic is named after the relation's name at each change: row 1 was written while the table was still sch1.t1
--! expect sch1.t1: SELECT * FROM t1 ORDER BY 1 => 1; 2
--! expect sch2.t1: SELECT * FROM t1 ORDER BY 1 => 3
--! check
--! stop tap_pub_sch
DROP PUBLICATION tap_pub_sch;

CREATE TABLE dropped_cols (a int, b_drop int, c int);
ALTER TABLE dropped_cols REPLICA IDENTITY FULL;
CREATE PUBLICATION pub_dropped_cols FOR TABLE dropped_cols;
INSERT INTO dropped_cols VALUES (1, 1, 1);
--! start pub_dropped_cols
--! check
ALTER TABLE dropped_cols DROP COLUMN b_drop;
UPDATE dropped_cols SET a = 100;
--! expect dropped_cols: SELECT count(*) FROM dropped_cols WHERE a = 100 => 1
--! check
--! stop pub_dropped_cols

CREATE TABLE tab_default (a int);
ALTER TABLE tab_default REPLICA IDENTITY FULL;
INSERT INTO tab_default VALUES (1);
ALTER TABLE tab_default ADD COLUMN b bool DEFAULT false NOT NULL;
INSERT INTO tab_default VALUES (2, true);
CREATE PUBLICATION pub1 FOR TABLE tab_default;
--! start pub1_default
--! expect tab_default: SELECT a, b FROM tab_default ORDER BY a => 1|f; 2|t
--! check
UPDATE tab_default SET a = a + 1;
--! expect tab_default: SELECT a, b FROM tab_default ORDER BY a => 2|f; 3|t
--! check
