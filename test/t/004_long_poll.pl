# Long polling: a waiting receive is woken by a commit elsewhere, by a
# delayed message turning visible, and answers statement_timeout and
# pg_cancel_backend promptly; a wait in REPEATABLE READ is an error.
# Counters survive a clean restart.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);

my $node = PostgreSQL::Test::Cluster->new('longpoll');
$node->init;
$node->append_conf(
	'postgresql.conf', qq(
shared_preload_libraries = 'queue'
queue.sweep_interval = '100ms'
));
$node->start;
$node->safe_psql(
	'postgres', qq(
CREATE EXTENSION queue;
SELECT queue.create('lp');
SELECT queue.create('other');
));

# Error output of a statement, with its SQLSTATE (VERBOSITY verbose).
sub psql_error
{
	my ($sql) = @_;
	my ($ret, $out, $err) =
	  $node->psql('postgres', "\\set VERBOSITY verbose\n$sql");
	return $err;
}

# Wait until the session with this pid sleeps in a waiting receive.
sub wait_until_waiting
{
	my ($pid) = @_;
	return $node->poll_query_until('postgres',
		"SELECT wait_event_type = 'Extension' AND state = 'active' FROM pg_stat_activity WHERE pid = $pid"
	);
}

my $bg = $node->background_psql('postgres', on_error_stop => 0);
my $bgpid = $bg->query_safe('SELECT pg_backend_pid()');

# Start a statement in the background session without waiting for it.
sub bg_start
{
	my ($sql) = @_;
	$bg->query_until(qr/started\n/, "\\echo started\n$sql;\n");
}

# Collect the background statement's output up to a pattern.
sub bg_finish
{
	my ($until) = @_;
	return $bg->query_until($until, '');
}

# --- Woken by a commit elsewhere -------------------------------------------

bg_start("SELECT body FROM queue.receive('lp', wait => '15 s')");
ok(wait_until_waiting($bgpid), 'receive with wait sleeps while the queue is empty');

my $xmin = $node->safe_psql('postgres',
	"SELECT coalesce(backend_xmin::text, 'none') FROM pg_stat_activity WHERE pid = $bgpid");
note "backend_xmin of a waiting receive: $xmin";

# A send to another queue, and a send that rolls back, do not end the wait.
$node->safe_psql('postgres', "SELECT queue.send('other', 'not for lp')");
$node->safe_psql('postgres',
	"BEGIN; SELECT queue.send('lp', 'rolled back'); ROLLBACK;");
ok(wait_until_waiting($bgpid), 'still waiting after a send elsewhere and a rollback');

my $t0 = time;
$node->safe_psql('postgres', "SELECT queue.send('lp', 'wake up')");
my $out = bg_finish(qr/\n/);
my $elapsed = time - $t0;
is($out, "wake up\n", 'waiting receive returns the message committed elsewhere');
cmp_ok($elapsed, '<', 5, 'well before its 15 s wait ends')
  or diag "returned ${elapsed}s after the send";
note sprintf('send + commit to return: %.1f ms', $elapsed * 1000);

# A publish to a topic wakes a receive waiting on a subscribed queue, as a
# send does; a publish whose filters skip the queue does not.
$node->safe_psql('postgres', q(
SELECT queue.create_topic('lp_topic');
SELECT queue.subscribe('lp_topic', 'lp', filter_tags => '{lp}');
SELECT queue.subscribe('lp_topic', 'other');
));
bg_start("SELECT body FROM queue.receive('lp', wait => '15 s')");
ok(wait_until_waiting($bgpid), 'waiting for a publish');
$node->safe_psql('postgres', "SELECT queue.publish('lp_topic', 'not for lp', tags => '{x}')");
ok(wait_until_waiting($bgpid), 'still waiting after a publish that skips lp');
$t0 = time;
$node->safe_psql('postgres', "SELECT queue.publish('lp_topic', 'published', tags => '{lp}')");
$out = bg_finish(qr/\n/);
$elapsed = time - $t0;
is($out, "published\n", 'a publish wakes a receive waiting on a subscribed queue');
cmp_ok($elapsed, '<', 5, 'well before its 15 s wait ends')
  or diag "returned ${elapsed}s after the publish";
$node->safe_psql('postgres', "SELECT queue.drop_topic('lp_topic'); SELECT queue.purge('other')");

