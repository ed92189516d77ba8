# The SQS actions (src/sqs/actions.c and its rooms) through boto3, Debian's 1.26 (Query
# protocol), and the AWS JSON 1.0 protocol for the message move tasks that
# boto3 1.26 lacks: every action's happy path and SQS's errors, checked by
# test/t/sqs/actions_client.py (one assertion per line it prints), and one
# queue through both doors: sent in SQL and received over HTTP, sent over
# HTTP and received in SQL.
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

my $port = PostgreSQL::Test::Cluster::get_free_port();
my $node = QueueWorkerNode::start('sqs_actions', qq(
queue.sqs_listen = '127.0.0.1:$port'
queue.sqs_workers = 1
));

$node->safe_psql('postgres', q(
CREATE ROLE sqs_app LOGIN;
GRANT USAGE ON SCHEMA queue TO sqs_app;
GRANT CREATE ON DATABASE postgres TO sqs_app;
));
my ($key, $secret) = split /\|/, $node->safe_psql('postgres',
	q(SELECT access_key_id || '|' || secret_access_key FROM queue.create_access_key('sqs_app'::regrole)));
ok($key && $secret, 'access key created');

my $endpoint = "http://127.0.0.1:$port";
# the endpoint's workers listen once they run
my $listening = 0;
for (1 .. 300)
{
	my $s = IO::Socket::INET->new(PeerAddr => '127.0.0.1', PeerPort => $port, Proto => 'tcp');
	if ($s) { close $s; $listening = 1; last; }
	select(undef, undef, undef, 0.1);
}
ok($listening, 'endpoint listens');

my $client = "$FindBin::RealBin/sqs/actions_client.py";

# Run one phase of the client; each "ok"/"not ok" line is an assertion.
sub phase
{
	my ($name) = @_;
	my %values;
	my ($stdout, $stderr);
	my $rc = IPC::Run::run([ $python, '-I', $client, $endpoint, $key, $secret, $name ],
		'>', \$stdout, '2>', \$stderr);
	my $checks = 0;
	for my $line (split /\n/, $stdout)
	{
		my ($kind, $what, $detail) = split /\t/, $line, 3;
		if ($kind eq 'ok') { pass("$name: $what"); $checks++; }
		elsif ($kind eq 'not ok') { fail("$name: $what"); diag($detail // ''); $checks++; }
		elsif ($kind eq 'value') { $values{$what} = $detail; }
	}
	ok($rc, "$name: client ran to its end") or diag($stderr);
	ok($checks > 0, "$name: client checked something");
	return \%values;
}

phase('main');

# the queues made over HTTP are the SQL API's queues, owned by the key's role
is( $node->safe_psql('postgres', q(
	SELECT string_agg(queue_name || ' ' || fifo || ' ' || owner::text, ', ' ORDER BY queue_name)
	FROM queue.queues WHERE queue_name IN ('act_std', 'act_fifo.fifo', 'act_src'))),
	'act_fifo.fifo true sqs_app, act_src false sqs_app, act_std false sqs_app',
	'queues created over HTTP are SQL queues of the key\'s role');
is( $node->safe_psql('postgres', q(
	SELECT visibility_timeout || ' ' || retention || ' ' || max_message_size || ' ' ||
	       tags::text FROM queue.queues WHERE queue_name = 'act_std')),
	'00:01:00 01:00:00 2048 {"env": "test"}',
	'attributes and tags set over HTTP, seen in SQL');
is( $node->safe_psql('postgres', q(
	SELECT dead_letter_queue || ' ' || max_receive_count FROM queue.queues
	WHERE queue_name = 'act_src')),
	'act_dlq 1', 'RedrivePolicy is dead_letter_queue and max_receive_count');
is( $node->safe_psql('postgres', q(
	SELECT count(*) FROM queue._move_tasks t JOIN queue._queues q ON q.queue_id = t.source_queue_id
	WHERE q.queue_name = 'act_dlq' AND t.status = 'COMPLETED' AND t.moved = 1
	AND t.role = 'sqs_app'::regrole)),
	'1', 'StartMessageMoveTask recorded its task, keyed by the queue\'s id, run as its role');

# sent in SQL with plain JSON attributes, received over HTTP
$node->safe_psql('postgres', q(
	SET ROLE sqs_app;
	SELECT queue.send('act_interop', 'from sql',
		attributes => '{"k": "v", "n": 5, "o": {"x": 1}}');
));
my $v = phase('from_sql');
is( $node->safe_psql('postgres', q(SELECT count(*) FROM queue.peek('act_interop'))),
	'0', 'deleted over HTTP, gone in SQL');

# sent over HTTP, received in SQL
$v = phase('to_sql');
is( $node->safe_psql('postgres', q(
	SELECT queue.message_uuid(message_id) || ' ' || body || ' ' || attributes::text
	FROM queue.receive('act_interop'))),
	"$v->{http_message_id} from http {\"a\": {\"DataType\": \"String\", \"StringValue\": \"b\"}}",
	'sent over HTTP, received in SQL with SQS\'s attribute shape');

# a queue-wide rate limit holds over the wire, and a parked long poll is
# answered when the window opens (issue 51)
$node->safe_psql('postgres', q(
	SET ROLE sqs_app;
	SELECT queue.create('act_rate', receive_rate_limit => 2, receive_rate_interval => '2 seconds');
));
phase('rate_limit');
is($node->safe_psql('postgres', q(SELECT rate_limited > 0 FROM queue.stats WHERE queue_name = 'act_rate')),
	't', 'the held-back receives over HTTP are counted');

# priorities (issue 51): not carried over the wire; a message sent over
# HTTP takes the queue's default, and ReceiveMessage hands out by priority
$node->safe_psql('postgres', q(
	SET ROLE sqs_app;
	SELECT queue.create('act_prio', default_priority => 6);
	SELECT count(*) FROM queue.send('act_prio', 'sql-1', priority => 1);
	SELECT count(*) FROM queue.send('act_prio', 'sql-9', priority => 9);
));
phase('priority');
is($node->safe_psql('postgres', q(SELECT count(*) FROM queue.peek('act_prio'))), '4',
	'the four are in flight, none lost');

$node->stop;
done_testing();
