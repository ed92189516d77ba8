-- deadletter: dead-letter queues and redrive.  A queue with
-- dead_letter_queue and max_receive_count never delivers a message whose
-- next receive would exceed the count: that receive moves it, in its own
-- transaction, to the dead-letter queue, keeping body, attributes, group,
-- deduplication id, sent time and receive count, and recording the source
-- queue and the reason in the "queue.dead_letter" attribute.
-- queue.redrive puts dead letters back (in their source, or a given queue)
-- as fresh deliveries, FIFO groups in order.  The worker's moves (nobody
-- receiving) are in test/t/006_deadletter_worker.pl; here every move that
-- must be the receive's happens inside the receiving transaction, where
-- the worker cannot see or touch the message.  Output is bodies, booleans
-- and counts, never ids, receipts or timestamps.
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

-- content(queue): every message of a queue in delivery order, as
-- body:receive_count.
CREATE FUNCTION pg_temp.content(q text) RETURNS text LANGUAGE sql AS $$
	SELECT coalesce(string_agg(body || ':' || receive_count, ' '), '(empty)')
	FROM queue.peek(q, 1000)
$$;

-- bag(queue): the same in body order, for a standard queue's messages
-- made visible at the same moment (their order is best-effort).
CREATE FUNCTION pg_temp.bag(q text) RETURNS text LANGUAGE sql AS $$
	SELECT coalesce(string_agg(body || ':' || receive_count, ' ' ORDER BY body), '(empty)')
	FROM queue.peek(q, 1000)
$$;

-- letters(queue): the dead letters of a queue: body, group, source and
-- reason recorded in the "queue.dead_letter" attribute, receive count.
CREATE FUNCTION pg_temp.letters(q text)
	RETURNS TABLE (body text, message_group_id text, source_queue text, reason text,
				   receive_count int)
	LANGUAGE sql AS $$
	SELECT body, message_group_id, attributes -> 'queue.dead_letter' ->> 'source_queue',
		   attributes -> 'queue.dead_letter' ->> 'reason', receive_count
	FROM queue.peek(q, 1000)
$$;

-- held: the latest receipt of each body received (bodies are unique per
-- queue in this file), so later steps can delete messages by body.
CREATE TEMP TABLE held (q text, body text, receipt text, PRIMARY KEY (q, body));

-- recv(queue, n, vt): the bodies one receive returns, in its order, and
-- remember their receipts.
CREATE FUNCTION pg_temp.recv(q text, n int DEFAULT 10, vt interval DEFAULT '1 hour')
	RETURNS text LANGUAGE sql AS $$
	WITH r AS (
		SELECT * FROM queue.receive(q, max_messages => n, visibility_timeout => vt)
			WITH ORDINALITY AS m(message_id, receipt, body, attributes, message_group_id,
				deduplication_id, sequence_number, receive_count, sent_at,
				first_received_at, visible_at, o)),
	ins AS (
		INSERT INTO held SELECT q, r.body, r.receipt FROM r
		ON CONFLICT ON CONSTRAINT held_pkey DO UPDATE SET receipt = excluded.receipt)
	SELECT coalesce(string_agg(r.body || ':' || r.receive_count, ' ' ORDER BY r.o), '(none)')
	FROM r
$$;

-- del(queue, body): delete by body with its latest receipt.
CREATE FUNCTION pg_temp.del(q text, b text) RETURNS boolean LANGUAGE sql AS $$
	SELECT queue.delete(q, h.receipt) FROM held h WHERE h.q = $1 AND h.body = b
$$;

-- vis(queue, body, timeout): change visibility by body.
CREATE FUNCTION pg_temp.vis(q text, b text, vt interval) RETURNS void LANGUAGE sql AS $$
	SELECT queue.change_visibility(q, h.receipt, vt) FROM held h WHERE h.q = $1 AND h.body = b
$$;

-- dead(queue): the dead_lettered counter and depth of a queue.
CREATE FUNCTION pg_temp.dead(q text) RETURNS text LANGUAGE sql AS $$
	SELECT format('dead_lettered=%s visible=%s in_flight=%s', dead_lettered, visible, in_flight)
	FROM queue.stats WHERE queue_name = q
$$;

