# Queues spread over a Citus cluster (docs/citus.md, issue 37): a
# coordinator and two workers, shared_preload_libraries = 'citus,queue'.
#  0. before queue.citus_setup(), a squatter's own queue_citus (plain
#     tables, then a view over its function) is never read by the SQS
#     endpoint: no forward, no escalation, the tenant served (issue 48).
#  1. queue.citus_setup() on the coordinator sets the cluster up, once
#     (a second call changes nothing); a queue is placed by its name, or by
#     the tenant key of its name (up to the first "."), so a tenant's queue
#     and its dead-letter queue share a node; nothing is left on the
#     coordinator or the other worker.
#  2. every API call made on the coordinator, and on the worker that does
#     not hold the queue, runs on the queue's node.
#  3. the wrong-node guard: a call Citus does not delegate (over rows, in a
#     CTE, a name that is not a constant) fails with 55000 and a hint on a node that does
#     not hold the queue, and never makes or uses a queue there; on the
#     queue's node it works; a dead-letter queue or subscriber on another
#     node is refused (55000).
#  4. a send into a queue table that Citus manages (its shell and shard)
#     writes through a statement, which Citus routes: the shell's heap
#     stays empty and every message is received.
#  5. the outbox: an application table distributed by the same key and a
#     send commit in one phase on one node, both or neither; two queues on
#     two nodes in one transaction commit by 2PC, both or neither.
#  6. a long poll through the coordinator is woken by a send from the
#     other worker; the node's queue worker dead-letters without receives;
#     a consumer made through the coordinator runs on the queue's node.
#  7. moving or splitting the anchor's shards by Citus (citus_move_shard_placement,
#     citus_drain_node, citus_split_shard_by_split_points) is refused with a clear message, and nothing is
#     lost: every message is there and every call still routes.
#  8. topics route to their node; a publish from any node delivers there;
#     queue.citus_queues(), citus_stats(), citus_consumers() on the
#     coordinator read every node.
#  9. kill -9 of the queue's worker in the middle of sends through the
#     coordinator: every send acknowledged before it is there after restart.
# 10. queue.citus_move_shard moves a shard's queues (shared, FIFO,
#     dedicated, a dead-letter queue, a topic, a consumer) to a node added
#     later while a producer sends through the coordinator: every message
#     and acknowledged send is there once, leases, FIFO groups and the
#     deduplication window kept, old receipts stale (55000), calls route
#     to the new node; a failed move leaves everything on the source
#     (receipts valid); a move that would part a queue from its dead-letter
#     queue, a non-superuser and bad arguments are refused; a move
#     interrupted midway refuses calls (55006) until the next move of the
#     shard undoes it; a moved topic's table keeps its grants exactly
#     (grant options and grantors).
# 11. the SQS endpoint across nodes: CreateQueue, SendMessage,
#     ReceiveMessage, DeleteMessage, GetQueueAttributes at w2's endpoint for
#     a queue of w1 run on w1 (forwarded after w2 verified the signature);
#     a long poll at w2's endpoint is woken by a commit on w1; a wrong
#     secret is refused at w2; one role's 260 forwarded long polls hold
#     its share of w2's forward slots (64), and another role's call is
#     forwarded in under 1 s beside them.
# 12. docs/citus.md's blocks run as written on this cluster.
#
# Skipped when Citus is not installed in this PostgreSQL (test/citus_build.sh
# builds it; make test runs that from test/setup.sh).
use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;

use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

# the release's version: queue.control's default_version
my ($version) = PostgreSQL::Test::Utils::slurp_file("$FindBin::RealBin/../../queue.control")
  =~ /^default_version\s*=\s*'([^']+)'/m;
use Time::HiRes qw(time);
use DocTest;

my $pkglib = `pg_config --pkglibdir`;
chomp $pkglib;
if (!-f "$pkglib/citus.so")
{
	plan skip_all => "Citus is not installed in $pkglib: test/citus_build.sh builds it "
	  . '(test/setup.sh runs it as root) from ../shared/vendor/citus-13.2.2.tar.gz';
}

# --- A coordinator and two workers -----------------------------------------

my %sqs_port;
# a node of the cluster, started, with Citus created; $sqs: with the SQS
# endpoint (section 11)
sub citus_node
{
	my ($name, $sqs) = @_;
	my $n = PostgreSQL::Test::Cluster->new("citus_$name");
	$n->init;
	if ($sqs && -f "$pkglib/queue_sqs.so")
	{
		$sqs_port{ $n->name } = PostgreSQL::Test::Cluster::get_free_port();
		$n->append_conf('postgresql.conf',
			"queue.sqs_listen = '127.0.0.1:$sqs_port{ $n->name }'\nqueue.sqs_workers = 1");
	}
	# (Citus's shard moves connect to their own node by citus.local_hostname)
	$n->append_conf('postgresql.conf', "citus.local_hostname = '" . $n->host . "'");
	$n->append_conf(
		'postgresql.conf', q(
shared_preload_libraries = 'citus,queue'
queue.sweep_interval = '100ms'
max_prepared_transactions = 20
max_worker_processes = 24
wal_level = logical
));
	$n->start;
	$n->safe_psql('postgres', 'CREATE EXTENSION citus');
	return $n;
}
my @nodes = (citus_node('coord', 0), citus_node('w1', 1), citus_node('w2', 1));
my ($coord, $w1, $w2) = @nodes;
$coord->safe_psql('postgres',
	"SELECT citus_set_coordinator_host('" . $coord->host . "', " . $coord->port . ')');
$coord->safe_psql('postgres',
	"SELECT citus_add_node('" . $_->host . "', " . $_->port . ')')
  for ($w1, $w2);
$coord->safe_psql('postgres', 'CREATE EXTENSION queue');
is( join(' ', map { $_->safe_psql('postgres', "SELECT extversion FROM pg_extension WHERE extname = 'queue'") } @nodes),
	join(' ', ($version) x 3),
	'CREATE EXTENSION queue on the coordinator reached both workers');

sub on { my ($n, $sql) = @_; return $n->safe_psql('postgres', $sql); }

# psql's result, its stderr and whether it failed with SQLSTATE $state
sub fails_with
{
	my ($n, $sql, $state, $what) = @_;
	my ($out, $err) = ('', '');
	my $rc = $n->psql('postgres', $sql, stdout => \$out, stderr => \$err,
		extra_params => [ '-v', 'VERBOSITY=verbose' ]);
	ok($rc != 0 && $err =~ /ERROR:\s+\Q$state\E:/, "$what: fails with $state")
	  or diag("exit $rc\n$err");
	return $err;
}

# --- 0. A squatter's queue_citus before the set-up ---------------------------

# Between CREATE EXTENSION queue and queue.citus_setup(), citus_squat (CREATE
# on the database, no right on any queue) makes its own distributed
# queue_citus.placements and, on w1, queue_citus.sqs_endpoints: plain tables,
# then a view over a function of its own that tries ALTER ROLE ... SUPERUSER
# (issue 48).  citus_tenant's requests at w1's endpoint for its own queue,
# whose name the squatter's table places on w2, are served on w1: never
# forwarded (to the squatter's URL), the function never run, the squatter
# no superuser.
my $python = '/usr/bin/python3';
my $sqs_ready = system("$python -I -c 'import boto3' >/dev/null 2>&1") == 0
  && -f "$pkglib/queue_sqs.so" && `ldd $pkglib/queue_sqs.so` =~ /libcurl/;
