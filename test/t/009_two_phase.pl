# Two-phase commit: what a prepared transaction did to a queue counts, and
# wakes waiting receives, when COMMIT PREPARED commits it, not at PREPARE
# TRANSACTION; ROLLBACK PREPARED counts nothing and hands back what it
# received, waking waiters.  Sends, receives and deletes; a prepared
# transaction that touched more queues than it keeps apart still wakes
# them all; a prepared CREATE EXTENSION asks for a worker when it commits;
# one that outlives a restart commits without counting.
use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);
use QueueWorkerNode;

my $node = QueueWorkerNode::start('two_phase', "max_prepared_transactions = 5\n");

sub sql
{
	my ($query) = @_;
	return $node->safe_psql('postgres', $query);
}

# sent/received/deleted of a queue
sub counts
{
	my ($q) = @_;
	return sql(
		"SELECT format('%s/%s/%s', sent, received, deleted) FROM queue.stats WHERE queue_name = '$q'"
	);
}

my $bg = $node->background_psql('postgres', on_error_stop => 0);
my $bgpid = $bg->query_safe('SELECT pg_backend_pid()');

sub wait_until_waiting
{
	return $node->poll_query_until('postgres',
		"SELECT wait_event_type = 'Extension' AND state = 'active' FROM pg_stat_activity WHERE pid = $bgpid"
	);
}

# Start a receive in the background session; collect the bodies it
# returned (or "(none)") later.
sub bg_start
{
	my ($query) = @_;
	$bg->query_until(qr/started\n/,
		"\\echo started\nSELECT coalesce(string_agg(body, ','), '(none)') FROM ($query) r;\n");
}

sub bg_finish
{
	return $bg->query_until(qr/\n/, '');
}

sql("SELECT queue.create('tp')");

# --- A prepared send: counted and waking at COMMIT PREPARED ----------------

bg_start("SELECT body FROM queue.receive('tp', wait => '15 s')");
ok(wait_until_waiting(), 'a receive waits on the empty queue');
sql("BEGIN; SELECT count(*) FROM queue.send('tp', 'two-phase'); PREPARE TRANSACTION 'tp_send'");
is(counts('tp'), '0/0/0', 'PREPARE TRANSACTION counts nothing yet');
ok(wait_until_waiting(), 'and wakes no one');
my $t0 = time;
sql("COMMIT PREPARED 'tp_send'");
is(bg_finish(), "two-phase\n", 'COMMIT PREPARED wakes the waiting receive');
my $elapsed = time - $t0;
cmp_ok($elapsed, '<', 5, 'well before its 15 s wait ends')
  or diag "returned ${elapsed}s after COMMIT PREPARED";
is(counts('tp'), '1/1/0', 'queue.stats counts the send');

# --- A prepared receive and a prepared delete -------------------------------

sql("SELECT count(*) FROM queue.send('tp', 'r')");
my $receipt = sql(
	"BEGIN; SELECT receipt FROM queue.receive('tp', visibility_timeout => '1 hour'); PREPARE TRANSACTION 'tp_recv'"
);
is(counts('tp'), '2/1/0', 'a prepared receive is not counted yet');
sql("COMMIT PREPARED 'tp_recv'");
is(counts('tp'), '2/2/0', 'COMMIT PREPARED counts the receive');
is(sql("BEGIN; SELECT queue.delete('tp', '$receipt'); PREPARE TRANSACTION 'tp_del'"),
	't', 'a delete in a prepared transaction');
is(counts('tp'), '2/2/0', 'not counted yet');
sql("COMMIT PREPARED 'tp_del'");
is(counts('tp'), '2/2/1', 'COMMIT PREPARED counts the delete');

# --- ROLLBACK PREPARED -------------------------------------------------------

sql("BEGIN; SELECT count(*) FROM queue.send('tp', 'never'); PREPARE TRANSACTION 'tp_never'");
sql("ROLLBACK PREPARED 'tp_never'");
is(counts('tp'), '2/2/1', 'ROLLBACK PREPARED of a send counts nothing');

sql("SELECT count(*) FROM queue.send('tp', 'handed back')");
is( sql(
		"BEGIN; SELECT body FROM queue.receive('tp', visibility_timeout => '1 hour'); PREPARE TRANSACTION 'tp_back'"
	),
	'handed back',
	'a prepared transaction holds a received message');
bg_start("SELECT body FROM queue.receive('tp', wait => '15 s')");
ok(wait_until_waiting(), 'a receive waits meanwhile');
$t0 = time;
sql("ROLLBACK PREPARED 'tp_back'");
is(bg_finish(), "handed back\n", 'ROLLBACK PREPARED hands the message back and wakes the wait');
$elapsed = time - $t0;
cmp_ok($elapsed, '<', 5, 'at once') or diag "returned after ${elapsed}s";

# --- More queues than a prepared transaction keeps apart --------------------

sql("SELECT queue.create('tpm' || i) FROM generate_series(1, 40) i");
bg_start("SELECT body FROM queue.receive('tpm40', wait => '15 s')");
ok(wait_until_waiting(), 'a receive waits on the last of 40 queues');
sql("BEGIN; SELECT count(*) FROM generate_series(1, 40) i, queue.send('tpm' || i, 'm' || i);"
	  . " PREPARE TRANSACTION 'tp_many'");
$t0 = time;
sql("COMMIT PREPARED 'tp_many'");
is(bg_finish(), "m40\n", 'COMMIT PREPARED of sends to 40 queues wakes a waiter on any of them');
$elapsed = time - $t0;
cmp_ok($elapsed, '<', 5, 'at once') or diag "returned after ${elapsed}s";
is(counts('tpm1'), '1/0/0', 'the first queues\' sends are counted');

# --- CREATE EXTENSION in a prepared transaction asks for a worker -----------

$node->safe_psql('postgres', 'CREATE DATABASE tp_ext');
$node->safe_psql('tp_ext', 'CREATE EXTENSION queue');
my $in_tp_ext =
  "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'queue worker' AND datname = 'tp_ext'";
ok($node->poll_query_until('postgres', $in_tp_ext, '1'), 'tp_ext has a worker');
$node->safe_psql('tp_ext', 'DROP EXTENSION queue');
ok($node->poll_query_until('postgres', $in_tp_ext, '0'),
	'DROP EXTENSION: the worker leaves, and the launcher leaves tp_ext alone');
$node->safe_psql('tp_ext', "BEGIN; CREATE EXTENSION queue; PREPARE TRANSACTION 'tp_ext'");
$node->safe_psql('tp_ext', "COMMIT PREPARED 'tp_ext'");
$t0 = time;
ok($node->poll_query_until('postgres', $in_tp_ext, '1'),
	'COMMIT PREPARED of CREATE EXTENSION brings the worker back');
$elapsed = time - $t0;
cmp_ok($elapsed, '<', 10, 'within seconds') or diag "took ${elapsed}s";

# --- A prepared transaction that outlives a restart -------------------------

sql("BEGIN; SELECT count(*) FROM queue.send('tp', 'after restart'); PREPARE TRANSACTION 'tp_restart'");
$bg->quit;
$node->restart;
my ($ret, $out, $err) = $node->psql('postgres', "COMMIT PREPARED 'tp_restart'");
is($ret, 0, 'COMMIT PREPARED after a restart succeeds') or diag $err;
is(sql("SELECT count(*) FROM queue.peek('tp', 100) WHERE body = 'after restart'"),
	'1', 'and its message is there');

$node->stop;
done_testing();