-- settled(queue): wait until no rolled-back receive of the queue waits to
-- be counted (the worker writes them within a pass); true when none does.
CREATE FUNCTION pg_temp.settled(q text) RETURNS boolean LANGUAGE plpgsql AS $$
DECLARE
	id bigint := (SELECT queue_id FROM queue.queues WHERE queue_name = q);
BEGIN
	FOR i IN 1 .. 3000 LOOP
		IF queue._failed_pending(id) = 0 THEN
			RETURN true;
		END IF;
		PERFORM pg_sleep(0.01);
	END LOOP;
	RETURN false;
END
$$;

----------------------------------------------------------------------
-- create with dead_letter_queue and max_receive_count; the queues view
----------------------------------------------------------------------
SELECT queue.create('dl_dlq') > 0 AS created;
SELECT queue.create('dl_src', dead_letter_queue => 'dl_dlq', max_receive_count => 3) > 0 AS created;
SELECT queue_name, dead_letter_queue, max_receive_count, redrive_allow
FROM queue.queues WHERE queue_name IN ('dl_dlq', 'dl_src') ORDER BY queue_name;
-- idempotent with the same attributes; other ones are 42710
SELECT queue.create('dl_src', dead_letter_queue => 'dl_dlq', max_receive_count => 3) = queue_id
	AS idempotent
FROM queue.queues WHERE queue_name = 'dl_src';
SELECT pg_temp.err($$SELECT queue.create('dl_src', dead_letter_queue => 'dl_dlq', max_receive_count => 4)$$);
SELECT pg_temp.err($$SELECT queue.create('dl_src')$$);

----------------------------------------------------------------------
-- the move: received max_receive_count times, the next receive moves the
-- message instead of delivering it, in the receiving transaction
----------------------------------------------------------------------
SELECT count(*) FROM queue.send('dl_src', 'poison', deduplication_id => 'dd-poison',
	attributes => '{"k": "v", "n": 1}');
SELECT message_id AS poison_id, sent_at AS poison_sent FROM queue.peek('dl_src') \gset
BEGIN;
SELECT pg_temp.recv('dl_src', 1, '0');
SELECT pg_temp.recv('dl_src', 1, '0');
SELECT pg_temp.recv('dl_src', 1, '0');
-- the fourth receive would exceed 3: it delivers nothing
SELECT pg_temp.recv('dl_src', 1, '0');
-- the same transaction sees it gone from the source, in the dead-letter queue
SELECT pg_temp.content('dl_src') AS source, pg_temp.content('dl_dlq') AS dlq;
COMMIT;
-- what the dead letter keeps: id, body, attributes, deduplication id, sent
-- time, receive count; and what it gains: source queue and reason
SELECT message_id = :poison_id AS same_id, body, attributes ->> 'k' AS k, attributes -> 'n' AS n,
	   attributes -> 'queue.dead_letter' ->> 'source_queue' AS source_queue,
	   attributes -> 'queue.dead_letter' ->> 'reason' AS reason,
	   attributes -> 'queue.dead_letter' -> 'receive_count' AS attr_receive_count,
	   attributes -> 'queue.dead_letter' ? 'moved_at' AS has_moved_at,
	   deduplication_id, message_group_id IS NULL AS no_group, receive_count,
	   sent_at = :'poison_sent' AS sent_at_kept, first_received_at IS NOT NULL AS was_received,
	   visible_at <= now() AS visible
FROM queue.peek('dl_dlq');
SELECT pg_temp.dead('dl_src') AS source, pg_temp.dead('dl_dlq') AS dlq;
-- received from the dead-letter queue, it still says where it came from
SELECT body, receive_count, attributes -> 'queue.dead_letter' ->> 'source_queue' AS source_queue,
	   attributes ->> 'k' AS k
FROM queue.receive('dl_dlq', visibility_timeout => '0');

