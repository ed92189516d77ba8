-- consumers: the worker calls a SQL handler with a queue's messages
-- (DESIGN.md "Consumers").  Here: the API, its checks and every error,
-- who may drop, pause and resume, what queue.consumers shows to whom, and
-- that a consumer goes with its queue.  Processing itself is timed by the
-- worker, so it is tested in TAP (test/t/015_consumers.pl); the queues
-- here stay empty.  Roles are queue_test_consumers_* and dropped at the
-- end.  Output is booleans, names and SQLSTATEs, never ids or times.
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

SELECT queue.create('cons_q') > 0 AS created;
SELECT queue.create('cons_other') > 0 AS created;
SELECT queue.create('cons_fifo', fifo => true) > 0 AS created;
CREATE FUNCTION public.cons_handler(msgs queue.message[]) RETURNS void LANGUAGE sql AS 'SELECT';
CREATE PROCEDURE public.cons_proc(msgs queue.message[]) LANGUAGE sql AS 'SELECT';
CREATE FUNCTION public.cons_two(msgs queue.message[], n int) RETURNS void LANGUAGE sql AS 'SELECT';
CREATE FUNCTION public.cons_text(msgs text[]) RETURNS void LANGUAGE sql AS 'SELECT';
CREATE FUNCTION public.cons_one(msg queue.message) RETURNS void LANGUAGE sql AS 'SELECT';
CREATE AGGREGATE public.cons_agg(queue.message[]) (sfunc = array_cat, stype = queue.message[]);

----------------------------------------------------------------------
-- create_consumer: defaults, idempotent, attributes checked
SELECT queue.create_consumer('c1', 'cons_q', 'public.cons_handler(queue.message[])') > 0 AS created;
SELECT queue.create_consumer('c1', 'cons_q', 'public.cons_handler(queue.message[])')
	= (SELECT consumer_id FROM queue._consumers WHERE consumer_name = 'c1') AS same_id;
SELECT queue.create_consumer('c1', 'cons_q', 'public.cons_handler(queue.message[])', batch_size => 1,
	concurrency => 1, retry => 'exponential')
	= (SELECT consumer_id FROM queue._consumers WHERE consumer_name = 'c1') AS same_id_explicit_defaults;
SELECT consumer_name, queue_name, handler, role = current_user::regrole AS by_me, batch_size, concurrency, state
FROM queue.consumers ORDER BY 1;
SELECT pg_temp.err($$SELECT queue.create_consumer('c1', 'cons_q', 'public.cons_handler(queue.message[])', batch_size => 2)$$) AS other_batch_size;
SELECT pg_temp.err($$SELECT queue.create_consumer('c1', 'cons_q', 'public.cons_handler(queue.message[])', concurrency => 2)$$) AS other_concurrency;
SELECT pg_temp.err($$SELECT queue.create_consumer('c1', 'cons_q', 'public.cons_handler(queue.message[])', retry => 'fixed')$$) AS other_retry;
SELECT pg_temp.err($$SELECT queue.create_consumer('c1', 'cons_other', 'public.cons_handler(queue.message[])')$$) AS other_queue;
SELECT pg_temp.err($$SELECT queue.create_consumer('c1', 'cons_q', 'public.cons_proc(queue.message[])')$$) AS other_handler;
-- a procedure, a FIFO queue, every argument
SELECT queue.create_consumer('c2.proc-fifo', 'cons_fifo', 'public.cons_proc(queue.message[])', batch_size => 1000,
	concurrency => 64, retry => 'fixed') > 0 AS procedure_on_fifo;
SELECT consumer_name, queue_name, handler, batch_size, concurrency, state
FROM queue.consumers ORDER BY 1;
-- the same name is one consumer, whatever the queue
SELECT pg_temp.err($$SELECT queue.create_consumer('c2.proc-fifo', 'cons_q', 'public.cons_proc(queue.message[])', batch_size => 1000, concurrency => 64, retry => 'fixed')$$) AS name_taken;

-- names: as queue names
SELECT pg_temp.err($$SELECT queue.create_consumer('bad name', 'cons_q', 'public.cons_handler(queue.message[])')$$) AS bad_name;
SELECT pg_temp.err($$SELECT queue.create_consumer('', 'cons_q', 'public.cons_handler(queue.message[])')$$) AS empty_name;
SELECT pg_temp.err($$SELECT queue.create_consumer(repeat('c', 81), 'cons_q', 'public.cons_handler(queue.message[])')$$) AS long_name;
SELECT queue.create_consumer(repeat('c', 80), 'cons_q', 'public.cons_handler(queue.message[])') > 0 AS name_of_80;
SELECT queue.drop_consumer(repeat('c', 80));
SELECT pg_temp.err($$SELECT queue.create_consumer('c3', 'no_such_queue', 'public.cons_handler(queue.message[])')$$) AS unknown_queue;
SELECT pg_temp.err($$SELECT queue.create_consumer('c3', 'bad queue', 'public.cons_handler(queue.message[])')$$) AS bad_queue_name;

