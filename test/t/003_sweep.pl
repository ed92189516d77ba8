# Sweeps by the worker: messages past retention (standard and FIFO, with the
# FIFO group rows), deduplication ids and receive attempts past their
# windows, in batches, skipping rows someone holds.  A reload
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

my $node = QueueWorkerNode::start('sweep');

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
ok($node->poll_query_until('postgres', "SELECT count(*) FROM queue_data.q$exp", '1'),
	'worker deletes the messages past retention');
is($node->safe_psql('postgres', "SELECT body FROM queue_data.q$exp"),
	'young', 'and keeps the one within retention');
ok($node->poll_query_until('postgres',
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
ok($node->poll_query_until('postgres', "SELECT count(*) FROM queue_data.q$big", '0'),
	'2500 expired messages are swept, over several batches');
ok($node->poll_query_until('postgres',
		"SELECT expired FROM queue.stats WHERE queue_name = 'big'", '2500'),
	'all of them counted as expired');

# --- A row someone holds is skipped, not waited for -----------------------

# The worker is kept away while the rows are aged and locked (else it could
# sweep them first), then started afresh: a new worker sweeps every queue.
$node->safe_psql('postgres',
	"ALTER SYSTEM SET queue.worker_enabled = off; SELECT pg_reload_conf()");
ok( $node->poll_query_until(
		'postgres',
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
ok($node->poll_query_until('postgres', "SELECT string_agg(body, ',') FROM queue_data.q$held", 'h2'),
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
ok($node->poll_query_until('postgres', "SELECT count(*) FROM queue_data.q$held", '0'),
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
ok( $node->poll_query_until(
		'postgres',
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
ok($node->poll_query_until('postgres', "SELECT count(*) FROM queue_data.a$dd", '0'),
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
ok($node->poll_query_until('postgres', "SELECT string_agg(body, ',') FROM queue_data.q$ff", 'c1'),
	'FIFO: worker deletes the expired messages');
ok( $node->poll_query_until(
		'postgres',
		"SELECT string_agg(message_group_id, ',' ORDER BY 1) FROM queue_data.g$ff",
		'gc'),
	'FIFO: the emptied groups\' rows go too');
ok($node->poll_query_until('postgres',
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
ok( $node->poll_query_until(
		'postgres',
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

$node->stop;
done_testing();
