# No tenant can stall or exhaust what the others share (issue 34, DESIGN.md
# "SQS API": no request of one role delays another's beyond a bound, and
# nothing unauthenticated is buffered past its headers; a key works only
# while its role may log in).  One endpoint worker, so every request
# shares it.  mallory is the hostile tenant, bob the bystander; both log
# in and hold a key.  test/t/sqs_isolation.py drives the wire and prints
# what it saw (latencies in ms, memory in kB); the figures are printed
# here with note.
#
#  1. Locks: mallory holds BEGIN; SELECT queue.purge('mq.fifo') open in SQL
#     and sends 8 SendMessage to that queue over HTTP: bob's requests
#     answer in under 1 s each while they wait; hers are parked, tried
#     again, and answered ServiceUnavailable (503) after about 5 s; once
#     she commits, her sends go through.
#  2. Unsigned bodies: 40 connections declaring 4 MiB each without an
#     Authorization header are answered 403 MissingAuthenticationToken at
#     their headers; the worker's private memory grows by less than 8 MB
#     (it was 4 MiB per connection); bob answers in under 1 s meanwhile.
#  3. Forged Authorization with 4 MiB bodies: past queue.sqs_request_memory
#     (16 MB here) the bodies are refused with 503 before they are read;
#     the worker's memory grows by less than the budget and a margin.
#  4. Presigned URLs: a URL presigned for ListQueues (UNSIGNED-PAYLOAD)
#     works as itself, and is refused (403) when replayed with a body
#     naming another action, an unsigned X-Amz-Target, or a form body.
#  5. NOLOGIN and VALID UNTIL in the past lock the key out (403
#     InvalidClientTokenId); LOGIN again lets it back in.
use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;

use IPC::Run;
use JSON::PP;
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
	'sqs_isolation', qq(
queue.sqs_listen = '127.0.0.1:$port'
queue.sqs_workers = 1
queue.sqs_account_id = '123456789012'
queue.sqs_request_memory = '16MB'
max_worker_processes = 24
));

sub sql { return $node->safe_psql('postgres', $_[0]); }

ok( $node->poll_query_until(
		'postgres',
		"SELECT count(*) = 1 FROM pg_stat_activity WHERE backend_type = 'queue sqs worker'"),
	'the sqs worker runs');
my $worker_pid = sql("SELECT pid FROM pg_stat_activity WHERE backend_type = 'queue sqs worker'");

sql(q(
CREATE ROLE bob LOGIN;
CREATE ROLE mallory LOGIN;
GRANT USAGE ON SCHEMA queue TO bob, mallory;
GRANT CREATE ON DATABASE postgres TO bob, mallory;
SET ROLE bob;
SELECT queue.create('bq');
RESET ROLE;
SET ROLE mallory;
SELECT queue.create('mq.fifo', fifo => true, content_based_deduplication => true);
RESET ROLE;
));
my ($bkey, $bsecret) = split /\|/, sql("SELECT access_key_id || '|' || secret_access_key FROM queue.create_access_key('bob')");
my ($mkey, $msecret) = split /\|/, sql("SELECT access_key_id || '|' || secret_access_key FROM queue.create_access_key('mallory')");

# One run of the wire driver: its JSON answer.
sub wire
{
	my @args = @_;
	my ($out, $err);
	IPC::Run::run([ $python, '-I', "$FindBin::RealBin/sqs_isolation.py", $port,
			$bkey, $bsecret, $mkey, $msecret, @args ],
		'>', \$out, '2>', \$err, IPC::Run::timeout(180));
	note("sqs_isolation.py @args: $err") if $err;
	my $doc = eval { decode_json($out) };
	return $doc // { error => $out . $err };
}

# --- 1. a lock held in SQL ------------------------------------------------------
my $calm = wire('bystander', 2, 'bq');
note(sprintf('bob alone: %d requests, p50 %.1f ms, max %.1f ms',
		$calm->{requests}, $calm->{lat_p50}, $calm->{lat_max}));
is_deeply($calm->{bad}, [], 'bob alone: every request answered 200');

my $locker = $node->background_psql('postgres');
$locker->query_safe('SET ROLE mallory');
$locker->query_safe('BEGIN');
$locker->query_safe(q(SELECT queue.purge('mq.fifo')));
my $locked = wire('locked', 4, 'bq', 'mq.fifo', 8);
note(sprintf('bob while mallory holds the lock: %d requests, p50 %.1f ms, max %.1f ms',
		$locked->{requests}, $locked->{lat_p50}, $locked->{lat_max}));
