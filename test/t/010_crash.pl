# Crash: kill -9 of the postmaster (and then of every process it had started)
# under concurrent send / receive / delete load on a standard and a FIFO
# queue, then a restart.  Each client is a psql process reading a generated
# script in autocommit mode; what it prints has been committed (psql prints a
# statement's result only after the server reported it complete, which for an
# autocommit statement is after its commit).  So the clients' output is the
# record of what was acknowledged, kept outside the database.
#
# After the restart: every acknowledged send is there, or was acknowledged
# deleted, or is the one message a receiver was deleting when the server died;
# no acknowledged delete comes back; in every FIFO group the messages are
# deleted in sequence order, before and after the crash; deduplication ids
# accepted before the crash still make a resend a duplicate; the worker runs.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use IPC::Run;

my $node = PostgreSQL::Test::Cluster->new('crash');
$node->init;
$node->append_conf(
	'postgresql.conf', qq(
shared_preload_libraries = 'queue'
queue.sweep_interval = '100ms'
log_statement = none
max_connections = 40
));
$node->start;

sub sql
{
	my ($query) = @_;
	return $node->safe_psql('postgres', $query);
}

sql(q(
CREATE EXTENSION queue;
SELECT queue.create('cs', visibility_timeout => '2 s');
SELECT queue.create('cf.fifo', fifo => true, visibility_timeout => '2 s');
));
ok( $node->poll_query_until(
		'postgres',
		"SELECT count(*) = 1 FROM pg_stat_activity WHERE backend_type = 'queue worker'"
	),
	'worker runs before the crash');

# --- Client scripts --------------------------------------------------------

my $dir = PostgreSQL::Test::Utils::tempdir;
my $iterations = 50000;    # far more than a client gets through

# Standard sender: one line per acknowledged send, "S|id".
sub std_sender_script
{
	my ($c) = @_;
	my $s = '';
	$s .= "SELECT 'S|' || message_id FROM queue.send('cs', 'c$c-$_');\n"
	  for 1 .. $iterations;
	return $s;
}

# FIFO sender: its own four groups and one group that every FIFO sender
# shares; the deduplication id is unique.
# "S|id|group|sequence_number|deduplication id".
sub fifo_sender_script
{
	my ($c) = @_;
	my $s = '';
	for my $i (1 .. $iterations)
	{
		my $g = $i % 5 == 0 ? 'shared' : "g$c-" . ($i % 4);
		$s .=
		  "SELECT 'S|' || message_id || '|$g|' || sequence_number || '|c$c-$i' FROM queue.send('cf.fifo', 'c$c-$i', message_group_id => '$g', deduplication_id => 'c$c-$i');\n";
	}
	return $s;
}

# Receiver: receive one message (long poll), print "R|id", delete it in its
# own transaction, print "D|id|group|sequence_number|clock" once the delete
# returned true.
sub receiver_script
{
	my ($q) = @_;
	my $s = '';
	for (1 .. $iterations)
	{
		$s .= qq(SELECT coalesce(max(message_id), 0) AS mid, coalesce(max(receipt), '') AS rc,
 coalesce(max(message_group_id), '') AS grp, coalesce(max(sequence_number), 0) AS seq
 FROM queue.receive('$q', visibility_timeout => '2 s', wait => '1 s') \\gset
\\echo R|:mid
SELECT 'D|' || :mid || '|' || :'grp' || '|' || :seq || '|' || to_char(clock_timestamp(), 'YYYYMMDDHH24MISSUS')
 FROM (SELECT queue.delete('$q', :'rc') AS ok WHERE :mid > 0) d WHERE ok;
);
	}
	return $s;
}

my %clients = (
	std_send_1 => std_sender_script(1),
	std_send_2 => std_sender_script(2),
	fifo_send_1 => fifo_sender_script(1),
	fifo_send_2 => fifo_sender_script(2),
	std_recv_1 => receiver_script('cs'),
	std_recv_2 => receiver_script('cs'),
	fifo_recv_1 => receiver_script('cf.fifo'),
	fifo_recv_2 => receiver_script('cf.fifo'),);

