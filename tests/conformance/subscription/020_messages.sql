-- postgres/postgres src/test/subscription/t/020_messages.pl
-- commit 50e6eb731d98ab6d0e625a0b87fb327b172bbebd
--
-- Logical decoding messages (pg_logical_emit_message), which the bridge writes to its
-- message topic (source.messages, on by default): a transactional one with its commit,
-- non-transactional ones at once, also from a transaction that rolls back (whose
-- transactional message is never sent). The TAP reads its slot with
-- pg_logical_slot_peek_binary_changes; here the bridge's slot is streamed instead.
--! bridge tap_pub

CREATE TABLE tab_test (a int primary key);
CREATE PUBLICATION tap_pub FOR TABLE tab_test;
--! start
--! check

SELECT pg_logical_emit_message(true, 'pgoutput', 'a transactional message');
--! messages pgoutput => a transactional message
--! check

INSERT INTO tab_test VALUES (1);
SELECT pg_logical_emit_message(false, 'pgoutput', 'a non-transactional message');
INSERT INTO tab_test VALUES (2);
--! messages pgoutput => a transactional message; a non-transactional message
--! check

BEGIN;
SELECT pg_logical_emit_message(false, 'pgoutput',
	'a non-transactional message is available even if the transaction is aborted 1');
INSERT INTO tab_test VALUES (3);
SELECT pg_logical_emit_message(true, 'pgoutput',
	'a transactional message is not available if the transaction is aborted');
SELECT pg_logical_emit_message(false, 'pgoutput',
	'a non-transactional message is available even if the transaction is aborted 2');
ROLLBACK;
SELECT pg_switch_wal();
--! messages pgoutput => a transactional message; a non-transactional message; a non-transactional message is available even if the transaction is aborted 1; a non-transactional message is available even if the transaction is aborted 2
--! check
