# Consumers (DESIGN.md "Consumers"): the worker receives, calls a SQL
# handler, deletes and commits, all in one transaction.  A consumer drains
# a queue and counts what it processed; a handler that raises makes the
# consumer failing with the error's SQLSTATE until it is fixed; pause,
# resume and drop stop and start its processes; consumers survive a
# restart; kill -9 of a consumer in the middle of a batch handles no
# message twice; a FIFO queue keeps each group's order with two
# processes; the handler runs as the consumer's role, which cannot read
# what it holds no privilege on, and a revoke of EXECUTE stops it.
use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use QueueWorkerNode;

my $node = QueueWorkerNode::start(
	'consumers', q(
restart_after_crash = on
max_worker_processes = 24
queue.max_consumer_processes = 10
));

sub sql { return $node->safe_psql('postgres', $_[0]); }

# The pids of a consumer's processes (application_name is its name).
sub consumer_pids
{
	my ($name) = @_;
	return sql("SELECT string_agg(pid::text, ',' ORDER BY pid) FROM pg_stat_activity"
		  . " WHERE backend_type = 'queue consumer' AND application_name = '$name'");
}

sub processes_of
{
	my ($name) = @_;
	return "SELECT count(*) FROM pg_stat_activity"
	  . " WHERE backend_type = 'queue consumer' AND application_name = '$name'";
}

sql(q(
CREATE TABLE public.done (message_id bigint, body text, consumer text, n bigserial);
CREATE FUNCTION public.h_insert(msgs queue.message[]) RETURNS void LANGUAGE sql AS $$
	INSERT INTO public.done (message_id, body, consumer)
	SELECT m.message_id, m.body, 'drain' FROM pg_catalog.unnest(msgs) m
$$;
SELECT queue.create('cq');
));

# --- a consumer drains 100 messages ------------------------------------------
sql(q(SELECT queue.send_batch('cq', ARRAY(SELECT 'm' || i FROM generate_series(1, 100) i))));
is(sql(q(SELECT queue.create_consumer('c_drain', 'cq', 'public.h_insert(queue.message[])', batch_size => 10) > 0)),
	't', 'create_consumer');
ok($node->poll_query_until('postgres', "SELECT count(*) = 100 FROM public.done"),
	'the consumer handled 100 messages');
is(sql("SELECT count(DISTINCT message_id) FROM public.done"), '100', 'each once');
ok($node->poll_query_until('postgres',
		"SELECT count(*) = 0 FROM queue.peek('cq', 1000)"), 'and deleted them');
ok($node->poll_query_until('postgres',
		"SELECT processed = 100 AND failed = 0 AND state = 'running' AND last_success_at IS NOT NULL"
		  . " FROM queue.consumers WHERE consumer_name = 'c_drain'"),
	'queue.consumers: processed 100, running');
is(sql(processes_of('c_drain')), '1', 'one process (concurrency 1)');

# woken by a send's commit: a message sent now is handled without delay
sql("SELECT queue.send('cq', 'wake')");
ok($node->poll_query_until('postgres', "SELECT count(*) = 1 FROM public.done WHERE body = 'wake'"),
	'a new message is handled');

# --- pause, resume ---------------------------------------------------------
sql("SELECT queue.pause_consumer('c_drain')");
ok($node->poll_query_until('postgres', processes_of('c_drain'), '0'),
	'a paused consumer has no process');
is(sql("SELECT state FROM queue.consumers WHERE consumer_name = 'c_drain'"), 'paused', 'state paused');
sql(q(SELECT queue.send_batch('cq', ARRAY['p1', 'p2', 'p3'])));
is(sql("SELECT count(*) FROM queue.peek('cq')"), '3', 'messages wait while it is paused');
sql("SELECT queue.resume_consumer('c_drain')");
ok($node->poll_query_until('postgres', "SELECT count(*) = 3 FROM public.done WHERE body LIKE 'p_'"),
	'resumed, it handles them');
is(sql("SELECT state FROM queue.consumers WHERE consumer_name = 'c_drain'"), 'running', 'state running');

