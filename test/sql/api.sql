-- api: the public functions and views of queue on a standard queue, used
-- as documented.  Output is booleans and counts, never ids, receipts or
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

----------------------------------------------------------------------
-- create
----------------------------------------------------------------------
SELECT queue.create('api_q') AS qid \gset
SELECT :qid > 0 AS create_returns_id;
-- identical attributes (defaults spelled out or not): same id
SELECT queue.create('api_q') = :qid AS idempotent;
SELECT queue.create('api_q', fifo => false, visibility_timeout => '30 seconds',
		delay => '0', retention => '4 days', max_message_size => 1048576,
		tags => '{}') = :qid AS idempotent_with_defaults;
-- other attributes: 42710, and the queue is unchanged
SELECT pg_temp.err($$SELECT queue.create('api_q', visibility_timeout => '1 minute')$$);
SELECT pg_temp.err($$SELECT queue.create('api_q', tags => '{"a": 1}')$$);
SELECT visibility_timeout, tags FROM queue.queues WHERE queue_name = 'api_q';

-- the queues view: columns in order, one row a queue
SELECT attnum, attname, format_type(atttypid, atttypmod) AS type
FROM pg_attribute WHERE attrelid = 'queue.queues'::regclass AND attnum > 0
ORDER BY attnum;
SELECT queue_id = :qid AS same_id, fifo, visibility_timeout, delay, retention,
	   max_message_size, receive_wait, content_based_deduplication,
	   deduplication_window, deduplication_scope, dead_letter_queue,
	   max_receive_count, redrive_allow, tags, owner::text = current_user AS owned,
	   created_at <= now() AS created_at_set
FROM queue.queues WHERE queue_name = 'api_q';

-- every attribute given
SELECT queue.create('api_full', visibility_timeout => '5 minutes', delay => '10 seconds',
		retention => '1 day', max_message_size => 1000, receive_wait => '2 seconds',
		deduplication_window => '10 minutes', deduplication_scope => 'message_group',
		tags => '{"team": "core"}') > 0 AS created;
SELECT fifo, visibility_timeout, delay, retention, max_message_size, receive_wait,
	   deduplication_window, deduplication_scope, tags
FROM queue.queues WHERE queue_name = 'api_full';
-- names may use letters, digits, "_", "." and "-", up to 80 characters
SELECT queue.create('Api.Q-1_x') > 0 AS created;
SELECT queue.create(repeat('n', 80)) > 0 AS created_80;
SELECT count(*) FROM queue.queues
WHERE queue_name IN ('Api.Q-1_x', repeat('n', 80));
SELECT queue.drop('Api.Q-1_x'), queue.drop(repeat('n', 80));

-- the stats view: columns in order
SELECT attnum, attname, format_type(atttypid, atttypmod) AS type
FROM pg_attribute WHERE attrelid = 'queue.stats'::regclass AND attnum > 0
ORDER BY attnum;
-- an empty queue
SELECT visible, in_flight, delayed, oldest_sent_at IS NULL AS no_oldest,
	   oldest_visible_age IS NULL AS no_age, sent, received, deleted,
	   deduplicated, dead_lettered, expired
FROM queue.stats WHERE queue_name = 'api_q';

----------------------------------------------------------------------
-- send
----------------------------------------------------------------------
-- text body
SELECT message_id > 0 AS has_id, sequence_number IS NULL AS no_seq, duplicate
FROM queue.send('api_q', 'hello');
-- jsonb body, with attributes
SELECT message_id > 0 AS has_id, sequence_number IS NULL AS no_seq, duplicate
FROM queue.send('api_q', '{"b": 2, "a": [1, 2]}'::jsonb, attributes => '{"kind": "json"}');
-- a message group id is accepted on a standard queue
SELECT count(*) FROM queue.send('api_q', 'grouped', message_group_id => 'g-1');
SELECT visible, in_flight, delayed, oldest_sent_at IS NOT NULL AS has_oldest,
	   oldest_visible_age >= '0' AS has_age
FROM queue.stats WHERE queue_name = 'api_q';
-- peek: every message, receipt null, nothing changed
SELECT receipt IS NULL AS no_receipt, body, attributes, message_group_id,
	   deduplication_id, sequence_number, receive_count,
	   first_received_at IS NULL AS never_received, visible_at <= now() AS visible
FROM queue.peek('api_q') ORDER BY message_id;
-- the jsonb body comes back as the text of the jsonb value
SELECT body::jsonb = '{"a": [1, 2], "b": 2}'::jsonb AS same_json
FROM queue.peek('api_q') WHERE attributes IS NOT NULL;
SELECT count(*) FROM queue.peek('api_q', max_messages => 2);

