-- lease_ended: a lease that has ended cannot be changed.  Once a message's
-- visible_at has passed, change_visibility (and its batch form) with its
-- latest receipt is 55000 and changes nothing (SQS MessageNotInflight), so
-- nobody can keep a message hidden by extending a lease that is over.  A
-- lease still running can be changed, and the latest receipt still deletes.
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

SELECT queue.create('le_std') > 0 AS created;
SELECT queue.create('le_fifo', fifo => true, content_based_deduplication => true) > 0 AS created;

----------------------------------------------------------------------
-- standard queue
----------------------------------------------------------------------
-- a lease that timed out
SELECT count(*) FROM queue.send('le_std', 's1');
SELECT receipt AS r1 FROM queue.receive('le_std', visibility_timeout => '1 second') \gset
SELECT pg_sleep(1.1);
SELECT pg_temp.err(format('SELECT queue.change_visibility(%L, %L, %L)', 'le_std', :'r1', '12 hours'));
SELECT pg_temp.err(format('SELECT * FROM queue.change_visibility_batch(%L, %L, %L)',
	'le_std', ARRAY[:'r1'], '12 hours'));
SELECT pg_temp.err(format('SELECT queue.change_visibility(%L, %L, %L)', 'le_std', :'r1', '0'));
-- nothing changed: still visible, and the next receive gets it
SELECT pg_temp.depth('le_std');
SELECT visible_at <= now() AS still_visible FROM queue.peek('le_std');
SELECT body, receive_count FROM queue.receive('le_std', visibility_timeout => '0');

-- a zero visibility timeout ends the lease at once
SELECT receipt AS r2 FROM queue.receive('le_std', visibility_timeout => '0') \gset
SELECT pg_temp.err(format('SELECT queue.change_visibility(%L, %L, %L)', 'le_std', :'r2', '1 hour'));
SELECT pg_temp.depth('le_std');

-- a lease still running can be changed, shortened and extended
SELECT receipt AS r3 FROM queue.receive('le_std', visibility_timeout => '1 hour') \gset
SELECT queue.change_visibility('le_std', :'r3', '2 hours');
SELECT visible_at > now() + interval '119 minutes' AS extended FROM queue.peek('le_std');
SELECT queue.change_visibility('le_std', :'r3', '1 second');
SELECT pg_sleep(1.1);
-- ... until it ends
SELECT pg_temp.err(format('SELECT queue.change_visibility(%L, %L, %L)', 'le_std', :'r3', '1 hour'));
SELECT pg_temp.depth('le_std');
-- the latest receipt of an ended lease still deletes (nobody received since)
SELECT queue.delete('le_std', :'r3');
SELECT pg_temp.depth('le_std');

-- a batch with one ended lease fails whole: the running lease is not changed
SELECT count(*) FROM queue.send_batch('le_std', ARRAY['b1', 'b2']);
SELECT receipt AS rb1 FROM queue.receive('le_std', visibility_timeout => '1 second') \gset
SELECT receipt AS rb2 FROM queue.receive('le_std', visibility_timeout => '1 hour') \gset
SELECT pg_sleep(1.1);
SELECT pg_temp.err(format('SELECT * FROM queue.change_visibility_batch(%L, %L, %L)',
	'le_std', ARRAY[:'rb2', :'rb1'], '12 hours'));
SELECT body, visible_at <= now() AS visible, visible_at < now() + interval '61 minutes' AS lease_unchanged
FROM queue.peek('le_std') ORDER BY body;
SELECT * FROM queue.change_visibility_batch('le_std', ARRAY[:'rb2'], '0');
SELECT queue.purge('le_std');

----------------------------------------------------------------------
-- FIFO queue
----------------------------------------------------------------------
SELECT count(*) FROM queue.send_batch('le_fifo', ARRAY['f1', 'f2'], message_group_ids => ARRAY['g', 'g']);
SELECT receipt AS f1 FROM queue.receive('le_fifo', visibility_timeout => '1 second') \gset
SELECT pg_sleep(1.1);
SELECT pg_temp.err(format('SELECT queue.change_visibility(%L, %L, %L)', 'le_fifo', :'f1', '12 hours'));
SELECT pg_temp.err(format('SELECT * FROM queue.change_visibility_batch(%L, %L, %L)',
	'le_fifo', ARRAY[:'f1'], '12 hours'));
-- the group is open again: its head comes next
SELECT pg_temp.depth('le_fifo');
SELECT body, receive_count FROM queue.receive('le_fifo', visibility_timeout => '0');
SELECT receipt AS f2 FROM queue.receive('le_fifo', visibility_timeout => '0') \gset
SELECT pg_temp.err(format('SELECT queue.change_visibility(%L, %L, %L)', 'le_fifo', :'f2', '1 hour'));
-- a running FIFO lease can still be changed
SELECT receipt AS f3 FROM queue.receive('le_fifo', visibility_timeout => '1 hour') \gset
SELECT queue.change_visibility('le_fifo', :'f3', '2 hours');
SELECT count(*) FROM queue.receive('le_fifo', 10, visibility_timeout => '0');
SELECT queue.change_visibility('le_fifo', :'f3', '0');
SELECT pg_temp.err(format('SELECT queue.change_visibility(%L, %L, %L)', 'le_fifo', :'f3', '1 hour'));
SELECT body FROM queue.receive('le_fifo', 2, visibility_timeout => '0');

SELECT queue.drop('le_std'), queue.drop('le_fifo');
