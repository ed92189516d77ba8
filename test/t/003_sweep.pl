# Sweeps by the worker: messages past retention (standard and FIFO, with the
# FIFO group rows), deduplication ids and receive attempts past their
# windows, in batches, skipping rows someone holds; expired messages behind
# a head of redriven FIFO messages (old ids, new sent_at), and dead letters
# that arrive expired in a dead-letter queue the worker saw empty.  A reload
# (pg_reload_conf) makes every queue due for a sweep at once; message ages
# are faked by moving timestamps back as superuser.
use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use QueueWorkerNode;

my $node = QueueWorkerNode::start('sweep', "log_min_messages = debug1\n");

sub q_id { return QueueWorkerNode::queue_id($node, @_); }

sub count_of
{
	my ($table) = @_;
	return $node->safe_psql('postgres', "SELECT count(*) FROM $table");
}

sub sweep_now
{
	$node->safe_psql('postgres', 'SELECT pg_reload_conf()');
}

# --- Standard queue: messages past retention ------------------------------

$node->safe_psql('postgres',
	"SELECT queue.create('exp', retention => '1 minute')");
my $exp = q_id('exp');
$node->safe_psql('postgres',
	"SELECT count(*) FROM generate_series(1, 5) i, LATERAL queue.send('exp', 'm' || i)");
# One young message that must survive the sweep.
$node->safe_psql('postgres', "SELECT queue.send('exp', 'young')");
$node->safe_psql('postgres',
	"UPDATE queue_data.q$exp SET sent_at = sent_at - interval '2 minutes' WHERE body <> 'young'");
is($node->safe_psql('postgres', "SELECT count(*) FROM queue.receive('exp', max_messages => 10, visibility_timeout => '0')"),
	'1', 'an expired message is never delivered, swept or not');
sweep_now();
ok(QueueWorkerNode::poll($node, "SELECT count(*) FROM queue_data.q$exp", '1'),
	'worker deletes the messages past retention');
is($node->safe_psql('postgres', "SELECT body FROM queue_data.q$exp"),
	'young', 'and keeps the one within retention');
ok(QueueWorkerNode::poll($node,
		"SELECT expired FROM queue.stats WHERE queue_name = 'exp'", '5'),
	'queue.stats.expired counts them');

# --- Batches: more than one sweep transaction's worth ---------------------

$node->safe_psql('postgres',
	"SELECT queue.create('big', retention => '1 minute')");
my $big = q_id('big');
$node->safe_psql('postgres',
	"SELECT count(*) FROM generate_series(1, 2500) i, LATERAL queue.send('big', 'b' || i)");
$node->safe_psql('postgres',
	"UPDATE queue_data.q$big SET sent_at = sent_at - interval '2 minutes'");
sweep_now();
ok(QueueWorkerNode::poll($node, "SELECT count(*) FROM queue_data.q$big", '0'),
	'2500 expired messages are swept, over several batches');
ok(QueueWorkerNode::poll($node,
		"SELECT expired FROM queue.stats WHERE queue_name = 'big'", '2500'),
	'all of them counted as expired');

# --- A row someone holds is skipped, not waited for -----------------------

# The worker is kept away while the rows are aged and locked (else it could
# sweep them first), then started afresh: a new worker sweeps every queue.
$node->safe_psql('postgres',
	"ALTER SYSTEM SET queue.worker_enabled = off; SELECT pg_reload_conf()");
ok( QueueWorkerNode::poll($node,
		"SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'queue worker'",
		'0'),
	'worker stopped');
$node->safe_psql('postgres',
	"SELECT queue.create('held', retention => '1 minute')");
my $held = q_id('held');
$node->safe_psql('postgres',
	"SELECT count(*) FROM generate_series(1, 3) i, LATERAL queue.send('held', 'h' || i)");
$node->safe_psql('postgres',
	"UPDATE queue_data.q$held SET sent_at = sent_at - interval '2 minutes'");
my $locker = $node->background_psql('postgres');
$locker->query_safe('BEGIN');
$locker->query_safe(
	"SELECT 1 FROM queue_data.q$held WHERE body = 'h2' FOR UPDATE");
