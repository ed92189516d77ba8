-- receive_attempt: a receive retried with the same receive_attempt_id
-- within 5 minutes, while none of the messages it returned was deleted or
-- changed, returns the same messages with the same receipts; otherwise it
-- is a new receive.  Output is bodies, booleans and counts, never ids,
-- receipts or timestamps.
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

-- got: every message each receive returned, by a label, in its order.
CREATE TEMP TABLE got (label text, ord bigint, message_id bigint, receipt text,
	body text, receive_count int, visible_at timestamptz, PRIMARY KEY (label, ord));

-- recv(label, queue, n, attempt, vt): receive, keep the result under label,
-- show the bodies and receive counts (by body: a standard queue's order is
-- best effort, and differs between the layouts; same() checks that a retry
-- keeps the order its attempt had).
CREATE FUNCTION pg_temp.recv(label text, q text, n int, attempt text,
	vt interval DEFAULT '1 hour') RETURNS text LANGUAGE sql AS $$
	WITH r AS (
		SELECT * FROM queue.receive(q, max_messages => n, visibility_timeout => vt,
								   receive_attempt_id => attempt) WITH ORDINALITY),
	ins AS (
		INSERT INTO got SELECT label, r.ordinality, r.message_id, r.receipt, r.body,
							   r.receive_count, r.visible_at FROM r)
	SELECT coalesce(string_agg(format('%s(%s)', r.body, r.receive_count), ' ' ORDER BY r.body),
					'(none)')
	FROM r
$$;

-- same(a, b): whether two receives returned the same messages, in the same
-- order, with the same receipts and lease deadlines.
CREATE FUNCTION pg_temp.same(a text, b text) RETURNS text LANGUAGE sql AS $$
	SELECT format('same_messages=%s same_receipts=%s',
		(SELECT array_agg(message_id ORDER BY ord) FROM got WHERE label = a) =
		(SELECT array_agg(message_id ORDER BY ord) FROM got WHERE label = b),
		(SELECT array_agg(receipt ORDER BY ord) FROM got WHERE label = a) =
		(SELECT array_agg(receipt ORDER BY ord) FROM got WHERE label = b))
$$;

-- receipt(label, body): the receipt a receive gave a message.
CREATE FUNCTION pg_temp.receipt(label text, b text) RETURNS text LANGUAGE sql AS $$
	SELECT receipt FROM got g WHERE g.label = $1 AND g.body = b
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

-- age_attempts(queue, by): move a queue's recorded attempts back in time.
CREATE FUNCTION pg_temp.age_attempts(q text, by interval) RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
	n bigint;
BEGIN
	EXECUTE format('UPDATE %s SET received_at = received_at - $1 WHERE %strue',
				   pg_temp.qt(q, 'a'), pg_temp.qk(q, 'a'))
		USING by;
	GET DIAGNOSTICS n = ROW_COUNT;
	RETURN n;
END
$$;

----------------------------------------------------------------------
-- standard queue: a retry returns the same messages and receipts
----------------------------------------------------------------------
SELECT queue.create('ra_q') > 0 AS created;
SELECT count(*) FROM queue.send_batch('ra_q', ARRAY['m1', 'm2', 'm3', 'm4', 'm5', 'm6']);
SELECT pg_temp.recv('a1', 'ra_q', 2, 'attempt-1');
SELECT pg_temp.recv('a1 retry', 'ra_q', 2, 'attempt-1');
SELECT pg_temp.same('a1', 'a1 retry');
-- the retry is not another receive: receive counts and lease unchanged
SELECT bool_and(a.receive_count = b.receive_count AND a.visible_at = b.visible_at) AS unchanged
FROM got a JOIN got b USING (message_id) WHERE a.label = 'a1' AND b.label = 'a1 retry';
SELECT body, receive_count FROM queue.peek('ra_q') WHERE receive_count > 0 ORDER BY body;
SELECT received FROM queue.stats WHERE queue_name = 'ra_q';
-- again, and with another max_messages: still the same receive
SELECT pg_temp.recv('a1 retry 2', 'ra_q', 10, 'attempt-1');
SELECT pg_temp.same('a1', 'a1 retry 2');
-- the replayed receipts work
SELECT queue.change_visibility('ra_q', pg_temp.receipt('a1 retry', 'm1'), '2 hours');

