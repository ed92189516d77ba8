-- fifo: FIFO queues.  Sends need a message group (and a deduplication id
-- unless content-based deduplication is on), take no per-message delay and
-- get increasing sequence numbers; receives follow SQS's FIFO delivery
-- logic: a group with a message in flight gives nothing to anyone, one
-- receive takes as many of one group as it can in order and then fills the
-- batch from other groups, groups are served oldest head first, and
-- visibility expiry puts in-flight messages back at the head of their
-- group.  Output is bodies, booleans and counts, never ids, receipts or
-- timestamps.
CREATE EXTENSION IF NOT EXISTS queue;

-- err(sql): run a statement, show "SQLSTATE: message" instead of failing.
CREATE FUNCTION pg_temp.err(cmd text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
	EXECUTE cmd;
	RETURN 'ok';
EXCEPTION WHEN OTHERS THEN
	RETURN SQLSTATE || ': ' || regexp_replace(SQLERRM, 'message \d+', 'message N', 'g');
END
$$;

-- depth(queue): visible / in flight / delayed, from queue.stats.
CREATE FUNCTION pg_temp.depth(q text) RETURNS text LANGUAGE sql AS $$
	SELECT format('visible=%s in_flight=%s delayed=%s', visible, in_flight, delayed)
	FROM queue.stats WHERE queue_name = q
$$;

-- held: the latest receipt of each body received (bodies are unique per
-- queue in this file), so later steps can settle messages by body.
CREATE TEMP TABLE held (q text, body text, receipt text, PRIMARY KEY (q, body));

-- recv(queue, n, vt): receive up to n messages, remember their receipts and
-- show them in the order the receive returned them.
CREATE FUNCTION pg_temp.recv(q text, n int, vt interval DEFAULT '1 hour')
	RETURNS TABLE (body text, message_group_id text, receive_count int)
	LANGUAGE sql AS $$
	WITH r AS (
		SELECT * FROM queue.receive(q, max_messages => n, visibility_timeout => vt)
			WITH ORDINALITY AS m(message_id, receipt, body, attributes, message_group_id,
				deduplication_id, sequence_number, receive_count, sent_at,
				first_received_at, visible_at, o)),
	ins AS (
		INSERT INTO held SELECT q, r.body, r.receipt FROM r
		ON CONFLICT ON CONSTRAINT held_pkey DO UPDATE SET receipt = excluded.receipt)
	SELECT r.body, r.message_group_id, r.receive_count FROM r ORDER BY r.o
$$;

-- bodies(queue, n, vt): the bodies one receive returns, in its order.
CREATE FUNCTION pg_temp.bodies(q text, n int, vt interval DEFAULT '1 hour')
	RETURNS text LANGUAGE sql AS $$
	SELECT coalesce(string_agg(body, ' '), '(none)') FROM pg_temp.recv(q, n, vt)
$$;

-- del(queue, body) / vis(queue, body, timeout): settle by body.
CREATE FUNCTION pg_temp.del(q text, b text) RETURNS boolean LANGUAGE sql AS $$
	SELECT queue.delete(q, h.receipt) FROM held h WHERE h.q = $1 AND h.body = b
$$;
CREATE FUNCTION pg_temp.vis(q text, b text, vt interval) RETURNS text LANGUAGE sql AS $$
	SELECT pg_temp.err(format('SELECT queue.change_visibility(%L, %L, %L)', q, h.receipt, vt))
	FROM held h WHERE h.q = $1 AND h.body = b
$$;

----------------------------------------------------------------------
-- create
----------------------------------------------------------------------
SELECT queue.create('fifo_q', fifo => true) > 0 AS created;
SELECT fifo, content_based_deduplication, deduplication_scope
FROM queue.queues WHERE queue_name = 'fifo_q';
-- idempotent with the same attributes; a standard queue of that name is not
SELECT queue.create('fifo_q', fifo => true) = queue_id AS idempotent
FROM queue.queues WHERE queue_name = 'fifo_q';
SELECT pg_temp.err($$SELECT queue.create('fifo_q')$$);

----------------------------------------------------------------------
-- send rules: 22023 and nothing enqueued
----------------------------------------------------------------------
-- no message_group_id
SELECT pg_temp.err($$SELECT queue.send('fifo_q', 'x', deduplication_id => 'd1')$$);
SELECT pg_temp.err($$SELECT queue.send('fifo_q', '{"a": 1}'::jsonb, deduplication_id => 'd1')$$);
SELECT pg_temp.err($$SELECT queue.send_batch('fifo_q', ARRAY['x', 'y'],
	deduplication_ids => ARRAY['d1', 'd2'])$$);
-- one entry of a batch without a group: the whole batch fails
SELECT pg_temp.err($$SELECT queue.send_batch('fifo_q', ARRAY['x', 'y'],
	message_group_ids => ARRAY['g', NULL], deduplication_ids => ARRAY['d1', 'd2'])$$);
-- no deduplication_id without content_based_deduplication
SELECT pg_temp.err($$SELECT queue.send('fifo_q', 'x', message_group_id => 'g')$$);
SELECT pg_temp.err($$SELECT queue.send_batch('fifo_q', ARRAY['x', 'y'],
	message_group_ids => ARRAY['g', 'g'], deduplication_ids => ARRAY['d1', NULL])$$);
-- a per-message delay is an error: the queue's delay applies
SELECT pg_temp.err($$SELECT queue.send('fifo_q', 'x', delay => '5 seconds',
	message_group_id => 'g', deduplication_id => 'd1')$$);
SELECT pg_temp.err($$SELECT queue.send_batch('fifo_q', ARRAY['x'], delay => '5 seconds',
	message_group_ids => ARRAY['g'], deduplication_ids => ARRAY['d1'])$$);
-- group ids are 1 to 128 printable characters without spaces
SELECT pg_temp.err($$SELECT queue.send('fifo_q', 'x', message_group_id => '',
	deduplication_id => 'd1')$$);
SELECT pg_temp.err($$SELECT queue.send('fifo_q', 'x', message_group_id => 'a b',
	deduplication_id => 'd1')$$);
SELECT pg_temp.err(format('SELECT queue.send(%L, %L, message_group_id => %L, deduplication_id => %L)',
	'fifo_q', 'x', repeat('g', 129), 'd1'));
SELECT pg_temp.err(format('SELECT queue.send(%L, %L, message_group_id => %L, deduplication_id => %L)',
	'fifo_q', 'x', repeat('g', 128), 'd-128')) AS group_128;
SELECT count(*) FROM queue.peek('fifo_q');
SELECT queue.purge('fifo_q');
SELECT pg_temp.depth('fifo_q');

----------------------------------------------------------------------
-- sequence numbers increase within the queue, across groups and calls
----------------------------------------------------------------------
CREATE TEMP TABLE seqs (n serial, message_id bigint, sequence_number bigint, duplicate boolean);
INSERT INTO seqs (message_id, sequence_number, duplicate)
	SELECT * FROM queue.send('fifo_q', 's1', message_group_id => 'a', deduplication_id => 's1');
INSERT INTO seqs (message_id, sequence_number, duplicate)
	SELECT * FROM queue.send('fifo_q', 's2', message_group_id => 'b', deduplication_id => 's2');
INSERT INTO seqs (message_id, sequence_number, duplicate)
	SELECT message_id, sequence_number, duplicate
	FROM queue.send_batch('fifo_q', ARRAY['s3', 's4', 's5'],
		message_group_ids => ARRAY['b', 'a', 'c'], deduplication_ids => ARRAY['s3', 's4', 's5'])
	ORDER BY ordinal;
INSERT INTO seqs (message_id, sequence_number, duplicate)
	SELECT * FROM queue.send('fifo_q', 's6', message_group_id => 'a', deduplication_id => 's6');
SELECT count(*) AS sends, count(sequence_number) AS with_seq,
	   bool_and(NOT duplicate) AS none_duplicate,
	   bool_and(sequence_number > prev) AS increasing
FROM (SELECT *, lag(sequence_number) OVER (ORDER BY n) AS prev FROM seqs) s;
-- receive and peek report the sequence number the send returned
SELECT count(*) AS peeked, bool_and(p.sequence_number = s.sequence_number) AS same_seq
FROM queue.peek('fifo_q') p JOIN seqs s USING (message_id);
SELECT bool_and(r.sequence_number = s.sequence_number) AS same_seq,
	   string_agg(r.body, ' ' ORDER BY r.sequence_number) AS bodies
FROM queue.receive('fifo_q', 10) r JOIN seqs s USING (message_id);
-- a standard queue has no sequence numbers
SELECT queue.create('fifo_std') > 0 AS created;
SELECT sequence_number IS NULL AS no_seq FROM queue.send('fifo_std', 'x');
SELECT sequence_number IS NULL AS no_seq FROM queue.receive('fifo_std');
SELECT queue.drop('fifo_std');
SELECT queue.purge('fifo_q');

----------------------------------------------------------------------
-- SQS scenario 1: five messages of one group come in order, and nothing
-- more of that group while some are in flight
----------------------------------------------------------------------
SELECT queue.create('fifo_s1', fifo => true) > 0 AS created;
SELECT ordinal, sequence_number IS NOT NULL AS has_seq, duplicate
FROM queue.send_batch('fifo_s1', ARRAY['m1', 'm2', 'm3', 'm4', 'm5'],
	message_group_ids => ARRAY['g', 'g', 'g', 'g', 'g'],
	deduplication_ids => ARRAY['m1', 'm2', 'm3', 'm4', 'm5']);
SELECT * FROM pg_temp.recv('fifo_s1', 10);
-- the group is in flight: a second receive gets nothing
SELECT * FROM pg_temp.recv('fifo_s1', 10);
SELECT pg_temp.depth('fifo_s1');
-- a smaller batch: m1..m3 in flight, m4 and m5 visible but held back
SELECT queue.purge('fifo_s1');
SELECT count(*) FROM queue.send_batch('fifo_s1', ARRAY['n1', 'n2', 'n3', 'n4', 'n5'],
	message_group_ids => ARRAY['g', 'g', 'g', 'g', 'g'],
	deduplication_ids => ARRAY['n1', 'n2', 'n3', 'n4', 'n5']);
SELECT * FROM pg_temp.recv('fifo_s1', 3);
SELECT pg_temp.depth('fifo_s1');
SELECT pg_temp.bodies('fifo_s1', 10) AS second_receive;
-- messages sent to the group meanwhile wait too
SELECT count(*) FROM queue.send('fifo_s1', 'n6', message_group_id => 'g', deduplication_id => 'n6');
SELECT pg_temp.bodies('fifo_s1', 10) AS third_receive;
-- deleting some but not all of the in-flight messages keeps the group blocked
SELECT pg_temp.del('fifo_s1', 'n1'), pg_temp.del('fifo_s1', 'n3');
SELECT pg_temp.bodies('fifo_s1', 10) AS after_partial_delete;
-- deleting the last one unblocks the group: the rest come in order
SELECT pg_temp.del('fifo_s1', 'n2');
SELECT * FROM pg_temp.recv('fifo_s1', 10);
SELECT pg_temp.del('fifo_s1', 'n4'), pg_temp.del('fifo_s1', 'n5'), pg_temp.del('fifo_s1', 'n6');
SELECT pg_temp.bodies('fifo_s1', 10) AS empty;
SELECT pg_temp.depth('fifo_s1');
SELECT queue.drop('fifo_s1');

----------------------------------------------------------------------
-- SQS scenario 2: groups A and B serve two consumers in parallel
----------------------------------------------------------------------
SELECT queue.create('fifo_s2', fifo => true) > 0 AS created;
SELECT count(*) FROM queue.send_batch('fifo_s2', ARRAY['a1', 'a2', 'a3', 'b1', 'b2'],
	message_group_ids => ARRAY['A', 'A', 'A', 'B', 'B'],
	deduplication_ids => ARRAY['a1', 'a2', 'a3', 'b1', 'b2']);
-- consumer 1 takes two of A; A is now blocked
SELECT * FROM pg_temp.recv('fifo_s2', 2);
-- consumer 2 gets B's messages, not a3
SELECT * FROM pg_temp.recv('fifo_s2', 2);
-- a third consumer gets nothing: both groups are in flight
SELECT pg_temp.bodies('fifo_s2', 10) AS third_consumer;
-- consumer 2 finishes B; A stays blocked by consumer 1
SELECT pg_temp.del('fifo_s2', 'b1'), pg_temp.del('fifo_s2', 'b2');
SELECT pg_temp.bodies('fifo_s2', 10) AS while_a_in_flight;
-- consumer 1 finishes its two: a3 is next
SELECT pg_temp.del('fifo_s2', 'a1'), pg_temp.del('fifo_s2', 'a2');
SELECT * FROM pg_temp.recv('fifo_s2', 10);
SELECT queue.drop('fifo_s2');

----------------------------------------------------------------------
-- SQS scenario 3: seven of A and three of B fill one batch of ten, each
-- group in order, A first since its head is older
----------------------------------------------------------------------
SELECT queue.create('fifo_s3', fifo => true) > 0 AS created;
SELECT count(*) FROM queue.send_batch('fifo_s3',
	ARRAY['a1', 'a2', 'a3', 'a4', 'a5', 'a6', 'a7'],
	message_group_ids => array_fill('A'::text, ARRAY[7]),
	deduplication_ids => ARRAY['a1', 'a2', 'a3', 'a4', 'a5', 'a6', 'a7']);
SELECT count(*) FROM queue.send_batch('fifo_s3', ARRAY['b1', 'b2', 'b3'],
	message_group_ids => array_fill('B'::text, ARRAY[3]),
	deduplication_ids => ARRAY['b1', 'b2', 'b3']);
SELECT * FROM pg_temp.recv('fifo_s3', 10);
SELECT pg_temp.depth('fifo_s3');
SELECT pg_temp.bodies('fifo_s3', 10) AS second_receive;
SELECT queue.purge('fifo_s3');
-- sent interleaved, one receive still takes a group whole, then the next
SELECT count(*) FROM queue.send_batch('fifo_s3',
	ARRAY['x1', 'y1', 'x2', 'y2', 'x3', 'z1', 'y3', 'x4'],
	message_group_ids => ARRAY['X', 'Y', 'X', 'Y', 'X', 'Z', 'Y', 'X'],
	deduplication_ids => ARRAY['x1', 'y1', 'x2', 'y2', 'x3', 'z1', 'y3', 'x4']);
SELECT pg_temp.bodies('fifo_s3', 10) AS one_batch;
SELECT queue.purge('fifo_s3');
-- a batch smaller than the first group: only that group
SELECT count(*) FROM queue.send_batch('fifo_s3',
	ARRAY['x1', 'y1', 'x2', 'y2', 'x3', 'z1', 'y3', 'x4'],
	message_group_ids => ARRAY['X', 'Y', 'X', 'Y', 'X', 'Z', 'Y', 'X'],
	deduplication_ids => ARRAY['x1b', 'y1b', 'x2b', 'y2b', 'x3b', 'z1b', 'y3b', 'x4b']);
SELECT pg_temp.bodies('fifo_s3', 3) AS batch_of_3,
	   pg_temp.bodies('fifo_s3', 3) AS next_batch_of_3,
	   pg_temp.bodies('fifo_s3', 3) AS last_batch_of_3,
	   pg_temp.bodies('fifo_s3', 3) AS nothing_left;
SELECT queue.drop('fifo_s3');

----------------------------------------------------------------------
-- order within a group: one transaction's sends in call order, batches
-- in array order
----------------------------------------------------------------------
SELECT queue.create('fifo_order', fifo => true) > 0 AS created;
BEGIN;
SELECT count(*) FROM queue.send('fifo_order', 't1', message_group_id => 'g', deduplication_id => 't1');
SELECT count(*) FROM queue.send_batch('fifo_order', ARRAY['t2', 't3'],
	message_group_ids => ARRAY['g', 'g'], deduplication_ids => ARRAY['t2', 't3']);
SELECT count(*) FROM queue.send('fifo_order', 't4', message_group_id => 'g', deduplication_id => 't4');
COMMIT;
-- a rolled-back send leaves no gap in the group's order
BEGIN;
SELECT count(*) FROM queue.send('fifo_order', 'gone', message_group_id => 'g', deduplication_id => 'gone');
ROLLBACK;
SELECT count(*) FROM queue.send('fifo_order', 't5', message_group_id => 'g', deduplication_id => 't5');
SELECT pg_temp.bodies('fifo_order', 10) AS in_order;
SELECT queue.drop('fifo_order');

----------------------------------------------------------------------
-- visibility expiry puts in-flight messages back at the head of their
-- group, in order
----------------------------------------------------------------------
SELECT queue.create('fifo_vis', fifo => true) > 0 AS created;
SELECT count(*) FROM queue.send_batch('fifo_vis', ARRAY['v1', 'v2', 'v3', 'v4'],
	message_group_ids => array_fill('g'::text, ARRAY[4]),
	deduplication_ids => ARRAY['v1', 'v2', 'v3', 'v4']);
-- a lease of 0: the two are back at once, ahead of v3 and v4
SELECT * FROM pg_temp.recv('fifo_vis', 2, vt => '0');
SELECT pg_temp.depth('fifo_vis');
-- and a message sent meanwhile goes behind them
SELECT count(*) FROM queue.send('fifo_vis', 'v5', message_group_id => 'g', deduplication_id => 'v5');
SELECT * FROM pg_temp.recv('fifo_vis', 3);
SELECT pg_temp.bodies('fifo_vis', 10) AS blocked;
-- change_visibility to 0 of all of them: back at the head, in order
SELECT pg_temp.vis('fifo_vis', 'v1', '0'), pg_temp.vis('fifo_vis', 'v2', '0'),
	   pg_temp.vis('fifo_vis', 'v3', '0');
SELECT * FROM pg_temp.recv('fifo_vis', 10);
SELECT pg_temp.depth('fifo_vis');
-- change_visibility of one in-flight message while the others of its
-- group stay in flight: the group stays blocked
SELECT pg_temp.vis('fifo_vis', 'v1', '0');
SELECT pg_temp.bodies('fifo_vis', 10) AS v1_back_v2_to_v5_in_flight;
SELECT pg_temp.vis('fifo_vis', 'v2', '0'), pg_temp.vis('fifo_vis', 'v3', '0'),
	   pg_temp.vis('fifo_vis', 'v4', '0');
SELECT pg_temp.bodies('fifo_vis', 10) AS v5_in_flight;
-- the last one back: the group starts again from its head
SELECT pg_temp.vis('fifo_vis', 'v5', '0');
SELECT * FROM pg_temp.recv('fifo_vis', 2);
-- extending a lease keeps the group blocked
SELECT pg_temp.vis('fifo_vis', 'v1', '2 hours');
SELECT pg_temp.bodies('fifo_vis', 10) AS extended;
-- v2 handed back while v1 is still in flight: still blocked
SELECT pg_temp.vis('fifo_vis', 'v2', '0');
SELECT pg_temp.bodies('fifo_vis', 10) AS v1_in_flight;
-- v1 deleted: the group goes on from v2
SELECT pg_temp.del('fifo_vis', 'v1');
SELECT * FROM pg_temp.recv('fifo_vis', 10);
-- a lease that runs out by itself: back at the head, in order
SELECT pg_temp.vis('fifo_vis', 'v2', '0'), pg_temp.vis('fifo_vis', 'v3', '0'),
	   pg_temp.vis('fifo_vis', 'v4', '0'), pg_temp.vis('fifo_vis', 'v5', '0');
SELECT count(*) FROM queue.send('fifo_vis', 'v6', message_group_id => 'g', deduplication_id => 'v6');
SELECT * FROM pg_temp.recv('fifo_vis', 2, vt => '1 second');
SELECT pg_temp.bodies('fifo_vis', 10) AS leased;
SELECT pg_sleep(1.2);
SELECT * FROM pg_temp.recv('fifo_vis', 10);
-- a receive that rolls back leaves the group available at once (the
-- queue's retry_delay is 0), its receive counted
SELECT pg_temp.vis('fifo_vis', 'v2', '0'), pg_temp.vis('fifo_vis', 'v3', '0'),
	   pg_temp.vis('fifo_vis', 'v4', '0'), pg_temp.vis('fifo_vis', 'v5', '0'),
	   pg_temp.vis('fifo_vis', 'v6', '0');
BEGIN;
SELECT pg_temp.bodies('fifo_vis', 2) AS rolled_back;
ROLLBACK;
SELECT body, receive_count FROM queue.receive('fifo_vis', 10);
SELECT queue.drop('fifo_vis');

----------------------------------------------------------------------
-- change_visibility of a message that is not the group's head: the group
-- stays blocked until the head is settled, then that message comes next
----------------------------------------------------------------------
SELECT queue.create('fifo_cv', fifo => true) > 0 AS created;
SELECT count(*) FROM queue.send_batch('fifo_cv', ARRAY['c1', 'c2', 'c3', 'c4'],
	message_group_ids => array_fill('g'::text, ARRAY[4]),
	deduplication_ids => ARRAY['c1', 'c2', 'c3', 'c4']);
SELECT * FROM pg_temp.recv('fifo_cv', 3);
SELECT pg_temp.vis('fifo_cv', 'c3', '0');
SELECT pg_temp.bodies('fifo_cv', 10) AS c1_c2_in_flight;
SELECT pg_temp.del('fifo_cv', 'c1'), pg_temp.del('fifo_cv', 'c2');
SELECT * FROM pg_temp.recv('fifo_cv', 10);
-- change_visibility of a deleted message: an error, and the group is unchanged
SELECT pg_temp.del('fifo_cv', 'c3');
SELECT pg_temp.vis('fifo_cv', 'c3', '0');
SELECT pg_temp.bodies('fifo_cv', 10) AS c4_in_flight;
SELECT pg_temp.del('fifo_cv', 'c4');
-- a stale receipt (the message was received again) cannot release the group
SELECT count(*) FROM queue.send('fifo_cv', 'c5', message_group_id => 'g', deduplication_id => 'c5');
SELECT receipt AS old_receipt FROM queue.receive('fifo_cv', visibility_timeout => '0') \gset
SELECT * FROM pg_temp.recv('fifo_cv', 10);
SELECT pg_temp.err(format('SELECT queue.change_visibility(%L, %L, %L)', 'fifo_cv', :'old_receipt', '0'));
SELECT pg_temp.err(format('SELECT queue.delete(%L, %L)', 'fifo_cv', :'old_receipt'));
SELECT pg_temp.bodies('fifo_cv', 10) AS c5_in_flight;
SELECT pg_temp.del('fifo_cv', 'c5');
SELECT pg_temp.depth('fifo_cv');
SELECT queue.drop('fifo_cv');

----------------------------------------------------------------------
-- groups are served oldest head first, by the head's sequence number
----------------------------------------------------------------------
SELECT queue.create('fifo_heads', fifo => true) > 0 AS created;
-- group names sort the other way from their heads' age
SELECT count(*) FROM queue.send('fifo_heads', 'c1', message_group_id => 'C', deduplication_id => 'c1');
SELECT count(*) FROM queue.send('fifo_heads', 'b1', message_group_id => 'B', deduplication_id => 'b1');
SELECT count(*) FROM queue.send('fifo_heads', 'c2', message_group_id => 'C', deduplication_id => 'c2');
SELECT count(*) FROM queue.send('fifo_heads', 'a1', message_group_id => 'A', deduplication_id => 'a1');
SELECT count(*) FROM queue.send('fifo_heads', 'b2', message_group_id => 'B', deduplication_id => 'b2');
SELECT pg_temp.bodies('fifo_heads', 1) AS first, pg_temp.bodies('fifo_heads', 1) AS second,
	   pg_temp.bodies('fifo_heads', 1) AS third, pg_temp.bodies('fifo_heads', 1) AS fourth;
-- C's head c1 is deleted: C's head is now c2, younger than b1
SELECT pg_temp.del('fifo_heads', 'c1');
-- b1 comes back (its lease ends): B's head is b1 again, older than c2
SELECT pg_temp.vis('fifo_heads', 'b1', '0');
SELECT pg_temp.del('fifo_heads', 'a1');
SELECT pg_temp.bodies('fifo_heads', 10) AS batch;
SELECT queue.drop('fifo_heads');

----------------------------------------------------------------------
-- the queue's delay applies to FIFO messages
----------------------------------------------------------------------
SELECT queue.create('fifo_delay', fifo => true, delay => '1 second') > 0 AS created;
SELECT count(*) FROM queue.send('fifo_delay', 'd1', message_group_id => 'g', deduplication_id => 'd1');
SELECT count(*) FROM queue.send_batch('fifo_delay', ARRAY['d2', 'e1'],
	message_group_ids => ARRAY['g', 'h'], deduplication_ids => ARRAY['d2', 'e1']);
SELECT pg_temp.depth('fifo_delay');
SELECT pg_temp.bodies('fifo_delay', 10) AS while_delayed;
SELECT body, visible_at > now() AS delayed FROM queue.peek('fifo_delay') ORDER BY sequence_number;
SELECT pg_sleep(1.2);
SELECT pg_temp.depth('fifo_delay');
SELECT * FROM pg_temp.recv('fifo_delay', 10);
SELECT queue.drop('fifo_delay');

----------------------------------------------------------------------
-- peek: every message, in delivery order, changing nothing
----------------------------------------------------------------------
SELECT queue.create('fifo_peek', fifo => true) > 0 AS created;
SELECT count(*) FROM queue.send_batch('fifo_peek', ARRAY['p1', 'p2', 'p3', 'p4', 'p5'],
	message_group_ids => ARRAY['g', 'g', 'g', 'g', 'g'],
	deduplication_ids => ARRAY['p1', 'p2', 'p3', 'p4', 'p5']);
SELECT receipt IS NULL AS no_receipt, body, message_group_id, deduplication_id, receive_count
FROM queue.peek('fifo_peek');
SELECT string_agg(body, ' ') AS first_two FROM queue.peek('fifo_peek', 2);
SELECT pg_temp.depth('fifo_peek');
-- and the receive order is the peek order
SELECT pg_temp.bodies('fifo_peek', 10) AS received;
SELECT queue.drop('fifo_peek');

----------------------------------------------------------------------
-- stats: depth and counters
----------------------------------------------------------------------
SELECT queue.create('fifo_stats', fifo => true) > 0 AS created;
SELECT count(*) FROM queue.send_batch('fifo_stats', ARRAY['s1', 's2', 's3', 't1', 'u1'],
	message_group_ids => ARRAY['s', 's', 's', 't', 'u'],
	deduplication_ids => ARRAY['s1', 's2', 's3', 't1', 'u1']);
-- a duplicate counts as deduplicated, not sent
SELECT duplicate FROM queue.send('fifo_stats', 's1', message_group_id => 's', deduplication_id => 's1');
SELECT * FROM pg_temp.recv('fifo_stats', 2);
SELECT pg_temp.del('fifo_stats', 's1');
-- s3 is visible though its group is blocked; t1 and u1 are visible
SELECT visible, in_flight, delayed, sent, received, deleted, deduplicated
FROM queue.stats WHERE queue_name = 'fifo_stats';
SELECT queue.drop('fifo_stats');

SELECT queue.drop('fifo_q');
SELECT count(*) FROM queue.queues WHERE queue_name LIKE 'fifo%';