# --- a failing handler, fixed by CREATE OR REPLACE -----------------------------
sql(q(
SELECT queue.create('fq');
CREATE FUNCTION public.h_fail(msgs queue.message[]) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
	INSERT INTO public.done (message_id, body, consumer)
	SELECT m.message_id, m.body, 'fail' FROM pg_catalog.unnest(msgs) m;
	IF EXISTS (SELECT 1 FROM pg_catalog.unnest(msgs) m WHERE m.body = 'bad') THEN
		RAISE EXCEPTION 'bad message' USING ERRCODE = '22000';
	END IF;
END
$$;
SELECT queue.create_consumer('c_fail', 'fq', 'public.h_fail(queue.message[])');
SELECT queue.send('fq', 'good');
));
ok($node->poll_query_until('postgres',
		"SELECT processed = 1 FROM queue.consumers WHERE consumer_name = 'c_fail'"),
	'the good message is processed');
sql("SELECT queue.send('fq', 'bad')");
ok($node->poll_query_until('postgres',
		"SELECT state = 'failing' AND failed > 0 AND last_error = '22000: bad message' AND last_error_at IS NOT NULL"
		  . " FROM queue.consumers WHERE consumer_name = 'c_fail'"),
	'a handler that raises: state failing, last_error with its SQLSTATE');
is(sql("SELECT count(*) FROM public.done WHERE consumer = 'fail' AND body = 'bad'"), '0',
	'the failed batch left no effect');
is(sql("SELECT count(*) FROM queue.peek('fq')"), '1', 'the message is still in the queue');
ok($node->poll_query_until('postgres', "SELECT receive_count >= 2 FROM queue.peek('fq')"),
	'each failed batch counts as a receive of its message (failed.c), retried after 1 s');
sql(q(
CREATE OR REPLACE FUNCTION public.h_fail(msgs queue.message[]) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
	INSERT INTO public.done (message_id, body, consumer)
	SELECT m.message_id, m.body, 'fail' FROM pg_catalog.unnest(msgs) m;
END
$$;
));
ok($node->poll_query_until('postgres',
		"SELECT state = 'running' AND processed = 2 FROM queue.consumers WHERE consumer_name = 'c_fail'"),
	'fixed by CREATE OR REPLACE: running again');
is(sql("SELECT count(*) FROM public.done WHERE consumer = 'fail' AND body = 'bad'"), '1',
	'the message was handled once');
like(sql("SELECT last_error FROM queue.consumers WHERE consumer_name = 'c_fail'"), qr/^22000: /,
	'last_error stays as a record');

# --- retries: fixed delay, then the dead-letter queue ---------------------------
sql(q(
SELECT queue.create('rq_dlq');
SELECT queue.create('rq', visibility_timeout => '1 hour', dead_letter_queue => 'rq_dlq',
					max_receive_count => 2);
CREATE FUNCTION public.h_never(msgs queue.message[]) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
	RAISE EXCEPTION 'never' USING ERRCODE = '22000';
END
$$;
SELECT queue.create_consumer('c_fixed', 'rq', 'public.h_never(queue.message[])', retry => 'fixed');
SELECT queue.send('rq', 'held');
));
ok($node->poll_query_until('postgres',
		"SELECT receive_count = 1 AND visible_at > now() + interval '50 minutes' FROM queue.peek('rq')"),
	'retry fixed: a failed batch holds its message back for the visibility timeout, counted');
sql(q(
SELECT queue.drop_consumer('c_fixed');
SELECT queue.alter('rq', visibility_timeout => '2 s');
SELECT queue.create('rq2_dlq');
SELECT queue.create('rq2', dead_letter_queue => 'rq2_dlq', max_receive_count => 2);
SELECT queue.create_consumer('c_exp', 'rq2', 'public.h_never(queue.message[])', retry => 'exponential');
SELECT queue.send('rq2', 'poison');
));
ok($node->poll_query_until('postgres', "SELECT count(*) = 1 FROM queue.peek('rq2_dlq')"),
	'retry exponential: after max_receive_count failed batches the message is a dead letter');
is(sql("SELECT body || ':' || receive_count FROM queue.peek('rq2_dlq')"), 'poison:2',
	'moved after its second failed receive');
is(sql("SELECT count(*) FROM queue.peek('rq2')"), '0', 'and its queue is empty');
sql("SELECT queue.drop_consumer('c_exp')");

