# Worker lifecycle: the launcher and one worker per database with the
# extension; CREATE/DROP EXTENSION, CREATE DATABASE from a template, DROP
# DATABASE, SIGTERM, kill -9 (crash restart), SIGHUP, queue.worker_enabled,
# and shutdown.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);

my $node = PostgreSQL::Test::Cluster->new('worker');
$node->init;
$node->append_conf(
	'postgresql.conf', qq(
shared_preload_libraries = 'queue'
queue.sweep_interval = '100ms'
restart_after_crash = on
max_worker_processes = 16
));
$node->start;

# How many queue workers run in a database (or the launcher, for undef).
sub nworkers
{
	my ($db) = @_;
	my $where =
	  defined $db
	  ? "backend_type = 'queue worker' AND datname = '$db'"
	  : "backend_type = 'queue launcher'";
	return "SELECT (SELECT count(*) FROM pg_stat_activity WHERE $where)";
}

sub pid_of
{
	my ($db) = @_;
	my $where =
	  defined $db
	  ? "backend_type = 'queue worker' AND datname = '$db'"
	  : "backend_type = 'queue launcher'";
	return $node->safe_psql('postgres',
		"SELECT pid FROM pg_stat_activity WHERE $where");
}

# poll_query_until with a deadline of its own, for what must happen "within
# a few seconds": a failure costs that, not the default timeout.
sub poll_for
{
	my ($query, $seconds) = @_;
	my $deadline = time + $seconds;
	while (time < $deadline)
	{
		my ($ret, $out) = $node->psql('postgres', $query);
		return 1 if $ret == 0 && $out eq 't';
		Time::HiRes::usleep(100_000);
	}
	diag "not true within ${seconds}s: $query";
	return 0;
}

# --- Start: the launcher, and a worker once the extension exists ----------

ok($node->poll_query_until('postgres', nworkers() . ' = 1'),
	'launcher runs, as backend_type "queue launcher"');
$node->safe_psql('postgres', 'CREATE EXTENSION queue');
ok($node->poll_query_until('postgres', nworkers('postgres') . ' = 1'),
	'worker runs in postgres, as backend_type "queue worker"');
is( $node->safe_psql(
		'postgres',
		"SELECT application_name FROM pg_stat_activity WHERE backend_type = 'queue worker'"
	),
	'queue worker',
	'worker sets application_name');

# --- A database created after startup ------------------------------------

$node->safe_psql('postgres', 'CREATE DATABASE db2');
$node->safe_psql('db2', 'CREATE EXTENSION queue');
ok(poll_for(nworkers('db2') . ' = 1', 10),
	'database created after startup gets a worker within seconds of CREATE EXTENSION');

# CREATE EXTENSION inside a transaction that commits a while later (as
# migration tools do): the worker must still come.  queue._register() runs
# and wakes the launcher before the commit, so a worker started at once
# finds no extension yet; that must not make the launcher give up on the
# database.
$node->safe_psql('postgres', 'CREATE DATABASE db_late');
$node->safe_psql('db_late',
	'BEGIN; CREATE EXTENSION queue; SELECT pg_sleep(1); COMMIT;');
ok(poll_for(nworkers('db_late') . ' = 1', 10),
	'CREATE EXTENSION committed late in its transaction gets a worker within seconds');

# --- DROP EXTENSION: the worker leaves; CREATE EXTENSION brings it back ---

$node->safe_psql('db2', 'DROP EXTENSION queue');
ok(poll_for(nworkers('db2') . ' = 0', 10),
	'DROP EXTENSION makes the worker leave');
$node->safe_psql('db2', 'CREATE EXTENSION queue');
ok($node->poll_query_until('postgres', nworkers('db2') . ' = 1'),
	'CREATE EXTENSION again brings it back');

# --- CREATE DATABASE from a template with a worker, then DROP DATABASE ----

$node->safe_psql('postgres', 'CREATE DATABASE db3');
$node->safe_psql('db3', 'CREATE EXTENSION queue');
ok($node->poll_query_until('postgres', nworkers('db3') . ' = 1'),
	'db3 has a worker');
my ($ret, $out, $err) =
  $node->psql('postgres', 'CREATE DATABASE db4 TEMPLATE db3');
is($ret, 0, 'CREATE DATABASE from a template whose worker runs succeeds')
  or diag $err;
ok($node->poll_query_until('postgres', nworkers('db4') . ' = 1'),
	'the copy (extension included) gets its own worker');

my $log_offset = -s $node->logfile;
my $t0 = time;
($ret, $out, $err) = $node->psql('postgres', 'DROP DATABASE db4');
my $elapsed = time - $t0;
is($ret, 0, 'DROP DATABASE of a database with a worker succeeds') or diag $err;
cmp_ok($elapsed, '<', 4, 'and is not held up by the worker')
  or diag "DROP DATABASE took ${elapsed}s";
