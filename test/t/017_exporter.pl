# examples/prometheus/queue_exporter.yaml with postgres_exporter (Debian's
# prometheus-postgres-exporter): a node with queues holding messages in
# every state, dead letters, long polls (one sleeping now) and consumers in
# each state; the exporter runs against it on a free port with the queries
# file, and a scrape of /metrics with curl gives the exact values that
# queue.stats and queue.consumers hold.  A missing exporter or curl fails.
use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;

use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use QueueWorkerNode;

my $exporter = '/usr/bin/prometheus-postgres-exporter';
my $queries = "$ENV{TESTDIR}/examples/prometheus/queue_exporter.yaml";
ok(-x $exporter, "$exporter is installed (test/setup.sh installs it)")
  or BAIL_OUT('no postgres_exporter');
ok(-r $queries, "$queries is readable") or BAIL_OUT('no queries file');
ok(system('curl --version >/dev/null 2>&1') == 0, 'curl is installed')
  or BAIL_OUT('no curl');

my $node = QueueWorkerNode::start('exporter');
sub sql { return $node->safe_psql('postgres', $_[0]); }

# --- Queues with messages in every state -----------------------------------
# jobs: a poison message dead-lettered by the worker, then 5 sends of which
# one is in flight and one deleted, and 2 delayed sends:
# visible 3, in_flight 1, delayed 2, sent 8, received 3, deleted 1,
# dead_lettered 1.
sql(q(
SELECT queue.create('jobs_dlq');
SELECT queue.create('jobs', dead_letter_queue => 'jobs_dlq', max_receive_count => 1);
SELECT count(*) FROM queue.send('jobs', 'poison');
SELECT count(*) FROM queue.receive('jobs', visibility_timeout => '0');
));
ok($node->poll_query_until('postgres',
		"SELECT dead_lettered = 1 FROM queue.stats WHERE queue_name = 'jobs'"),
	'the poison message is dead-lettered');
sql(q(
SELECT count(*) FROM queue.send_batch('jobs', '{a,b,c,d,e}'::text[]);
SELECT count(*) FROM queue.receive('jobs', visibility_timeout => '1 hour');
SELECT queue.delete('jobs', receipt) FROM queue.receive('jobs');
SELECT count(*) FROM queue.send('jobs', 'later', delay => '1 hour');
SELECT count(*) FROM queue.send('jobs', 'later2', delay => '1 hour');
));
is( sql(q(SELECT concat_ws(',', visible, in_flight, delayed, sent, received, deleted, dead_lettered)
		FROM queue.stats WHERE queue_name = 'jobs')),
	'3,1,2,8,3,1,1', 'queue.stats of jobs');

# tenants: a fair queue where tenant A holds 35 messages in flight and B 1:
# 2 groups, A noisy
sql(q(
SELECT queue.create('tenants');
SELECT count(*) FROM generate_series(1, 40) i, queue.send('tenants', 'a' || i, message_group_id => 'A');
SELECT count(*) FROM queue.send('tenants', 'b', message_group_id => 'B');
SELECT count(*) FROM queue.receive('tenants', 36, visibility_timeout => '1 hour');
));
is(sql(q(SELECT concat_ws(',', groups, noisy_groups, in_flight) FROM queue.stats WHERE queue_name = 'tenants')),
	'2,1,36', 'queue.stats of tenants');

# lp: one long poll that timed out (waits 1, wakeups 0), and one sleeping.
sql(q(
SELECT queue.create('lp');
SELECT count(*) FROM queue.receive('lp', wait => '0.1 s');
));
my $bg = $node->background_psql('postgres', on_error_stop => 0);
my $bgpid = $bg->query_safe('SELECT pg_backend_pid()');
$bg->query_until(qr/started\n/,
	"\\echo started\nSELECT body FROM queue.receive('lp', wait => '20 s');\n");
ok( $node->poll_query_until('postgres',
		"SELECT wait_event_type = 'Extension' AND state = 'active' FROM pg_stat_activity WHERE pid = $bgpid"),
	'a receive sleeps in a long poll');

# --- Consumers: running (2 processed), failing, paused ----------------------
sql(q(
CREATE TABLE public.done (body text);
CREATE FUNCTION public.h_ok(msgs queue.message[]) RETURNS void LANGUAGE sql AS $$
	INSERT INTO public.done SELECT m.body FROM pg_catalog.unnest(msgs) m
$$;
CREATE FUNCTION public.h_fail(msgs queue.message[]) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
	RAISE EXCEPTION 'always fails' USING ERRCODE = '22000';
END
$$;
SELECT queue.create('cq');
SELECT queue.create('fq');
SELECT queue.create('pq');
SELECT queue.create_consumer('c_ok', 'cq', 'public.h_ok(queue.message[])');
SELECT queue.create_consumer('c_fail', 'fq', 'public.h_fail(queue.message[])');
SELECT queue.create_consumer('c_paused', 'pq', 'public.h_ok(queue.message[])');
SELECT queue.pause_consumer('c_paused');
SELECT count(*) FROM queue.send('cq', 'one');
SELECT count(*) FROM queue.send('cq', 'two');
SELECT count(*) FROM queue.send('fq', 'bad');
));
ok( $node->poll_query_until('postgres',
		"SELECT string_agg(consumer_name || '=' || state || ':' || processed, ',' ORDER BY consumer_name)"
		  . " = 'c_fail=failing:0,c_ok=running:2,c_paused=paused:0' FROM queue.consumers"),
	'consumers running, failing and paused');