----------------------------------------------------------------------
-- a receive that rolls back still counts (failed_receives.sql has the
-- rest): received max_receive_count times, the last time rolled back, the
-- message moves all the same; a move rolled back is undone
----------------------------------------------------------------------
SELECT queue.create('dl_rb_dlq') > 0 AS created;
SELECT queue.create('dl_rb', dead_letter_queue => 'dl_rb_dlq', max_receive_count => 3) > 0 AS created;
SELECT count(*) FROM queue.send('dl_rb', 'flaky');
SELECT pg_temp.recv('dl_rb', 1, '0');
SELECT pg_temp.recv('dl_rb', 1, '0');
-- a third receive and a fourth (which moves it), rolled back
BEGIN;
SELECT pg_temp.recv('dl_rb', 1, '0');
SELECT pg_temp.recv('dl_rb', 1, '0');
SELECT pg_temp.content('dl_rb') AS source, pg_temp.content('dl_rb_dlq') AS dlq;
ROLLBACK;
-- the third receive counted: once written, the message is a dead letter
SELECT pg_temp.settled('dl_rb');
SELECT pg_temp.content('dl_rb') AS source, pg_temp.content('dl_rb_dlq') AS dlq;
SELECT pg_temp.dead('dl_rb');
SELECT queue.drop('dl_rb'), queue.drop('dl_rb_dlq');

----------------------------------------------------------------------
-- one receive of several messages: the ones received too often are
-- moved, the others delivered
----------------------------------------------------------------------
SELECT queue.create('dl_src2', dead_letter_queue => 'dl_dlq', max_receive_count => 1) > 0 AS created;
BEGIN;
SELECT count(*) FROM queue.send_batch('dl_src2', ARRAY['m1', 'm2', 'm3']);
SELECT pg_temp.recv('dl_src2', 10, '0');
SELECT count(*) FROM queue.send('dl_src2', 'm4');
SELECT pg_temp.recv('dl_src2', 10, '1 hour');
COMMIT;
SELECT pg_temp.content('dl_src2') AS source;
SELECT * FROM pg_temp.letters('dl_dlq') ORDER BY body;
SELECT pg_temp.del('dl_src2', 'm4');
-- queue.stats.dead_lettered counts per source queue
SELECT queue_name, dead_lettered FROM queue.stats
WHERE queue_name IN ('dl_dlq', 'dl_src', 'dl_src2') ORDER BY queue_name;

----------------------------------------------------------------------
-- alter: lowering max_receive_count applies to the next receive;
-- dead_letter_queue => '' removes the dead-letter queue
----------------------------------------------------------------------
SELECT count(*) FROM queue.send('dl_src', 'twice');
SELECT pg_temp.recv('dl_src', 1, '0');
BEGIN;
SELECT queue.alter('dl_src', max_receive_count => 1);
SELECT pg_temp.recv('dl_src', 1, '0');
SELECT pg_temp.content('dl_src') AS source;
ROLLBACK;
SELECT queue.alter('dl_src', dead_letter_queue => '');
SELECT dead_letter_queue, max_receive_count FROM queue.queues WHERE queue_name = 'dl_src';
-- no limit any more: received again and again
SELECT pg_temp.recv('dl_src', 1, '0');
SELECT pg_temp.recv('dl_src', 1, '0');
SELECT pg_temp.recv('dl_src', 1, '0');
SELECT pg_temp.recv('dl_src', 1, '1 hour');
SELECT pg_temp.del('dl_src', 'twice');
SELECT queue.alter('dl_src', dead_letter_queue => 'dl_dlq', max_receive_count => 3);
SELECT dead_letter_queue, max_receive_count FROM queue.queues WHERE queue_name = 'dl_src';

----------------------------------------------------------------------
-- redrive (standard): back to the queue each came from, as fresh
-- deliveries: receive count 0, visible at once, no "queue.dead_letter"
----------------------------------------------------------------------
SELECT queue.create('dl_other') > 0 AS created;
SELECT pg_temp.content('dl_dlq');
-- max_messages: the oldest first
SELECT queue.redrive('dl_dlq', max_messages => 2);
SELECT pg_temp.content('dl_src') AS src, pg_temp.content('dl_src2') AS src2,
	   pg_temp.content('dl_dlq') AS dlq;
SELECT body, attributes, deduplication_id, receive_count, first_received_at IS NULL AS never_received,
	   visible_at <= now() AS visible
