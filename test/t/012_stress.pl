# Concurrency stress, bounded in time: 8 producers (pgbench) and 8
# consumers (6 pgbench clients, 2 psql sessions whose waiting receives are
# cancelled by statement_timeout) on standard and FIFO queues, with random
# visibility timeouts (0 to 2 s, some running out before the delete, some
# changed by change_visibility), rolled-back sends, receives and deletes,
# duplicate sends, then a final drain.
#
# Producers log each committed send in a table in the same transaction (the
# outbox pattern); consumers log each receive, and each successful delete
# with its receipt and a serial number, in the same transaction.  Then:
# nothing sent is lost, every message is deleted successfully exactly once
# (so two receipts of one message were never both valid), the counters of
# queue.stats agree, the queues are empty, every FIFO group was received one
# consumer at a time and deleted in sequence order, and the server logged no
# deadlock and no error but the cancels.
#
# First, deterministically: a waiting receive cancelled inside one of its
# tries (not in the sleep between them) leaves its session usable.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use IPC::Run;

my $duration = 20;    # seconds of load
my $rate = 600;       # producer transactions a second (pgbench -R)

my $node = PostgreSQL::Test::Cluster->new('stress');
$node->init;
$node->append_conf(
	'postgresql.conf', qq(
shared_preload_libraries = 'queue'
queue.sweep_interval = '100ms'
log_statement = none
max_connections = 40
deadlock_timeout = '100ms'
));
$node->start;

sub sql
{
	my ($query) = @_;
	return $node->safe_psql('postgres', $query);
}

sql(q{
CREATE EXTENSION queue;
SELECT queue.create('ss', visibility_timeout => '1 s');
SELECT queue.create('sf.fifo', fifo => true, visibility_timeout => '1 s');
-- Fed slowly, for receives that wait and are cancelled.
SELECT queue.create('sl', visibility_timeout => '1 s');
SELECT queue.create('slf.fifo', fifo => true, visibility_timeout => '1 s');

-- Committed sends, logged in the sending transaction.
CREATE TABLE produced (q text, message_id bigint, grp text, dedup text, duplicate bool);
-- Successful deletes, logged in the deleting transaction; serial orders them.
CREATE TABLE deleted (serial bigserial, q text, message_id bigint, receipt text,
                      grp text, seq bigint);
-- Deletes refused: stale receipt (55000) or message gone (false).
CREATE TABLE refused (q text, message_id bigint, why text);
CREATE SEQUENCE dseq;

-- Every message a receive returned, in the receiving transaction; batch
-- tells one receive call from another.
CREATE TABLE received (serial bigserial, batch bigint, q text, message_id bigint,
                       grp text, seq bigint);
CREATE SEQUENCE bseq;

-- Receive one message and log it; always one row (message id 0 if none).
CREATE FUNCTION t_recv(q text, vt int, w interval DEFAULT '0')
RETURNS TABLE (mid bigint, rc text, grp text, seq bigint) LANGUAGE plpgsql AS $$
DECLARE
	m record;
	b bigint := nextval('bseq');
BEGIN
	mid := 0; rc := ''; grp := ''; seq := 0;
	FOR m IN SELECT * FROM queue.receive(q, 1, visibility_timeout => make_interval(secs => vt), wait => w) LOOP
		mid := m.message_id;
		rc := m.receipt;
		grp := coalesce(m.message_group_id, '');
		seq := coalesce(m.sequence_number, 0);
		INSERT INTO received VALUES (DEFAULT, b, q, m.message_id, m.message_group_id, m.sequence_number);
	END LOOP;
	RETURN NEXT;
END $$;

-- Change a message's visibility; a stale receipt or a message gone since
-- (55000) is noted.
CREATE FUNCTION t_chg(q text, mid bigint, rc text, vt int)
RETURNS text LANGUAGE plpgsql AS $$
BEGIN
	IF mid = 0 THEN
		RETURN 'none';
	END IF;
	PERFORM queue.change_visibility(q, rc, make_interval(secs => vt));
	RETURN 'changed';
EXCEPTION WHEN object_not_in_prerequisite_state THEN
	INSERT INTO refused VALUES (q, mid, 'stale change');
	RETURN 'stale';
END $$;

-- Delete with a receipt and log the outcome.
CREATE FUNCTION t_del(q text, mid bigint, rc text, grp text, seq bigint)
RETURNS text LANGUAGE plpgsql AS $$
BEGIN
	IF mid = 0 THEN
		RETURN 'none';
	END IF;
	IF queue.delete(q, rc) THEN
		INSERT INTO deleted (q, message_id, receipt, grp, seq)
			VALUES (q, mid, rc, nullif(grp, ''), nullif(seq, 0));
		RETURN 'deleted';
	END IF;
	INSERT INTO refused VALUES (q, mid, 'gone');
	RETURN 'gone';
EXCEPTION WHEN object_not_in_prerequisite_state THEN
	INSERT INTO refused VALUES (q, mid, 'stale');
	RETURN 'stale';
END $$;

-- Receive up to n messages and delete them in the same transaction, in
-- sequence order.
CREATE FUNCTION t_batch(q text, n int, vt int) RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
	m record;
	k bigint := 0;
	b bigint := nextval('bseq');
BEGIN
	FOR m IN SELECT * FROM queue.receive(q, n, visibility_timeout => make_interval(secs => vt))
	         ORDER BY sequence_number NULLS LAST, message_id LOOP
		INSERT INTO received VALUES (DEFAULT, b, q, m.message_id, m.message_group_id, m.sequence_number);
		IF t_del(q, m.message_id, m.receipt, coalesce(m.message_group_id, ''),
		         coalesce(m.sequence_number, 0)) = 'deleted' THEN
			k := k + 1;
		END IF;
	END LOOP;
	RETURN k;
END $$;
});

