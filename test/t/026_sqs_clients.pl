# The SQS endpoint under real clients: a node serving queue.sqs_listen on a
# free port for the test database, a role with USAGE on schema queue and
# CREATE on the database, an access key for it (queue.create_access_key),
# and then the example programs of examples/sqs with the endpoint and the
# key in their environment:
#   python_boto3.py        Debian's boto3 1.26 (Query protocol)
#   aws_cli.sh             Debian's awscli 2.9 (Query protocol)
#   node/producer_consumer.mjs  @aws-sdk/client-sqs (AWS JSON 1.0)
#   node/consumer_throws.mjs    bbc's sqs-consumer and sqs-producer (npm), a
#                          handler that throws on some messages and always on
#                          one, which ends in the dead-letter queue
# each a FIFO producer/consumer, a dead-letter redrive and a long poll that a
# second client's send answers early; and sigv4_check.py, requests signed by
# botocore's and the JS SDK's signers accepted, tampered ones refused with
# SQS's 403 codes.  Each must exit 0 and print its lines.  A missing client
# fails (test/setup.sh installs the node modules; python3-boto3 and awscli
# are Debian packages).
use strict;
use warnings;

use File::Temp qw(tempdir);
use FindBin;
use lib $FindBin::RealBin;

use IO::Socket::INET;
use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use QueueWorkerNode;

my $examples = "$ENV{TESTDIR}/examples/sqs";
my $python = '/usr/bin/python3';
my $aws = '/usr/bin/aws';
ok(system("$python -I -c 'import boto3' >/dev/null 2>&1") == 0,
	"$python has boto3 (python3-boto3)")
  or BAIL_OUT('no boto3');
ok(-x $aws, "$aws is installed (awscli)") or BAIL_OUT('no aws cli');
ok(-f "$examples/node/node_modules/\@aws-sdk/client-sqs/package.json",
	'examples/sqs/node has its node_modules (test/setup.sh)')
  or BAIL_OUT('no @aws-sdk/client-sqs');
ok(-f "$examples/node/node_modules/sqs-consumer/package.json",
	'examples/sqs/node has sqs-consumer (test/setup.sh)')
  or BAIL_OUT('no sqs-consumer');

my $port = PostgreSQL::Test::Cluster::get_free_port();
my $node = QueueWorkerNode::start(
	'sqs_clients', qq(
queue.sqs_listen = '127.0.0.1:$port'
queue.sqs_database = 'postgres'
));
sub sql { return $node->safe_psql('postgres', $_[0]); }

# the endpoint accepts connections
my $up = 0;
foreach my $i (1 .. 300)
{
	my $s = IO::Socket::INET->new(
		PeerAddr => '127.0.0.1',
		PeerPort => $port,
		Proto => 'tcp');
	if ($s)
	{
		close $s;
		$up = 1;
		last;
	}
	select(undef, undef, undef, 0.1);
}
ok($up, "the endpoint listens on 127.0.0.1:$port") or BAIL_OUT('no endpoint');

sql(q(
CREATE ROLE sqs_app LOGIN;
GRANT USAGE ON SCHEMA queue TO sqs_app;
GRANT CREATE ON DATABASE postgres TO sqs_app;
));
my ($key, $secret) = split /\|/,
  sql(q(SELECT access_key_id || '|' || secret_access_key
		FROM queue.create_access_key('sqs_app')));
ok(length($key) > 0 && length($secret) > 0, 'an access key for sqs_app');

# Each program runs in a directory of its own (nothing there shadows a
# Python module), with the endpoint and the key and nothing else of AWS's.
my $work = tempdir(CLEANUP => 1);
my %env = (
	%ENV,
	SQS_ENDPOINT_URL => "http://127.0.0.1:$port",
	AWS_ACCESS_KEY_ID => $key,
	AWS_SECRET_ACCESS_KEY => $secret,
	AWS_DEFAULT_REGION => 'us-east-1',
	AWS_CONFIG_FILE => "$work/none",
	AWS_SHARED_CREDENTIALS_FILE => "$work/none",
	AWS_EC2_METADATA_DISABLED => 'true',
	HOME => $work);
delete $env{$_} foreach qw(PYTHONPATH PYTHONHOME AWS_PROFILE AWS_SESSION_TOKEN);

sub run_client
{
	my ($name, $cmd, @want) = @_;
	my ($out, $err) = ('', '');
	local %ENV = %env;
	my $t0 = time;
	my $ok = IPC::Run::run($cmd, '<', \undef, '>', \$out, '2>', \$err,
		init => sub { chdir $work },
		IPC::Run::timeout(300));
	ok($ok, "$name exits 0") or diag("$name:\n$out\n$err");
	foreach my $re (@want)
	{
		like($out, $re, "$name: $re");
	}
	note("$name took " . (time - $t0) . " s:\n$out");
	return $out;
}

run_client('python_boto3.py', [ $python, '-I', "$examples/python_boto3.py" ],
	qr/^fifo ok$/m, qr/^dead-letter ok$/m, qr/^long poll ok/m);
run_client('aws_cli.sh', [ 'bash', "$examples/aws_cli.sh" ],
	qr/^fifo ok$/m, qr/^dead-letter ok$/m, qr/^long poll ok/m);
run_client('node producer_consumer.mjs',
	[ 'node', "$examples/node/producer_consumer.mjs" ],
	qr/^fifo ok$/m, qr/^dead-letter ok$/m, qr/^long poll ok/m);
# bbc's sqs-consumer / sqs-producer (npm), a handler that sometimes throws
run_client('node consumer_throws.mjs',
	[ 'node', "$examples/node/consumer_throws.mjs" ],
	qr/^sqs-consumer ok \(30 handled/m, qr/^poison ok$/m);
my $sig = run_client('sigv4_check.py', [ $python, '-I', "$examples/sigv4_check.py" ],
	qr/^sigv4: \d+ passed, 0 failed$/m);
unlike($sig, qr/^FAILED/m, 'sigv4_check.py: no case failed');
like($sig, qr/^ok JS signer presigned GET/m, 'sigv4_check.py ran the JS signer\'s cases');

# The programs' queues were theirs: created as sqs_app, all deleted again.
is(sql(q(SELECT count(*) FROM queue.queues
		WHERE queue_name ~ '^(py|cli|node)[0-9]+-')),
	'0', 'the programs deleted every queue they made');

$node->stop;
done_testing();