-- send is transactional: rolled back, nothing is enqueued
BEGIN;
SELECT count(*) FROM queue.send('api_q', 'rolled back');
SELECT count(*) FROM queue.peek('api_q');
ROLLBACK;
SELECT count(*) FROM queue.peek('api_q');
SELECT pg_temp.depth('api_q');

-- receive all three: each once, in send order
SELECT receipt IS NOT NULL AS has_receipt, length(receipt) > 0 AS receipt_text, body,
	   attributes, message_group_id, receive_count,
	   first_received_at IS NOT NULL AS first_received,
	   visible_at > now() AS leased
FROM queue.receive('api_q', max_messages => 10) ORDER BY message_id;
SELECT count(*) FROM queue.receive('api_q', max_messages => 10);
SELECT pg_temp.depth('api_q');
SELECT sent, received, deleted FROM queue.stats WHERE queue_name = 'api_q';
SELECT queue.purge('api_q');
SELECT queue.purge('api_q');
SELECT pg_temp.depth('api_q');

----------------------------------------------------------------------
-- send_batch
----------------------------------------------------------------------
SELECT ordinal, message_id > 0 AS has_id, sequence_number IS NULL AS no_seq, duplicate
FROM queue.send_batch('api_q', ARRAY['b1', 'b2', 'b3']) ORDER BY ordinal;
-- ids follow the ordinals
SELECT bool_and(message_id > prev) AS ids_ascend
FROM (SELECT message_id, lag(message_id, 1, 0::bigint) OVER (ORDER BY ordinal) AS prev
	  FROM queue.send_batch('api_q', ARRAY['b4', 'b5', 'b6', 'b7'])) s;
-- jsonb bodies, attributes and group ids per entry
SELECT ordinal FROM queue.send_batch('api_q',
	ARRAY['{"n": 1}', '[2]', '"three"']::jsonb[],
	message_group_ids => ARRAY['g1', NULL, 'g3'],
	attributes => ARRAY['{"i": 1}', NULL, '{"i": 3}']::jsonb[]) ORDER BY ordinal;
SELECT body, attributes, message_group_id FROM queue.peek('api_q', 100) ORDER BY message_id;
SELECT pg_temp.depth('api_q');
SELECT sent FROM queue.stats WHERE queue_name = 'api_q';

----------------------------------------------------------------------
-- receive
----------------------------------------------------------------------
-- max_messages: the default is one
SELECT body FROM queue.receive('api_q');
SELECT body FROM queue.receive('api_q', 3) ORDER BY message_id;
SELECT body FROM queue.receive('api_q', max_messages => 100) ORDER BY message_id;
SELECT count(*) FROM queue.receive('api_q', max_messages => 100);
SELECT pg_temp.depth('api_q');
SELECT received FROM queue.stats WHERE queue_name = 'api_q';
SELECT queue.purge('api_q');

-- receive_count counts every receive; first_received_at is set once
SELECT count(*) FROM queue.send('api_q', 'counted');
SELECT receive_count, first_received_at AS first_at
FROM queue.receive('api_q', visibility_timeout => '0') \gset
SELECT :receive_count AS receive_count;
SELECT receive_count, first_received_at = :'first_at' AS first_unchanged,
	   visible_at >= first_received_at AS lease_after_first
FROM queue.receive('api_q', visibility_timeout => '0');
SELECT receive_count, first_received_at = :'first_at' AS first_unchanged
FROM queue.receive('api_q', visibility_timeout => '0');
-- a receive that rolls back is not counted, and leaves the message visible
BEGIN;
SELECT receive_count FROM queue.receive('api_q', visibility_timeout => '1 hour');
ROLLBACK;
SELECT receive_count, visible_at <= now() AS visible FROM queue.peek('api_q');
SELECT receive_count FROM queue.receive('api_q', visibility_timeout => '1 hour');
SELECT receive_count FROM queue.peek('api_q');
SELECT queue.purge('api_q');

-- every receive issues a new receipt
SELECT count(*) FROM queue.send('api_q', 'receipts');
SELECT receipt AS r1 FROM queue.receive('api_q', visibility_timeout => '0') \gset
SELECT receipt AS r2 FROM queue.receive('api_q', visibility_timeout => '0') \gset
SELECT :'r1' <> :'r2' AS new_receipt;
SELECT queue.purge('api_q');

----------------------------------------------------------------------
-- delete
----------------------------------------------------------------------
SELECT count(*) FROM queue.send_batch('api_q', ARRAY['d1', 'd2']);
SELECT receipt AS r FROM queue.receive('api_q') \gset
SELECT queue.delete('api_q', :'r');
-- the same receipt again: already deleted, false rather than an error
SELECT queue.delete('api_q', :'r');
SELECT body FROM queue.peek('api_q');
-- a delete that rolls back leaves the message
SELECT receipt AS r FROM queue.receive('api_q') \gset
BEGIN;
SELECT queue.delete('api_q', :'r');
ROLLBACK;
SELECT body FROM queue.peek('api_q');
SELECT queue.delete('api_q', :'r');
SELECT pg_temp.depth('api_q');
SELECT deleted FROM queue.stats WHERE queue_name = 'api_q';