SKIP:
{
	skip 'no Debian python3-boto3, or no queue_sqs.so with libcurl', 9 unless $sqs_ready;
	on($coord, 'CREATE ROLE citus_squat LOGIN; CREATE ROLE citus_tenant LOGIN');
	on($coord, 'GRANT CREATE ON DATABASE postgres TO citus_squat, citus_tenant; '
		  . 'GRANT USAGE ON SCHEMA queue TO citus_squat, citus_tenant');
	my $squat = sub {
		my ($n, $sql) = @_;
		return $n->safe_psql('postgres', "SET ROLE citus_squat; $sql");
	};
	$squat->($coord, q(
CREATE SCHEMA queue_citus;
CREATE TABLE queue_citus.placements (placement_key queue.placement_key);
SELECT create_distributed_table('queue_citus.placements', 'placement_key');
));
	my $w2group = on($w2, 'SELECT groupid FROM pg_dist_local_group');
	my ($name) = grep {
		on($coord, 'SELECT groupid FROM pg_dist_placement WHERE shardid = get_shard_id_for_distribution_column('
			  . "'queue_citus.placements', '$_'::queue.placement_key)") eq $w2group
	} map { "sqt$_" } 0 .. 31;
	$squat->($w1, q(
CREATE TABLE queue_citus.ran (who text, super boolean);
CREATE TABLE queue_citus.sqs_endpoints (node_group integer, endpoint text);
INSERT INTO queue_citus.sqs_endpoints SELECT g, 'http://127.0.0.1:1' FROM generate_series(0, 10) g;
));
	my ($key, $secret) = ('AKIDCITUSSQUAT000001', 'citus-squat-secret-00000000000000000000001');
	on($w1, "SELECT count(*) FROM queue.create_access_key('citus_tenant', '$key', '$secret')");
	my $client = sub {
		my ($out, $err) = ('', '');
		IPC::Run::run([ $python, '-I', "$FindBin::RealBin/sqs/citus_client.py",
				"http://127.0.0.1:$sqs_port{$w1->name}", $key, $secret, @_ ], '>', \$out, '2>', \$err);
		diag($err) if $err ne '';
		my %v = $out =~ /^value\t(\w+)\t(.*)$/mg;
		return \%v;
	};
	like($client->('create', $name)->{url}, qr{/\Q$name\E$},
		"CreateQueue at w1's endpoint beside a squatter's queue_citus (plain tables)");
	for my $form ('plain tables', 'a view over a function')
	{
		next if $form eq 'plain tables';
		# (made on the coordinator, which gives them to the workers)
		$squat->($w1, 'DROP TABLE queue_citus.sqs_endpoints');
		$squat->($coord, q(
CREATE FUNCTION queue_citus.endpoints() RETURNS TABLE (node_group integer, endpoint text)
	LANGUAGE plpgsql AS $f$
BEGIN
	INSERT INTO queue_citus.ran SELECT current_user, rolsuper FROM pg_catalog.pg_roles WHERE rolname = current_user;
	BEGIN
		ALTER ROLE citus_squat SUPERUSER;
	EXCEPTION WHEN OTHERS THEN NULL;
	END;
	RETURN QUERY SELECT g, 'http://127.0.0.1:1'::text FROM pg_catalog.generate_series(0, 10) g;
END
$f$;
CREATE VIEW queue_citus.sqs_endpoints AS SELECT * FROM queue_citus.endpoints();
));
	}
	continue
	{
		like($client->('send', $name, $form)->{id}, qr/^[0-9a-f-]{36}$/, "SendMessage beside $form");
		my $v = $client->('wait', $name, '1');
		is("$v->{received} $v->{bodies}", "1 $form", "... ReceiveMessage served on w1, not forwarded");
	}
	is(on($w1, "SELECT count(*) FROM queue.queues WHERE queue_name = '$name'") . ' '
		  . on($w2, "SELECT count(*) FROM queue._queues WHERE queue_name = '$name'"),
		'1 0', '... the queue was made on w1, where the request came');
	is(on($w1, 'SELECT count(*) FROM queue_citus.ran'), '0', 'the squatter\'s function never ran');
	is(join(' ', map { on($_, "SELECT rolsuper FROM pg_roles WHERE rolname = 'citus_squat'") } $coord, $w1),
		'f f', 'citus_squat is no superuser');
	is(on($w1, "SELECT sent FROM queue.stats WHERE queue_name = '$name'"), '2', 'both messages were sent on w1');
	on($coord, 'DROP SCHEMA queue_citus CASCADE');
	on($w1, 'DROP SCHEMA IF EXISTS queue_citus CASCADE');
	$w1->psql('postgres', "SELECT queue.drop('$name')");
}

# --- 1. Set-up and placement -----------------------------------------------

my $distributed = on($coord, 'SELECT queue.citus_setup()');
cmp_ok($distributed, '>=', 25, "queue.citus_setup() distributed the anchor and the API ($distributed objects)");
is(on($coord, "SELECT count(*) + 1 FROM pg_dist_object WHERE classid = 'pg_proc'::regclass AND colocationid IS NOT NULL"),
	$distributed, '... every function it counted is colocated with the anchor');
is(on($w2, "SELECT count(*) FROM pg_dist_object d JOIN pg_proc p ON p.oid = d.objid WHERE d.classid = 'pg_proc'::regclass "
	  . "AND p.proname IN ('send', 'receive', 'create', 'publish', 'create_consumer') AND d.force_delegation"),
	'7', '... and the workers know it (send, receive, create, publish and create_consumer among them)');
{
	my ($out, $err) = ('', '');
	$coord->psql('postgres', 'SELECT queue.citus_setup()', stdout => \$out, stderr => \$err);
	is($out, '0', 'a second queue.citus_setup() distributes nothing');
	like($err, qr/already set up/, '... and says so');
}
fails_with($w1, 'SELECT queue.citus_setup()', '55000', 'queue.citus_setup() on a worker');

# the node (w1 or w2) that holds a name
sub node_of
{
	my ($name) = @_;
	my $port = on($coord, "SELECT node_port FROM queue.citus_placement('$name')");
	return $port == $w1->port ? $w1 : $port == $w2->port ? $w2 : undef;
}
sub other { return $_[0] == $w1 ? $w2 : $w1; }

# a tenant key placed on each worker, and a name without "." on each
my (%tenant, %plain);
for my $i (0 .. 63)
{
	my $n = node_of("t$i");
	$tenant{ $n->name } //= "t$i";
	$n = node_of("p$i");
	$plain{ $n->name } //= "p$i";
}
my ($ta, $tb) = ($tenant{ $w1->name }, $tenant{ $w2->name });
my ($pa, $pb) = ($plain{ $w1->name }, $plain{ $w2->name });
ok(defined $ta && defined $tb && defined $pa && defined $pb,
	"tenant keys and names on each worker: $ta, $pa on w1; $tb, $pb on w2");

on($coord, "SELECT queue.create('$ta.orders_dlq')");
on($coord, "SELECT queue.create('$ta.orders', dead_letter_queue => '$ta.orders_dlq', max_receive_count => 3)");
on($coord, "SELECT queue.create('$pa')");
on($coord, "SELECT queue.create('$pb')");
on($coord, "SELECT queue.create('$tb.jobs')");
is(on($w1, 'SELECT string_agg(queue_name, \' \' ORDER BY queue_name) FROM queue.queues'),
	"$pa $ta.orders $ta.orders_dlq",
	'w1 holds the queue placed by name and the tenant\'s queue with its dead-letter queue');
is(on($w2, 'SELECT string_agg(queue_name, \' \' ORDER BY queue_name) FROM queue.queues'),
	"$pb $tb.jobs", 'w2 holds the others');
is(on($coord, 'SELECT count(*) FROM queue._queues'), '0', 'the coordinator holds no queue');
is(on($coord, "SELECT placement_key || ' ' || is_local FROM queue.citus_placement('$ta.orders_dlq')"),
	"$ta false", "queue.citus_placement names the tenant key of $ta.orders_dlq");
is(on($coord, "SELECT queue.placement_of('a.b.c') || ' ' || queue.placement_of('abc')"), 'a abc',
	'queue.placement_of: the name up to its first "."');

# --- 2. Every call routed, from the coordinator and from a worker ----------

on($coord, 'CREATE ROLE citus_app LOGIN');
sub api_round
{
	my ($via, $q, $label) = @_;
	my $home = node_of($q);
	my $sent0 = on($home, "SELECT sent FROM queue.stats WHERE queue_name = '$q'");
	on($via, "SELECT queue.send('$q', 'one')");
	on($via, "SELECT queue.send('$q', '{\"n\": 2}'::jsonb)");
	is(on($via, "SELECT count(*) FROM queue.send_batch('$q', ARRAY['three', 'four'])"), '2', "$label: send_batch");
	is(on($via, "SELECT count(*) FROM queue.send_batch('$q', ARRAY['{}'::jsonb])"), '1', "$label: send_batch jsonb");
	is(on($home, "SELECT sent - $sent0 FROM queue.stats WHERE queue_name = '$q'"), '5',
		"$label: the five sends are on the queue's node");
	is(on($via, "SELECT count(*) FROM queue.peek('$q')"), '5', "$label: peek");
	my @r = split /\n/, on($via, "SELECT receipt FROM queue.receive('$q', 5, visibility_timeout => '1 h')");
	is(scalar(@r), 5, "$label: receive");
	on($via, "SELECT queue.change_visibility('$q', '$r[0]', '2 h')");
	is(on($via, "SELECT count(*) FROM queue.change_visibility_batch('$q', ARRAY['$r[1]'], '2 h')"), '1',
		"$label: change_visibility_batch");
	is(on($via, "SELECT queue.delete('$q', '$r[0]')"), 't', "$label: delete");
	is(on($via, "SELECT string_agg(deleted::text, ',') FROM queue.delete_batch('$q', ARRAY['$r[1]', '$r[2]', '$r[3]', '$r[4]'])"),
		'true,true,true,true', "$label: delete_batch");
	is(on($home, "SELECT count(*) FROM queue.peek('$q')"), '0', "$label: nothing left on the node");
	on($via, "SELECT queue.alter('$q', visibility_timeout => '45 s')");
	is(on($home, "SELECT visibility_timeout FROM queue.queues WHERE queue_name = '$q'"), '00:00:45',
		"$label: alter");
	on($via, "SELECT queue.grant('$q', 'citus_app', '{send}')");
	on($via, "SELECT queue.revoke('$q', 'citus_app', '{send}')");
	is(on($via, "SELECT count(*) FROM queue.group_stats('$q')"), '0', "$label: group_stats");
	on($via, "SELECT queue.send('$q', 'purged')");
	is(on($via, "SELECT queue.purge('$q')"), '1', "$label: purge");
	is(on($via, "SELECT queue.redrive('$ta.orders_dlq')"), '0', "$label: redrive");
}
api_round($coord, "$ta.orders", 'through the coordinator');
api_round($w2, "$ta.orders", 'through the other worker');
api_round($w1, $pb, 'through the other worker, a queue placed by name');

