-- fair: tenants on a standard queue (DESIGN.md "Fair queues").  A receive
-- prefers the tenants (message_group_id; none is a tenant of its own) with
-- the fewest messages in flight, oldest first among equals, and spreads a
-- batch over them; max_in_flight_per_group caps a tenant's messages in
-- flight; queue.stats counts groups and noisy groups, queue.group_stats
-- lists the busiest.  Runs in either layout (queue.default_storage).
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
-- receive and show the bodies, in order
CREATE FUNCTION pg_temp.take(q text, n int, vt interval DEFAULT '30s') RETURNS text
LANGUAGE sql AS $$
	SELECT coalesce(string_agg(body, ' ' ORDER BY body), '-')
	FROM queue.receive(q, n, visibility_timeout => vt)
$$;
CREATE FUNCTION pg_temp.send_n(q text, g text, n int, prefix text) RETURNS bigint
LANGUAGE sql AS $$
	SELECT count(*) FROM generate_series(1, n) i,
		LATERAL queue.send(q, prefix || i, message_group_id => g)
$$;

-- 1. A batch goes round the tenants: a noisy tenant's 20 older messages do
-- not hold back B, C and the messages without a group id.
SELECT queue.create('fair_q') > 0 AS created;
SELECT pg_temp.send_n('fair_q', 'A', 20, 'a');
SELECT pg_temp.send_n('fair_q', 'B', 3, 'b');
SELECT pg_temp.send_n('fair_q', 'C', 1, 'c');
SELECT pg_temp.send_n('fair_q', NULL, 1, 'n');
-- each tenant's first (all at 0 in flight), then the lightest again
SELECT pg_temp.take('fair_q', 6);
-- A and B hold 2 in flight each: A's third is older; then B (2) before A (3)
SELECT pg_temp.take('fair_q', 1);
SELECT pg_temp.take('fair_q', 1);
SELECT pg_temp.take('fair_q', 1);
SELECT message_group_id, visible, in_flight, delayed, oldest_sent_at IS NOT NULL AS oldest
FROM queue.group_stats('fair_q');
SELECT groups, noisy_groups FROM queue.stats WHERE queue_name = 'fair_q';
SELECT queue.drop('fair_q');

-- 2. Fewest in flight first: A's messages are older, but while A has one
-- in flight a receive of one takes B's.
SELECT queue.create('fair_alt') > 0 AS created;
SELECT pg_temp.send_n('fair_alt', 'A', 3, 'a');
SELECT pg_temp.send_n('fair_alt', 'B', 3, 'b');
CREATE TEMP TABLE alt AS SELECT * FROM queue.receive('fair_alt', 1);
SELECT body AS r1 FROM alt;
SELECT pg_temp.take('fair_alt', 1) AS r2;
SELECT pg_temp.take('fair_alt', 1) AS r3;
SELECT pg_temp.take('fair_alt', 1) AS r4;
-- a deleted message is no longer in flight: A has 1 left, B 2
SELECT queue.delete('fair_alt', receipt) FROM alt;
SELECT pg_temp.take('fair_alt', 1) AS r5;
SELECT queue.drop('fair_alt');