FROM queue.peek('dl_src');
-- a dead letter someone holds stays where it is
SELECT pg_temp.recv('dl_dlq', 1, '1 hour');
SELECT queue.redrive('dl_dlq');
SELECT pg_temp.content('dl_dlq') AS dlq;
-- let go, it goes too
SELECT pg_temp.vis('dl_dlq', 'm2', '0');
SELECT queue.redrive('dl_dlq');
SELECT pg_temp.content('dl_src2') AS src2, pg_temp.content('dl_dlq') AS dlq;
-- receive counts start again: max_receive_count more receives
SELECT pg_temp.recv('dl_src', 10, '0');
SELECT pg_temp.recv('dl_src', 10, '0');
SELECT pg_temp.recv('dl_src', 10, '1 hour');
SELECT pg_temp.del('dl_src', 'poison');
-- nothing to redrive
SELECT queue.redrive('dl_dlq');
-- destination_queue: everything goes there, whatever its source
BEGIN;
SELECT pg_temp.recv('dl_src2', 10, '0');
SELECT pg_temp.recv('dl_src2', 10, '0');
COMMIT;
SELECT * FROM pg_temp.letters('dl_dlq') ORDER BY body;
SELECT queue.redrive('dl_dlq', destination_queue => 'dl_other');
SELECT pg_temp.bag('dl_other') AS other, pg_temp.content('dl_src2') AS src2,
	   pg_temp.content('dl_dlq') AS dlq;
SELECT count(*) FILTER (WHERE attributes ? 'queue.dead_letter') AS still_marked
FROM queue.peek('dl_other');
SELECT queue.purge('dl_other');
-- a dead letter whose source queue is gone has nowhere to go back to: it
-- stays (a NOTICE names it)
SELECT queue.create('dl_gone', dead_letter_queue => 'dl_dlq', max_receive_count => 1) > 0 AS created;
SELECT count(*) FROM queue.send('dl_gone', 'orphan');
BEGIN;
SELECT pg_temp.recv('dl_gone', 1, '0');
SELECT pg_temp.recv('dl_gone', 1, '0');
COMMIT;
SELECT queue.drop('dl_gone');
SET client_min_messages = warning;
SELECT queue.redrive('dl_dlq');
RESET client_min_messages;
SELECT * FROM pg_temp.letters('dl_dlq');
-- but it can go to a destination
SELECT queue.redrive('dl_dlq', 'dl_other');
SELECT pg_temp.content('dl_other');
SELECT queue.purge('dl_other');
-- a redrive that rolls back moves nothing
SELECT count(*) FROM queue.send('dl_src2', 'back');
BEGIN;
SELECT pg_temp.recv('dl_src2', 1, '0');
SELECT pg_temp.recv('dl_src2', 1, '0');
COMMIT;
BEGIN;
SELECT queue.redrive('dl_dlq');
ROLLBACK;
SELECT pg_temp.content('dl_src2') AS src2, pg_temp.content('dl_dlq') AS dlq;
SELECT queue.purge('dl_dlq');

----------------------------------------------------------------------
-- FIFO: a poison message goes to the FIFO dead-letter queue after
-- max_receive_count receives, and the rest of its group then flows in
-- order
----------------------------------------------------------------------
SELECT queue.create('dl_fdlq', fifo => true) > 0 AS created;
SELECT queue.create('dl_fsrc', fifo => true, dead_letter_queue => 'dl_fdlq',
	max_receive_count => 2) > 0 AS created;
SELECT count(*) FROM queue.send_batch('dl_fsrc', ARRAY['a1', 'a2', 'a3', 'a4', 'a5', 'b1', 'b2'],
	message_group_ids => ARRAY['g', 'g', 'g', 'g', 'g', 'h', 'h'],
	deduplication_ids => ARRAY['a1', 'a2', 'a3', 'a4', 'a5', 'b1', 'b2'],
	attributes => ARRAY['{"poison": true}', NULL, NULL, NULL, NULL, NULL, NULL]::jsonb[]);
SELECT sequence_number AS a1_seq, sent_at AS a1_sent FROM queue.peek('dl_fsrc') WHERE body = 'a1' \gset
BEGIN;
-- a1 fails twice
SELECT pg_temp.recv('dl_fsrc', 1, '0');
SELECT pg_temp.recv('dl_fsrc', 1, '0');
-- the third receive moves it; the rest of group g comes, in order, then h
SELECT pg_temp.recv('dl_fsrc', 10, '0');
SELECT pg_temp.recv('dl_fsrc', 2, '1 hour');
COMMIT;
SELECT * FROM pg_temp.letters('dl_fdlq');
SELECT body, message_group_id, deduplication_id, sequence_number = :a1_seq AS same_sequence,
	   sent_at = :'a1_sent' AS sent_at_kept, attributes -> 'poison' AS poison
