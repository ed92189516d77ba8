# README.md runs as written.  Every ```sql block of README.md is read from
# README.md itself and run, in order, by test/t/DocTest.pm (which says how,
# and how docs/*.md, run by 033_docs_sql, are run the same way): each "## "
# section in a database of its own, created empty, since each of README's
# sections is a walkthrough that starts with CREATE EXTENSION.  A block must
# succeed, unless README marks it, on the line before its fence, with
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
use DocTest;

my $readme = "$FindBin::RealBin/../../README.md";
my $lead = 'A producer and a consumer';
my @blocks = DocTest::blocks($readme, 'README.md');
ok(scalar(grep { $_->{kind} eq 'run' } @blocks) > 0, scalar(@blocks) . ' sql blocks in README.md');
DocTest::check_links($readme, name => 'README.md');

# --- The version README states, and the upgrade list ----------------------
# (queue.control's default_version is the release's one place; README says
# it, and docs/operations.md describes every upgrade step sql/ ships)

my $root = "$FindBin::RealBin/../..";
my ($version) = PostgreSQL::Test::Utils::slurp_file("$root/queue.control") =~ /^default_version\s*=\s*'([^']+)'/m;
ok(defined $version, "queue.control names the version ($version)");
like(PostgreSQL::Test::Utils::slurp_file($readme), qr/at version \Q$version\E:/,
	"README's status gives version $version");
my $meta = `python3 $root/test/release_meta.py --check 2>&1`;
is($?, 0, 'META.json carries the control file\'s version and is valid PGXN metadata')
  or diag($meta);
my $ops = PostgreSQL::Test::Utils::slurp_file("$root/docs/operations.md");
for my $step (sort map { m{queue--([0-9.]+)--([0-9.]+)\.sql$} ? "$1 to $2" : () } glob("$root/sql/queue--*--*.sql"))
{
	like($ops, qr/\*\*\Q$step\E\*\*/, "docs/operations.md describes the upgrade $step");
}

my $node = QueueWorkerNode::start('readme');
my $run = DocTest::run_page($node, $readme, name => 'README.md', prefix => 'readme', keep => [$lead]);

# --- The lead recipe: one poison message among healthy ones -----------------

my $db = $run->{db}{$lead};
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
