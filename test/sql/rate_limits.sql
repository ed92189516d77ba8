-- rate_limits: receive_rate_limit (the whole queue) and
-- receive_rate_limit_per_group (each tenant) over receive_rate_interval, a
-- sliding window (DESIGN.md "Rate limits and priorities").  A receive takes
-- what the limits allow and fills its batch from unlimited tenants; a
-- rolled-back receive's messages count; a long poll waiting for the window
-- is woken when it opens; every argument error is 22023 naming it.
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
CREATE FUNCTION pg_temp.take(q text, n int) RETURNS text
LANGUAGE sql AS $$
	SELECT coalesce(string_agg(body, ' ' ORDER BY body), '-')
	FROM queue.receive(q, n)
$$;
CREATE FUNCTION pg_temp.send_n(q text, g text, n int, prefix text) RETURNS bigint
LANGUAGE sql AS $$
	SELECT count(*) FROM generate_series(1, n) i,
		LATERAL queue.send(q, prefix || i, message_group_id => g)
$$;

-- 1. Errors: 22023 naming the argument, and nothing created or changed.
SELECT pg_temp.err($$SELECT queue.create('rl_bad', receive_rate_limit => 0)$$);
SELECT pg_temp.err($$SELECT queue.create('rl_bad', receive_rate_limit => -5)$$);
SELECT pg_temp.err($$SELECT queue.create('rl_bad', receive_rate_limit => 1000000001)$$);
SELECT pg_temp.err($$SELECT queue.create('rl_bad', receive_rate_limit_per_group => 0)$$);
SELECT pg_temp.err($$SELECT queue.create('rl_bad', receive_rate_limit_per_group => -1)$$);
SELECT pg_temp.err($$SELECT queue.create('rl_bad.fifo', fifo => true, receive_rate_limit_per_group => 5)$$);
SELECT pg_temp.err($$SELECT queue.create('rl_bad', receive_rate_limit => 5, receive_rate_interval => '0.5 ms')$$);
SELECT pg_temp.err($$SELECT queue.create('rl_bad', receive_rate_limit => 5, receive_rate_interval => '25 hours')$$);
SELECT pg_temp.err($$SELECT queue.create('rl_bad', receive_rate_interval => '-1 s')$$);
SELECT count(*) AS none_created FROM queue.queues WHERE queue_name LIKE 'rl_bad%';

SELECT queue.create('rl_alter') > 0 AS created;
SELECT queue.create('rl_alter.fifo', fifo => true) > 0 AS created;
SELECT pg_temp.err($$SELECT queue.alter('rl_alter', receive_rate_limit => -1)$$);
SELECT pg_temp.err($$SELECT queue.alter('rl_alter', receive_rate_limit_per_group => 1000000001)$$);
SELECT pg_temp.err($$SELECT queue.alter('rl_alter', receive_rate_interval => '0')$$);
SELECT pg_temp.err($$SELECT queue.alter('rl_alter.fifo', receive_rate_limit_per_group => 3)$$);
SELECT receive_rate_limit, receive_rate_limit_per_group, receive_rate_interval
FROM queue.queues WHERE queue_name = 'rl_alter';
-- a FIFO queue may limit the whole queue
SELECT pg_temp.err($$SELECT queue.alter('rl_alter.fifo', receive_rate_limit => 3)$$);
SELECT receive_rate_limit FROM queue.queues WHERE queue_name = 'rl_alter.fifo';
-- creating it again with other limits is 42710; with the same, its id
SELECT queue.create('rl_same', receive_rate_limit => 7) > 0 AS created;
SELECT pg_temp.err($$SELECT queue.create('rl_same', receive_rate_limit => 8)$$);
SELECT pg_temp.err($$SELECT queue.create('rl_same', receive_rate_limit => 7, receive_rate_interval => '2 s')$$);
SELECT queue.create('rl_same', receive_rate_limit => 7) = queue_id AS same_id
FROM queue.queues WHERE queue_name = 'rl_same';

-- 2. The whole queue: 3 an hour, whatever the batch asks.
SELECT queue.create('rl_q', receive_rate_limit => 3, receive_rate_interval => '1 hour') > 0 AS created;
SELECT receive_rate_limit, receive_rate_limit_per_group, receive_rate_interval
FROM queue.queues WHERE queue_name = 'rl_q';
SELECT pg_temp.send_n('rl_q', NULL, 6, 'm');
SELECT pg_temp.take('rl_q', 2) AS first_two;
SELECT pg_temp.take('rl_q', 10) AS then_one;
SELECT pg_temp.take('rl_q', 10) AS then_none;
SELECT visible, rate_limited > 0 AS held_back FROM queue.stats WHERE queue_name = 'rl_q';
-- peek hands nothing out and is not limited
SELECT count(*) AS peeked FROM queue.peek('rl_q');
-- 0 removes the limit
SELECT queue.alter('rl_q', receive_rate_limit => 0);
SELECT receive_rate_limit FROM queue.queues WHERE queue_name = 'rl_q';
SELECT pg_temp.take('rl_q', 10) AS all_three;