# the same over a queue in the shared tables (the TAP runs default to dedicated)
on($coord, "SELECT queue.create('$tb.shared', dedicated => false)");
is(on($w2, "SELECT dedicated FROM queue.queues WHERE queue_name = '$tb.shared'"), 'f', 'a shared queue on w2');
api_round($coord, "$tb.shared", 'through the coordinator, a shared queue');

on($w2, "SELECT queue.create('$ta.made_on_w2')");
is(on($w1, "SELECT count(*) FROM queue.queues WHERE queue_name = '$ta.made_on_w2'"), '1',
	'create on w2 makes the tenant\'s queue on w1');
is(on($w2, "SELECT queue.drop('$ta.made_on_w2')"), 't', 'drop from w2');
is(on($w1, "SELECT count(*) FROM queue.queues WHERE queue_name = '$ta.made_on_w2'"), '0', '... drops it on w1');

# --- 3. The wrong-node guard -----------------------------------------------

my $err = fails_with($coord, "SELECT queue.create(q) FROM unnest(ARRAY['$pa', '$pb', 'g_new']) q", '55000',
	'create over rows on the coordinator');
like($err, qr/is placed on another node.*HINT:\s+Call the function as a statement of its own/s,
	'... with a hint');
# (Citus 13.2.2 delegates a call over a one-row subquery it has pulled up and
# then crashes deparsing it, whatever the function: the rows here are two,
# or a materialized CTE.)
fails_with($coord, "WITH n AS MATERIALIZED (SELECT '$ta.orders'::text AS q) SELECT queue.send(n.q, 'x') FROM n",
	'55000', 'send in a CTE on the coordinator');
on($coord, "DO \$\$ BEGIN PERFORM queue.send('$ta.orders', 'plpgsql'); END \$\$");
is(on($w1, "SELECT count(*) FROM queue.peek('$ta.orders') WHERE body = 'plpgsql'"), '1',
	'a PL/pgSQL call with a constant name is delegated to the queue\'s node');
on($coord, "DO \$\$ DECLARE q text := '$ta.orders'; BEGIN PERFORM queue.send(q, 'plpgsql var'); END \$\$");
is(on($w1, "SELECT count(*) FROM queue.peek('$ta.orders') WHERE body = 'plpgsql var'"), '1',
	'... and so is one with the name in a variable');
fails_with($coord, "SET app.q = '$ta.orders'; SELECT queue.send(current_setting('app.q'), 'not constant')",
	'55000', 'send with a name that is not a constant, on the coordinator (not delegated)');
fails_with($w2, "SELECT queue.receive(q) FROM (VALUES ('$ta.orders'), ('$ta.orders_dlq')) v(q)", '55000',
	'receive over rows on the worker without the queue');
is(on($coord, 'SELECT count(*) FROM queue._queues'), '0', 'still no queue on the coordinator');
is(on($w2, "SELECT count(*) FROM queue._queues WHERE queue_name IN ('$ta.orders', 'g_new')"), '0',
	'nor on the other worker');
is(on($w1, "SELECT count(*) FROM (VALUES ('$ta.orders'), ('$ta.orders_dlq')) v(q), queue.send(q, 'over rows at home')"), '2',
	'the same call over rows on the queue\'s node works');
$err = fails_with($coord, "SELECT queue.create('$tb.src', dead_letter_queue => '$ta.orders_dlq', max_receive_count => 1)",
	'55000', 'a dead-letter queue on another node');
like($err, qr/must be on its node/, '... says what must share a node');
is(on($w2, "SELECT count(*) FROM queue.queues WHERE queue_name = '$tb.src'"), '0', '... and creates nothing');
on($w1, "SELECT queue.purge('$ta.orders')");

# --- 4. A queue table Citus manages is written by statement ----------------

$coord->safe_psql('postgres', 'CREATE DATABASE managed');
$coord->safe_psql('managed', q(
CREATE EXTENSION citus;
CREATE EXTENSION queue;
));
$coord->safe_psql('managed',
	"SELECT citus_set_coordinator_host('" . $coord->host . "', " . $coord->port . ')');
$coord->safe_psql('managed', "SELECT queue.create('lq', dedicated => true)");
my $lq = $coord->safe_psql('managed', "SELECT queue_id FROM queue.queues WHERE queue_name = 'lq'");
is($coord->safe_psql('managed', "SELECT queue._citus_manages('queue_data.q$lq')"), 'f',
	'a queue\'s own table is not Citus\'s');
$coord->safe_psql('managed', "SELECT citus_add_local_table_to_metadata('queue_data.q$lq')");
my $shard = $coord->safe_psql('managed',
	"SELECT 'queue_data.q${lq}_' || shardid FROM pg_dist_shard WHERE logicalrelid = 'queue_data.q$lq'::regclass");
is($coord->safe_psql('managed', "SELECT queue._citus_manages('queue_data.q$lq') || ' ' || queue._citus_manages('$shard')"
	  . " || ' ' || queue._citus_manages('queue._queues')"),
	'true true false', 'Citus manages the shell and its shard, not the registry');
# Citus gives the shell it makes a truncate trigger, which alone sends
# writes through a statement; the extension-made shells of the trial had
# none (their sends went into the shell's heap and were lost): drop it, so
# only insert.c's own check stands between a send and the shell's heap
my $trigger = $coord->safe_psql('managed',
	"SELECT tgname FROM pg_trigger WHERE tgrelid = 'queue_data.q$lq'::regclass");
like($trigger, qr/^truncate_trigger/, "Citus's shell has its trigger ($trigger)");
$coord->safe_psql('managed', "DROP TRIGGER $trigger ON queue_data.q$lq");
$coord->safe_psql('managed', q(
SELECT queue.send('lq', 'm1');
SELECT queue.send('lq', 'm2', deduplication_id => 'd2');
SELECT queue.send_batch('lq', ARRAY['m3', 'm4', 'm5']);
));
is($coord->safe_psql('managed', "SELECT pg_relation_size('queue_data.q$lq') || ' ' || (SELECT count(*) FROM queue_data.q$lq)"),
	'0 5', 'the sends left the shell\'s heap empty and are in the shard');
is($coord->safe_psql('managed', "SELECT string_agg(body, ' ' ORDER BY body) FROM queue.receive('lq', 10)"),
	'm1 m2 m3 m4 m5', 'every message is received');

# a role that makes a schema queue_citus with a table placements of its own
# does not switch the guard on (nor make every call fail)
$coord->safe_psql('managed', q(
CREATE ROLE citus_squatter;
GRANT CREATE ON DATABASE managed TO citus_squatter;
SET ROLE citus_squatter;
CREATE SCHEMA queue_citus;
CREATE TABLE queue_citus.placements (placement_key text);
RESET ROLE;
));
is($coord->safe_psql('managed', "SELECT count(*) FROM queue.send('lq', 'beside a squatter')"), '1',
	'a queue_citus.placements that a non-superuser made is not the anchor');
my ($sq_rc, $sq_out, $sq_err) = $coord->psql('managed', 'SELECT queue.citus_setup()');
like($sq_err, qr/schema "queue_citus" is owned by role "citus_squatter", who is not a superuser/,
	'queue.citus_setup() refuses that schema');

# --- 5. The outbox and two-phase commit ------------------------------------