my @runs;
for my $name (sort keys %clients)
{
	my $script = "$dir/$name.sql";
	open my $fh, '>', $script or die "could not write $script: $!";
	print $fh $clients{$name};
	close $fh;
	# Stale receipts (a lease ran out under load) are errors the client
	# notes and goes past: ON_ERROR_STOP is off.  A lost connection ends psql.
	my $h = IPC::Run::start(
		[
			'psql', '-X', '-q', '-A', '-t', '-v', 'ON_ERROR_STOP=0',
			'-d', $node->connstr('postgres'), '-f', $script
		],
		'<', \undef, '>', "$dir/$name.out", '2>', "$dir/$name.err");
	push @runs, [ $name, $h ];
}

# Let the load run until both queues have seen sends and deletes.
ok( $node->poll_query_until(
		'postgres',
		"SELECT bool_and(sent >= 1000 AND deleted >= 500) FROM queue.stats"
		  . " WHERE queue_name IN ('cs', 'cf.fifo')"),
	'load is running on both queues');

# A queue with priorities (1.12): a 4 sent before its first priority (stored
# as null), then a 2 and a 6.  After the crash its counter slot is gone, and
# the first thing that comes is a send of an 8, which makes a new slot that
# knows only the 8: every level (and the nulls) must still be read.
sql("SELECT queue.create('cp')");
sql("SELECT queue.send('cp', 'n4')");
sql("SELECT queue.send('cp', 'p2', priority => 2)");
sql("SELECT queue.send('cp', 'p6', priority => 6)");

# --- kill -9 ----------------------------------------------------------------

# Every process the postmaster started, from /proc.
sub children_of
{
	my ($ppid) = @_;
	my @pids;
	for my $stat (glob '/proc/[0-9]*/stat')
	{
		open my $fh, '<', $stat or next;
		my $line = <$fh>;
		close $fh;
		next unless defined $line;
		# pid (comm) state ppid ...: comm may hold spaces and parentheses.
		push @pids, $1 if $line =~ /^(\d+) \(.*\) \S+ (\d+) / && $2 == $ppid;
	}
	return @pids;
}

my $pm = $node->{_pid};
my @children = children_of($pm);
note 'postmaster ' . $pm . ', ' . scalar(@children) . ' children';
$node->kill9;
# The whole server dies at once: nothing the children had under way may
# still commit after the postmaster is gone.
kill 'KILL', @children;
# Wait until they are gone (or zombies of a parent that does not reap).
sub alive
{
	my ($pid) = @_;
	open my $fh, '<', "/proc/$pid/stat" or return 0;
	my $line = <$fh>;
	close $fh;
	return defined $line && $line !~ /^\d+ \(.*\) Z /;
}
for my $pid ($pm, @children)
{
	my $waited = 0;
	while (alive($pid) && $waited++ < 100)
	{
		select(undef, undef, undef, 0.1);
	}
	diag "process $pid still there after kill -9" if alive($pid);
}
# A postmaster that is dead but not yet reaped (its parent, pg_ctl, is gone,
# and the init of a container may be slow to reap) still answers kill 0, so
# a new postmaster would take its lock files for a live one's.  Give init
# time, then remove the stale lock files (the data directory's and the
# socket's) as an administrator would.
my $reaped = 0;
while (kill(0, $pm) && $reaped++ < 50)
{
	select(undef, undef, undef, 0.1);
}
if (kill 0, $pm)
{
	note "postmaster $pm not reaped: removing its lock files";
	unlink $node->data_dir . '/postmaster.pid';
	unlink $node->host . '/.s.PGSQL.' . $node->port . '.lock'
	  if $PostgreSQL::Test::Utils::use_unix_sockets;
}
else
{
	note 'postmaster reaped after ' . ($reaped / 10) . ' s';
}

for my $run (@runs)
{
	my ($name, $h) = @$run;
	eval { $h->finish; };
}

# --- What the clients were told ---------------------------------------------

