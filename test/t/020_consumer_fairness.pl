# Consumer processes are shared fairly (issue 23, DESIGN.md "Consumers"):
# every consumer gets a process before any consumer gets its second,
# across roles and databases; a consumer that cannot get one shows state
# 'waiting' with the reason in queue.consumers and says so once in the
# log, whether the cap is queue.max_consumer_processes or the server's
# background worker slots.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

sub consumer_node
{
	my ($name, $conf) = @_;
	my $node = PostgreSQL::Test::Cluster->new($name);
	$node->init;
	$node->append_conf('postgresql.conf', qq(
shared_preload_libraries = 'queue'
queue.sweep_interval = '100ms'
$conf
));
	$node->start;
	return $node;
}

# A database with the extension, a role, a queue of n messages and a
# consumer of the role with a handler that takes 100 ms a message.
sub tenant
{
	my ($node, $db, $role, $consumer, $n, $concurrency) = @_;
	$node->safe_psql('postgres', "CREATE DATABASE $db")
	  unless $node->safe_psql('postgres', "SELECT count(*) FROM pg_database WHERE datname = '$db'");
	$node->safe_psql($db, qq(
CREATE EXTENSION IF NOT EXISTS queue;
CREATE ROLE $role;
GRANT USAGE ON SCHEMA queue TO $role;
GRANT CREATE ON DATABASE $db TO $role;
CREATE TABLE IF NOT EXISTS public.done (consumer text, pid int);
GRANT INSERT ON public.done TO PUBLIC;
CREATE OR REPLACE FUNCTION public.slow(msgs queue.message[]) RETURNS void LANGUAGE sql AS \$\$
	SELECT pg_sleep(0.1 * cardinality(msgs));
	INSERT INTO public.done SELECT current_user, pg_backend_pid();
\$\$;
GRANT EXECUTE ON FUNCTION public.slow(queue.message[]) TO PUBLIC;
SET ROLE $role;
SELECT queue.create('q_$consumer');
SELECT count(*) FROM queue.send_batch('q_$consumer', ARRAY(SELECT 'm' || i FROM generate_series(1, $n) i));
SELECT queue.create_consumer('$consumer', 'q_$consumer', 'public.slow(queue.message[])',
	concurrency => $concurrency);
));
}

sub processes
{
	my ($node, $consumer) = @_;
	return $node->safe_psql('postgres',
		"SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'queue consumer' AND application_name = '$consumer'");
}

# --- fair shares: 4 processes, a greedy consumer and two newcomers ----------
my $node = consumer_node('fair', q(
max_worker_processes = 20
queue.max_consumer_processes = 4
));
tenant($node, 'd1', 'greedy', 'c_greedy', 1000, 4);
ok($node->poll_query_until('postgres',
		"SELECT count(*) = 4 FROM pg_stat_activity WHERE backend_type = 'queue consumer' AND application_name = 'c_greedy'"),
	'a consumer of concurrency 4 takes all 4 processes while it is alone');

tenant($node, 'd2', 'other', 'c_other', 1000, 2);
ok($node->poll_query_until('d2',
		"SELECT state = 'running' AND processed > 0 FROM queue.consumers WHERE consumer_name = 'c_other'"),
	'a newcomer of another role and database gets a process and works');
ok($node->poll_query_until('postgres',
		"SELECT count(*) FILTER (WHERE application_name = 'c_greedy') = 2"
		  . " AND count(*) FILTER (WHERE application_name = 'c_other') = 2"
		  . " FROM pg_stat_activity WHERE backend_type = 'queue consumer'"),
	'the greedy consumer gives back processes down to an even share (2 and 2)');

tenant($node, 'd1', 'third', 'c_third', 1000, 1);
ok($node->poll_query_until('d1',
		"SELECT state = 'running' AND processed > 0 FROM queue.consumers WHERE consumer_name = 'c_third'"),
	'a third consumer gets its one process');
ok($node->poll_query_until('postgres',
		"SELECT count(*) FILTER (WHERE application_name = 'c_third') = 1"
		  . " AND count(*) FILTER (WHERE application_name IN ('c_greedy', 'c_other')) = 3"
		  . " AND count(*) <= 4"
		  . " FROM pg_stat_activity WHERE backend_type = 'queue consumer'"),
	'every consumer holds a process, and the four are all taken');

# Five consumers of concurrency 1 and four processes: one waits, says why.
for my $i (1 .. 4)
{
	tenant($node, 'd2', "extra$i", "c_extra$i", 1000, 1);
}
ok($node->poll_query_until('postgres',
		"SELECT count(DISTINCT application_name) = 4 FROM pg_stat_activity WHERE backend_type = 'queue consumer'"),
	'with seven consumers and four processes, four consumers hold one each');
my $waiting = $node->safe_psql('d1',
	"SELECT count(*) FROM queue.consumers WHERE state = 'waiting'")
  + $node->safe_psql('d2', "SELECT count(*) FROM queue.consumers WHERE state = 'waiting'");
is($waiting, 3, 'the three others show state waiting');
like($node->safe_psql('d2',
		"SELECT string_agg(DISTINCT last_error, ' | ') FROM queue.consumers WHERE state = 'waiting'"),
	qr/^all 4 consumer processes \(queue.max_consumer_processes\) serve other consumers$/,
	'with the reason');
$node->stop;

# --- no background worker slot ---------------------------------------------
# 6 slots: the launcher, the logical replication launcher, the workers of
# postgres, s1 and s2: one is left, for the first consumer only.
$node = consumer_node('slots', q(
max_worker_processes = 6
queue.max_consumer_processes = 8
));
$node->safe_psql('postgres', 'CREATE EXTENSION queue');
tenant($node, 's1', 'r1', 'c_first', 100, 1);
tenant($node, 's2', 'r2', 'c_second', 100, 1);
ok($node->poll_query_until('s1',
		"SELECT processed > 0 FROM queue.consumers WHERE consumer_name = 'c_first'"),
	'the first consumer runs');
ok($node->poll_query_until('s2',
		"SELECT state = 'waiting' AND last_error LIKE 'no background worker slot free: raise max_worker_processes (now 6)'"
		  . " FROM queue.consumers WHERE consumer_name = 'c_second'"),
	'the second shows state waiting: no background worker slot')
  or diag($node->safe_psql('s2', 'SELECT * FROM queue.consumers'));
sleep(2);						# several worker passes: the log line stays one
my $log = slurp_file($node->logfile);
my @lines = ($log =~ /(queue consumer \d+ in database \d+ has no process: no background worker slot[^\n]*)/g);
is(scalar(@lines), 1, 'and the log says so once');
is($node->safe_psql('s2', "SELECT processed FROM queue.consumers WHERE consumer_name = 'c_second'"), '0',
	'it has processed nothing');
$node->safe_psql('s1', "SELECT queue.drop_consumer('c_first')");
ok($node->poll_query_until('s2',
		"SELECT state = 'running' AND processed > 0 AND last_error IS NULL FROM queue.consumers WHERE consumer_name = 'c_second'"),
	'once a slot is free it runs, and no longer says it waits');
$node->stop;
done_testing();
