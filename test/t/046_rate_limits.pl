# Rate limits under load (issue 51, DESIGN.md "Rate limits and
# priorities"): 8 clients receive for 30 s from a queue whose 5 busy
# tenants are limited to 50 messages a second each, beside messages without
# a group id (not limited per tenant).  Counted from the times the clients
# note as each message reaches them, no span of 1 s ever hands a tenant
# more than 50; each limited tenant still gets close to its limit; the
# messages without a group id are served at full speed meanwhile.  A
# consumer process keeps a queue-wide limit the same way.  One owner's
# tenants cannot take another owner's room in the shared table.  After a
# restart the window starts closed, then opens.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = PostgreSQL::Test::Cluster->new('rate');
$node->init;
$node->append_conf('postgresql.conf', qq(
shared_preload_libraries = 'queue'
queue.sweep_interval = '200ms'
max_connections = 40
queue.rate_limit_keys = 800
));
$node->start;

sub sql { return $node->safe_psql('postgres', $_[0]); }

sql(q(
CREATE EXTENSION queue;
CREATE UNLOGGED TABLE public.got (g text, t timestamptz);
SELECT queue.create('rl', receive_rate_limit_per_group => 50, receive_rate_interval => '1 second');
SELECT count(*) FROM generate_series(0, 9) b,
	LATERAL queue.send_batch('rl', ARRAY(SELECT 'x' FROM generate_series(1, 1000)),
		message_group_ids => ARRAY(SELECT 't' || (b % 5 + 1) FROM generate_series(1, 1000)));
SELECT count(*) FROM generate_series(1, 60) b,
	LATERAL queue.send_batch('rl', ARRAY(SELECT 'free' || b FROM generate_series(1, 1000)));
));

# --- 8 clients, 30 s --------------------------------------------------------
my $script = $node->basedir . '/receive.sql';
open(my $fh, '>', $script) or die "$script: $!";
# each message's hand-out time as the server wrote it: first_received_at,
# the receive's own time, at which its share of the window was reserved (a
# client's clock_timestamp() can come a scheduling stall later)
print $fh "INSERT INTO public.got SELECT coalesce(message_group_id, 'free'), first_received_at"
  . " FROM queue.receive('rl', 10, visibility_timeout => '1 hour');\n";
close $fh;
my ($out, $err) = ('', '');
my $ok = IPC::Run::run(
	[ 'pgbench', '-n', '-c', '8', '-j', '2', '-T', '30', '-f', $script,
	  '-h', $node->host, '-p', $node->port, 'postgres' ],
	'>', \$out, '2>', \$err);
ok($ok, '8 clients received for 30 s') or diag($err);

# the busiest span of 1 s per tenant, from each delivery on
my $worst = sql(q(
SELECT string_agg(g || '=' || w, ' ' ORDER BY g) FROM (
	SELECT g, max(n) AS w FROM (
		SELECT g, count(*) OVER (PARTITION BY g ORDER BY t
			RANGE BETWEEN CURRENT ROW AND '999999 microseconds' FOLLOWING) AS n
		FROM public.got WHERE g <> 'free') x
	GROUP BY g) y));
note("busiest 1 s span per tenant: $worst");
my @over = grep { /=(\d+)$/ && $1 > 50 } split / /, $worst;
is(scalar(@over), 0, 'no span of 1 s handed any limited tenant more than 50');
is(scalar(split / /, $worst), 5, 'all five limited tenants were served');

my $counts = sql(q(SELECT string_agg(g || '=' || n, ' ' ORDER BY g)
	FROM (SELECT g, count(*) AS n FROM public.got GROUP BY g) x));
note("delivered in 30 s: $counts");
my %n = map { split /=/ } split / /, $counts;
my @short = grep { $_ ne 'free' && $n{$_} < 0.8 * 50 * 30 } keys %n;
is(scalar(@short), 0, 'each limited tenant got at least 80% of its 50 a second')
  or diag($counts);
my $limited = 0;
$limited += $n{$_} for grep { $_ ne 'free' } keys %n;
cmp_ok($n{free} // 0, '>', 3 * $limited,
	'the messages without a group id were served at full speed meanwhile');