ok( $node->poll_query_until(
		'postgres',
		"SELECT count(*) = 1 FROM pg_stat_activity WHERE backend_type = 'queue worker'"
	),
	'worker runs');

# --- A waiting receive cancelled inside a try leaves the session usable -----

# A try of a waiting receive is held up by a lock (another session holds
# SHARE on the queue's message table, which blocks the receive's UPDATE and
# nothing before it), so the statement_timeout lands inside the try rather
# than in the sleep between tries.  Afterwards the same session must work:
# no "current transaction is aborted", and ROLLBACK must not kill it.
for my $q ('ss', 'sf.fifo')
{
	my $table = sql("SELECT 'queue_data.q' || queue_id FROM queue.queues WHERE queue_name = '$q'");
	my $locker = $node->background_psql('postgres');
	$locker->query_safe("BEGIN; LOCK TABLE $table IN SHARE MODE");
	my ($ret, $out, $err) = $node->psql(
		'postgres', qq{
SET statement_timeout = '300ms';
SELECT * FROM queue.receive('$q', wait => '5 s');
RESET statement_timeout;
SELECT 'usable';
ROLLBACK;
SELECT 'still connected';
},
		on_error_stop => 0);
	$locker->query_safe('COMMIT');
	$locker->quit;
	like($err, qr/canceling statement due to statement timeout/,
		"$q: statement_timeout cancels a waiting receive held up inside a try");
	is($out, "usable\nstill connected",
		"$q: the session is usable afterwards (no leaked subtransaction)")
	  or diag "stderr: $err";
}

# --- pgbench scripts ----------------------------------------------------------

my $dir = PostgreSQL::Test::Utils::tempdir;