# A wait that finds nothing returns nothing at its deadline.
$t0 = time;
is($bg->query_safe("SELECT count(*) FROM queue.receive('lp', wait => '1 s')"),
	'0', 'a wait that finds nothing returns no rows');
$elapsed = time - $t0;
cmp_ok($elapsed, '>=', 0.9, 'after waiting its full second')
  or diag "returned after ${elapsed}s";

# --- A delayed message wakes the wait when it turns visible ---------------

# Sent before the wait began: no commit happens while it waits.
$node->safe_psql('postgres', "SELECT queue.send('lp', 'delayed', delay => '2 s')");
$t0 = time;
bg_start(
	"SELECT body || ':' || (first_received_at >= sent_at + interval '2 s') FROM queue.receive('lp', wait => '15 s')"
);
$out = bg_finish(qr/\n/);
$elapsed = time - $t0;
is($out, "delayed:true\n",
	'a delayed message sent before the wait wakes it when it turns visible');
cmp_ok($elapsed, '<', 5, 'not at the end of the wait')
  or diag "returned after ${elapsed}s";

# Sent while waiting: the commit wakes the receive, which must sleep again
# until the message turns visible.
bg_start(
	"SELECT body || ':' || (first_received_at >= sent_at + interval '2 s') FROM queue.receive('lp', wait => '15 s')"
);
ok(wait_until_waiting($bgpid), 'waiting again');
$t0 = time;
$node->safe_psql('postgres', "SELECT queue.send('lp', 'delayed2', delay => '2 s')");
$out = bg_finish(qr/\n/);
$elapsed = time - $t0;
is($out, "delayed2:true\n",
	'a delayed message sent during the wait is received once visible, not before');
cmp_ok($elapsed, '<', 5, 'and not at the end of the wait')
  or diag "returned after ${elapsed}s";

# A queue's first priority arrives while a receive waits on it (1.13: the
# plain lease reads only the messages stored without a priority): the
# commit wakes the receive, which reads by priority from then on; a
# delayed first priority is waited for until it turns visible (the next
# visible time is read from both indexes).
$node->safe_psql('postgres', "SELECT queue.create('lp_prio'); SELECT queue.create('lp_prio2')");
bg_start("SELECT body || ':' || priority FROM queue.receive('lp_prio', wait => '15 s')");
ok(wait_until_waiting($bgpid), 'waiting on a queue that never had a priority');
$t0 = time;
$node->safe_psql('postgres', "SELECT queue.send('lp_prio', 'first9', priority => 9)");
$out = bg_finish(qr/\n/);
$elapsed = time - $t0;
is($out, "first9:9\n", "the queue's first priority, sent during the wait, is received");
cmp_ok($elapsed, '<', 5, 'at its commit, not at the end of the wait')
  or diag "returned after ${elapsed}s";
bg_start(
	"SELECT body || ':' || priority || ':' || (first_received_at >= sent_at + interval '2 s') FROM queue.receive('lp_prio2', wait => '15 s')"
);
ok(wait_until_waiting($bgpid), 'waiting on another such queue');
$t0 = time;
$node->safe_psql('postgres', "SELECT queue.send('lp_prio2', 'later7', priority => 7, delay => '2 s')");
$out = bg_finish(qr/\n/);
$elapsed = time - $t0;
is($out, "later7:7:true\n", 'a delayed first priority sent during the wait is received once visible');
cmp_ok($elapsed, '<', 5, 'and not at the end of the wait')
  or diag "returned after ${elapsed}s";

# An in-flight message whose visibility timeout ends wakes the wait too.
$node->safe_psql('postgres', "SELECT queue.send('lp', 'leased')");
$node->safe_psql('postgres',
	"SELECT count(*) FROM queue.receive('lp', visibility_timeout => '2 s')");
$t0 = time;
$out = $bg->query_safe(
	"SELECT body || ':' || receive_count FROM queue.receive('lp', wait => '15 s')");
$elapsed = time - $t0;
is($out, 'leased:2', 'a message whose lease ends wakes the wait');
cmp_ok($elapsed, '<', 5, 'when the lease ends') or diag "returned after ${elapsed}s";

# A receive that rolls back hands its message back, and wakes the wait.
$node->safe_psql('postgres', "SELECT queue.send('lp', 'handed back')");
my $taker = $node->background_psql('postgres');
$taker->query_safe('BEGIN');
is($taker->query_safe("SELECT body FROM queue.receive('lp')"),
	'handed back', 'another session takes the message, uncommitted');
