# Compaction (issue 38, src/worker/vacuum.c): while a snapshot holds vacuum
# back, a table that keeps live rows (a queue with a backlog, the
# deduplication ids of a window) is never empty, so never recycled; once
# its dead rows reach half its live ones (and 10,000), the worker rewrites it
# with what the latest snapshot sees.  Every live row kept, exactly (ids,
# leases, receive counts, FIFO order, deduplication answers), also after a
# crash; never while the horizon is current; never under a transaction
# that has the table open (a writer, a reader's snapshot); never a table
# with a trigger or an index on an expression (the worker runs no user
# code); no logical decoding record; shared tables with another queue's
# rows kept; a table whose lock is free only for moments compacted too.
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

# (min_parallel_table_scan_size 0: an index rebuild asks for a parallel
# worker however small the table, as it does past 8 MB by default)
my $node = QueueWorkerNode::start("compact",
	"autovacuum = off\nwal_level = logical\nmin_parallel_table_scan_size = 0\n");

sub sql { return $node->safe_psql('postgres', @_); }
sub q_id { return QueueWorkerNode::queue_id($node, @_); }
sub filenode { return HeldSnapshot::filenode($node, @_); }
sub blocks { return HeldSnapshot::blocks($node, @_); }

# backlog(queue, n, keep, fifo): send n (a FIFO queue's over 50 groups,
# each with its own deduplication id), 100 a statement, then receive and
# delete all but keep of them, 10 a statement: every message it handled
# leaves two dead versions (its lease and its delete), and keep stay
my $rounds = 0;
sub backlog
{
	my ($queue, $n, $keep, $fifo) = @_;
	$rounds++;
	for my $b (1 .. $n / 100)
	{
		my $extra = $fifo
		  ? ", message_group_ids => ARRAY(SELECT 'g' || (s % 50) FROM generate_series(1, 100) s),"
		  . " deduplication_ids => ARRAY(SELECT '$rounds-$b-' || s FROM generate_series(1, 100) s)"
		  : '';
		sql("SELECT count(*) FROM queue.send_batch('$queue', array_fill('x'::text, ARRAY[100])$extra)");
	}
	for my $b (1 .. ($n - $keep) / 100)
	{
		sql(join('', map { qq(
			WITH r AS (SELECT receipt FROM queue.receive('$queue', max_messages => 10))
			SELECT count(*) FROM queue.delete_batch('$queue', ARRAY(SELECT receipt FROM r));) } 1 .. 10));
	}
}

