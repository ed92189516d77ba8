-- storage.sql: the two layouts of DESIGN.md "Storage".  A shared queue is
-- rows in tables shared by every queue; a dedicated one has tables of its
-- own; queue.alter(..., dedicated => ...) moves a queue between them with
-- its messages, receipts, leases, deduplication ids, receive attempts and
-- FIFO groups.  Every queue here names its layout, so the test is the same
-- whatever queue.default_storage the suite runs with.
CREATE EXTENSION IF NOT EXISTS queue;

CREATE FUNCTION pg_temp.err(cmd text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
	EXECUTE cmd;
	RETURN 'ok';
EXCEPTION WHEN OTHERS THEN
	RETURN SQLSTATE || ': ' || SQLERRM;
END
$$;
-- the relations a queue id has in queue_data (a shared queue has none)
CREATE FUNCTION pg_temp.relations(q text) RETURNS bigint LANGUAGE sql AS $$
	SELECT count(*) FROM pg_class c, queue._queues r
	WHERE r.queue_name = q AND c.relnamespace = 'queue_data'::regnamespace
	  AND c.relname ~ ('^[qdag]' || r.queue_id || '(_|$)')
$$;
-- rows of a queue's messages in the shared tables, under any store id it had
CREATE FUNCTION pg_temp.shared_rows(store bigint) RETURNS bigint LANGUAGE sql AS $$
	SELECT (SELECT count(*) FROM queue_data.messages WHERE store_id = store)
		 + (SELECT count(*) FROM queue_data.fifo_messages WHERE store_id = store)
$$;
-- reclaim(store, queue): run the worker's reclaim steps (the worker may be
-- running them too) until nothing of a store, or of a dropped queue's ids,
-- is left, or 30 s passed; returns what is left
CREATE FUNCTION pg_temp.reclaim(store bigint, qid bigint DEFAULT NULL) RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
	left_over bigint;
BEGIN
	FOR i IN 1..300 LOOP
		PERFORM queue._reclaim_step(1000);
		left_over := pg_temp.shared_rows(store)
			+ (SELECT count(*) FROM queue_data.groups WHERE store_id = store)
			+ (SELECT count(*) FROM queue_data.dedup_ids WHERE queue_id = qid);
		EXIT WHEN left_over = 0 AND NOT EXISTS (SELECT FROM queue._reclaim WHERE store_id = store);
		PERFORM pg_sleep(0.1);
	END LOOP;
	RETURN left_over;
END
$$;

----------------------------------------------------------------------
-- which layout a create gives
----------------------------------------------------------------------
SET queue.default_storage = shared;
SELECT queue.create('st_default_shared') > 0 AS created;
SET queue.default_storage = dedicated;
SELECT queue.create('st_default_dedicated') > 0 AS created;
-- the argument beats the setting
SELECT queue.create('st_shared', dedicated => false) > 0 AS created;
RESET queue.default_storage;
SELECT queue.create('st_dedicated', dedicated => true) > 0 AS created;
SELECT queue_name, dedicated, pg_temp.relations(queue_name) AS relations
FROM queue.queues WHERE queue_name LIKE 'st\_%' ORDER BY 1;
SELECT pg_temp.err($$SET queue.default_storage = 'sideways'$$) AS bad_setting;
SELECT pg_temp.err($$SELECT queue.create('st_null', dedicated => NULL)$$) AS null_layout;
SELECT pg_temp.err($$SELECT queue.create('st_shared', visibility_timeout => '1 min', dedicated => false)$$) AS other_attributes;
-- the layout is not an attribute: the same queue, whichever is asked
SELECT queue.create('st_shared', dedicated => true) = queue_id AS same_id
FROM queue.queues WHERE queue_name = 'st_shared';
SELECT queue.create('st_dedicated', dedicated => false) = queue_id AS same_id
FROM queue.queues WHERE queue_name = 'st_dedicated';

-- a shared create is part of the caller's transaction
BEGIN;
SELECT queue.create('st_tx', dedicated => false) > 0 AS created;
SELECT count(*) FROM queue.send('st_tx', 'in the transaction');
ROLLBACK;
SELECT count(*) AS st_tx FROM queue.queues WHERE queue_name = 'st_tx';

