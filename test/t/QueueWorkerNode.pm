# QueueWorkerNode: the set-up the worker TAP tests share.
#
#   my $node = QueueWorkerNode::start($name, $extra_conf);
#
# initialises and starts a PostgreSQL::Test::Cluster with the extension
# preloaded, a 100 ms sweep interval and $extra_conf (postgresql.conf
# lines), creates the extension in database postgres, and passes a test
# once the database's queue worker runs.  QueueWorkerNode::queue_id($node,
# $name) is a queue's id (its tables are queue_data.q<id>, g<id>, ...).
# QueueWorkerNode::poll($node, $query, $expected) is poll_query_until in
# database postgres that, when it gives up, says what the worker and the
# launcher were doing (pg_stat_activity, locks waited for, the server
# log's last lines), so a worker that stalls shows where.
package QueueWorkerNode;

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use Test::More;

sub start
{
	my ($name, $extra_conf) = @_;
	my $node = PostgreSQL::Test::Cluster->new($name);

	$node->init;
	$node->append_conf(
		'postgresql.conf', qq(
shared_preload_libraries = 'queue'
queue.sweep_interval = '100ms'
) . ($extra_conf // ''));
	$node->start;
	$node->safe_psql('postgres', 'CREATE EXTENSION queue');
	ok( $node->poll_query_until(
			'postgres',
			"SELECT count(*) = 1 FROM pg_stat_activity WHERE backend_type = 'queue worker'"
		),
		'worker runs');
	return $node;
}

sub poll
{
	my ($node, $query, $expected) = @_;
	return 1 if $node->poll_query_until('postgres', $query, $expected // 't');
	diag("gave up waiting for: $query");
	diag($node->safe_psql(
			'postgres',
			"SELECT backend_type, pid, state, wait_event_type, wait_event, backend_xmin,"
			  . " now() - xact_start AS in_xact, left(query, 60)"
			  . " FROM pg_stat_activity WHERE backend_type LIKE 'queue%'"));
	diag($node->safe_psql(
			'postgres',
			"SELECT a.pid, l.locktype, l.relation::regclass, l.mode, a.backend_type"
			  . " FROM pg_locks l JOIN pg_stat_activity a USING (pid) WHERE NOT l.granted"));
	my @log = split /\n/, PostgreSQL::Test::Utils::slurp_file($node->logfile);
	diag(join("\n", @log[ ($#log > 30 ? $#log - 30 : 0) .. $#log ]));
	return 0;
}

sub queue_id
{
	my ($node, $name) = @_;
	return $node->safe_psql('postgres',
		"SELECT queue_id FROM queue.queues WHERE queue_name = '$name'");
}

1;