----------------------------------------------------------------------
-- delete_batch
----------------------------------------------------------------------
SELECT count(*) FROM queue.send_batch('api_q', ARRAY['e1', 'e2', 'e3']);
SELECT array_agg(receipt ORDER BY message_id) AS rs
FROM queue.receive('api_q', 3) \gset
SELECT * FROM queue.delete_batch('api_q', :'rs') ORDER BY ordinal;
SELECT * FROM queue.delete_batch('api_q', :'rs') ORDER BY ordinal;
SELECT pg_temp.depth('api_q');
-- some deleted already, some not: one row per receipt, in order
SELECT count(*) FROM queue.send_batch('api_q', ARRAY['f1', 'f2']);
SELECT array_agg(receipt ORDER BY message_id) AS rs
FROM queue.receive('api_q', 2) \gset
SELECT queue.delete('api_q', (:'rs'::text[])[2]);
SELECT * FROM queue.delete_batch('api_q', :'rs') ORDER BY ordinal;
SELECT pg_temp.depth('api_q');
SELECT deleted FROM queue.stats WHERE queue_name = 'api_q';

----------------------------------------------------------------------
-- change_visibility
----------------------------------------------------------------------
SELECT count(*) FROM queue.send('api_q', 'cv');
SELECT receipt AS r FROM queue.receive('api_q', visibility_timeout => '1 hour') \gset
SELECT count(*) FROM queue.receive('api_q');
-- extend: still in flight, the lease now ends later
SELECT queue.change_visibility('api_q', :'r', '2 hours');
SELECT visible_at > now() + interval '90 minutes' AS extended FROM queue.peek('api_q');
-- the same receipt may change it again (it is still the latest)
SELECT queue.change_visibility('api_q', :'r', '0');
-- zero: visible again at once
SELECT visible_at <= clock_timestamp() AS visible FROM queue.peek('api_q');
SELECT pg_temp.depth('api_q');
SELECT receipt AS r2, receive_count FROM queue.receive('api_q', visibility_timeout => '1 hour') \gset
SELECT :receive_count AS receive_count, :'r2' <> :'r' AS new_receipt;
-- the old receipt is now stale
SELECT pg_temp.err(format('SELECT queue.change_visibility(%L, %L, %L)', 'api_q', :'r', '0'));
SELECT pg_temp.err(format('SELECT queue.delete(%L, %L)', 'api_q', :'r'));
SELECT pg_temp.depth('api_q');
SELECT queue.delete('api_q', :'r2');

----------------------------------------------------------------------
-- change_visibility_batch
----------------------------------------------------------------------
SELECT count(*) FROM queue.send_batch('api_q', ARRAY['c1', 'c2', 'c3']);
SELECT array_agg(receipt ORDER BY message_id) AS rs
FROM queue.receive('api_q', 3, visibility_timeout => '1 hour') \gset
SELECT pg_temp.depth('api_q');
SELECT * FROM queue.change_visibility_batch('api_q', (:'rs'::text[])[1:2], '0')
ORDER BY ordinal;
SELECT pg_temp.depth('api_q');
SELECT body FROM queue.receive('api_q', 10, visibility_timeout => '1 hour') ORDER BY message_id;
-- the third receipt is still the latest of its message
SELECT * FROM queue.change_visibility_batch('api_q', (:'rs'::text[])[3:3], '2 hours');
-- a deleted message: false
SELECT queue.delete('api_q', (:'rs'::text[])[3]);
SELECT * FROM queue.change_visibility_batch('api_q', (:'rs'::text[])[3:3], '0');
-- change_visibility of a deleted message is an error (as in SQS), not false
SELECT pg_temp.err(format('SELECT queue.change_visibility(%L, %L, %L)', 'api_q', (:'rs'::text[])[3], '0'));
SELECT queue.purge('api_q');

----------------------------------------------------------------------
-- peek
----------------------------------------------------------------------
-- visible, in flight and delayed, in delivery order, changing nothing
SELECT count(*) FROM queue.send('api_q', 'p-delayed', delay => '2 hours');
SELECT count(*) FROM queue.send_batch('api_q', ARRAY['p-inflight', 'p-visible1', 'p-visible2']);
SELECT count(*) FROM queue.receive('api_q', visibility_timeout => '1 hour');
SELECT pg_temp.depth('api_q');
SELECT body, receipt IS NULL AS no_receipt, receive_count FROM queue.peek('api_q');
SELECT body FROM queue.peek('api_q', max_messages => 1);
SELECT body FROM queue.peek('api_q', 3);
-- nothing changed
SELECT pg_temp.depth('api_q');
SELECT body, receive_count FROM queue.receive('api_q', 10) ORDER BY message_id;
SELECT queue.purge('api_q');