on($coord, q(
CREATE TABLE app_orders (tenant queue.placement_key, order_id int, note text);
SELECT create_distributed_table('app_orders', 'tenant', colocate_with => 'queue_citus.placements');
));
sub tx
{
	my ($sql) = @_;
	my ($out, $err) = ('', '');
	$coord->psql('postgres', "SET citus.log_remote_commands = on; SET client_min_messages = log;\n$sql",
		stdout => \$out, stderr => \$err, on_error_stop => 1);
	return $err;
}
my $log = tx("BEGIN; INSERT INTO app_orders VALUES ('$ta', 1, 'one'); SELECT queue.send('$ta.orders', 'order 1'); COMMIT;");
is(on($coord, "SELECT count(*) FROM app_orders WHERE tenant = '$ta'") . ' '
	  . on($w1, "SELECT string_agg(body, ',') FROM queue.peek('$ta.orders')"),
	'1 order 1', 'outbox commit: the application row and the message');
unlike($log, qr/PREPARE TRANSACTION/, '... committed in one phase on the one node');
like($log, qr/issuing COMMIT/, '... (Citus committed on the node)');
tx("BEGIN; INSERT INTO app_orders VALUES ('$ta', 2, 'two'); SELECT queue.send('$ta.orders', 'order 2'); ROLLBACK;");
is(on($coord, "SELECT count(*) FROM app_orders WHERE tenant = '$ta'") . ' '
	  . on($w1, "SELECT count(*) FROM queue.peek('$ta.orders')"),
	'1 1', 'outbox rollback: neither');

$log = tx("BEGIN; SELECT queue.send('$ta.orders', 'two-phase a'); SELECT queue.send('$tb.jobs', 'two-phase b'); COMMIT;");
like($log, qr/PREPARE TRANSACTION.*COMMIT PREPARED/s, 'sends to two nodes commit by 2PC');
is(on($w1, "SELECT count(*) FROM queue.peek('$ta.orders') WHERE body = 'two-phase a'") . ' '
	  . on($w2, "SELECT count(*) FROM queue.peek('$tb.jobs') WHERE body = 'two-phase b'"),
	'1 1', '... both are there');
tx("BEGIN; SELECT queue.send('$ta.orders', 'rolled a'); SELECT queue.send('$tb.jobs', 'rolled b'); ROLLBACK;");
is(on($w1, "SELECT count(*) FROM queue.peek('$ta.orders') WHERE body = 'rolled a'") . ' '
	  . on($w2, "SELECT count(*) FROM queue.peek('$tb.jobs') WHERE body = 'rolled b'"),
	'0 0', '... and a rollback leaves neither');
on($w1, "SELECT queue.purge('$ta.orders')");
on($w2, "SELECT queue.purge('$tb.jobs')");

# --- 6. Long poll and dead letters on the node -----------------------------

my $bg = $coord->background_psql('postgres', on_error_stop => 0);
$bg->query_until(qr/started\n/, "\\echo started\nSELECT body FROM queue.receive('$ta.orders', wait => '15 s');\n");
ok( $w1->poll_query_until('postgres',
		"SELECT count(*) = 1 FROM pg_stat_activity WHERE wait_event_type = 'Extension' AND state = 'active'"
		  . " AND query LIKE '%queue.receive%'"),
	'a long poll through the coordinator waits on the queue\'s node');
my $t0 = time;
on($w2, "SELECT queue.send('$ta.orders', 'wake up')");
my $out = $bg->query_until(qr/\n/, '');
my $elapsed = time - $t0;
is($out, "wake up\n", 'a send from the other worker wakes it');
cmp_ok($elapsed, '<', 5, '... well before its wait ends');
note sprintf('send from w2 to the long poll\'s return through the coordinator: %.1f ms', $elapsed * 1000);
$bg->quit;

on($coord, "SELECT queue.create('$ta.poison', dead_letter_queue => '$ta.orders_dlq', max_receive_count => 1, visibility_timeout => '1 s')");
on($coord, "SELECT queue.send('$ta.poison', 'poison')");
is(on($coord, "SELECT receive_count FROM queue.receive('$ta.poison')"), '1', 'the poison message is received once');
ok( $w1->poll_query_until('postgres',
		"SELECT count(*) = 1 FROM queue.peek('$ta.orders_dlq') WHERE body = 'poison'"),
	'the node\'s queue worker moves it to the dead-letter queue, nobody receiving');
is(on($coord, "SELECT count(*) FROM queue.peek('$ta.poison')"), '0', '... and it left its queue');

# a consumer made through the coordinator runs on the queue's node: its
# table and handler are made on every node (Citus would propagate the
# function, the consumer's handler must be the node's own)
for my $n (@nodes)
{
	on($n, q(
SET citus.enable_ddl_propagation = off;
CREATE TABLE handled (body text);
CREATE FUNCTION handle(msgs queue.message[]) RETURNS void LANGUAGE sql
	AS $$ INSERT INTO handled SELECT m.body FROM unnest(msgs) m $$;
));
}
on($coord, "SELECT queue.create('$ta.pushed')");
on($coord, "SELECT queue.create_consumer('$ta.pusher', '$ta.pushed', 'handle(queue.message[])')");
is(on($w1, 'SELECT count(*) FROM queue.consumers') . ' ' . on($coord, 'SELECT count(*) FROM queue.consumers'),
	'1 0', 'create_consumer through the coordinator makes the consumer on the queue\'s node');
on($w2, "SELECT queue.send('$ta.pushed', 'pushed from w2')");
ok($w1->poll_query_until('postgres', "SELECT count(*) = 1 FROM handled WHERE body = 'pushed from w2'"),
	'the node\'s consumer process handles a message sent from the other worker');
ok($w1->poll_query_until('postgres', "SELECT count(*) = 0 FROM queue.peek('$ta.pushed')"),
	'... and deletes it');
on($w2, "SELECT queue.pause_consumer('$ta.pusher')");
is(on($w1, "SELECT state FROM queue.consumers WHERE consumer_name = '$ta.pusher'"), 'paused',
	'pause_consumer from the other worker reaches the consumer (placed by its name, as a queue)');
on($coord, "SELECT queue.resume_consumer('$ta.pusher')");
isnt(on($w1, "SELECT state FROM queue.consumers WHERE consumer_name = '$ta.pusher'"), 'paused',
	'resume_consumer through the coordinator');
$err = fails_with($coord, "SELECT queue.create_consumer('$tb.pusher', '$ta.pushed', 'handle(queue.message[])')",
	'55000', 'a consumer whose name is placed on another node than its queue');
like($err, qr/consumer "\Q$tb.pusher\E" \(argument "consumer_name"\)/, '... names it');
is(on($coord, "SELECT queue.drop_consumer('$ta.pusher')"), 't', 'drop_consumer through the coordinator');
is(on($w1, 'SELECT count(*) FROM queue.consumers'), '0', '... dropped it on the node');

# --- 7. Moves of the anchor's shards are refused; nothing is lost -----------

on($coord, "SELECT queue.send_batch('$ta.orders', ARRAY['k1', 'k2', 'k3'])");
my $before = on($w1, "SELECT string_agg(body, ',' ORDER BY message_id) FROM queue.peek('$ta.orders', 100)");
my $sh = on($coord, "SELECT shard_id FROM queue.citus_placement('$ta.orders')");
$err = fails_with($coord,
	"SELECT citus_move_shard_placement($sh, '" . $w1->host . "', " . $w1->port . ", '" . $w2->host . "', "
	  . $w2->port . ", shard_transfer_mode => 'block_writes')",
	'55000', 'citus_move_shard_placement of a shard holding queues');
like($err, qr/hold queues and cannot be moved.*DETAIL:.*placed on: \Q@{[ $w1->host ]}:@{[ $w1->port ]}\E/s,
	'... says why');
fails_with($coord,
	"SELECT citus_drain_node('" . $w1->host . "', " . $w1->port . ", shard_transfer_mode => 'block_writes')",
	'55000', 'draining a node that holds queues');
fails_with($coord,
	"SELECT citus_split_shard_by_split_points($sh, ARRAY[((shardminvalue::bigint + shardmaxvalue::bigint) / 2)::text], "
	  . "ARRAY[(SELECT nodeid FROM pg_dist_node WHERE nodeport = " . $w1->port . "), "
	  . "(SELECT nodeid FROM pg_dist_node WHERE nodeport = " . $w2->port . ")], 'block_writes') "
	  . "FROM pg_dist_shard WHERE shardid = $sh",
	'55000', 'splitting a shard holding queues');
is(on($coord, "SELECT shard_id || ' ' || node_port FROM queue.citus_placement('$ta.orders')"), "$sh " . $w1->port,
	'the shard stayed, whole');
is(on($coord, "SELECT string_agg(body, ',' ORDER BY message_id) FROM queue.peek('$ta.orders', 100)"), $before,
	'every message is there, reached through the coordinator');
