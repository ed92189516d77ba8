# Every SQS client unchanged (issue 36; DESIGN.md "SQS API": on the wire
# the endpoint answers as SQS does): test/t/sqs/compat_client.py checks,
# with Debian's boto3 1.26 and raw signed requests, (1) the Query form
# posted to the queue URL with no QueueUrl (kombu, Amazon::SQS::Simple) and
# a Query body with an X-Amz-Target header, (2) UUID MessageIds and 20-digit
# FIFO sequence numbers, (3) stale receipts answered as SQS, (4) dead
# letters with no attribute of ours and DeadLetterQueueSourceArn, (5)
# DeleteQueue of a dead-letter queue, (6) SSE attributes, Policy and
# AWSTraceHeader, (7) FIFO misuse in SQS's words, PurgeQueueInProgress and
# queue.sqs_public_url.  This file adds what only SQL sees: the same ids
# from either door (queue.message_uuid / queue.message_id), the SQL API
# still refusing a stale receipt, and a dropped dead-letter queue's source.
# Then (8): a queue.sqs_database that does not exist yet is one log line
# and a wait with back-off, not a worker dying every second, and the
# endpoint serves the database once it is created.
use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;

use IO::Socket::INET;
use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use QueueWorkerNode;

my $python = '/usr/bin/python3';
plan skip_all => 'no Debian python3-boto3'
  unless system("$python -I -c 'import boto3' >/dev/null 2>&1") == 0;

sub wait_listening
{
	my ($port) = @_;
	for (1 .. 600)
	{
		my $s = IO::Socket::INET->new(PeerAddr => '127.0.0.1', PeerPort => $port, Proto => 'tcp');
		if ($s) { close $s; return 1; }
		select(undef, undef, undef, 0.1);
	}
	return 0;
}

my $port = PostgreSQL::Test::Cluster::get_free_port();
my $node = QueueWorkerNode::start('sqs_compat', qq(
queue.sqs_listen = '127.0.0.1:$port'
queue.sqs_workers = 2
));
$node->safe_psql('postgres', q(
CREATE ROLE sqs_app LOGIN;
GRANT USAGE ON SCHEMA queue TO sqs_app;
GRANT CREATE ON DATABASE postgres TO sqs_app;
));
my ($key, $secret) = split /\|/, $node->safe_psql('postgres',
	q(SELECT access_key_id || '|' || secret_access_key FROM queue.create_access_key('sqs_app'::regrole)));
ok($key && $secret, 'access key created');
ok(wait_listening($port), 'endpoint listens');

my $endpoint = "http://127.0.0.1:$port";
my $client = "$FindBin::RealBin/sqs/compat_client.py";