is($node->safe_psql('postgres', "SELECT count(*) FROM pg_database WHERE datname = 'db4'"),
	'0', 'db4 is gone');

# --- SIGTERM: a clean exit, no crash, and the launcher starts it again ----

my $launcher = pid_of(undef);
my $wpid = pid_of('postgres');
$log_offset = -s $node->logfile;
$node->safe_psql('postgres', "SELECT pg_terminate_backend($wpid)");
ok( $node->poll_query_until(
		'postgres',
		"SELECT count(*) = 1 FROM pg_stat_activity WHERE backend_type = 'queue worker'"
		  . " AND datname = 'postgres' AND pid <> $wpid"),
	'worker terminated by SIGTERM is started again');
is(pid_of(undef), $launcher, 'the launcher was not restarted');
unlike(
	slurp_file($node->logfile, $log_offset),
	qr/terminated by signal|server processes terminated; reinitializing/,
	'SIGTERM is a clean exit, not a crash');

# The template's worker, asked to leave by CREATE DATABASE, comes back
# (after its grace period).
ok($node->poll_query_until('postgres', nworkers('db3') . ' = 1'),
	'the template database gets its worker back');

# --- kill -9 of the worker alone: crash restart, the worker comes back -----

$wpid = pid_of('postgres');
$log_offset = -s $node->logfile;
kill 'KILL', $wpid or die "could not kill $wpid: $!";
$node->wait_for_log(qr/\(PID $wpid\) was terminated by signal 9/, $log_offset);
$node->wait_for_log(qr/all server processes terminated; reinitializing/,
	$log_offset);
ok($node->poll_query_until('postgres', 'SELECT 1', '1'),
	'server accepts connections after the crash restart');
ok($node->poll_query_until('postgres', nworkers() . ' = 1'),
	'launcher is back after kill -9 of the worker');
ok($node->poll_query_until('postgres', nworkers('postgres') . ' = 1'),
	'worker is back after kill -9 of the worker');
ok($node->poll_query_until('postgres', nworkers('db2') . ' = 1'),
	'so are the workers of the other databases');
isnt(pid_of('postgres'), $wpid, 'with a new pid');

# --- SIGHUP: settings reload, the workers stay -----------------------------

$launcher = pid_of(undef);
$wpid = pid_of('postgres');
$log_offset = -s $node->logfile;
$node->safe_psql('postgres',
	"ALTER SYSTEM SET queue.sweep_interval = '250ms'; SELECT pg_reload_conf();");
$node->wait_for_log(qr/parameter "queue.sweep_interval" changed to "250ms"/,
	$log_offset);
is($node->safe_psql('postgres', 'SHOW queue.sweep_interval'),
	'250ms', 'queue.sweep_interval reloaded');
# Another pass of the worker after the reload: it is still the same process.
$node->safe_psql('postgres', "SELECT queue.create('hup')");
ok( $node->poll_query_until(
		'postgres',
		"SELECT count(*) = 1 FROM pg_stat_activity WHERE pid = $wpid"
		  . " AND backend_type = 'queue worker'"),
	'worker survives SIGHUP');
is(pid_of(undef), $launcher, 'launcher survives SIGHUP');
unlike(slurp_file($node->logfile, $log_offset),
	qr/ERROR|FATAL|terminated by signal/, 'no error after the reload');

# --- queue.worker_enabled = off: workers leave; on: they come back ---------

$node->safe_psql('postgres',
	"ALTER SYSTEM SET queue.worker_enabled = off; SELECT pg_reload_conf();");
ok( $node->poll_query_until(
		'postgres',
		"SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'queue worker'",
		'0'),
	'queue.worker_enabled = off: every worker leaves');
is(pid_of(undef), $launcher, 'the launcher stays');
$node->safe_psql('postgres',
	"ALTER SYSTEM RESET queue.worker_enabled; SELECT pg_reload_conf();");
ok($node->poll_query_until('postgres', nworkers('postgres') . ' = 1'),
	'queue.worker_enabled = on: worker back in postgres');
ok($node->poll_query_until('postgres', nworkers('db2') . ' = 1'),
	'and in db2');

# --- Shutdown: the workers stop with the server ----------------------------

my @pids = split /\n/,
  $node->safe_psql('postgres',
	"SELECT pid FROM pg_stat_activity WHERE backend_type IN ('queue launcher', 'queue worker')"
  );
cmp_ok(scalar @pids, '>=', 4, 'launcher and workers before shutdown');
$log_offset = -s $node->logfile;
$t0 = time;
$node->stop('fast');
$elapsed = time - $t0;
cmp_ok($elapsed, '<', 10, 'fast shutdown is not held up by the workers');
is(scalar(grep { kill 0, $_ } @pids), 0, 'no launcher or worker process left');
like(slurp_file($node->logfile, $log_offset),
	qr/database system is shut down/, 'clean shutdown');
unlike(slurp_file($node->logfile, $log_offset),
	qr/terminated by signal/, 'no worker crashed at shutdown');

done_testing();
