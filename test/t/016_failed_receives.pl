# Rolled-back receives count with nobody receiving afterwards (failed.c):
# the rollback wakes the database's worker, which writes the count into
# the message, holds it back for retry_delay, and moves it to the
# dead-letter queue once max_receive_count is used up.  The same for a
# session that rolls back and disconnects, a FIFO group, and ROLLBACK
# PREPARED.  A crash forgets counts not yet written, never a message.
use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use QueueWorkerNode;

my $node = QueueWorkerNode::start('failed', "max_prepared_transactions = 5\nrestart_after_crash = on\n");

sub sql
{
	my ($query) = @_;
	return $node->safe_psql('postgres', $query);
}

sub settled
{
	my ($queue) = @_;
	return $node->poll_query_until('postgres',
		"SELECT queue._failed_pending(queue_id) = 0 FROM queue.queues WHERE queue_name = '$queue'");
}

# --- The worker writes the count: nobody receives after the rollbacks ------

sql("SELECT queue.create('f_dlq')");
sql("SELECT queue.create('f_src', dead_letter_queue => 'f_dlq', max_receive_count => 2)");
sql("SELECT count(*) FROM queue.send('f_src', 'poison')");
# each rollback in a session of its own, which then disconnects
for my $i (1 .. 2)
{
	is(sql("BEGIN; SELECT body || ':' || receive_count FROM queue.receive('f_src'); ROLLBACK;"),
		"poison:$i", "receive $i, rolled back, sees its count");
	ok(settled('f_src'), "the worker writes rolled-back receive $i");
}
is(sql("SELECT count(*) FROM queue.peek('f_src')"), '0',
	'two rolled-back receives use up max_receive_count 2: the message left its queue');
is(sql("SELECT body || ':' || receive_count FROM queue.peek('f_dlq')"), 'poison:2',
	'the worker moved it to the dead-letter queue, with its count');
is(sql("SELECT dead_lettered || ' ' || received FROM queue.stats WHERE queue_name = 'f_src'"),
	'1 2', 'counted as two receives and one dead letter');

# --- retry_delay: written by the worker, then the message comes back -------

sql("SELECT queue.create('f_delay', retry_delay => '2 s')");
sql("SELECT count(*) FROM queue.send('f_delay', 'later')");
sql("BEGIN; SELECT count(*) FROM queue.receive('f_delay'); ROLLBACK;");
ok(settled('f_delay'), 'the worker writes the rolled-back receive');
is(sql("SELECT receive_count || ' ' || (visible_at > now()) FROM queue.peek('f_delay')"), '1 true',
	'counted, and held back for retry_delay');
is(sql("SELECT count(*) FROM queue.receive('f_delay')"), '0', 'not delivered meanwhile');
is(sql("SELECT body || ':' || receive_count FROM queue.receive('f_delay', wait => '10 s')"),
	'later:2', 'a waiting receive gets it once retry_delay has passed, as its second receive');

# --- FIFO: the group is held back, then delivered in order -----------------

sql("SELECT queue.create('f_fifo.fifo', fifo => true, retry_delay => '1 s')");
sql(
	"SELECT count(*) FROM queue.send_batch('f_fifo.fifo', ARRAY['a', 'b'], message_group_ids => ARRAY['g', 'g'], deduplication_ids => ARRAY['a', 'b'])"
);
sql("BEGIN; SELECT count(*) FROM queue.receive('f_fifo.fifo', 10); ROLLBACK;");
ok(settled('f_fifo.fifo'), 'the worker writes both rolled-back receives');
is(sql("SELECT count(*) FROM queue.receive('f_fifo.fifo', 10)"), '0', 'the group is held back');
is( sql(
		"SELECT string_agg(body || ':' || receive_count, ' ') FROM queue.receive('f_fifo.fifo', 10, wait => '10 s')"
	),
	'a:2 b:2',
	'then delivered in order, each counted twice');

# --- Two-phase commit ------------------------------------------------------

sql("SELECT queue.create('f_2pc')");
sql("SELECT count(*) FROM queue.send('f_2pc', 'p')");
sql("BEGIN; SELECT count(*) FROM queue.receive('f_2pc'); PREPARE TRANSACTION 'f_gid';");
is(sql("SELECT queue._failed_pending(queue_id) FROM queue.queues WHERE queue_name = 'f_2pc'"),
	'1', 'a prepared receive waits under its GID');
sql("ROLLBACK PREPARED 'f_gid'");
ok(settled('f_2pc'), 'ROLLBACK PREPARED makes it count, and the worker writes it');
is(sql("SELECT receive_count FROM queue.peek('f_2pc')"), '1', 'counted once');

# --- A crash forgets counts not yet written, never a message ---------------

sql("SELECT queue.create('f_crash', retry_delay => '1 hour')");
sql("SELECT count(*) FROM queue.send('f_crash', 'survivor')");
my $psql = $node->background_psql('postgres');
$psql->query_safe("BEGIN");
is($psql->query_safe("SELECT body FROM queue.receive('f_crash')"), 'survivor',
	'a session receives in an open transaction');
my $pid = $psql->query_safe("SELECT pg_backend_pid()");
kill 'KILL', $pid;
eval { $psql->quit; };
$node->poll_query_until('postgres', 'SELECT true') or die 'no restart after the crash';
ok( $node->poll_query_until(
		'postgres', "SELECT count(*) = 1 FROM pg_stat_activity WHERE backend_type = 'queue worker'"),
	'the worker runs again after the crash');
is(sql("SELECT body || ':' || receive_count || ':' || (visible_at <= now()) FROM queue.peek('f_crash')"),
	'survivor:0:true', 'the message is there and visible; its receive was not counted');

$node->stop;
done_testing();
