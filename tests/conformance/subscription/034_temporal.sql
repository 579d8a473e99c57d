-- postgres/postgres src/test/subscription/t/034_temporal.pl
-- commit 50e6eb731d98ab6d0e625a0b87fb327b172bbebd
--
-- Temporal keys (PostgreSQL 18: PRIMARY KEY or UNIQUE (id, valid_at WITHOUT OVERLAPS), a
-- GiST index over ranges) under REPLICA IDENTITY DEFAULT, FULL, USING INDEX and NOTHING,
-- each with its own FOR ALL TABLES publication and bridge. A temporal primary key is the
-- record key (both ranges); PostgreSQL refuses the updates and deletes the TAP checks it
-- refuses (no replica identity while publishing them).
--! requires 18
--! bridge pub1_default publication=pub1 later
--! bridge pub1_full publication=pub1 later
--! bridge pub1_index publication=pub1 later
--! bridge pub1_nothing publication=pub1 later
--! start

-- REPLICA IDENTITY DEFAULT
CREATE TABLE temporal_no_key (id int4range, valid_at daterange, a text);
CREATE TABLE temporal_pk (id int4range, valid_at daterange, a text, PRIMARY KEY (id, valid_at WITHOUT OVERLAPS));
CREATE TABLE temporal_unique (id int4range, valid_at daterange, a text, UNIQUE (id, valid_at WITHOUT OVERLAPS));
INSERT INTO temporal_no_key (id, valid_at, a)
   VALUES ('[1,2)', '[2000-01-01,2010-01-01)', 'a');
INSERT INTO temporal_pk (id, valid_at, a)
   VALUES ('[1,2)', '[2000-01-01,2010-01-01)', 'a');
INSERT INTO temporal_unique (id, valid_at, a)
   VALUES ('[1,2)', '[2000-01-01,2010-01-01)', 'a');
CREATE PUBLICATION pub1 FOR ALL TABLES;
--! start pub1_default
--! check
INSERT INTO temporal_no_key (id, valid_at, a)
   VALUES ('[2,3)', '[2000-01-01,2010-01-01)', 'a'),
          ('[3,4)', '[2000-01-01,2010-01-01)', 'a'),
          ('[4,5)', '[2000-01-01,2010-01-01)', 'a');
--! error
UPDATE temporal_no_key SET a = 'b' WHERE id = '[2,3)';
--! error
DELETE FROM temporal_no_key WHERE id = '[3,4)';
--! check
INSERT INTO temporal_pk (id, valid_at, a)
   VALUES ('[2,3)', '[2000-01-01,2010-01-01)', 'a'),
          ('[3,4)', '[2000-01-01,2010-01-01)', 'a'),
          ('[4,5)', '[2000-01-01,2010-01-01)', 'a');
UPDATE temporal_pk SET a = 'b' WHERE id = '[2,3)';
DELETE FROM temporal_pk WHERE id = '[3,4)';
--! check
INSERT INTO temporal_unique (id, valid_at, a)
   VALUES ('[2,3)', '[2000-01-01,2010-01-01)', 'a'),
          ('[3,4)', '[2000-01-01,2010-01-01)', 'a'),
          ('[4,5)', '[2000-01-01,2010-01-01)', 'a');
--! error
UPDATE temporal_unique SET a = 'b' WHERE id = '[2,3)';
--! error
DELETE FROM temporal_unique WHERE id = '[3,4)';
--! check
--! stop pub1_default
DROP TABLE IF EXISTS temporal_no_key;
DROP TABLE IF EXISTS temporal_pk;
DROP TABLE IF EXISTS temporal_unique;
DROP PUBLICATION pub1;

