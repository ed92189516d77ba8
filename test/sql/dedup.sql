-- dedup: deduplication ids, on FIFO queues always and on standard queues
-- when a send gives one.  A duplicate succeeds, enqueues nothing and
-- returns the original message_id with duplicate = true; content-based ids
-- are the hex SHA-256 of the body; scope 'queue' or 'message_group'; the
-- window counts from the first accepted send, outlives the message and
-- stops blocking once passed, swept or not.  Output is booleans, bodies and
-- counts, never ids or timestamps.
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

-- sent: what each send returned, by a label, to compare message ids.
CREATE TEMP TABLE sent (label text PRIMARY KEY, message_id bigint,
	sequence_number bigint, duplicate boolean);

-- snd(label, queue, body, group, dedup id): send a text message, keep what
-- the send returned under label, show whether it was a duplicate.
CREATE FUNCTION pg_temp.snd(label text, q text, body text, grp text DEFAULT NULL,
	dedup text DEFAULT NULL) RETURNS boolean LANGUAGE sql AS $$
	INSERT INTO sent
		SELECT label, s.* FROM queue.send(q, body, message_group_id => grp, deduplication_id => dedup) s
	RETURNING duplicate
$$;

-- same(a, b): whether two sends returned the same message id.
CREATE FUNCTION pg_temp.same(a text, b text) RETURNS boolean LANGUAGE sql AS $$
	SELECT (SELECT message_id FROM sent WHERE label = a) = (SELECT message_id FROM sent WHERE label = b)
$$;

-- msgs(queue): the bodies in the queue, in delivery order.
CREATE FUNCTION pg_temp.msgs(q text) RETURNS text LANGUAGE sql AS $$
	SELECT coalesce(string_agg(body, ' ' ORDER BY message_id), '(none)') FROM queue.peek(q, 1000)
$$;

-- counters(queue): the committed counters of queue.stats that matter here.
CREATE FUNCTION pg_temp.counters(q text) RETURNS text LANGUAGE sql AS $$
	SELECT format('sent=%s deduplicated=%s', sent, deduplicated)
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

