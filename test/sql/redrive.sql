-- redrive: what queue.redrive may move, and where.  It writes into each
-- dead letter's source queue (or destination_queue), so it needs send on
-- every queue it writes into, besides manage on the dead-letter queue:
-- 42501 before any row moves.  And it never brings back a dead letter
-- whose retention in the dead-letter queue (sent_at + its retention) has
-- passed: that one stays behind for the worker's sweep.  The rest of
-- redrive is in deadletter.sql.  Roles are cluster-wide, so every role
-- made here is named queue_test_rd_* and dropped at the end.  Output is
-- bodies, counts and SQLSTATEs, never ids or timestamps.
CREATE EXTENSION IF NOT EXISTS queue;
SET client_min_messages = warning;

-- err(sql): run a statement, show "SQLSTATE: message" instead of failing.
-- qt(queue, kind) and qk(queue, kind): the table behind a queue's rows of
-- a kind (q messages, g groups, d deduplication ids, a receive attempts)
-- and the condition that picks them ('' for a dedicated queue's own), in
-- either layout (DESIGN.md "Storage").
CREATE FUNCTION pg_temp.qt(q text, kind text) RETURNS text LANGUAGE sql AS $qt$
	SELECT CASE WHEN r.dedicated THEN format('queue_data.%s%s', kind, r.queue_id)
		ELSE 'queue_data.' || CASE kind WHEN 'q' THEN CASE WHEN r.fifo THEN 'fifo_messages' ELSE 'messages' END
			WHEN 'g' THEN 'groups' WHEN 'd' THEN 'dedup_ids' ELSE 'receive_attempts' END END
	FROM queue._queues r WHERE r.queue_name = q
$qt$;
CREATE FUNCTION pg_temp.qk(q text, kind text) RETURNS text LANGUAGE sql AS $qk$
	SELECT CASE WHEN r.dedicated THEN ''
		WHEN kind IN ('d', 'a') THEN format('queue_id = %s AND ', r.queue_id)
		ELSE format('store_id = %s AND ', coalesce(r.store_id, r.queue_id)) END
	FROM queue._queues r WHERE r.queue_name = q
$qk$;

CREATE FUNCTION pg_temp.err(cmd text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
	EXECUTE cmd;
	RETURN 'ok';
EXCEPTION WHEN OTHERS THEN
	RETURN SQLSTATE || ': ' || SQLERRM;
END
$$;

-- wait_workers(n): wait (up to 60 s) until n queue workers run; true if so.
CREATE FUNCTION pg_temp.wait_workers(n int) RETURNS bool LANGUAGE plpgsql AS $$
BEGIN
	FOR i IN 1..600 LOOP
		IF (SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'queue worker') = n THEN
			RETURN true;
		END IF;
		PERFORM pg_sleep(0.1);
		PERFORM pg_stat_clear_snapshot();
	END LOOP;
	RETURN false;
END
$$;
-- The worker is stopped for the test: its sweeps lock rows for a moment,
-- and a receive or redrive skips locked rows, so a sweep that ran at the
-- wrong moment would change what the statements below move.
ALTER SYSTEM SET queue.worker_enabled = off;
SELECT pg_reload_conf();
SELECT pg_temp.wait_workers(0) AS worker_stopped;

-- bag(queue): the bodies of a queue, sorted.
CREATE FUNCTION pg_temp.bag(q text) RETURNS text LANGUAGE sql AS $$
	SELECT coalesce(string_agg(body, ' ' ORDER BY body), '(empty)') FROM queue.peek(q, 1000)
$$;

-- kill(queue, body): send a message to a source queue with
-- max_receive_count 1 and receive it twice: the second receive moves it
-- to the dead-letter queue.
CREATE FUNCTION pg_temp.kill(q text, b text) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
	PERFORM queue.send(q, b);
	PERFORM queue.receive(q, visibility_timeout => '0');
	PERFORM queue.receive(q, visibility_timeout => '0');
END
$$;

CREATE ROLE queue_test_rd_manager;
GRANT USAGE ON SCHEMA queue TO queue_test_rd_manager;

SELECT queue.create('rd_dlq', retention => '1 minute') > 0 AS created;
SELECT queue.create('rd_a', dead_letter_queue => 'rd_dlq', max_receive_count => 1) > 0 AS created;
SELECT queue.create('rd_b', dead_letter_queue => 'rd_dlq', max_receive_count => 1) > 0 AS created;
SELECT queue.create('rd_other') > 0 AS created;
SELECT pg_temp.kill('rd_a', 'a1'), pg_temp.kill('rd_a', 'a2'), pg_temp.kill('rd_b', 'b1');
SELECT pg_temp.bag('rd_dlq') AS dlq;

----------------------------------------------------------------------
-- send on every queue it writes into
----------------------------------------------------------------------
SELECT queue.grant('rd_dlq', 'queue_test_rd_manager', '{manage}');
-- manage on the dead-letter queue alone: 42501, nothing moved
SET ROLE queue_test_rd_manager;
SELECT pg_temp.err($$SELECT queue.redrive('rd_dlq')$$);
SELECT pg_temp.err($$SELECT queue.redrive('rd_dlq', max_messages => 1)$$);
SELECT pg_temp.err($$SELECT queue.redrive('rd_dlq', destination_queue => 'rd_other')$$);
RESET ROLE;
SELECT pg_temp.bag('rd_dlq') AS dlq, pg_temp.bag('rd_a') AS a, pg_temp.bag('rd_b') AS b;
-- send on one source only: still 42501, and nothing moved, not even the
-- dead letters of the queue it may send to
SELECT queue.grant('rd_a', 'queue_test_rd_manager', '{send}');
SET ROLE queue_test_rd_manager;
SELECT pg_temp.err($$SELECT queue.redrive('rd_dlq')$$);
RESET ROLE;
SELECT pg_temp.bag('rd_dlq') AS dlq, pg_temp.bag('rd_a') AS a, pg_temp.bag('rd_b') AS b;
-- send on both: it moves them all
SELECT queue.grant('rd_b', 'queue_test_rd_manager', '{send}');
SET ROLE queue_test_rd_manager;
SELECT queue.redrive('rd_dlq');
RESET ROLE;
SELECT pg_temp.bag('rd_dlq') AS dlq, pg_temp.bag('rd_a') AS a, pg_temp.bag('rd_b') AS b;
-- destination_queue needs send on it, not on the sources
SELECT queue.purge('rd_a'), queue.purge('rd_b');
SELECT pg_temp.kill('rd_a', 'a3');
SELECT queue.revoke('rd_a', 'queue_test_rd_manager', '{send}');
SET ROLE queue_test_rd_manager;
SELECT pg_temp.err($$SELECT queue.redrive('rd_dlq', destination_queue => 'rd_other')$$);
RESET ROLE;
SELECT queue.grant('rd_other', 'queue_test_rd_manager', '{send}');
SET ROLE queue_test_rd_manager;
SELECT queue.redrive('rd_dlq', destination_queue => 'rd_other');
RESET ROLE;
SELECT pg_temp.bag('rd_dlq') AS dlq, pg_temp.bag('rd_other') AS other;
SELECT queue.purge('rd_other');

----------------------------------------------------------------------
-- dead letters past their retention in the dead-letter queue stay
----------------------------------------------------------------------
SELECT pg_temp.kill('rd_a', 'young'), pg_temp.kill('rd_a', 'old'), pg_temp.kill('rd_b', 'old_b');
-- dead letters keep their sent_at; age two of them past the dead-letter
-- queue's retention (1 minute) in the transaction that redrives, so the
-- worker cannot sweep them first
BEGIN;
DO $$ BEGIN
	EXECUTE format('UPDATE %s SET sent_at = sent_at - interval ''2 minutes'' WHERE %sbody IN (''old'', ''old_b'')',
				   pg_temp.qt('rd_dlq', 'q'), pg_temp.qk('rd_dlq', 'q'));
END $$;
SELECT queue.redrive('rd_dlq');
SELECT pg_temp.bag('rd_a') AS a, pg_temp.bag('rd_b') AS b;
-- to a destination too
SELECT queue.redrive('rd_dlq', destination_queue => 'rd_other');
SELECT pg_temp.bag('rd_other') AS other;
ROLLBACK;
-- (not expired, they all go)
SELECT queue.redrive('rd_dlq');
SELECT pg_temp.bag('rd_a') AS a, pg_temp.bag('rd_b') AS b, pg_temp.bag('rd_dlq') AS dlq;

----------------------------------------------------------------------
-- FIFO: the same rules
----------------------------------------------------------------------
SELECT queue.create('rd_fdlq', fifo => true, retention => '1 minute') > 0 AS created;
SELECT queue.create('rd_fsrc', fifo => true, dead_letter_queue => 'rd_fdlq', max_receive_count => 1) > 0 AS created;
SELECT count(*) FROM queue.send_batch('rd_fsrc', ARRAY['f1', 'f2', 'f3'],
	message_group_ids => ARRAY['g', 'g', 'h'], deduplication_ids => ARRAY['f1', 'f2', 'f3']);
SELECT count(*) FROM queue.receive('rd_fsrc', 10, visibility_timeout => '0');
SELECT count(*) FROM queue.receive('rd_fsrc', 10, visibility_timeout => '0');
SELECT pg_temp.bag('rd_fdlq') AS fdlq;
SELECT queue.grant('rd_fdlq', 'queue_test_rd_manager', '{manage}');
SET ROLE queue_test_rd_manager;
SELECT pg_temp.err($$SELECT queue.redrive('rd_fdlq')$$);
RESET ROLE;
SELECT pg_temp.bag('rd_fdlq') AS fdlq, pg_temp.bag('rd_fsrc') AS fsrc;
BEGIN;
DO $$ BEGIN
	EXECUTE format('UPDATE %s SET sent_at = sent_at - interval ''2 minutes'' WHERE %sbody = ''f2''',
				   pg_temp.qt('rd_fdlq', 'q'), pg_temp.qk('rd_fdlq', 'q'));
END $$;
SELECT queue.redrive('rd_fdlq');
SELECT string_agg(body, ' ' ORDER BY message_id) AS fsrc FROM queue.peek('rd_fsrc');
ROLLBACK;
SELECT queue.grant('rd_fsrc', 'queue_test_rd_manager', '{send}');
SET ROLE queue_test_rd_manager;
SELECT queue.redrive('rd_fdlq');
RESET ROLE;
SELECT pg_temp.bag('rd_fdlq') AS fdlq, pg_temp.bag('rd_fsrc') AS fsrc;

----------------------------------------------------------------------
-- clean up
----------------------------------------------------------------------
SELECT queue.drop(queue_name, force => true) FROM queue.queues
WHERE queue_name LIKE 'rd\_%' ORDER BY queue_name DESC;
DROP OWNED BY queue_test_rd_manager;
DROP ROLE queue_test_rd_manager;

ALTER SYSTEM RESET queue.worker_enabled;
SELECT pg_reload_conf();
SELECT pg_temp.wait_workers(1) AS worker_back;
