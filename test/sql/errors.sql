-- errors: every error path of every function, with its SQLSTATE, and
-- evidence that a failed call changed nothing.  Errors are caught by err()
-- and shown as "SQLSTATE: message" (never P0001 or XX000 for a user's
-- mistake).
CREATE EXTENSION IF NOT EXISTS queue;

CREATE FUNCTION pg_temp.err(cmd text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
	EXECUTE cmd;
	RETURN 'ok';
EXCEPTION WHEN OTHERS THEN
	RETURN SQLSTATE || ': ' || regexp_replace(SQLERRM, 'message \d+', 'message N', 'g');
END
$$;
-- try(sql): like err(), but always rolls the statement back, so the
-- successful calls of a list do not add up.
CREATE FUNCTION pg_temp.try(cmd text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
	EXECUTE cmd;
	RAISE SQLSTATE 'QTRY0';
EXCEPTION
	WHEN SQLSTATE 'QTRY0' THEN
		RETURN 'ok';
	WHEN OTHERS THEN
		RETURN SQLSTATE || ': ' || regexp_replace(SQLERRM, 'message \d+', 'message N', 'g');
END
$$;
-- state(queue): what a failed call must not change: messages, their
-- receives and leases, and the committed counters.
CREATE FUNCTION pg_temp.state(q text) RETURNS text LANGUAGE sql AS $$
	SELECT format('messages=%s receives=%s visible=%s in_flight=%s delayed=%s sent=%s received=%s deleted=%s',
				  (SELECT count(*) FROM queue.peek(q, 100000)),
				  (SELECT coalesce(sum(receive_count), 0) FROM queue.peek(q, 100000)),
				  s.visible, s.in_flight, s.delayed, s.sent, s.received, s.deleted)
	FROM queue.stats s WHERE s.queue_name = q
$$;

SELECT queue.create('err_q', max_message_size => 10) > 0 AS created;
-- Valid receives probed below (then rolled back) go to an empty queue: a
-- rolled-back receive of a message counts (failed_receives.sql).
SELECT queue.create('err_empty') > 0 AS created;
SELECT count(*) FROM queue.send_batch('err_q', ARRAY['visible', 'leased']);
SELECT receipt AS r FROM queue.receive('err_q', visibility_timeout => '0') \gset
SELECT receipt AS r FROM queue.receive('err_q', visibility_timeout => '1 hour') \gset
SELECT count(*) FROM queue.send('err_q', 'delayed', delay => '1 hour');
SELECT pg_temp.state('err_q') AS before \gset
SELECT :'before' AS state;
CREATE TEMP VIEW err_attrs AS
	SELECT visibility_timeout, delay, retention, max_message_size, receive_wait,
		   content_based_deduplication, deduplication_window, deduplication_scope, tags
	FROM queue.queues WHERE queue_name = 'err_q';
SELECT * FROM err_attrs;

----------------------------------------------------------------------
-- queue names: NULL 22004, empty or bad characters 42602, over 80
-- characters 42622, unknown 42704; the same in every function
----------------------------------------------------------------------
CREATE TEMP TABLE bad_name (label text, name text);
INSERT INTO bad_name VALUES
	('null', NULL),
	('empty', ''),
	('space', 'a b'),
	('trailing space', 'err_q '),
	('quote', 'a''b'),
	('double quote', 'a"b'),
	('semicolon', 'a;b'),
	('injection', 'a''; drop table x; --'),
	('slash', 'a/b'),
	('non-ascii', 'queue€'),
	('tab', E'a\tb'),
	('81 characters', repeat('q', 81)),
	('81 bad characters', repeat(' ', 81)),
	('unknown', 'no_such_queue'),
	('other case', 'ERR_Q');
CREATE TEMP TABLE name_call (fn text, tmpl text);
INSERT INTO name_call VALUES
	('create', $$SELECT queue.create(%L)$$),
	('alter', $$SELECT queue.alter(%L, visibility_timeout => '1 minute')$$),
	('drop', $$SELECT queue.drop(%L)$$),
	('drop if_exists', $$SELECT queue.drop(%L, if_exists => true)$$),
	('purge', $$SELECT queue.purge(%L)$$),
	('send text', $$SELECT queue.send(%L, 'x'::text)$$),
	('send jsonb', $$SELECT queue.send(%L, '{}'::jsonb)$$),
	('send_batch text', $$SELECT queue.send_batch(%L, ARRAY['x'])$$),
	('send_batch jsonb', $$SELECT queue.send_batch(%L, ARRAY['{}']::jsonb[])$$),
	('receive', $$SELECT queue.receive(%L)$$),
	('delete', $$SELECT queue.delete(%L, 'receipt')$$),
	('delete_batch', $$SELECT queue.delete_batch(%L, ARRAY['receipt'])$$),
	('change_visibility', $$SELECT queue.change_visibility(%L, 'receipt', '0')$$),
	('change_visibility_batch', $$SELECT queue.change_visibility_batch(%L, ARRAY['receipt'], '0')$$),
	('peek', $$SELECT queue.peek(%L)$$);
-- one row per name and outcome, with the functions that gave it
SELECT n.label, pg_temp.err(format(c.tmpl, n.name)) AS result,
	   count(*) AS calls
FROM bad_name n CROSS JOIN name_call c
WHERE NOT (n.label IN ('unknown', 'other case') AND c.fn = 'create')
GROUP BY 1, 2 ORDER BY 1, 2;
-- the exceptions: dropping an unknown queue with if_exists is false
SELECT queue.drop('no_such_queue', if_exists => true);
SELECT count(*) FROM queue.queues WHERE queue_name <> 'err_q';
SELECT pg_temp.state('err_q') = :'before' AS unchanged;

----------------------------------------------------------------------
-- NULL where a value is needed: 22004 naming the argument
----------------------------------------------------------------------
CREATE TEMP TABLE null_call (fn text, arg text, sql text);
INSERT INTO null_call VALUES
	('create', 'fifo', $$SELECT queue.create('err_new', fifo => NULL)$$),
	('create', 'visibility_timeout', $$SELECT queue.create('err_new', visibility_timeout => NULL)$$),
	('create', 'delay', $$SELECT queue.create('err_new', delay => NULL)$$),
	('create', 'retention', $$SELECT queue.create('err_new', retention => NULL)$$),
	('create', 'max_message_size', $$SELECT queue.create('err_new', max_message_size => NULL)$$),
	('create', 'receive_wait', $$SELECT queue.create('err_new', receive_wait => NULL)$$),
	('create', 'content_based_deduplication', $$SELECT queue.create('err_new', content_based_deduplication => NULL)$$),
	('create', 'deduplication_window', $$SELECT queue.create('err_new', deduplication_window => NULL)$$),
	('create', 'deduplication_scope', $$SELECT queue.create('err_new', deduplication_scope => NULL)$$),
	('create', 'tags', $$SELECT queue.create('err_new', tags => NULL)$$),
	('drop', 'if_exists', $$SELECT queue.drop('err_q', if_exists => NULL)$$),
	('send', 'body text', $$SELECT queue.send('err_q', NULL::text)$$),
	('send', 'body jsonb', $$SELECT queue.send('err_q', NULL::jsonb)$$),
	('send_batch', 'bodies text[]', $$SELECT queue.send_batch('err_q', NULL::text[])$$),
	('send_batch', 'bodies jsonb[]', $$SELECT queue.send_batch('err_q', NULL::jsonb[])$$),
	('send_batch', 'a null body text', $$SELECT queue.send_batch('err_q', ARRAY['a', NULL])$$),
	('send_batch', 'a null body jsonb', $$SELECT queue.send_batch('err_q', ARRAY['{}', NULL]::jsonb[])$$),
	('receive', 'max_messages', $$SELECT queue.receive('err_q', max_messages => NULL)$$),
	('delete', 'receipt', $$SELECT queue.delete('err_q', NULL)$$),
	('delete_batch', 'receipts', $$SELECT queue.delete_batch('err_q', NULL)$$),
	('delete_batch', 'a null receipt', format('SELECT queue.delete_batch(%L, %L)', 'err_q', ARRAY[:'r', NULL])),
	('change_visibility', 'receipt', $$SELECT queue.change_visibility('err_q', NULL, '0')$$),
	('change_visibility', 'visibility_timeout', format('SELECT queue.change_visibility(%L, %L, NULL)', 'err_q', :'r')),
	('change_visibility_batch', 'receipts', $$SELECT queue.change_visibility_batch('err_q', NULL, '0')$$),
	('change_visibility_batch', 'a null receipt', format('SELECT queue.change_visibility_batch(%L, %L, %L)', 'err_q', ARRAY[:'r', NULL], '0')),
	('change_visibility_batch', 'visibility_timeout', format('SELECT queue.change_visibility_batch(%L, %L, NULL)', 'err_q', ARRAY[:'r'])),
	('peek', 'max_messages', $$SELECT queue.peek('err_q', max_messages => NULL)$$);
SELECT fn, arg, pg_temp.err(sql) AS result FROM null_call ORDER BY fn, arg;
SELECT count(*) FROM queue.queues WHERE queue_name = 'err_new';
SELECT pg_temp.state('err_q') = :'before' AS unchanged;
-- optional arguments may be NULL: they take their defaults (rolled back)
BEGIN;
SELECT count(*) FROM queue.receive('err_empty', visibility_timeout => NULL, wait => NULL,
	receive_attempt_id => NULL);
SELECT count(*) FROM queue.send('err_q', 'x', delay => NULL, message_group_id => NULL,
	deduplication_id => NULL, attributes => NULL);
SELECT count(*) FROM queue.send_batch('err_q', ARRAY['x'], delay => NULL, message_group_ids => NULL,
	deduplication_ids => NULL, attributes => NULL);
SELECT queue.alter('err_q', visibility_timeout => NULL, delay => NULL, retention => NULL,
	max_message_size => NULL, receive_wait => NULL, content_based_deduplication => NULL,
	deduplication_window => NULL, deduplication_scope => NULL, dead_letter_queue => NULL,
	max_receive_count => NULL, redrive_allow => NULL, tags => NULL);
ROLLBACK;
SELECT * FROM err_attrs;
SELECT pg_temp.state('err_q') = :'before' AS unchanged;

----------------------------------------------------------------------
-- attributes out of range: 22023 from create and alter
----------------------------------------------------------------------
CREATE TEMP TABLE attr_value (arg text, val text, ok boolean);
INSERT INTO attr_value VALUES
	('visibility_timeout', '-1 second', false),
	('visibility_timeout', '0', true),
	('visibility_timeout', '12 hours', true),
	('visibility_timeout', '12 hours 1 second', false),
	('visibility_timeout', '1 mon', false),
	('visibility_timeout', '100000 years', false),
	('visibility_timeout', '-100000 years', false),
	('delay', '-1 second', false),
	('delay', '4 days', true),
	('delay', '4 days 1 second', false),
	('retention', '59 seconds', false),
	('retention', '1 minute', true),
	('retention', '14 days', true),
	('retention', '14 days 1 second', false),
	('max_message_size', '-1', false),
	('max_message_size', '0', false),
	('max_message_size', '1', true),
	('max_message_size', '1048576', true),
	('max_message_size', '1048577', false),
	('receive_wait', '-1 second', false),
	('receive_wait', '20 seconds', true),
	('receive_wait', '21 seconds', false),
	('deduplication_window', '19 seconds', false),
	('deduplication_window', '20 seconds', true),
	('deduplication_window', '7 days', true),
	('deduplication_window', '7 days 1 second', false),
	('deduplication_scope', '', false),
	('deduplication_scope', 'group', false),
	('deduplication_scope', 'message_group', true),
	('tags', '[]', false),
	('tags', '"tag"', false),
	('tags', 'null', false),
	('tags', '{"k": "v"}', true),
	('content_based_deduplication', 'true', false);
-- create: the valid bounds create a queue (each rolled back), the others fail
SELECT arg, val, ok AS should_pass,
	   pg_temp.try(format('SELECT queue.create(%L, %s => %L)', 'err_new', arg, val)) AS result
FROM attr_value ORDER BY arg, ok, val;
SELECT count(*) FROM queue.queues WHERE queue_name LIKE 'err_new%';
-- alter: the same, on an existing queue (each rolled back)
SELECT arg, val, ok AS should_pass,
	   pg_temp.try(format('SELECT queue.alter(%L, %s => %L)', 'err_q', arg, val)) AS result
FROM attr_value ORDER BY arg, ok, val;
SELECT * FROM err_attrs;
SELECT pg_temp.state('err_q') = :'before' AS unchanged;
-- one bad attribute among good ones changes nothing
SELECT pg_temp.err($$SELECT queue.alter('err_q', visibility_timeout => '1 minute', retention => '1 second')$$);
SELECT pg_temp.err($$SELECT queue.create('err_new', visibility_timeout => '1 minute', retention => '1 second')$$);
SELECT * FROM err_attrs;
SELECT count(*) FROM queue.queues WHERE queue_name LIKE 'err_new%';
-- an existing queue with other attributes: 42710
SELECT pg_temp.err($$SELECT queue.create('err_q')$$);

----------------------------------------------------------------------
-- message arguments out of range: 22023
----------------------------------------------------------------------
CREATE TEMP TABLE range_call (fn text, arg text, sql text);
INSERT INTO range_call VALUES
	('send', 'delay -1 second', $$SELECT queue.send('err_q', 'x', delay => '-1 second')$$),
	('send', 'delay 4 days 1 second', $$SELECT queue.send('err_q', 'x', delay => '4 days 1 second')$$),
	('send', 'delay 100000 years', $$SELECT queue.send('err_q', 'x', delay => '100000 years')$$),
	('send_batch', 'delay -1 second', $$SELECT queue.send_batch('err_q', ARRAY['x'], delay => '-1 second')$$),
	('send_batch', 'delay 5 days', $$SELECT queue.send_batch('err_q', ARRAY['x'], delay => '5 days')$$),
	('receive', 'max_messages -1', $$SELECT queue.receive('err_q', -1)$$),
	('receive', 'max_messages 0', $$SELECT queue.receive('err_q', 0)$$),
	('receive', 'max_messages 1001', $$SELECT queue.receive('err_q', 1001)$$),
	('receive', 'visibility_timeout -1 second', $$SELECT queue.receive('err_q', visibility_timeout => '-1 second')$$),
	('receive', 'visibility_timeout 12 hours 1 second', $$SELECT queue.receive('err_q', visibility_timeout => '12 hours 1 second')$$),
	('receive', 'wait -1 second', $$SELECT queue.receive('err_q', wait => '-1 second')$$),
	('receive', 'wait 21 seconds', $$SELECT queue.receive('err_q', wait => '21 seconds')$$),
	('receive', 'wait 20.001 seconds', $$SELECT queue.receive('err_q', wait => '20.001 seconds')$$),
	('change_visibility', 'visibility_timeout -1 second', format('SELECT queue.change_visibility(%L, %L, %L)', 'err_q', :'r', '-1 second')),
	('change_visibility', 'visibility_timeout 12 hours 1 second', format('SELECT queue.change_visibility(%L, %L, %L)', 'err_q', :'r', '12 hours 1 second')),
	('change_visibility_batch', 'visibility_timeout -1 second', format('SELECT queue.change_visibility_batch(%L, %L, %L)', 'err_q', ARRAY[:'r'], '-1 second')),
	('change_visibility_batch', 'visibility_timeout 12 hours 1 second', format('SELECT queue.change_visibility_batch(%L, %L, %L)', 'err_q', ARRAY[:'r'], '12 hours 1 second')),
	('peek', 'max_messages -1', $$SELECT queue.peek('err_q', -1)$$),
	('peek', 'max_messages 0', $$SELECT queue.peek('err_q', 0)$$);
SELECT fn, arg, pg_temp.err(sql) AS result FROM range_call ORDER BY fn, arg;
SELECT pg_temp.state('err_q') = :'before' AS unchanged;
-- the bounds themselves are fine (rolled back)
BEGIN;
SELECT count(*) FROM queue.receive('err_empty', 1000, visibility_timeout => '12 hours', wait => '0');
SELECT count(*) FROM queue.peek('err_q', 2147483647);
SELECT queue.change_visibility('err_q', :'r', '12 hours');
SELECT * FROM queue.change_visibility_batch('err_q', ARRAY[:'r'], '12 hours');
-- (last: '0' ends the lease, which can then no longer be changed)
SELECT queue.change_visibility('err_q', :'r', '0');
ROLLBACK;
SELECT pg_temp.state('err_q') = :'before' AS unchanged;

----------------------------------------------------------------------
-- batch arrays: 1 to 1000 entries, one dimension, matching lengths
----------------------------------------------------------------------
CREATE TEMP TABLE batch_call (fn text, arg text, sql text);
INSERT INTO batch_call VALUES
	('send_batch', 'bodies empty text[]', $$SELECT queue.send_batch('err_q', ARRAY[]::text[])$$),
	('send_batch', 'bodies empty jsonb[]', $$SELECT queue.send_batch('err_q', ARRAY[]::jsonb[])$$),
	('send_batch', 'bodies 1001 entries', $$SELECT queue.send_batch('err_q', array_fill('x'::text, ARRAY[1001]))$$),
	('send_batch', 'bodies two dimensions', $$SELECT queue.send_batch('err_q', ARRAY[['a', 'b'], ['c', 'd']])$$),
	('send_batch', 'message_group_ids shorter', $$SELECT queue.send_batch('err_q', ARRAY['a', 'b'], message_group_ids => ARRAY['g'])$$),
	('send_batch', 'message_group_ids longer', $$SELECT queue.send_batch('err_q', ARRAY['a', 'b'], message_group_ids => ARRAY['g', 'g', 'g'])$$),
	('send_batch', 'message_group_ids empty', $$SELECT queue.send_batch('err_q', ARRAY['a'], message_group_ids => ARRAY[]::text[])$$),
	('send_batch', 'deduplication_ids shorter', $$SELECT queue.send_batch('err_q', ARRAY['a', 'b'], deduplication_ids => ARRAY['d'])$$),
	('send_batch', 'attributes longer', $$SELECT queue.send_batch('err_q', ARRAY['a'], attributes => ARRAY['{}', '{}']::jsonb[])$$),
	('delete_batch', 'receipts empty', $$SELECT queue.delete_batch('err_q', ARRAY[]::text[])$$),
	('delete_batch', 'receipts 1001 entries', format('SELECT queue.delete_batch(%L, array_fill(%L::text, ARRAY[1001]))', 'err_q', :'r')),
	('delete_batch', 'receipts two dimensions', format('SELECT queue.delete_batch(%L, ARRAY[[%L], [%L]])', 'err_q', :'r', :'r')),
	('change_visibility_batch', 'receipts empty', $$SELECT queue.change_visibility_batch('err_q', ARRAY[]::text[], '0')$$),
	('change_visibility_batch', 'receipts 1001 entries', format('SELECT queue.change_visibility_batch(%L, array_fill(%L::text, ARRAY[1001]), %L)', 'err_q', :'r', '0')),
	('change_visibility_batch', 'receipts two dimensions', format('SELECT queue.change_visibility_batch(%L, ARRAY[[%L], [%L]], %L)', 'err_q', :'r', :'r', '0'));
SELECT fn, arg, pg_temp.err(sql) AS result FROM batch_call ORDER BY fn, arg;
SELECT pg_temp.state('err_q') = :'before' AS unchanged;
-- 1000 entries are fine (rolled back)
BEGIN;
SELECT count(*) FROM queue.send_batch('err_q', array_fill('x'::text, ARRAY[1000]));
ROLLBACK;
SELECT pg_temp.state('err_q') = :'before' AS unchanged;

----------------------------------------------------------------------
-- bodies: empty 22023, over max_message_size (bytes) 54000
----------------------------------------------------------------------
CREATE TEMP TABLE body_call (label text, sql text);
INSERT INTO body_call VALUES
	('empty text', $$SELECT queue.send('err_q', '')$$),
	('11 bytes', $$SELECT queue.send('err_q', 'abcdefghijk')$$),
	('11 bytes, 6 characters', $$SELECT queue.send('err_q', 'ééééé!')$$),
	('jsonb text of 18 bytes', $$SELECT queue.send('err_q', '{"a": 123}'::jsonb || '{"b": 1}')$$),
	('batch with an empty body', $$SELECT queue.send_batch('err_q', ARRAY['ok', ''])$$),
	('batch with a long body', $$SELECT queue.send_batch('err_q', ARRAY['ok', 'abcdefghijk'])$$),
	('jsonb batch with a long body', $$SELECT queue.send_batch('err_q', ARRAY['1', '[1, 2, 3, 4]']::jsonb[])$$);
SELECT label, pg_temp.err(sql) AS result FROM body_call ORDER BY label;
SELECT pg_temp.state('err_q') = :'before' AS unchanged;
-- exactly max_message_size bytes is fine (rolled back)
BEGIN;
SELECT count(*) FROM queue.send('err_q', 'abcdefghij');
SELECT count(*) FROM queue.send('err_q', 'ééééé');
SELECT count(*) FROM queue.send('err_q', '[1, 2, 3]'::jsonb);
SELECT count(*) FROM queue.send_batch('err_q', ARRAY['abcdefghij', 'x']);
ROLLBACK;

----------------------------------------------------------------------
-- attributes: a JSON object or NULL, else 22023
----------------------------------------------------------------------
CREATE TEMP TABLE attr_call (label text, sql text);
INSERT INTO attr_call VALUES
	('send array', $$SELECT queue.send('err_q', 'x', attributes => '[]')$$),
	('send string', $$SELECT queue.send('err_q', 'x', attributes => '"s"')$$),
	('send number', $$SELECT queue.send('err_q', 'x', attributes => '1')$$),
	('send json null', $$SELECT queue.send('err_q', 'x', attributes => 'null')$$),
	('send_batch one array', $$SELECT queue.send_batch('err_q', ARRAY['a', 'b'], attributes => ARRAY['{}', '[]']::jsonb[])$$),
	('send_batch one scalar', $$SELECT queue.send_batch('err_q', ARRAY['a', 'b'], attributes => ARRAY['true', NULL]::jsonb[])$$);
SELECT label, pg_temp.err(sql) AS result FROM attr_call ORDER BY label;
SELECT pg_temp.state('err_q') = :'before' AS unchanged;

----------------------------------------------------------------------
-- ids (message_group_id, deduplication_id, receive_attempt_id): 1 to 128
-- printable ASCII characters without spaces, else 22023
----------------------------------------------------------------------
CREATE TEMP TABLE bad_token (label text, val text);
INSERT INTO bad_token VALUES
	('empty', ''),
	('129 characters', repeat('g', 129)),
	('space', 'a b'),
	('tab', E'a\tb'),
	('newline', E'a\nb'),
	('non-ascii', 'gé');
CREATE TEMP TABLE token_call (fn text, tmpl text);
INSERT INTO token_call VALUES
	('send message_group_id', $$SELECT queue.send('err_q', 'x', message_group_id => %L)$$),
	('send deduplication_id', $$SELECT queue.send('err_q', 'x', deduplication_id => %L)$$),
	('send_batch message_group_ids', $$SELECT queue.send_batch('err_q', ARRAY['x', 'y'], message_group_ids => ARRAY['ok', %L])$$),
	('send_batch deduplication_ids', $$SELECT queue.send_batch('err_q', ARRAY['x', 'y'], deduplication_ids => ARRAY[NULL, %L])$$),
	('receive receive_attempt_id', $$SELECT queue.receive('err_q', receive_attempt_id => %L)$$);
SELECT c.fn, pg_temp.err(format(c.tmpl, t.val)) AS result, count(*) AS ids
FROM bad_token t CROSS JOIN token_call c
GROUP BY 1, 2 ORDER BY 1, 2;
SELECT pg_temp.state('err_q') = :'before' AS unchanged;
-- 128 printable characters are fine (rolled back)
BEGIN;
SELECT count(*) FROM queue.send('err_q', 'x', message_group_id => repeat('g', 127) || '~');
SELECT count(*) FROM queue.send_batch('err_q', ARRAY['x'], message_group_ids => ARRAY['!#$%&()*+,-./:;<=>?@[\]^_`{|}']);
ROLLBACK;

----------------------------------------------------------------------
-- receipts that do not parse: 22P02 (more cases in visibility.sql)
----------------------------------------------------------------------
SELECT pg_temp.err($$SELECT queue.delete('err_q', 'garbage')$$);
SELECT pg_temp.err(format('SELECT queue.delete_batch(%L, %L)', 'err_q', ARRAY[:'r', 'garbage']));
SELECT pg_temp.err($$SELECT queue.change_visibility('err_q', 'garbage', '0')$$);
SELECT pg_temp.err(format('SELECT queue.change_visibility_batch(%L, %L, %L)', 'err_q', ARRAY[:'r', 'garbage'], '0'));
SELECT pg_temp.state('err_q') = :'before' AS unchanged;

----------------------------------------------------------------------
-- read-only transactions: 25006 for every call that writes; peek and the
-- views still work
----------------------------------------------------------------------
CREATE TEMP TABLE ro_call (fn text, sql text);
INSERT INTO ro_call VALUES
	('create', $$SELECT queue.create('err_new')$$),
	('alter', $$SELECT queue.alter('err_q', visibility_timeout => '1 minute')$$),
	('drop', $$SELECT queue.drop('err_q')$$),
	('purge', $$SELECT queue.purge('err_q')$$),
	('send', $$SELECT queue.send('err_q', 'x')$$),
	('send jsonb', $$SELECT queue.send('err_q', '{}'::jsonb)$$),
	('send_batch', $$SELECT queue.send_batch('err_q', ARRAY['x'])$$),
	('receive', $$SELECT queue.receive('err_q')$$),
	('delete', format('SELECT queue.delete(%L, %L)', 'err_q', :'r')),
	('delete_batch', format('SELECT queue.delete_batch(%L, %L)', 'err_q', ARRAY[:'r'])),
	('change_visibility', format('SELECT queue.change_visibility(%L, %L, %L)', 'err_q', :'r', '0')),
	('change_visibility_batch', format('SELECT queue.change_visibility_batch(%L, %L, %L)', 'err_q', ARRAY[:'r'], '0')),
	('peek', $$SELECT queue.peek('err_q')$$),
	('queues', $$SELECT * FROM queue.queues$$),
	('stats', $$SELECT * FROM queue.stats$$);
BEGIN;
SET TRANSACTION READ ONLY;
SELECT fn, pg_temp.err(sql) AS result FROM ro_call ORDER BY fn;
ROLLBACK;
SET default_transaction_read_only = on;
SELECT pg_temp.err($$SELECT queue.send('err_q', 'x')$$);
SELECT pg_temp.err($$SELECT queue.receive('err_q')$$);
RESET default_transaction_read_only;
SELECT * FROM err_attrs;
SELECT pg_temp.state('err_q') = :'before' AS unchanged;

----------------------------------------------------------------------
-- a waiting receive needs READ COMMITTED: 25000 (invalid transaction
-- state) in REPEATABLE READ and SERIALIZABLE; without a wait it works
----------------------------------------------------------------------
BEGIN ISOLATION LEVEL REPEATABLE READ;
SELECT pg_temp.err($$SELECT queue.receive('err_q', wait => '1 second')$$);
SELECT count(*) FROM queue.receive('err_q', wait => '0');
ROLLBACK;
BEGIN ISOLATION LEVEL SERIALIZABLE;
SELECT pg_temp.err($$SELECT queue.receive('err_q', wait => '1 second')$$);
ROLLBACK;
-- the queue's receive_wait counts as a wait
SELECT queue.create('err_wait', receive_wait => '1 second') > 0 AS created;
BEGIN ISOLATION LEVEL REPEATABLE READ;
SELECT pg_temp.err($$SELECT queue.receive('err_wait')$$);
SELECT count(*) FROM queue.receive('err_wait', wait => '0');
ROLLBACK;
SELECT pg_temp.state('err_q') = :'before' AS unchanged;

-- after all of that, the queue is as it was, and works
SELECT :'before' AS state;
SELECT * FROM err_attrs;
SELECT queue.delete('err_q', :'r');
SELECT queue.drop('err_q'), queue.drop('err_wait'), queue.drop('err_empty');
SELECT count(*) FROM queue.queues;