on($w1, "SELECT queue.purge('$ta.orders')");

# --- 8. Topics ------------------------------------------------------------

on($coord, "SELECT queue.create_topic('$ta.events')");
is(on($w1, "SELECT count(*) FROM queue.topics WHERE topic_name = '$ta.events'"), '1',
	'a tenant\'s topic is on the tenant\'s node');
on($coord, "SELECT queue.subscribe('$ta.events', '$ta.orders')");
fails_with($coord, "SELECT queue.subscribe('$ta.events', '$pb')", '55000', 'a subscriber on another node');
is(on($coord, "SELECT delivered FROM queue.publish('$ta.events', 'published')") . ' '
	  . on($w2, "SELECT delivered FROM queue.publish('$ta.events', 'published from w2')"),
	'1 1', 'a publish from the coordinator and from the other worker delivers');
is(on($w1, "SELECT string_agg(body, ',' ORDER BY message_id) FROM queue.peek('$ta.orders')"),
	'published,published from w2', '... on the node');
is(on($coord, "SELECT sum(delivered) FROM queue.publish_batch('$ta.events', ARRAY['b1', 'b2'])"), '2',
	'publish_batch through the coordinator');
on($w2, "SELECT queue.grant_topic('$ta.events', 'citus_app', '{publish}')");
on($coord, "SELECT queue.revoke_topic('$ta.events', 'citus_app', '{publish}')");
is(on($w2, "SELECT queue.unsubscribe('$ta.events', '$ta.orders')"), 't', 'unsubscribe from the other worker');
is(on($coord, "SELECT delivered FROM queue.publish('$ta.events', 'to nobody')"), '0', '... and the topic delivers to nobody');
is(on($w2, "SELECT queue.drop_topic('$ta.events')"), 't', 'drop_topic from the other worker');
is(on($w1, "SELECT count(*) FROM queue.topics"), '0', '... dropped it on the node');
on($w1, "SELECT queue.purge('$ta.orders')");

# cluster-wide views, read on the coordinator
is(on($coord, 'SELECT count(*) FROM queue.citus_queues()'),
	on($w1, 'SELECT count(*) FROM queue.queues') + on($w2, 'SELECT count(*) FROM queue.queues'),
	'queue.citus_queues() on the coordinator lists every node\'s queues');
is(on($coord, "SELECT node_port || ' ' || (queues).fifo FROM queue.citus_queues() WHERE (queues).queue_name = '$tb.jobs'"),
	$w2->port . ' false', '... each with its node');
on($w2, "SELECT queue.send('$tb.jobs', 'counted')");
is(on($coord, "SELECT (stats).visible FROM queue.citus_stats() WHERE (stats).queue_name = '$tb.jobs'"), '1',
	'queue.citus_stats() reads each node\'s counts');
is(on($coord, 'SELECT count(*) FROM queue.citus_consumers()'), '0', 'queue.citus_consumers() (none here)');
fails_with($coord, "SELECT queue.citus_placement('bad name')", '42602', 'queue.citus_placement checks the name');
on($w2, "SELECT queue.purge('$tb.jobs')");

# --- 9. kill -9 of the queue's worker in the middle of sends ---------------

# kill -9 of a node's postmaster and its children at once, as 010_crash
# does, and the lock files of a postmaster this container has not reaped
sub kill9_all
{
	my ($node) = @_;
	my $pm = $node->{_pid};
	my @children;
	for my $stat (glob '/proc/[0-9]*/stat')
	{
		open my $fh, '<', $stat or next;
		my $line = <$fh>;
		close $fh;
		push @children, $1 if defined $line && $line =~ /^(\d+) \(.*\) \S+ (\d+) / && $2 == $pm;
	}
	$node->kill9;
	kill 'KILL', @children;
	for my $pid ($pm, @children)
	{
		for (my $i = 0; $i < 100; $i++)
		{
			open my $fh, '<', "/proc/$pid/stat" or last;
			my $line = <$fh>;
			close $fh;
			last if !defined $line || $line =~ /^\d+ \(.*\) Z /;
			select(undef, undef, undef, 0.1);
		}
	}
	for (my $i = 0; $i < 50 && kill(0, $pm); $i++)
	{
		select(undef, undef, undef, 0.1);
	}
	if (kill 0, $pm)
	{
		unlink $node->data_dir . '/postmaster.pid';
		unlink $node->host . '/.s.PGSQL.' . $node->port . '.lock';
	}
}

my $script = "$PostgreSQL::Test::Utils::tmp_check/citus_load.sql";
my $acks = "$PostgreSQL::Test::Utils::tmp_check/citus_load.out";
PostgreSQL::Test::Utils::append_to_file($script,
	join('', map { "SELECT 'acked ' || message_id FROM queue.send('$ta.orders', 'load $_');\n" } 1 .. 2000));
my $h = IPC::Run::start(
	[ 'psql', '-XAtq', '-d', $coord->connstr('postgres'), '-f', $script ],
	'>', $acks, '2>', '/dev/null');
ok($w1->poll_query_until('postgres', "SELECT sent >= 100 FROM queue.stats WHERE queue_name = '$ta.orders'"),
	'sends through the coordinator are under way');
kill9_all($w1);
$h->finish;
my $lout = PostgreSQL::Test::Utils::slurp_file($acks);
my @acked = $lout =~ /^acked (\d+)$/mg;
$w1->start;
my %there = map { $_ => 1 } split /\n/,
  on($w1, "SELECT message_id FROM queue.peek('$ta.orders', 5000)");
is(on($w1, "SELECT count(*) - count(DISTINCT body) FROM queue.peek('$ta.orders', 5000)"), '0',
	'no send is there twice');
my @lost = grep { !$there{$_} } @acked;
ok(@acked >= 100 && @acked < 2000, scalar(@acked) . ' sends acknowledged before the kill, the rest failed');
is(scalar(@lost), 0, 'every acknowledged send is there after the restart') or diag("lost: @lost");
ok($coord->poll_query_until('postgres', "SELECT count(*) > 0 FROM queue.send('$ta.orders', 'after restart')"),
	'sends route to the restarted node');

# --- 10. The extension's own move of a shard's queues to a new node ---------

# a third worker, added now: it holds no shard of the anchor, so no queue
my $w3 = citus_node('w3', 0);
$coord->safe_psql('postgres', "SELECT citus_add_node('" . $w3->host . "', " . $w3->port . ')');
is(on($w3, "SELECT extversion FROM pg_extension WHERE extname = 'queue'") . ' '
	  . on($coord, "SELECT count(*) FROM pg_dist_placement p JOIN pg_dist_node n USING (groupid) "
		  . "WHERE n.nodeport = " . $w3->port . " AND p.shardid IN (SELECT shardid FROM pg_dist_shard "
		  . "WHERE logicalrelid = 'queue_citus.placements'::regclass)"),
	"$version 0", 'a node added later has the extension and no shard of the anchor');
on($w3, q(
SET citus.enable_ddl_propagation = off;
CREATE TABLE handled (body text);
CREATE FUNCTION handle(msgs queue.message[]) RETURNS void LANGUAGE sql
	AS $$ INSERT INTO handled SELECT m.body FROM unnest(msgs) m $$;
));

# a tenant on w1 whose shard holds no other name of this test
my $tm;
my $ta_shard = on($coord, "SELECT shard_id FROM queue.citus_placement('$ta.orders')");
my $acme_shard = on($coord, "SELECT shard_id FROM queue.citus_placement('acme')");
for my $i (0 .. 99)
{
	my ($sh, $port) = split /\|/, on($coord, "SELECT shard_id, node_port FROM queue.citus_placement('m$i')");
	next if $port != $w1->port || $sh == $ta_shard || $sh == $acme_shard;
	$tm = "m$i";
	last;
}
ok(defined $tm, "a tenant of its own shard on w1: $tm");
my $msh = on($coord, "SELECT shard_id FROM queue.citus_placement('$tm')");
my $move_to_w3 = "CALL queue.citus_move_shard($msh, '" . $w3->host . "', " . $w3->port . ')';