$node->safe_psql('postgres',
	"ALTER SYSTEM RESET queue.worker_enabled; SELECT pg_reload_conf()");
ok(QueueWorkerNode::poll($node, "SELECT string_agg(body, ',') FROM queue_data.q$held", 'h2'),
	'sweep deletes the expired rows nobody holds and skips the locked one');
is( $node->safe_psql(
		'postgres',
		"SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'queue worker' AND wait_event_type = 'Lock'"
	),
	'0',
	'the worker does not wait on the lock');
$locker->query_safe('COMMIT');
$locker->quit;
sweep_now();
ok(QueueWorkerNode::poll($node, "SELECT count(*) FROM queue_data.q$held", '0'),
	'the held row is swept once released');

# --- Deduplication ids past their window ----------------------------------

$node->safe_psql('postgres', "SELECT queue.create('dd')");
my $dd = q_id('dd');
$node->safe_psql('postgres',
	"SELECT queue.send('dd', 'old', deduplication_id => 'old-id')");
$node->safe_psql('postgres',
	"SELECT queue.send('dd', 'new', deduplication_id => 'new-id')");
is( $node->safe_psql(
		'postgres',
		"SELECT duplicate FROM queue.send('dd', 'again', deduplication_id => 'old-id')"),
	't',
	'a repeated id within the window is a duplicate');
$node->safe_psql('postgres',
	"UPDATE queue_data.d$dd SET accepted_at = accepted_at - interval '10 minutes' WHERE deduplication_id = 'old-id'"
);
sweep_now();
ok( QueueWorkerNode::poll($node,
		"SELECT count(*) FROM queue_data.d$dd WHERE deduplication_id = 'old-id'",
		'0'),
	'worker forgets a deduplication id past its window');
is( $node->safe_psql(
		'postgres',
		"SELECT count(*) FROM queue_data.d$dd WHERE deduplication_id = 'new-id'"),
	'1',
	'and keeps the one within its window');
is( $node->safe_psql(
		'postgres',
		"SELECT duplicate FROM queue.send('dd', 'again', deduplication_id => 'old-id')"),
	'f',
	'the forgotten id is accepted again');

# --- Receive attempts past their window -----------------------------------

$node->safe_psql('postgres', "SELECT queue.send('dd', 'attempt me')");
$node->safe_psql('postgres',
	"SELECT count(*) FROM queue.receive('dd', max_messages => 10, receive_attempt_id => 'att-1')");
is(count_of("queue_data.a$dd"), '1', 'receive attempt recorded');
$node->safe_psql('postgres',
	"UPDATE queue_data.a$dd SET received_at = received_at - interval '10 minutes'");
sweep_now();
ok(QueueWorkerNode::poll($node, "SELECT count(*) FROM queue_data.a$dd", '0'),
	'worker forgets a receive attempt past its window');

# --- FIFO: expired messages and their group rows --------------------------

$node->safe_psql('postgres',
	"SELECT queue.create('ff', fifo => true, retention => '1 minute')");
my $ff = q_id('ff');
$node->safe_psql(
	'postgres', qq(
SELECT queue.send('ff', 'a1', message_group_id => 'ga', deduplication_id => 'a1');
SELECT queue.send('ff', 'a2', message_group_id => 'ga', deduplication_id => 'a2');
SELECT queue.send('ff', 'b1', message_group_id => 'gb', deduplication_id => 'b1');
SELECT queue.send('ff', 'c1', message_group_id => 'gc', deduplication_id => 'c1');
));
is(count_of("queue_data.g$ff"), '3', 'FIFO queue has three group rows');
# Group ga and gb expire entirely, gc keeps its young message.
$node->safe_psql('postgres',
	"UPDATE queue_data.q$ff SET sent_at = sent_at - interval '2 minutes' WHERE message_group_id <> 'gc'"
);
sweep_now();
ok(QueueWorkerNode::poll($node, "SELECT string_agg(body, ',') FROM queue_data.q$ff", 'c1'),
	'FIFO: worker deletes the expired messages');
ok( QueueWorkerNode::poll($node,
		"SELECT string_agg(message_group_id, ',' ORDER BY 1) FROM queue_data.g$ff",
		'gc'),
	'FIFO: the emptied groups\' rows go too');