# What a table holds, as the latest snapshot sees it (a digest of its rows).
sub rows_of
{
	my ($table, $cols, $where) = @_;
	return sql("SELECT count(*) || ' ' || md5(coalesce(string_agg(($cols)::text, ',' ORDER BY $cols), ''))"
		  . " FROM queue_data.$table WHERE " . ($where // "body <> 'poke'"));
}

sub burn_xids { HeldSnapshot::burn_xids($node); }

# A commit on the queue, so that the worker visits it: a message no test
# reads (its body 'poke', left out of every digest; a standard queue's
# delayed).
sub poke
{
	my ($queue) = @_;
	my $extra = $queue =~ /fifo$/
	  ? "message_group_id => 'poke', deduplication_id => 'poke-' || (extract(epoch FROM clock_timestamp()) * 1000000)::bigint"
	  : "delay => '10 min'";
	sql(qq(SELECT queue.send('$queue', 'poke', $extra)));
}

# (slept here, not in a statement: a running statement holds a snapshot,
# under which the worker removes nothing)
sub passes { my $s = $_[0] // 1.5; Time::HiRes::sleep($s); }

sub compacted_from
{
	my ($table, $old, $queue, $secs) = @_;
	for (1 .. ($secs // 10) * 10)
	{
		return 1 if sql("SELECT pg_relation_filenode('queue_data.$table') <> $old") eq 't';
		poke($queue) if $queue && $_ % 10 == 0;
		Time::HiRes::sleep(0.1);
	}
	diag(sql("SELECT n_live_tup, n_dead_tup FROM pg_stat_user_tables WHERE relid = 'queue_data.$table'::regclass"));
	return 0;
}

my $mcols = 'message_id, visible_at, receive_count, body';

# --- the horizon current: left to vacuum ----------------------------------

sql("SELECT queue.create('plain', dedicated => true)");
my $plain = q_id('plain');
passes(0.3);
my $fn = filenode("q$plain");
burn_xids();
backlog('plain', 12000, 1000, 0);
poke('plain');
passes();
is(filenode("q$plain"), $fn, 'without a held snapshot a table with a backlog is left to vacuum');

# --- a held snapshot: compacted, every live row kept ----------------------

my $holder = HeldSnapshot::hold($node);
burn_xids();

sql("SELECT queue.create('bk', dedicated => true)");
my $bk = q_id('bk');
passes(0.3);
$fn = filenode("q$bk");
sql("SELECT pg_stat_force_next_flush()");
# (a lock held meanwhile, so that the digest is taken before the worker can
# compact it)
my $locker = $node->background_psql('postgres');
$locker->query_safe("BEGIN; LOCK queue_data.q$bk IN ACCESS SHARE MODE");
backlog('bk', 12000, 1000, 0);
# one message in flight, its lease made longer
sql("SELECT queue.change_visibility('bk', receipt, '1 hour') FROM queue.receive('bk', visibility_timeout => '1 min')");
my $before = rows_of("q$bk", $mcols);
my $size = blocks("q$bk");
passes();
is(filenode("q$bk"), $fn, 'a table another transaction has open is not compacted');
$locker->query_safe('COMMIT');
$locker->quit;
ok(compacted_from("q$bk", $fn, 'bk'), 'held snapshot: the table with a backlog is compacted');
like($before, qr/^1000 /, 'it held 1,000 messages');
is(rows_of("q$bk", $mcols), $before, '... and holds the same, with their leases and counts');
cmp_ok(blocks("q$bk"), '<', $size / 4, "... in a quarter of its $size blocks at most");
is(sql("SELECT count(*) FROM queue_data.q$bk WHERE receive_count = 1 AND visible_at > now() + interval '50 min'"),
	'1', '... the message in flight still in flight');
cmp_ok(sql("SELECT n_dead_tup FROM pg_stat_user_tables WHERE relid = 'queue_data.q$bk'::regclass"),
	'<', 100, 'the statistics count (next to) no dead rows after it');
is(sql("SELECT count(*) FROM queue.receive('bk', max_messages => 10)"), '10', 'receives go on');

# --- a crash after it: nothing lost ----------------------------------------

# (a receive alone commits without waiting for the disk: durability.c; a
# crash may take its lease back, as an expired visibility timeout would.
# The send waits, and with it everything before.)
sql("SELECT queue.send('bk', 'after')");
$before = rows_of("q$bk", 'message_id, body');
$holder->quit;
$node->stop('immediate');
$node->start;
is(rows_of("q$bk", 'message_id, body'), $before,
	'after a crash the compacted table holds the same messages');
is(sql("SELECT count(*) FROM queue_data.q$bk WHERE receive_count = 1 AND visible_at > now() + interval '50 min'"),
	'1', '... the one in flight still in flight');
$holder = HeldSnapshot::hold($node);
burn_xids();

# --- a reader's snapshot of the table: not under it -----------------------

sql("SELECT queue.create('rd', dedicated => true)");
my $rd = q_id('rd');
passes(0.3);
$fn = filenode("q$rd");
my $reader = $node->background_psql('postgres');
$reader->query_safe('BEGIN ISOLATION LEVEL REPEATABLE READ');
$reader->query_safe("SELECT count(*) FROM queue_data.q$rd");
backlog('rd', 12000, 1000, 0);
poke('rd');
passes();
is(filenode("q$rd"), $fn, 'a table a REPEATABLE READ reader has read is not compacted');
is($reader->query_safe("SELECT count(*) FROM queue_data.q$rd"), '0', '... and the reader sees what it saw');
$reader->query_safe('COMMIT');
$reader->quit;
ok(compacted_from("q$rd", $fn, 'rd'), '... it is once the reader ends');

# --- a trigger, an index on an expression: never, no user code run --------

HeldSnapshot::mallory_trap($node);
$node->safe_psql('postgres',
	'CREATE FUNCTION public.key(text) RETURNS text LANGUAGE sql IMMUTABLE AS $$ SELECT upper($1) $$',
	extra_params => [ '-U', 'mallory' ]);
sql("SELECT queue.create('trig', dedicated => true)");
sql("SELECT queue.create('expr', dedicated => true)");
my ($trig, $expr) = (q_id('trig'), q_id('expr'));
sql("CREATE TRIGGER trap BEFORE TRUNCATE ON queue_data.q$trig FOR EACH STATEMENT EXECUTE FUNCTION public.trap()");
sql("CREATE INDEX expr_key ON queue_data.q$expr (public.key(body))");
passes(0.3);
my %fns = (trig => filenode("q$trig"), expr => filenode("q$expr"));
backlog('trig', 12000, 1000, 0);
backlog('expr', 12000, 1000, 0);
poke('trig');
poke('expr');
passes(3);
is(filenode("q$trig"), $fns{trig}, 'a table with a trigger is not compacted');
is(filenode("q$expr"), $fns{expr}, 'a table with an index on an expression is not compacted');
is(sql("SELECT count(*) FROM public.fired"), '0', '... and the trigger never ran');
is(sql("SELECT rolsuper FROM pg_roles WHERE rolname = 'mallory'"), 'f', 'mallory is no superuser');
sql("DROP INDEX queue_data.expr_key");

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
backlog('dec', 12000, 1000, 0);
ok(compacted_from("q$dec", $fn, 'dec'), 'decoded queue: compacted');
is( sql("SELECT count(*) FROM pg_logical_slot_get_changes('dec', NULL, NULL)"
		  . " WHERE data LIKE '%pg_temp%' OR data LIKE '%TRUNCATE%'"),
	'0',
	'... and nothing of it decoded');
sql("SELECT pg_drop_replication_slot('dec')");

# --- FIFO: messages, groups and deduplication ids --------------------------

sql("SELECT queue.create('f.fifo', fifo => true, dedicated => true)");
my $f = q_id('f.fifo');
passes(0.3);
my ($fq, $fd) = (filenode("q$f"), filenode("d$f"));
backlog('f.fifo', 12000, 1000, 1);
ok(compacted_from("q$f", $fq, 'f.fifo'), 'FIFO: the message table with a backlog is compacted');
# A receive's messages are the first of their groups, in order.
is( sql(qq(
	WITH r AS (SELECT message_group_id AS g, message_id AS id
	             FROM queue.receive('f.fifo', max_messages => 10, visibility_timeout => '0'))
	SELECT count(*) FILTER (WHERE
		(SELECT count(*) FROM queue_data.q$f m WHERE m.message_group_id = r.g AND m.message_id < r.id)
		<> (SELECT count(*) FROM r r2 WHERE r2.g = r.g AND r2.id < r.id)) || '/' || count(*) FROM r)),
	'0/10',
	'... a receive after it gets the first messages of their groups, in order');

# The deduplication ids past their window: the worker's sweep deletes
# them; here a superuser's DELETE stands in for it (the window is 20 s at
# least).
sql("DELETE FROM queue_data.d$f WHERE deduplication_id NOT LIKE '%-1' AND deduplication_id NOT LIKE '%-2'");
my $ours = "deduplication_id LIKE '$rounds-%'";
my $ids_before = rows_of("d$f", 'scope_key, deduplication_id, message_id', $ours);
like($ids_before, qr/^240 /, 'FIFO: 240 deduplication ids left in the window');
ok(compacted_from("d$f", $fd, 'f.fifo'), '... their table compacted');
is(rows_of("d$f", 'scope_key, deduplication_id, message_id', $ours), $ids_before,
	'... the ids in the window kept');
my $orig = sql("SELECT message_id FROM queue_data.d$f WHERE deduplication_id = '$rounds-7-1'");
is(sql("SELECT message_id || ' ' || duplicate FROM queue.send('f.fifo', 'again', message_group_id => 'g1', deduplication_id => '$rounds-7-1')"),
	"$orig true", '... a send of one of them is a duplicate of its message');
is(sql("SELECT duplicate FROM queue.send('f.fifo', 'new', message_group_id => 'g1', deduplication_id => '$rounds-7-3')"),
	'f', '... one whose id was forgotten is accepted');

# --- shared tables: every queue's rows kept --------------------------------

sql("SELECT queue.create('s1', dedicated => false)");
sql("SELECT queue.create('s2', dedicated => false)");
sql("SELECT queue.send('s2', 'kept')");
passes(0.3);
$fn = filenode('messages');
backlog('s1', 12000, 1000, 0);
ok(compacted_from('messages', $fn, 's1'), 'shared: the table with a backlog is compacted');
is(sql("SELECT body FROM queue.receive('s2')"), 'kept', '... another queue\'s message kept');
is(sql("SELECT count(*) FROM queue.receive('s1', max_messages => 10)"), '10', '... the backlog\'s receives go on');

# --- a table whose lock is rarely free: compacted all the same -------------
# The shared group table is opened by every send, receive and delete of
# every shared FIFO queue, so its lock is free only for moments between
# statements.  Here a session holds it 40 ms at a time, free for 3 ms in
# between, and the worker passes once a second: one try a pass finds it
# free about once in 15 passes (the 10-minute bench's group table, so
# tried, was never compacted), 25 tries 2 ms apart span a whole period and
# find it at the first pass; the check waits about 3 passes.

sql("SELECT queue.create('sf.fifo', fifo => true, dedicated => false)");
passes(0.3);
$fn = filenode('groups');
# (a lock held meanwhile, so that the digest is taken before the worker can
# compact it)
my $guard = $node->background_psql('postgres');
$guard->query_safe('BEGIN; LOCK TABLE queue_data.groups IN ROW EXCLUSIVE MODE');
backlog('sf.fifo', 1000, 1000, 1);
# 12,500 dead versions of the 50 group rows (a send, receive and delete
# each change their group's: a superuser's updates that change nothing
# stand in for them)
sql(q(DO $$ BEGIN
	FOR i IN 1 .. 250 LOOP UPDATE queue_data.groups SET leased_upto = leased_upto; END LOOP;
END $$));
my $gcols = 'store_id, message_group_id, head_seq, available_at, leased_upto';
my $heads = rows_of('groups', $gcols, 'true');
like($heads, qr/^50 /, 'shared FIFO: 50 groups with messages left');
is(filenode('groups'), $fn, '... not compacted while a transaction has it open');
# the busy table: a client holds its lock 40 ms, then lets go for 3 ms (a
# client-side sleep: no statement, so no snapshot, in the gap)
my $script = PostgreSQL::Test::Utils::tempdir() . '/busy.sql';
PostgreSQL::Test::Utils::append_to_file($script, q(BEGIN;
LOCK TABLE queue_data.groups IN ROW EXCLUSIVE MODE;
SELECT pg_catalog.pg_sleep(0.04);
COMMIT;
\sleep 3 ms
));
my $busy = IPC::Run::start([ 'pgbench', '-n', '-c', '1', '-T', '60', '-f', $script,
		'-h', $node->host, '-p', $node->port, 'postgres' ], '>', \my $busy_out, '2>', \my $busy_err);
sql("ALTER SYSTEM SET queue.sweep_interval = '1s'");
sql("SELECT pg_reload_conf()");
passes(1.2);
$guard->query_safe('COMMIT');
$guard->quit;
ok(compacted_from('groups', $fn, undef, 10), 'shared: the group table, its lock rarely free, is compacted');
is(rows_of('groups', $gcols, 'true'), $heads, '... every group\'s head kept');
is(sql("SELECT count(*) FROM queue.receive('sf.fifo', max_messages => 10)"), '10',
	'... its receives go on');
$busy->kill_kill;
sql("ALTER SYSTEM RESET queue.sweep_interval");
sql("SELECT pg_reload_conf()");

$holder->query_safe('COMMIT');
$holder->quit;
$node->stop;
done_testing();