----------------------------------------------------------------------
-- shared queues keep to themselves
----------------------------------------------------------------------
SELECT queue.create('st_s1', dedicated => false) > 0, queue.create('st_s2', dedicated => false) > 0;
SELECT count(*) FROM queue.send_batch('st_s1', ARRAY['a1', 'a2']);
SELECT count(*) FROM queue.send_batch('st_s2', ARRAY['b1']);
SELECT string_agg(body, ' ' ORDER BY body) AS s1 FROM queue.receive('st_s1', 10);
SELECT string_agg(body, ' ' ORDER BY body) AS s2 FROM queue.peek('st_s2');
SELECT queue_name, visible, in_flight FROM queue.stats WHERE queue_name IN ('st_s1', 'st_s2') ORDER BY 1;

----------------------------------------------------------------------
-- moves keep every state: FIFO
----------------------------------------------------------------------
SELECT queue.create('st_fifo', fifo => true, dedicated => false) > 0 AS created;
SELECT count(*) FROM queue.send_batch('st_fifo', ARRAY['f1', 'f2', 'f3', 'f4'],
	message_group_ids => ARRAY['g1', 'g1', 'g2', 'g2'],
	deduplication_ids => ARRAY['d1', 'd2', 'd3', 'd4']);
SELECT message_id AS m1, receipt AS r1 FROM queue.receive('st_fifo', 1,
	visibility_timeout => '1 hour', receive_attempt_id => 'att') \gset
SELECT queue.alter('st_fifo', dedicated => true);
SELECT dedicated, pg_temp.relations('st_fifo') AS relations FROM queue.queues WHERE queue_name = 'st_fifo';
-- the receive attempt gives the same message and receipt back
SELECT message_id = :m1 AS same_message, receipt = :'r1' AS same_receipt
FROM queue.receive('st_fifo', 1, receive_attempt_id => 'att');
-- the deduplication ids are still there
SELECT duplicate FROM queue.send('st_fifo', 'again', message_group_id => 'g1', deduplication_id => 'd2');
-- the lease holds: g1 is in flight, so only g2 comes
SELECT string_agg(body, ' ' ORDER BY sequence_number) AS while_leased
FROM queue.receive('st_fifo', 10, visibility_timeout => '0');
-- the receipt deletes
SELECT queue.delete('st_fifo', :'r1') AS deleted;
SELECT queue.alter('st_fifo', dedicated => false);
SELECT dedicated, pg_temp.relations('st_fifo') AS relations FROM queue.queues WHERE queue_name = 'st_fifo';
SELECT string_agg(body, ' ' ORDER BY sequence_number) AS in_order
FROM queue.receive('st_fifo', 10, visibility_timeout => '1 hour');
SELECT duplicate FROM queue.send('st_fifo', 'again', message_group_id => 'g2', deduplication_id => 'd4');

----------------------------------------------------------------------
-- moves keep every state: standard, with a delayed and an in-flight message
----------------------------------------------------------------------
SELECT queue.create('st_std', dedicated => true) > 0 AS created;
SELECT count(*) FROM queue.send('st_std', 'now');
SELECT count(*) FROM queue.send('st_std', 'later', delay => '1 hour');
SELECT count(*) FROM queue.send('st_std', 'held');
SELECT receipt AS held FROM queue.receive('st_std', 1, visibility_timeout => '1 hour') \gset
SELECT queue.alter('st_std', dedicated => false);
SELECT dedicated, pg_temp.relations('st_std') AS relations FROM queue.queues WHERE queue_name = 'st_std';
SELECT visible, in_flight, delayed FROM queue.stats WHERE queue_name = 'st_std';
SELECT queue.change_visibility('st_std', :'held', '0');
SELECT string_agg(body, ' ' ORDER BY body) AS visible FROM queue.receive('st_std', 10);
SELECT left(pg_temp.err(format($$SELECT queue.delete('st_std', %L)$$, :'held')), 5) AS old_receipt;
-- moving to where it is changes nothing
SELECT queue.alter('st_std', dedicated => false);
SELECT dedicated FROM queue.queues WHERE queue_name = 'st_std';

