-- postgres/postgres src/test/subscription/t/004_sync.pl
-- commit 50e6eb731d98ab6d0e625a0b87fb327b172bbebd
--
-- Table synchronisation. The subscriber's drops and re-creations of its subscription (and
-- its conflicting rows) have no publisher side; the publisher's writes are streamed to
-- one bridge all along. The rows CREATE TABLE ... AS writes are sent (the TAP's subscriber
-- skips them only because its subscription does not know the table until REFRESH
-- PUBLICATION, which then copies them): the topic has them at once.
--! bridge tap_pub

CREATE TABLE tab_rep (a int primary key);
INSERT INTO tab_rep SELECT generate_series(1,10);
CREATE PUBLICATION tap_pub FOR ALL TABLES;
--! start
--! check

INSERT INTO tab_rep SELECT generate_series(11,20);
--! check

CREATE TABLE tab_rep_next (a) AS SELECT generate_series(1,10);
--! expect tab_rep_next: SELECT count(*) FROM tab_rep_next => 10
--! check

INSERT INTO tab_rep_next SELECT generate_series(1,10);
--! expect tab_rep_next: SELECT count(*) FROM tab_rep_next => 20
--! check

DROP TABLE tab_rep_next;
--! check
