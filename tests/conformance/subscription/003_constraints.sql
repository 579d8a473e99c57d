-- postgres/postgres src/test/subscription/t/003_constraints.pl
-- commit 50e6eb731d98ab6d0e625a0b87fb327b172bbebd
--
-- The subscription copies no data (copy_data = false): the bridge starts before anything
-- is written. The subscriber's replica trigger is the subscriber's; the publisher's
-- changes are all compared, among them a primary-key change of a row whose TOASTed
-- column the UPDATE leaves alone.
--! bridge tap_pub

CREATE TABLE tab_fk (bid int PRIMARY KEY);
CREATE TABLE tab_fk_ref (id int PRIMARY KEY, junk text, bid int REFERENCES tab_fk (bid));
CREATE PUBLICATION tap_pub FOR ALL TABLES;
--! start
--! check

INSERT INTO tab_fk (bid) VALUES (1);
INSERT INTO tab_fk_ref (id, bid, junk) VALUES (1, 1, repeat(pi()::text,20000));
--! check

DROP TABLE tab_fk CASCADE;
INSERT INTO tab_fk_ref (id, bid) VALUES (2, 2);
--! check

INSERT INTO tab_fk_ref (id, bid) VALUES (10, 10);
--! check
UPDATE tab_fk_ref SET bid = 2 WHERE bid = 1;
--! check
UPDATE tab_fk_ref SET id = 6 WHERE id = 1;
--! expect tab_fk_ref: SELECT id, length(junk), bid FROM tab_fk_ref ORDER BY id => 2||2; 6|340000|2; 10||10
--! check