----------------------------------------------------------------------
-- purge and drop of a shared queue: at once; the worker takes the rows
----------------------------------------------------------------------
SELECT queue.create('st_purge', dedicated => false) > 0 AS created;
SELECT coalesce(store_id, queue_id) AS old_store FROM queue._queues WHERE queue_name = 'st_purge' \gset
SELECT count(*) FROM queue.send_batch('st_purge', array_fill('x'::text, ARRAY[25]),
	deduplication_ids => (SELECT array_agg('p' || i) FROM generate_series(1, 25) i));
BEGIN;
SELECT queue.purge('st_purge') AS purged;
SELECT count(*) AS left_visible FROM queue.peek('st_purge');
-- its rows stay, under the old key, for the worker
SELECT pg_temp.shared_rows(:old_store) AS old_rows_kept;
COMMIT;
-- a purge keeps deduplication ids, as the dedicated layout does
SELECT duplicate FROM queue.send('st_purge', 'x', deduplication_id => 'p1');
SELECT count(*) FROM queue.send('st_purge', 'after');
SELECT string_agg(body, ' ') AS after_purge FROM queue.receive('st_purge', 10);
-- the old rows are the worker's, in bounded batches
SELECT queue._reclaim_step(10) <= 10 AS one_batch;
SELECT pg_temp.reclaim(:old_store) AS old_rows_after;

SELECT queue.create('st_drop', fifo => true, dedicated => false) > 0 AS created;
SELECT queue_id AS dropped_id FROM queue.queues WHERE queue_name = 'st_drop' \gset
SELECT count(*) FROM queue.send('st_drop', 'x', message_group_id => 'g', deduplication_id => 'x');
BEGIN;
SELECT queue.drop('st_drop') AS dropped;
SELECT count(*) AS waiting FROM queue._reclaim WHERE store_id = :dropped_id;
COMMIT;
-- the name is free at once, for a new, empty queue
SELECT queue.create('st_drop', fifo => true, dedicated => false) > :dropped_id AS new_id;
SELECT count(*) AS messages FROM queue.peek('st_drop');
SELECT duplicate FROM queue.send('st_drop', 'x', message_group_id => 'g', deduplication_id => 'x');
SELECT pg_temp.reclaim(:dropped_id, :dropped_id) AS rows_ids_groups_left;
SELECT queue.drop('st_drop');

----------------------------------------------------------------------
-- owners and grants of shared queues
----------------------------------------------------------------------
CREATE ROLE queue_test_st_owner;
CREATE ROLE queue_test_st_other;
GRANT USAGE ON SCHEMA queue TO queue_test_st_owner, queue_test_st_other;
DO $$ BEGIN EXECUTE format('GRANT CREATE ON DATABASE %I TO queue_test_st_owner', current_database()); END $$;
SET ROLE queue_test_st_owner;
SELECT queue.create('st_owned', dedicated => false) > 0 AS created;
SELECT owner, dedicated FROM queue.queues WHERE queue_name = 'st_owned';
SELECT count(*) FROM queue.send('st_owned', 'mine');
SET ROLE queue_test_st_other;
SELECT count(*) AS other_sees FROM queue.queues WHERE queue_name = 'st_owned';
SELECT pg_temp.err($$SELECT queue.send('st_owned', 'x')$$) AS send;
SELECT pg_temp.err($$SELECT queue.receive('st_owned')$$) AS receive;
SELECT pg_temp.err($$SELECT queue.purge('st_owned')$$) AS purge;
SELECT pg_temp.err($$SELECT queue.alter('st_owned', dedicated => true)$$) AS move;
-- nor the shared tables themselves
SELECT pg_temp.err($$SELECT count(*) FROM queue_data.messages$$) AS read_table;
SELECT pg_temp.err($$DELETE FROM queue_data.messages$$) AS write_table;
SET ROLE queue_test_st_owner;
SELECT queue.grant('st_owned', 'queue_test_st_other', '{send}');
SET ROLE queue_test_st_other;
SELECT pg_temp.err($$SELECT queue.send('st_owned', 'granted')$$) AS send;
SELECT pg_temp.err($$SELECT queue.receive('st_owned')$$) AS receive;
SELECT count(*) AS other_sees FROM queue.queues WHERE queue_name = 'st_owned';
RESET ROLE;
-- roles named by a shared queue cannot be dropped
SELECT pg_temp.err('DROP ROLE queue_test_st_owner') AS drop_owner;
SELECT pg_temp.err('DROP ROLE queue_test_st_other') AS drop_grantee;
SET ROLE queue_test_st_owner;
SELECT queue.revoke('st_owned', 'queue_test_st_other', '{send}');
SET ROLE queue_test_st_other;
SELECT pg_temp.err($$SELECT queue.send('st_owned', 'x')$$) AS send_after_revoke;
RESET ROLE;
-- a move carries the owner and grants (a role whose name needs quotes too)
CREATE ROLE "queue_test St odd";
SELECT queue.grant('st_owned', 'queue_test St odd', '{manage}');
SELECT queue.grant('st_owned', 'queue_test_st_other', '{receive}');
SELECT queue.alter('st_owned', dedicated => true);
SELECT owner, dedicated FROM queue.queues WHERE queue_name = 'st_owned';
SET ROLE queue_test_st_other;
SELECT count(*) AS received FROM queue.receive('st_owned', 10, visibility_timeout => '0');
SELECT pg_temp.err($$SELECT queue.send('st_owned', 'x')$$) AS still_no_send;
RESET ROLE;
SELECT has_table_privilege('queue_test St odd', (SELECT format('queue_data.q%s', queue_id)
	FROM queue.queues WHERE queue_name = 'st_owned'), 'TRUNCATE') AS odd_manages;