my %producer = (
	# Standard send, sometimes delayed 1 or 2 s.
	p_std => q{
\set d random(0, 9)
INSERT INTO produced (q, message_id)
  SELECT 'ss', message_id FROM queue.send('ss', 'std', delay => make_interval(secs => greatest(:d - 7, 0)));
},
	p_std_batch => q{
INSERT INTO produced (q, message_id)
  SELECT 'ss', message_id FROM queue.send_batch('ss', ARRAY['b1', 'b2', 'b3']);
},
	# FIFO send to one of ten groups that every producer shares.
	p_fifo => q{
\set g random(0, 9)
SELECT nextval('dseq') AS u \gset
INSERT INTO produced (q, message_id, grp, dedup, duplicate)
  SELECT 'sf.fifo', message_id, 'g' || :g, 'u' || :u, duplicate
    FROM queue.send('sf.fifo', 'fifo', message_group_id => 'g' || :g, deduplication_id => 'u' || :u);
},
	# FIFO sends of ids that other producers send too: one is enqueued.
	p_fifo_dup => q{
\set r random(1, 300)
INSERT INTO produced (q, message_id, grp, dedup, duplicate)
  SELECT 'sf.fifo', message_id, 'gd', 'r' || :r, duplicate
    FROM queue.send('sf.fifo', 'dup', message_group_id => 'gd', deduplication_id => 'r' || :r);
},
	# Sends rolled back: neither the message nor its log row stays.
	p_rollback => q{
\set g random(0, 9)
BEGIN;
INSERT INTO produced (q, message_id) SELECT 'ss', message_id FROM queue.send('ss', 'rolled back');
INSERT INTO produced (q, message_id, grp, dedup, duplicate)
  SELECT 'sf.fifo', message_id, 'g' || :g, 'x', duplicate
    FROM queue.send('sf.fifo', 'rolled back', message_group_id => 'g' || :g, deduplication_id => 'rb');
ROLLBACK;
},
	# The slow queues, received by waiting (and cancelled) receives.
	p_slow => q{
\set g random(0, 2)
SELECT nextval('dseq') AS u \gset
INSERT INTO produced (q, message_id) SELECT 'sl', message_id FROM queue.send('sl', 'slow');
INSERT INTO produced (q, message_id, grp, dedup, duplicate)
  SELECT 'slf.fifo', message_id, 's' || :g, 'u' || :u, duplicate
    FROM queue.send('slf.fifo', 'slow', message_group_id => 's' || :g, deduplication_id => 'u' || :u);
},);
my @producer_weights =
  (p_std => 12, p_std_batch => 2, p_fifo => 12, p_fifo_dup => 4, p_rollback => 2, p_slow => 1);

# A consumer's hold between receive and delete: mostly short, sometimes
# longer than a lease.
my $hold = q{
\set h random(0, 39)
\if :h = 39
\sleep 1500 ms
\elif :h >= 37
\sleep 200 ms
\endif
};
my %consumer = (
	c_std => qq{
\\set vt random(0, 2)
SELECT * FROM t_recv('ss', :vt) \\gset
$hold
SELECT t_del('ss', :mid, :rc, :grp, :seq);
},
	c_fifo => qq{
\\set vt random(0, 2)
SELECT * FROM t_recv('sf.fifo', :vt) \\gset
$hold
SELECT t_del('sf.fifo', :mid, :rc, :grp, :seq);
},
	# Leases extended, shortened or handed back before the delete.
	c_change => q{
\set vt random(0, 2)
\set vt2 random(0, 2)
SELECT * FROM t_recv('sf.fifo', :vt) \gset
SELECT t_chg('sf.fifo', :mid, :rc, :vt2);
SELECT t_del('sf.fifo', :mid, :rc, :grp, :seq);
SELECT * FROM t_recv('ss', :vt) \gset
SELECT t_chg('ss', :mid, :rc, :vt2);
SELECT t_del('ss', :mid, :rc, :grp, :seq);
},
	c_batch => q{
\set vt random(0, 2)
SELECT t_batch('ss', 5, :vt);
SELECT t_batch('sf.fifo', 5, :vt);
},
	# Receives rolled back: the messages are visible again at once.
	c_rollback_receive => q{
BEGIN;
SELECT count(*) FROM queue.receive('ss', 3, visibility_timeout => '10 s');
SELECT count(*) FROM queue.receive('sf.fifo', 3, visibility_timeout => '10 s');
ROLLBACK;
},
	# Deletes rolled back: the message stays leased until its lease ends.
	c_rollback_delete => q{
\set vt random(0, 2)
SELECT * FROM t_recv('sf.fifo', :vt) \gset
BEGIN;
SELECT t_del('sf.fifo', :mid, :rc, :grp, :seq);
ROLLBACK;
SELECT * FROM t_recv('ss', :vt) \gset
BEGIN;
SELECT t_del('ss', :mid, :rc, :grp, :seq);
ROLLBACK;
},);
my @consumer_weights = (
	c_std => 4,
	c_fifo => 4,
	c_change => 1,
	c_batch => 3,
	c_rollback_receive => 1,
	c_rollback_delete => 1);

sub pgbench_args
{
	my ($scripts, @weights) = @_;
	my @args;
	while (my ($name, $w) = splice(@weights, 0, 2))
	{
		my $file = "$dir/$name.sql";
		open my $fh, '>', $file or die "could not write $file: $!";
		print $fh $scripts->{$name};
		close $fh;
		push @args, '-f', "$file\@$w";
	}
	return @args;
}

# --- Two consumers in psql: waiting receives, cancelled at top level -------