bg_start("SELECT body FROM queue.receive('lp', wait => '15 s')");
ok(wait_until_waiting($bgpid), 'the waiting receive finds nothing meanwhile');
$t0 = time;
$taker->query_safe('ROLLBACK');
$out = bg_finish(qr/\n/);
$elapsed = time - $t0;
is($out, "handed back\n", 'a receive rolled back elsewhere wakes the wait');
cmp_ok($elapsed, '<', 5, 'at once') or diag "returned after ${elapsed}s";
$taker->quit;

# --- pg_cancel_backend ------------------------------------------------------

bg_start("SELECT body FROM queue.receive('lp', wait => '15 s')");
ok(wait_until_waiting($bgpid), 'waiting before cancel');
$t0 = time;
$node->safe_psql('postgres', "SELECT pg_cancel_backend($bgpid)");
ok( pump_until(
		$bg->{run}, $bg->{timeout},
		\$bg->{stderr}, qr/canceling statement due to user request/),
	'pg_cancel_backend cancels a waiting receive');
$elapsed = time - $t0;
cmp_ok($elapsed, '<', 3, 'promptly') or diag "cancel took ${elapsed}s";
$bg->{stderr} = '';
is($node->safe_psql('postgres', "SELECT wait_event_type IS DISTINCT FROM 'Extension' FROM pg_stat_activity WHERE pid = $bgpid"),
	't', 'the session no longer waits');
is($bg->query_safe('SELECT 1'), '1', 'and is usable again');
$bg->quit;

# --- statement_timeout ------------------------------------------------------

$t0 = time;
my $err = psql_error(
	"SET statement_timeout = '500ms';\nSELECT * FROM queue.receive('lp', wait => '10 s');");
$elapsed = time - $t0;
like(
	$err,
	qr/ERROR:  57014: canceling statement due to statement timeout/,
	'statement_timeout cancels a waiting receive (57014)');
cmp_ok($elapsed, '<', 5, 'promptly, long before the 10 s wait')
  or diag "took ${elapsed}s";

# --- REPEATABLE READ / SERIALIZABLE -----------------------------------------

$err = psql_error(
	"BEGIN ISOLATION LEVEL REPEATABLE READ;\nSELECT * FROM queue.receive('lp', wait => '1 s');"
);
like($err, qr/ERROR:  25000: /, 'a wait in REPEATABLE READ is an error (25000)');
like($err, qr/wait/, 'naming the wait');
$err = psql_error(
	"BEGIN ISOLATION LEVEL SERIALIZABLE;\nSELECT * FROM queue.receive('lp', wait => '1 s');"
);
like($err, qr/ERROR:  25000: /, 'and in SERIALIZABLE');
is( $node->safe_psql(
		'postgres',
		"BEGIN ISOLATION LEVEL REPEATABLE READ; SELECT count(*) FROM queue.receive('lp', wait => '0'); COMMIT;"
	),
	'0',
	'a receive without a wait works in REPEATABLE READ');

# --- Counters across a clean restart ----------------------------------------

$node->safe_psql(
	'postgres', qq(
SELECT queue.create('cnt');
SELECT queue.send('cnt', 'c' || i) FROM generate_series(1, 3) i;
SELECT count(*) FROM queue.receive('cnt', max_messages => 2);
));
my $before = $node->safe_psql('postgres',
	"SELECT sent || '/' || received FROM queue.stats WHERE queue_name = 'cnt'");
is($before, '3/2', 'counters before restart');
my $lp_before = $node->safe_psql('postgres',
	"SELECT sent || '/' || received FROM queue.stats WHERE queue_name = 'lp'");
$node->restart;
is( $node->safe_psql(
		'postgres',
		"SELECT sent || '/' || received FROM queue.stats WHERE queue_name = 'cnt'"),
	'3/2',
	'counters kept across a clean restart');
is( $node->safe_psql(
		'postgres',
		"SELECT sent || '/' || received FROM queue.stats WHERE queue_name = 'lp'"),
	$lp_before,
	'for every queue');
$node->safe_psql('postgres', "SELECT queue.send('cnt', 'after')");
is( $node->safe_psql(
		'postgres', "SELECT sent FROM queue.stats WHERE queue_name = 'cnt'"),
	'4',
	'and counting on from there');

$node->stop;
done_testing();
