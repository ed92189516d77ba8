# Celery on the SQS endpoint (issue 36): a Celery worker of Debian's
# python3-celery 5.2, through kombu's SQS transport unchanged (python3-kombu
# 5.2, which posts Action=ReceiveMessage to the queue URL as the request
# path, with no QueueUrl), with examples/sqs/celery_app.py's configuration
# (the one docs/sqs-api.md shows): tasks with results, a retry, and a poison
# task whose message the queue's RedrivePolicy moves to a dead-letter queue.
# test/t/sqs/celery_driver.py runs the worker and checks; each of its lines
# is an assertion here.
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
plan skip_all => 'no Debian python3-celery, python3-kombu and python3-pycurl (test/setup.sh)'
  unless system("$python -I -c 'import celery, kombu.transport.SQS, pycurl, boto3' >/dev/null 2>&1") == 0;

my $port = PostgreSQL::Test::Cluster::get_free_port();
my $node = QueueWorkerNode::start('sqs_celery', qq(
queue.sqs_listen = '127.0.0.1:$port'
));
$node->safe_psql('postgres', q(
CREATE ROLE celery LOGIN;
GRANT USAGE ON SCHEMA queue TO celery;
GRANT CREATE ON DATABASE postgres TO celery;
));
# a secret with characters a URL must quote (kombu's broker URL)
my ($key, $secret) = split /\|/, $node->safe_psql('postgres',
	q(SELECT access_key_id || '|' || secret_access_key
	  FROM queue.create_access_key('celery'::regrole, 'AKIDCELERY', 'se/cr+et=x')));
is($secret, 'se/cr+et=x', 'access key created');
my $listening = 0;
for (1 .. 300)
{
	my $s = IO::Socket::INET->new(PeerAddr => '127.0.0.1', PeerPort => $port, Proto => 'tcp');
	if ($s) { close $s; $listening = 1; last; }
	select(undef, undef, undef, 0.1);
}
ok($listening, 'endpoint listens');

my $work = PostgreSQL::Test::Utils::tempdir;
my ($stdout, $stderr);
my $rc = IPC::Run::run([ $python, '-I', "$FindBin::RealBin/sqs/celery_driver.py",
		"http://127.0.0.1:$port", $key, $secret, $work ],
	'>', \$stdout, '2>', \$stderr, IPC::Run::timeout(300));
my $checks = 0;
for my $line (split /\n/, $stdout)
{
	my ($kind, $what, $detail) = split /\t/, $line, 3;
	if ($kind eq 'ok') { pass($what); $checks++; }
	elsif ($kind eq 'not ok') { fail($what); diag($detail // ''); $checks++; }
}
ok($rc, 'the driver ran to its end') or diag($stderr);
is($checks, 6, 'every check of the driver ran');

# the queues Celery used are SQL queues of the key's role
is( $node->safe_psql('postgres', q(
	SELECT string_agg(queue_name || ' ' || owner::text, ', ' ORDER BY queue_name)
	FROM queue.queues WHERE queue_name LIKE 'celery_t%')),
	'celery_t celery, celery_t_dlq celery', 'Celery\'s queues are the role\'s SQL queues');
$node->stop;
done_testing();
