-- visibility: leases and receipts.  A received message is invisible until
-- its visibility timeout passes; only its latest receipt may delete it or
-- change its visibility; a stale receipt is 55000, a forged one 22P02, and
-- neither changes anything.
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

SELECT queue.create('vis_q') > 0 AS created;
SELECT queue.create('vis_other') > 0 AS created;

----------------------------------------------------------------------
-- the lease
----------------------------------------------------------------------
SELECT count(*) FROM queue.send('vis_q', 'm1');
SELECT receive_count, visible_at > now() + interval '59 minutes' AS leased_for_an_hour
FROM queue.receive('vis_q', visibility_timeout => '1 hour');
-- in flight: nobody else gets it
SELECT count(*) FROM queue.receive('vis_q');
SELECT count(*) FROM queue.receive('vis_q', 10, visibility_timeout => '0');
SELECT pg_temp.depth('vis_q');
SELECT queue.purge('vis_q');

-- the queue's visibility timeout is the default lease
SELECT count(*) FROM queue.send('vis_q', 'm2');
SELECT visible_at > now() + interval '29 seconds' AND
	   visible_at <= clock_timestamp() + interval '30 seconds' AS default_lease
FROM queue.receive('vis_q');
SELECT queue.purge('vis_q');

-- a zero timeout leaves the message visible: the next receive gets it again
SELECT count(*) FROM queue.send('vis_q', 'm3');
SELECT receive_count FROM queue.receive('vis_q', visibility_timeout => '0');
SELECT pg_temp.depth('vis_q');
SELECT receive_count FROM queue.receive('vis_q', visibility_timeout => '0');
SELECT queue.purge('vis_q');

-- the lease runs out: visible again, without anybody doing anything
SELECT count(*) FROM queue.send('vis_q', 'm4');
SELECT receipt AS r1 FROM queue.receive('vis_q', visibility_timeout => '1 second') \gset
SELECT count(*) FROM queue.receive('vis_q');
SELECT pg_sleep(1.1);
SELECT pg_temp.depth('vis_q');
SELECT receipt AS r2, receive_count FROM queue.receive('vis_q', visibility_timeout => '1 hour') \gset
SELECT :receive_count AS receive_count, :'r1' <> :'r2' AS new_receipt;

----------------------------------------------------------------------
-- stale receipts: 55000, nothing changed
----------------------------------------------------------------------
SELECT pg_temp.err(format('SELECT queue.delete(%L, %L)', 'vis_q', :'r1'));
SELECT pg_temp.err(format('SELECT queue.change_visibility(%L, %L, %L)', 'vis_q', :'r1', '0'));
SELECT pg_temp.err(format('SELECT * FROM queue.delete_batch(%L, %L)', 'vis_q', ARRAY[:'r1']));
SELECT pg_temp.err(format('SELECT * FROM queue.change_visibility_batch(%L, %L, %L)',
	'vis_q', ARRAY[:'r1'], '0'));
SELECT pg_temp.depth('vis_q');
SELECT receive_count, visible_at > now() + interval '59 minutes' AS lease_kept
FROM queue.peek('vis_q');
-- the latest receipt still works
SELECT queue.delete('vis_q', :'r2');
-- and once the message is gone, an older receipt cannot tell it from a
-- deleted one: false
SELECT queue.delete('vis_q', :'r1');

-- a batch with one stale receipt fails whole: nothing deleted or changed
SELECT count(*) FROM queue.send_batch('vis_q', ARRAY['b1', 'b2', 'b3']);
SELECT array_agg(receipt ORDER BY message_id) AS old
FROM queue.receive('vis_q', 3, visibility_timeout => '0') \gset
SELECT array_agg(receipt ORDER BY message_id) AS new
FROM queue.receive('vis_q', 3, visibility_timeout => '1 hour') \gset
SELECT pg_temp.depth('vis_q');
-- new, new, old
SELECT pg_temp.err(format('SELECT * FROM queue.delete_batch(%L, %L)', 'vis_q',
	ARRAY[(:'new'::text[])[1], (:'new'::text[])[2], (:'old'::text[])[3]]));