----------------------------------------------------------------------
-- stats counters
----------------------------------------------------------------------
SELECT queue.create('api_stats') > 0 AS created;
SELECT count(*) FROM queue.send_batch('api_stats', ARRAY['s1', 's2', 's3', 's4']);
SELECT count(*) FROM queue.send('api_stats', 's5', delay => '1 hour');
-- counted at commit, not before, and not at all when rolled back
BEGIN;
SELECT count(*) FROM queue.send('api_stats', 'uncommitted');
SELECT sent FROM queue.stats WHERE queue_name = 'api_stats';
ROLLBACK;
SELECT array_agg(receipt) AS rs FROM queue.receive('api_stats', 2) \gset
SELECT count(*) FROM queue.delete_batch('api_stats', :'rs') WHERE deleted;
SELECT count(*) FROM queue.receive('api_stats', visibility_timeout => '1 hour');
SELECT visible, in_flight, delayed, sent, received, deleted, deduplicated,
	   dead_lettered, expired
FROM queue.stats WHERE queue_name = 'api_stats';
-- purge empties the queue
SELECT queue.purge('api_stats');
SELECT visible, in_flight, delayed, oldest_sent_at IS NULL AS no_oldest
FROM queue.stats WHERE queue_name = 'api_stats';

----------------------------------------------------------------------
-- alter: visible in the queues view, and used by the next call of this
-- session (the session's cached metadata is refreshed)
----------------------------------------------------------------------
SELECT count(*) FROM queue.send('api_stats', 'before alter');
SELECT count(*) FROM queue.receive('api_stats', visibility_timeout => '0');
SELECT queue.alter('api_stats', visibility_timeout => '1 hour', max_message_size => 10,
	tags => '{"v": 2}');
SELECT visibility_timeout, delay, retention, max_message_size, tags
FROM queue.queues WHERE queue_name = 'api_stats';
-- the new default visibility timeout applies to this session's next receive
SELECT visible_at > now() + interval '50 minutes' AS one_hour_lease
FROM queue.receive('api_stats');
-- the new max_message_size applies to the next send
SELECT pg_temp.err($$SELECT queue.send('api_stats', 'eleven byte')$$);
SELECT count(*) FROM queue.send('api_stats', 'ten bytes!');
-- null leaves an attribute unchanged
SELECT queue.alter('api_stats');
SELECT visibility_timeout, max_message_size, tags FROM queue.queues WHERE queue_name = 'api_stats';
-- a delay set by alter delays the next send
SELECT queue.alter('api_stats', delay => '1 hour');
SELECT count(*) FROM queue.send('api_stats', 'delayed');
SELECT delayed FROM queue.stats WHERE queue_name = 'api_stats';
-- alter and use in one transaction
BEGIN;
SELECT queue.alter('api_stats', delay => '0', max_message_size => 100);
SELECT count(*) FROM queue.send('api_stats', 'not delayed and longer than ten bytes');
COMMIT;
SELECT body FROM queue.receive('api_stats', 10, visibility_timeout => '0') ORDER BY message_id;
-- an alter that rolls back changes nothing
BEGIN;
SELECT queue.alter('api_stats', max_message_size => 5);
ROLLBACK;
SELECT max_message_size FROM queue.queues WHERE queue_name = 'api_stats';
SELECT count(*) FROM queue.send('api_stats', 'still fine');

----------------------------------------------------------------------
-- drop
----------------------------------------------------------------------
SELECT queue.drop('api_stats');
SELECT queue.drop('api_stats', if_exists => true);
SELECT pg_temp.err($$SELECT queue.drop('api_stats')$$);
SELECT count(*) FROM queue.queues WHERE queue_name = 'api_stats';
SELECT count(*) FROM queue.stats WHERE queue_name = 'api_stats';
-- this session had it cached: the next call finds it gone
SELECT pg_temp.err($$SELECT queue.send('api_stats', 'x')$$);
SELECT pg_temp.err($$SELECT queue.receive('api_stats')$$);
-- the name is free again, for a new queue with other attributes
SELECT queue.create('api_stats', visibility_timeout => '1 minute') > 0 AS recreated;
SELECT count(*) FROM queue.peek('api_stats');
SELECT visible, sent FROM queue.stats WHERE queue_name = 'api_stats';
-- a drop that rolls back keeps the queue and its messages
SELECT count(*) FROM queue.send('api_stats', 'kept');
BEGIN;
SELECT queue.drop('api_stats');
ROLLBACK;
SELECT body FROM queue.peek('api_stats');

-- clean up
SELECT queue.drop('api_stats'), queue.drop('api_full'), queue.drop('api_q');
SELECT count(*) FROM queue.queues WHERE queue_name LIKE 'api%';