-- ranges
SELECT pg_temp.err($$SELECT queue.create_consumer('c3', 'cons_q', 'public.cons_handler(queue.message[])', batch_size => 0)$$) AS batch_size_0;
SELECT pg_temp.err($$SELECT queue.create_consumer('c3', 'cons_q', 'public.cons_handler(queue.message[])', batch_size => 1001)$$) AS batch_size_1001;
SELECT pg_temp.err($$SELECT queue.create_consumer('c3', 'cons_q', 'public.cons_handler(queue.message[])', concurrency => 0)$$) AS concurrency_0;
SELECT pg_temp.err($$SELECT queue.create_consumer('c3', 'cons_q', 'public.cons_handler(queue.message[])', concurrency => 65)$$) AS concurrency_65;
SELECT pg_temp.err($$SELECT queue.create_consumer('c3', 'cons_q', 'public.cons_handler(queue.message[])', retry => 'linear')$$) AS retry_linear;
SELECT pg_temp.err($$SELECT queue.create_consumer('c3', 'cons_q', 'public.cons_handler(queue.message[])', retry => 'Fixed')$$) AS retry_case;

-- the handler's signature
SELECT pg_temp.err($$SELECT queue.create_consumer('c3', 'cons_q', 'public.cons_two(queue.message[], int)')$$) AS two_arguments;
SELECT pg_temp.err($$SELECT queue.create_consumer('c3', 'cons_q', 'public.cons_text(text[])')$$) AS text_array;
SELECT pg_temp.err($$SELECT queue.create_consumer('c3', 'cons_q', 'public.cons_one(queue.message)')$$) AS not_an_array;
SELECT pg_temp.err($$SELECT queue.create_consumer('c3', 'cons_q', 'public.cons_agg(queue.message[])')$$) AS aggregate;
SELECT pg_temp.err($$SELECT queue.create_consumer('c3', 'cons_q', 'public.no_such_function(queue.message[])')$$) AS unknown_function;
SELECT pg_temp.err($$SELECT queue.create_consumer('c3', 'cons_q', 0)$$) AS oid_0;

-- nulls
SELECT pg_temp.err($$SELECT queue.create_consumer(NULL, 'cons_q', 'public.cons_handler(queue.message[])')$$) AS null_name;
SELECT pg_temp.err($$SELECT queue.create_consumer('c3', NULL, 'public.cons_handler(queue.message[])')$$) AS null_queue;
SELECT pg_temp.err($$SELECT queue.create_consumer('c3', 'cons_q', NULL)$$) AS null_handler;
SELECT pg_temp.err($$SELECT queue.create_consumer('c3', 'cons_q', 'public.cons_handler(queue.message[])', batch_size => NULL)$$) AS null_batch_size;
SELECT pg_temp.err($$SELECT queue.create_consumer('c3', 'cons_q', 'public.cons_handler(queue.message[])', concurrency => NULL)$$) AS null_concurrency;
SELECT pg_temp.err($$SELECT queue.create_consumer('c3', 'cons_q', 'public.cons_handler(queue.message[])', retry => NULL)$$) AS null_retry;
SELECT pg_temp.err($$SELECT queue.drop_consumer(NULL)$$) AS drop_null;
SELECT pg_temp.err($$SELECT queue.drop_consumer('c1', if_exists => NULL)$$) AS drop_null_if_exists;
SELECT pg_temp.err($$SELECT queue.pause_consumer(NULL)$$) AS pause_null;
SELECT pg_temp.err($$SELECT queue.resume_consumer(NULL)$$) AS resume_null;
SELECT count(*) AS consumers_after_errors FROM queue.consumers;

