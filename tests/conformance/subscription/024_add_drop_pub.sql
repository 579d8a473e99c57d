-- postgres/postgres src/test/subscription/t/024_add_drop_pub.pl
-- commit 50e6eb731d98ab6d0e625a0b87fb327b172bbebd
--
-- ALTER SUBSCRIPTION ADD/DROP PUBLICATION is the subscriber's; the publisher adds a table
-- that already holds rows to a publication a bridge streams. PostgreSQL sends only its later
-- changes; the TAP's subscriber copies the rows when it refreshes. A bridge would read them
-- with an incremental snapshot, which needs a key: tab_2 has none, so its topic stays
-- without them.
--! bridge tap_pub_1
--! bridge tap_pub_2

CREATE TABLE tab_1 (a int);
INSERT INTO tab_1 SELECT generate_series(1,10);
CREATE PUBLICATION tap_pub_1 FOR TABLE tab_1;
CREATE PUBLICATION tap_pub_2;
--! start
--! expect tab_1: SELECT count(*), min(a), max(a) FROM tab_1 => 10|1|10
--! check

CREATE TABLE tab_2 (a int);
INSERT INTO tab_2 SELECT generate_series(1,10);
ALTER PUBLICATION tap_pub_2 ADD TABLE tab_2;
--! diverges tab_2: added to the publication with rows, which are not sent; no key for an incremental snapshot
--! expect tab_2: SELECT count(*) FROM tab_2 => 0
--! check