# --- drop ---------------------------------------------------------------
is(sql("SELECT queue.drop_consumer('c_fail')"), 't', 'drop_consumer');
ok($node->poll_query_until('postgres', processes_of('c_fail'), '0'), 'its process leaves');
sql("SELECT queue.send('fq', 'after drop')");
is(sql("SELECT count(*) FROM queue.peek('fq')"), '1', 'nothing takes the queue\'s messages');

# --- restart ------------------------------------------------------------
$node->restart;
ok($node->poll_query_until('postgres', processes_of('c_drain'), '1'),
	'after a restart the consumer runs again');
sql(q(SELECT queue.send_batch('cq', ARRAY['r1', 'r2'])));
ok($node->poll_query_until('postgres', "SELECT count(*) = 2 FROM public.done WHERE body LIKE 'r_'"),
	'and handles new messages');

# --- kill -9 in the middle of a batch ------------------------------------------
sql(q(
SELECT queue.create('kq');
CREATE TABLE public.hold (on_ boolean);
INSERT INTO public.hold VALUES (true);
CREATE FUNCTION public.h_slow(msgs queue.message[]) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
	INSERT INTO public.done (message_id, body, consumer)
	SELECT m.message_id, m.body, 'kill' FROM pg_catalog.unnest(msgs) m;
	WHILE EXISTS (SELECT 1 FROM public.hold) LOOP
		PERFORM pg_catalog.pg_sleep(0.05);
	END LOOP;
END
$$;
SELECT queue.send_batch('kq', ARRAY(SELECT 'k' || i FROM generate_series(1, 10) i));
SELECT queue.create_consumer('c_kill', 'kq', 'public.h_slow(queue.message[])', batch_size => 4);
));
ok($node->poll_query_until('postgres',
		"SELECT count(*) = 1 FROM pg_stat_activity WHERE application_name = 'c_kill'"
		  . " AND wait_event = 'PgSleep'"),
	'the consumer is in its handler');
my $pid = consumer_pids('c_kill');
ok(kill('KILL', $pid), "kill -9 of consumer process $pid");
ok($node->poll_query_until('postgres', processes_of('c_kill'), '1'),
	'after the crash restart the consumer runs again');
sql('DELETE FROM public.hold');
ok($node->poll_query_until('postgres', "SELECT count(*) = 0 FROM queue.peek('kq')"),
	'every message handled');
is(sql("SELECT count(*), count(DISTINCT message_id) FROM public.done WHERE consumer = 'kill'"),
	'10|10', 'no message handled twice in committed effects');

# --- FIFO: 3 groups, concurrency 2 --------------------------------------------
sql(q(
SELECT queue.create('ff', fifo => true, content_based_deduplication => true);
CREATE TABLE public.fifo_done (grp text, body text, n bigserial);
CREATE FUNCTION public.h_fifo(msgs queue.message[]) RETURNS void LANGUAGE sql AS $$
	INSERT INTO public.fifo_done (grp, body)
	SELECT m.message_group_id, m.body FROM pg_catalog.unnest(msgs) WITH ORDINALITY AS m
	ORDER BY m.ordinality
$$;
SELECT queue.send_batch('ff', ARRAY(SELECT 'g' || (i % 3) || '-' || lpad(i::text, 2, '0') FROM generate_series(1, 30) i),
						message_group_ids => ARRAY(SELECT 'g' || (i % 3) FROM generate_series(1, 30) i));
SELECT queue.create_consumer('c_fifo', 'ff', 'public.h_fifo(queue.message[])', batch_size => 2, concurrency => 2);
));
ok($node->poll_query_until('postgres', "SELECT count(*) = 30 FROM public.fifo_done"),
	'FIFO: every message handled');
is(sql(q(SELECT count(*) FROM (
	SELECT grp, string_agg(body, ',' ORDER BY n) = string_agg(body, ',' ORDER BY body) AS ordered
	FROM public.fifo_done GROUP BY grp) g WHERE ordered)), '3',
	'FIFO: each group in its order');
is(sql(processes_of('c_fifo')), '2', 'FIFO: two processes (concurrency 2)');