-- read-only transactions (a hot standby is one)
BEGIN READ ONLY;
SELECT pg_temp.err($$SELECT queue.create_consumer('c3', 'cons_q', 'public.cons_handler(queue.message[])')$$) AS read_only_create;
SELECT pg_temp.err($$SELECT queue.create_consumer('c1', 'cons_q', 'public.cons_handler(queue.message[])')$$) AS read_only_same;
SELECT pg_temp.err($$SELECT queue.drop_consumer('c1')$$) AS read_only_drop;
SELECT pg_temp.err($$SELECT queue.pause_consumer('c1')$$) AS read_only_pause;
SELECT pg_temp.err($$SELECT queue.resume_consumer('c1')$$) AS read_only_resume;
ROLLBACK;

----------------------------------------------------------------------
-- pause, resume, drop
SELECT queue.pause_consumer('c1');
SELECT consumer_name, state FROM queue.consumers ORDER BY 1;
SELECT queue.pause_consumer('c1');
SELECT consumer_name, state FROM queue.consumers WHERE consumer_name = 'c1';
SELECT queue.resume_consumer('c1');
SELECT queue.resume_consumer('c1');
SELECT consumer_name, state FROM queue.consumers WHERE consumer_name = 'c1';
-- a paused consumer keeps its attributes: creating it again returns it
SELECT queue.pause_consumer('c1');
SELECT queue.create_consumer('c1', 'cons_q', 'public.cons_handler(queue.message[])')
	= (SELECT consumer_id FROM queue._consumers WHERE consumer_name = 'c1') AS same_id_paused;
SELECT consumer_name, state FROM queue.consumers WHERE consumer_name = 'c1';
SELECT queue.resume_consumer('c1');
SELECT pg_temp.err($$SELECT queue.pause_consumer('nope')$$) AS pause_unknown;
SELECT pg_temp.err($$SELECT queue.resume_consumer('nope')$$) AS resume_unknown;
SELECT pg_temp.err($$SELECT queue.pause_consumer('bad name')$$) AS pause_bad_name;
SELECT queue.drop_consumer('c2.proc-fifo');
SELECT pg_temp.err($$SELECT queue.drop_consumer('c2.proc-fifo')$$) AS dropped;
SELECT queue.drop_consumer('c2.proc-fifo', if_exists => true) AS if_exists;
SELECT pg_temp.err($$SELECT queue.drop_consumer('bad name', if_exists => true)$$) AS drop_bad_name;
-- a dropped consumer's name is free again, for other attributes
SELECT queue.create_consumer('c2.proc-fifo', 'cons_q', 'public.cons_handler(queue.message[])', batch_size => 5) > 0 AS recreated;
SELECT consumer_name, queue_name, batch_size FROM queue.consumers ORDER BY 1;
-- rolled back: nothing changes
BEGIN;
SELECT queue.drop_consumer('c2.proc-fifo');
SELECT queue.pause_consumer('c1');
ROLLBACK;
SELECT consumer_name, state FROM queue.consumers ORDER BY 1;

----------------------------------------------------------------------
-- privileges
CREATE ROLE queue_test_consumers_owner;
CREATE ROLE queue_test_consumers_app;
CREATE ROLE queue_test_consumers_nobody;
GRANT USAGE ON SCHEMA queue TO queue_test_consumers_owner, queue_test_consumers_app, queue_test_consumers_nobody;
DO $$
BEGIN
	EXECUTE format('GRANT CREATE ON DATABASE %I TO queue_test_consumers_owner', current_database());