on($coord, "SELECT queue.create('$tm.dlq', dedicated => false)");
on($coord, "SELECT queue.create('$tm.std', dead_letter_queue => '$tm.dlq', max_receive_count => 5)");
on($coord, "SELECT queue.create('$tm.fifo', fifo => true, deduplication_window => '1 hour')");
on($coord, "SELECT queue.create('$tm.ded', dedicated => true)");
on($coord, "SELECT queue.create('$tm.pushed')");
on($coord, "SELECT queue.create_topic('$tm.events')");
on($coord, "SELECT queue.subscribe('$tm.events', '$tm.std')");
# the topic's table: a grant with its grant option, and one its grantee made
on($coord, 'CREATE ROLE citus_reader');
my $acl_sql = sub {
	return "SELECT string_agg(a::text, ',' ORDER BY a::text) FROM queue._topics t, pg_class c, unnest(c.relacl) a "
	  . "WHERE t.topic_name = '$tm.events' AND c.oid = ('queue_data.t' || t.topic_id)::regclass";
};
my $ttab = on($w1, "SELECT 'queue_data.t' || topic_id FROM queue._topics WHERE topic_name = '$tm.events'");
on($w1, "GRANT USAGE ON SCHEMA queue_data TO citus_app; GRANT SELECT, INSERT ON $ttab TO citus_app WITH GRANT OPTION; "
	  . "SET ROLE citus_app; GRANT SELECT ON $ttab TO citus_reader; RESET ROLE; REVOKE USAGE ON SCHEMA queue_data FROM citus_app");
my $topic_acl = on($w1, $acl_sql->());
like($topic_acl, qr{citus_app=a\*r\*/.*citus_reader=r/citus_app}, "the topic's table's grants: $topic_acl");
on($coord, "SELECT queue.create_consumer('$tm.pusher', '$tm.pushed', 'handle(queue.message[])')");
on($coord, "SELECT queue.grant('$tm.std', 'citus_app', '{send}')");
# (an array of constants: Citus delegates a call whose arguments are constants)
on($coord, "SELECT count(*) FROM queue.send_batch('$tm.std', ARRAY[" . join(', ', map { "'first $_'" } 1 .. 200) . '])');
on($coord, "SELECT count(*) FROM queue.send_batch('$tm.ded', ARRAY[" . join(', ', map { "'ded $_'" } 1 .. 50) . '])');
for my $g (1 .. 3)
{
	on($coord, "SELECT count(*) FROM queue.send('$tm.fifo', 'g$g m$_', message_group_id => 'g$g', deduplication_id => 'd$g.$_')")
	  for 1 .. 5;
}
my @leases = split /\n/, on($coord, "SELECT message_id || ' ' || receipt FROM queue.receive('$tm.std', 50, visibility_timeout => '1 h')");
is(scalar(@leases), 50, '50 messages in flight');
my $stale = (split / /, $leases[0])[1];
my $in_flight_sql = "SELECT string_agg(message_id || ':' || receive_count || ':' || visible_at, ',' ORDER BY message_id) "
  . "FROM queue.peek('$tm.std', 100000) WHERE visible_at > now()";
my $in_flight = on($w1, $in_flight_sql);
is(on($coord, "SELECT body FROM queue.receive('$tm.fifo', 1, visibility_timeout => '1 h')"), 'g1 m1',
	'a FIFO group\'s head in flight');
my $ded_before = on($w1, "SELECT string_agg(message_id || body, ',' ORDER BY message_id) FROM queue.peek('$tm.ded', 1000)");
my $layouts = on($w1, "SELECT string_agg(queue_name || ':' || dedicated, ' ' ORDER BY queue_name) FROM queue.queues WHERE queue_name LIKE '$tm.%'");
like($layouts, qr/\Q$tm.dlq:false\E.*\Q$tm.std:true\E/, "both layouts among them: $layouts");
my %first = map { $_ => 1 } split /\n/, on($w1, "SELECT message_id FROM queue.peek('$tm.std', 1000)");

# a queue whose dead-letter queue is in another shard (of the same node)
# cannot move without it: refused, nothing changes
on($coord, "SELECT queue.create('$tm.linked', dead_letter_queue => '$ta.orders_dlq', max_receive_count => 2)");
$err = fails_with($coord, $move_to_w3, '55000', 'a move that would part a queue from its dead-letter queue');
like($err, qr/cannot move without what must share their node.*\Q$tm.linked\E \(dead-letter queue \Q$ta.orders_dlq\E\)/s,
	'... names them');
is(on($coord, "SELECT node_port FROM queue.citus_placement('$tm.std')") . ' '
	  . on($w1, "SELECT count(*) FROM queue.peek('$tm.std', 1000)") . ' '
	  . join('', map { on($_, 'SELECT count(*) FROM queue._citus_moves') } $w1, $w3),
	$w1->port . ' 200 00', '... the shard and its queues stay, nothing is noted as moving');
on($coord, "SELECT queue.drop('$tm.linked')");

# refused to anyone but a superuser, and on bad arguments
on($coord, "GRANT USAGE ON SCHEMA queue TO citus_app; GRANT EXECUTE ON PROCEDURE queue.citus_move_shard(bigint, text, integer) TO citus_app");
$err = fails_with($coord, "SET ROLE citus_app; $move_to_w3", '42501', 'queue.citus_move_shard by a non-superuser');
like($err, qr/must be run by a superuser/, '... says so');
on($coord, "REVOKE EXECUTE ON PROCEDURE queue.citus_move_shard(bigint, text, integer) FROM citus_app");
fails_with($coord, "CALL queue.citus_move_shard(1, '" . $w3->host . "', " . $w3->port . ')', '22023', 'a shard that is not the anchor\'s');
fails_with($coord, "CALL queue.citus_move_shard($msh, 'nowhere', 1)", '22023', 'a target that is no node');
fails_with($coord, "CALL queue.citus_move_shard(NULL, 'nowhere', 1)", '22004', 'a null shard');
fails_with($coord, "CALL queue.citus_move_shard($msh, '" . $w1->host . "', " . $w1->port . ')', '22023',
	'a move to the node it is on');
fails_with($w1, $move_to_w3, '55000', 'a move from a worker');

# the move, while a producer sends through the coordinator
my $pscript = "$PostgreSQL::Test::Utils::tmp_check/citus_move_load.sql";
my $pout = "$PostgreSQL::Test::Utils::tmp_check/citus_move_load.out";
my $perr = "$PostgreSQL::Test::Utils::tmp_check/citus_move_load.err";
PostgreSQL::Test::Utils::append_to_file($pscript,
	join('', map { "SELECT 'acked ' || message_id FROM queue.send('$tm.std', 'load $_');\n" } 1 .. 6000));
my $ph = IPC::Run::start(
	[ 'psql', '-XAtq', '-d', $coord->connstr('postgres'), '-f', $pscript ],
	'>', $pout, '2>', $perr);
ok($w1->poll_query_until('postgres', "SELECT count(*) >= 500 FROM queue.peek('$tm.std', 100000)"),
	'the producer is sending');
my ($mout, $merr) = ('', '');
my $t_move = time;
my $mrc = $coord->psql('postgres', $move_to_w3, stdout => \$mout, stderr => \$merr);
my $move_s = time - $t_move;
is($mrc, 0, 'queue.citus_move_shard moves the shard to the new node') or diag($merr);
my ($nq, $nmsg) = $merr =~ /moved shard \d+ with (\d+) queues \((\d+) messages\)/;
note sprintf('the move of %d queues, %d messages, under a producer: %.0f ms (%s)', $nq // 0, $nmsg // 0,
	$move_s * 1000, $merr =~ /NOTICE:\s+(.*)/ ? $1 : '');
$ph->finish;
my @packed = PostgreSQL::Test::Utils::slurp_file($pout) =~ /^acked (\d+)$/mg;
my @perrors = PostgreSQL::Test::Utils::slurp_file($perr) =~ /ERROR:\s+(.*)/g;
my @other = grep { !/is being moved to another node/ } @perrors;
note scalar(@packed) . ' sends acknowledged, ' . scalar(@perrors) . ' refused while the queues moved';
is(scalar(@packed) + scalar(@perrors), 6000, 'every send was acknowledged or refused');
is(scalar(@other), 0, '... refused only as being moved (55006)') or diag("@other[0 .. 2]");

is(on($coord, "SELECT shard_id || ' ' || node_port FROM queue.citus_placement('$tm.std')"), "$msh " . $w3->port,
	'the shard is on the new node');
is(on($w3, $acl_sql->()), $topic_acl, '... the topic\'s table keeps its grants exactly, grant options and grantors too');
is(on($w1, "SELECT count(*) FROM queue._queues WHERE queue_name LIKE '$tm.%'") . ' '
	  . on($w1, "SELECT count(*) FROM queue._topics WHERE topic_name LIKE '$tm.%'") . ' '
	  . on($w1, "SELECT count(*) FROM queue._consumers WHERE consumer_name LIKE '$tm.%'"),
	'0 0 0', 'nothing of the tenant is left on the old node');
