-- postgres/postgres src/test/subscription/t/010_truncate.pl
-- commit 50e6eb731d98ab6d0e625a0b87fb327b172bbebd
--
-- TRUNCATE, with and without RESTART IDENTITY, of one table, of tables tied by a foreign
-- key, of published and unpublished tables at once, and under a publication that does not
-- publish truncate. The TAP truncates rows its subscriber inserted locally; here the same
-- rows are inserted on the publisher before each truncate, so that there is something to
-- remove. Left out: the synchronous_standby_names switch (a server setting that would hold
-- every commit of the shared server) and the second subscription of pub5.
--! bridge pub1
--! bridge pub2
--! bridge pub3
--! bridge pub5 later

CREATE TABLE tab1 (a int PRIMARY KEY);
CREATE TABLE tab2 (a int PRIMARY KEY);
CREATE TABLE tab3 (a int PRIMARY KEY);
CREATE TABLE tab4 (x int PRIMARY KEY, y int REFERENCES tab3);
CREATE PUBLICATION pub1 FOR TABLE tab1;
CREATE PUBLICATION pub2 FOR TABLE tab2 WITH (publish = insert);
CREATE PUBLICATION pub3 FOR TABLE tab3, tab4;
--! start
--! check

INSERT INTO tab1 VALUES (1), (2), (3);
--! check
TRUNCATE tab1;
--! expect tab1: SELECT count(*), min(a), max(a) FROM tab1 => 0||
--! check
INSERT INTO tab1 VALUES (1), (2), (3);
TRUNCATE tab1 RESTART IDENTITY;
--! check

INSERT INTO tab2 VALUES (1), (2), (3);
TRUNCATE tab2;
--! diverges tab2@pub2: publish = insert does not send TRUNCATE
--! expect tab2@pub2: SELECT count(*), min(a), max(a) FROM tab2 => 3|1|3
--! check
ALTER PUBLICATION pub2 SET (publish = 'insert, truncate');
TRUNCATE tab2;
--! converges tab2@pub2
--! check

INSERT INTO tab3 VALUES (1), (2), (3);
INSERT INTO tab4 VALUES (11, 1), (111, 1), (22, 2);
--! check
TRUNCATE tab3, tab4;
--! check

--! stop pub2
DROP PUBLICATION pub2;
INSERT INTO tab1 VALUES (1), (2), (3);
INSERT INTO tab2 VALUES (1), (2), (3);
TRUNCATE tab1, tab2;
--! check

INSERT INTO tab1 VALUES (1), (2), (3);
--! check
TRUNCATE tab1;
--! check

CREATE TABLE tab5 (a int);
CREATE PUBLICATION pub5 FOR TABLE tab5;
--! start pub5
--! check
INSERT INTO tab5 VALUES (1), (2), (3);
--! check
TRUNCATE tab5;
--! expect tab5: SELECT count(*), min(a), max(a) FROM tab5 => 0||
--! check
