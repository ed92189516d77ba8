# QueueWorkerNode: the set-up the worker TAP tests share.
#
#   my $node = QueueWorkerNode::start($name, $extra_conf);
#
# initialises and starts a PostgreSQL::Test::Cluster with the extension
# preloaded, a 100 ms sweep interval and $extra_conf (postgresql.conf
# lines), creates the extension in database postgres, and passes a test
# once the database's queue worker runs.  QueueWorkerNode::queue_id($node,
# $name) is a queue's id (its tables are queue_data.q<id>, g<id>, ...).
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

sub queue_id
{
	my ($node, $name) = @_;
	return $node->safe_psql('postgres',
		"SELECT queue_id FROM queue.queues WHERE queue_name = '$name'");
}

1;
