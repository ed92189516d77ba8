# Smoke test: the preloaded library starts with the server, and a message sent
# before a restart is received after it.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = PostgreSQL::Test::Cluster->new('main');
$node->init;
$node->append_conf('postgresql.conf', "shared_preload_libraries = 'queue'");
$node->start;

$node->safe_psql('postgres', 'CREATE EXTENSION queue');
is($node->safe_psql('postgres', "SELECT queue.create('tap_q') > 0"),
	't', 'queue created');
$node->safe_psql('postgres', "SELECT * FROM queue.send('tap_q', 'survives restart')");

$node->restart;

is( $node->safe_psql(
		'postgres',
		"SELECT body FROM queue.receive('tap_q', visibility_timeout => '1 min')"),
	'survives restart',
	'message sent before restart is received after it');

$node->stop;
done_testing();
