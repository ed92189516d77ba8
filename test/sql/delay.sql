-- delay: a delayed message is not receivable until its delay passes; the
-- queue's delay applies unless a send gives its own; peek and stats show
-- delayed messages.
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

----------------------------------------------------------------------
-- per-message delay on a queue without one
----------------------------------------------------------------------
SELECT queue.create('delay_q') > 0 AS created;
SELECT count(*) FROM queue.send('delay_q', 'later', delay => '1 hour');
SELECT count(*) FROM queue.send('delay_q', 'now');
SELECT count(*) FROM queue.send('delay_q', 'zero delay', delay => '0');
SELECT pg_temp.depth('delay_q');
-- peek shows it, last, with receive_count 0 and visible_at in the future
SELECT body, receive_count, visible_at > now() + interval '59 minutes' AS delayed
FROM queue.peek('delay_q');
-- receive does not get it
SELECT body FROM queue.receive('delay_q', 10, visibility_timeout => '1 hour') ORDER BY message_id;
SELECT count(*) FROM queue.receive('delay_q', 10);
SELECT pg_temp.depth('delay_q');
SELECT queue.purge('delay_q');

-- a batch's delay applies to each of its messages
SELECT count(*) FROM queue.send_batch('delay_q', ARRAY['b1', 'b2'], delay => '1 hour');
SELECT pg_temp.depth('delay_q');
SELECT count(*) FROM queue.receive('delay_q', 10);
SELECT queue.purge('delay_q');

-- the delay passes: the message is delivered
SELECT count(*) FROM queue.send('delay_q', 'soon', delay => '1 second');
SELECT count(*) FROM queue.receive('delay_q');
SELECT pg_temp.depth('delay_q');
SELECT pg_sleep(1.1);
SELECT pg_temp.depth('delay_q');
SELECT body, receive_count FROM queue.receive('delay_q', visibility_timeout => '1 hour');
SELECT pg_temp.depth('delay_q');
SELECT queue.purge('delay_q');

-- delay may be as long as the retention period (scheduled messages), no longer
SELECT count(*) FROM queue.send('delay_q', 'four days', delay => '4 days');
SELECT pg_temp.err($$SELECT queue.send('delay_q', 'too late', delay => '4 days 1 second')$$);
SELECT pg_temp.err($$SELECT queue.send('delay_q', 'negative', delay => '-1 second')$$);
SELECT pg_temp.err($$SELECT queue.send_batch('delay_q', ARRAY['a', 'b'], delay => '5 days')$$);
SELECT pg_temp.err($$SELECT queue.send_batch('delay_q', ARRAY['a', 'b'], delay => '-1 second')$$);
SELECT body FROM queue.peek('delay_q');

----------------------------------------------------------------------
-- the queue's delay
----------------------------------------------------------------------
SELECT queue.create('delay_queue', delay => '1 hour', retention => '1 day') > 0 AS created;
SELECT count(*) FROM queue.send('delay_queue', 'queue delay');
SELECT count(*) FROM queue.send_batch('delay_queue', ARRAY['batch 1', 'batch 2']);
-- a send's own delay wins over the queue's, zero included
SELECT count(*) FROM queue.send('delay_queue', 'own zero delay', delay => '0');
SELECT count(*) FROM queue.send('delay_queue', 'own longer delay', delay => '2 hours');
SELECT pg_temp.depth('delay_queue');
SELECT body, visible_at > now() + interval '59 minutes' AS delayed,
	   visible_at > now() + interval '119 minutes' AS delayed_2h
FROM queue.peek('delay_queue');
SELECT body FROM queue.receive('delay_queue', 10);
SELECT count(*) FROM queue.receive('delay_queue', 10);
-- the per-message bound is the queue's retention
SELECT count(*) FROM queue.send('delay_queue', 'one day', delay => '1 day');
SELECT pg_temp.err($$SELECT queue.send('delay_queue', 'x', delay => '1 day 1 second')$$);
SELECT pg_temp.depth('delay_queue');

-- the queue's delay is bounded by its retention too
SELECT pg_temp.err($$SELECT queue.create('delay_bad', delay => '-1 second')$$);
SELECT pg_temp.err($$SELECT queue.create('delay_bad', delay => '2 days', retention => '1 day')$$);
SELECT queue.create('delay_max', delay => '1 day', retention => '1 day') > 0 AS created;
SELECT pg_temp.err($$SELECT queue.alter('delay_max', delay => '1 day 1 second')$$);
SELECT pg_temp.err($$SELECT queue.alter('delay_max', retention => '12 hours')$$);
SELECT pg_temp.err($$SELECT queue.alter('delay_max', delay => '-1 second')$$);
SELECT delay, retention FROM queue.queues WHERE queue_name = 'delay_max';
SELECT count(*) FROM queue.queues WHERE queue_name = 'delay_bad';

-- alter removes the queue's delay for later sends; messages already
-- delayed stay delayed
SELECT queue.alter('delay_queue', delay => '0');
SELECT count(*) FROM queue.send('delay_queue', 'after alter');
SELECT body FROM queue.receive('delay_queue', 10);
SELECT pg_temp.depth('delay_queue');

SELECT queue.drop('delay_q'), queue.drop('delay_queue'), queue.drop('delay_max');