# --- privileges: the handler runs as the consumer's role ------------------------
sql(q(
CREATE ROLE lowly;
GRANT USAGE ON SCHEMA queue TO lowly;
CREATE SCHEMA lowly AUTHORIZATION lowly;
SELECT queue.create('lq');
SELECT queue.grant('lq', 'lowly', '{receive}');
CREATE TABLE public.low_done (body text);
GRANT INSERT ON public.low_done TO lowly;
CREATE FUNCTION public.h_low(msgs queue.message[]) RETURNS void LANGUAGE sql AS $$
	INSERT INTO public.low_done SELECT m.body FROM pg_catalog.unnest(msgs) m
$$;
REVOKE EXECUTE ON FUNCTION public.h_low(queue.message[]) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION public.h_low(queue.message[]) TO lowly;
));
my $cq_id = QueueWorkerNode::queue_id($node, 'cq');
sql(qq(
SET ROLE lowly;
CREATE FUNCTION lowly.h_snoop(msgs queue.message[]) RETURNS void LANGUAGE plpgsql AS \$\$
BEGIN
	PERFORM count(*) FROM queue_data.q$cq_id;
END
\$\$;
SELECT queue.create_consumer('c_snoop', 'lq', 'lowly.h_snoop(queue.message[])');
RESET ROLE;
SELECT queue.send('lq', 'snoop');
));
ok($node->poll_query_until('postgres',
		"SELECT state = 'failing' AND last_error LIKE '42501: permission denied for schema queue_data%'"
		  . " FROM queue.consumers WHERE consumer_name = 'c_snoop'"),
	'a handler of an unprivileged role cannot read another queue\'s table (42501 recorded)');
is(sql("SELECT role FROM queue.consumers WHERE consumer_name = 'c_snoop'"), 'lowly', 'it runs as its role');
sql("SELECT queue.drop_consumer('c_snoop'); SELECT queue.purge('lq')");

# a handler that tries to become another role is refused
sql(q(
SET ROLE lowly;
CREATE FUNCTION lowly.h_climb(msgs queue.message[]) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
	EXECUTE 'SET ROLE postgres';
END
$$;
SELECT queue.create_consumer('c_climb', 'lq', 'lowly.h_climb(queue.message[])');
RESET ROLE;
SELECT queue.send('lq', 'climb');
));
ok($node->poll_query_until('postgres',
		"SELECT state = 'failing' AND last_error LIKE '42501: %' FROM queue.consumers WHERE consumer_name = 'c_climb'"),
	'a handler that runs SET ROLE to a superuser fails with 42501');
sql("SELECT queue.drop_consumer('c_climb'); SELECT queue.purge('lq')");

# a handler that outlives the visibility timeout is cancelled, its batch retried
sql(q(
SELECT queue.create('tq', visibility_timeout => '1 s');
CREATE FUNCTION public.h_too_slow(msgs queue.message[]) RETURNS void LANGUAGE sql AS $$
	SELECT pg_catalog.pg_sleep(3)
$$;
SELECT queue.create_consumer('c_slow', 'tq', 'public.h_too_slow(queue.message[])');
SELECT queue.send('tq', 'slow');
));
ok($node->poll_query_until('postgres',
		"SELECT state = 'failing' AND last_error LIKE '57014: %statement timeout%'"
		  . " FROM queue.consumers WHERE consumer_name = 'c_slow'"),
	'a handler longer than the visibility timeout is cancelled by its statement_timeout (57014)');
ok($node->poll_query_until('postgres', "SELECT receive_count >= 2 FROM queue.peek('tq')"),
	'and its batch is retried, each try counted');
sql("SELECT queue.drop_consumer('c_slow'); SELECT queue.drop('tq')");

sql(q(SET ROLE lowly; SELECT queue.create_consumer('c_low', 'lq', 'public.h_low(queue.message[])')));
sql("SELECT queue.send('lq', 'l1')");
ok($node->poll_query_until('postgres', "SELECT count(*) = 1 FROM public.low_done"),
	'a consumer of an unprivileged role with EXECUTE and receive works');
