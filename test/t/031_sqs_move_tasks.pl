# The SQS endpoint's message move tasks run in the background (issue 34,
# src/worker/move_task.c): StartMessageMoveTask answers at once while the queue
# worker moves the messages in slices, as the role that started the task,
# at MaxNumberOfMessagesPerSecond; ListMessageMoveTasks shows RUNNING and
# then COMPLETED, CANCELLED or FAILED with counts; CancelMessageMoveTask
# stops it; a task survives a crash and restart with every message moved
# exactly once; tasks are keyed by the queue's id.  The client is
# test/t/sqs/move_tasks_client.py (one assertion per "ok" line it prints).
# One role's 100 slow tasks do not starve another role's: the worker takes
# tasks by turns over the roles, at most queue.move_tasks_per_role of one
# (issue 48).
use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;

use IO::Socket::INET;
use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use QueueWorkerNode;

my $python = '/usr/bin/python3';
plan skip_all => 'no Debian python3-boto3'
  unless system("$python -I -c 'import boto3' >/dev/null 2>&1") == 0;

# one endpoint worker: the roles' requests share it
my $port = PostgreSQL::Test::Cluster::get_free_port();
my $node = QueueWorkerNode::start('sqs_move_tasks', qq(
queue.sqs_listen = '127.0.0.1:$port'
queue.sqs_workers = 1
));

sub sql { return $node->safe_psql('postgres', $_[0]); }
# a query that may fail (its output then, or ''): the checks go on
sub sqlq { my ($rc, $out) = $node->psql('postgres', $_[0]); return $rc == 0 ? $out : ''; }

sql(q(
CREATE ROLE mover LOGIN;
CREATE ROLE other LOGIN;
CREATE ROLE nobody LOGIN;
GRANT USAGE ON SCHEMA queue TO mover, other, nobody;
GRANT CREATE ON DATABASE postgres TO mover, other;
));
my @keys;
for my $role (qw(mover other nobody))
{
	my $pair = sql("SELECT access_key_id || ':' || secret_access_key FROM queue.create_access_key('$role'::regrole)");
	push @keys, "$role=$pair";
}
my $keys = join(',', @keys);

# Queues of mover: each dead-letter queue is one (a source names it);
# the moves go to a given destination, so the dead letters are sent there
# directly (20,000 of them in SQL).
sub fill
{
	my ($q, $n) = @_;
	sql(qq(SET ROLE mover;
SELECT count(*) FROM generate_series(0, $n / 1000 - 1) b,
	queue.send_batch('$q', ARRAY(SELECT '$q ' || (b * 1000 + i) FROM generate_series(1, 1000) i));));
}
sql(q(
SET ROLE mover;
SELECT queue.create(n, dedicated => true) FROM unnest(ARRAY['mv_dlq', 'mv_dest', 'mv_dlq2',
	'mv_dest2', 'mv_dlq3', 'mv_dest3', 'mv_dlq4', 'mv_dest4']) n;
SELECT queue.create('mv_src', dead_letter_queue => 'mv_dlq', max_receive_count => 1);
SELECT queue.create('mv_src2', dead_letter_queue => 'mv_dlq2', max_receive_count => 1);
SELECT queue.create('mv_src3', dead_letter_queue => 'mv_dlq3', max_receive_count => 1);
SELECT queue.create('mv_src4', dead_letter_queue => 'mv_dlq4', max_receive_count => 1);
SELECT queue.grant('mv_dlq4', 'other', ARRAY['manage']);
SELECT queue.grant('mv_dest4', 'other', ARRAY['send']);
RESET ROLE;
SET ROLE other;
SELECT queue.create('mv_other');
));
fill('mv_dlq', 20000);
fill('mv_dlq2', 2000);
fill('mv_dlq3', 3000);
fill('mv_dlq4', 1000);

# messages of a queue, counted in its table (exact, unlike queue.stats)
sub count_of
{
	my ($q) = @_;
	my $id = QueueWorkerNode::queue_id($node, $q);
	return sql("SELECT count(*) || ' ' || count(DISTINCT body) FROM queue_data.q$id");
}
# the counts of two queues in one snapshot
sub counts_of
{
	my ($a, $b) = map { QueueWorkerNode::queue_id($node, $_) } @_;
	return sql("SELECT (SELECT count(*) FROM queue_data.q$a) || ' ' || (SELECT count(*) FROM queue_data.q$b)");
}
is(count_of('mv_dlq'), '20000 20000', '20,000 dead letters');

