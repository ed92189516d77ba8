# Recycling (issue 38, src/worker/vacuum.c): while a snapshot holds vacuum
# back, the worker truncates a queue's table once it has grown past 8
# blocks and holds no live row, so the dead versions a held snapshot keeps
# do not pile up.  Never a live row lost: not one visible, in flight or
# left after a restart made the counters forget it (the check under the
# lock finds it, near the table's end or far from it), not one a running
# or prepared transaction is writing; never while the horizon is current;
# never a table with a trigger (the worker runs no user code); no logical
# decoding record; shared tables only when all their queues hold nothing.
use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes;
use QueueWorkerNode;
use HeldSnapshot;

my $node = QueueWorkerNode::start('recycle',
	"autovacuum = off\nmax_prepared_transactions = 2\nwal_level = logical\n");

sub sql { return $node->safe_psql('postgres', @_); }
sub q_id { return QueueWorkerNode::queue_id($node, @_); }
sub filenode { return HeldSnapshot::filenode($node, @_); }

# churn(queue, n, fifo): send n (on a FIFO queue over 50 groups, each with
# its own deduplication id), 100 a transaction, then receive and delete
# them, 10 at a time (a FIFO queue's 2 at a time, so that its group rows
# change often): the table holds all n before it empties
my $churns = 0;
sub churn
{
	my ($queue, $n, $fifo) = @_;
	$churns++;
	for my $b (1 .. $n / 100)
	{
		my $extra = $fifo
		  ? ", message_group_ids => ARRAY(SELECT 'g' || (s % 50) FROM generate_series(1, 100) s),"
		  . " deduplication_ids => ARRAY(SELECT '$churns-$b-' || s FROM generate_series(1, 100) s)"
		  : '';
		sql("SELECT count(*) FROM queue.send_batch('$queue', array_fill('x'::text, ARRAY[100])$extra)");
	}
	my $per = $fifo ? 2 : 10;
	for my $b (1 .. $n / 100)
	{
		sql(join('', map { qq(
			WITH r AS (SELECT receipt FROM queue.receive('$queue', max_messages => $per))
			SELECT count(*) FROM queue.delete_batch('$queue', ARRAY(SELECT receipt FROM r));) } 1 .. 100 / $per));
	}
}

# poke(queue): a send, received and deleted: a commit that has the worker
# visit the queue and leaves its counters as they were
sub poke { HeldSnapshot::poke($node, @_); }

sub blocks { return HeldSnapshot::blocks($node, @_); }

sub burn_xids { HeldSnapshot::burn_xids($node); }