FROM queue.peek('dl_fdlq');
SELECT pg_temp.dead('dl_fsrc') AS source, pg_temp.dead('dl_fdlq') AS dlq;
SELECT pg_temp.del('dl_fsrc', 'a2'), pg_temp.del('dl_fsrc', 'a3');
SELECT pg_temp.content('dl_fsrc');

----------------------------------------------------------------------
-- FIFO redrive: back in its group behind nothing it was ahead of
----------------------------------------------------------------------
SELECT queue.redrive('dl_fdlq');
SELECT pg_temp.content('dl_fsrc') AS source, pg_temp.content('dl_fdlq') AS dlq;
SELECT body, attributes, sequence_number = :a1_seq AS same_sequence, receive_count,
	   visible_at <= now() AS visible, first_received_at IS NULL AS never_received
FROM queue.peek('dl_fsrc') WHERE body = 'a1';
-- its group is served first again (its head is the oldest), a1 first
SELECT pg_temp.recv('dl_fsrc', 10, '1 hour');
SELECT pg_temp.del('dl_fsrc', b) FROM unnest(ARRAY['a1', 'a4', 'a5', 'b1', 'b2']) b;

-- while a later message of its group is in flight, a redriven one waits
-- for it (a group with a message in flight gives nothing)
SELECT count(*) FROM queue.send_batch('dl_fsrc', ARRAY['k1', 'k2', 'k3'],
	message_group_ids => ARRAY['k', 'k', 'k'], deduplication_ids => ARRAY['k1', 'k2', 'k3']);
BEGIN;
SELECT pg_temp.recv('dl_fsrc', 1, '0');
SELECT pg_temp.recv('dl_fsrc', 1, '0');
SELECT pg_temp.recv('dl_fsrc', 10, '0');
SELECT pg_temp.recv('dl_fsrc', 1, '1 hour');
COMMIT;
SELECT queue.redrive('dl_fdlq');
SELECT pg_temp.content('dl_fsrc');
SELECT pg_temp.recv('dl_fsrc', 10, '1 hour');
SELECT pg_temp.del('dl_fsrc', 'k2');
SELECT pg_temp.recv('dl_fsrc', 10, '1 hour');
SELECT pg_temp.del('dl_fsrc', b) FROM unnest(ARRAY['k1', 'k3']) b;

-- several dead letters of one group: redrive in batches keeps their order
SELECT count(*) FROM queue.send_batch('dl_fsrc', ARRAY['p1', 'p2', 'p3', 'q1'],
	message_group_ids => ARRAY['p', 'p', 'p', 'q'], deduplication_ids => ARRAY['p1', 'p2', 'p3', 'q1']);
BEGIN;
SELECT pg_temp.recv('dl_fsrc', 10, '0');
SELECT pg_temp.recv('dl_fsrc', 10, '0');
SELECT pg_temp.recv('dl_fsrc', 10, '0');
COMMIT;
SELECT * FROM pg_temp.letters('dl_fdlq');
SELECT queue.redrive('dl_fdlq', max_messages => 2);
SELECT pg_temp.content('dl_fsrc') AS source, pg_temp.content('dl_fdlq') AS dlq;
SELECT queue.redrive('dl_fdlq', max_messages => 10);
SELECT pg_temp.content('dl_fsrc') AS source, pg_temp.content('dl_fdlq') AS dlq;
SELECT pg_temp.recv('dl_fsrc', 10, '1 hour');
SELECT pg_temp.del('dl_fsrc', b) FROM unnest(ARRAY['p1', 'p2', 'p3', 'q1']) b;
-- FIFO redrive to another FIFO queue
SELECT queue.create('dl_fother', fifo => true) > 0 AS created;
SELECT count(*) FROM queue.send('dl_fsrc', 'r1', message_group_id => 'r', deduplication_id => 'r1');
BEGIN;
SELECT pg_temp.recv('dl_fsrc', 1, '0');
SELECT pg_temp.recv('dl_fsrc', 1, '0');
SELECT pg_temp.recv('dl_fsrc', 1, '0');
COMMIT;
SELECT queue.redrive('dl_fdlq', destination_queue => 'dl_fother');
SELECT body, message_group_id, deduplication_id, receive_count,
	   attributes IS NULL AS no_attributes
