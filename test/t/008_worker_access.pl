# Only a superuser or a database's owner stops its queue worker (DESIGN
# "Access").  DROP DATABASE, ALTER DATABASE ... RENAME and CREATE DATABASE
# ... TEMPLATE ask the database's worker to leave first, so it never holds
# them up; a role that PostgreSQL then refuses must not have stopped it:
# the worker keeps its pid and keeps sweeping.  The owner (not a
# superuser) still drops the database without waiting on its worker.
use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);
use QueueWorkerNode;

my $node = QueueWorkerNode::start('worker_access');

sub worker_pid
{
	my ($db) = @_;
	return $node->safe_psql('postgres',
		"SELECT pid FROM pg_stat_activity WHERE backend_type = 'queue worker' AND datname = '$db'"
	);
}

# A database with a queue and a worker, owned by a role that is no superuser.
$node->safe_psql(
	'postgres', qq(
CREATE ROLE acc_owner LOGIN CREATEDB;
CREATE ROLE acc_intruder LOGIN CREATEDB;
CREATE DATABASE acc_db OWNER acc_owner;
));
$node->safe_psql('acc_db',
	"CREATE EXTENSION queue; SELECT queue.create('acc', retention => '1 minute')");
ok( $node->poll_query_until(
		'postgres',
		"SELECT count(*) = 1 FROM pg_stat_activity WHERE backend_type = 'queue worker' AND datname = 'acc_db'"
	),
	'acc_db has a worker');
my $pid = worker_pid('acc_db');

# Every command that asks the worker to leave, by a role PostgreSQL refuses.
my @refused = (
	[ 'DROP DATABASE acc_db', qr/must be owner of database acc_db/ ],
	[ 'DROP DATABASE acc_db', qr/must be owner of database acc_db/ ],
	[ 'DROP DATABASE IF EXISTS acc_db', qr/must be owner of database acc_db/ ],
	[ 'ALTER DATABASE acc_db RENAME TO acc_gone', qr/must be owner of database acc_db/ ],
	[ 'CREATE DATABASE acc_copy TEMPLATE acc_db', qr/permission denied to copy database "acc_db"/ ],
);
foreach my $c (@refused)
{
	my ($sql, $error) = @$c;
	my ($ret, $out, $err) =
	  $node->psql('postgres', $sql, extra_params => [ '-U', 'acc_intruder' ]);
	isnt($ret, 0, "intruder's $sql fails");
	like($err, $error, '... refused by PostgreSQL');
}

# The worker, had it been asked to leave, would be gone by now or during
# the sweep below; the launcher would not start another for 10 s.
$node->safe_psql(
	'acc_db', q(
SELECT count(*) FROM queue.send('acc', 'old');
DO $$ BEGIN
	EXECUTE format('UPDATE queue_data.q%s SET sent_at = sent_at - interval ''2 minutes''',
				   (SELECT queue_id FROM queue.queues WHERE queue_name = 'acc'));
END $$;
));
my $t0 = time;
$node->safe_psql('acc_db', 'SELECT pg_reload_conf()');
ok( $node->poll_query_until(
		'acc_db', "SELECT expired FROM queue.stats WHERE queue_name = 'acc'", '1'),
	'the worker keeps sweeping');
cmp_ok(time - $t0, '<', 5, 'at once, not after a restart grace period');
is(worker_pid('acc_db'), $pid, 'the same worker: it was never stopped');

# The owner, no superuser, drops it without being held up by the worker.
$t0 = time;
my ($ret, $out, $err) = $node->psql('postgres', 'DROP DATABASE acc_db',
	extra_params => [ '-U', 'acc_owner' ]);
is($ret, 0, 'the owner drops the database') or diag $err;
cmp_ok(time - $t0, '<', 4, 'without waiting for the worker');

$node->stop;
done_testing();
