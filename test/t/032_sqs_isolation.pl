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
#  6. Everything at once: mallory holds the lock, moves 200,000 messages
#     out of her dead-letter queue (StartMessageMoveTask answers at once),
#     floods 40 unsigned 4 MiB bodies, and runs a consumer whose handler
#     swallows every cancel at the cluster's whole consumer capacity: bob's
#     requests answer in under 1 s each, bob's consumer (another database)
#     handles its message within 60 s, and once the hog is dropped none of
#     its processes remains.
#  7. Long polls: mallory opens 40 at once with a share of 30
#     (queue.sqs_long_polls_per_role): 10 are answered ServiceUnavailable
#     at once, 30 wait, and bob's calls answer in under 1 s (issue 48).
use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;

use IPC::Run;
use JSON::PP;
use Time::HiRes qw(time);
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
queue.max_consumer_processes = 4
queue.sqs_long_polls_per_role = 30
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

# --- 6. everything at once ----------------------------------------------------
# mallory holds the lock again, runs a 200,000-message move out of her
# dead-letter queue, floods unsigned 4 MiB bodies and runs a consumer whose
# handler swallows every cancel, at the cluster's whole consumer capacity;
# bob's SQS requests and bob's consumer (another database) go on.
sql(q(
CREATE DATABASE bobdb;
SET ROLE mallory;
SELECT queue.create('mdest');
SELECT queue.create('mdlq');
SELECT queue.create('msrc', dead_letter_queue => 'mdlq', max_receive_count => 1);
SELECT queue.create('mhog', visibility_timeout => '30s');
RESET ROLE;
));
sql(q(SELECT count(*) FROM generate_series(1, 200) g,
	LATERAL queue.send_batch('mdlq', ARRAY(SELECT 'm' || g || '_' || i FROM generate_series(1, 1000) i))));
# Counted in the queues' tables (queue.stats estimates a queue this deep).
sub rows_of
{
	my ($name) = @_;
	my $id = QueueWorkerNode::queue_id($node, $name);
	return sql(qq(SELECT CASE WHEN q.dedicated THEN (SELECT count(*) FROM queue_data.q$id)
		ELSE (SELECT count(*) FROM queue_data.messages m WHERE m.store_id = coalesce(q.store_id, q.queue_id)) END
		FROM queue._queues q WHERE q.queue_id = $id));
}
is(rows_of('mdlq'), '200000', 'mallory\'s dead-letter queue holds 200,000 messages');
sql(q(
CREATE FUNCTION public.hog(msgs queue.message[]) RETURNS void LANGUAGE plpgsql AS $$
DECLARE t0 timestamptz := pg_catalog.clock_timestamp();
BEGIN
	WHILE pg_catalog.clock_timestamp() < t0 + interval '300 s' LOOP
		BEGIN
			PERFORM pg_catalog.pg_sleep(0.1);
		EXCEPTION WHEN query_canceled THEN
			NULL;	-- swallowed
		END;
	END LOOP;
END $$;
GRANT EXECUTE ON FUNCTION public.hog(queue.message[]) TO mallory;
SET ROLE mallory;
SELECT count(*) FROM queue.send_batch('mhog', ARRAY(SELECT 'h' || i FROM generate_series(1, 16) i));
SELECT queue.create_consumer('hog', 'mhog', 'public.hog(queue.message[])', concurrency => 4);
RESET ROLE;
));
$node->safe_psql('bobdb', q(
CREATE EXTENSION queue;
GRANT USAGE ON SCHEMA queue TO bob;
GRANT CREATE ON SCHEMA public TO bob;
GRANT CREATE ON DATABASE bobdb TO bob;
SET ROLE bob;
CREATE TABLE public.handled (body text, at timestamptz DEFAULT clock_timestamp());
CREATE FUNCTION public.bob_handler(msgs queue.message[]) RETURNS void LANGUAGE sql AS $$
	INSERT INTO public.handled (body) SELECT m.body FROM pg_catalog.unnest(msgs) m
$$;
SELECT queue.create('bcq');
RESET ROLE;
));
ok($node->poll_query_until('postgres',
		q(SELECT count(*) = 4 FROM pg_stat_activity WHERE backend_type = 'queue consumer' AND application_name = 'hog')),
	'mallory\'s hog holds every consumer process (4)');

$locker = $node->background_psql('postgres');
$locker->query_safe('SET ROLE mallory');
$locker->query_safe('BEGIN');
$locker->query_safe(q(SELECT queue.purge('mq.fifo')));
my $move = wire('start_move', 'arn:aws:sqs:us-east-1:123456789012:mdlq',
	'arn:aws:sqs:us-east-1:123456789012:mdest');
note(sprintf('StartMessageMoveTask of 200,000 messages answered %d in %.1f ms', $move->{status}, $move->{ms}));
is($move->{status}, 200, 'the move task starts');
cmp_ok($move->{ms}, '<', 1000, '... and answers at once');