# One phase of the client: each ok/not ok line an assertion (quiet: the
# lines only, for retries), values returned.
sub phase
{
	my ($name, %opt) = @_;
	my (%values, @results);
	my ($stdout, $stderr);
	my $rc = IPC::Run::run([ $python, '-I', $client, $endpoint, $key, $secret, $name ],
		'>', \$stdout, '2>', \$stderr);
	for my $line (split /\n/, $stdout)
	{
		my ($kind, $what, $detail) = split /\t/, $line, 3;
		push @results, [ 1, $what ] if $kind eq 'ok';
		push @results, [ 0, $what, $detail ] if $kind eq 'not ok';
		$values{$what} = $detail if $kind eq 'value';
	}
	my $all_ok = $rc && @results && !grep { !$_->[0] } @results;
	return ($all_ok, \%values) if $opt{quiet} && !$all_ok;
	for my $r (@results)
	{
		if ($r->[0]) { pass("$name: $r->[1]"); }
		else { fail("$name: $r->[1]"); diag($r->[2] // ''); }
	}
	ok($rc, "$name: client ran to its end") or diag($stderr);
	ok(scalar @results, "$name: client checked something");
	return ($all_ok, \%values);
}

my (undef, $v) = phase('main');

# a query's output, or '' when it fails (the checks go on)
sub sql_out
{
	my ($rc, $out) = $node->psql('postgres', $_[0]);
	return $out // '';
}

# (2) one id, either door
my $uuid = $v->{http_message_id} // 'none';
is( sql_out(qq(
	SELECT count(*) FROM queue.peek('c_ids') WHERE queue.message_uuid(message_id) = '$uuid')),
	'1', '2: the MessageId sent over HTTP is queue.message_uuid of the message\'s message_id');
is( sql_out(qq(
	SELECT queue.message_uuid(queue.message_id('$uuid')) = '$uuid'
	   AND queue.message_id('$uuid') IN (SELECT message_id FROM queue.peek('c_ids')))),
	't', '2: queue.message_id of the MessageId is the message\'s message_id');

# (3) the SQL API keeps refusing a stale receipt
my ($rc, $out, $err) = $node->psql('postgres',
	"SELECT queue.delete('c_stale', '" . ($v->{stale_receipt} // 'x') . "')",
	on_error_stop => 1);
like($err, qr/receipt of message \d+ is stale/, '3: SQL still refuses the stale receipt HTTP let pass');

# (5) the dropped dead-letter queue's source lost its RedrivePolicy
is( $node->safe_psql('postgres', q(
	SELECT dead_letter_queue IS NULL AND max_receive_count IS NULL FROM queue.queues
	WHERE queue_name = 'c_src5')),
	't', '5: the source of a deleted dead-letter queue has no dead-letter queue');

# (6) SSE attributes are state of the queue: they survive pg_dump and restore
is( sql_out(q(
	SELECT count(*) FROM pg_catalog.pg_extension e, pg_catalog.unnest(e.extconfig) c
	WHERE e.extname = 'queue' AND c = 'queue._sqs_attributes'::regclass)),
	'1', '6: the SQS-only queue attributes are dumped (pg_extension_config_dump)');

# (6) the SSE attributes are the queue's manager's: a role that may only
# send to the queue cannot set them (queue.alter checks manage first)
$node->safe_psql('postgres', q(
CREATE ROLE sqs_sender LOGIN;
GRANT USAGE ON SCHEMA queue TO sqs_sender;
SET ROLE sqs_app;
SELECT queue.grant('c_sse', 'sqs_sender', ARRAY['send']);
));
my ($skey, $ssecret) = split /\|/, $node->safe_psql('postgres',
	q(SELECT access_key_id || '|' || secret_access_key FROM queue.create_access_key('sqs_sender'::regrole)));
my ($sout, $serr);
IPC::Run::run([ $python, '-I', '-c', q(
import sys, boto3, botocore
c = boto3.client('sqs', endpoint_url=sys.argv[1], region_name='us-east-1',
                 aws_access_key_id=sys.argv[2], aws_secret_access_key=sys.argv[3])
try:
    c.set_queue_attributes(QueueUrl=sys.argv[1] + '/000000000000/c_sse',
                           Attributes={'KmsMasterKeyId': 'alias/stolen'})
    print('set')
except botocore.exceptions.ClientError as e:
    print(e.response['Error']['Code'])
), $endpoint, $skey, $ssecret ], '>', \$sout, '2>', \$serr);
is($sout, "AccessDenied\n", '6: a role that may only send cannot set the SSE attributes') or diag($serr);
is( sql_out(q(SELECT a.attributes ? 'KmsMasterKeyId' FROM queue._sqs_attributes a
	JOIN queue._queues q USING (queue_id) WHERE q.queue_name = 'c_sse')),
	'f', '6: ... and nothing of it was stored');

# (7) queue.sqs_public_url, on reload
$node->psql('postgres', q(
ALTER SYSTEM SET queue.sqs_public_url = 'https://sqs.example.test/';
SELECT pg_reload_conf();
));
my $ok = 0;
for (1 .. 50)
{
	($ok) = phase('public_url', quiet => 1);
	last if $ok;
	select(undef, undef, undef, 0.2);
}
phase('public_url');

# (5) no 5xx for anything known: the server log has no InternalError
my $log = slurp_file($node->logfile);
unlike($log, qr/SQS request failed/, 'no request of the phases was an internal error');
$node->stop;

# (8) queue.sqs_database names a database that does not exist yet
my $port2 = PostgreSQL::Test::Cluster::get_free_port();
my $later = PostgreSQL::Test::Cluster->new('sqs_db_later');
$later->init;
$later->append_conf('postgresql.conf', qq(
shared_preload_libraries = 'queue'
queue.sqs_listen = '127.0.0.1:$port2'
queue.sqs_workers = 2
queue.sqs_database = 'sqs_later'
));
$later->start;
$later->wait_for_log(qr/database "sqs_later" does not exist; the SQS endpoint waits for it/);
# a crash loop would start each worker again every second: watch 6 seconds
my $offset = -s $later->logfile;
$later->poll_query_until('postgres', q(SELECT pg_sleep(6) IS NOT NULL));
my $watched = substr(slurp_file($later->logfile), $offset);
my $exits = () = $watched =~ /background worker "queue sqs worker \d+".*exited/g;
my $fatals = () = $watched =~ /FATAL:  database "sqs_later" does not exist/g;
is($exits + $fatals, 0, '8: waiting for the database, no worker exits or dies in 6 s');
$log = slurp_file($later->logfile);
my $lines = () = $log =~ /the SQS endpoint waits for it/g;
is($lines, 1, '8: one log line says so (for both workers)');
$later->safe_psql('postgres', 'CREATE DATABASE sqs_later');
$later->safe_psql('sqs_later', 'CREATE EXTENSION queue');
$later->wait_for_log(qr/queue sqs worker 1 listening/, $offset);
$later->wait_for_log(qr/queue sqs worker 0 listening/, $offset);
$later->safe_psql('sqs_later', q(
CREATE ROLE sqs_app LOGIN;
GRANT USAGE ON SCHEMA queue TO sqs_app;
GRANT CREATE ON DATABASE sqs_later TO sqs_app;
));
($key, $secret) = split /\|/, $later->safe_psql('sqs_later',
	q(SELECT access_key_id || '|' || secret_access_key FROM queue.create_access_key('sqs_app'::regrole)));
$endpoint = "http://127.0.0.1:$port2";
my ($stdout, $stderr);
IPC::Run::run([ $python, '-I', '-c', q(
import sys, boto3
c = boto3.client('sqs', endpoint_url=sys.argv[1], region_name='us-east-1',
                 aws_access_key_id=sys.argv[2], aws_secret_access_key=sys.argv[3])
print(c.create_queue(QueueName='later')['QueueUrl'])
), $endpoint, $key, $secret ], '>', \$stdout, '2>', \$stderr);
is($stdout, "$endpoint/000000000000/later\n", '8: once the database exists, the endpoint serves it')
  or diag($stderr);
$later->stop;
done_testing();