-- 3. The cap: a tenant with max_in_flight_per_group messages in flight gets
-- no more until one is deleted or its lease ends.
SELECT queue.create('fair_cap', max_in_flight_per_group => 2) > 0 AS created;
SELECT pg_temp.send_n('fair_cap', 'A', 5, 'a');
SELECT pg_temp.send_n('fair_cap', 'B', 1, 'b');
CREATE TEMP TABLE got AS SELECT * FROM queue.receive('fair_cap', 10);
SELECT string_agg(body, ' ' ORDER BY body) FROM got;
SELECT pg_temp.take('fair_cap', 10) AS capped;
SELECT queue.delete('fair_cap', receipt) FROM got WHERE body = 'a1';
SELECT pg_temp.take('fair_cap', 10) AS after_delete;
-- a lease that ends frees a place: a2's, ended by change_visibility
SELECT queue.change_visibility('fair_cap', receipt, '0') FROM got WHERE body = 'a2';
SELECT pg_temp.take('fair_cap', 10) AS after_lease_end;
SELECT in_flight FROM queue.group_stats('fair_cap') WHERE message_group_id = 'A';
-- messages without a group id are a tenant of their own, capped too
SELECT pg_temp.send_n('fair_cap', NULL, 4, 'n');
SELECT pg_temp.take('fair_cap', 10) AS ungrouped;
SELECT pg_temp.take('fair_cap', 10) AS ungrouped_capped;
-- the cap in queue.queues; 0 in alter removes it
SELECT max_in_flight_per_group FROM queue.queues WHERE queue_name = 'fair_cap';
SELECT queue.alter('fair_cap', max_in_flight_per_group => 0);
SELECT max_in_flight_per_group IS NULL AS no_cap FROM queue.queues WHERE queue_name = 'fair_cap';
SELECT pg_temp.take('fair_cap', 10) AS uncapped;
SELECT queue.alter('fair_cap', max_in_flight_per_group => 1);
SELECT max_in_flight_per_group FROM queue.queues WHERE queue_name = 'fair_cap';
-- an identical create returns the id, another cap is another queue
SELECT queue.create('fair_cap', max_in_flight_per_group => 1) = queue_id AS same
FROM queue.queues WHERE queue_name = 'fair_cap';
SELECT pg_temp.err($$SELECT queue.create('fair_cap', max_in_flight_per_group => 2)$$);
SELECT pg_temp.err($$SELECT queue.create('fair_cap')$$);
SELECT queue.drop('fair_cap');

-- 4. Dead letters, delays, rolled-back receives and receive attempts keep
-- their rules on a fair queue.
SELECT queue.create('fair_dlq_target') > 0 AS created;
SELECT queue.create('fair_rules', dead_letter_queue => 'fair_dlq_target', max_receive_count => 1,
	max_in_flight_per_group => 5) > 0 AS created;
SELECT pg_temp.send_n('fair_rules', 'A', 2, 'a');
SELECT count(*) FROM queue.send('fair_rules', 'late', delay => '1 hour', message_group_id => 'B');
SELECT pg_temp.take('fair_rules', 10, '0') AS first;
-- received once already: the next receive moves them instead
SELECT pg_temp.take('fair_rules', 10) AS moved;
SELECT body, message_group_id FROM queue.peek('fair_dlq_target') ORDER BY body;
SELECT visible, in_flight, delayed FROM queue.stats WHERE queue_name = 'fair_rules';
SELECT pg_temp.send_n('fair_rules', 'C', 1, 'c');
BEGIN;
SELECT pg_temp.take('fair_rules', 10) AS rolled_back;
ROLLBACK;
-- the rolled-back receive counted: c1 goes to the dead-letter queue
SELECT pg_temp.take('fair_rules', 10) AS after_rollback;
SELECT count(*) AS dead FROM queue.peek('fair_dlq_target');
SELECT pg_temp.send_n('fair_rules', 'D', 2, 'd');
SELECT string_agg(body, ' ' ORDER BY body) AS attempt
FROM queue.receive('fair_rules', 10, receive_attempt_id => 'try-1');
SELECT string_agg(body, ' ' ORDER BY body) AS retried
FROM queue.receive('fair_rules', 10, receive_attempt_id => 'try-1');
SELECT queue.drop('fair_rules');
SELECT queue.drop('fair_dlq_target');

