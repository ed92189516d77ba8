# The SQS endpoint's HTTP server (src/sqs/server.c, library queue_sqs):
# with queue.sqs_listen set, queue.sqs_workers workers serve HTTP on one
# port; an unsigned request gets an answer (403 once protocol.c is in),
# with Date and x-amzn-RequestId; a malformed request gets 400 and the
# workers survive it; a body over the cap gets 413; 200 idle connections
# do not stop the next request; a worker killed with -9 comes back with a
# new pid and serves.  Without queue.sqs_listen there is no SQS worker,
# and the core library does not link libmicrohttpd.
use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;

use IO::Socket::INET;
use Time::HiRes qw(sleep);
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use QueueWorkerNode;
use IPC::Run;

my $port = PostgreSQL::Test::Cluster::get_free_port();
my $node = QueueWorkerNode::start(
	'sqs_server', qq(
restart_after_crash = on
queue.sqs_listen = '127.0.0.1:$port'
queue.sqs_workers = 2
));
my $tmp = PostgreSQL::Test::Utils::tempdir();

sub sql { return $node->safe_psql('postgres', $_[0]); }

sub sqs_pids
{
	return sql("SELECT string_agg(pid::text, ',' ORDER BY pid) FROM pg_stat_activity"
		  . " WHERE backend_type = 'queue sqs worker'");
}

ok( $node->poll_query_until(
		'postgres',
		"SELECT count(*) = 2 FROM pg_stat_activity WHERE backend_type = 'queue sqs worker'"),
	'two sqs workers run');
my $pids = sqs_pids();

# One request with curl: (status, headers, body).
sub http
{
	my (@args) = @_;
	my $status = `curl -s -m 20 -o $tmp/body -D $tmp/headers -w '%{http_code}' @args http://127.0.0.1:$port/`;
	return ($status, slurp_file("$tmp/headers"), slurp_file("$tmp/body"));
}

# An unsigned AWS JSON 1.0 request.
my @unsigned = (
	q(-X POST), q(-H 'Content-Type: application/x-amz-json-1.0'),
	q(-H 'X-Amz-Target: AmazonSQS.ListQueues'), q(--data '{}'));

# Raw bytes to the port; what comes back until the server closes or 10 s.
sub raw_exchange
{
	my ($bytes) = @_;
	my $sock = IO::Socket::INET->new(
		PeerAddr => '127.0.0.1',
		PeerPort => $port,
		Proto => 'tcp',
		Timeout => 10) or die "connect: $!";
	print $sock $bytes;
	my $got = '';
	eval {
		local $SIG{ALRM} = sub { die "timeout\n" };
		alarm 10;
		while (1)
		{
			my $n = sysread($sock, my $buf, 65536);
			last if !$n;
			$got .= $buf;
		}
		alarm 0;
	};
	close $sock;
	return $got;
}

# An answer, with the headers SDKs rely on.
my ($status, $headers, $body) = http(@unsigned);
is($status, '403', 'an unsigned request is refused with 403');
like(
	$body,
	qr/MissingAuthenticationToken|IncompleteSignature/,
	'with an SQS authentication error');
like(
	$headers,
	qr/^Date: (Mon|Tue|Wed|Thu|Fri|Sat|Sun), \d\d (Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec) \d{4} \d\d:\d\d:\d\d GMT\r$/mi,
	'an RFC 7231 Date header');
like(
	$headers,
	qr/^x-amzn-RequestId: [0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}\r$/mi,
	'an x-amzn-RequestId header');

# Malformed requests: 400, and the workers carry on.
like(raw_exchange("GET  HTTP/1.1\r\n\r\n"),
	qr{^HTTP/1\.1 400 }, 'a request line without a target gets 400');
like(
	raw_exchange("GET / HTTP/1.1\r\nHost: x\r\nno colon here\r\n\r\n"),
	qr{^HTTP/1\.1 400 }, 'a header line without a colon gets 400');
like(
	raw_exchange("POST / HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\n\r\n"),
	qr{^HTTP/1\.1 400 }, 'a malformed Content-Length gets 400');
is(sqs_pids(), $pids, 'the workers survived the malformed requests');

# A body over the cap: 413 before the body is read, and the connection closes.
my $big = raw_exchange(
	"POST / HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-amz-json-1.0\r\n"
	  . "X-Amz-Target: AmazonSQS.SendMessage\r\nContent-Length: 5000000\r\n\r\n");
like($big, qr{^HTTP/1\.1 413 }, 'a body over 4 MiB gets 413');
like($big, qr/RequestEntityTooLarge/, 'with an SQS-style error body');
like($big, qr/^Connection: close\r$/mi, 'and the connection is closed');

