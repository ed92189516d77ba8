-- retention: a message older than the queue's retention is expired; it is
-- never delivered or shown, even before anything deletes it.  Waiting a
-- minute is too slow for a test, so messages are aged by moving their
-- sent_at back in the queue's table (superuser only).
CREATE EXTENSION IF NOT EXISTS queue;

CREATE FUNCTION pg_temp.err(cmd text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
	EXECUTE cmd;
	RETURN 'ok';
EXCEPTION WHEN OTHERS THEN
	RETURN SQLSTATE || ': ' || regexp_replace(SQLERRM, 'message \d+', 'message N', 'g');
END
$$;
CREATE FUNCTION pg_temp.depth(q text) RETURNS text LANGUAGE sql AS $$
	SELECT format('visible=%s in_flight=%s delayed=%s', visible, in_flight, delayed)
	FROM queue.stats WHERE queue_name = q
$$;
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

-- age(queue, body, by): move one message's sent_at back.
CREATE FUNCTION pg_temp.age(q text, b text, by interval) RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
	n bigint;
BEGIN
	EXECUTE format('UPDATE %s SET sent_at = sent_at - $1 WHERE %sbody = $2',
				   pg_temp.qt(q, 'q'), pg_temp.qk(q, 'q'))
		USING by, b;
	GET DIAGNOSTICS n = ROW_COUNT;
	RETURN n;
END
$$;

SELECT queue.create('ret_q', retention => '1 minute') > 0 AS created;
SELECT retention FROM queue.queues WHERE queue_name = 'ret_q';

-- an expired visible message
SELECT count(*) FROM queue.send_batch('ret_q', ARRAY['old', 'new']);
SELECT pg_temp.age('ret_q', 'old', '61 seconds');
SELECT body FROM queue.peek('ret_q');
SELECT pg_temp.depth('ret_q');
SELECT now() - oldest_sent_at < interval '1 minute' AS oldest_is_unexpired
FROM queue.stats WHERE queue_name = 'ret_q';
SELECT body FROM queue.receive('ret_q', 10, visibility_timeout => '0');
-- just inside the retention period it is still there
SELECT pg_temp.age('ret_q', 'new', '50 seconds');
SELECT body FROM queue.receive('ret_q', 10, visibility_timeout => '0');
SELECT queue.purge('ret_q') >= 0 AS purged;

-- an expired message in flight does not come back when its lease ends
SELECT count(*) FROM queue.send_batch('ret_q', ARRAY['leased', 'other']);
SELECT body FROM queue.receive('ret_q', 10, visibility_timeout => '1 second') ORDER BY message_id;
SELECT pg_temp.age('ret_q', 'leased', '2 minutes');
SELECT pg_sleep(1.1);
SELECT body FROM queue.peek('ret_q');
SELECT body FROM queue.receive('ret_q', 10, visibility_timeout => '1 hour');
SELECT pg_temp.depth('ret_q');
SELECT queue.purge('ret_q') >= 0 AS purged;

-- a delayed message that expires before its delay passes
SELECT count(*) FROM queue.send('ret_q', 'delayed', delay => '30 seconds');
SELECT pg_temp.age('ret_q', 'delayed', '2 minutes');
SELECT count(*) FROM queue.peek('ret_q');
SELECT pg_temp.depth('ret_q');
SELECT queue.purge('ret_q') >= 0 AS purged;

-- retention is read at receive time: shortening it expires older messages
SELECT queue.create('ret_long', retention => '1 day') > 0 AS created;
SELECT count(*) FROM queue.send_batch('ret_long', ARRAY['hour old', 'fresh']);
SELECT pg_temp.age('ret_long', 'hour old', '1 hour');
SELECT body FROM queue.peek('ret_long') ORDER BY message_id;
SELECT queue.alter('ret_long', retention => '30 minutes');
SELECT body FROM queue.peek('ret_long');
SELECT pg_temp.depth('ret_long');
SELECT body FROM queue.receive('ret_long', 10, visibility_timeout => '0');

-- retention bounds: 1 minute to 14 days
SELECT pg_temp.err($$SELECT queue.create('ret_bad', retention => '59 seconds')$$);
SELECT pg_temp.err($$SELECT queue.create('ret_bad', retention => '14 days 1 second')$$);
SELECT pg_temp.err($$SELECT queue.alter('ret_long', retention => '59 seconds')$$);
SELECT pg_temp.err($$SELECT queue.alter('ret_long', retention => '15 days')$$);
SELECT queue.create('ret_max', retention => '14 days') > 0 AS created;
SELECT count(*) FROM queue.queues WHERE queue_name = 'ret_bad';
SELECT retention FROM queue.queues WHERE queue_name = 'ret_long';

SELECT queue.drop('ret_q'), queue.drop('ret_long'), queue.drop('ret_max');