is(on($w3, "SELECT string_agg(queue_name || ':' || dedicated, ' ' ORDER BY queue_name) FROM queue.queues"),
	$layouts, 'its queues are on the new node, each in its layout (shared or dedicated)');
my @moved = split /\n/, on($w3, "SELECT message_id FROM queue.peek('$tm.std', 100000)");
my %moved = map { $_ => 1 } @moved;
my @want = (keys %first, @packed);
is(scalar(@moved), scalar(keys %moved), 'no message is there twice');
is(scalar(grep { !$moved{$_} } @want), 0, 'every message sent before and every send acknowledged is there');
is(scalar(@moved), scalar(@want), '... and nothing else');
is(on($w3, $in_flight_sql), $in_flight, 'the leases are kept: receive counts and visibility as they were');
is(on($w3, "SELECT string_agg(message_id || body, ',' ORDER BY message_id) FROM queue.peek('$tm.ded', 1000)"), $ded_before,
	'the dedicated queue\'s messages, with their ids');
is(on($w3, "SELECT dead_letter_queue || ' ' || max_receive_count FROM queue.queues WHERE queue_name = '$tm.std'"),
	"$tm.dlq 5", 'its dead-letter queue is its own again');
is(on($coord, "SELECT string_agg(body, ',') FROM queue.receive('$tm.fifo', 20)"),
	'g2 m1,g2 m2,g2 m3,g2 m4,g2 m5,g3 m1,g3 m2,g3 m3,g3 m4,g3 m5',
	'FIFO: the group in flight stays held, the others come in order');
my $orig = on($w3, "SELECT message_id FROM queue.peek('$tm.fifo', 100) WHERE body = 'g2 m3'");
is(on($coord, "SELECT message_id || ' ' || duplicate FROM queue.send('$tm.fifo', 'again', message_group_id => 'g2', deduplication_id => 'd2.3')"),
	"$orig true", 'the deduplication window came along');
$err = fails_with($coord, "SELECT queue.delete('$tm.std', '$stale')", '55000', 'a receipt issued before the move');
like($err, qr/stale receipt.*before the queue moved/s, '... is stale');
my ($fresh_id, $fresh) = split / /, on($coord, "SELECT message_id || ' ' || receipt FROM queue.receive('$tm.std', 1)");
is(on($coord, "SELECT queue.delete('$tm.std', '$fresh')"), 't', 'a receipt of the new node deletes');
my $sent_w3 = on($w3, "SELECT sent FROM queue.stats WHERE queue_name = '$tm.std'");
on($w2, "SELECT queue.send('$tm.std', 'from w2 after the move')");
is(on($coord, "SELECT delivered FROM queue.publish('$tm.events', 'published after the move')"), '1',
	'the topic publishes on the new node');
is(on($w3, "SELECT sent - $sent_w3 FROM queue.stats WHERE queue_name = '$tm.std'"), '2',
	'calls from a worker and the coordinator go to the new node');
cmp_ok(on($coord, "SELECT max(message_id) FROM queue.send('$tm.std', 'a new id')"), '>', (sort { $b <=> $a } @moved)[0],
	'the new node\'s ids continue above the messages that came');
on($coord, "SELECT queue.send('$tm.pushed', 'pushed after the move')");
ok($w3->poll_query_until('postgres', "SELECT count(*) = 1 FROM handled WHERE body = 'pushed after the move'"),
	'the consumer runs on the new node');

# a move that fails midway (here Citus's copy of the shard, refused by the
# target) leaves everything on the source, with receipts still valid
on($w2, q(
SET citus.enable_ddl_propagation = off;
CREATE FUNCTION no_room() RETURNS event_trigger LANGUAGE plpgsql AS $$
BEGIN
	IF EXISTS (SELECT FROM pg_event_trigger_ddl_commands() c WHERE c.object_identity LIKE 'queue_citus.moving%') THEN
		RAISE EXCEPTION 'no room here' USING ERRCODE = '53100';
	END IF;
END $$;
CREATE EVENT TRIGGER no_room ON ddl_command_end WHEN TAG IN ('CREATE TABLE') EXECUTE FUNCTION no_room();
));
my $before_fail = on($w3, "SELECT string_agg(message_id::text, ',' ORDER BY message_id) FROM queue.peek('$tm.std', 100000)");
my ($kept_id, $kept) = split / /, on($coord, "SELECT message_id || ' ' || receipt FROM queue.receive('$tm.std', 1, visibility_timeout => '1 h')");
$err = fails_with($coord, "CALL queue.citus_move_shard($msh, '" . $w2->host . "', " . $w2->port . ')', '53100',
	'a move whose copy fails on the target');
like($err, qr/its queues stay on .*\Q@{[ $w3->port ]}\E.*no room here/s, '... says where the queues are');
is(on($coord, "SELECT node_port FROM queue.citus_placement('$tm.std')") . ' '
	  . join('', map { on($_, 'SELECT count(*) FROM queue._citus_moves') } $w2, $w3),
	$w3->port . ' 00', '... the shard stayed, nothing is noted as moving');
is(on($w3, "SELECT string_agg(message_id::text, ',' ORDER BY message_id) FROM queue.peek('$tm.std', 100000)"), $before_fail,
	'... every message is there, once');
is(on($coord, "SELECT queue.delete('$tm.std', '$kept')"), 't', '... and a receipt issued before it still deletes');
on($w2, 'DROP EVENT TRIGGER no_room');
# (section 7's drain left w1 marked to hold no shards)
fails_with($coord, "CALL queue.citus_move_shard($msh, '" . $w1->host . "', " . $w1->port . ')', '55000',
	'a move to a node marked to hold no shards');

# a move interrupted midway (the coordinator's session gone after the
# source packed the queues): calls on them are refused with 55006, from any
# node, until the next move of the shard undoes it and moves
my ($g3, $g2) = map { on($coord, "SELECT groupid FROM pg_dist_node WHERE nodeport = " . $_->port) } $w3, $w2;
my $before_int = on($w3, "SELECT string_agg(message_id::text, ',' ORDER BY message_id) FROM queue.peek('$tm.std', 100000)");
on($coord, "SELECT queue._citus_run_step('announce', $msh, $g3, $g2)");
on($coord, "SELECT queue._citus_run_step('out', $msh, $g3, $g2)");
$err = fails_with($coord, "SELECT queue.send('$tm.std', 'while packed')", '55006',
	'a send through the coordinator while the queues are packed');
like($err, qr/is being moved to another node/, '... says why');
fails_with($w3, "SELECT count(*) FROM queue.receive('$tm.std')", '55006', '... a receive on their node');
fails_with($w3, "SELECT queue.create('$tm.new')", '55006', '... and a create of a queue of the shard');
($mout, $merr) = ('', '');
$mrc = $coord->psql('postgres', "CALL queue.citus_move_shard($msh, '" . $w2->host . "', " . $w2->port . ')',
	stdout => \$mout, stderr => \$merr);
is($mrc, 0, 'the next move of the shard runs') or diag($merr);
like($merr, qr/an interrupted move of shard $msh was undone/, '... after undoing the interrupted one');
is(on($w2, "SELECT string_agg(message_id::text, ',' ORDER BY message_id) FROM queue.peek('$tm.std', 100000)"), $before_int,
	'... and every message is on its new node, once');
is(join('', map { on($_, 'SELECT count(*) FROM queue._citus_moves') } $w1, $w2, $w3), '000', 'no move is noted any more');

# --- 11. The SQS endpoint across nodes ---------------------------------------

