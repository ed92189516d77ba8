# A hot standby runs no queue launcher, worker or consumer and refuses
# writes (25006); once promoted, the launcher, a worker and the consumers
# start and queues work.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $conf = qq(
shared_preload_libraries = 'queue'
queue.sweep_interval = '100ms'
);

my $primary = PostgreSQL::Test::Cluster->new('primary');
$primary->init(allows_streaming => 1);
$primary->append_conf('postgresql.conf', $conf);
$primary->start;
$primary->safe_psql(
	'postgres', qq(
CREATE EXTENSION queue;
SELECT queue.create('sb');
SELECT queue.send('sb', 'from primary');
SELECT queue.create('sb_topic_q');
SELECT queue.create_topic('sb_topic');
SELECT queue.subscribe('sb_topic', 'sb_topic_q');
SELECT queue.create('sb_cons');
CREATE TABLE sb_done (body text);
CREATE FUNCTION sb_handler(msgs queue.message[]) RETURNS void LANGUAGE sql
	AS 'INSERT INTO public.sb_done SELECT (m).body FROM unnest(msgs) m';
SELECT queue.create_consumer('sb_consumer', 'sb_cons', 'sb_handler(queue.message[])');
SELECT queue.send('sb_cons', 'on primary');
));
ok( $primary->poll_query_until('postgres', "SELECT count(*) = 1 FROM sb_done"),
	'a consumer runs on the primary');
ok( $primary->poll_query_until(
		'postgres',
		"SELECT count(*) = 1 FROM pg_stat_activity WHERE backend_type = 'queue worker'"
	),
	'primary runs a worker');

$primary->backup('bk');
my $standby = PostgreSQL::Test::Cluster->new('standby');
$standby->init_from_backup($primary, 'bk', has_streaming => 1);
$standby->append_conf('postgresql.conf', $conf);
$standby->start;
$primary->safe_psql('postgres', "SELECT queue.send('sb', 'streamed')");
$primary->wait_for_catchup($standby);

is($standby->safe_psql('postgres', 'SELECT pg_is_in_recovery()'),
	't', 'standby is in recovery');
is( $standby->safe_psql(
		'postgres',
		"SELECT count(*) FROM pg_stat_activity WHERE backend_type IN ('queue launcher', 'queue worker')"
	),
	'0',
	'no queue launcher or worker on the standby');
is( $standby->safe_psql(
		'postgres', "SELECT count(*) FROM queue.peek('sb')"),
	'2',
	'the queue is replicated');

sub standby_error
{
	my ($sql) = @_;
	my ($ret, $out, $err) =
	  $standby->psql('postgres', "\\set VERBOSITY verbose\n$sql");
	return $err;
}
like(standby_error("SELECT * FROM queue.send('sb', 'x')"),
	qr/ERROR:  25006: /, 'send on the standby: 25006');
like(standby_error("SELECT * FROM queue.receive('sb')"),
	qr/ERROR:  25006: /, 'receive on the standby: 25006');
like(standby_error("SELECT * FROM queue.publish('sb_topic', 'x')"),
	qr/ERROR:  25006: /, 'publish on the standby: 25006');
is($standby->safe_psql('postgres', "SELECT topic_name || ' ' || queue_name FROM queue.subscriptions"),
	'sb_topic sb_topic_q', 'the standby shows the topics and subscriptions');
like(standby_error("SELECT * FROM queue.receive('sb', wait => '5 s')"),
	qr/ERROR:  25006: /, 'a waiting receive on the standby: 25006, not a wait');
is( $standby->safe_psql(
		'postgres',
		"SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'queue consumer'"),
	'0',
	'no consumer process on the standby');
is($standby->safe_psql('postgres', "SELECT consumer_name || ' ' || queue_name FROM queue.consumers"),
	'sb_consumer sb_cons', 'the standby shows the consumer');
unlike(slurp_file($standby->logfile), qr/background worker "queue/,
	'no queue background worker ran on the standby');

# --- Promotion ---------------------------------------------------------------

$standby->promote;
ok( $standby->poll_query_until(
		'postgres',
		"SELECT count(*) = 1 FROM pg_stat_activity WHERE backend_type = 'queue launcher'"
	),
	'promoted: the launcher starts');
ok( $standby->poll_query_until(
		'postgres',
		"SELECT count(*) = 1 FROM pg_stat_activity WHERE backend_type = 'queue worker' AND datname = 'postgres'"
	),
	'promoted: a worker starts in the database with the extension');
$standby->safe_psql('postgres', "SELECT queue.send('sb', 'after promotion')");
is( $standby->safe_psql(
		'postgres',
		"SELECT string_agg(body, ',' ORDER BY message_id) FROM queue.receive('sb', max_messages => 10)"
	),
	'from primary,streamed,after promotion',
	'promoted: send and receive work');
is($standby->safe_psql('postgres', "SELECT delivered FROM queue.publish('sb_topic', 'after promotion')"),
	'1', 'promoted: publish delivers');
$standby->safe_psql('postgres', "SELECT queue.send('sb_cons', 'after promotion')");
ok( $standby->poll_query_until(
		'postgres', "SELECT string_agg(body, ',' ORDER BY body) = 'after promotion,on primary' FROM sb_done"),
	'promoted: the consumer runs and handles a new message');

$standby->stop;
$primary->stop;
done_testing();
