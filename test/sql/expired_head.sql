-- expired_head: correctness never waits for a sweep.  Expired messages
-- (sent_at + retention passed) that the worker has not deleted yet, at the
-- head of a queue or of FIFO groups, never make a receive or a peek come back
-- empty while another message is available.  The worker is stopped for the
-- test, so nothing sweeps them; messages are aged by moving their sent_at
-- back in the queue's table (superuser only), as retention.sql does.
CREATE EXTENSION IF NOT EXISTS queue;

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

CREATE FUNCTION pg_temp.age(q text, by interval, pattern text) RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
	n bigint;
BEGIN
	EXECUTE format('UPDATE %s SET sent_at = sent_at - $1 WHERE %sbody LIKE $2',
				   pg_temp.qt(q, 'q'), pg_temp.qk(q, 'q'))
		USING by, pattern;
	GET DIAGNOSTICS n = ROW_COUNT;
	RETURN n;
END
$$;
CREATE FUNCTION pg_temp.rows(q text) RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
	n bigint;
BEGIN
	EXECUTE format('SELECT count(*) FROM %s WHERE %strue',
				   pg_temp.qt(q, 'q'), pg_temp.qk(q, 'q')) INTO n;
	RETURN n;
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

ALTER SYSTEM SET queue.worker_enabled = off;
SELECT pg_reload_conf();
SELECT pg_temp.wait_workers(0) AS worker_stopped;

----------------------------------------------------------------------
-- FIFO: the oldest groups hold only expired messages
----------------------------------------------------------------------
SELECT queue.create('eh_fifo', fifo => true, content_based_deduplication => true,
	retention => '1 minute') > 0 AS created;
SELECT count(*) FROM queue.send_batch('eh_fifo', ARRAY['old1', 'old2', 'old3', 'old4a', 'old4b'],
	message_group_ids => ARRAY['g1', 'g2', 'g3', 'g4', 'g4']);
SELECT count(*) FROM queue.send_batch('eh_fifo', ARRAY['fresh1', 'fresh2'],
	message_group_ids => ARRAY['g8', 'g9']);
SELECT pg_temp.age('eh_fifo', '2 minutes', 'old%');
SELECT body FROM queue.peek('eh_fifo', 1);
SELECT body FROM queue.peek('eh_fifo') ORDER BY body;
-- one message asked for: the first group with one gives it
SELECT body FROM queue.receive('eh_fifo', visibility_timeout => '0');
-- as many as there are groups with expired heads, and more
SELECT body FROM queue.receive('eh_fifo', 4, visibility_timeout => '0') ORDER BY body;
SELECT body FROM queue.receive('eh_fifo', 10, visibility_timeout => '0') ORDER BY body;
-- inside a transaction block (one group per statement)
BEGIN;
SELECT body FROM queue.receive('eh_fifo', visibility_timeout => '0');
SELECT body FROM queue.receive('eh_fifo', 10, visibility_timeout => '0') ORDER BY body;
COMMIT;
-- a waiting receive answers at once
SELECT body FROM queue.receive('eh_fifo', wait => '1 second', visibility_timeout => '0');
SELECT queue.purge('eh_fifo') >= 0 AS purged;
-- a group whose head expired delivers the message behind it
SELECT count(*) FROM queue.send_batch('eh_fifo', ARRAY['old6', 'young6', 'fresh7'],
	message_group_ids => ARRAY['g0', 'g0', 'g7']);
SELECT pg_temp.age('eh_fifo', '2 minutes', 'old6');
SELECT body FROM queue.receive('eh_fifo', visibility_timeout => '0');
-- nothing swept them: the expired rows are all still there
SELECT pg_temp.rows('eh_fifo');

----------------------------------------------------------------------
-- FIFO with a dead-letter queue (its own receive statement)
----------------------------------------------------------------------
SELECT queue.create('eh_fifo_dlq', fifo => true) > 0 AS created;
SELECT queue.create('eh_fifo_d', fifo => true, content_based_deduplication => true,
	retention => '1 minute', dead_letter_queue => 'eh_fifo_dlq', max_receive_count => 5) > 0 AS created;
SELECT count(*) FROM queue.send_batch('eh_fifo_d', ARRAY['old1', 'old2', 'old3', 'fresh'],
	message_group_ids => ARRAY['g1', 'g2', 'g3', 'g4']);
SELECT pg_temp.age('eh_fifo_d', '2 minutes', 'old%');
SELECT body FROM queue.receive('eh_fifo_d', visibility_timeout => '0');
SELECT body FROM queue.receive('eh_fifo_d', 3, visibility_timeout => '0');
BEGIN;
SELECT body FROM queue.receive('eh_fifo_d', visibility_timeout => '0');
COMMIT;

----------------------------------------------------------------------
-- standard queues: expired rows first in the visible_at index
----------------------------------------------------------------------
SELECT queue.create('eh_std', retention => '1 minute') > 0 AS created;
SELECT count(*) FROM queue.send_batch('eh_std', ARRAY['old1', 'old2', 'old3', 'old4']);
SELECT count(*) FROM queue.send_batch('eh_std', ARRAY['fresh1', 'fresh2']);
SELECT pg_temp.age('eh_std', '2 minutes', 'old%');
SELECT body FROM queue.peek('eh_std', 1);
SELECT body FROM queue.receive('eh_std', visibility_timeout => '0');
SELECT body FROM queue.receive('eh_std', 4, visibility_timeout => '0') ORDER BY body;
BEGIN;
SELECT body FROM queue.receive('eh_std', visibility_timeout => '0');
COMMIT;
SELECT queue.create('eh_std_dlq') > 0 AS created;
SELECT queue.create('eh_std_d', retention => '1 minute', dead_letter_queue => 'eh_std_dlq',
	max_receive_count => 5) > 0 AS created;
SELECT count(*) FROM queue.send_batch('eh_std_d', ARRAY['old1', 'old2', 'old3', 'fresh']);
SELECT pg_temp.age('eh_std_d', '2 minutes', 'old%');
SELECT body FROM queue.receive('eh_std_d', visibility_timeout => '0');
SELECT body FROM queue.receive('eh_std_d', 3, visibility_timeout => '0');
SELECT pg_temp.rows('eh_std'), pg_temp.rows('eh_std_d');

SELECT queue.drop('eh_fifo'), queue.drop('eh_fifo_d'), queue.drop('eh_fifo_dlq'),
	queue.drop('eh_std'), queue.drop('eh_std_d'), queue.drop('eh_std_dlq');

ALTER SYSTEM RESET queue.worker_enabled;
SELECT pg_reload_conf();
SELECT pg_temp.wait_workers(1) AS worker_back;