END
$$;
CREATE FUNCTION public.cons_private(msgs queue.message[]) RETURNS void LANGUAGE sql AS 'SELECT';
REVOKE EXECUTE ON FUNCTION public.cons_private(queue.message[]) FROM PUBLIC;
SET ROLE queue_test_consumers_owner;
SELECT queue.create('cons_owned') > 0 AS created;
SELECT queue.grant('cons_owned', 'queue_test_consumers_app', '{receive}');
RESET ROLE;
-- creating needs receive on the queue and EXECUTE on the handler
SET ROLE queue_test_consumers_nobody;
SELECT pg_temp.err($$SELECT queue.create_consumer('c_nobody', 'cons_owned', 'public.cons_handler(queue.message[])')$$) AS no_receive;
-- ... refused before the handler is looked at: 42501, not 22023 or 42883
SELECT pg_temp.err($$SELECT queue.create_consumer('c_nobody', 'cons_owned', 'public.cons_text(text[])')$$) AS no_receive_bad_handler;
SELECT pg_temp.err($$SELECT queue.create_consumer('c_nobody', 'cons_owned', 0)$$) AS no_receive_no_handler;
RESET ROLE;
SET ROLE queue_test_consumers_app;
SELECT pg_temp.err($$SELECT queue.create_consumer('c_app', 'cons_owned', 'public.cons_private(queue.message[])')$$) AS no_execute;
SELECT queue.create_consumer('c_app', 'cons_owned', 'public.cons_handler(queue.message[])') > 0 AS app_creates;
SELECT consumer_name, role, state FROM queue.consumers ORDER BY 1;
RESET ROLE;
-- a grant of send or manage is not enough
SELECT queue.grant('cons_owned', 'queue_test_consumers_nobody', '{send, manage}');
SET ROLE queue_test_consumers_nobody;
SELECT pg_temp.err($$SELECT queue.create_consumer('c_nobody', 'cons_owned', 'public.cons_handler(queue.message[])')$$) AS send_manage_only;
-- ... but shows the queue's consumers, and no others
SELECT consumer_name, queue_name, role FROM queue.consumers ORDER BY 1;
-- drop, pause and resume: only the creator, the queue's owner, a superuser
SELECT pg_temp.err($$SELECT queue.pause_consumer('c_app')$$) AS nobody_pauses;
SELECT pg_temp.err($$SELECT queue.resume_consumer('c_app')$$) AS nobody_resumes;
SELECT pg_temp.err($$SELECT queue.drop_consumer('c_app')$$) AS nobody_drops;
SELECT pg_temp.err($$SELECT queue.drop_consumer('c1')$$) AS nobody_drops_unseen;
RESET ROLE;
SELECT queue.revoke('cons_owned', 'queue_test_consumers_nobody', '{send, manage}');
SET ROLE queue_test_consumers_nobody;
SELECT count(*) AS nobody_sees FROM queue.consumers;
SELECT count(*) AS nobody_stats FROM queue._consumer_stats();
SELECT pg_temp.err($$SELECT * FROM queue._consumers$$) AS registry_closed;
SELECT pg_temp.err($$SELECT queue._consumer_reset(1, 1)$$) AS reset_closed;
RESET ROLE;
SET ROLE queue_test_consumers_app;
SELECT queue.pause_consumer('c_app');
SELECT consumer_name, state FROM queue.consumers ORDER BY 1;
RESET ROLE;
SET ROLE queue_test_consumers_owner;
SELECT queue.resume_consumer('c_app');
SELECT consumer_name, state FROM queue.consumers ORDER BY 1;
SELECT pg_temp.err($$SELECT queue.pause_consumer('c1')$$) AS not_my_queue;
SELECT queue.drop_consumer('c_app');
SELECT count(*) AS owner_sees FROM queue.consumers;
RESET ROLE;
SET ROLE queue_test_consumers_app;
SELECT queue.create_consumer('c_app', 'cons_owned', 'public.cons_handler(queue.message[])') > 0 AS app_creates_again;
SELECT queue.drop_consumer('c_app');
RESET ROLE;

----------------------------------------------------------------------
-- a consumer goes with its queue, not with its handler
SELECT queue.create_consumer('c_gone', 'cons_other', 'public.cons_handler(queue.message[])') > 0 AS created;
SELECT queue.drop('cons_other');
SELECT count(*) AS consumer_dropped_with_queue FROM queue._consumers WHERE consumer_name = 'c_gone';
SET ROLE queue_test_consumers_owner;
SELECT queue.create_consumer('c_owned', 'cons_owned', 'public.cons_handler(queue.message[])') > 0 AS created;
RESET ROLE;
DROP OWNED BY queue_test_consumers_owner;
SELECT count(*) AS gone_with_drop_owned FROM queue._consumers WHERE consumer_name = 'c_owned';

-- the catalog is dumped
SELECT count(*) AS dumped FROM pg_extension e, unnest(e.extconfig) c
WHERE e.extname = 'queue' AND c IN ('queue._consumers'::regclass, 'queue._consumers_consumer_id_seq'::regclass);

----------------------------------------------------------------------
SELECT queue.drop_consumer(c) FROM unnest(ARRAY['c1', 'c2.proc-fifo']) c;
SELECT count(*) AS consumers_left FROM queue.consumers;
DROP OWNED BY queue_test_consumers_app, queue_test_consumers_nobody;
DROP ROLE queue_test_consumers_owner, queue_test_consumers_app, queue_test_consumers_nobody;
SELECT queue.drop(q) FROM unnest(ARRAY['cons_q', 'cons_fifo']) q;
DROP FUNCTION public.cons_handler, public.cons_two, public.cons_text, public.cons_one, public.cons_private;
DROP PROCEDURE public.cons_proc;
DROP AGGREGATE public.cons_agg(queue.message[]);