SELECT queue.alter('st_owned', dedicated => false);
SELECT manage_roles FROM queue._queues WHERE queue_name = 'st_owned';
SET ROLE queue_test_st_other;
SELECT count(*) AS received_shared FROM queue.receive('st_owned', 10, visibility_timeout => '0');
RESET ROLE;
-- REASSIGN OWNED gives the queue to another role; DROP OWNED drops it
DO $$ BEGIN EXECUTE format('REVOKE CREATE ON DATABASE %I FROM queue_test_st_owner', current_database()); END $$;
REVOKE USAGE ON SCHEMA queue FROM queue_test_st_owner;
REASSIGN OWNED BY queue_test_st_owner TO queue_test_st_other;
SELECT owner FROM queue.queues WHERE queue_name = 'st_owned';
SELECT pg_temp.err('DROP ROLE queue_test_st_owner') AS drop_old_owner;
DROP OWNED BY queue_test_st_other;
DROP OWNED BY "queue_test St odd";
DROP ROLE "queue_test St odd";
SELECT count(*) AS st_owned FROM queue.queues WHERE queue_name = 'st_owned';
REVOKE USAGE ON SCHEMA queue FROM queue_test_st_other;
SELECT pg_temp.err('DROP ROLE queue_test_st_other') AS drop_other;

-- queue.stats of a shared queue above 10,000 messages is estimated from
-- some 2,000 of its rows (1.5; 1.4 stopped counting at 10,001): 30,000
-- messages whose ids interleave, in blocks, with another queue's 9,000,
-- 3,000 of them in flight; the estimate is within 30% (a sampling error
-- of about 4% here), and never below the first 10,001's own counts.
SELECT queue.create('st_big', dedicated => false) > 0 AS big,
       queue.create('st_mix', dedicated => false) > 0 AS mix;
DO $$ BEGIN
	FOR g IN 1..30 LOOP
		PERFORM queue.send_batch('st_big', array_fill('b'::text, ARRAY[1000]));
		PERFORM queue.send_batch('st_mix', array_fill('m'::text, ARRAY[300]));
	END LOOP;
END $$;
-- (each call names g: a function scan whose arguments do not change is
-- called once and its rows read again)
SELECT count(DISTINCT message_id) AS leased FROM generate_series(1, 3) g,
	LATERAL queue.receive('st_big', 999 + g / g, visibility_timeout => '1 hour');
SELECT visible + in_flight + delayed BETWEEN 21000 AND 39000 AS total_near_30000,
       in_flight >= 3000 AS in_flight_at_least_seen, delayed = 0 AS none_delayed
FROM queue.stats WHERE queue_name = 'st_big';
SELECT visible + in_flight + delayed AS mix_exact FROM queue.stats WHERE queue_name = 'st_mix';

SELECT queue.drop(queue_name) FROM queue.queues WHERE queue_name LIKE 'st\_%' ORDER BY 1;
