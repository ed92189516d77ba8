# Standbys and logical subscribers under the worker's recycling and
# compaction (issue 47, src/worker/horizon.c).  While a hot standby is
# connected, with hot_standby_feedback on or off, the worker truncates and
# rewrites nothing (queue.storage_maintenance = auto): a standby reader
# holding a queue table's lock is not cancelled, and replay of an
# unrelated table keeps up while the primary's queues churn under an open
# transaction id.  With ignore_standbys it does recycle.  A logical
# subscriber of a queue table ends with the publisher's messages exactly
# while the publisher's worker recycles and compacts under an open
# transaction id (nothing of either is decoded; the walsender's decoding
# holds no snapshot of the table).
use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time usleep);
use QueueWorkerNode;
use HeldSnapshot;

my $primary = PostgreSQL::Test::Cluster->new('primary');
$primary->init(allows_streaming => 'logical');
$primary->append_conf(
	'postgresql.conf', q(
shared_preload_libraries = 'queue'
queue.sweep_interval = '100ms'
autovacuum = off
max_standby_streaming_delay = '10s'
));
$primary->start;
$primary->safe_psql('postgres', 'CREATE EXTENSION queue');
$primary->safe_psql('postgres', 'CREATE TABLE public.beat (at timestamptz)');
$primary->backup('bk');

my $standby = PostgreSQL::Test::Cluster->new('standby');
$standby->init_from_backup($primary, 'bk', has_streaming => 1);
$standby->append_conf('postgresql.conf', "hot_standby_feedback = on\nmax_standby_streaming_delay = '10s'\n");
$standby->start;
$primary->wait_for_catchup($standby);

sub sql { return $primary->safe_psql('postgres', @_); }
sub q_id { return QueueWorkerNode::queue_id($primary, @_); }
sub filenode { return HeldSnapshot::filenode($primary, @_); }

# churn(queue, n): n sent, received and deleted, 500 a statement
sub churn
{
	my ($queue, $n) = @_;
	for (1 .. $n / 500)
	{
		sql("SELECT count(*) FROM queue.send_batch('$queue', array_fill('x'::text, ARRAY[500]))");
		sql(qq(
			WITH r AS (SELECT receipt FROM queue.receive('$queue', max_messages => 500))
			SELECT count(*) FROM queue.delete_batch('$queue', ARRAY(SELECT receipt FROM r))));
	}
}

# lag(): how long the standby takes to show a row of public.beat
sub lag
{
	my $t0 = time;
	my $at = sql("INSERT INTO public.beat VALUES (clock_timestamp()) RETURNING at");
	while ($standby->safe_psql('postgres', "SELECT count(*) FROM public.beat WHERE at = '$at'") == 0)
	{
		usleep(20_000);
		return 99 if time - $t0 > 30;
	}
	return time - $t0;
}

sql("SELECT queue.create('sb', dedicated => true)");
my $sb = q_id('sb');
$primary->wait_for_catchup($standby);
my $base = lag();