# Several worker passes (100 ms each, 25 tries a pass).
# (slept here, not in a statement: a running statement holds a snapshot,
# under which the worker removes nothing)
sub passes { my $s = $_[0] // 1.5; Time::HiRes::sleep($s); }

sub recycled_from
{
	my ($table, $old) = @_;
	for (1 .. 300)
	{
		return 1 if sql("SELECT pg_relation_filenode('queue_data.$table') <> $old") eq 't';
		Time::HiRes::sleep(0.1);
	}
	diag(sql("SELECT pid, state, wait_event_type, wait_event, backend_xmin, left(query, 80) FROM pg_stat_activity WHERE backend_type = 'queue worker'"));
	diag(sql("SELECT locktype, relation::regclass, mode, granted, pid FROM pg_locks WHERE pid IN (SELECT pid FROM pg_stat_activity WHERE backend_type = 'queue worker')"));
	return 0;
}

# --- the horizon current: nothing recycled --------------------------------

sql("SELECT queue.create('plain', dedicated => true)");
my $plain = q_id('plain');
passes(0.3);
my $fn = filenode("q$plain");
burn_xids();
churn('plain', 2000, 0);
passes();
cmp_ok(blocks("q$plain"), '>=', 8, 'the churned table has grown past 8 blocks');
is(filenode("q$plain"), $fn, 'without a held snapshot it is left to vacuum');

# --- a held snapshot: recycled ---------------------------------------------

my $holder = HeldSnapshot::hold($node);
burn_xids();

sql("SELECT queue.create('r', dedicated => true)");
my $r = q_id('r');
passes(0.3);
$fn = filenode("q$r");
churn('r', 2000, 0);
ok(recycled_from("q$r", $fn), 'held snapshot: the emptied table is recycled');
cmp_ok(blocks("q$r"), '<', 8, '... and small again');
sql("SELECT queue.send('r', 'after')");
is(sql("SELECT body FROM queue.receive('r')"), 'after', 'a send after it is received');

# --- a running transaction's send: never recycled under it ----------------

sql("SELECT queue.create('open', dedicated => true)");
my $open = q_id('open');
passes(0.3);
my $writer = $node->background_psql('postgres');
$writer->query_safe('BEGIN');
$writer->query_safe("SELECT queue.send('open', 'uncommitted')");
$fn = filenode("q$open");
churn('open', 2000, 0);
passes();
cmp_ok(blocks("q$open"), '>=', 8, 'a table an open transaction writes, past 8 blocks,');
is(filenode("q$open"), $fn, '... is not recycled');
$writer->query_safe('COMMIT');
$writer->quit;
is(sql("SELECT body FROM queue.receive('open', visibility_timeout => '0')"), 'uncommitted',
	'... and its message is there once it commits');

# --- a prepared transaction's send ----------------------------------------

sql("SELECT queue.create('prep', dedicated => true)");
my $prep = q_id('prep');
passes(0.3);
sql("BEGIN; SELECT queue.send('prep', 'prepared'); PREPARE TRANSACTION 'p1'");
$fn = filenode("q$prep");
churn('prep', 2000, 0);
passes();
cmp_ok(blocks("q$prep"), '>=', 8, 'a table a prepared transaction wrote, past 8 blocks,');
is(filenode("q$prep"), $fn, '... is not recycled');
sql("COMMIT PREPARED 'p1'");
is(sql("SELECT body FROM queue.receive('prep', visibility_timeout => '0')"), 'prepared',
	'... and its message is there after COMMIT PREPARED');

# --- rows the counters do not know of: near the end, far from it --------
# The worker waits for the counters to say a queue holds nothing; the check
# under the lock must still find a live row they missed (written here by
# hand, as a lost count would leave it): one at the table's end, one at its
# start with every block after it dead, one in flight.

sql("SELECT queue.create('near', dedicated => true)");
sql("SELECT queue.create('far', dedicated => true)");
sql("SELECT queue.create('leased', dedicated => true)");
my ($near, $far, $leased) = (q_id('near'), q_id('far'), q_id('leased'));
passes(0.3);
sub hand_row
{
	my ($id, $body, $visible, $count) = @_;
	sql("INSERT INTO queue_data.q$id (message_id, visible_at, sent_at, receive_count, body)"
		  . " VALUES (1000000000, now() + interval '$visible', now(), $count, '$body')");
}
hand_row($far, 'first', '1 hour', 0);
my %fns = map { $_ => filenode("q$_") } ($near, $far, $leased);
# (a lock held meanwhile, so that they are not recycled when the churn
# empties them, before the rows at the end are written)
my $locker = $node->background_psql('postgres');
$locker->query_safe("BEGIN; LOCK queue_data.q$near, queue_data.q$leased IN ACCESS SHARE MODE");
churn('near', 2000, 0);
churn('far', 2000, 0);
churn('leased', 2000, 0);
hand_row($near, 'last', '1 hour', 0);
hand_row($leased, 'in flight', '1 hour', 1);
$locker->query_safe('COMMIT');
$locker->quit;
poke($_) for ('near', 'far', 'leased');
passes();
for my $name ('near', 'far', 'leased')
{
	is(sql("SELECT sent - deleted FROM queue.stats WHERE queue_name = '$name'"), '0',
		"$name: its counters say it holds nothing");
	cmp_ok(blocks('q' . q_id($name)), '>=', 8, "... and its table is past 8 blocks");
}
is(filenode("q$near"), $fns{$near}, 'a live row at the table\'s end: not recycled');
is(filenode("q$far"), $fns{$far}, 'a live row at its start, dead rows after it: not recycled');
is(filenode("q$leased"), $fns{$leased}, 'a row in flight: not recycled');
is(sql("SELECT body FROM queue_data.q$near"), 'last', 'the row at the end is there');
is(sql("SELECT body FROM queue_data.q$far"), 'first', 'the row at the start is there');
is(sql("SELECT receive_count || ' ' || (visible_at > now()) FROM queue_data.q$leased"), '1 true',
	'the row in flight is there, in flight');

# --- a table with a trigger: never recycled, the trigger never run --------

HeldSnapshot::mallory_trap($node);
sql("SELECT queue.create('trap', dedicated => true)");
my $trap = q_id('trap');
sql("CREATE TRIGGER trap BEFORE TRUNCATE ON queue_data.q$trap FOR EACH STATEMENT EXECUTE FUNCTION public.trap()");
passes(0.3);
$fn = filenode("q$trap");
churn('trap', 2000, 0);
passes();
cmp_ok(blocks("q$trap"), '>=', 8, 'a table with a trigger, past 8 blocks,');
is(filenode("q$trap"), $fn, '... is not recycled');
is(sql("SELECT count(*) FROM public.fired"), '0', '... and the trigger never ran');
is(sql("SELECT rolsuper FROM pg_roles WHERE rolname = 'mallory'"), 'f', 'mallory is no superuser');

# --- no logical decoding record ------------------------------------------

# (a logical slot is made only once no transaction id is open: the holder
# waits meanwhile)
$holder->quit;
sql("SELECT pg_create_logical_replication_slot('dec', 'test_decoding')");
$holder = HeldSnapshot::hold($node);
burn_xids();
sql("SELECT queue.create('dec', dedicated => true)");
my $dec = q_id('dec');
passes(0.3);
$fn = filenode("q$dec");
churn('dec', 2000, 0);
ok(recycled_from("q$dec", $fn), 'decoded queue: recycled');
is( sql("SELECT count(*) FROM pg_logical_slot_get_changes('dec', NULL, NULL)"
		  . " WHERE data LIKE '%TRUNCATE%'"),
	'0',
	'... and no TRUNCATE decoded');
sql("SELECT pg_drop_replication_slot('dec')");

# --- FIFO: both tables, order kept after --------------------------------

sql("SELECT queue.create('f.fifo', fifo => true, dedicated => true)");
my $f = q_id('f.fifo');
passes(0.3);
my ($fq, $fg) = (filenode("q$f"), filenode("g$f"));
churn('f.fifo', 2000, 1);
ok(recycled_from("q$f", $fq), 'FIFO: the message table is recycled');
ok(recycled_from("g$f", $fg), '... and the group table');
sql("SELECT queue.send('f.fifo', 'a' || i, message_group_id => 'g', deduplication_id => 'a' || i) FROM generate_series(1, 3) i");
is(sql("SELECT string_agg(body, ',') FROM queue.receive('f.fifo', max_messages => 10)"),
	'a1,a2,a3', '... a group\'s order after it');

# --- shared tables: only when all their queues hold nothing --------------

sql("SELECT queue.create('s1', dedicated => false)");
sql("SELECT queue.create('s2', dedicated => false)");
sql("SELECT queue.send('s2', 'kept')");
passes(0.3);
$fn = filenode('messages');
churn('s1', 2000, 0);
passes();
cmp_ok(blocks('messages'), '>=', 8, 'shared: the table past 8 blocks');
is(filenode('messages'), $fn, '... another queue holds a message: not recycled');
sql(q(
	WITH r AS (SELECT receipt FROM queue.receive('s2'))
	SELECT count(*) FROM queue.delete_batch('s2', ARRAY(SELECT receipt FROM r))));
ok(recycled_from('messages', $fn), '... recycled once none does');
sql("SELECT queue.send('s1', 'new')");
is(sql("SELECT body FROM queue.receive('s1')"), 'new', 'the shared queue works after');

$holder->query_safe('COMMIT');
$holder->quit;
$node->stop;
done_testing();