note('mallory\'s 8 sends [status, ms, type]: ' . encode_json($locked->{hostile}));
is_deeply($locked->{bad}, [], 'bob: every request answered 200 while the lock is held');
cmp_ok($locked->{lat_max}, '<', 1000, 'bob: each request answered in under 1 s');
is(scalar(grep { $_->[0] == 503 && ($_->[2] // '') =~ /ServiceUnavailable/ } @{ $locked->{hostile} }),
	8, 'mallory\'s blocked sends: ServiceUnavailable after their time');
cmp_ok((sort { $a <=> $b } map { $_->[1] } @{ $locked->{hostile} })[0], '>=', 4500,
	'... after being tried again for about 5 s');
is(sql(q(SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'queue sqs worker' AND wait_event_type = 'Lock')),
	'0', 'the worker is not waiting on the lock');
$locker->query_safe('COMMIT');
$locker->quit;
my $after = wire('locked', 1, 'bq', 'mq.fifo', 2);
is_deeply([ map { $_->[0] } @{ $after->{hostile} } ], [ 200, 200 ],
	'mallory\'s sends go through once the lock is gone');

# --- 2. unsigned 4 MiB bodies -----------------------------------------------------
my $flood = wire('flood', 40, 2, 'bq', 'unsigned', $worker_pid);
my $grew = $flood->{mem_during_kb} - $flood->{mem_before_kb};
note(sprintf('40 unsigned 4 MiB bodies: worker private memory %d kB -> %d kB (+%d kB); answers %s; most bytes a flooder got to send %d; bob p50 %.1f ms, max %.1f ms',
		$flood->{mem_before_kb}, $flood->{mem_during_kb}, $grew,
		encode_json($flood->{answers}), $flood->{sent_max}, $flood->{lat_p50}, $flood->{lat_max}));
is_deeply($flood->{answers}, { 403 => 40 }, 'every unsigned body is refused (403) at its headers');
cmp_ok($grew, '<', 8192, 'the worker holds none of them (under 8 MB more)');
is_deeply($flood->{bad}, [], 'bob: every request answered 200 during the flood');
cmp_ok($flood->{lat_max}, '<', 1000, 'bob: each request in under 1 s during the flood');

# --- 3. forged Authorization, 4 MiB bodies: the budget -------------------------
my $claimed = wire('flood', 40, 0, 'bq', 'claimed', $worker_pid);
my $cgrew = $claimed->{mem_during_kb} - $claimed->{mem_before_kb};
note(sprintf('40 4 MiB bodies with a forged Authorization: +%d kB; answers %s',
		$cgrew, encode_json($claimed->{answers})));
cmp_ok($claimed->{answers}{503} // 0, '>=', 36, 'bodies past queue.sqs_request_memory are refused (503)');
cmp_ok($cgrew, '<', 16384 + 8192, 'the worker holds no more than its budget (16 MB) and a margin');
my $calm2 = wire('bystander', 1, 'bq');
is_deeply($calm2->{bad}, [], 'the budget is given back when those connections close');

# --- 4. presigned URLs authorise what they signed ------------------------------------
my $pre = wire('presigned', 'mq.fifo');
note('presigned: ' . encode_json($pre));
is($pre->{plain}{status}, 200, 'a URL presigned for ListQueues works as itself');
for my $replay (qw(target_json_body form_body target_no_body))
{
	is($pre->{$replay}{status}, 403, "replayed with $replay: 403");
	is($pre->{$replay}{code}, 'SignatureDoesNotMatch', "... SignatureDoesNotMatch");
}

# --- 5. a key works only while its role may log in ------------------------------
sub bob_lists
{
	my $w = wire('bystander', 0.01, 'bq');
	return @{ $w->{bad} } ? join(',', map { $_->[1] . ':' . ($_->[2] // '') } @{ $w->{bad} }) : 'ok';
}
is(bob_lists(), 'ok', 'bob\'s key works');
sql('ALTER ROLE bob NOLOGIN');
like(bob_lists(), qr/^403:.*InvalidClientTokenId/, 'NOLOGIN: bob\'s key is refused (InvalidClientTokenId)');
sql('ALTER ROLE bob LOGIN VALID UNTIL \'2000-01-01\'');
like(bob_lists(), qr/^403:.*InvalidClientTokenId/, 'VALID UNTIL in the past: refused');
sql('ALTER ROLE bob VALID UNTIL \'infinity\'');
is(bob_lists(), 'ok', 'LOGIN again: bob\'s key works again');

is(sql(q(SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'queue sqs worker')), '1',
	'the worker still runs');
is(sql("SELECT pid FROM pg_stat_activity WHERE backend_type = 'queue sqs worker'"), $worker_pid,
	'... the same process (never restarted)');

done_testing();