# psql goes on after an error; statement_timeout cancels a receive waiting on
# a slow queue, sometimes inside a transaction block.  They stop at a
# deadline of the server's clock.
my $deadline =
  sql("SELECT clock_timestamp() + interval '$duration s'");
srand(12);
my %in_block;    # waiter script line numbers inside BEGIN ... COMMIT
sub waiter_script
{
	my ($w) = @_;
	my @lines;
	for my $i (1 .. 20000)
	{
		my $q = $i % 2 ? 'sl' : 'slf.fifo';
		my $timeout = 20 + int(rand(300));
		my $vt = int(rand(3));
		my $block = rand() < 0.3;
		push @lines,
		  "SELECT clock_timestamp() > '$deadline' AS stop \\gset",
		  '\\if :stop', '\\q', '\\endif',
		  '\\set mid 0', "\\set rc ''", "\\set grp ''", '\\set seq 0';
		push @lines, 'BEGIN;' if $block;
		my $first = @lines + 1;
		push @lines, "SET statement_timeout = '${timeout}ms';",
		  "SELECT * FROM t_recv('$q', $vt, '2 s') \\gset",
		  'RESET statement_timeout;';
		if ($block)
		{
			$in_block{$w}{$_} = 1 for $first .. scalar(@lines);
			push @lines, 'COMMIT;';
		}
		push @lines, "SELECT t_del('$q', :mid, :'rc', :'grp', :seq);";
	}
	return join("\n", @lines) . "\n";
}

# --- Run -----------------------------------------------------------------------

my @common = ('-n', '-M', 'prepared', '-T', $duration, '-c', 8, '-j', 2, '-R', $rate);
my ($pout, $perr, $cout, $cerr) = ('', '', '', '');
my $producers = IPC::Run::start(
	[
		'pgbench', @common,
		pgbench_args(\%producer, @producer_weights),
		$node->connstr('postgres')
	],
	'>', \$pout, '2>', \$perr);
my @consumer_args = pgbench_args(\%consumer, @consumer_weights);
my $consumers = IPC::Run::start(
	[
		'pgbench', @common[ 0 .. 2 ], '-T', $duration + 1, '-c', 6, '-j', 2,
		@consumer_args, $node->connstr('postgres')
	],
	'>', \$cout, '2>', \$cerr);
my @waiters;
for my $w (1 .. 2)
{
	my $file = "$dir/waiter$w.sql";
	open my $fh, '>', $file or die "could not write $file: $!";
	print $fh waiter_script($w);
	close $fh;
	push @waiters,
	  IPC::Run::start(
		[
			'psql', '-X', '-q', '-A', '-t', '-v', 'ON_ERROR_STOP=0',
			'-d', $node->connstr('postgres'), '-f', $file
		],
		'>', "$dir/waiter$w.out", '2>', "$dir/waiter$w.err");
}

$producers->finish;
my $prc = $?;
$consumers->finish;
my $crc = $?;
$_->finish for @waiters;

is($prc, 0, 'producers (pgbench, 8 clients) ran without error')
  or diag "pgbench producers:\n$pout\n$perr";
is($crc, 0, 'consumers (pgbench, 6 clients) ran without error')
  or diag "pgbench consumers:\n$cout\n$cerr";
for my $out ($pout, $cout)
{
	note $1 if $out =~ /^(number of transactions actually processed: .*)$/m;
}

# A waiter may see its receives cancelled, and, inside a transaction block
# only, the statements after a cancel refused; anything else is a failure.
my ($cancelled, $other_errors) = (0, 0);
for my $w (1 .. 2)
{
	for my $line (split /\n/, slurp_file("$dir/waiter$w.err"))
	{
		next unless $line =~ /(?:ERROR|FATAL|PANIC):|connection|server closed/;
		my ($n) = $line =~ /waiter$w\.sql:(\d+):/;
		if ($line =~ /ERROR:  canceling statement due to statement timeout/)
		{
			$cancelled++;
		}
		elsif ($line =~ /ERROR:  current transaction is aborted/
			&& defined $n
			&& $in_block{$w}{$n})
		{
			next;
		}
		else
		{
			$other_errors++;
			diag "waiting consumer $w: $line" if $other_errors <= 10;
		}
	}
}
note "waiting receives cancelled by statement_timeout: $cancelled";
is($other_errors, 0, 'the waiting consumers (psql) saw no error but cancels');

