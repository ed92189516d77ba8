# The SQS endpoint under many connections (DESIGN.md "SQS API": robust
# against slow and half-open clients, 10,000 connections, a client leaving
# in the middle of a long poll).  Two workers, the default
# queue.sqs_max_connections.  test/t/sqs_connections.py opens 10,000
# connections (fewer if the open-files hard limit is lower: it prints how
# many), a third with half a request line, a third with half a body, a
# third idle; while they are open a signed request on a new connection is
# answered within 2 s; a client sending one byte per 100 ms does not hold
# others up and gets its answer; a ReceiveMessage (WaitTimeSeconds 20) on
# an empty queue whose client closes after 0.5 s leases nothing: a message
# sent in SQL afterwards is visible, and SQL receives it with receive_count
# 1 (never received before).  The workers neither crash nor restart.
# Figures (time to open, latency, the workers' Pss) are printed with note.
use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;

use IO::Socket::INET;
use IPC::Run;
use JSON::PP;
use Time::HiRes qw(sleep);
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use QueueWorkerNode;

my $python = -x '/usr/bin/python3' ? '/usr/bin/python3' : 'python3';
delete $ENV{PYTHONPATH};
my ($rc) = IPC::Run::run([ $python, '-I', '-c', 'import botocore.auth' ], '>', \my $o, '2>', \my $e);
plan skip_all => 'python3 with botocore is needed' unless $rc;

my $port = PostgreSQL::Test::Cluster::get_free_port();
my $node = QueueWorkerNode::start(
	'sqs_connections', qq(
queue.sqs_listen = '127.0.0.1:$port'
queue.sqs_workers = 2
queue.sqs_account_id = '123456789012'
max_worker_processes = 16
));

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

sql(q(
CREATE ROLE conn_app LOGIN;
GRANT USAGE ON SCHEMA queue TO conn_app;
SELECT queue.create('lp');
SELECT queue.grant('lp', 'conn_app', '{send, receive}');
));
my ($key, $secret) = split / /,
  sql("SELECT access_key_id || ' ' || secret_access_key FROM queue.create_access_key('conn_app')");

# The endpoint accepts connections.
my $up = 0;
for (1 .. 300)
{
	my $s = IO::Socket::INET->new(PeerAddr => "127.0.0.1:$port", Proto => 'tcp');
	if ($s) { close $s; $up = 1; last; }
	sleep 0.1;
}
ok($up, 'endpoint listens');

my $hard = `sh -c 'ulimit -Hn'`;
chomp $hard;
note("open files hard limit here: $hard");

my ($out, $err) = ('', '');
IPC::Run::run(
	[
		$python, '-I', "$FindBin::RealBin/sqs_connections.py", $port, $key, $secret, 10000,
		"http://127.0.0.1:$port/123456789012/lp", $pids
	],
	'>', \$out, '2>', \$err,
	IPC::Run::timeout(300)) or diag("sqs_connections.py failed: $err");
my $r = eval { decode_json($out) } // {};
diag($err) if $err ne '';
note("sqs_connections.py: $out");

my $n = $r->{connections} // 0;
note(sprintf(
		"%d connections (fd limit %s) opened in %s s, all held by the workers after %s s; "
		  . "ListQueues latency median %s s, max %s s; during the slow client max %s s (%d requests)",
		$n, $r->{fd_limit} // '?', $r->{open_seconds} // '?', $r->{accepted_seconds} // '?',
		$r->{latency_median} // '?', $r->{latency_max} // '?',
		$r->{latency_during_slow_max} // '?', $r->{requests_during_slow} // 0));
note("workers' Pss (kB) before: " . encode_json($r->{pss_kb_before} // {})
	  . ", with the connections open: " . encode_json($r->{pss_kb_open} // {}));
diag("only $n connections: the open-files hard limit is $r->{fd_limit}") if $n && $n < 10000;

ok($n >= 1000, "$n connections opened (10,000 unless the fd limit is lower)");
is($r->{connect_failed}, 0, 'every connection was accepted');
cmp_ok($r->{worker_sockets} // 0, '>=', $n, 'the workers hold all of them');
is_deeply($r->{statuses}, [200], 'every request on a new connection got 200 while they were open');
cmp_ok($r->{latency_max} // 99, '<', 2, 'each within 2 s');
cmp_ok($r->{requests_during_slow} // 0, '>=', 10, 'requests were served while a client sent one byte per 100 ms');
cmp_ok($r->{latency_during_slow_max} // 99, '<', 2, 'each within 2 s');
is($r->{slow_status}, 200, 'the slow client got its answer');
ok($r->{long_poll_closed}, 'a long poll was started and its client left after 0.5 s');
is($r->{long_poll_answered_early}, '', 'the long poll on an empty queue had not been answered');

# The long poll's client is gone: a message sent now is nobody's.
sleep 0.2;
sql("SELECT queue.send('lp', 'after the client left')");
sleep 1;
is(sql("SELECT visible || ' ' || in_flight FROM queue.stats WHERE queue_name = 'lp'"),
	'1 0', 'the message stays visible: nothing leased it');
is(sql("SELECT string_agg(body || ' ' || receive_count, ',') FROM queue.receive('lp', 10)"),
	'after the client left 1', 'SQL receives it, never received before');

is(sqs_pids(), $pids, 'the workers neither crashed nor restarted');
unlike(slurp_file($node->logfile), qr/PANIC|TRAP:|terminated by signal/, 'no crash in the server log');

$node->stop;
done_testing();