-- REPLICA IDENTITY FULL
CREATE TABLE temporal_no_key (id int4range, valid_at daterange, a text);
CREATE TABLE temporal_pk (id int4range, valid_at daterange, a text, PRIMARY KEY (id, valid_at WITHOUT OVERLAPS));
CREATE TABLE temporal_unique (id int4range, valid_at daterange, a text, UNIQUE (id, valid_at WITHOUT OVERLAPS));
ALTER TABLE temporal_no_key REPLICA IDENTITY FULL;
ALTER TABLE temporal_pk REPLICA IDENTITY FULL;
ALTER TABLE temporal_unique REPLICA IDENTITY FULL;
INSERT INTO temporal_no_key (id, valid_at, a)
   VALUES ('[1,2)', '[2000-01-01,2010-01-01)', 'a');
INSERT INTO temporal_pk (id, valid_at, a)
   VALUES ('[1,2)', '[2000-01-01,2010-01-01)', 'a');
INSERT INTO temporal_unique (id, valid_at, a)
   VALUES ('[1,2)', '[2000-01-01,2010-01-01)', 'a');
CREATE PUBLICATION pub1 FOR ALL TABLES;
--! start pub1_full
--! check
INSERT INTO temporal_no_key (id, valid_at, a)
   VALUES ('[2,3)', '[2000-01-01,2010-01-01)', 'a'),
          ('[3,4)', '[2000-01-01,2010-01-01)', 'a'),
          ('[4,5)', '[2000-01-01,2010-01-01)', 'a');
UPDATE temporal_no_key SET a = 'b' WHERE id = '[2,3)';
DELETE FROM temporal_no_key WHERE id = '[3,4)';
--! check
INSERT INTO temporal_pk (id, valid_at, a)
   VALUES ('[2,3)', '[2000-01-01,2010-01-01)', 'a'),
          ('[3,4)', '[2000-01-01,2010-01-01)', 'a'),
          ('[4,5)', '[2000-01-01,2010-01-01)', 'a');
UPDATE temporal_pk SET a = 'b' WHERE id = '[2,3)';
DELETE FROM temporal_pk WHERE id = '[3,4)';
--! check
INSERT INTO temporal_unique (id, valid_at, a)
   VALUES ('[2,3)', '[2000-01-01,2010-01-01)', 'a'),
          ('[3,4)', '[2000-01-01,2010-01-01)', 'a'),
          ('[4,5)', '[2000-01-01,2010-01-01)', 'a');
UPDATE temporal_unique SET a = 'b' WHERE id = '[2,3)';
DELETE FROM temporal_unique WHERE id = '[3,4)';
--! check
--! stop pub1_full
DROP TABLE IF EXISTS temporal_no_key;
DROP TABLE IF EXISTS temporal_pk;
DROP TABLE IF EXISTS temporal_unique;
DROP PUBLICATION pub1;

-- REPLICA IDENTITY USING INDEX
CREATE TABLE temporal_pk (id int4range, valid_at daterange, a text, PRIMARY KEY (id, valid_at WITHOUT OVERLAPS));
ALTER TABLE temporal_pk REPLICA IDENTITY USING INDEX temporal_pk_pkey;
CREATE TABLE temporal_unique (id int4range NOT NULL, valid_at daterange NOT NULL, a text, UNIQUE (id, valid_at WITHOUT OVERLAPS));
ALTER TABLE temporal_unique REPLICA IDENTITY USING INDEX temporal_unique_id_valid_at_key;
INSERT INTO temporal_pk (id, valid_at, a)
   VALUES ('[1,2)', '[2000-01-01,2010-01-01)', 'a');
INSERT INTO temporal_unique (id, valid_at, a)
   VALUES ('[1,2)', '[2000-01-01,2010-01-01)', 'a');
CREATE PUBLICATION pub1 FOR ALL TABLES;
--! start pub1_index
--! check
INSERT INTO temporal_pk (id, valid_at, a)
   VALUES ('[2,3)', '[2000-01-01,2010-01-01)', 'a'),
          ('[3,4)', '[2000-01-01,2010-01-01)', 'a'),
          ('[4,5)', '[2000-01-01,2010-01-01)', 'a');