SELECT count(*) FROM queue.peek('vis_q');
SELECT pg_temp.err(format('SELECT * FROM queue.change_visibility_batch(%L, %L, %L)', 'vis_q',
	ARRAY[(:'new'::text[])[1], (:'new'::text[])[2], (:'old'::text[])[3]], '0'));
SELECT pg_temp.depth('vis_q');
-- old first
SELECT pg_temp.err(format('SELECT * FROM queue.delete_batch(%L, %L)', 'vis_q',
	ARRAY[(:'old'::text[])[1], (:'new'::text[])[2], (:'new'::text[])[3]]));
-- one message's old receipt and another's new one, from the same receives
SELECT pg_temp.err(format('SELECT * FROM queue.delete_batch(%L, %L)', 'vis_q',
	ARRAY[(:'old'::text[])[1], (:'new'::text[])[2]]));
SELECT count(*) FROM queue.peek('vis_q');
SELECT pg_temp.depth('vis_q');
-- inside a transaction the failed batch takes nothing with it either
BEGIN;
SELECT queue.delete('vis_q', (:'new'::text[])[1]);
SELECT pg_temp.err(format('SELECT * FROM queue.delete_batch(%L, %L)', 'vis_q',
	ARRAY[(:'new'::text[])[2], (:'old'::text[])[3]]));
SELECT count(*) FROM queue.peek('vis_q');
COMMIT;
SELECT body FROM queue.peek('vis_q') ORDER BY message_id;
-- the latest receipts still work
SELECT * FROM queue.delete_batch('vis_q', (:'new'::text[])[2:3]);
SELECT count(*) FROM queue.peek('vis_q');

----------------------------------------------------------------------
-- forged receipts: 22P02, nothing changed
----------------------------------------------------------------------
SELECT count(*) FROM queue.send('vis_q', 'target');
SELECT count(*) FROM queue.send('vis_other', 'elsewhere');
SELECT receipt AS r FROM queue.receive('vis_q', visibility_timeout => '1 hour') \gset
SELECT receipt AS other FROM queue.receive('vis_other', visibility_timeout => '1 hour') \gset
SELECT length(:'r') AS receipt_length;
-- forgeries: one character changed in each of a few places, a receipt of
-- another queue, garbage, too short, too long, and a right-length string
-- that is not base64
CREATE TEMP TABLE forgery (label text, receipt text);
INSERT INTO forgery
SELECT 'changed at ' || pos,
	   overlay(:'r' PLACING CASE WHEN substr(:'r', pos, 1) = 'A' THEN 'B' ELSE 'A' END
			   FROM pos FOR 1)
FROM unnest(ARRAY[1, 2, 10, 20, 30, 40, 44]) AS pos;
INSERT INTO forgery VALUES
	('other queue', :'other'),
	('garbage', 'not a receipt'),
	('empty', ''),
	('short', left(:'r', 43)),
	('long', :'r' || 'A'),
	('not base64', repeat('!', 44)),
	('padded', left(:'r', 42) || '==');
SELECT label,
	   pg_temp.err(format('SELECT queue.delete(%L, %L)', 'vis_q', receipt)) AS delete,
	   pg_temp.err(format('SELECT queue.change_visibility(%L, %L, %L)', 'vis_q', receipt, '0')) AS change_visibility
FROM forgery ORDER BY label;
SELECT label,
	   pg_temp.err(format('SELECT * FROM queue.delete_batch(%L, %L)', 'vis_q',
						  ARRAY[:'r', receipt])) AS delete_batch,
	   pg_temp.err(format('SELECT * FROM queue.change_visibility_batch(%L, %L, %L)', 'vis_q',
						  ARRAY[:'r', receipt], '0')) AS change_visibility_batch
FROM forgery ORDER BY label;
-- nothing happened to either message
SELECT pg_temp.depth('vis_q'), pg_temp.depth('vis_other');
SELECT body, receive_count, visible_at > now() + interval '59 minutes' AS lease_kept
FROM queue.peek('vis_q');
-- the receipt of the other queue works on its own queue
SELECT queue.delete('vis_other', :'other');
SELECT queue.delete('vis_q', :'r');

SELECT queue.drop('vis_q'), queue.drop('vis_other');
