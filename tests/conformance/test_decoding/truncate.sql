-- postgres/postgres contrib/test_decoding/sql/truncate.sql
-- commit 2c7ea57e56ca5f668c32d4266e0a3e45b455bef5
--
-- TRUNCATE of one table, of a table named twice with RESTART IDENTITY CASCADE, and of two
-- tables at once: each topic gets its truncate record.
--! bridge regression publication_mode=all_tables

SET synchronous_commit = on;
--! start
CREATE TABLE tab1 (id serial unique, data int);
CREATE TABLE tab2 (a int primary key, b int);
TRUNCATE tab1;
TRUNCATE tab1, tab1 RESTART IDENTITY CASCADE;
TRUNCATE tab1, tab2;
--! check
