-- error_context: what an error of the SQL API shows a user (psql's default
-- verbosity): its message, detail and hint, and the context of the user's
-- own code that called the API, never a line of the extension's internals
-- (its PL/pgSQL functions queue._*, the statements its C functions run).
-- The same holds for PG_EXCEPTION_CONTEXT (a notice raised inside: TAP 006).
CREATE EXTENSION IF NOT EXISTS queue;
\set VERBOSITY default
\set SHOW_CONTEXT errors

-- Straight from psql: the message and its detail, no context at all.
-- (queue.create's checks run four internal frames deep.)
SELECT queue.create('ctx_q', visibility_timeout => '-1 second');
SELECT queue.create('');
SELECT queue.purge('ctx_no_such_queue');
SELECT * FROM queue.receive('ctx_no_such_queue', max_messages => 0);
SELECT queue.create('ctx_q') > 0 AS created;
SELECT queue.send('ctx_q', 'x', delay => '-1 second');

-- Called from a user's function: the user's own line stays.
CREATE FUNCTION public.ctx_make_queue(n text) RETURNS bigint LANGUAGE plpgsql AS $$
BEGIN
	RETURN queue.create(n, visibility_timeout => '-1 second');
END
$$;
SELECT public.ctx_make_queue('ctx_other');

-- Caught by the user: SQLSTATE, message, detail and hint are all there;
-- the context names the user's statement and function, nothing of ours.
CREATE FUNCTION public.ctx_diagnose(cmd text) RETURNS TABLE (item text, value text)
LANGUAGE plpgsql AS $$
DECLARE
	st text; msg text; det text; hin text; ctx text;
BEGIN
	EXECUTE cmd;
	RETURN;
EXCEPTION WHEN OTHERS THEN
	GET STACKED DIAGNOSTICS st = RETURNED_SQLSTATE, msg = MESSAGE_TEXT,
		det = PG_EXCEPTION_DETAIL, hin = PG_EXCEPTION_HINT, ctx = PG_EXCEPTION_CONTEXT;
	RETURN QUERY VALUES ('sqlstate', st), ('message', regexp_replace(msg, 'message \d+', 'message N')),
		('detail', det), ('hint', hin),
		('context', regexp_replace(ctx, '''[A-Za-z0-9_+/=-]{20,}''', '<receipt>'));
END
$$;
SELECT * FROM public.ctx_diagnose($$SELECT queue.create('ctx_q2', max_receive_count => 3)$$);
SELECT * FROM public.ctx_diagnose($$SELECT queue.create('ctx_q3', retention => '1 year')$$);
SELECT count(*) FROM queue.send('ctx_q', 'm');
SELECT receipt AS old_receipt FROM queue.receive('ctx_q', visibility_timeout => '0') \gset
SELECT count(*) FROM queue.receive('ctx_q', visibility_timeout => '1 hour');
SELECT * FROM public.ctx_diagnose(format($$SELECT queue.delete('ctx_q', %L)$$, :'old_receipt'));

DROP FUNCTION public.ctx_make_queue(text);
DROP FUNCTION public.ctx_diagnose(text);
SELECT queue.drop('ctx_q') AS dropped;