-- another id is a new receive: the next visible messages
SELECT pg_temp.recv('b1', 'ra_q', 2, 'attempt-2');
SELECT pg_temp.same('a1', 'b1');
-- so is a receive without an id
SELECT pg_temp.recv('c1', 'ra_q', 1, NULL);
-- ids are per queue: the same id on another queue is a new receive there
SELECT queue.create('ra_other') > 0 AS created;
SELECT count(*) FROM queue.send('ra_other', 'o1');
SELECT pg_temp.recv('o1', 'ra_other', 2, 'attempt-2');
SELECT pg_temp.recv('b1 retry', 'ra_q', 2, 'attempt-2');
SELECT pg_temp.same('b1', 'b1 retry');

----------------------------------------------------------------------
-- a retry after one of the messages was deleted or changed is a new
-- receive, with new receipts
----------------------------------------------------------------------
SELECT queue.purge('ra_q');
SELECT count(*) FROM queue.send_batch('ra_q', ARRAY['d1', 'd2', 'd3', 'd4']);
SELECT pg_temp.recv('d', 'ra_q', 2, 'attempt-d');
SELECT queue.delete('ra_q', pg_temp.receipt('d', 'd1'));
-- d2 is still in flight: the new receive takes d3 and d4
SELECT pg_temp.recv('d retry', 'ra_q', 2, 'attempt-d');
SELECT pg_temp.same('d', 'd retry');
-- and that new receive is what the id replays from now on
SELECT pg_temp.recv('d retry 2', 'ra_q', 2, 'attempt-d');
SELECT pg_temp.same('d retry', 'd retry 2');

-- change_visibility of one of them: a new receive
SELECT queue.purge('ra_q');
SELECT count(*) FROM queue.send_batch('ra_q', ARRAY['v1', 'v2', 'v3']);
SELECT pg_temp.recv('v', 'ra_q', 2, 'attempt-v');
SELECT queue.change_visibility('ra_q', pg_temp.receipt('v', 'v2'), '0');
SELECT pg_temp.recv('v retry', 'ra_q', 2, 'attempt-v');
SELECT pg_temp.same('v', 'v retry');
SELECT (SELECT receipt FROM got WHERE label = 'v' AND body = 'v2') <>
	   (SELECT receipt FROM got WHERE label = 'v retry' AND body = 'v2') AS new_receipt;
-- extending a lease is a change too
SELECT queue.purge('ra_q');
SELECT count(*) FROM queue.send_batch('ra_q', ARRAY['x1', 'x2']);
SELECT pg_temp.recv('x', 'ra_q', 1, 'attempt-x');
SELECT queue.change_visibility('ra_q', pg_temp.receipt('x', 'x1'), '3 hours');
SELECT pg_temp.recv('x retry', 'ra_q', 1, 'attempt-x');
SELECT pg_temp.same('x', 'x retry');

-- received again by someone else after its lease ended: a new receive
SELECT queue.purge('ra_q');
SELECT count(*) FROM queue.send_batch('ra_q', ARRAY['e1', 'e2']);
SELECT pg_temp.recv('e', 'ra_q', 1, 'attempt-e', vt => '0');
SELECT pg_temp.recv('someone', 'ra_q', 10, NULL);
SELECT pg_temp.recv('e retry', 'ra_q', 1, 'attempt-e');

-- a batch delete of the messages: a new receive (nothing left here)
SELECT queue.purge('ra_q');
SELECT count(*) FROM queue.send_batch('ra_q', ARRAY['b1', 'b2']);
SELECT pg_temp.recv('bd', 'ra_q', 2, 'attempt-bd');
SELECT count(*) FROM queue.delete_batch('ra_q',
	ARRAY[pg_temp.receipt('bd', 'b1'), pg_temp.receipt('bd', 'b2')]) WHERE deleted;
SELECT pg_temp.recv('bd retry', 'ra_q', 2, 'attempt-bd');

