-- local: what PostgreSQL sends for partitioned tables in each root mode (docs/concepts/partitions.md)
--
-- One partitioned table, published by two publications: pub_root through its root
-- (publish_via_partition_root = true: one topic, measure) and pub_leaf per partition
-- (false: a topic per partition). Each step shows one behaviour of PostgreSQL's, and
-- where it leaves a topic different from its table, what brings it back.
--! bridge pub_root
--! bridge pub_leaf

CREATE TABLE measure (id int, region text, v int, PRIMARY KEY (id, region)) PARTITION BY LIST (region);
CREATE TABLE m_eu PARTITION OF measure FOR VALUES IN ('eu');
CREATE TABLE m_us PARTITION OF measure FOR VALUES IN ('us');
INSERT INTO measure VALUES (1, 'eu', 10), (2, 'us', 20);
CREATE PUBLICATION pub_root FOR TABLE measure WITH (publish_via_partition_root = true);
CREATE PUBLICATION pub_leaf FOR TABLE measure WITH (publish_via_partition_root = false);
--! start
--! check

-- An UPDATE that moves a row to another partition is a delete and an insert: through the
-- root a key change of measure (the partition key is part of every unique key), per
-- partition a delete in m_eu's topic and an insert in m_us's.
UPDATE measure SET region = 'us' WHERE id = 1;
INSERT INTO measure VALUES (3, 'eu', 30);
--! expect measure@pub_root: SELECT id, region, v FROM measure ORDER BY 1 => 1|us|10; 2|us|20; 3|eu|30
--! expect m_eu@pub_leaf: SELECT id, region, v FROM m_eu ORDER BY 1 => 3|eu|30
--! expect m_us@pub_leaf: SELECT id, region, v FROM m_us ORDER BY 1 => 1|us|10; 2|us|20
--! check

-- ATTACH PARTITION of a table that holds rows writes no row: PostgreSQL sends nothing, in
-- either mode. An incremental snapshot of the root (or of the new partition) reads them.
CREATE TABLE m_asia (id int NOT NULL, region text NOT NULL, v int);
INSERT INTO m_asia VALUES (4, 'asia', 40), (5, 'asia', 50);
ALTER TABLE measure ATTACH PARTITION m_asia FOR VALUES IN ('asia');
--! diverges measure@pub_root: the attached partition's rows are not sent
--! diverges m_asia@pub_leaf: the attached partition's rows are not sent
--! expect measure@pub_root: SELECT count(*) FROM measure WHERE region = 'asia' => 0
--! expect m_asia@pub_leaf: SELECT count(*) FROM m_asia => 0
--! check
--! resync pub_root measure
--! resync pub_leaf m_asia
--! converges measure@pub_root
--! converges m_asia@pub_leaf
--! check
UPDATE measure SET v = v + 1 WHERE region = 'asia';
--! check

-- TRUNCATE of a single partition is not sent through the root (the root's topic keeps its
-- rows); per partition it is that partition's truncate.
TRUNCATE m_eu;
--! diverges measure@pub_root: a TRUNCATE of a single partition is not sent through its root
--! expect measure@pub_root: SELECT id, region FROM measure WHERE region = 'eu' => 3|eu
--! expect m_eu@pub_leaf: SELECT count(*) FROM m_eu => 0
--! check

-- DETACH PARTITION deletes no row either: through the root its rows stay in the root's
-- topic; per partition the detached table leaves the publication (FOR TABLE measure), its
-- topic as it was.
ALTER TABLE measure DETACH PARTITION m_us;
--! expect measure@pub_root: SELECT id, region FROM measure ORDER BY 1 => 1|us; 2|us; 3|eu; 4|asia; 5|asia
--! check

-- A TRUNCATE of the root is sent in both modes: the root's topic is emptied, stale rows
-- included; then it follows the table again.
TRUNCATE measure;
INSERT INTO measure VALUES (6, 'eu', 60);
--! converges measure@pub_root
--! check