# w1 and w2 serve the SQS endpoint; a request to w2's for a queue of w1 is
# forwarded there after w2 verified it, and w1 verifies it again
SKIP:
{
	skip 'no Debian python3-boto3', 25
	  unless system("$python -I -c 'import boto3' >/dev/null 2>&1") == 0;
	skip "no $pkglib/queue_sqs.so with libcurl (libmicrohttpd-dev, libcurl4-openssl-dev)", 25
	  unless -f "$pkglib/queue_sqs.so" && `ldd $pkglib/queue_sqs.so` =~ /libcurl/;

	on($coord, q(
CREATE ROLE sqs_citus LOGIN;
GRANT USAGE ON SCHEMA queue TO sqs_citus;
GRANT CREATE ON DATABASE postgres TO sqs_citus;
));
	my ($key, $secret) = ('AKIDCITUSCLUSTER0001', 'citus-cluster-secret-0000000000000000000001');
	is(on($coord, "SELECT count(*) FROM run_command_on_all_nodes(\$\$"
		  . "SELECT count(*) FROM queue.create_access_key('sqs_citus', '$key', '$secret')\$\$) WHERE success"),
		'4', 'the access key is made on every node');
	for my $n ($w1, $w2)
	{
		on($coord, "SELECT queue.citus_set_sqs_endpoint('" . $n->host . "', " . $n->port
			  . ", 'http://127.0.0.1:$sqs_port{$n->name}')");
	}
	is(on($w2, 'SELECT count(*) FROM queue_citus.sqs_endpoints'), '2', 'every node knows the endpoints');
	$err = fails_with($coord, "SET ROLE citus_app; SELECT queue.citus_set_sqs_endpoint('" . $w1->host . "', "
		  . $w1->port . ", 'http://127.0.0.1:1')", '42501', 'queue.citus_set_sqs_endpoint by a non-superuser');
	fails_with($coord, "SELECT queue.citus_set_sqs_endpoint('" . $w1->host . "', " . $w1->port . ", 'ftp://x')",
		'22023', 'an endpoint that is no http URL');

	# a name for the wire (no "."), placed on w1
	my $sq;
	for my $i (0 .. 99)
	{
		next unless node_of("sqsq$i") == $w1;
		$sq = "sqsq$i";
		last;
	}
	my @client = ($python, '-I', "$FindBin::RealBin/sqs/citus_client.py",
		"http://127.0.0.1:$sqs_port{$w2->name}", $key, $secret);
	my $client = sub {
		my ($out, $err) = ('', '');
		IPC::Run::run([ @client, @_ ], '>', \$out, '2>', \$err);
		diag($err) if $err ne '';
		my %v = $out =~ /^value\t(\w+)\t(.*)$/mg;
		return \%v;
	};
	like($client->('create', $sq)->{url}, qr{/000000000000/\Q$sq\E$}, "CreateQueue of $sq at w2's endpoint");
	is(on($w1, "SELECT count(*) FROM queue.queues WHERE queue_name = '$sq'") . ' '
		  . on($w2, "SELECT count(*) FROM queue._queues WHERE queue_name = '$sq'"),
		'1 0', '... makes it on w1, its node');
	is(on($w1, "SELECT owner FROM queue.queues WHERE queue_name = '$sq'"), 'sqs_citus', '... owned by the key\'s role');
	like($client->('send', $sq, 'over w2')->{id}, qr/^[0-9a-f-]{36}$/, 'SendMessage at w2\'s endpoint');
	is(on($w1, "SELECT string_agg(body, ',') FROM queue.peek('$sq')"), 'over w2', '... the message is on w1');
	my $v = $client->('wait', $sq, '1');
	is("$v->{received} $v->{bodies} $v->{deleted}", '1 over w2 1', 'ReceiveMessage and DeleteMessage at w2\'s endpoint');
	is(on($w1, "SELECT count(*) FROM queue.peek('$sq')"), '0', '... deleted it on w1');

	# a long poll at w2's endpoint parks on w1, and a commit there wakes it
	my ($out, $perr) = ('', '');
	my $h = IPC::Run::start([ @client, 'wait', $sq, '20' ], '>', \$out, '2>', \$perr);
	sleep 2;
	my $t_send = time;
	on($w1, "SELECT queue.send('$sq', 'wake up')");
	$h->finish;
	my %lp = $out =~ /^value\t(\w+)\t(.*)$/mg;
	is("$lp{received} $lp{bodies}", '1 wake up', 'a long poll at w2\'s endpoint gets the message sent on w1')
	  or diag($perr);
	my $woken = ($lp{at} // 0) - $t_send;
	cmp_ok($woken, '<', 5, '... woken by the commit, well before its 20 s');
	note sprintf('send on w1 to the answer of a long poll at w2\'s endpoint: %.0f ms', $woken * 1000);
	my $t0 = time;
	$v = $client->('wait', $sq, '2');
	my $empty = time - $t0;
	is($v->{received}, '0', 'an empty long poll through the forward');
	cmp_ok($empty, '>=', 1.8, '... answers after its WaitTimeSeconds');
	is($client->('attrs', $sq)->{visible}, '0', 'GetQueueAttributes at w2\'s endpoint');

	# w2 verifies before it forwards: a wrong secret never reaches w1
	my $before = on($w1, "SELECT sent FROM queue.stats WHERE queue_name = '$sq'");
	my @bad = ($python, '-I', "$FindBin::RealBin/sqs/citus_client.py",
		"http://127.0.0.1:$sqs_port{$w2->name}", $key, 'wrong');
	($out, $perr) = ('', '');
	IPC::Run::run([ @bad, 'error', $sq ], '>', \$out, '2>', \$perr);
	like($out, qr/^value\terror\t(SignatureDoesNotMatch|InvalidClientTokenId)$/m, 'a wrong secret is refused at w2');
	is(on($w1, "SELECT sent FROM queue.stats WHERE queue_name = '$sq'"), $before, '... and nothing is sent on w1');

	# one role's forwarded long polls hold at most its share of w2's 256
	# forward slots (queue.sqs_forwards_per_role, 64; issue 48): sqs_citus
	# opens 260 ReceiveMessage (5 s) at w2 for its queue on w1, and
	# sqs_citus_b's SendMessage there, 1.5 s later, forwarded too, is
	# answered in under 1 s
	on($coord, 'CREATE ROLE sqs_citus_b LOGIN; GRANT USAGE ON SCHEMA queue TO sqs_citus_b');
	my ($bkey, $bsecret) = ('AKIDCITUSCLUSTER0002', 'citus-cluster-secret-0000000000000000000002');
	on($coord, "SELECT count(*) FROM run_command_on_all_nodes(\$\$"
		  . "SELECT count(*) FROM queue.create_access_key('sqs_citus_b', '$bkey', '$bsecret')\$\$) WHERE success");
	on($coord, "SELECT queue.grant('$sq', 'sqs_citus_b', '{send}')");
	IPC::Run::run([ $python, '-I', "$FindBin::RealBin/sqs/role_shares_client.py", "http://127.0.0.1:$sqs_port{$w2->name}",
			"$key:$secret", $sq, 260, 5, "$bkey:$bsecret", $sq ], '>', \$out, '2>', \$perr, IPC::Run::timeout(90));
	diag($perr) if $perr ne '';
	my %sh = $out =~ /^value\t(\w+)\t(.*)$/mg;
	note("forwards: $_ = $sh{$_}") for sort keys %sh;
	is($sh{other_send_status}, '200', 'another role\'s SendMessage at w2 is forwarded beside 260 forwarded long polls');
	cmp_ok($sh{other_send_ms} // 1e9, '<', 1000, "... in under 1 s ($sh{other_send_ms} ms)");
	is($sh{hog_refused_early}, '196', '... of which 64, the role\'s share, were forwarded, the rest refused at once');
	like($sh{hog_answers}, qr/^200:64,503:196$/, '... the 64 answered when their wait ended');

	# a forwarding lookup that fails (the endpoints' table without its
	# column for a moment) serves the request at w2 (the API call it makes
	# is routed by Citus) and logs once: it never fails every request
	on($coord, 'ALTER TABLE queue_citus.sqs_endpoints RENAME COLUMN endpoint TO endpoint_gone');
	my $logstart = -s $w2->logfile;
	my @answers;
	for (1 .. 2)
	{
		($out, $perr) = ('', '');
		IPC::Run::run([ @client, 'error', $sq ], '>', \$out, '2>', \$perr);
		push @answers, $out =~ /^value\terror\t(.*)$/m ? $1 : "none: $perr";
	}
	my $looked = () = substr(slurp_file($w2->logfile), $logstart) =~ /could not look up the node of queue/g;
	on($coord, 'ALTER TABLE queue_citus.sqs_endpoints RENAME COLUMN endpoint_gone TO endpoint');
	is("@answers", 'none none', '... served at w2 (its SQL call routed by Citus), not InternalError');
	is(on($w1, "SELECT count(*) FROM queue.peek('$sq', 1000) WHERE body = 'never'"), '2', '... both sent, on w1');
	is($looked, 1, '... the failed lookup logged once for both requests');
	like($client->('send', $sq, 'after the lookup failed')->{id}, qr/^[0-9a-f-]{36}$/, '... and forwarded again once it works');
}

# --- 12. docs/citus.md as written -------------------------------------------

my $page = "$FindBin::RealBin/../../docs/citus.md";
my $ran = DocTest::run_citus_blocks($coord, $page, 'postgres', name => 'docs/citus.md');
cmp_ok($ran, '>', 3, "docs/citus.md: $ran blocks ran on the cluster");
my $readme = "$FindBin::RealBin/../../README.md";
$ran = DocTest::run_citus_blocks($coord, $readme, 'postgres', name => 'README.md');
cmp_ok($ran, '>=', 2, "README.md: $ran Citus blocks ran on the cluster");

$_->stop for @nodes, $w3;
done_testing();
