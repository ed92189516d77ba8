-- message_size: max_message_size counts the body and the attributes, as SQS
-- counts both: the body's bytes (a jsonb body: its text form) plus the
-- length of the attributes object's text form (attributes::text).  Over the
-- limit is 54000, naming the argument; a batch with one message over it
-- enqueues none.
CREATE EXTENSION IF NOT EXISTS queue;

CREATE FUNCTION pg_temp.err(cmd text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
	EXECUTE cmd;
	RETURN 'ok';
EXCEPTION WHEN OTHERS THEN
	RETURN SQLSTATE || ': ' || SQLERRM;
END
$$;
CREATE FUNCTION pg_temp.n(q text) RETURNS bigint LANGUAGE sql AS $$
	SELECT count(*) FROM queue.peek(q, 1000)
$$;

SELECT queue.create('ms_std', max_message_size => 10) > 0 AS created;
SELECT queue.create('ms_fifo', fifo => true, content_based_deduplication => true,
	max_message_size => 10) > 0 AS created;

-- the text forms counted
SELECT length('{}'::jsonb::text) AS empty, length('{"a": 1}'::jsonb::text) AS one;

-- attributes far larger than the limit
SELECT pg_temp.err($$SELECT queue.send('ms_std', 'x',
	attributes => jsonb_build_object('big', repeat('a', 2 * 1024 * 1024)))$$);
SELECT pg_temp.err($$SELECT queue.send('ms_fifo', 'x', message_group_id => 'g',
	attributes => jsonb_build_object('big', repeat('a', 2 * 1024 * 1024)))$$);
SELECT pg_temp.err($$SELECT queue.send('ms_std', 'x', deduplication_id => 'd1',
	attributes => jsonb_build_object('big', repeat('a', 2 * 1024 * 1024)))$$);
SELECT pg_temp.n('ms_std'), pg_temp.n('ms_fifo');

-- at the limit and one byte over: body 8 + '{}' 2 = 10; body 2 + '{"a": 1}' 8 = 10
SELECT pg_temp.err($$SELECT queue.send('ms_std', '12345678', attributes => '{}')$$);
SELECT pg_temp.err($$SELECT queue.send('ms_std', '123456789', attributes => '{}')$$);
SELECT pg_temp.err($$SELECT queue.send('ms_std', '12', attributes => '{"a": 1}')$$);
SELECT pg_temp.err($$SELECT queue.send('ms_std', '123', attributes => '{"a": 1}')$$);
SELECT pg_temp.err($$SELECT queue.send('ms_std', '123'::jsonb, attributes => '{"a": 1}')$$);
SELECT pg_temp.err($$SELECT queue.send('ms_fifo', '12', message_group_id => 'g',
	attributes => '{"a": 1}')$$);
SELECT pg_temp.err($$SELECT queue.send('ms_fifo', '123', message_group_id => 'g',
	attributes => '{"a": 1}')$$);
-- without attributes the body alone may use the whole limit
SELECT pg_temp.err($$SELECT queue.send('ms_std', '1234567890')$$);
SELECT pg_temp.err($$SELECT queue.send('ms_std', '12345678901')$$);
SELECT pg_temp.n('ms_std'), pg_temp.n('ms_fifo');

-- a batch with one message over the limit enqueues none
SELECT pg_temp.err($$SELECT * FROM queue.send_batch('ms_std', ARRAY['a', 'b', 'c'],
	attributes => ARRAY['{}', '{"k": "a long value"}', NULL]::jsonb[])$$);
SELECT pg_temp.err($$SELECT * FROM queue.send_batch('ms_fifo', ARRAY['a', 'b', 'c'],
	message_group_ids => ARRAY['g', 'g', 'h'],
	attributes => ARRAY['{}', '{"k": "a long value"}', NULL]::jsonb[])$$);
SELECT pg_temp.err($$SELECT * FROM queue.send_batch('ms_std', ARRAY['1'::jsonb, '2'],
	attributes => ARRAY['{"k": 12}', '{"k": 123}']::jsonb[])$$);
SELECT pg_temp.n('ms_std'), pg_temp.n('ms_fifo');
-- ... and one within it enqueues all
SELECT count(*) FROM queue.send_batch('ms_std', ARRAY['a', 'b', 'c'],
	attributes => ARRAY['{}', '{"k": 1}', NULL]::jsonb[]);
SELECT pg_temp.n('ms_std');
SELECT body, attributes FROM queue.receive('ms_std', 10) ORDER BY message_id;

SELECT queue.drop('ms_std'), queue.drop('ms_fifo');