ok(QueueWorkerNode::poll($node,
		"SELECT expired FROM queue.stats WHERE queue_name = 'ff'", '3'),
	'FIFO: queue.stats.expired counts them');
is( $node->safe_psql(
		'postgres',
		"SELECT string_agg(body, ',') FROM queue.receive('ff', max_messages => 10)"),
	'c1',
	'FIFO: the surviving group still delivers');

# A group with one expired and one young message keeps its row, with the
# young message as its head.
$node->safe_psql(
	'postgres', qq(
SELECT queue.send('ff', 'd1', message_group_id => 'gd', deduplication_id => 'd1');
SELECT queue.send('ff', 'd2', message_group_id => 'gd', deduplication_id => 'd2');
));
$node->safe_psql('postgres',
	"UPDATE queue_data.q$ff SET sent_at = sent_at - interval '2 minutes' WHERE body = 'd1'");
sweep_now();
ok( QueueWorkerNode::poll($node,
		"SELECT count(*) FROM queue_data.q$ff WHERE body = 'd1'", '0'),
	'FIFO: the expired head of a group is swept');
is( $node->safe_psql(
		'postgres',
		"SELECT g.head_seq = m.message_id FROM queue_data.g$ff g JOIN queue_data.q$ff m"
		  . " ON m.message_group_id = g.message_group_id WHERE g.message_group_id = 'gd'"),
	't',
	'FIFO: the group row now points at its remaining message');
is( $node->safe_psql(
		'postgres',
		"SELECT string_agg(body, ',') FROM queue.receive('ff', max_messages => 10)"),
	'd2',
	'FIFO: and the group delivers it');

# --- FIFO: redriven messages at the head, expired ones behind them --------

# A FIFO redrive puts dead letters back with their old (low) ids and a new
# sent_at: the head of the queue in id order is then young, and the
# expired messages sit behind more than a sweep batch (1,000) of it.
$node->safe_psql('postgres',
	"SELECT queue.create('rdl', fifo => true)");
$node->safe_psql('postgres',
	"SELECT queue.create('rds', fifo => true, retention => '1 minute', dead_letter_queue => 'rdl', max_receive_count => 1)"
);
my $rds = q_id('rds');
$node->safe_psql('postgres',
	"SELECT count(*) FROM (SELECT array_agg('h' || i) b FROM generate_series(1, 1000) i) s,"
	  . " queue.send_batch('rds', s.b, message_group_ids => array_fill('h'::text, ARRAY[cardinality(s.b)]),"
	  . " deduplication_ids => s.b)");
$node->safe_psql('postgres',
	"SELECT count(*) FROM (SELECT array_agg('h' || i) b FROM generate_series(1001, 1100) i) s,"
	  . " queue.send_batch('rds', s.b, message_group_ids => array_fill('h'::text, ARRAY[cardinality(s.b)]),"
	  . " deduplication_ids => s.b)");
# Received once with no lease, each is moved by its next receive (or by
# the worker, its lease having ended).
$node->safe_psql(
	'postgres', q(
DO $$
BEGIN
	FOR i IN 1 .. 10 LOOP
		PERFORM count(*) FROM queue.receive('rds', max_messages => 1000, visibility_timeout => '0');
	END LOOP;
END $$;
));
ok(QueueWorkerNode::poll($node, "SELECT count(*) FROM queue_data.q$rds", '0'),
	'FIFO: 1100 messages moved to the dead-letter queue');
$node->safe_psql('postgres',
	"SELECT count(*) FROM (SELECT array_agg('t' || i) b FROM generate_series(1, 50) i) s,"
	  . " queue.send_batch('rds', s.b, message_group_ids => array_fill('t'::text, ARRAY[cardinality(s.b)]),"
	  . " deduplication_ids => s.b)");
is($node->safe_psql('postgres', "SELECT queue.redrive('rdl')"),
	'1100', 'redrive puts them back');
is( $node->safe_psql(
		'postgres',
		"SELECT max(message_id) FILTER (WHERE message_group_id = 'h') < min(message_id) FILTER (WHERE message_group_id = 't')"
		  . " FROM queue_data.q$rds"),
	't',
	'with ids below the messages sent since');
