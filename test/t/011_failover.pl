# Failover: a primary and a streaming standby with synchronous replication
# (synchronous_commit = remote_apply).  On the standby, before promotion,
# sending and receiving fail with 25006.  Under send load on the primary
# (psql clients in autocommit; what they print has been acknowledged), the
# primary is stopped in immediate mode and the standby promoted: every
# acknowledged send is on the new primary, every queue works there (standard
# and FIFO: send, receive, delete, deduplication), and its worker starts.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use IPC::Run;

my $conf = qq(
shared_preload_libraries = 'queue'
queue.sweep_interval = '100ms'
log_statement = none
max_connections = 40
);

my $primary = PostgreSQL::Test::Cluster->new('primary');
$primary->init(allows_streaming => 1);
$primary->append_conf('postgresql.conf', $conf);
$primary->start;
$primary->safe_psql(
	'postgres', q(
CREATE EXTENSION queue;
SELECT queue.create('fs', visibility_timeout => '5 s');
SELECT queue.create('ff.fifo', fifo => true, visibility_timeout => '5 s');
SELECT queue.send('fs', 'before the standby');
));
ok( $primary->poll_query_until(
		'postgres',
		"SELECT count(*) = 1 FROM pg_stat_activity WHERE backend_type = 'queue worker'"
	),
	'the primary runs a worker');

$primary->backup('bk');
my $standby = PostgreSQL::Test::Cluster->new('standby');
$standby->init_from_backup($primary, 'bk', has_streaming => 1);
$standby->append_conf('postgresql.conf', $conf);
$standby->start;

# Synchronous replication, applied on the standby before a commit returns.
$primary->append_conf(
	'postgresql.conf', qq(
synchronous_standby_names = '*'
synchronous_commit = remote_apply
));
$primary->reload;
ok( $primary->poll_query_until(
		'postgres',
		"SELECT sync_state = 'sync' FROM pg_stat_replication"),
	'the standby is synchronous');
is( $primary->safe_psql(
		'postgres',
		"SHOW synchronous_commit"),
	'remote_apply',
	'commits wait for the standby to apply them');

# With remote_apply, what the primary acknowledged is visible on the
# standby at once, without waiting for catch-up.
my $id = $primary->safe_psql('postgres',
	"SELECT message_id FROM queue.send('fs', 'applied')");
is( $standby->safe_psql(
		'postgres',
		"SELECT count(*) FROM queue.peek('fs', 100) WHERE message_id = $id"),
	'1',
	'an acknowledged send is already on the standby');

# --- The standby refuses queue operations that write ------------------------

sub standby_error
{
	my ($sql) = @_;
	my ($ret, $out, $err) =
	  $standby->psql('postgres', "\\set VERBOSITY verbose\n$sql");
	return $err;
}
like(standby_error("SELECT * FROM queue.send('fs', 'x')"),
	qr/ERROR:  25006: /, 'send on the standby: 25006');
like(
	standby_error(
		"SELECT * FROM queue.send('ff.fifo', 'x', message_group_id => 'g', deduplication_id => 'x')"
	),
	qr/ERROR:  25006: /,
	'FIFO send on the standby: 25006');
like(standby_error("SELECT * FROM queue.receive('fs')"),
	qr/ERROR:  25006: /, 'receive on the standby: 25006');
like(standby_error("SELECT * FROM queue.receive('ff.fifo')"),
	qr/ERROR:  25006: /, 'FIFO receive on the standby: 25006');
like(standby_error("SELECT * FROM queue.receive('fs', wait => '5 s')"),
	qr/ERROR:  25006: .*(recovery|read-only)/i,
	'a waiting receive on the standby: 25006, saying why, not a wait');
is( $standby->safe_psql(
		'postgres',
		"SELECT count(*) FROM pg_stat_activity WHERE backend_type IN ('queue launcher', 'queue worker')"
	),
	'0',
	'no queue launcher or worker on the standby');

# --- Send load, then failover ----------------------------------------------

my $dir = PostgreSQL::Test::Utils::tempdir;
my $iterations = 50000;
my @runs;
for my $c (1 .. 4)
{
	my $s = '';
	for my $i (1 .. $iterations)
	{
		if ($c <= 2)
		{
			$s .= "SELECT 'fs|' || message_id FROM queue.send('fs', 'c$c-$i');\n";
		}
		else
		{
			my $g = "g$c-" . ($i % 3);
			$s .=
			  "SELECT 'ff.fifo|' || message_id || '|$g|c$c-$i' FROM queue.send('ff.fifo', 'c$c-$i', message_group_id => '$g', deduplication_id => 'c$c-$i');\n";
		}
	}
	my $script = "$dir/client$c.sql";
	open my $fh, '>', $script or die "could not write $script: $!";
	print $fh $s;
	close $fh;
	push @runs,
	  IPC::Run::start(
		[
			'psql', '-X', '-q', '-A', '-t', '-v', 'ON_ERROR_STOP=1',
			'-d', $primary->connstr('postgres'), '-f', $script
		],
		'<', \undef, '>', "$dir/client$c.out", '2>', "$dir/client$c.err");
}