FROM queue.peek('dl_fother');
SELECT pg_temp.content('dl_fsrc') AS source, pg_temp.content('dl_fdlq') AS dlq;
SELECT pg_temp.dead('dl_fsrc');

-- a receive that moves a group's head takes as many of the rest of that
-- group as it can, in order, before any other group: the moved message
-- takes no place in the batch
SELECT queue.create('dl_ffill', fifo => true, dead_letter_queue => 'dl_fdlq',
	max_receive_count => 1) > 0 AS created;
SELECT count(*) FROM queue.send_batch('dl_ffill', ARRAY['x1', 'x2', 'x3', 'y1'],
	message_group_ids => ARRAY['x', 'x', 'x', 'y'], deduplication_ids => ARRAY['x1', 'x2', 'x3', 'y1']);
BEGIN;
SELECT pg_temp.recv('dl_ffill', 1, '0');
SELECT pg_temp.recv('dl_ffill', 2, '1 hour');
COMMIT;
SELECT pg_temp.content('dl_ffill') AS source;
SELECT queue.purge('dl_fdlq');

----------------------------------------------------------------------
-- errors of create and alter
----------------------------------------------------------------------
-- unknown dead-letter queue: 42704
SELECT pg_temp.err($$SELECT queue.create('dl_e1', dead_letter_queue => 'dl_nope', max_receive_count => 1)$$);
SELECT pg_temp.err($$SELECT queue.alter('dl_src', dead_letter_queue => 'dl_nope')$$);
-- a bad name: 42602
SELECT pg_temp.err($$SELECT queue.create('dl_e1', dead_letter_queue => 'a b', max_receive_count => 1)$$);
-- a queue as its own dead-letter queue: 22023 (on create the queue does
-- not exist yet: 42704)
SELECT pg_temp.err($$SELECT queue.alter('dl_src', dead_letter_queue => 'dl_src')$$);
SELECT pg_temp.err($$SELECT queue.create('dl_e1', dead_letter_queue => 'dl_e1', max_receive_count => 1)$$);
-- FIFO and standard do not mix: 22023
SELECT pg_temp.err($$SELECT queue.create('dl_e1', dead_letter_queue => 'dl_fdlq', max_receive_count => 1)$$);
SELECT pg_temp.err($$SELECT queue.create('dl_e1', fifo => true, dead_letter_queue => 'dl_dlq', max_receive_count => 1)$$);
SELECT pg_temp.err($$SELECT queue.alter('dl_src', dead_letter_queue => 'dl_fdlq')$$);
SELECT pg_temp.err($$SELECT queue.alter('dl_fsrc', dead_letter_queue => 'dl_dlq')$$);
-- one without the other: 22023
SELECT pg_temp.err($$SELECT queue.create('dl_e1', dead_letter_queue => 'dl_dlq')$$);
SELECT pg_temp.err($$SELECT queue.create('dl_e1', max_receive_count => 1)$$);
SELECT pg_temp.err($$SELECT queue.alter('dl_other', dead_letter_queue => 'dl_dlq')$$);
SELECT pg_temp.err($$SELECT queue.alter('dl_other', max_receive_count => 5)$$);
-- max_receive_count is 1 to 1000: 22023
SELECT pg_temp.err($$SELECT queue.create('dl_e1', dead_letter_queue => 'dl_dlq', max_receive_count => 0)$$);
SELECT pg_temp.err($$SELECT queue.create('dl_e1', dead_letter_queue => 'dl_dlq', max_receive_count => -1)$$);
SELECT pg_temp.err($$SELECT queue.create('dl_e1', dead_letter_queue => 'dl_dlq', max_receive_count => 1001)$$);
SELECT pg_temp.err($$SELECT queue.alter('dl_src', max_receive_count => 0)$$);
SELECT pg_temp.err($$SELECT queue.alter('dl_src', max_receive_count => 1001)$$);
SELECT pg_temp.err($$SELECT queue.create('dl_e1', dead_letter_queue => 'dl_dlq', max_receive_count => 1000)$$) AS max_1000;
SELECT queue.drop('dl_e1');
-- redrive_allow '{}' admits no source; a list admits only the sources it names
SELECT queue.create('dl_closed', redrive_allow => '{}') > 0 AS created;
SELECT queue.create('dl_picky', redrive_allow => ARRAY['dl_e2']) > 0 AS created;
SELECT queue_name, redrive_allow FROM queue.queues
WHERE queue_name IN ('dl_closed', 'dl_picky') ORDER BY queue_name;
SELECT pg_temp.err($$SELECT queue.create('dl_e1', dead_letter_queue => 'dl_closed', max_receive_count => 1)$$);
SELECT pg_temp.err($$SELECT queue.create('dl_e1', dead_letter_queue => 'dl_picky', max_receive_count => 1)$$);
SELECT pg_temp.err($$SELECT queue.alter('dl_src', dead_letter_queue => 'dl_picky')$$);
SELECT pg_temp.err($$SELECT queue.create('dl_e2', dead_letter_queue => 'dl_picky', max_receive_count => 1)$$) AS listed;
SELECT queue_name FROM queue.queues WHERE queue_name LIKE 'dl\_e_' ORDER BY 1;
-- cycles, through alter: 22023
SELECT queue.create('dl_c1') > 0 AS created;
SELECT queue.create('dl_c2', dead_letter_queue => 'dl_c1', max_receive_count => 1) > 0 AS created;
SELECT queue.create('dl_c3', dead_letter_queue => 'dl_c2', max_receive_count => 1) > 0 AS created;
SELECT pg_temp.err($$SELECT queue.alter('dl_c1', dead_letter_queue => 'dl_c2', max_receive_count => 1)$$);
SELECT pg_temp.err($$SELECT queue.alter('dl_c1', dead_letter_queue => 'dl_c3', max_receive_count => 1)$$);
-- a chain is fine
SELECT pg_temp.err($$SELECT queue.alter('dl_c1', dead_letter_queue => 'dl_other', max_receive_count => 1)$$) AS chain;
SELECT queue_name, dead_letter_queue FROM queue.queues WHERE queue_name LIKE 'dl\_c_' ORDER BY 1;
-- failed calls changed nothing
SELECT queue_name, dead_letter_queue, max_receive_count FROM queue.queues
WHERE queue_name IN ('dl_src', 'dl_fsrc', 'dl_other') ORDER BY 1;