$node->safe_psql('postgres',
	"UPDATE queue_data.q$rds SET sent_at = sent_at - interval '2 minutes' WHERE message_group_id = 't'");
sweep_now();
ok( QueueWorkerNode::poll($node,
		"SELECT count(*) FROM queue_data.q$rds WHERE message_group_id = 't'", '0'),
	'FIFO: the worker sweeps the expired messages behind 1100 redriven ones');
is($node->safe_psql('postgres', "SELECT count(*) FROM queue_data.q$rds"),
	'1100', 'and keeps the redriven ones');
ok( QueueWorkerNode::poll($node,
		"SELECT count(*) FROM queue_data.g$rds", '1'),
	'FIFO: the emptied group\'s row goes');

# --- Dead letters already expired in their dead-letter queue --------------

# A dead letter keeps its sent_at, so it may arrive in a dead-letter queue
# (of a shorter retention) already expired.  The worker, having seen that
# queue empty, must still notice the arrival.
$node->safe_psql('postgres',
	"SELECT queue.create('xdl', retention => '1 minute')");
my $xdl = q_id('xdl');
$node->safe_psql('postgres',
	"SELECT queue.create('xs', retention => '1 hour', dead_letter_queue => 'xdl', max_receive_count => 1)");
my $xs = q_id('xs');
ok( QueueWorkerNode::poll($node,
		"SELECT coalesce(idx_scan, 0) + coalesce(seq_scan, 0) > 0 FROM pg_stat_user_tables"
		  . " WHERE relid = 'queue_data.q$xdl'::regclass"),
	'the worker has looked at the empty dead-letter queue');
$node->safe_psql('postgres', "SELECT count(*) FROM queue.send('xs', 'old letter')");
$node->safe_psql('postgres',
	"UPDATE queue_data.q$xs SET sent_at = sent_at - interval '2 minutes'");
$node->safe_psql('postgres',
	"SELECT count(*) FROM queue.receive('xs', visibility_timeout => '0')");
# The receive that moves it also creates a queue: the worker's next pass
# lists the queues afresh (a create invalidates its list) while the commit
# names the dead-letter queue as changed; it must still visit that queue.
# (The list made afresh dropped the changed ones once, and the letter
# stayed there until the next commit or reload.)
$node->safe_psql('postgres', q(
BEGIN;
SELECT count(*) FROM queue.receive('xs', visibility_timeout => '0');
SELECT queue.create('xs_twin');
COMMIT;
));
is($node->safe_psql('postgres', "SELECT dead_lettered FROM queue.stats WHERE queue_name = 'xs'"),
	'1', 'the message went to its dead-letter queue');
ok(QueueWorkerNode::poll($node, "SELECT count(*) FROM queue_data.q$xdl", '0'),
	'the worker sweeps it there, past that queue\'s retention (no send, no reload)');

# --- Topics: deduplication ids past the topic's 5-minute window -----------

$node->safe_psql('postgres', q(
SELECT queue.create_topic('swept_topic', fifo => true);
SELECT queue.publish('swept_topic', 'old', message_group_id => 'g', deduplication_id => 'old');
SELECT queue.publish('swept_topic', 'young', message_group_id => 'g', deduplication_id => 'young');
));
my $topic = $node->safe_psql('postgres', "SELECT topic_id FROM queue.topics WHERE topic_name = 'swept_topic'");
$node->safe_psql('postgres',
	"UPDATE queue_data.t$topic SET accepted_at = accepted_at - interval '6 minutes' WHERE deduplication_id = 'old'");
sweep_now();
ok(QueueWorkerNode::poll($node, "SELECT string_agg(deduplication_id, ',') FROM queue_data.t$topic", 'young'),
	'worker forgets topic deduplication ids past their window, keeps the others');
is($node->safe_psql('postgres',
		"SELECT duplicate FROM queue.publish('swept_topic', 'old', message_group_id => 'g', deduplication_id => 'old')"),
	'f', 'a forgotten id is new again');

$node->stop;
done_testing();