sql('REVOKE EXECUTE ON FUNCTION public.h_low(queue.message[]) FROM lowly');
sql("SELECT queue.send('lq', 'l2')");
ok($node->poll_query_until('postgres',
		"SELECT state = 'failing' AND last_error LIKE '42501: permission denied for function public.h_low%'"
		  . " FROM queue.consumers WHERE consumer_name = 'c_low'"),
	'a revoke of EXECUTE: failing with 42501');
is(sql("SELECT count(*) FROM queue.peek('lq')"), '1', 'the message waits');
sql('GRANT EXECUTE ON FUNCTION public.h_low(queue.message[]) TO lowly');
ok($node->poll_query_until('postgres',
		"SELECT state = 'running' AND processed = 2 FROM queue.consumers WHERE consumer_name = 'c_low'"),
	'granted again: running');
sql(q(SELECT queue.revoke('lq', 'lowly', '{receive}')));
sql("SELECT queue.send('lq', 'l3')");
ok($node->poll_query_until('postgres',
		"SELECT state = 'failing' AND last_error LIKE '42501: permission denied for queue \"lq\"%'"
		  . " FROM queue.consumers WHERE consumer_name = 'c_low'"),
	'a revoke of receive: failing with 42501');

# --- handlers that settle messages themselves (docs/consumers.md) -----------------
sql(q(
SELECT queue.create('sq');
CREATE FUNCTION public.h_self_delete(msgs queue.message[]) RETURNS void LANGUAGE sql AS $$
	INSERT INTO public.done (message_id, body, consumer)
	SELECT m.message_id, m.body, 'self' FROM pg_catalog.unnest(msgs) m WHERE queue.delete('sq', m.receipt)
$$;
CREATE PROCEDURE public.h_commit(msgs queue.message[]) LANGUAGE plpgsql AS $$
BEGIN
	INSERT INTO public.done (message_id, body, consumer)
	SELECT m.message_id, m.body, 'commit' FROM pg_catalog.unnest(msgs) m;
	COMMIT;
END
$$;
SELECT queue.create_consumer('c_self', 'sq', 'public.h_self_delete(queue.message[])', batch_size => 3);
SELECT queue.send_batch('sq', ARRAY['s1', 's2', 's3', 's4', 's5']);
));
ok($node->poll_query_until('postgres',
		"SELECT processed = 5 FROM queue.consumers WHERE consumer_name = 'c_self'"),
	'a handler that deletes its messages itself: processed');
is(sql("SELECT count(*), count(DISTINCT message_id) FROM public.done WHERE consumer = 'self'"), '5|5',
	'each handled once');
is(sql("SELECT count(*) FROM queue.peek('sq')"), '0', 'and deleted');
# a dropped consumer's process finishes the batch under way (a receive
# waiting for messages, up to 5 s): wait until it left
sql("SELECT queue.drop_consumer('c_self')");
ok($node->poll_query_until('postgres', processes_of('c_self'), '0'), 'c_self left');
sql(q(
SELECT queue.create_consumer('c_commit', 'sq', 'public.h_commit(queue.message[])');
SELECT queue.send('sq', 'c1');
));
ok($node->poll_query_until('postgres',
		"SELECT state = 'failing' AND last_error LIKE '2D000: %' FROM queue.consumers WHERE consumer_name = 'c_commit'"),
	'a procedure handler that commits: failing with 2D000');
is(sql("SELECT count(*) FROM public.done WHERE consumer = 'commit'"), '0', 'and its writes rolled back');
is(sql("SELECT count(*) FROM queue.peek('sq')"), '1', 'the message stays');
sql("SELECT queue.drop_consumer('c_commit')");

# --- a dropped queue takes its consumers along; the extension takes all ---------
sql("SELECT queue.drop('kq')");
ok($node->poll_query_until('postgres', processes_of('c_kill'), '0'),
	'dropping the queue stops its consumer');
is(sql("SELECT count(*) FROM queue.consumers WHERE consumer_name = 'c_kill'"), '0', 'and drops it');
sql('DROP EXTENSION queue CASCADE');
ok($node->poll_query_until('postgres',
		"SELECT count(*) = 0 FROM pg_stat_activity WHERE backend_type = 'queue consumer'"),
	'DROP EXTENSION stops every consumer');

$node->stop;
done_testing();
