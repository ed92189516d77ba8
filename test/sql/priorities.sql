-- priorities: 0 to 9, 9 first, oldest first within one; a send without one
-- takes the queue's default_priority (4 unless set); fair queues choose the
-- tenant first, then by priority; delays, visibility timeouts, retries, dead
-- letters and redrive keep a message's priority; peek shows it; FIFO queues
-- refuse priorities (DESIGN.md "Rate limits and priorities").
-- Runs in either layout (queue.default_storage).
CREATE EXTENSION IF NOT EXISTS queue;
SET client_min_messages = warning;

CREATE FUNCTION pg_temp.err(cmd text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
	EXECUTE cmd;
	RETURN 'ok';
EXCEPTION WHEN OTHERS THEN
	RETURN SQLSTATE || ': ' || SQLERRM;
END
$$;
-- the bodies a receive returns, in its order, with their priorities
CREATE FUNCTION pg_temp.take(q text, n int) RETURNS text
LANGUAGE sql AS $$
	SELECT coalesce(string_agg(body || ':' || priority, ' ' ORDER BY o), '-')
	FROM queue.receive(q, n) WITH ORDINALITY AS r(message_id, receipt, body, attributes,
		message_group_id, deduplication_id, sequence_number, receive_count, sent_at,
		first_received_at, visible_at, priority, o)
$$;

-- 1. Errors: 22023 naming the argument, nothing created, sent or changed.
SELECT queue.create('pq') > 0 AS created;
SELECT queue.create('pq.fifo', fifo => true, content_based_deduplication => true) > 0 AS created;
SELECT pg_temp.err($$SELECT queue.create('pq_bad', default_priority => 10)$$);
SELECT pg_temp.err($$SELECT queue.create('pq_bad', default_priority => -1)$$);
SELECT pg_temp.err($$SELECT queue.create('pq_bad.fifo', fifo => true, default_priority => 7)$$);
SELECT count(*) AS none_created FROM queue.queues WHERE queue_name LIKE 'pq_bad%';
SELECT pg_temp.err($$SELECT queue.send('pq', 'x', priority => 10)$$);
SELECT pg_temp.err($$SELECT queue.send('pq', 'x', priority => -1)$$);
SELECT pg_temp.err($$SELECT queue.send('pq', '{"a": 1}'::jsonb, priority => 99)$$);
SELECT pg_temp.err($$SELECT queue.send('pq.fifo', 'x', message_group_id => 'g', priority => 5)$$);
SELECT pg_temp.err($$SELECT queue.send_batch('pq', ARRAY['a', 'b'], priority => 12)$$);
SELECT pg_temp.err($$SELECT queue.send_batch('pq', ARRAY['a', 'b'], priorities => ARRAY[1, 10])$$);
SELECT pg_temp.err($$SELECT queue.send_batch('pq', ARRAY['a', 'b'], priorities => ARRAY[1])$$);
SELECT pg_temp.err($$SELECT queue.send_batch('pq', ARRAY['a', 'b'], priority => 1, priorities => ARRAY[1, 2])$$);
SELECT pg_temp.err($$SELECT queue.send_batch('pq.fifo', ARRAY['a'], message_group_ids => ARRAY['g'], priorities => ARRAY[4])$$);
SELECT pg_temp.err($$SELECT queue.alter('pq', default_priority => 10)$$);
SELECT pg_temp.err($$SELECT queue.alter('pq.fifo', default_priority => 3)$$);
SELECT pg_temp.err($$SELECT queue.create('pq', default_priority => 5)$$);
SELECT visible AS nothing_sent FROM queue.stats WHERE queue_name = 'pq';
SELECT queue_name, default_priority FROM queue.queues WHERE queue_name LIKE 'pq%' ORDER BY 1;

-- 2. A queue that never used priorities: every message is 4, oldest first.
SELECT count(*) FROM queue.send_batch('pq', ARRAY['a', 'b', 'c']);
SELECT pg_temp.take('pq', 10);
SELECT queue.purge('pq');

-- 3. Higher first, oldest first within a priority, the default in its place:
-- the first message is sent before the queue had any priority.
SELECT count(*) FROM queue.send('pq', 'default1');
SELECT count(*) FROM queue.send('pq', 'low1', priority => 1);
SELECT count(*) FROM queue.send('pq', 'high1', priority => 9);
SELECT count(*) FROM queue.send('pq', 'default2');
SELECT count(*) FROM queue.send('pq', 'low2', priority => 1);
SELECT count(*) FROM queue.send('pq', 'high2', priority => 9);
SELECT count(*) FROM queue.send('pq', 'five', priority => 5);
SELECT count(*) FROM queue.send('pq', 'zero', priority => 0);
SELECT count(*) FROM queue.send('pq', 'four', priority => 4);
SELECT body, priority FROM queue.peek('pq', 20);
SELECT pg_temp.take('pq', 3);
SELECT pg_temp.take('pq', 1);
SELECT pg_temp.take('pq', 10);
SELECT pg_temp.take('pq', 10);

-- 4. send_batch: one priority for the batch, or one per message (a null
-- entry takes the queue's default); default_priority set by alter.
SELECT queue.purge('pq');
SELECT count(*) FROM queue.send_batch('pq', ARRAY['b1', 'b2'], priority => 2);
SELECT count(*) FROM queue.send_batch('pq', ARRAY['p7', 'pnull', 'p8'], priorities => ARRAY[7, NULL, 8]);
SELECT queue.alter('pq', default_priority => 6);
SELECT default_priority FROM queue.queues WHERE queue_name = 'pq';
SELECT count(*) FROM queue.send('pq', 'six');
SELECT count(*) FROM queue.send('pq', '{"j": 1}'::jsonb, priority => 3);
SELECT count(*) FROM queue.send_batch('pq', ARRAY['{"k": 2}'::jsonb], priorities => ARRAY[9]);
SELECT pg_temp.take('pq', 10);
SELECT queue.alter('pq', default_priority => 4);

-- 5. Delays and visibility timeouts keep a priority: a delayed high message
-- comes first once visible; a message whose lease ran out comes back at its
-- priority, ahead of older lower ones.
SELECT queue.purge('pq');
SELECT count(*) FROM queue.send('pq', 'late9', priority => 9, delay => '300 ms');
SELECT count(*) FROM queue.send('pq', 'early2', priority => 2);
SELECT count(*) FROM queue.send('pq', 'early3', priority => 3);
SELECT pg_temp.take('pq', 1);
SELECT pg_sleep(0.4);
SELECT pg_temp.take('pq', 1);
SELECT count(*) FROM queue.send('pq', 'lease8', priority => 8);
SELECT body FROM queue.receive('pq', 1, visibility_timeout => '200 ms');
SELECT pg_sleep(0.3);
SELECT pg_temp.take('pq', 1);
SELECT pg_temp.take('pq', 5);

-- 6. Retries (a rolled-back receive), dead letters and redrive keep it.
SELECT queue.create('pq_dlq') > 0 AS created;
SELECT queue.create('pq_src', dead_letter_queue => 'pq_dlq', max_receive_count => 1) > 0 AS created;
SELECT count(*) FROM queue.send('pq_src', 's1', priority => 1);
SELECT count(*) FROM queue.send('pq_src', 's7', priority => 7);
SELECT count(*) FROM queue.send('pq_src', 's4');
BEGIN;
SELECT body, priority FROM queue.receive('pq_src', 1);
ROLLBACK;
SELECT body, priority, receive_count FROM queue.peek('pq_src', 10);
-- s7 was received once (rolled back: counted), the others now
SELECT body, priority FROM queue.receive('pq_src', 10, visibility_timeout => '0');
SELECT pg_temp.take('pq_src', 10);
SELECT body, priority FROM queue.peek('pq_dlq', 10);
SELECT queue.redrive('pq_dlq');
SELECT pg_temp.take('pq_src', 10);

-- 7. A fair queue chooses the tenant first, then by priority within it.
SELECT queue.create('pq_fair', max_in_flight_per_group => 2) > 0 AS created;
SELECT count(*) FROM queue.send('pq_fair', 'a-low', message_group_id => 'a', priority => 1);
SELECT count(*) FROM queue.send('pq_fair', 'a-high', message_group_id => 'a', priority => 8);
SELECT count(*) FROM queue.send('pq_fair', 'a-mid', message_group_id => 'a');
SELECT count(*) FROM queue.send('pq_fair', 'b-low', message_group_id => 'b', priority => 0);
SELECT count(*) FROM queue.send('pq_fair', 'b-high', message_group_id => 'b', priority => 9);
SELECT body, message_group_id, priority FROM queue.receive('pq_fair', 4) ORDER BY message_group_id, priority DESC;
SELECT pg_temp.take('pq_fair', 4);

-- 8. FIFO messages have no priority (null), in group order as ever.
SELECT count(*) FROM queue.send('pq.fifo', 'f1', message_group_id => 'g');
SELECT body, priority FROM queue.receive('pq.fifo', 1);

-- 9. A move between the layouts keeps each message's priority.
SELECT queue.create('pq_move') > 0 AS created;
SELECT count(*) FROM queue.send('pq_move', 'm4');
SELECT count(*) FROM queue.send('pq_move', 'm2', priority => 2);
SELECT count(*) FROM queue.send('pq_move', 'm8', priority => 8);
SELECT queue.alter('pq_move', dedicated => NOT dedicated) FROM queue.queues WHERE queue_name = 'pq_move';
SELECT string_agg(body || ':' || priority, ' ') FROM queue.peek('pq_move');
-- (a dedicated table made by the move has the partial visible_at index, 1.13)
SELECT to_regclass(format('queue_data.q%s_visible', queue_id)) IS NULL
	OR coalesce((SELECT pg_get_expr(i.indpred, i.indrelid) FROM pg_index i
		WHERE i.indexrelid = to_regclass(format('queue_data.q%s_visible', queue_id))) = '(priority IS NULL)', false)
	AS visible_index_partial
FROM queue.queues WHERE queue_name = 'pq_move';
SELECT queue.alter('pq_move', dedicated => NOT dedicated) FROM queue.queues WHERE queue_name = 'pq_move';
SELECT string_agg(body || ':' || priority, ' ') FROM queue.peek('pq_move');
-- (a dedicated table made by the move has the partial visible_at index, 1.13)
SELECT to_regclass(format('queue_data.q%s_visible', queue_id)) IS NULL
	OR coalesce((SELECT pg_get_expr(i.indpred, i.indrelid) FROM pg_index i
		WHERE i.indexrelid = to_regclass(format('queue_data.q%s_visible', queue_id))) = '(priority IS NULL)', false)
	AS visible_index_partial
FROM queue.queues WHERE queue_name = 'pq_move';
SELECT pg_temp.take('pq_move', 10);

-- 10. The plain statements read the visible_at index, which holds only the
-- messages stored without a priority (1.13); every other reader reads the
-- priorities' index too.  A transaction sees its own queue's first
-- priority at once (peek and receive); a rolled-back first priority leaves
-- the queue serving in order; a fair queue's tenant without a group id is
-- served by priority; queue.stats and the SQS endpoint's wait hint see a
-- queue whose only messages are prioritised.
SELECT queue.create('pq_first') > 0 AS created;
BEGIN;
SELECT count(*) FROM queue.send('pq_first', 'plain');
SELECT count(*) FROM queue.send('pq_first', 'first9', priority => 9);
SELECT string_agg(body || ':' || priority, ' ') FROM queue.peek('pq_first');
SELECT pg_temp.take('pq_first', 10);
COMMIT;
SELECT queue.create('pq_rb') > 0 AS created;
BEGIN;
SELECT count(*) FROM queue.send('pq_rb', 'rb9', priority => 9);
ROLLBACK;
SELECT count(*) FROM queue.send('pq_rb', 'p1');
SELECT count(*) FROM queue.send('pq_rb', 'p2', priority => 2);
SELECT count(*) FROM queue.send('pq_rb', 'p3');
SELECT pg_temp.take('pq_rb', 10);
SELECT queue.create('pq_fair0', max_in_flight_per_group => 1) > 0 AS created;
SELECT count(*) FROM queue.send('pq_fair0', 'u-low', priority => 1);
SELECT count(*) FROM queue.send('pq_fair0', 'u-mid');
SELECT count(*) FROM queue.send('pq_fair0', 'u-high', priority => 8);
SELECT count(*) FROM queue.send('pq_fair0', 'g5', message_group_id => 'g', priority => 5);
-- one in flight per tenant: each receive takes the head of each, and deletes it
SELECT string_agg(r.body || ':' || r.priority, ' ' ORDER BY r.message_group_id NULLS FIRST) AS got,
	   bool_and(queue.delete('pq_fair0', r.receipt)) AS deleted
FROM queue.receive('pq_fair0', 10) r;
SELECT string_agg(r.body || ':' || r.priority, ' ' ORDER BY r.message_group_id NULLS FIRST) AS got,
	   bool_and(queue.delete('pq_fair0', r.receipt)) AS deleted
FROM queue.receive('pq_fair0', 10) r;
SELECT pg_temp.take('pq_fair0', 10);
SELECT queue.create('pq_only') > 0 AS created;
SELECT count(*) FROM queue.send('pq_only', 'o7', priority => 7, delay => '1 hour');
SELECT count(*) FROM queue.send('pq_only', 'o3', priority => 3);
SELECT visible, delayed, oldest_visible_age IS NOT NULL AS has_oldest FROM queue.stats WHERE queue_name = 'pq_only';
SELECT next_visible_at > now() + interval '59 minutes' AS next_is_the_delayed
FROM queue._wait_hint('pq_only');
SELECT queue.drop('pq_first'); SELECT queue.drop('pq_rb'); SELECT queue.drop('pq_fair0');
SELECT queue.drop('pq_only');

SELECT queue.drop('pq'); SELECT queue.drop('pq.fifo'); SELECT queue.drop('pq_fair');
SELECT queue.drop('pq_move');
SELECT queue.drop('pq_src'); SELECT queue.drop('pq_dlq');
