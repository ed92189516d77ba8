# A consumer cannot keep the cluster's consumer processes for ever (issue
# 34, DESIGN.md "Consumers": every consumer with work gets one process
# before any gets a second, across roles and databases).  A low-privilege
# role's consumer of concurrency 8, whose PL/pgSQL handler swallows
# query_canceled (its statement_timeout, a cancel) and loops, holds all 8
# processes.  The queue worker's tender ends such processes with SIGTERM,
# which no handler can catch: a batch that outlives its visibility timeout
# by a margin, a process over its fair share, a paused or dropped
# consumer's.  Another role's consumer in another database gets a process
# and handles its message; pause and drop empty the hog's processes within
# seconds; queue.consumers says why; the messages of the terminated
# batches are not lost and their receives count.
use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time usleep);
use QueueWorkerNode;

my $node = QueueWorkerNode::start('hog', q(
max_worker_processes = 24
queue.max_consumer_processes = 8
));

sub sql { return $node->safe_psql($_[1] // 'postgres', $_[0]); }

# Seconds until $query (in $db) says true, or undef after $limit seconds.
sub seconds_until
{
	my ($db, $query, $limit) = @_;
	my $t0 = time();
	while (time() - $t0 < $limit)
	{
		return time() - $t0 if sql($query, $db) eq 't';
		usleep(100_000);
	}
	return undef;
}

sub hog_processes
{
	return "SELECT (SELECT count(*) FROM pg_stat_activity"
	  . " WHERE backend_type = 'queue consumer' AND application_name = 'hog')";
}

# The hog's loop ends at the latest with the test's time budget, so a
# server that never ends it (before this fix) still lets the test finish.
my $until = sql("SELECT pg_catalog.now() + interval '200 s'");

sql(qq(
CREATE ROLE hogger;
GRANT USAGE ON SCHEMA queue TO hogger;
GRANT CREATE ON DATABASE postgres TO hogger;
CREATE FUNCTION public.hog(msgs queue.message[]) RETURNS void LANGUAGE plpgsql AS \$\$
BEGIN
	WHILE pg_catalog.clock_timestamp() < '$until'::timestamptz LOOP
		BEGIN
			PERFORM pg_catalog.pg_sleep(0.1);
		EXCEPTION WHEN query_canceled THEN
			NULL;	-- the statement timeout, a cancel: swallowed, loop again
		END;
	END LOOP;
END
\$\$;
GRANT EXECUTE ON FUNCTION public.hog(queue.message[]) TO PUBLIC;
SET ROLE hogger;
SELECT queue.create('hq', visibility_timeout => '30 s');
SELECT count(*) FROM queue.send_batch('hq', ARRAY(SELECT 'h' || i FROM generate_series(1, 8) i));
SELECT queue.create_consumer('hog', 'hq', 'public.hog(queue.message[])', concurrency => 8);
));
ok(defined seconds_until('postgres', hog_processes() . " = 8", 30),
	'the hog takes all 8 consumer processes');
sleep(1);						# in their handlers

# --- another role's consumer in another database gets a process -----------
# The hog's batches have a 30 s lease: the one over its fair share is ended
# before that.
sql('CREATE DATABASE d2');
my $t0 = time();
sql(q(
CREATE EXTENSION queue;
CREATE ROLE bystander;
GRANT USAGE ON SCHEMA queue TO bystander;
GRANT CREATE ON DATABASE d2 TO bystander;
CREATE TABLE public.done (body text);
GRANT INSERT ON public.done TO PUBLIC;
CREATE FUNCTION public.by(msgs queue.message[]) RETURNS void LANGUAGE sql AS $$
	INSERT INTO public.done SELECT m.body FROM pg_catalog.unnest(msgs) m
$$;
GRANT EXECUTE ON FUNCTION public.by(queue.message[]) TO PUBLIC;
SET ROLE bystander;
SELECT queue.create('bq');
SELECT queue.send('bq', 'hello'::text);
SELECT queue.create_consumer('by', 'bq', 'public.by(queue.message[])');
), 'd2');
my $secs = seconds_until('d2',
	"SELECT processed >= 1 FROM queue.consumers WHERE consumer_name = 'by'", 60);
diag(sprintf('bystander handled its message %s s after its consumer was created',
		defined $secs ? sprintf('%.1f', time() - $t0) : 'not within 60'));
ok(defined $secs, "another role's consumer in another database handles its message within 60 s");
is(sql('SELECT body FROM public.done', 'd2'), 'hello', 'its handler committed it');
ok(defined seconds_until('postgres',
		"SELECT last_error = 'over its fair share: process terminated' AND last_error_at IS NOT NULL"
		  . " AND failed = 1 FROM queue.consumers WHERE consumer_name = 'hog'", 5),
	'queue.consumers says a process of the hog was over its fair share and terminated')
  or diag(sql("SELECT * FROM queue.consumers"));
is(sql(hog_processes()), '7', 'the hog keeps the 7 processes of its share');

# --- pause: its processes are gone within seconds ---------------------------
$t0 = time();
sql("SET ROLE hogger; SELECT queue.pause_consumer('hog')");
$secs = seconds_until('postgres', hog_processes() . " = 0", 30);
diag(sprintf('paused hog: no process after %s s',
		defined $secs ? sprintf('%.1f', time() - $t0) : 'more than 30'));
ok(defined $secs, 'pause_consumer ends all the processes of a handler that swallows cancels');
ok(defined seconds_until('postgres',
		"SELECT state = 'paused' AND last_error = 'paused: process terminated'"
		  . " FROM queue.consumers WHERE consumer_name = 'hog'", 5),
	'queue.consumers says the paused consumer\'s processes were terminated')
  or diag(sql("SELECT * FROM queue.consumers"));

# The terminated batches rolled back: every message is still there, and
# each of their receives counted (failed.c: a rolled-back receive counts,
# a process that exits with FATAL included).
ok(defined seconds_until('postgres',
		"SELECT count(*) = 8 AND min(receive_count) >= 1 FROM queue.peek('hq', max_messages => 10)", 20),
	'the 8 messages are all there, each counted as received')
  or diag(sql("SELECT message_id, receive_count FROM queue.peek('hq', max_messages => 10)"));
diag('receive counts after pause: '
	  . sql("SELECT string_agg(receive_count::text, ',' ORDER BY message_id) FROM queue.peek('hq', max_messages => 10)"));

# --- a batch that outlives its lease ----------------------------------------
sql(q(
SET ROLE hogger;
SELECT queue.create('hq2', visibility_timeout => '2 s');
SELECT count(*) FROM queue.send('hq2', 'x'::text);
SELECT queue.create_consumer('hog2', 'hq2', 'public.hog(queue.message[])');
));
ok(defined seconds_until('postgres',
		"SELECT last_error ~ '^batch ran past its visibility timeout of 2 s by [0-9.]+ s: process terminated\$'"
		  . " AND state = 'failing' FROM queue.consumers WHERE consumer_name = 'hog2'", 20),
	'a batch that outlives its visibility timeout by a margin is terminated, and queue.consumers says so')
  or diag(sql("SELECT * FROM queue.consumers"));
diag('hog2: ' . sql("SELECT last_error FROM queue.consumers WHERE consumer_name = 'hog2'"));
sql("SET ROLE hogger; SELECT queue.drop_consumer('hog2')");
ok(defined seconds_until('postgres',
		"SELECT receive_count >= 1 FROM queue.peek('hq2')", 20),
	'its message is still there, counted as received');

# --- a handler that lets the cancel through: the process leaves politely ----
sql(q(
CREATE FUNCTION public.sleepy(msgs queue.message[]) RETURNS void LANGUAGE sql AS $$
	SELECT pg_catalog.pg_sleep(60)
$$;
GRANT EXECUTE ON FUNCTION public.sleepy(queue.message[]) TO PUBLIC;
SET ROLE hogger;
SELECT queue.create('pq');
SELECT count(*) FROM queue.send('pq', 'p'::text);
SELECT queue.create_consumer('polite', 'pq', 'public.sleepy(queue.message[])');
));
ok(defined seconds_until('postgres',
		"SELECT count(*) = 1 FROM pg_stat_activity WHERE application_name = 'polite' AND wait_event = 'PgSleep'", 20),
	'a consumer whose handler sleeps is in its handler');
sql("SET ROLE hogger; SELECT queue.pause_consumer('polite')");
ok(defined seconds_until('postgres',
		"SELECT count(*) = 0 FROM pg_stat_activity WHERE application_name = 'polite'", 20),
	'paused, it leaves');
like(slurp_file($node->logfile),
	qr/queue consumer "polite": batch of 1 messages cancelled: the consumer was dropped or paused/,
	'its batch was cancelled, not its process terminated');
is(sql("SELECT state, failed, last_error IS NULL FROM queue.consumers WHERE consumer_name = 'polite'"),
	'paused|0|t', 'which is no failure of the consumer');
ok(defined seconds_until('postgres', "SELECT receive_count = 1 FROM queue.peek('pq')", 20),
	'its message is there, its receive counted');
sql("SET ROLE hogger; SELECT queue.drop_consumer('polite')");

# --- drop: its processes are gone within seconds ----------------------------
sql("SET ROLE hogger; SELECT queue.resume_consumer('hog')");
ok(defined seconds_until('postgres', hog_processes() . " = 7", 20), 'resumed, the hog runs 7 processes again');
sleep(1);						# in their handlers
$t0 = time();
sql("SET ROLE hogger; SELECT queue.drop_consumer('hog')");
$secs = seconds_until('postgres', hog_processes() . " = 0", 30);
diag(sprintf('dropped hog: no process after %s s',
		defined $secs ? sprintf('%.1f', time() - $t0) : 'more than 30'));
ok(defined $secs, 'drop_consumer ends all the processes of a handler that swallows cancels');
ok(defined seconds_until('postgres',
		"SELECT count(*) = 8 AND sum(receive_count) >= 15 FROM queue.peek('hq', max_messages => 10)", 20),
	'and the messages are still there, the 7 batches ended by the drop counted again')
  or diag(sql("SELECT message_id, receive_count FROM queue.peek('hq', max_messages => 10)"));

# The bystander still works.
sql("SELECT queue.send('bq', 'again'::text)", 'd2');
ok(defined seconds_until('d2', "SELECT count(*) = 2 FROM public.done", 20), 'the bystander handles the next message');

like(slurp_file($node->logfile), qr/terminating background worker "queue consumer" due to administrator command/,
	'the log shows the terminations');
$node->stop;
done_testing();