cmp_ok(sql(q(SELECT rate_limited FROM queue.stats WHERE queue_name = 'rl')), '>', 0,
	'queue.stats counts what the limit held back');

# --- a consumer process keeps a queue-wide limit ------------------------------
sql(q(
CREATE UNLOGGED TABLE public.handled (t timestamptz);
CREATE FUNCTION public.h(msgs queue.message[]) RETURNS void LANGUAGE sql AS $$
	INSERT INTO public.handled SELECT clock_timestamp() FROM pg_catalog.unnest(msgs)
$$;
SELECT queue.create('rc', receive_rate_limit => 20, receive_rate_interval => '1 second');
SELECT queue.send_batch('rc', ARRAY(SELECT 'm' FROM generate_series(1, 300)));
SELECT queue.create_consumer('rc_consumer', 'rc', 'public.h(queue.message[])',
	batch_size => 10, concurrency => 4);
));
ok($node->poll_query_until('postgres', 'SELECT count(*) >= 100 FROM public.handled'),
	'the consumer handled 100 messages');
my $cworst = sql(q(SELECT max(n) FROM (SELECT count(*) OVER (ORDER BY t
	RANGE BETWEEN CURRENT ROW AND '999999 microseconds' FOLLOWING) AS n FROM public.handled) x));
cmp_ok($cworst, '<=', 20, "no span of 1 s gave the consumer's handler more than 20 ($cworst)");
sql(q(SELECT queue.drop_consumer('rc_consumer')));

# --- one owner's tenants cannot take another owner's room ---------------------
# queue.rate_limit_keys = 800: an owner's queues hold 100 windows at most.
# mallory's queue hands one message to each of 300 tenants within an hour:
# 100 are served, the rest wait (held back, never over the limit); alice's
# limited queue, made after, is served as if mallory were not there.
sql(q(
CREATE ROLE mallory; CREATE ROLE alice;
GRANT USAGE ON SCHEMA queue TO mallory, alice;
GRANT CREATE ON DATABASE postgres TO mallory, alice;
SET ROLE mallory;
SELECT queue.create('flood', receive_rate_limit_per_group => 1, receive_rate_interval => '1 hour');
SELECT count(*) FROM queue.send_batch('flood', ARRAY(SELECT 'f' FROM generate_series(1, 300)),
	message_group_ids => ARRAY(SELECT 'g' || i FROM generate_series(1, 300) i));
RESET ROLE;
SET ROLE alice;
SELECT queue.create('calm', receive_rate_limit_per_group => 2, receive_rate_interval => '1 hour');
SELECT count(*) FROM queue.send_batch('calm', ARRAY(SELECT 'c' FROM generate_series(1, 30)),
	message_group_ids => ARRAY(SELECT 'a' || (i % 10) FROM generate_series(1, 30) i));
));
my $flooded = 0;
for (1 .. 40)
{
	$flooded += sql(q(SET ROLE mallory; SELECT count(*) FROM queue.receive('flood', 10, visibility_timeout => '1 hour')));
}
is($flooded, 100, "mallory's queue got windows for 100 tenants, its share of the table, and no more");
my $calm = 0;
for (1 .. 4)
{
	$calm += sql(q(SET ROLE alice; SELECT count(*) FROM queue.receive('calm', 10, visibility_timeout => '1 hour')));
}
is($calm, 20, "alice's 10 tenants each got their 2 beside mallory's flood");

# --- after a restart the window starts closed ----------------------------------
sql(q(
SELECT queue.create('rr', receive_rate_limit => 5, receive_rate_interval => '3 seconds');
SELECT queue.send_batch('rr', ARRAY(SELECT 'm' FROM generate_series(1, 20)));
SELECT count(*) FROM queue.receive('rr', 5);
));
$node->restart;
is(sql(q(SELECT count(*) FROM queue.receive('rr', 5))), '0',
	'right after a restart the window is closed: what was handed out before is not known');
is(sql(q(SELECT count(*) FROM queue.receive('rr', 5, wait => '10 s'))), '5',
	'a long poll gets the window when it opens');
is(sql(q(SELECT count(*) FROM queue.receive('rr', 5))), '0',
	'and the limit holds again');

$node->stop;
done_testing();