# --- Drain ---------------------------------------------------------------------

note 'left for the drain: '
  . sql('SELECT sum(visible + in_flight + delayed) FROM queue.stats');

# Delayed messages and leases still running end within 2 s.
ok( $node->poll_query_until(
		'postgres', q{
SELECT t_batch('ss', 1000, 60) + t_batch('sf.fifo', 1000, 60)
     + t_batch('sl', 1000, 60) + t_batch('slf.fifo', 1000, 60) >= 0
   AND NOT EXISTS (SELECT FROM queue.peek('ss', 1))
   AND NOT EXISTS (SELECT FROM queue.peek('sf.fifo', 1))
   AND NOT EXISTS (SELECT FROM queue.peek('sl', 1))
   AND NOT EXISTS (SELECT FROM queue.peek('slf.fifo', 1))
}),
	'the final drain empties every queue');

# --- Checks -----------------------------------------------------------------

my $through = sql("SELECT count(*) FROM produced WHERE NOT coalesce(duplicate, false)");
note "stress: $through messages sent and deleted, "
  . sql("SELECT count(*) FROM produced WHERE duplicate") . ' duplicate sends, '
  . sql("SELECT count(*) FROM received") . ' receives, '
  . sql("SELECT count(*) FROM refused WHERE why = 'stale'") . ' stale receipts refused, '
  . sql("SELECT count(*) FROM refused WHERE why = 'stale change'") . ' stale visibility changes refused, '
  . sql("SELECT count(*) FROM refused WHERE why = 'gone'") . ' deletes of gone messages';
note 'per queue (sent/deleted): ' . sql(
	"SELECT string_agg(format('%s %s/%s', queue_name, sent, deleted), ', ' ORDER BY queue_name) FROM queue.stats"
);
cmp_ok($through, '>', 0, 'messages went through');

is( sql(q{
SELECT count(*) FROM produced p
 WHERE NOT coalesce(duplicate, false)
   AND NOT EXISTS (SELECT FROM deleted d WHERE d.q = p.q AND d.message_id = p.message_id)
}),
	'0',
	'zero lost: every message sent was deleted');
is( sql(q{
SELECT count(*) FROM deleted d
 WHERE NOT EXISTS (SELECT FROM produced p WHERE p.q = d.q AND p.message_id = d.message_id
                                            AND NOT coalesce(p.duplicate, false))
}),
	'0',
	'every message deleted was sent and committed');
is( sql(q{
SELECT count(*) FROM (SELECT q, message_id FROM deleted GROUP BY 1, 2 HAVING count(*) > 1) x
}),
	'0',
	'each message was deleted successfully once: never two valid receipts');
is( sql(q{
SELECT count(*) FROM (SELECT q, message_id FROM produced WHERE NOT coalesce(duplicate, false)
                       GROUP BY 1, 2 HAVING count(*) > 1) x
}),
	'0',
	'no message id was returned for two sends');

# Deduplication: one message per id; each duplicate names it.
is( sql(q{
SELECT count(*) FROM (SELECT q, dedup FROM produced WHERE NOT duplicate
                       GROUP BY 1, 2 HAVING count(*) > 1) x
}),
	'0',
	'concurrent sends of one deduplication id enqueued one message');
is( sql(q{
SELECT count(*) FROM produced d WHERE duplicate
   AND NOT EXISTS (SELECT FROM produced p WHERE NOT p.duplicate AND p.q = d.q
                      AND p.dedup = d.dedup AND p.message_id = d.message_id)
}),
	'0',
	'every duplicate send returned the id of the message enqueued for its id');

# queue.stats agrees, and every queue is empty.
is( sql(q{
SELECT string_agg(format('%s sent %s deleted %s dedup %s', s.queue_name, s.sent, s.deleted, s.deduplicated),
                  ', ' ORDER BY s.queue_name)
  FROM queue.stats s
}),
	sql(q{
SELECT string_agg(format('%s sent %s deleted %s dedup %s', q,
                         (SELECT count(*) FROM produced p WHERE p.q = n.q AND NOT coalesce(duplicate, false)),
                         (SELECT count(*) FROM deleted d WHERE d.q = n.q),
                         (SELECT count(*) FROM produced p WHERE p.q = n.q AND duplicate)),
                  ', ' ORDER BY q)
  FROM (VALUES ('ss'), ('sf.fifo'), ('sl'), ('slf.fifo')) n (q)
}),
	'queue.stats counters: sent, deleted and deduplicated match the logs');