# --- The exporter -----------------------------------------------------------
my $port = PostgreSQL::Test::Cluster::get_free_port();
my $user = getpwuid($<);
$ENV{DATA_SOURCE_NAME} =
  sprintf('host=%s port=%d user=%s dbname=postgres sslmode=disable', $node->host, $node->port, $user);
# log_path: tmp_check/log up to 16, TESTLOGDIR (or log/) from 17.
my $exporter_log = "$PostgreSQL::Test::Utils::log_path/017_exporter_exporter.log";
my $h = IPC::Run::start(
	[
		$exporter, "--extend.query-path=$queries",
		"--web.listen-address=127.0.0.1:$port", '--disable-default-metrics',
		'--disable-settings-metrics'
	],
	'<', \undef, '>&', $exporter_log);

# Scrape /metrics (retrying while the exporter starts), as lines.
sub scrape
{
	for (1 .. $PostgreSQL::Test::Utils::timeout_default * 10)
	{
		my $out = `curl -s -f http://127.0.0.1:$port/metrics`;
		return [ split /\n/, $out ] if $? == 0 && $out =~ /^pg_up 1$/m;
		select(undef, undef, undef, 0.1);
	}
	diag(slurp_file($exporter_log));
	return [];
}

# The value of the sample of $name whose labels include %want, or undef.
sub metric
{
	my ($lines, $name, %want) = @_;
	for my $line (@$lines)
	{
		next unless $line =~ /^\Q$name\E\{(.*)\} (\S+)$/;
		my ($labels, $value) = ($1, $2);
		my %have = $labels =~ /(\w+)="([^"]*)"/g;
		next if grep { ($have{$_} // "\0") ne $want{$_} } keys %want;
		return $value;
	}
	return undef;
}

my $m = scrape();
ok(@$m > 0, 'the exporter answers with pg_up 1');
is(metric($m, 'pg_exporter_user_queries_load_error'), '0', 'the queries file loads');

my %jobs = (
	visible => 3,
	in_flight => 1,
	delayed => 2,
	sent_total => 8,
	received_total => 3,
	deleted_total => 1,
	dead_lettered_total => 1,
	deduplicated_total => 0,
	expired_total => 0);
for my $k (sort keys %jobs)
{
	is(metric($m, "queue_$k", queue => 'jobs', datname => 'postgres'), $jobs{$k}, "jobs: queue_$k");
}
is(metric($m, 'queue_visible', queue => 'jobs_dlq'), '1', 'jobs_dlq: the dead letter is visible');
is(metric($m, 'queue_groups', queue => 'tenants'), '2', 'tenants: queue_groups');
is(metric($m, 'queue_noisy_groups', queue => 'tenants'), '1', 'tenants: queue_noisy_groups');
is(metric($m, 'queue_groups', queue => 'jobs'), '1', 'jobs: its messages without group ids are one tenant');
is(metric($m, 'queue_noisy_groups', queue => 'jobs'), '0', 'jobs: none noisy');
cmp_ok(metric($m, 'queue_oldest_message_age_seconds', queue => 'jobs'), '>', 0,
	'jobs: oldest message age');
is(metric($m, 'queue_oldest_message_age_seconds', queue => 'lp'), '0', 'lp: empty, age 0');
is(metric($m, 'queue_long_poll_waits_total', queue => 'lp'), '1', 'lp: one long poll slept');
is(metric($m, 'queue_long_poll_wakeups_total', queue => 'lp'), '0', 'lp: none woken yet');
is(metric($m, 'queue_long_poll_waiting', datname => 'postgres'), '1', 'one session sleeps in a long poll');

my %states = (
	c_ok => 'running',
	c_fail => 'failing',
	c_paused => 'paused');
for my $c (sort keys %states)
{
	for my $s (qw(running paused failing))
	{
		is(metric($m, 'queue_consumer_state_active', consumer => $c, state => $s),
			$s eq $states{$c} ? '1' : '0', "$c in state $s");
	}
}
is(metric($m, 'queue_consumer_processed_total', consumer => 'c_ok', queue => 'cq'),
	'2', 'c_ok processed 2');
is(scalar(grep { /^queue_consumer_processed_total\{.*consumer="c_ok"/ } @$m), 1,
	'one processed_total series per consumer');
cmp_ok(metric($m, 'queue_consumer_failed_total', consumer => 'c_fail'), '>=', 1,
	'c_fail failed');
cmp_ok(metric($m, 'queue_consumer_last_success_timestamp_seconds', consumer => 'c_ok'),
	'>', 1.7e9, 'c_ok last success');
is(metric($m, 'queue_consumer_last_success_timestamp_seconds', consumer => 'c_paused'),
	'NaN', 'c_paused never succeeded: NaN');

# A send wakes the sleeping receive: the counters move, nobody waits.
sql("SELECT count(*) FROM queue.send('lp', 'wake')");
like($bg->query_until(qr/wake/, ''), qr/wake/, 'the long poll got the message');
ok($node->poll_query_until('postgres',
		"SELECT waits = 2 AND wakeups = 1 FROM queue.stats WHERE queue_name = 'lp'"),
	'lp counted the wake-up');
$m = scrape();
is(metric($m, 'queue_long_poll_waits_total', queue => 'lp'), '2', 'lp: two long polls slept');
is(metric($m, 'queue_long_poll_wakeups_total', queue => 'lp'), '1', 'lp: one was woken');
is(metric($m, 'queue_long_poll_waiting', datname => 'postgres'), '0', 'nobody sleeps now');
is(metric($m, 'queue_received_total', queue => 'lp'), '1', 'lp: received 1');

$bg->quit;
$h->kill_kill;
$node->stop;
done_testing();