# Long polls, parked in the workers' loops (boto3, Query protocol).
my $python = '/usr/bin/python3';
SKIP:
{
	skip 'no Debian python3-boto3', 9
	  unless system("$python -I -c 'import boto3' >/dev/null 2>&1") == 0;

	sql(q(
CREATE ROLE sqs_app LOGIN;
GRANT USAGE ON SCHEMA queue TO sqs_app;
GRANT CREATE ON DATABASE postgres TO sqs_app;
));
	my ($key, $secret) = split /\|/,
	  sql(q(SELECT access_key_id || '|' || secret_access_key)
		  . q( FROM queue.create_access_key('sqs_app'::regrole)));
	my @client = ($python, '-I', "$FindBin::RealBin/sqs/long_poll_client.py",
		"http://127.0.0.1:$port", $key, $secret);
	my $run = sub {
		my ($out, $err);
		IPC::Run::run([ @client, @_ ], '>', \$out, '2>', \$err);
		chomp $out;
		diag($err) if $err ne '';
		return $out;
	};
	like($run->('create', 'lp'), qr{/000000000000/lp$}, 'queue created over HTTP');
	like($run->('create', 'idle'), qr{/000000000000/idle$}, 'a second queue');

	# A commit in SQL wakes a parked ReceiveMessage at once.
	my ($out, $err);
	my $h = IPC::Run::start([ @client, 'wait', 'lp', '20' ], '>', \$out, '2>', \$err);
	sleep 1.5;
	sql(q(SELECT queue.send('lp', 'wake up')));
	$h->finish;
	my ($got, $secs) = split /\t/, $out;
	is($got, '1', 'a parked long poll gets the message sent in SQL');
	cmp_ok($secs, '<', 10, 'woken by the commit, not at the end of its 20 s');

	# Nothing comes: the answer is empty, at its time.
	($got, $secs) = split /\t/, $run->('wait', 'idle', '2');
	is($got, '0', 'a long poll on an empty queue answers empty');
	cmp_ok($secs, '>=', 1.8, 'after its WaitTimeSeconds');

	# A client that leaves while parked gets nothing leased to it: the
	# message sent after it left is there for the next receive.
	is($run->('abandon', 'lp'), 'gave up', 'a client gives up its long poll');
	sleep 1;
	sql(q(SELECT queue.send('lp', 'for whoever is there')));
	sleep 1;
	is( sql(q(SELECT body FROM queue.receive('lp'))),
		'for whoever is there',
		'the message sent after the client left is not leased to it');

	# 100 parked long polls hold no process each.
	$h = IPC::Run::start([ @client, 'many', 'idle', '100', '8' ], '>', \$out, '2>', \$err);
	sleep 5;
	is( sql(q(SELECT count(*) FROM pg_stat_activity WHERE backend_type IN
			 ('client backend', 'queue sqs worker', 'background worker'))),
		'3',
		'100 parked long polls: still the two workers (and this session)');
	$h->finish;
	like($out, qr/^100\t0\t/, 'all 100 answered empty');
}

# 200 connections held open (half of them in the middle of a request
# line) do not keep the next request from being answered.
my @idle;
for my $i (1 .. 200)
{
	my $s = IO::Socket::INET->new(
		PeerAddr => '127.0.0.1',
		PeerPort => $port,
		Proto => 'tcp',
		Timeout => 10) or die "connect $i: $!";
	print $s "GET / HT" if $i % 2;
	push @idle, $s;
}
($status) = http(@unsigned);
like($status, qr/^[1-5][0-9][0-9]$/, 'a request is answered while 200 connections are held');
close $_ for @idle;

# kill -9 of a worker: the postmaster restarts (crash recovery), the
# workers come back with new pids and serve.
my ($victim) = split /,/, $pids;
kill 'KILL', $victim;
ok( $node->poll_query_until(
		'postgres',
		"SELECT count(*) = 2 AND bool_and(pid <> $victim) FROM pg_stat_activity"
		  . " WHERE backend_type = 'queue sqs worker'"),
	'the sqs workers come back after kill -9');
isnt(sqs_pids(), $pids, 'with new pids');
my $served = 0;
for (1 .. 100)
{
	($status) = http(@unsigned);
	if ($status =~ /^[1-5][0-9][0-9]$/) { $served = 1; last; }
	sleep 0.1;
}
ok($served, 'the restarted workers serve');

$node->stop;

# Without queue.sqs_listen: no sqs worker, and queue.so has no HTTP library.
my $plain = QueueWorkerNode::start('sqs_off');
is( $plain->safe_psql(
		'postgres',
		"SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'queue sqs worker'"),
	'0',
	'no sqs worker without queue.sqs_listen');
my $libdir = $plain->config_data('--pkglibdir');
my $ldd = `ldd $libdir/queue.so`;
like($ldd, qr/libc\.so/, 'ldd reads queue.so');
unlike($ldd, qr/microhttpd/, 'the core library does not link libmicrohttpd');
like(`ldd $libdir/queue_sqs.so`, qr/microhttpd/, 'queue_sqs links libmicrohttpd');
$plain->stop;

done_testing();