----------------------------------------------------------------------
-- the 5 minute window
----------------------------------------------------------------------
SELECT queue.purge('ra_q');
SELECT count(*) FROM queue.send_batch('ra_q', ARRAY['w1', 'w2', 'w3']);
SELECT pg_temp.recv('w', 'ra_q', 1, 'attempt-w');
-- four minutes later: still the same receive
SELECT pg_temp.age_attempts('ra_q', '4 minutes') > 0 AS aged;
SELECT pg_temp.recv('w retry', 'ra_q', 1, 'attempt-w');
SELECT pg_temp.same('w', 'w retry');
-- six minutes after it: a new receive
SELECT pg_temp.age_attempts('ra_q', '2 minutes') > 0 AS aged;
SELECT pg_temp.recv('w late', 'ra_q', 1, 'attempt-w');
SELECT pg_temp.same('w', 'w late');

----------------------------------------------------------------------
-- a rolled-back receive records no attempt (its receive counts: the
-- message comes back with receive_count 2)
----------------------------------------------------------------------
SELECT queue.purge('ra_q');
SELECT count(*) FROM queue.send_batch('ra_q', ARRAY['r1', 'r2']);
BEGIN;
SELECT pg_temp.recv('rb', 'ra_q', 1, 'attempt-rb');
ROLLBACK;
SELECT pg_temp.recv('rb 2', 'ra_q', 1, 'attempt-rb');
SELECT pg_temp.recv('rb 3', 'ra_q', 1, 'attempt-rb');
SELECT pg_temp.same('rb 2', 'rb 3');

----------------------------------------------------------------------
-- FIFO queue: the retry gets the same messages though their group is
-- blocked, and no other receive gets any of the group meanwhile
----------------------------------------------------------------------
SELECT queue.create('ra_fifo', fifo => true) > 0 AS created;
SELECT count(*) FROM queue.send_batch('ra_fifo', ARRAY['f1', 'f2', 'f3', 'g1'],
	message_group_ids => ARRAY['F', 'F', 'F', 'G'],
	deduplication_ids => ARRAY['f1', 'f2', 'f3', 'g1']);
SELECT pg_temp.recv('f', 'ra_fifo', 2, 'attempt-f');
SELECT pg_temp.recv('f other', 'ra_fifo', 10, 'attempt-other');
SELECT pg_temp.recv('f retry', 'ra_fifo', 2, 'attempt-f');
SELECT pg_temp.same('f', 'f retry');
SELECT pg_temp.recv('f none', 'ra_fifo', 10, NULL);
-- after one is deleted, the retry is a new receive: f2 still blocks F
SELECT queue.delete('ra_fifo', pg_temp.receipt('f', 'f1'));
SELECT pg_temp.recv('f after delete', 'ra_fifo', 2, 'attempt-f');
SELECT queue.delete('ra_fifo', pg_temp.receipt('f', 'f2'));
SELECT pg_temp.recv('f after both', 'ra_fifo', 2, 'attempt-f');
SELECT pg_temp.recv('f again', 'ra_fifo', 2, 'attempt-f');
SELECT pg_temp.same('f after both', 'f again');

----------------------------------------------------------------------
-- receive_attempt_id is 1 to 128 printable ASCII characters, no spaces:
-- 22023 otherwise, and nothing is received
----------------------------------------------------------------------
SELECT queue.purge('ra_q');
SELECT count(*) FROM queue.send('ra_q', 't1');
SELECT pg_temp.err(format('SELECT queue.receive(%L, receive_attempt_id => %L)', 'ra_q', repeat('a', 129)));
SELECT pg_temp.err($$SELECT queue.receive('ra_q', receive_attempt_id => 'has space')$$);
SELECT pg_temp.err($$SELECT queue.receive('ra_q', receive_attempt_id => '')$$);
SELECT pg_temp.err($$SELECT queue.receive('ra_q', receive_attempt_id => E'tab\there')$$);
SELECT pg_temp.err($$SELECT queue.receive('ra_q', receive_attempt_id => 'naïve')$$);
SELECT body, receive_count FROM queue.peek('ra_q');
-- the limits themselves are accepted
SELECT pg_temp.recv('t', 'ra_q', 1, repeat('a', 128));
SELECT pg_temp.recv('t retry', 'ra_q', 1, repeat('a', 128));
SELECT pg_temp.same('t', 't retry');
SELECT pg_temp.err($$SELECT queue.receive('ra_q', receive_attempt_id => '!#$%&()*+,-./:;<=>?@[\]^_`{|}~')$$) AS punctuation;

SELECT queue.drop('ra_q'), queue.drop('ra_other'), queue.drop('ra_fifo');
