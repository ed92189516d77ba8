-- bad_input: hostile and extreme arguments for every function, beyond
-- errors.sql: names shaped like SQL injection (and odd but valid names,
-- which are data) in every name argument, role names and privilege lists,
-- NULLs errors.sql does not reach, the extremes of every number and
-- interval, 2 MB bodies, forged, foreign, stale and garbage receipts.
-- Each call gives a specific SQLSTATE (never P0001 or XX000) and changes
-- nothing: the queues' messages, leases and counters are compared before
-- and after.  Output is SQLSTATEs, booleans and counts, never ids.
CREATE EXTENSION IF NOT EXISTS queue;
-- The dedicated layout, whatever queue.default_storage the suite runs with:
-- its state snapshot reads the grants of a queue's own table; storage.sql covers the shared layout.
SET queue.default_storage = dedicated;
-- redrive tells of messages it leaves behind, by id
SET client_min_messages = warning;

-- err(sql): run a statement, show "SQLSTATE: message" instead of failing.
CREATE FUNCTION pg_temp.err(cmd text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
	EXECUTE cmd;
	RETURN 'ok';
EXCEPTION WHEN OTHERS THEN
	RETURN SQLSTATE || ': ' || regexp_replace(SQLERRM, 'message \d+', 'message N', 'g');
END
$$;
-- try(sql): like err(), but always rolls the statement back.
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
-- code(sql): the SQLSTATE alone ('ok' if none), rolled back.
CREATE FUNCTION pg_temp.code(cmd text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
	EXECUTE cmd;
	RAISE SQLSTATE 'QTRY0';
EXCEPTION
	WHEN SQLSTATE 'QTRY0' THEN
		RETURN 'ok';
	WHEN OTHERS THEN
		RETURN SQLSTATE;
END
$$;
-- state(): every queue of the test with its messages, receives, leases,
-- counters and attributes: what a failed call must not change.
CREATE FUNCTION pg_temp.state() RETURNS text LANGUAGE sql AS $$
	SELECT string_agg(format('%s: messages=%s receives=%s visible=%s in_flight=%s delayed=%s sent=%s received=%s deleted=%s attrs=%s grants=%s',
				  s.queue_name,
				  (SELECT count(*) FROM queue.peek(s.queue_name, 100000)),
				  (SELECT coalesce(sum(receive_count), 0) FROM queue.peek(s.queue_name, 100000)),
				  s.visible, s.in_flight, s.delayed, s.sent, s.received, s.deleted,
				  md5(row(q.visibility_timeout, q.delay, q.retention, q.max_message_size,
						  q.receive_wait, q.dead_letter_queue, q.max_receive_count,
						  q.redrive_allow, q.tags)::text),
				  (SELECT coalesce(c.relacl::text, '{}') FROM queue._queues r
				   JOIN pg_class c ON c.relnamespace = 'queue_data'::regnamespace
									AND c.relname = 'q' || r.queue_id
				   WHERE r.queue_name = s.queue_name)),
					  E'\n' ORDER BY s.queue_name)
	FROM queue.stats s JOIN queue.queues q USING (queue_name)
$$;

CREATE ROLE queue_test_bad_input;
SELECT queue.create('bi_q', max_message_size => 100) > 0 AS created;
-- Valid receives probed below (then rolled back) go to an empty queue: a
-- rolled-back receive of a message counts (failed_receives.sql).
SELECT queue.create('bi_empty') > 0 AS created;
SELECT queue.create('bi_big') > 0 AS created;
SELECT queue.create('bi_dlq') > 0 AS created;
SELECT queue.create('bi_src', dead_letter_queue => 'bi_dlq', max_receive_count => 1) > 0 AS created;
SELECT queue.create('bi_fifo', fifo => true, content_based_deduplication => true) > 0 AS created;
SELECT count(*) FROM queue.send_batch('bi_q', ARRAY['visible', 'leased']);
SELECT receipt AS r FROM queue.receive('bi_q', visibility_timeout => '0') \gset
SELECT receipt AS r FROM queue.receive('bi_q', visibility_timeout => '1 hour') \gset
SELECT count(*) FROM queue.send('bi_q', 'delayed', delay => '1 hour');
SELECT count(*) FROM queue.send_batch('bi_fifo', ARRAY['f1', 'f2'], message_group_ids => ARRAY['g', 'g']);
SELECT receipt AS rf FROM queue.receive('bi_fifo', visibility_timeout => '1 hour') \gset
SELECT count(*) FROM queue.send('bi_src', 'dead');
SELECT count(*) FROM queue.receive('bi_src', visibility_timeout => '0');
SELECT count(*) FROM queue.receive('bi_src');
SELECT count(*) FROM queue.send('bi_big', 'big');
SELECT pg_temp.state() AS before \gset
SELECT :'before' AS state;

----------------------------------------------------------------------
-- names shaped like SQL injection, and other odd names, in every name
-- argument of every function: 42602 (empty or a character outside
-- [A-Za-z0-9_.-]), 42622 (over 80 characters), 42704 (a valid name no
-- queue has); each call rolled back
----------------------------------------------------------------------
CREATE TEMP TABLE bad_name (label text, name text);
INSERT INTO bad_name VALUES
	('drop table', $$x'; DROP TABLE queue._queues; --$$),
	('select after quote', 'q"; SELECT 1'),
	('comment', 'q--'),
	('block comment', 'q/**/'),
	('dollar quote', 'q$$; SELECT 1; $$'),
	('union', $$' UNION SELECT key FROM queue._secret --$$),
	('format directives', 'q%s%n%x'),
	('backslash', E'q\\'),
	('spaces', 'my queue'),
	('leading space', ' bi_q'),
	('newline', E'bi_q\n'),
	('carriage return', E'bi_q\r'),
	('unicode', 'очередь'),
	('look-alike', 'bі_q'),
	('zero-width space', E'bi\u200B_q'),
	('right-to-left', E'\u202Ebi_q'),
	('emoji', 'q😀'),
	('41 two-byte characters', repeat('é', 41)),
	('80 two-byte characters', repeat('é', 80)),
	('81 characters', repeat('n', 81)),
	('10000 characters', repeat('n', 10000)),
	('1 MB', repeat('n', 1048576)),
	('empty', ''),
	('valid, schema-like', 'queue_data.q1'),
	('valid, a table name', '_queues'),
	('valid, dots', '..'),
	('valid, unknown', 'no_such_queue');
CREATE TEMP TABLE name_call (fn text, tmpl text);
INSERT INTO name_call VALUES
	('create', $$SELECT queue.create(%L)$$),
	('create dead_letter_queue', $$SELECT queue.create('bi_new', dead_letter_queue => %L, max_receive_count => 1)$$),
	('alter', $$SELECT queue.alter(%L, visibility_timeout => '1 minute')$$),
	('alter dead_letter_queue', $$SELECT queue.alter('bi_q', dead_letter_queue => %L, max_receive_count => 1)$$),
	('drop', $$SELECT queue.drop(%L)$$),
	('drop if_exists', $$SELECT queue.drop(%L, if_exists => true)$$),
	('purge', $$SELECT queue.purge(%L)$$),
	('send text', $$SELECT queue.send(%L, 'x'::text)$$),
	('send jsonb', $$SELECT queue.send(%L, '{}'::jsonb)$$),
	('send_batch text', $$SELECT queue.send_batch(%L, ARRAY['x'])$$),
	('send_batch jsonb', $$SELECT queue.send_batch(%L, ARRAY['{}']::jsonb[])$$),
	('receive', $$SELECT queue.receive(%L)$$),
	('delete', format('SELECT queue.delete(%%L, %L)', :'r')),
	('delete_batch', format('SELECT queue.delete_batch(%%L, %L)', ARRAY[:'r'])),
	('change_visibility', format('SELECT queue.change_visibility(%%L, %L, %L)', :'r', '0')),
	('change_visibility_batch', format('SELECT queue.change_visibility_batch(%%L, %L, %L)', ARRAY[:'r'], '0')),
	('peek', $$SELECT queue.peek(%L)$$),
	('redrive source_queue', $$SELECT queue.redrive(%L)$$),
	('redrive destination_queue', $$SELECT queue.redrive('bi_dlq', %L)$$),
	('grant', $$SELECT queue.grant(%L, 'queue_test_bad_input', '{send}')$$),
	('revoke', $$SELECT queue.revoke(%L, 'queue_test_bad_input', '{send}')$$);
-- one row per name and outcome, with how many functions gave it; a valid
-- name creates a queue (rolled back) and is unknown everywhere else
SELECT n.label, pg_temp.try(format(c.tmpl, n.name)) AS result, count(*) AS calls
FROM bad_name n CROSS JOIN name_call c
GROUP BY 1, 2 ORDER BY 1, 2;
-- the exceptions of a valid unknown name: drop with if_exists is false
SELECT n.label, queue.drop(n.name, if_exists => true)
FROM bad_name n WHERE n.label LIKE 'valid%' ORDER BY 1;
-- names inside redrive_allow are queue names too: 42602 / 42622, and a
-- NULL one 22004 (SQLSTATEs only)
CREATE TEMP TABLE allow_call (fn text, tmpl text);
INSERT INTO allow_call VALUES
	('create redrive_allow', $$SELECT queue.create('bi_new', redrive_allow => %L)$$),
	('alter redrive_allow', $$SELECT queue.alter('bi_dlq', redrive_allow => %L)$$);
SELECT c.fn, l.label, pg_temp.code(format(c.tmpl, l.allow)) AS result
FROM allow_call c CROSS JOIN (VALUES
	('injection', ARRAY['bi_src', $$x'; DROP TABLE queue._queues; --$$]),
	('space', ARRAY['my queue']),
	('empty', ARRAY['']),
	('81 characters', ARRAY[repeat('n', 81)]),
	('null element', ARRAY['bi_src', NULL]),
	('valid, unknown', ARRAY['no_such_queue']),
	('none', ARRAY[]::text[])) AS l(label, allow)
ORDER BY 1, 2;
SELECT count(*) AS queues FROM queue.queues;
SELECT pg_temp.state() = :'before' AS unchanged;

-- odd but valid names are only data: queues of their own, next to the
-- tables their names look like
SELECT queue.create('queue_data.q1') > 0 AS created, queue.create('_queues') > 0 AS created,
	   queue.create('..') > 0 AS created, queue.create('-') > 0 AS created,
	   queue.create(repeat('N', 80)) > 0 AS created;
SELECT count(*) FROM queue.send('queue_data.q1', 'one');
SELECT count(*) FROM queue.send('_queues', 'two');
SELECT count(*) FROM queue.send('..', 'three');
SELECT count(*) FROM queue.send('-', 'four');
SELECT count(*) FROM queue.send(repeat('N', 80), 'five');
SELECT body FROM queue.receive('queue_data.q1');
SELECT body FROM queue.receive('_queues');
SELECT body FROM queue.receive('..');
SELECT body FROM queue.receive('-');
SELECT body FROM queue.receive(repeat('N', 80));
SELECT to_regclass('queue._queues') IS NOT NULL AS registry_intact, count(*) AS queues FROM queue._queues;
SELECT queue.drop('queue_data.q1'), queue.drop('_queues'), queue.drop('..'), queue.drop('-'),
	   queue.drop(repeat('N', 80));
SELECT pg_temp.state() = :'before' AS unchanged;

----------------------------------------------------------------------
-- role names and privilege lists of grant and revoke
----------------------------------------------------------------------
CREATE TEMP TABLE grant_arg (label text, role_name text, privileges text[]);
INSERT INTO grant_arg VALUES
	('role null', NULL, '{send}'),
	('role empty', '', '{send}'),
	('role unknown', 'queue_test_no_such_role', '{send}'),
	('role injection', $$queue_test_bad_input'; DROP ROLE postgres; --$$, '{send}'),
	('role quoted', '"queue_test_bad_input"', '{send}'),
	('role other case', 'QUEUE_TEST_BAD_INPUT', '{send}'),
	('role trailing space', 'queue_test_bad_input ', '{send}'),
	('role public with a space', 'public ', '{send}'),
	('role 1 MB', repeat('r', 1048576), '{send}'),
	('role unicode', 'роль', '{send}'),
	('privileges null', 'queue_test_bad_input', NULL),
	('privileges empty', 'queue_test_bad_input', '{}'),
	('privileges null element', 'queue_test_bad_input', '{send,NULL}'),
	('privileges upper case', 'queue_test_bad_input', '{SEND}'),
	('privileges all', 'queue_test_bad_input', '{all}'),
	('privileges spaced', 'queue_test_bad_input', '{" send"}'),
	('privileges one unknown', 'queue_test_bad_input', '{send,drop}'),
	('privileges injection', 'queue_test_bad_input', ARRAY[$$send'); DROP TABLE queue._queues; --$$]),
	('privileges two dimensions', 'queue_test_bad_input', '{{send},{receive}}'),
	('valid', 'queue_test_bad_input', '{send,receive,manage}'),
	('valid, repeated', 'queue_test_bad_input', '{send,send,send}'),
	('valid, public', 'public', '{send}'),
	('valid, PUBLIC', 'PUBLIC', '{receive}');
SELECT label,
	   left(pg_temp.try(format('SELECT queue.grant(%L, %L, %L)', 'bi_q', role_name, privileges)), 80) AS "grant",
	   left(pg_temp.try(format('SELECT queue.revoke(%L, %L, %L)', 'bi_q', role_name, privileges)), 80) AS "revoke"
FROM grant_arg ORDER BY label;
SELECT pg_temp.err($$SELECT queue.grant(NULL, 'queue_test_bad_input', '{send}')$$);
SELECT pg_temp.err($$SELECT queue.revoke(NULL, 'queue_test_bad_input', '{send}')$$);
SELECT pg_temp.state() = :'before' AS unchanged;

----------------------------------------------------------------------
-- NULLs errors.sql does not reach: 22004 naming the argument; optional
-- arguments take their defaults
----------------------------------------------------------------------
CREATE TEMP TABLE null_call (fn text, arg text, sql text);
INSERT INTO null_call VALUES
	('create', 'queue_name', $$SELECT queue.create(NULL)$$),
	('create', 'all optional arguments null', $$SELECT queue.create('bi_new', fifo => NULL, visibility_timeout => NULL, delay => NULL, retention => NULL, max_message_size => NULL, receive_wait => NULL, content_based_deduplication => NULL, deduplication_window => NULL, deduplication_scope => NULL, dead_letter_queue => NULL, max_receive_count => NULL, redrive_allow => NULL, tags => NULL)$$),
	('create', 'dead_letter_queue null, max_receive_count set', $$SELECT queue.create('bi_new', max_receive_count => 3)$$),
	('create', 'max_receive_count null, dead_letter_queue set', $$SELECT queue.create('bi_new', dead_letter_queue => 'bi_dlq')$$),
	('drop', 'force', $$SELECT queue.drop('bi_q', force => NULL)$$),
	('drop', 'if_exists and force', $$SELECT queue.drop('bi_q', if_exists => NULL, force => NULL)$$),
	('redrive', 'source_queue', $$SELECT queue.redrive(NULL)$$),
	('redrive', 'destination_queue (optional)', $$SELECT queue.redrive('bi_dlq', NULL)$$),
	('redrive', 'max_messages (optional)', $$SELECT queue.redrive('bi_dlq', max_messages => NULL)$$),
	('send', 'queue_name', $$SELECT queue.send(NULL, 'x')$$),
	('send', 'every argument', $$SELECT queue.send(NULL, NULL::text, NULL, NULL, NULL, NULL)$$),
	('send_batch', 'every argument', $$SELECT queue.send_batch(NULL, NULL::text[], NULL, NULL, NULL, NULL)$$),
	('send_batch', 'a null group on a FIFO queue', $$SELECT queue.send_batch('bi_fifo', ARRAY['a', 'b'], message_group_ids => ARRAY['g', NULL])$$),
	('send_batch', 'all groups null on a FIFO queue', $$SELECT queue.send_batch('bi_fifo', ARRAY['a', 'b'], message_group_ids => ARRAY[NULL, NULL]::text[])$$),
	('send_batch', 'null groups on a standard queue (optional)', $$SELECT queue.send_batch('bi_q', ARRAY['a', 'b'], message_group_ids => ARRAY[NULL, NULL]::text[])$$),
	('send_batch', 'null attributes element (optional)', $$SELECT queue.send_batch('bi_q', ARRAY['a', 'b'], attributes => ARRAY[NULL, '{}']::jsonb[])$$),
	('receive', 'every argument', $$SELECT queue.receive(NULL, NULL, NULL, NULL, NULL)$$),
	('receive', 'queue_name', $$SELECT queue.receive(NULL)$$),
	('delete', 'both', $$SELECT queue.delete(NULL, NULL)$$),
	('delete_batch', 'only nulls', $$SELECT queue.delete_batch('bi_q', ARRAY[NULL, NULL]::text[])$$),
	('change_visibility', 'every argument', $$SELECT queue.change_visibility(NULL, NULL, NULL)$$),
	('change_visibility_batch', 'only nulls', $$SELECT queue.change_visibility_batch('bi_q', ARRAY[NULL]::text[], '0')$$),
	('peek', 'queue_name', $$SELECT queue.peek(NULL)$$),
	('peek', 'both', $$SELECT queue.peek(NULL, NULL)$$),
	('alter', 'queue_name', $$SELECT queue.alter(NULL)$$);
SELECT fn, arg, pg_temp.try(sql) AS result FROM null_call ORDER BY fn, arg;
SELECT pg_temp.state() = :'before' AS unchanged;

----------------------------------------------------------------------
-- numbers at their extremes: 22023 out of range, never an overflow
----------------------------------------------------------------------
CREATE TEMP TABLE int_call (fn text, tmpl text);
INSERT INTO int_call VALUES
	('receive max_messages', $$SELECT queue.receive('bi_empty', max_messages => %s)$$),
	('peek max_messages', $$SELECT queue.peek('bi_q', max_messages => %s)$$),
	('redrive max_messages', $$SELECT queue.redrive('bi_dlq', max_messages => %s)$$),
	('create max_message_size', $$SELECT queue.create('bi_new', max_message_size => %s)$$),
	('alter max_message_size', $$SELECT queue.alter('bi_q', max_message_size => %s)$$),
	('create max_receive_count', $$SELECT queue.create('bi_new', dead_letter_queue => 'bi_dlq', max_receive_count => %s)$$),
	('alter max_receive_count', $$SELECT queue.alter('bi_src', max_receive_count => %s)$$);
SELECT c.fn, v AS value, pg_temp.try(format(c.tmpl, v)) AS result
FROM int_call c CROSS JOIN unnest(ARRAY['-2147483648', '-1', '0', '2147483647']) AS v
ORDER BY 1, v::bigint;
SELECT v AS redrive_max_messages,
	   pg_temp.try(format('SELECT queue.redrive(%L, max_messages => %s)', 'bi_dlq', v)) AS result
FROM unnest(ARRAY['-9223372036854775808', '9223372036854775807', '2147483648']) AS v ORDER BY v::numeric;
-- a number too big for the argument's type matches no function
SELECT pg_temp.err($$SELECT queue.receive('bi_q', max_messages => 2147483648)$$);
SELECT pg_temp.state() = :'before' AS unchanged;

----------------------------------------------------------------------
-- intervals at their extremes, and ones whose parts cancel out
----------------------------------------------------------------------
CREATE TEMP TABLE interval_call (fn text, tmpl text);
INSERT INTO interval_call VALUES
	('create visibility_timeout', $$SELECT queue.create('bi_new', visibility_timeout => %L)$$),
	('create delay', $$SELECT queue.create('bi_new', delay => %L)$$),
	('create retention', $$SELECT queue.create('bi_new', retention => %L)$$),
	('create receive_wait', $$SELECT queue.create('bi_new', receive_wait => %L)$$),
	('create deduplication_window', $$SELECT queue.create('bi_new', deduplication_window => %L)$$),
	('alter visibility_timeout', $$SELECT queue.alter('bi_q', visibility_timeout => %L)$$),
	('alter delay', $$SELECT queue.alter('bi_q', delay => %L)$$),
	('alter retention', $$SELECT queue.alter('bi_q', retention => %L)$$),
	('alter receive_wait', $$SELECT queue.alter('bi_q', receive_wait => %L)$$),
	('alter deduplication_window', $$SELECT queue.alter('bi_q', deduplication_window => %L)$$),
	('send delay', $$SELECT queue.send('bi_q', 'x', delay => %L)$$),
	('send_batch delay', $$SELECT queue.send_batch('bi_q', ARRAY['x', 'y'], delay => %L)$$),
	('receive visibility_timeout', $$SELECT queue.receive('bi_empty', visibility_timeout => %L)$$),
	('receive wait', $$SELECT queue.receive('bi_empty', wait => %L)$$),
	('change_visibility', format('SELECT queue.change_visibility(%L, %L, %%L)', 'bi_q', :'r')),
	('change_visibility_batch', format('SELECT queue.change_visibility_batch(%L, %L, %%L)', 'bi_q', ARRAY[:'r']));
CREATE TEMP TABLE interval_value (label text, val interval);
INSERT INTO interval_value VALUES
	('-1 s', '-1 s'),
	('-1000 years', '-1000 years'),
	('1000 years', '1000 years'),
	('178000000 years', '178000000 years'),
	('-178000000 years', '-178000000 years'),
	('1 microsecond', '1 microsecond'),
	('1 mon -30 days (zero)', '1 mon -30 days'),
	('-1 mon 30 days 1 s (1 s)', '-1 mon 30 days 1 second'),
	('1 day -86399 s (1 s)', '1 day -86399 seconds'),
	('2147483647 days', '2147483647 days'),
	('-2147483648 mons', '-2147483648 mons');
-- one row per argument and outcome, with the values that gave it (a wait
-- with a positive value is left out: it would wait)
SELECT c.fn, pg_temp.try(format(c.tmpl, v.val)) AS result,
	   string_agg(v.label, ', ' ORDER BY v.val, v.label) AS "values"
FROM interval_call c CROSS JOIN interval_value v
WHERE NOT (c.fn = 'receive wait' AND v.val > '0')
GROUP BY 1, 2 ORDER BY 1, 2;
SELECT pg_temp.state() = :'before' AS unchanged;

----------------------------------------------------------------------
-- bodies over max_message_size: 54000, nothing enqueued; the default
-- limit is 1 MiB (1048576 bytes, not characters)
----------------------------------------------------------------------
CREATE TEMP TABLE body_call (label text, sql text);
INSERT INTO body_call VALUES
	('2 MB text', $$SELECT queue.send('bi_big', repeat('x', 2 * 1024 * 1024))$$),
	('2 MB jsonb', $$SELECT queue.send('bi_big', jsonb_build_object('k', repeat('x', 2 * 1024 * 1024)))$$),
	('2 MB on a FIFO queue (content-based id)', $$SELECT queue.send('bi_fifo', repeat('x', 2 * 1024 * 1024), message_group_id => 'g')$$),
	('1048577 bytes', $$SELECT queue.send('bi_big', repeat('x', 1048577))$$),
	('1048576 bytes', $$SELECT queue.send('bi_big', repeat('x', 1048576))$$),
	('524289 two-byte characters', $$SELECT queue.send('bi_big', repeat('é', 524289))$$),
	('524288 two-byte characters', $$SELECT queue.send('bi_big', repeat('é', 524288))$$),
	('262145 four-byte characters', $$SELECT queue.send('bi_big', repeat('😀', 262145))$$),
	('batch: 2 MB last of three', $$SELECT queue.send_batch('bi_big', ARRAY['a', 'b', repeat('x', 2 * 1024 * 1024)])$$),
	('batch: 2 MB first of three', $$SELECT queue.send_batch('bi_big', ARRAY[repeat('x', 2 * 1024 * 1024), 'b', 'c'])$$),
	('jsonb batch: 2 MB second', $$SELECT queue.send_batch('bi_big', ARRAY['1', jsonb_build_object('k', repeat('x', 2 * 1024 * 1024))]::jsonb[])$$),
	('101 bytes on a 100-byte queue', $$SELECT queue.send('bi_q', repeat('x', 101))$$),
	('control characters', $$SELECT queue.send('bi_q', E'\x01\x02\x7f\t\r\n')$$),
	('every plane of unicode', $$SELECT queue.send('bi_q', E'\u00e9\u4e2d\U0001F600\U0010FFFF')$$);
SELECT label, pg_temp.try(sql) AS result FROM body_call ORDER BY label;
SELECT pg_temp.state() = :'before' AS unchanged;
-- a body survives byte for byte (rolled back)
BEGIN;
SELECT count(*) FROM queue.send('bi_big', E'\x01\x02\x7f\t\r\n\u00e9\U0001F600\U0010FFFF''"\\%s');
SELECT body = E'\x01\x02\x7f\t\r\n\u00e9\U0001F600\U0010FFFF''"\\%s' AS same_body
FROM queue.peek('bi_big', 10) WHERE body <> 'big';
ROLLBACK;

----------------------------------------------------------------------
-- group, deduplication and receive attempt ids shaped like injection are
-- data (printable ASCII without spaces); a space makes them 22023
----------------------------------------------------------------------
BEGIN;
SELECT count(*) FROM queue.send('bi_fifo', 'inj', message_group_id => $$x';DROP_TABLE_queue._queues;--$$,
	deduplication_id => $$%s%n'"\$$);
SELECT body, message_group_id, deduplication_id FROM queue.peek('bi_fifo', 10) WHERE body = 'inj';
SELECT count(*) FROM queue.receive('bi_empty', receive_attempt_id => $$');DELETE/**/FROM/**/x;--$$);
ROLLBACK;
SELECT pg_temp.err($$SELECT queue.send('bi_fifo', 'x', message_group_id => 'x''; DROP TABLE queue._queues; --')$$);
SELECT pg_temp.state() = :'before' AS unchanged;

----------------------------------------------------------------------
-- receipts: forged, foreign, garbage, unicode, truncated, stale.  22P02
-- for anything this queue's receives did not issue, 55000 for a stale one;
-- a batch with one bad receipt does nothing
----------------------------------------------------------------------
-- a receipt of a queue that was dropped and made again under the same name
SELECT queue.create('bi_gone') > 0 AS created;
SELECT count(*) FROM queue.send('bi_gone', 'x');
SELECT receipt AS gone FROM queue.receive('bi_gone') \gset
SELECT queue.drop('bi_gone');
SELECT queue.create('bi_gone') > 0 AS created;
SELECT count(*) FROM queue.send('bi_gone', 'x');
-- a stale receipt: received again since
SELECT count(*) FROM queue.send('bi_gone', 'y');
SELECT receipt AS stale FROM queue.receive('bi_gone', visibility_timeout => '0') \gset
SELECT count(*) FROM queue.receive('bi_gone', 2, visibility_timeout => '1 hour');
SELECT pg_temp.state() AS before \gset
CREATE TEMP TABLE receipt_case (label text, queue_name text, receipt text);
INSERT INTO receipt_case VALUES
	('1 character', 'bi_q', 'A'),
	('half', 'bi_q', left(:'r', 22)),
	('44 x A (version 0)', 'bi_q', repeat('A', 44)),
	('version 1, zero body, no MAC', 'bi_q', 'AQ' || repeat('A', 42)),
	('a base64url character inside', 'bi_q', left(:'r', 4) || '-' || substr(:'r', 6)),
	('url-safe alphabet only', 'bi_q', repeat('-_', 22)),
	('22 two-byte characters (44 bytes)', 'bi_q', repeat('é', 22)),
	('44 two-byte characters', 'bi_q', repeat('é', 44)),
	('11 emoji (44 bytes)', 'bi_q', repeat('😀', 11)),
	('leading space', 'bi_q', ' ' || left(:'r', 43)),
	('trailing newline', 'bi_q', :'r' || E'\n'),
	('lower case', 'bi_q', lower(:'r')),
	('upper case', 'bi_q', upper(:'r')),
	('reversed', 'bi_q', reverse(:'r')),
	('injection', 'bi_q', $$x'; DROP TABLE queue._queues; --$$),
	('injection, 44 characters', 'bi_q', rpad($$'; DELETE FROM queue._queues; --$$, 44, 'A')),
	('format directives', 'bi_q', repeat('%s%n', 11)),
	('10000 characters', 'bi_q', repeat(:'r', 228)),
	('1 MB', 'bi_q', repeat('A', 1048576)),
	('a FIFO queue''s', 'bi_q', :'rf'),
	('a standard queue''s on a FIFO queue', 'bi_fifo', :'r'),
	('of a dropped queue of the same name', 'bi_gone', :'gone'),
	('stale', 'bi_gone', :'stale');
SELECT label,
	   pg_temp.try(format('SELECT queue.delete(%L, %L)', queue_name, receipt)) AS delete,
	   pg_temp.try(format('SELECT queue.change_visibility(%L, %L, %L)', queue_name, receipt, '0')) AS change_visibility
FROM receipt_case ORDER BY label;
-- in batches, after a good receipt of the same queue: all or nothing
SELECT label,
	   pg_temp.try(format('SELECT queue.delete_batch(%L, %L)', queue_name,
			ARRAY[CASE queue_name WHEN 'bi_q' THEN :'r' WHEN 'bi_fifo' THEN :'rf' END, receipt])) AS delete_batch,
	   pg_temp.try(format('SELECT queue.change_visibility_batch(%L, %L, %L)', queue_name,
			ARRAY[CASE queue_name WHEN 'bi_q' THEN :'r' WHEN 'bi_fifo' THEN :'rf' END, receipt], '0')) AS change_visibility_batch
FROM receipt_case WHERE queue_name <> 'bi_gone' ORDER BY label;
-- the entry at fault is named, 1-based like the batch calls' ordinal
SELECT pg_temp.try(format('SELECT queue.delete_batch(%L, %L)', 'bi_q',
	ARRAY[:'r', :'r', 'not a receipt'])) AS third_entry;
-- the same, committed
SELECT label, left(pg_temp.err(format('SELECT queue.delete_batch(%L, %L)', 'bi_q', ARRAY[:'r', receipt])), 5) AS delete_batch
FROM receipt_case WHERE queue_name = 'bi_q' ORDER BY label;
SELECT pg_temp.state() = :'before' AS unchanged;
-- one receipt twice in a batch: the first deletes, the second finds it
-- already deleted, as a second call would (rolled back)
BEGIN;
SELECT * FROM queue.change_visibility_batch('bi_q', ARRAY[:'r', :'r'], '1 hour');
SELECT * FROM queue.delete_batch('bi_q', ARRAY[:'r', :'r']);
ROLLBACK;
-- a receipt of a purged message deletes nothing (false) and cannot change
-- visibility (rolled back)
BEGIN;
SELECT queue.purge('bi_q') AS purged;
SELECT queue.delete('bi_q', :'r');
SELECT pg_temp.err(format('SELECT queue.change_visibility(%L, %L, %L)', 'bi_q', :'r', '0'));
ROLLBACK;
SELECT pg_temp.state() = :'before' AS unchanged;

----------------------------------------------------------------------
-- a call rolled back leaves no trace, counters included
----------------------------------------------------------------------
SELECT pg_temp.try($$SELECT queue.purge('bi_q')$$) AS purge;
SELECT pg_temp.try($$SELECT queue.drop('bi_q')$$) AS drop;
BEGIN;
SELECT queue.drop('bi_src');
ROLLBACK;
SELECT pg_temp.try($$SELECT queue.alter('bi_q', max_message_size => 1000)$$) AS alter;
SELECT pg_temp.try($$SELECT queue.redrive('bi_dlq')$$) AS redrive;
SELECT pg_temp.state() = :'before' AS unchanged;
SELECT queue_name, sent, received FROM queue.stats WHERE queue_name IN ('bi_q', 'bi_src') ORDER BY 1;

-- the queues still work
SELECT queue.delete('bi_q', :'r');
SELECT body FROM queue.receive('bi_q');
SELECT queue.drop('bi_q'), queue.drop('bi_big'), queue.drop('bi_src'), queue.drop('bi_dlq'),
	   queue.drop('bi_fifo'), queue.drop('bi_gone'), queue.drop('bi_empty');
SELECT count(*) FROM queue.queues;
DROP ROLE queue_test_bad_input;