for my $feedback ('on', 'off')
{
	if ($feedback eq 'off')
	{
		$standby->append_conf('postgresql.conf', "hot_standby_feedback = off\n");
		$standby->reload;
	}
	my $holder = HeldSnapshot::hold($primary);
	HeldSnapshot::burn_xids($primary);
	my $fn = filenode("q$sb");

	# a standby report holding the queue table's lock for the whole churn:
	# with feedback, a REPEATABLE READ one (its snapshot too); without, a
	# READ COMMITTED one between statements (its lock alone: a snapshot held
	# on a standby without feedback is cancelled by the primary's plain
	# vacuum of any table it reads, PostgreSQL's own conflict, which no
	# queue avoids)
	my $reader = $standby->background_psql('postgres', on_error_stop => 0);
	$reader->query_safe($feedback eq 'on' ? 'BEGIN ISOLATION LEVEL REPEATABLE READ' : 'BEGIN');
	$reader->query_safe("SELECT count(*) FROM queue_data.q$sb");
	my $worst = 0;
	my $t0 = time;
	while (time - $t0 < 8)
	{
		churn('sb', 2000);
		my $l = lag();
		$worst = $l if $l > $worst;
	}
	my $still = eval { $reader->query("SELECT count(*) FROM queue_data.q$sb") };
	ok(defined $still && $still =~ /^\d+$/ && ($reader->{stderr} // '') !~ /conflict with recovery/,
		"feedback $feedback: the standby reader holding a queue table's lock is not cancelled");
	eval { $reader->query('COMMIT'); $reader->quit; };
	cmp_ok($worst, '<', $base + 1, "feedback $feedback: replay lag of another table stays under "
		  . "its baseline plus 1 s (worst ${worst} s, baseline ${base} s)");
	is(filenode("q$sb"), $fn, "feedback $feedback: nothing truncated or rewritten while the standby is connected");
	$holder->quit;
}

# --- ignore_standbys: the standby not counted -----------------------------

$primary->append_conf('postgresql.conf', "queue.storage_maintenance = ignore_standbys\n");
$primary->reload;
my $holder = HeldSnapshot::hold($primary);
HeldSnapshot::burn_xids($primary);
my $fn = filenode("q$sb");
my $recycled = 0;
for (1 .. 20)
{
	churn('sb', 2000);
	Time::HiRes::sleep(0.3);
	$recycled = 1, last if filenode("q$sb") ne $fn;
}
ok($recycled, 'ignore_standbys: recycled with the standby connected');
$holder->quit;
$primary->append_conf('postgresql.conf', "queue.storage_maintenance = auto\n");
$primary->reload;
$standby->stop;

# --- a logical subscriber while the publisher's worker recycles and compacts

# (a slot, the subscription's or its table sync's, is made only once no
# transaction id is open: the subscription is made first, the horizon held
# after)
my $sub = PostgreSQL::Test::Cluster->new('subscriber');
$sub->init;
$sub->start;
sql("SELECT queue.create('pub', dedicated => true)");
my $pub = q_id('pub');
sql("SELECT count(*) FROM queue.send_batch('pub', array_fill('p'::text, ARRAY[1000]))") for 1 .. 20;
my ($out, $err);
IPC::Run::run([ 'pg_dump', '-s', '-t', "queue_data.q$pub", '-d', $primary->connstr('postgres') ],
	'>', \$out, '2>', \$err);
$sub->safe_psql('postgres', "CREATE SCHEMA queue_data;\n$out");
sql("CREATE PUBLICATION pq FOR TABLE queue_data.q$pub");
$sub->safe_psql('postgres',
	"CREATE SUBSCRIPTION sq CONNECTION 'port=" . $primary->port . " host=" . $primary->host
	  . " dbname=postgres' PUBLICATION pq");
$sub->poll_query_until('postgres', "SELECT count(*) = 0 FROM pg_subscription_rel WHERE srsubstate NOT IN ('r', 's')")
  or die 'the subscription never synchronised';
$holder = HeldSnapshot::hold($primary);
HeldSnapshot::burn_xids($primary);
$fn = filenode("q$pub");
# a backlog compacted (leases), then emptied and recycled
sql("SELECT count(*) FROM queue.receive('pub', max_messages => 1000, visibility_timeout => '1 s')") for 1 .. 15;
Time::HiRes::sleep(1.2);
while (sql(qq(
	SELECT count(*) FROM (SELECT queue.delete('pub', receipt)
		FROM queue.receive('pub', max_messages => 1000, visibility_timeout => '1 hour')) d)) > 0) { }
sql("SELECT count(*) FROM queue.send_batch('pub', array_fill('q'::text, ARRAY[100]))");
my $changed = 0;
for (1 .. 50)
{
	$changed = 1, last if filenode("q$pub") ne $fn;
	Time::HiRes::sleep(0.1);
}
ok($changed, 'the publisher\'s queue table was recycled or compacted while subscribed');
$primary->wait_for_catchup('sq');
my $cols = "count(*), sum(message_id), min(message_id), max(message_id)";
is($sub->safe_psql('postgres', "SELECT $cols FROM queue_data.q$pub"),
	sql("SELECT $cols FROM queue_data.q$pub"),
	'the subscriber holds exactly the publisher\'s messages');
$holder->quit;

done_testing();