is( sql(q{
SELECT sum(visible + in_flight + delayed) FROM queue.stats
}),
	'0',
	'queue.stats: nothing visible, in flight or delayed after the drain');
my @tables = split /\n/, sql("SELECT 'queue_data.q' || queue_id FROM queue.queues ORDER BY queue_id");
is( sql('SELECT ' . join(' + ', map { "(SELECT count(*) FROM $_)" } @tables)),
	'0', 'the message tables are empty');

# FIFO: in every group, deletes follow sequence order.
is( sql(q{
SELECT count(*) FROM (
  SELECT q, grp, seq, lag(seq) OVER (PARTITION BY q, grp ORDER BY serial) AS prev
    FROM deleted WHERE q IN ('sf.fifo', 'slf.fifo')) x
 WHERE seq <= prev
}),
	'0',
	'per-group order intact: every FIFO group was deleted in sequence order');
# FIFO: no receive returned a message while an earlier message of its group
# was still there (deleted later), unless that one came in the same receive.
is( sql(q{
CREATE INDEX ON deleted (q, grp, seq);
SELECT count(*) FROM received r
  CROSS JOIN LATERAL (SELECT * FROM deleted d
                       WHERE d.q = r.q AND d.grp = r.grp AND d.seq < r.seq
                       ORDER BY d.seq DESC LIMIT 1) p
 WHERE r.q IN ('sf.fifo', 'slf.fifo')
   AND p.serial > r.serial
   AND NOT EXISTS (SELECT FROM received b WHERE b.batch = r.batch AND b.q = p.q
                      AND b.message_id = p.message_id)
}),
	'0',
	'one consumer at a time per group: no message received before the one ahead of it was deleted');
my $groups = sql(
	"SELECT count(DISTINCT (q, grp)) FROM deleted WHERE q IN ('sf.fifo', 'slf.fifo')");
note "$groups FIFO groups";

# No deadlock, no crash.
my $log = slurp_file($node->logfile);
my $deadlocks = () = $log =~ /deadlock detected/g;
is($deadlocks, 0, 'no deadlock detected');
unlike($log, qr/PANIC|TRAP:|terminated by signal/, 'no crash');
my @errors = grep { !/canceling statement due to statement timeout|current transaction is aborted/ }
  ($log =~ /^.*(?:ERROR|FATAL):.*$/mg);
is(scalar(@errors), 0, 'no error in the server log but the cancels')
  or diag join("\n", @errors[ 0 .. ($#errors < 9 ? $#errors : 9) ]);

# --- The same, caught in PL/pgSQL -----------------------------------------------

# A consumer that catches the error of a waiting receive (here a lock
# timeout inside a try) in an EXCEPTION block goes on in autocommit: what it
# sends next is acknowledged, so it must be committed, and the session's end
# must not take the server down.  (Last in this file: a failure here may
# crash the server.)
{
	my $table = sql("SELECT 'queue_data.q' || queue_id FROM queue.queues WHERE queue_name = 'ss'");
	my $locker = $node->background_psql('postgres');
	$locker->query_safe("BEGIN; LOCK TABLE $table IN SHARE MODE");
	my ($ret, $out, $err) = $node->psql(
		'postgres', q{
SET lock_timeout = '300ms';
DO $$
BEGIN
	PERFORM * FROM queue.receive('ss', wait => '5 s');
EXCEPTION WHEN lock_not_available THEN
	RAISE NOTICE 'caught';
END $$;
SELECT message_id FROM queue.send('sl', 'after a caught error');
},
		on_error_stop => 0);
	# The locker dies with the server if the server crashed.
	eval { $locker->query_safe('COMMIT'); $locker->quit; };
	like($err, qr/NOTICE:  caught/, 'the lock timeout inside a try is caught in PL/pgSQL');
	like($out, qr/^\d+$/, 'the next send is acknowledged') or diag "stderr: $err";
	my ($r2, $found) = $node->psql('postgres',
		"SELECT count(*) FROM queue.peek('sl', 10) WHERE body = 'after a caught error'");
	is($found, '1', 'and committed: another session sees it');
	unlike(slurp_file($node->logfile), qr/terminated by signal/,
		'the session ends without crashing the server');
}

$node->stop('fast', fail_ok => 1);
done_testing();