-- 5. Noisy groups (SQS's: more than 10% of the in-flight messages, and at
-- least 30): A holds 40 in flight, B 2.
SELECT queue.create('fair_noisy') > 0 AS created;
SELECT pg_temp.send_n('fair_noisy', 'A', 45, 'a');
SELECT pg_temp.send_n('fair_noisy', 'B', 2, 'b');
SELECT pg_temp.send_n('fair_noisy', NULL, 1, 'n');
SELECT count(*) FROM queue.receive('fair_noisy', 43);
SELECT groups, noisy_groups FROM queue.stats WHERE queue_name = 'fair_noisy';
SELECT message_group_id, visible, in_flight, delayed FROM queue.group_stats('fair_noisy');
SELECT message_group_id, in_flight FROM queue.group_stats('fair_noisy', max_groups => 1);
-- a queue without group ids: its messages are one tenant
SELECT queue.create('fair_plain') > 0 AS created;
SELECT groups, noisy_groups FROM queue.stats WHERE queue_name = 'fair_plain';
SELECT count(*) FROM queue.send('fair_plain', 'x');
SELECT groups, noisy_groups FROM queue.stats WHERE queue_name = 'fair_plain';
SELECT message_group_id, visible FROM queue.group_stats('fair_plain');
-- a FIFO queue's groups
SELECT queue.create('fair_fifo', fifo => true, content_based_deduplication => true) > 0 AS created;
SELECT count(*) FROM queue.send('fair_fifo', 'f1', message_group_id => 'G1');
SELECT count(*) FROM queue.send('fair_fifo', 'f2', message_group_id => 'G1');
SELECT count(*) FROM queue.send('fair_fifo', 'f3', message_group_id => 'G2');
SELECT count(*) FROM queue.receive('fair_fifo', 1);
SELECT message_group_id, visible, in_flight FROM queue.group_stats('fair_fifo');
SELECT groups FROM queue.stats WHERE queue_name = 'fair_fifo';

-- 6. Errors: 22023 for a cap out of range or on a FIFO queue, 22004 for
-- nulls, 42704 for an unknown queue, 42501 without a privilege.
SELECT pg_temp.err($$SELECT queue.create('fair_bad', max_in_flight_per_group => 0)$$);
SELECT pg_temp.err($$SELECT queue.create('fair_bad', max_in_flight_per_group => 120001)$$);
SELECT pg_temp.err($$SELECT queue.create('fair_bad.fifo', fifo => true, max_in_flight_per_group => 3)$$);
SELECT pg_temp.err($$SELECT queue.alter('fair_fifo', max_in_flight_per_group => 3)$$);
SELECT pg_temp.err($$SELECT queue.alter('fair_plain', max_in_flight_per_group => -1)$$);
SELECT pg_temp.err($$SELECT queue.alter('fair_plain', max_in_flight_per_group => 120001)$$);
SELECT pg_temp.err($$SELECT queue.alter('fair_nope', max_in_flight_per_group => 3)$$);
SELECT count(*) AS not_created FROM queue.queues WHERE queue_name LIKE 'fair_bad%';
SELECT max_in_flight_per_group IS NULL AS unchanged FROM queue.queues WHERE queue_name = 'fair_plain';
SELECT pg_temp.err($$SELECT * FROM queue.group_stats(NULL)$$);
SELECT pg_temp.err($$SELECT * FROM queue.group_stats('fair_plain', NULL)$$);
SELECT pg_temp.err($$SELECT * FROM queue.group_stats('fair_plain', 0)$$);
SELECT pg_temp.err($$SELECT * FROM queue.group_stats('fair_plain', 10001)$$);
SELECT pg_temp.err($$SELECT * FROM queue.group_stats('fair_nope')$$);
SELECT pg_temp.err($$SELECT * FROM queue.group_stats('bad name!')$$);
CREATE ROLE queue_test_fair_nobody;
GRANT USAGE ON SCHEMA queue TO queue_test_fair_nobody;
SET ROLE queue_test_fair_nobody;
SELECT pg_temp.err($$SELECT * FROM queue.group_stats('fair_plain')$$);
SELECT pg_temp.err($$SELECT * FROM queue._group_counts('fair_plain')$$);
SELECT count(*) AS sees FROM queue.stats WHERE queue_name = 'fair_plain';
RESET ROLE;
SELECT queue.grant('fair_plain', 'queue_test_fair_nobody', '{send}');
SET ROLE queue_test_fair_nobody;
SELECT message_group_id, visible FROM queue.group_stats('fair_plain');
RESET ROLE;
SELECT queue.drop('fair_plain');
SELECT queue.drop('fair_noisy');
SELECT queue.drop('fair_fifo');
DROP OWNED BY queue_test_fair_nobody;
DROP ROLE queue_test_fair_nobody;