my (%acked_send, %group_of, %acked_delete, @deletes, %candidate);
my ($nsend, $ndelete) = (0, 0);
for my $run (@runs)
{
	my ($name, $h) = @$run;
	my $q = $name =~ /^std/ ? 'cs' : 'cf.fifo';
	my $last_received;
	open my $fh, '<', "$dir/$name.out" or die "no output of $name: $!";
	while (my $line = <$fh>)
	{
		chomp $line;
		my @f = split /\|/, $line;
		next unless @f;
		if ($f[0] eq 'S')
		{
			$acked_send{$q}{ $f[1] } = 1;
			$group_of{ $f[1] } = [ $f[2], $f[3], $f[4] ] if $q eq 'cf.fifo';
			$nsend++;
		}
		elsif ($f[0] eq 'R')
		{
			$last_received = $f[1] if $f[1] > 0;
		}
		elsif ($f[0] eq 'D')
		{
			$acked_delete{$q}{ $f[1] }++;
			push @deletes, [ $q, @f[ 1 .. 4 ] ] if $q eq 'cf.fifo';
			$ndelete++;
			undef $last_received if defined $last_received && $last_received == $f[1];
		}
	}
	close $fh;
	# The receiver's last received message, not acknowledged deleted: its
	# delete may have committed without the client being told.
	$candidate{$q}{$last_received} = 1 if defined $last_received;
}
note "acknowledged before the crash: $nsend sends, $ndelete deletes";
cmp_ok($nsend, '>', 0, 'sends were acknowledged before the crash');
cmp_ok($ndelete, '>', 0, 'deletes were acknowledged before the crash');
is( scalar(grep { $_ > 1 } map { values %$_ } values %acked_delete),
	0, 'no message was acknowledged deleted twice');

# --- Restart -----------------------------------------------------------------

$node->start;
ok($node->poll_query_until('postgres', 'SELECT 1', '1'),
	'server restarts after kill -9');
ok( $node->poll_query_until(
		'postgres',
		"SELECT count(*) = 1 FROM pg_stat_activity WHERE backend_type = 'queue worker'"
	),
	'the worker runs again after the restart');

# What is left, in delivery order.
my %present;
for my $q ('cs', 'cf.fifo')
{
	for my $id (split /\n/,
		sql("SELECT message_id FROM queue.peek('$q', 1000000)"))
	{
		$present{$q}{$id} = 1;
	}
}

my ($lost, $back, $unacked_gone) = (0, 0, 0);
for my $q ('cs', 'cf.fifo')
{
	for my $id (sort { $a <=> $b } keys %{ $acked_send{$q} })
	{
		next if $present{$q}{$id} || $acked_delete{$q}{$id};
		if ($candidate{$q}{$id})
		{
			$unacked_gone++;
			next;
		}
		$lost++;
		diag "lost: acknowledged send $id on $q is neither there nor acknowledged deleted";
	}
	for my $id (keys %{ $acked_delete{$q} })
	{
		next unless $present{$q}{$id};
		$back++;
		diag "came back: message $id on $q was acknowledged deleted";
	}
}
note
  "crash: $nsend sends acknowledged, $lost lost, $ndelete deletes acknowledged, $back came back,"
  . " $unacked_gone deleted in flight at the crash";
is($lost, 0, 'no acknowledged send is lost');
is($back, 0, 'no acknowledged delete comes back');

# --- Drain, and FIFO order per group ----------------------------------------

# Receive everything left (leases taken before the crash run out after 2 s)
# and delete it; record the FIFO queue's deliveries in order.
sql(q(
CREATE TABLE drained (n bigserial, q text, message_id bigint, grp text, seq bigint);
CREATE FUNCTION drain(q text) RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
	m record;
	n bigint := 0;
BEGIN
	FOR m IN SELECT * FROM queue.receive(q, max_messages => 1000, visibility_timeout => '1 min') LOOP
		IF queue.delete(q, m.receipt) THEN
			INSERT INTO drained (q, message_id, grp, seq)
				VALUES (q, m.message_id, m.message_group_id, m.sequence_number);
			n := n + 1;
		END IF;
	END LOOP;
	RETURN n;
END $$;
));
ok( $node->poll_query_until(
		'postgres', q(
SELECT drain('cs') + drain('cf.fifo') >= 0
   AND NOT EXISTS (SELECT FROM queue.peek('cs', 1))
   AND NOT EXISTS (SELECT FROM queue.peek('cf.fifo', 1))
)),
	'everything left is received and deleted');