----------------------------------------------------------------------
-- errors of redrive
----------------------------------------------------------------------
SELECT pg_temp.err($$SELECT queue.redrive(NULL)$$);
SELECT pg_temp.err($$SELECT queue.redrive('dl_nope')$$);
SELECT pg_temp.err($$SELECT queue.redrive('dl_dlq', 'dl_nope')$$);
SELECT pg_temp.err($$SELECT queue.redrive('dl_dlq', 'dl_dlq')$$);
SELECT pg_temp.err($$SELECT queue.redrive('dl_dlq', 'dl_fother')$$);
SELECT pg_temp.err($$SELECT queue.redrive('dl_fdlq', 'dl_other')$$);
SELECT pg_temp.err($$SELECT queue.redrive('dl_dlq', max_messages => 0)$$);
SELECT pg_temp.err($$SELECT queue.redrive('dl_dlq', max_messages => -1)$$);

----------------------------------------------------------------------
-- drop: a dead-letter queue in use is 2BP01 unless forced; forced, its
-- sources lose their dead-letter queue
----------------------------------------------------------------------
SELECT pg_temp.err($$SELECT queue.drop('dl_dlq')$$);
SELECT pg_temp.err($$SELECT queue.drop('dl_dlq', if_exists => true)$$);
SELECT pg_temp.err($$SELECT queue.drop('dl_dlq', force => NULL)$$);
SELECT queue_name FROM queue.queues WHERE queue_name = 'dl_dlq';
-- a message at the limit, about to be moved
BEGIN;
SELECT count(*) FROM queue.send('dl_src2', 'last');
SELECT pg_temp.recv('dl_src2', 1, '0');
SELECT queue.drop('dl_dlq', force => true);
SELECT queue_name, dead_letter_queue, max_receive_count FROM queue.queues
WHERE queue_name IN ('dl_src', 'dl_src2') ORDER BY 1;
-- with no dead-letter queue, it is delivered
SELECT pg_temp.recv('dl_src2', 1, '1 hour');
COMMIT;
-- a source queue drops without force
SELECT queue.drop('dl_c3');

SELECT queue.drop(queue_name, force => true) FROM queue.queues
WHERE queue_name LIKE 'dl\_%' ORDER BY queue_name DESC;
