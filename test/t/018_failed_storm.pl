# Rolled-back receives under concurrency (failed.c's invariant): six
# clients receive in transactions that all roll back, 1,000 times each.
#  - max_receive_count 3: no message is delivered more than 3 times in all,
#    and none is lost; the same on a FIFO queue;
#  - the same storm while one session receives and commits leases of
#    120 s: none of its leased messages leaves the queue during its lease
#    (its receipts still delete them);
#  - retry_delay 1 minute: no message comes back within the delay;
#  - a consumer (receive, handler, delete in one transaction) whose handler
#    fails on 200 messages, batch 5, concurrency 4: the handler sees no
#    message more than 3 times;
#  - queue.max_failed_receives is a cap: a rollback of 1,000 received
#    messages with a cap of 100 leaves at most 100 counts waiting and takes
#    no shared memory beyond the extension's own (the lock table keeps its
#    spare room).
use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;

use IPC::Run;
use Time::HiRes qw(usleep);
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use QueueWorkerNode;

my $node = QueueWorkerNode::start('storm',
	"max_connections = 40\nmax_worker_processes = 16\nqueue.max_consumer_processes = 4\n");

sub sql
{
	my ($query) = @_;
	return $node->safe_psql('postgres', $query);
}

my $dir = PostgreSQL::Test::Utils::tempdir;

# Every delivery is logged by the client after its rollback, in a
# transaction of its own.
sql("CREATE UNLOGGED TABLE delivered (q text, message_id bigint, at timestamptz DEFAULT clock_timestamp())");

sub storm_script
{
	my ($queue, $batch) = @_;
	my $file = "$dir/storm_$queue.sql";
	open my $fh, '>', $file or die "could not write $file: $!";
	print $fh qq{
BEGIN;
SELECT coalesce(array_agg(message_id)::text, '{}') AS ids FROM queue.receive('$queue', $batch) \\gset
ROLLBACK;
INSERT INTO delivered (q, message_id) SELECT '$queue', unnest(:ids::bigint[]);
};
	close $fh;
	return $file;
}