my %drained;
my @drained_fifo;
for my $row (split /\n/,
	sql("SELECT q, message_id, grp, seq FROM drained ORDER BY n"))
{
	my ($q, $id, $g, $seq) = split /\|/, $row;
	$drained{$q}{$id}++;
	push @drained_fifo, [ $id, $g, $seq ] if $q eq 'cf.fifo';
}
my ($missing, $extra) = (0, 0);
for my $q ('cs', 'cf.fifo')
{
	for my $id (keys %{ $present{$q} })
	{
		next if ($drained{$q}{$id} // 0) == 1;
		$missing++;
		diag "message $id on $q was there after the restart but not drained exactly once";
	}
	for my $id (keys %{ $drained{$q} })
	{
		next if $present{$q}{$id} && !$acked_delete{$q}{$id};
		$extra++;
		diag "drained message $id on $q was not there after the restart, or was deleted before";
	}
}
is($missing + $extra, 0,
	'the drain delivers exactly what was left, and nothing deleted before');

# Per group: deletes acknowledged before the crash, in the order the server
# made them, then the deliveries after it; sequence numbers must increase.
my %order;
for my $d (sort { $a->[4] cmp $b->[4] } @deletes)
{
	my (undef, $id, $g, $seq) = @$d;
	push @{ $order{$g} }, $seq;
}
push @{ $order{ $_->[1] } }, $_->[2] for @drained_fifo;
my $violations = 0;
for my $g (sort keys %order)
{
	my $s = $order{$g};
	for my $i (1 .. $#$s)
	{
		next if $s->[$i] > $s->[ $i - 1 ];
		$violations++;
		diag "group $g: sequence number $s->[$i] delivered after $s->[$i - 1]";
	}
}
# And sends acknowledged to a group got increasing sequence numbers in the
# order each client sent them (checked through the ids, which increase too).
for my $id (keys %group_of)
{
	my ($g, $seq) = @{ $group_of{$id} };
	next if $seq == $id;
	$violations++;
	diag "FIFO message $id has sequence number $seq";
}
note scalar(keys %order) . ' FIFO groups, '
  . scalar(@deletes) . ' deleted before the crash, '
  . scalar(@drained_fifo) . ' after';
is($violations, 0, 'per-group order holds across the crash');

# --- Deduplication ids accepted before the crash ------------------------------

my @fifo_acked = sort { $a <=> $b } keys %{ $acked_send{'cf.fifo'} };
my ($first, $last) = ($fifo_acked[0], $fifo_acked[-1]);
for my $id ($first, $last)
{
	my ($g, undef, $dedup) = @{ $group_of{$id} };
	is( sql(
			"SELECT message_id || ':' || duplicate FROM queue.send('cf.fifo', 'resent',"
			  . " message_group_id => '$g', deduplication_id => '$dedup')"),
		"$id:true",
		"a deduplication id accepted before the crash still blocks (message $id)");
}
is(sql("SELECT count(*) FROM queue.peek('cf.fifo')"),
	'0', 'the duplicates enqueued nothing');

# --- The queues work after the restart ----------------------------------------

sql("SELECT queue.send('cs', 'after')");
is( sql(
		"SELECT string_agg(body || ':' || queue.delete('cs', receipt), ',') FROM queue.receive('cs', 10)"
	),
	'after:true',
	'send, receive and delete work after the restart');

sql("SELECT queue.send('cp', 'p8', priority => 8)");
is( sql(
		"SELECT string_agg(body || ':' || priority, ' ') FROM queue.receive('cp', 10)"),
	'p8:8 p6:6 n4:4 p2:2',
	'priorities after the crash: every level and the null 4, in order');

$node->stop;
done_testing();
