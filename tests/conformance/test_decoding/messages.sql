-- postgres/postgres contrib/test_decoding/sql/messages.sql
-- commit 173b56f1ef597251fe79d8e71a0df7586ea12549
--
-- Logical decoding messages in the bridge's message topic, in the order PostgreSQL sends
-- them: non-transactional ones at once (also from a transaction that rolls back),
-- transactional ones with their commit, none from a rollback; the flush variant
-- (PostgreSQL 17 on); and none from another database (the script's \c template1).
--! bridge regression publication_mode=all_tables

SET synchronous_commit = on;
--! start
--! if 17
SELECT 'msg1' FROM pg_logical_emit_message(true, 'test', 'msg1', true);
SELECT 'msg2' FROM pg_logical_emit_message(false, 'test', 'msg2', true);
--! else
SELECT 'msg1' FROM pg_logical_emit_message(true, 'test', 'msg1');
SELECT 'msg2' FROM pg_logical_emit_message(false, 'test', 'msg2');
--! endif

BEGIN;
SELECT 'msg3' FROM pg_logical_emit_message(true, 'test', 'msg3');
SELECT 'msg4' FROM pg_logical_emit_message(false, 'test', 'msg4');
ROLLBACK;

BEGIN;
SELECT 'msg5' FROM pg_logical_emit_message(true, 'test', 'msg5');
SELECT 'msg6' FROM pg_logical_emit_message(false, 'test', 'msg6');
SELECT 'msg7' FROM pg_logical_emit_message(true, 'test', 'msg7');
COMMIT;

SELECT 'ignorethis' FROM pg_logical_emit_message(true, 'test', 'czechtastic');
--! messages test => msg1; msg2; msg4; msg6; msg5; msg7; czechtastic
--! check

--! session other database=template1
SELECT 'otherdb1' FROM pg_logical_emit_message(false, 'test', 'otherdb1');
SELECT 'otherdb2' FROM pg_logical_emit_message(true, 'test', 'otherdb2');
--! session main
--! messages test => msg1; msg2; msg4; msg6; msg5; msg7; czechtastic
--! check