my $t0 = time();
$node->safe_psql('bobdb', q(SET ROLE bob;
	SELECT queue.create_consumer('bc', 'bcq', 'public.bob_handler(queue.message[])');
	SELECT queue.send('bcq', 'for bob');));
my $storm = wire('storm', 6, 'bq', 'mq.fifo', 8, 40);
note(sprintf('bob during the storm (lock, move, 40 unsigned 4 MiB bodies, hog consumer): %d requests, p50 %.1f ms, max %.1f ms; flood answers %s; mallory\'s sends %s',
		$storm->{requests}, $storm->{lat_p50}, $storm->{lat_max}, encode_json($storm->{answers}),
		encode_json([ map { $_->[0] } @{ $storm->{hostile} } ])));
is_deeply($storm->{bad}, [], 'bob: every request answered 200 during the storm');
cmp_ok($storm->{lat_max}, '<', 1000, 'bob: each request in under 1 s during the storm');
my $got = 0;
for (1 .. 600)
{
	$got = $node->safe_psql('bobdb', q(SELECT count(*) FROM public.handled WHERE body = 'for bob'));
	last if $got;
	sleep(0.1);
}
ok($got, 'bob\'s consumer handles its message')
  or diag($node->safe_psql('bobdb', q(SELECT * FROM queue.consumers)) . "\n"
	  . sql(q(SELECT datname, backend_type, application_name, state, wait_event_type, wait_event, left(query, 60)
	  FROM pg_stat_activity WHERE backend_type LIKE 'queue%')));
my $handled = $node->safe_psql('bobdb', q(SELECT extract(epoch FROM at) FROM public.handled)) - $t0;
note(sprintf('bob\'s consumer handled its message %.1f s after it was sent', $handled));
cmp_ok($handled, '<', 60, '... within 60 s');
is(sql(q(SELECT count(*) FROM pg_stat_activity WHERE backend_type LIKE 'queue%' AND backend_type <> 'queue consumer'
	AND wait_event_type = 'Lock')), '0', 'no queue worker or endpoint worker waits on mallory\'s lock');
$locker->query_safe('COMMIT');
$locker->quit;

ok($node->poll_query_until('postgres',
		q(SELECT status = 'COMPLETED' FROM queue._move_tasks t JOIN queue._queues q ON q.queue_id = t.source_queue_id
		  WHERE q.queue_name = 'mdlq' ORDER BY t.started_at DESC LIMIT 1)),
	'the move completes');
is(rows_of('mdest') . ' ' . rows_of('mdlq'), '200000 0', 'every message moved, once')
  or diag(sql(q(SELECT t.status, t.moved, t.to_move, t.upto_id, t.failure_reason FROM queue._move_tasks t))
	. "\n" . sql(q(SELECT visible, in_flight, delayed FROM queue.stats WHERE queue_name IN ('mdlq', 'mdest'))));

my $t1 = time();
sql(q(SET ROLE mallory; SELECT queue.drop_consumer('hog');));
ok($node->poll_query_until('postgres',
		q(SELECT count(*) = 0 FROM pg_stat_activity WHERE backend_type = 'queue consumer' AND application_name = 'hog')),
	'no process of the dropped hog remains');
note(sprintf('the dropped hog\'s processes were gone %.1f s after drop_consumer', time() - $t1));

# --- 7. long polls at their share ------------------------------------------------
# mallory opens 40 long polls (5 s) of an empty queue of hers: 30 wait
# (queue.sqs_long_polls_per_role, 30 here), 10 are answered
# ServiceUnavailable at once; bob's calls meanwhile answer in under 1 s
sql(q(SET ROLE mallory; SELECT queue.create('mlp');));
{
	my ($out, $err) = ('', '');
	IPC::Run::run([ $python, '-I', "$FindBin::RealBin/sqs/role_shares_client.py", "http://127.0.0.1:$port",
			"$mkey:$msecret", 'mlp', 40, 5, "$bkey:$bsecret", 'bq' ], '>', \$out, '2>', \$err, IPC::Run::timeout(60));
	note("role_shares_client.py: $err") if $err;
	my %v = $out =~ /^value\t(\w+)\t(.*)$/mg;
	note("long polls: $_ = $v{$_}") for sort keys %v;
	is("$v{other_send_status} $v{other_receive_status}", '200 200', 'bob is served beside mallory\'s 40 long polls');
	cmp_ok(($v{other_send_ms} // 1e9) + ($v{other_receive_ms} // 1e9), '<', 1000, '... in under 1 s');
	is($v{hog_answers}, '200:30,503:10', 'mallory\'s long polls beyond her share are refused (503), 30 wait');
	cmp_ok($v{hog_refused_max_ms} // 1e9, '<', 1500, '... at once');
}

is(sql(q(SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'queue sqs worker')), '1',
	'the worker still runs');
is(sql("SELECT pid FROM pg_stat_activity WHERE backend_type = 'queue sqs worker'"), $worker_pid,
	'... the same process (never restarted)');

done_testing();