UPDATE temporal_pk SET a = 'b' WHERE id = '[2,3)';
DELETE FROM temporal_pk WHERE id = '[3,4)';
--! check
INSERT INTO temporal_unique (id, valid_at, a)
   VALUES ('[2,3)', '[2000-01-01,2010-01-01)', 'a'),
          ('[3,4)', '[2000-01-01,2010-01-01)', 'a'),
          ('[4,5)', '[2000-01-01,2010-01-01)', 'a');
UPDATE temporal_unique SET a = 'b' WHERE id = '[2,3)';
DELETE FROM temporal_unique WHERE id = '[3,4)';
--! check
--! stop pub1_index
DROP TABLE IF EXISTS temporal_no_key;
DROP TABLE IF EXISTS temporal_pk;
DROP TABLE IF EXISTS temporal_unique;
DROP PUBLICATION pub1;

-- REPLICA IDENTITY NOTHING
CREATE TABLE temporal_no_key (id int4range, valid_at daterange, a text);
CREATE TABLE temporal_pk (id int4range, valid_at daterange, a text, PRIMARY KEY (id, valid_at WITHOUT OVERLAPS));
CREATE TABLE temporal_unique (id int4range, valid_at daterange, a text, UNIQUE (id, valid_at WITHOUT OVERLAPS));
ALTER TABLE temporal_no_key REPLICA IDENTITY NOTHING;
ALTER TABLE temporal_pk REPLICA IDENTITY NOTHING;
ALTER TABLE temporal_unique REPLICA IDENTITY NOTHING;
INSERT INTO temporal_no_key (id, valid_at, a)
   VALUES ('[1,2)', '[2000-01-01,2010-01-01)', 'a');
INSERT INTO temporal_pk (id, valid_at, a)
   VALUES ('[1,2)', '[2000-01-01,2010-01-01)', 'a');
INSERT INTO temporal_unique (id, valid_at, a)
   VALUES ('[1,2)', '[2000-01-01,2010-01-01)', 'a');
CREATE PUBLICATION pub1 FOR ALL TABLES;
--! start pub1_nothing
--! check
INSERT INTO temporal_no_key (id, valid_at, a)
   VALUES ('[2,3)', '[2000-01-01,2010-01-01)', 'a'),
          ('[3,4)', '[2000-01-01,2010-01-01)', 'a'),
          ('[4,5)', '[2000-01-01,2010-01-01)', 'a');
--! error
UPDATE temporal_no_key SET a = 'b' WHERE id = '[2,3)';
--! error
DELETE FROM temporal_no_key WHERE id = '[3,4)';
--! check
INSERT INTO temporal_pk (id, valid_at, a)
   VALUES ('[2,3)', '[2000-01-01,2010-01-01)', 'a'),
          ('[3,4)', '[2000-01-01,2010-01-01)', 'a'),
          ('[4,5)', '[2000-01-01,2010-01-01)', 'a');
--! error
UPDATE temporal_pk SET a = 'b' WHERE id = '[2,3)';
--! error
DELETE FROM temporal_pk WHERE id = '[3,4)';
--! check
INSERT INTO temporal_unique (id, valid_at, a)
   VALUES ('[2,3)', '[2000-01-01,2010-01-01)', 'a'),
          ('[3,4)', '[2000-01-01,2010-01-01)', 'a'),
          ('[4,5)', '[2000-01-01,2010-01-01)', 'a');
--! error
UPDATE temporal_unique SET a = 'b' WHERE id = '[2,3)';
--! error
DELETE FROM temporal_unique WHERE id = '[3,4)';
--! check
--! stop pub1_nothing
DROP TABLE IF EXISTS temporal_no_key;
DROP TABLE IF EXISTS temporal_pk;
DROP TABLE IF EXISTS temporal_unique;
DROP PUBLICATION pub1;
