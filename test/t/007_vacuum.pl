# The worker vacuums a queue's tables once the messages handled since its
# last vacuum (received, deleted, expired, moved) reach 1,000 and the number
# the queue holds: a busy queue's dead rows do not wait for autovacuum
# (turned off here, so every vacuum seen is the worker's).  A queue that
# holds more than it churned is left alone.  Shared queues' tables go by
# the churn of all their queues together.
use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use QueueWorkerNode;

my $node = QueueWorkerNode::start('vacuum', "autovacuum = off\n");

sub q_id { return QueueWorkerNode::queue_id($node, @_); }

sub vacuums
{
	my ($table) = @_;
	$node->safe_psql('postgres', 'SELECT pg_stat_clear_snapshot()');
	return $node->safe_psql('postgres',
		"SELECT coalesce(sum(vacuum_count), 0) FROM pg_stat_user_tables"
		  . " WHERE schemaname = 'queue_data' AND relname = '$table'");
}

# vacuumed(min, tables...): wait until each of queue_data's tables has
# been vacuumed more than min times
sub vacuumed
{
	my ($min, @tables) = @_;
	my $list = join(', ', map { "'queue_data.$_'::regclass" } @tables);
	return $node->poll_query_until('postgres',
		"SELECT bool_and(vacuum_count > $min) FROM pg_stat_user_tables WHERE relid IN ($list)");
}

# cycle(queue, n, fifo): send n (on a FIFO queue over 7 groups, each with
# its own deduplication id), receive and delete them, 100 at a time.
sub cycle
{
	my ($queue, $n, $fifo) = @_;
	for my $b (1 .. $n / 100)
	{
		my $extra = $fifo
		  ? ", message_group_ids => ARRAY(SELECT 'g' || (s % 7) FROM generate_series(1, 100) s),"
		  . " deduplication_ids => ARRAY(SELECT '$b-' || s FROM generate_series(1, 100) s)"
		  : '';
		$node->safe_psql('postgres',
			"SELECT count(*) FROM queue.send_batch('$queue', array_fill('x'::text, ARRAY[100])$extra)");
		$node->safe_psql('postgres', qq(
			WITH r AS (SELECT receipt FROM queue.receive('$queue', max_messages => 100))
			SELECT count(*) FROM queue.delete_batch('$queue', ARRAY(SELECT receipt FROM r))));
	}
}

# --- a standard queue that churned 2,000 messages and holds none ----------

$node->safe_psql('postgres', "SELECT queue.create('busy')");
my $busy = q_id('busy');
# The worker must have seen the queue before it churns (it counts from there).
$node->safe_psql('postgres', "SELECT pg_sleep(0.3)");
is(vacuums("q$busy"), '0', 'no vacuum before the queue churned');
cycle('busy', 2000, 0);
ok(vacuumed(0, "q$busy"), 'the worker vacuumed the churned message table');

# --- a FIFO queue: its group table too --------------------------------------

$node->safe_psql('postgres', "SELECT queue.create('busy.fifo', fifo => true)");
my $fifo = q_id('busy.fifo');
$node->safe_psql('postgres', "SELECT pg_sleep(0.3)");
cycle('busy.fifo', 2000, 1);
ok(vacuumed(0, "q$fifo", "g$fifo"), 'the worker vacuumed the FIFO queue\'s message and group tables');
is( $node->safe_psql('postgres',
		"SELECT count(*) FROM queue_data.g$fifo"),
	'0', 'every group emptied, every group row gone');

# --- a queue holding more than it churned is left alone --------------------

$node->safe_psql('postgres', "SELECT queue.create('deep')");
my $deep = q_id('deep');
$node->safe_psql('postgres', "SELECT pg_sleep(0.3)");
$node->safe_psql('postgres',
	"SELECT count(*) FROM generate_series(1, 5) g,"
	  . " LATERAL queue.send_batch('deep', array_fill('x' || g, ARRAY[1000]))");
is($node->safe_psql('postgres', "SELECT visible FROM queue.stats WHERE queue_name = 'deep'"),
	'5000', 'the deep queue holds 5,000');
$node->safe_psql('postgres', qq(
	WITH r AS (SELECT receipt FROM queue.receive('deep', max_messages => 1000))
	SELECT count(*) FROM queue.delete_batch('deep', ARRAY(SELECT receipt FROM r))));
# Several passes go by (100 ms each); 1,000 handled < 4,000 held.
$node->safe_psql('postgres', "SELECT pg_sleep(1)");
is($node->safe_psql('postgres', "SELECT visible FROM queue.stats WHERE queue_name = 'deep'"),
	'4000', 'and 4,000 after a receive and delete of 1,000');
is(vacuums("q$deep"), '0', 'a queue holding more than it churned is not vacuumed');

# --- shared queues: their tables are vacuumed for all of them -------------
# (DESIGN.md "Storage"): a shared table is vacuumed once its queues together
# churned 1,000 and as many messages as it holds (at most 10,000), not for
# each queue: a small busy queue beside a deep one does not have the deep
# one's indexes read over and over.

$node->safe_psql('postgres', "SELECT queue.create('s_busy', dedicated => false)");
$node->safe_psql('postgres', "SELECT queue.create('s_busy.fifo', fifo => true, dedicated => false)");
$node->safe_psql('postgres', "SELECT pg_sleep(0.3)");
is(vacuums('messages'), '0', 'no vacuum of the shared table before its queues churned');
cycle('s_busy', 2000, 0);
ok(vacuumed(0, 'messages'), 'the worker vacuumed the shared message table its queue churned');
cycle('s_busy.fifo', 2000, 1);
ok(vacuumed(0, 'fifo_messages', 'groups'), 'the worker vacuumed the shared FIFO message and group tables');

# A deep shared queue of 20,000 beside a small busy one: 2,000 churned is
# not enough for the table, 10,000 (the most it waits for) is.
$node->safe_psql('postgres', q(
SELECT queue.create('s_deep', dedicated => false);
SELECT count(*) FROM generate_series(1, 20) g,
	LATERAL queue.send_batch('s_deep', array_fill('x' || g, ARRAY[1000]));
ANALYZE queue_data.messages;
));
$node->safe_psql('postgres', "SELECT pg_sleep(0.3)");
my $before = vacuums('messages');
cycle('s_busy', 2000, 0);
$node->safe_psql('postgres', "SELECT pg_sleep(1)");
is(vacuums('messages'), $before, 'a small queue\'s 2,000 beside a deep one of 20,000: no vacuum of the shared table');
cycle('s_busy', 8000, 0);
ok(vacuumed($before, 'messages'), '... after 10,000 churned together, one');

$node->stop;
done_testing();