ok( $primary->poll_query_until(
		'postgres',
		"SELECT bool_and(sent >= 300) FROM queue.stats WHERE queue_name IN ('fs', 'ff.fifo')"
	),
	'send load is running on both queues');

$primary->stop('immediate');
eval { $_->finish; } for @runs;
$standby->promote;

my (%acked, %acked_fifo);
my $nacked = 0;
for my $c (1 .. 4)
{
	open my $fh, '<', "$dir/client$c.out" or die "no output of client $c: $!";
	while (my $line = <$fh>)
	{
		chomp $line;
		my ($q, $mid, $g, $dedup) = split /\|/, $line;
		next unless defined $mid;
		$acked{$q}{$mid} = 1;
		$acked_fifo{$mid} = [ $g, $dedup ] if $q eq 'ff.fifo';
		$nacked++;
	}
	close $fh;
}

is($standby->safe_psql('postgres', 'SELECT pg_is_in_recovery()'),
	'f', 'the standby is promoted');
my $lost = 0;
for my $q ('fs', 'ff.fifo')
{
	my %there = map { $_ => 1 } split /\n/,
	  $standby->safe_psql('postgres',
		"SELECT message_id FROM queue.peek('$q', 1000000)");
	for my $mid (sort { $a <=> $b } keys %{ $acked{$q} })
	{
		next if $there{$mid};
		$lost++;
		diag "lost at failover: acknowledged send $mid on $q";
	}
}
note "failover: $nacked sends acknowledged by the primary, $lost lost";
cmp_ok($nacked, '>', 0, 'sends were acknowledged before the failover');
is($lost, 0, 'no acknowledged send is lost at failover');

# --- The new primary ---------------------------------------------------------

ok( $standby->poll_query_until(
		'postgres',
		"SELECT count(*) = 1 FROM pg_stat_activity WHERE backend_type = 'queue worker' AND datname = 'postgres'"
	),
	'the new primary runs a worker');

sub sql
{
	my ($query) = @_;
	return $standby->safe_psql('postgres', $query);
}

# A deduplication id accepted by the old primary still blocks.
my ($first) = sort { $a <=> $b } keys %acked_fifo;
my ($g, $dedup) = @{ $acked_fifo{$first} };
is( sql(
		"SELECT message_id || ':' || duplicate FROM queue.send('ff.fifo', 'again', message_group_id => '$g', deduplication_id => '$dedup')"
	),
	"$first:true",
	'a deduplication id accepted before the failover still blocks');

# Every queue works: send, receive, delete, on standard and FIFO.
my $sid = sql("SELECT message_id FROM queue.send('fs', 'after failover')");
my $fid = sql(
	"SELECT message_id FROM queue.send('ff.fifo', 'after failover', message_group_id => 'new', deduplication_id => 'new-1')"
);
sql(q(
CREATE FUNCTION drain(q text) RETURNS bigint LANGUAGE sql AS $$
	SELECT count(*) FILTER (WHERE queue.delete(q, receipt))
	  FROM queue.receive(q, max_messages => 1000, visibility_timeout => '1 min')
$$;
));
my ($nfs, $nff) = (0, 0);
for (1 .. 1000)
{
	my $fs = sql("SELECT drain('fs')");
	my $ff = sql("SELECT drain('ff.fifo')");
	$nfs += $fs;
	$nff += $ff;
	last if $fs == 0 && $ff == 0;
}
is( sql("SELECT count(*) FROM queue.peek('fs', 1000000)")
	  . '/'
	  . sql("SELECT count(*) FROM queue.peek('ff.fifo', 1000000)"),
	'0/0',
	'the new primary receives and deletes every message of both queues');
cmp_ok($nfs, '>=', scalar(keys %{ $acked{fs} }) + 1,
	'standard queue: at least every acknowledged message and the new one');
cmp_ok($nff, '>=', scalar(keys %{ $acked{'ff.fifo'} }) + 1,
	'FIFO queue: at least every acknowledged message and the new one');
is( sql(
		"SELECT count(*) FROM queue.send('fs', 'x', deduplication_id => 'fresh') WHERE NOT duplicate"
	),
	'1',
	'and sends again');

$standby->stop;
done_testing();