-- 3. A rolled-back receive handed its messages out: they count.
SELECT queue.create('rl_rb', receive_rate_limit => 2, receive_rate_interval => '1 hour') > 0 AS created;
SELECT pg_temp.send_n('rl_rb', NULL, 4, 'm');
BEGIN;
SELECT pg_temp.take('rl_rb', 2) AS in_rolled_back;
ROLLBACK;
SELECT pg_temp.take('rl_rb', 10) AS after_rollback;
-- so does a receive in a subtransaction rolled back
SELECT queue.alter('rl_rb', receive_rate_limit => 3);
BEGIN;
SAVEPOINT s;
SELECT pg_temp.take('rl_rb', 10) AS in_savepoint;
ROLLBACK TO s;
SELECT pg_temp.take('rl_rb', 10) AS after_savepoint;
COMMIT;

-- 4. Per tenant: 2 an hour each.  A batch takes 2 of A, 2 of B and fills
-- itself from C (no limit reached) and the messages without a group id.
SELECT queue.create('rl_t', receive_rate_limit_per_group => 2,
	receive_rate_interval => '1 hour') > 0 AS created;
SELECT pg_temp.send_n('rl_t', 'A', 5, 'a');
SELECT pg_temp.send_n('rl_t', 'B', 5, 'b');
SELECT pg_temp.send_n('rl_t', 'C', 1, 'c');
SELECT pg_temp.send_n('rl_t', NULL, 3, 'n');
SELECT pg_temp.take('rl_t', 10) AS batch;
-- A and B are spent for the hour; nothing else is visible
SELECT pg_temp.take('rl_t', 10) AS spent;
SELECT pg_temp.send_n('rl_t', 'D', 3, 'd');
SELECT pg_temp.take('rl_t', 10) AS only_d;
SELECT rate_limited > 0 AS held_back FROM queue.stats WHERE queue_name = 'rl_t';
-- both limits: the queue's bounds the batch, each tenant's its share
SELECT queue.alter('rl_t', receive_rate_limit => 1, receive_rate_limit_per_group => 0);
SELECT pg_temp.take('rl_t', 10) AS one;
SELECT pg_temp.take('rl_t', 10) AS none;

-- 5. The window slides: 2 per 300 ms; after it passed, 2 more.
SELECT queue.create('rl_slide', receive_rate_limit => 2, receive_rate_interval => '300 ms') > 0 AS created;
SELECT pg_temp.send_n('rl_slide', NULL, 5, 'm');
SELECT pg_temp.take('rl_slide', 10) AS two;
SELECT pg_temp.take('rl_slide', 10) AS none;
SELECT pg_sleep(0.4);
SELECT pg_temp.take('rl_slide', 10) AS two_more;

-- 6. A long poll waiting only for the window is woken when it opens, well
-- before its own 10 s: it returns the message.
SELECT queue.create('rl_wait', receive_rate_limit => 1, receive_rate_interval => '500 ms') > 0 AS created;
SELECT pg_temp.send_n('rl_wait', NULL, 2, 'm');
SELECT pg_temp.take('rl_wait', 1) AS first;
CREATE TEMP TABLE waited AS
	SELECT clock_timestamp() AS t0, (SELECT count(*) FROM queue.receive('rl_wait', 1, wait => '10 s')) AS got,
		   clock_timestamp() AS t1;
SELECT got, t1 - t0 < interval '5 s' AS before_deadline FROM waited;

-- 7. queue.stats's count is the reading role's to see: another role sees no
-- row of the queue, and calling the counter directly is 42501.
CREATE ROLE rl_other;
GRANT USAGE ON SCHEMA queue TO rl_other;
SELECT queue_id AS rl_t_id FROM queue.queues WHERE queue_name = 'rl_t' \gset
SET ROLE rl_other;
SELECT count(*) AS rows_seen FROM queue.stats WHERE queue_name = 'rl_t';
SELECT regexp_replace(pg_temp.err('SELECT queue._rate_limited(' || :rl_t_id || ')'), '[0-9]+$', 'N') AS err;
RESET ROLE;
REVOKE USAGE ON SCHEMA queue FROM rl_other;
DROP ROLE rl_other;

-- 8. Consumers and the SQS endpoint receive through queue.receive: the
-- limits hold for them alike (TAP 046 runs clients against them).
SELECT queue.drop(q) FROM unnest(ARRAY['rl_alter', 'rl_alter.fifo', 'rl_same', 'rl_q', 'rl_rb',
	'rl_t', 'rl_slide', 'rl_wait']) q;
