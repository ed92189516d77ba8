# One role's long polls hold no more than its share of an endpoint worker
# (issue 48, src/sqs/shares.c): a worker of 40 connections
# (queue.sqs_max_connections) with queue.sqs_long_polls_per_role = 20.
# hog opens 40 ReceiveMessage (WaitTimeSeconds 8) on its empty queue at
# once, each on its own connection: 20 wait, the other 20 are answered
# ServiceUnavailable at once; bob's SendMessage and ReceiveMessage,
# 1.5 s later, are answered in under 1 s.  Without the share every
# connection waits for hog and bob is not served at all.  The client is
# test/t/sqs/role_shares_client.py (figures printed with note).
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
plan skip_all => 'no Debian python3-botocore'
  unless system("$python -I -c 'import botocore.auth' >/dev/null 2>&1") == 0;

my $port = PostgreSQL::Test::Cluster::get_free_port();
my $node = QueueWorkerNode::start('sqs_role_shares', qq(
queue.sqs_listen = '127.0.0.1:$port'
queue.sqs_workers = 1
queue.sqs_max_connections = 40
queue.sqs_long_polls_per_role = 20
));
sub sql { return $node->safe_psql('postgres', $_[0]); }

sql(q(
CREATE ROLE hog LOGIN;
CREATE ROLE bob LOGIN;
GRANT USAGE ON SCHEMA queue TO hog, bob;
GRANT CREATE ON DATABASE postgres TO hog, bob;
SET ROLE hog; SELECT queue.create('hogq'); RESET ROLE;
SET ROLE bob; SELECT queue.create('bobq'); RESET ROLE;
));
my %key = map {
	($_ => sql("SELECT access_key_id || ':' || secret_access_key FROM queue.create_access_key('$_'::regrole)"))
} qw(hog bob);

my $up = 0;
for (1 .. 300)
{
	my $s = IO::Socket::INET->new(PeerAddr => "127.0.0.1:$port", Proto => 'tcp');
	if ($s) { close $s; $up = 1; last; }
	select(undef, undef, undef, 0.1);
}
ok($up, 'the endpoint listens');

my ($out, $err) = ('', '');
IPC::Run::run([ $python, '-I', "$FindBin::RealBin/sqs/role_shares_client.py", "http://127.0.0.1:$port",
		$key{hog}, 'hogq', 40, 8, $key{bob}, 'bobq' ], '>', \$out, '2>', \$err, IPC::Run::timeout(60));
diag($err) if $err ne '';
my %v = $out =~ /^value\t(\w+)\t(.*)$/mg;
note("$_ = $v{$_}") for sort keys %v;

is("$v{other_send_status} $v{other_receive_status}", '200 200', "bob's SendMessage and ReceiveMessage are served beside hog's 40 long polls");
cmp_ok($v{other_send_ms} // 1e9, '<', 1000, "... SendMessage in under 1 s ($v{other_send_ms} ms)");
cmp_ok($v{other_receive_ms} // 1e9, '<', 1000, "... ReceiveMessage in under 1 s ($v{other_receive_ms} ms)");
is($v{hog_refused_early}, '20', "hog's long polls beyond its share of 20 are answered ServiceUnavailable");
cmp_ok($v{hog_refused_max_ms} // 1e9, '<', 1500, '... at once, not after their wait');
like($v{hog_refusal} // '', qr/queue\.sqs_long_polls_per_role/, '... saying which share');
is($v{hog_answers}, '200:20,503:20', '... and its 20 within the share wait and are answered 200');

$node->stop;
done_testing();