# Six clients, 1,000 rolled-back receives each.
sub start_storm
{
	my ($queue, $out, $batch) = @_;
	return IPC::Run::start(
		[
			'pgbench', '-n', '-M', 'prepared', '-c', 6, '-j', 2, '-t', 1000,
			'-f', storm_script($queue, $batch // 2), $node->connstr('postgres')
		],
		'>', $out, '2>', $out);
}

sub finish_storm
{
	my ($h, $out, $what) = @_;
	$h->finish;
	is($?, 0, "$what: the storm ran without error") or diag $$out;
}

sub settled
{
	my ($queue) = @_;
	return $node->poll_query_until('postgres',
		"SELECT queue._failed_pending(queue_id) = 0 FROM queue.queues WHERE queue_name = '$queue'");
}

sub fill
{
	my ($queue, $n) = @_;
	sql("SELECT count(*) FROM queue.send_batch('$queue', array_fill('m'::text, ARRAY[$n]))");
}

# --- max_receive_count 3 -----------------------------------------------------

sql("SELECT queue.create('g_dlq')");
sql("SELECT queue.create('gq', dead_letter_queue => 'g_dlq', max_receive_count => 3)");
fill('gq', 300);
my $out = '';
my $h = start_storm('gq', \$out);
finish_storm($h, \$out, 'max_receive_count 3');
ok(settled('gq'), 'every rolled-back receive is written');
is( sql(
		"SELECT coalesce(max(c), 0) || ' ' || count(*) FILTER (WHERE c > 3) FROM (SELECT count(*) AS c FROM delivered WHERE q = 'gq' GROUP BY message_id) d"
	),
	'3 0',
	'no message is delivered more than max_receive_count (3) times');
is(sql("SELECT (SELECT count(*) FROM queue.peek('gq', 1000)) + (SELECT count(*) FROM queue.peek('g_dlq', 1000))"),
	'300', 'no message is lost');
ok( $node->poll_query_until('postgres',
		"SELECT count(*) = 300 FROM queue.peek('g_dlq', 1000)"),
	'all of them reach the dead-letter queue');

# --- The same on a FIFO queue: 300 messages in 30 groups, batches of 3 -------

sql("SELECT queue.create('gf_dlq.fifo', fifo => true)");
sql("SELECT queue.create('gf.fifo', fifo => true, dead_letter_queue => 'gf_dlq.fifo', max_receive_count => 3)");
sql(
	"SELECT count(*) FROM queue.send_batch('gf.fifo', ARRAY(SELECT 'b' || i FROM generate_series(1, 300) i), message_group_ids => ARRAY(SELECT 'g' || i % 30 FROM generate_series(1, 300) i), deduplication_ids => ARRAY(SELECT 'd' || i FROM generate_series(1, 300) i))"
);
$out = '';
$h = start_storm('gf.fifo', \$out, 3);
finish_storm($h, \$out, 'FIFO');
is( sql(
		"SELECT count(*) FILTER (WHERE c > 3) FROM (SELECT count(*) AS c FROM delivered WHERE q = 'gf.fifo' GROUP BY message_id) d"
	),
	'0',
	'FIFO: no message is delivered more than max_receive_count (3) times');
ok( $node->poll_query_until('postgres',
		"SELECT count(*) = 300 FROM queue.peek('gf_dlq.fifo', 1000)"),
	'FIFO: all of them reach the dead-letter queue');

# --- The storm meets a committed receiver's leases of 120 s -------------------

sql("SELECT queue.create('l_dlq')");
sql("SELECT queue.create('lq', dead_letter_queue => 'l_dlq', max_receive_count => 3)");
fill('lq', 300);
sql("CREATE TABLE leased (message_id bigint, receipt text)");
$out = '';
$h = start_storm('lq', \$out);
# While the storm runs, leases of 120 s taken and committed, 5 at a time.
for my $i (1 .. 20)
{
	sql("INSERT INTO leased SELECT message_id, receipt FROM queue.receive('lq', 5, visibility_timeout => '120 s')");
	usleep(100_000);
}
finish_storm($h, \$out, 'with leases');
ok(settled('lq'), 'every rolled-back receive is written');
my $nleased = sql("SELECT count(*) FROM leased");
ok($nleased > 0, "the committed receiver holds leases ($nleased)");
is(sql("SELECT count(*) FROM queue.peek('l_dlq', 1000) p JOIN leased USING (message_id)"),
	'0', 'none of the leased messages went to the dead-letter queue during the lease');
is( sql(
		"SELECT count(*) FILTER (WHERE d) || ' of ' || count(*) FROM (SELECT queue.delete('lq', receipt) AS d FROM leased) x"
	),
	"$nleased of $nleased",
	'the leases still hold: their receipts delete every leased message');
is( sql(
		"SELECT count(*) FILTER (WHERE c > 3) FROM (SELECT count(*) AS c FROM delivered WHERE q = 'lq' GROUP BY message_id) d"
	),
	'0',
	'no message is delivered more than max_receive_count times');

# --- retry_delay 1 minute ---------------------------------------------------

sql("SELECT queue.create('rq', retry_delay => '1 minute')");
fill('rq', 300);
$out = '';
$h = start_storm('rq', \$out);
finish_storm($h, \$out, 'retry_delay');
is( sql(
		"SELECT count(*) FROM (SELECT message_id FROM delivered WHERE q = 'rq' GROUP BY message_id HAVING max(at) - min(at) < interval '1 minute' AND count(*) > 1) d"
	),
	'0',
	'no message comes back within its retry delay');
is(sql("SELECT count(DISTINCT message_id) FROM delivered WHERE q = 'rq'"),
	'300', 'each message was delivered once');

# --- Consumers: 200 poison messages, batch 5, concurrency 4 ------------------

# Each message has a sequence of its own, which counts its deliveries
# whatever the batch's transaction does.  A consumer whose handler fails on
# a batch calls it again with each message alone (issue 24), so every
# delivery ends in exactly one call with that message alone: those are
# the calls counted.
sql("SELECT queue.create('p_dlq')");
sql("SELECT queue.create('pq', dead_letter_queue => 'p_dlq', max_receive_count => 3, visibility_timeout => '1 s')");
sql("DO \$\$ BEGIN FOR i IN 1 .. 200 LOOP EXECUTE format('CREATE SEQUENCE pseq%s', i); END LOOP; END \$\$");
sql(q{CREATE FUNCTION public.h_poison(m queue.message[]) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
	PERFORM nextval('public.pseq' || x.body) FROM unnest(m) x WHERE cardinality(m) = 1;
	RAISE EXCEPTION 'poison';
END $$});
sql("SELECT count(*) FROM queue.send_batch('pq', ARRAY(SELECT i::text FROM generate_series(1, 200) i))");
sql(
	"SELECT queue.create_consumer('c_poison', 'pq', 'public.h_poison(queue.message[])', batch_size => 5, concurrency => 4, retry => 'fixed') > 0"
);
ok($node->poll_query_until('postgres', "SELECT count(*) = 200 FROM queue.peek('p_dlq', 1000)"),
	'every poison message reaches the dead-letter queue');
sql("SELECT queue.drop_consumer('c_poison')");
is( sql(
		"SELECT count(*) FILTER (WHERE d > 3) || ' ' || (sum(d) <= 600) FROM (SELECT (pg_sequence_last_value(('public.pseq' || i)::regclass)) AS d FROM generate_series(1, 200) i) x"
	),
	'0 true',
	'the handler saw no message more than max_receive_count (3) times');
is(sql("SELECT count(*) FILTER (WHERE receive_count <> 3) FROM queue.peek('p_dlq', 1000)"), '0',
	'each reached the dead-letter queue with receive_count 3');

# --- queue.max_failed_receives is a cap --------------------------------------

$node->append_conf('postgresql.conf', "queue.max_failed_receives = 100\n");
$node->restart;
my $free_before = sql("SELECT sum(allocated_size) FROM pg_shmem_allocations WHERE name IS NULL");
sql("SELECT queue.create('cq', retry_delay => '1 hour')");
fill('cq', 1000);
is(sql("BEGIN; SELECT count(*) FROM queue.receive('cq', 1000); ROLLBACK;"), '1000',
	'1,000 messages received, then rolled back');
ok(settled('cq'), 'the rolled-back receives that were kept are written');
is(sql("SELECT count(*) FILTER (WHERE receive_count > 0) FROM queue.peek('cq', 1000)"), '100',
	'queue.max_failed_receives (100) of them counted, no more');
my $free_after = sql("SELECT sum(allocated_size) FROM pg_shmem_allocations WHERE name IS NULL");
ok($free_after >= $free_before - 8192,
	"the rollback took no spare shared memory ($free_before bytes free before, $free_after after)");
# The lock table still has its room: one transaction locks 2,000 tables.
sql("DO \$\$ BEGIN FOR i IN 1 .. 2000 LOOP EXECUTE format('CREATE TABLE lk%s ()', i); END LOOP; END \$\$");
is( sql(
		"BEGIN; DO \$\$ BEGIN FOR i IN 1 .. 2000 LOOP EXECUTE format('LOCK TABLE lk%s', i); END LOOP; END \$\$; SELECT count(*) >= 2000 FROM pg_locks WHERE pid = pg_backend_pid(); COMMIT;"
	),
	't',
	'a transaction still locks 2,000 tables');

$node->stop;
done_testing();