my $endpoint = "http://127.0.0.1:$port";
sub wait_listening
{
	for (1 .. 300)
	{
		my $s = IO::Socket::INET->new(PeerAddr => '127.0.0.1', PeerPort => $port, Proto => 'tcp');
		if ($s) { close $s; return 1; }
		select(undef, undef, undef, 0.1);
	}
	return 0;
}
ok(wait_listening(), 'endpoint listens');

my $client = "$FindBin::RealBin/sqs/move_tasks_client.py";
sub phase
{
	my ($name) = @_;
	my %values;
	my ($stdout, $stderr);
	my $rc = IPC::Run::run([ $python, '-I', $client, $endpoint, $keys, $name ],
		'>', \$stdout, '2>', \$stderr);
	my $checks = 0;
	for my $line (split /\n/, $stdout)
	{
		my ($kind, $what, $detail) = split /\t/, $line, 3;
		if ($kind eq 'ok') { pass("$name: $what"); $checks++; }
		elsif ($kind eq 'not ok') { fail("$name: $what"); diag($detail // ''); $checks++; }
		elsif ($kind eq 'value') { $values{$what} = $detail; diag("$name: $what = $detail"); }
	}
	ok($rc, "$name: client ran to its end") or diag($stderr);
	ok($checks > 0, "$name: client checked something");
	return \%values;
}

# a large move answers at once; every message moved exactly once
my $v = phase('big');
is(count_of('mv_dlq'), '0 0', 'the dead-letter queue is empty');
is(count_of('mv_dest'), '20000 20000', 'every message is in the destination, once');
is(sqlq(q(SELECT count(*) FROM queue._move_tasks t JOIN queue._queues q ON q.queue_id = t.source_queue_id
	WHERE q.queue_name = 'mv_dlq' AND t.role = 'mover'::regrole AND t.ended_at IS NOT NULL)), '1',
	'the task ran as its role');

# the rate, one running task per source, rights, cancel
$v = phase('rate');
my $moved2 = $v->{moved_at_cancel} // -1;
my ($left2, $in2) = split / /, counts_of('mv_dlq2', 'mv_dest2');
is($left2 + $in2, 2000, 'cancelled: no message lost or doubled');
ok($in2 >= $moved2 && $in2 <= $moved2 + 2, "cancelled: the destination holds what it moved ($in2, $moved2)");

# a crash mid-task: the worker resumes it, and no message is half moved
$v = phase('restart_start');
ok($node->poll_query_until('postgres',
	q(SELECT moved >= 300 FROM queue._move_tasks t JOIN queue._queues q ON q.queue_id = t.source_queue_id
	  WHERE q.queue_name = 'mv_dlq3' AND t.status = 'RUNNING')), 'the task is under way');
$node->stop('immediate');
$node->start;
# one snapshot: the worker is moving again meanwhile
my ($dlq3, $dest3) = (QueueWorkerNode::queue_id($node, 'mv_dlq3'), QueueWorkerNode::queue_id($node, 'mv_dest3'));
my ($left3, $in3) = split /\|/, sql(qq(
SELECT (SELECT count(*) FROM queue_data.q$dlq3), (SELECT count(*) FROM queue_data.q$dest3)));
my $rec3 = sqlq(qq(
SELECT (SELECT status || ' ' || moved FROM queue._move_tasks t JOIN queue._queues q
	 ON q.queue_id = t.source_queue_id WHERE q.queue_name = 'mv_dlq3')
	 || ' ' || (SELECT count(*) FROM queue_data.q$dest3)));
is($left3 + $in3, 3000, "after the crash every message is in one queue ($left3 + $in3)");
like($rec3, qr/^RUNNING (\d+) \1$/, "the record counts what the destination holds, and still runs ($rec3)");
ok($in3 < 3000, 'the crash came mid-task');
ok($node->poll_query_until('postgres',
	q(SELECT status = 'COMPLETED' FROM queue._move_tasks t JOIN queue._queues q ON q.queue_id = t.source_queue_id
	  WHERE q.queue_name = 'mv_dlq3')), 'the worker resumed it to its end');
is(count_of('mv_dest3'), '3000 3000', 'every message moved exactly once');
ok(wait_listening(), 'endpoint listens again');
phase('restart_end');

# a role that loses its right: the task fails with a reason
phase('revoked_start');
ok($node->poll_query_until('postgres',
	q(SELECT moved > 0 FROM queue._move_tasks t JOIN queue._queues q ON q.queue_id = t.source_queue_id
	  WHERE q.queue_name = 'mv_dlq4')), 'the granted role\'s task moves');
sql(q(SET ROLE mover; SELECT queue.revoke('mv_dlq4', 'other', ARRAY['manage'])));
ok($node->poll_query_until('postgres',
	q(SELECT status = 'FAILED' FROM queue._move_tasks t JOIN queue._queues q ON q.queue_id = t.source_queue_id
	  WHERE q.queue_name = 'mv_dlq4')), 'revoked: the task fails');
my ($left4, $in4) = split / /, counts_of('mv_dlq4', 'mv_dest4');
is($left4 + $in4, 1000, 'failed: no message lost or doubled');
phase('revoked_end');

# a role that may no longer log in: its running task fails too (a key works
# only while its role may log in; a task it started stops with it)
sql(q(SET ROLE mover; SELECT queue.grant('mv_dlq4', 'other', ARRAY['manage'])));
phase('revoked_start');
ok($node->poll_query_until('postgres',
	q(SELECT count(*) = 1 FROM queue._move_tasks t JOIN queue._queues q ON q.queue_id = t.source_queue_id
	  WHERE q.queue_name = 'mv_dlq4' AND t.status = 'RUNNING' AND t.moved > 0)), 'the role\'s new task moves');
sql('ALTER ROLE other NOLOGIN');
ok($node->poll_query_until('postgres',
	q(SELECT failure_reason = 'The role that started the task may no longer log in.'
	  FROM queue._move_tasks t JOIN queue._queues q ON q.queue_id = t.source_queue_id
	  WHERE q.queue_name = 'mv_dlq4' ORDER BY t.started_at DESC LIMIT 1)), 'NOLOGIN: the task fails with its reason');
sql('ALTER ROLE other LOGIN');
($left4, $in4) = split / /, counts_of('mv_dlq4', 'mv_dest4');
is($left4 + $in4, 1000, 'failed: no message lost or doubled');

# one role's 100 slow tasks and another role's task (issue 48): the worker
# takes the tasks by turns over the roles, at most queue.move_tasks_per_role
# (10) of one role, so the other's completes within seconds
sql(q(
SET ROLE mover;
SELECT count(queue.create('sv_dlq' || i, dedicated => false)) FROM generate_series(0, 99) i;
SELECT count(queue.create('sv_src' || i, dead_letter_queue => 'sv_dlq' || i, max_receive_count => 1, dedicated => false))
	FROM generate_series(0, 99) i;
SELECT count(*) FROM generate_series(0, 99) i,
	queue.send_batch('sv_dlq' || i, ARRAY(SELECT 'm' || j FROM generate_series(1, 50) j));
SELECT queue.create('sv_dest', dedicated => false);
RESET ROLE;
SET ROLE other;
SELECT queue.create('sv_odlq');
SELECT queue.create('sv_osrc', dead_letter_queue => 'sv_odlq', max_receive_count => 1);
SELECT queue.create('sv_odest');
SELECT count(*) FROM queue.send_batch('sv_odlq', ARRAY(SELECT 'o' || j FROM generate_series(1, 10) j));
));
$v = phase('starve');
is(sql(q(SELECT count(*) || ' ' || count(DISTINCT body) FROM queue.peek('sv_odest', 100))), '10 10',
	'the other role\'s messages all moved');
ok($node->poll_query_until('postgres', q(SELECT count(*) = 0 FROM queue._move_tasks WHERE status = 'RUNNING')),
	'the first role\'s tasks are cancelled');

# tasks are keyed by the queue's id: a dropped queue's go with it, and a
# new queue of the same name has none
sql(q(SET ROLE mover;
SELECT queue.drop('mv_dlq', force => true);
SELECT queue.create('mv_dlq');
SELECT queue.alter('mv_src', dead_letter_queue => 'mv_dlq', max_receive_count => 1);));
phase('recreated');
is(sqlq(q(SELECT count(*) FROM queue._move_tasks t LEFT JOIN queue._queues q ON q.queue_id = t.source_queue_id
	WHERE q.queue_id IS NULL)), '0', 'no task outlives its queue');

$node->stop;
done_testing();