-- age_ids(queue, by): move every accepted id of a queue back in time, as
-- if accepted that much earlier (the worker's sweep is not involved).
CREATE FUNCTION pg_temp.age_ids(q text, by interval) RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
	n bigint;
BEGIN
	EXECUTE format('UPDATE %s SET accepted_at = accepted_at - $1 WHERE %strue',
				   pg_temp.qt(q, 'd'), pg_temp.qk(q, 'd'))
		USING by;
	GET DIAGNOSTICS n = ROW_COUNT;
	RETURN n;
END
$$;

-- accepted(queue, id): when an id was accepted, as recorded.
CREATE FUNCTION pg_temp.accepted(q text, id text) RETURNS timestamptz LANGUAGE plpgsql AS $$
DECLARE
	t timestamptz;
BEGIN
	EXECUTE format('SELECT accepted_at FROM %s WHERE %sdeduplication_id = $1',
				   pg_temp.qt(q, 'd'), pg_temp.qk(q, 'd'))
		INTO t USING id;
	RETURN t;
END
$$;

----------------------------------------------------------------------
-- standard queues deduplicate when a send gives an id
----------------------------------------------------------------------
SELECT queue.create('dd_std') > 0 AS created;
SELECT pg_temp.snd('std1', 'dd_std', 'first', dedup => 'order-1') AS duplicate;
SELECT pg_temp.snd('std2', 'dd_std', 'second', dedup => 'order-1') AS duplicate;
SELECT pg_temp.same('std1', 'std2') AS same_message_id;
-- the duplicate enqueued nothing: one message, the first body
SELECT pg_temp.msgs('dd_std');
SELECT body, deduplication_id FROM queue.peek('dd_std');
-- without an id there is no deduplication, even of equal bodies
SELECT pg_temp.snd('std3', 'dd_std', 'same body') AS duplicate,
	   pg_temp.snd('std4', 'dd_std', 'same body') AS duplicate;
SELECT pg_temp.same('std3', 'std4') AS same_message_id;
-- another id is another message
SELECT pg_temp.snd('std5', 'dd_std', 'third', dedup => 'order-2') AS duplicate;
SELECT pg_temp.msgs('dd_std');
SELECT pg_temp.counters('dd_std');
-- ids are case-sensitive and compared byte for byte
SELECT pg_temp.snd('std6', 'dd_std', 'upper', dedup => 'ORDER-1') AS duplicate;
-- a duplicate's message_id is the original's; sequence numbers are FIFO only
SELECT message_id = (SELECT message_id FROM sent WHERE label = 'std1') AS same_message_id,
	   sequence_number IS NULL AS no_seq, duplicate
FROM queue.send('dd_std', 'again', deduplication_id => 'order-1');

----------------------------------------------------------------------
-- FIFO queues
----------------------------------------------------------------------
SELECT queue.create('dd_fifo', fifo => true) > 0 AS created;
SELECT pg_temp.snd('f1', 'dd_fifo', 'a', 'g', 'id-1') AS duplicate;
SELECT pg_temp.snd('f2', 'dd_fifo', 'b', 'g', 'id-2') AS duplicate;
SELECT pg_temp.snd('f3', 'dd_fifo', 'a again', 'g', 'id-1') AS duplicate;
SELECT pg_temp.same('f1', 'f3') AS same_message_id,
	   (SELECT sequence_number FROM sent WHERE label = 'f1') =
	   (SELECT sequence_number FROM sent WHERE label = 'f3') AS same_sequence_number;
SELECT pg_temp.msgs('dd_fifo');
SELECT pg_temp.counters('dd_fifo');
-- one transaction: the second send of an id sees the first
BEGIN;
SELECT pg_temp.snd('f4', 'dd_fifo', 'c', 'g', 'id-3') AS duplicate;
SELECT pg_temp.snd('f5', 'dd_fifo', 'c again', 'g', 'id-3') AS duplicate;
COMMIT;
SELECT pg_temp.same('f4', 'f5') AS same_message_id;
SELECT pg_temp.msgs('dd_fifo');

----------------------------------------------------------------------
-- content-based deduplication: the lowercase hex SHA-256 of the body's
-- UTF-8 bytes; an explicit id wins
----------------------------------------------------------------------
SELECT queue.create('dd_cbd', fifo => true, content_based_deduplication => true) > 0 AS created;
SELECT pg_temp.snd('c1', 'dd_cbd', 'hello', 'g') AS duplicate;
SELECT deduplication_id = encode(sha256(convert_to('hello', 'UTF8')), 'hex') AS sha256_of_body,
	   deduplication_id ~ '^[0-9a-f]{64}$' AS lowercase_hex
FROM queue.peek('dd_cbd') WHERE body = 'hello';
-- the same body again is a duplicate, also in another group (scope 'queue')
SELECT pg_temp.snd('c2', 'dd_cbd', 'hello', 'g') AS duplicate,
	   pg_temp.snd('c3', 'dd_cbd', 'hello', 'other') AS duplicate;
SELECT pg_temp.same('c1', 'c2') AND pg_temp.same('c1', 'c3') AS same_message_id;
-- giving the hash explicitly is the same id
SELECT pg_temp.snd('c4', 'dd_cbd', 'anything', 'g',
	encode(sha256(convert_to('hello', 'UTF8')), 'hex')) AS duplicate;
-- an explicit id wins over the generated one
SELECT pg_temp.snd('c5', 'dd_cbd', 'hello', 'g', 'explicit') AS duplicate;
SELECT body, deduplication_id FROM queue.peek('dd_cbd') WHERE deduplication_id = 'explicit';
SELECT pg_temp.snd('c6', 'dd_cbd', 'other body', 'g', 'explicit') AS duplicate;
-- bodies differing in one byte (case, trailing space) are different
SELECT pg_temp.snd('c7', 'dd_cbd', 'Hello', 'g') AS duplicate,
	   pg_temp.snd('c8', 'dd_cbd', 'hello ', 'g') AS duplicate;
-- UTF-8 bytes of a non-ASCII body
SELECT pg_temp.snd('c9', 'dd_cbd', 'héllo wörld €', 'g') AS duplicate;
SELECT deduplication_id = encode(sha256(convert_to('héllo wörld €', 'UTF8')), 'hex') AS sha256_of_utf8
FROM queue.peek('dd_cbd') WHERE body = 'héllo wörld €';
-- a jsonb body hashes its text form: key order and spacing do not matter
SELECT duplicate FROM queue.send('dd_cbd', '{"b": 1, "a": [1, 2]}'::jsonb, message_group_id => 'g');
SELECT body, deduplication_id = encode(sha256(convert_to('{"a": [1, 2], "b": 1}', 'UTF8')), 'hex')
	   AS sha256_of_text_form
FROM queue.peek('dd_cbd', 100) WHERE body LIKE '{%';
SELECT duplicate FROM queue.send('dd_cbd', '{"a":[1,2],"b":1}'::jsonb, message_group_id => 'g');
-- and the text form sent as text is the same id
SELECT duplicate FROM queue.send('dd_cbd', '{"a": [1, 2], "b": 1}'::text, message_group_id => 'g');
-- send_batch: each body its own id; equal bodies in one batch are duplicates
SELECT ordinal, duplicate
FROM queue.send_batch('dd_cbd', ARRAY['x', 'y', 'x', 'hello'],
	message_group_ids => ARRAY['g', 'g', 'g', 'g']);
SELECT pg_temp.msgs('dd_cbd');
SELECT pg_temp.counters('dd_cbd');

----------------------------------------------------------------------
-- scope: 'queue' (one id per queue) or 'message_group' (per group)
----------------------------------------------------------------------
SELECT queue.create('dd_scope_q', fifo => true) > 0 AS created;
SELECT queue.create('dd_scope_g', fifo => true, deduplication_scope => 'message_group') > 0 AS created;
-- scope queue: the id in another group is a duplicate
SELECT pg_temp.snd('sq1', 'dd_scope_q', 'a1', 'A', 'id') AS duplicate,
	   pg_temp.snd('sq2', 'dd_scope_q', 'b1', 'B', 'id') AS duplicate;
SELECT pg_temp.same('sq1', 'sq2') AS same_message_id;
SELECT pg_temp.msgs('dd_scope_q');
-- scope message_group: the id in another group is a new message, in the
-- same group a duplicate of that group's
SELECT pg_temp.snd('sg1', 'dd_scope_g', 'a1', 'A', 'id') AS duplicate,
	   pg_temp.snd('sg2', 'dd_scope_g', 'b1', 'B', 'id') AS duplicate,
	   pg_temp.snd('sg3', 'dd_scope_g', 'a2', 'A', 'id') AS duplicate,
	   pg_temp.snd('sg4', 'dd_scope_g', 'b2', 'B', 'id') AS duplicate;
SELECT pg_temp.same('sg1', 'sg2') AS a_b_same, pg_temp.same('sg1', 'sg3') AS a_same,
	   pg_temp.same('sg2', 'sg4') AS b_same;
SELECT pg_temp.msgs('dd_scope_g');
-- in one batch too
SELECT ordinal, duplicate
FROM queue.send_batch('dd_scope_g', ARRAY['c1', 'd1', 'c2'],
	message_group_ids => ARRAY['C', 'D', 'C'], deduplication_ids => ARRAY['id', 'id', 'id']);
SELECT pg_temp.msgs('dd_scope_g');
SELECT deduplication_scope FROM queue.queues WHERE queue_name LIKE 'dd_scope%' ORDER BY queue_name;
-- a standard queue with scope message_group: per group when a group is given
SELECT queue.create('dd_scope_std', deduplication_scope => 'message_group') > 0 AS created;
SELECT pg_temp.snd('ss1', 'dd_scope_std', 'a', 'A', 'id') AS duplicate,
	   pg_temp.snd('ss2', 'dd_scope_std', 'b', 'B', 'id') AS duplicate,
	   pg_temp.snd('ss3', 'dd_scope_std', 'a2', 'A', 'id') AS duplicate;
SELECT pg_temp.msgs('dd_scope_std');

----------------------------------------------------------------------
-- the window counts from the first accepted send and outlives the message
----------------------------------------------------------------------
SELECT queue.create('dd_win', fifo => true) > 0 AS created;
SELECT deduplication_window FROM queue.queues WHERE queue_name = 'dd_win';
SELECT pg_temp.snd('w1', 'dd_win', 'w', 'g', 'win-1') AS duplicate;
-- received and deleted: the id still blocks
SELECT queue.delete('dd_win', receipt) FROM queue.receive('dd_win');
SELECT pg_temp.msgs('dd_win');
SELECT pg_temp.snd('w2', 'dd_win', 'w again', 'g', 'win-1') AS duplicate;
SELECT pg_temp.same('w1', 'w2') AS same_message_id;
SELECT pg_temp.msgs('dd_win');
-- purged: the id still blocks
SELECT pg_temp.snd('w3', 'dd_win', 'p', 'g', 'win-2') AS duplicate;
SELECT queue.purge('dd_win');
SELECT pg_temp.snd('w4', 'dd_win', 'p again', 'g', 'win-2') AS duplicate;
SELECT pg_temp.same('w3', 'w4') AS same_message_id;
SELECT pg_temp.msgs('dd_win');
-- a duplicate does not restart the window
SELECT pg_temp.accepted('dd_win', 'win-1') AS accepted_at \gset
SELECT pg_temp.snd('w5', 'dd_win', 'w', 'g', 'win-1') AS duplicate;
SELECT pg_temp.accepted('dd_win', 'win-1') = :'accepted_at' AS window_unchanged;
-- four minutes later: still inside the 5 minute window
SELECT pg_temp.age_ids('dd_win', '4 minutes');
SELECT pg_temp.snd('w6', 'dd_win', 'w', 'g', 'win-1') AS duplicate;
-- six minutes after the first send: the window has passed, and the id
-- stops blocking at once, without a sweep: a new message, a new id
SELECT pg_temp.age_ids('dd_win', '2 minutes');
SELECT pg_temp.snd('w7', 'dd_win', 'w new', 'g', 'win-1') AS duplicate;
SELECT pg_temp.same('w1', 'w7') AS same_message_id;
SELECT pg_temp.msgs('dd_win');
-- and the new send starts a new window
SELECT pg_temp.snd('w8', 'dd_win', 'w newer', 'g', 'win-1') AS duplicate;
SELECT pg_temp.same('w7', 'w8') AS same_message_id;
SELECT pg_temp.msgs('dd_win');
-- the window is the queue's: one hour holds what five minutes did not
SELECT queue.create('dd_win_long', deduplication_window => '1 hour') > 0 AS created;
SELECT pg_temp.snd('l1', 'dd_win_long', 'x', dedup => 'long') AS duplicate;
SELECT pg_temp.age_ids('dd_win_long', '59 minutes');
SELECT pg_temp.snd('l2', 'dd_win_long', 'x', dedup => 'long') AS duplicate;
SELECT pg_temp.age_ids('dd_win_long', '2 minutes');
SELECT pg_temp.snd('l3', 'dd_win_long', 'x', dedup => 'long') AS duplicate;
SELECT pg_temp.msgs('dd_win_long');
-- and alter changes it for ids already accepted
SELECT queue.alter('dd_win_long', deduplication_window => '2 hours');
SELECT pg_temp.age_ids('dd_win_long', '90 minutes');
SELECT pg_temp.snd('l4', 'dd_win_long', 'x', dedup => 'long') AS duplicate;
SELECT pg_temp.msgs('dd_win_long');

----------------------------------------------------------------------
-- batches: a repeat within the batch is a duplicate of its first entry
----------------------------------------------------------------------
SELECT queue.create('dd_batch', fifo => true) > 0 AS created;
CREATE TEMP TABLE batch_out AS
	SELECT * FROM queue.send_batch('dd_batch', ARRAY['b1', 'b2', 'b1 again', 'b3', 'b2 again'],
		message_group_ids => ARRAY['g', 'g', 'g', 'g', 'g'],
		deduplication_ids => ARRAY['k1', 'k2', 'k1', 'k3', 'k2']);
SELECT ordinal, duplicate FROM batch_out ORDER BY ordinal;
SELECT (SELECT message_id FROM batch_out WHERE ordinal = 3) =
	   (SELECT message_id FROM batch_out WHERE ordinal = 1) AS third_is_first,
	   (SELECT message_id FROM batch_out WHERE ordinal = 5) =
	   (SELECT message_id FROM batch_out WHERE ordinal = 2) AS fifth_is_second,
	   (SELECT count(DISTINCT message_id) FROM batch_out) AS distinct_ids;
SELECT pg_temp.msgs('dd_batch');
-- a later batch repeating an accepted id: that entry is a duplicate
SELECT ordinal, duplicate,
	   message_id = (SELECT message_id FROM batch_out WHERE ordinal = 2) AS is_b2
FROM queue.send_batch('dd_batch', ARRAY['b4', 'b2 once more'],
	message_group_ids => ARRAY['g', 'g'], deduplication_ids => ARRAY['k4', 'k2'])
ORDER BY ordinal;
SELECT pg_temp.msgs('dd_batch');
SELECT pg_temp.counters('dd_batch');
-- a standard queue batch: entries without an id are never duplicates
SELECT ordinal, duplicate
FROM queue.send_batch('dd_std', ARRAY['n1', 'n2', 'n3', 'n4'],
	deduplication_ids => ARRAY['batch-1', NULL, 'batch-1', NULL]);

----------------------------------------------------------------------
-- a rolled-back send frees its id
----------------------------------------------------------------------
SELECT queue.create('dd_rb', fifo => true) > 0 AS created;
BEGIN;
SELECT pg_temp.snd('r1', 'dd_rb', 'rolled back', 'g', 'rb') AS duplicate;
ROLLBACK;
SELECT pg_temp.snd('r2', 'dd_rb', 'committed', 'g', 'rb') AS duplicate;
SELECT pg_temp.msgs('dd_rb');
-- a savepoint rolled back frees it too
BEGIN;
SAVEPOINT s;
SELECT pg_temp.snd('r3', 'dd_rb', 'in savepoint', 'g', 'rb2') AS duplicate;
ROLLBACK TO SAVEPOINT s;
SELECT pg_temp.snd('r4', 'dd_rb', 'after savepoint', 'g', 'rb2') AS duplicate;
COMMIT;
SELECT pg_temp.msgs('dd_rb');
-- a failed batch claims none of its ids
SELECT pg_temp.err($$SELECT queue.send_batch('dd_rb', ARRAY['x1', 'x2'],
	message_group_ids => ARRAY['g', NULL], deduplication_ids => ARRAY['fb1', 'fb2'])$$);
SELECT pg_temp.snd('r5', 'dd_rb', 'fb1 body', 'g', 'fb1') AS duplicate;
SELECT pg_temp.msgs('dd_rb');
-- rolled-back duplicates are not counted
BEGIN;
SELECT pg_temp.snd('r6', 'dd_rb', 'dup', 'g', 'rb') AS duplicate;
ROLLBACK;
SELECT pg_temp.counters('dd_rb');

----------------------------------------------------------------------
-- errors: 22023, nothing created or enqueued
----------------------------------------------------------------------
SELECT pg_temp.err($$SELECT queue.create('dd_err', deduplication_window => '19 seconds')$$);
SELECT pg_temp.err($$SELECT queue.create('dd_err', deduplication_window => '7 days 1 second')$$);
SELECT pg_temp.err($$SELECT queue.create('dd_err', deduplication_window => '-5 minutes')$$);
SELECT pg_temp.err($$SELECT queue.create('dd_err', deduplication_scope => 'group')$$);
SELECT pg_temp.err($$SELECT queue.create('dd_err', fifo => true, deduplication_scope => 'Queue')$$);
SELECT pg_temp.err($$SELECT queue.create('dd_err', content_based_deduplication => true)$$);
SELECT count(*) FROM queue.queues WHERE queue_name = 'dd_err';
-- the bounds themselves are accepted
SELECT queue.create('dd_err_lo', deduplication_window => '20 seconds') > 0 AS lower_bound,
	   queue.create('dd_err_hi', deduplication_window => '7 days') > 0 AS upper_bound;
SELECT queue.drop('dd_err_lo'), queue.drop('dd_err_hi');
-- alter follows the same rules
SELECT pg_temp.err($$SELECT queue.alter('dd_std', deduplication_window => '19 seconds')$$);
SELECT pg_temp.err($$SELECT queue.alter('dd_std', deduplication_scope => 'group')$$);
SELECT pg_temp.err($$SELECT queue.alter('dd_std', content_based_deduplication => true)$$);
SELECT deduplication_window, deduplication_scope, content_based_deduplication
FROM queue.queues WHERE queue_name = 'dd_std';
-- deduplication ids are 1 to 128 printable characters without spaces
SELECT pg_temp.err($$SELECT queue.send('dd_std', 'x', deduplication_id => '')$$);
SELECT pg_temp.err($$SELECT queue.send('dd_std', 'x', deduplication_id => 'a b')$$);
SELECT pg_temp.err(format('SELECT queue.send(%L, %L, deduplication_id => %L)', 'dd_std', 'x', repeat('d', 129)));
SELECT pg_temp.err($$SELECT queue.send_batch('dd_std', ARRAY['x', 'y'], deduplication_ids => ARRAY['ok', 'not ok'])$$);
SELECT pg_temp.err(format('SELECT queue.send(%L, %L, deduplication_id => %L)', 'dd_std', 'x', repeat('d', 128))) AS id_128;
SELECT pg_temp.msgs('dd_std');

SELECT queue.drop(queue_name) FROM queue.queues WHERE queue_name LIKE 'dd\_%' ORDER BY queue_name;
