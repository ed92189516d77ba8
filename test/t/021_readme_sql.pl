# README.md's opening sections run as written.  Every ```sql block from the
# top of README.md to the heading "## Commands" is read from README.md itself
# (never a copy, so the two cannot drift) and run, in order, through psql
# with ON_ERROR_STOP on a cluster with the extension preloaded.  Each "## "
# section runs in a database of its own, created empty: each is a
# walkthrough that starts with CREATE EXTENSION.  A block must succeed,
# unless README marks it, on the line before its fence, with
#
#   <!-- doc-test: expect-error 42501 -->
#
# (visible in README's source): then it must fail with that SQLSTATE.
# Blocks fenced ``` without "sql" (postgresql.conf lines, shell) are not run.
#
# Then the lead recipe's promise ("A producer and a consumer"): its
# consumer, given a batch with one poison message among healthy ones,
# ships and deletes each healthy one once, and only the poison one comes
# back, counted, until it is in the dead-letter queue after
# max_receive_count receives.
use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use QueueWorkerNode;

my $readme = "$FindBin::RealBin/../../README.md";
open(my $fh, '<', $readme) or BAIL_OUT("cannot read $readme: $!");
my @lines = <$fh>;
close($fh);

# --- Extract the blocks: [section, first line number, sql, expected error] --

my @blocks;
my $section = '(top)';
my $end_found = 0;
for (my $i = 0; $i < @lines; $i++)
{
	my $line = $lines[$i];
	if ($line =~ /^## (.*?)\s*$/)
	{
		if ($1 eq 'Commands')
		{
			$end_found = 1;
			last;
		}
		$section = $1;
		next;
	}
	next unless $line =~ /^```sql\s*$/;

	# the directive, if any, is the last non-blank line before the fence
	my $expect;
	for (my $j = $i - 1; $j >= 0; $j--)
	{
		next if $lines[$j] =~ /^\s*$/;
		if ($lines[$j] =~ /<!--\s*doc-test:\s*(.*?)\s*-->/)
		{
			my $directive = $1;
			if ($directive =~ /^expect-error\s+([0-9A-Z]{5})$/)
			{
				$expect = $1;
			}
			else
			{
				fail("README.md line " . ($j + 1) . ": unknown doc-test directive \"$directive\"");
			}
		}
		last;
	}

	my $start = $i + 1;
	my $sql = '';
	for ($i++; $i < @lines && $lines[$i] !~ /^```\s*$/; $i++)
	{
		$sql .= $lines[$i];
	}
	BAIL_OUT("README.md line $start: ```sql block never closed") if $i >= @lines;
	push @blocks, { section => $section, line => $start, sql => $sql, expect => $expect };
}
ok($end_found, 'README.md has the heading "## Commands" that ends the tested range');
ok(scalar(@blocks) > 0, scalar(@blocks) . ' sql blocks before "## Commands"');

# --- Run them: one fresh database per section -------------------------------

my $node = QueueWorkerNode::start('readme');

my %dbname;
my $ndb = 0;
for my $b (@blocks)
{
	my $s = $b->{section};
	if (!defined $dbname{$s})
	{
		$dbname{$s} = 'readme_' . ++$ndb;
		$node->safe_psql('postgres', "CREATE DATABASE $dbname{$s}");
	}
	my $what = "README.md line $b->{line} ($s)";
	my ($out, $err) = ('', '');
	my $rc = $node->psql(
		$dbname{$s}, $b->{sql},
		stdout => \$out,
		stderr => \$err,
		extra_params => [ '-v', 'VERBOSITY=verbose' ]);
	note("$what printed:\n$out") if $out ne '';
	if (defined $b->{expect})
	{
		ok($rc == 3 && $err =~ /ERROR:\s+\Q$b->{expect}\E:/,
			"$what fails with $b->{expect}, as README says")
		  or diag("exit $rc\n$err");
	}
	else
	{
		ok($rc == 0 && $err !~ /ERROR:/, "$what runs as written")
		  or diag("exit $rc\n$err");
	}
}

# --- The lead recipe: one poison message among healthy ones -----------------

my $lead = 'A producer and a consumer';
my $db = $dbname{$lead};
my ($proc) = map { $_->{sql} =~ /CREATE\s+(?:OR\s+REPLACE\s+)?PROCEDURE\s+([\w.]+)\s*\(/i ? $1 : () }
  grep { $_->{section} eq $lead } @blocks;
ok(defined $db && defined $proc, "\"$lead\" defines a consumer procedure")
  or BAIL_OUT('no lead recipe to check');

sub sql
{
	return $node->safe_psql($db, $_[0]);
}

sub counters
{
	return split /\|/,
	  sql("SELECT received, deleted, dead_lettered FROM queue.stats WHERE queue_name = 'orders'");
}

my $max = sql("SELECT max_receive_count FROM queue.queues WHERE queue_name = 'orders'");
ok($max > 1, "orders has max_receive_count $max");
is(sql("SELECT count(*) FROM queue.peek('orders')") . ' '
	  . sql("SELECT count(*) FROM queue.peek('orders_dlq')"),
	'0 0', 'the recipe left both queues empty');
my @before = counters();

# four healthy orders and, in the middle of their batch, one that cannot be parsed
sql("INSERT INTO orders (order_id, item) SELECT i, 'item ' || i FROM generate_series(1, 4) i");
sql(q{SELECT count(*) FROM queue.send_batch('orders', ARRAY['{"order_id": 1}', '{"order_id": 2}',
	'{"order_id": "poison"}', '{"order_id": 3}', '{"order_id": 4}']::jsonb[])});

sql("CALL $proc()");
is(sql("SELECT string_agg(order_id::text, ',' ORDER BY order_id) FROM shipments WHERE order_id <> 42"),
	'1,2,3,4', 'one call ships the four healthy orders of the batch');
is(sql("SELECT body::jsonb ->> 'order_id' || ':' || receive_count || ':' || (visible_at > now()) FROM queue.peek('orders')"),
	'poison:1:true', 'only the poison message is left, counted once, handed back for later');

# call the consumer until the poison message has used up its receives
my $calls = 1;
while ($calls < 4 * $max
	&& sql("SELECT coalesce(max(receive_count), $max) < $max FROM queue.peek('orders')") eq 't')
{
	sql("CALL $proc()");
	$calls++;
}
is(sql("SELECT receive_count FROM queue.peek('orders')"), $max,
	"the poison message was received $max times ($calls calls)");
ok( $node->poll_query_until(
		$db, "SELECT count(*) = 1 FROM queue.peek('orders_dlq')"),
	'then it moves to orders_dlq');
sql("CALL $proc()");
is(sql("SELECT count(*) FROM queue.peek('orders')"), '0', 'nothing comes back to orders');
is(sql("SELECT body::jsonb ->> 'order_id' || ':' || receive_count FROM queue.peek('orders_dlq')"),
	"poison:$max", 'only the poison message is in the dead-letter queue, with its count');
is(sql("SELECT count(*) FROM shipments WHERE order_id <> 42"), '4',
	'no shipment for the poison message');

my @after = counters();
is(join(' ', map { $after[$_] - $before[$_] } 0 .. 2),
	(4 + $max) . ' 4 1',
	"counters: each healthy message received and deleted once, the poison one received $max times and dead-lettered");

$node->stop;
done_testing();
