# The SQS endpoint against hostile roles (issue 27, DESIGN.md "SQS API",
# "Access"): the database it serves (queue.sqs_database) belongs to
# mallory, an ordinary role, who shadows pg_catalog's operators, functions
# and aggregates with traps (as 019 does: a trap logs a line, and when a
# superuser runs it, makes mallory superuser) and points the database's
# search_path at them, and sets statement_timeout, lock_timeout,
# default_transaction_read_only and more for every session of her
# database.  The key's role (app) does the same in a schema of its own,
# for its own role, and owns the queues it drives.  Then every SQS action
# over HTTP, in AWS JSON 1.0 and in Query: queues made with dead-letter
# queues and tags, sends and batches, receives, visibility changes,
# deletes with good and bad receipts, dead letters and
# StartMessageMoveTask, long polls that park and are woken, purge, drops,
# bad signatures and unknown keys; a second role's queue, before and after
# a grant of send only; input shaped like SQL injection in every field a
# request carries.  mallory makes a schema queue_citus (plain tables,
# then a view over a trap), which a node without Citus never reads: every
# tenant is served (issue 48).  Then mallory also sets exit_on_error, role and
# session_authorization for her database (which would run the endpoint's
# workers as another role, and end them at the first client error).
#
# Asserted: every request gets its expected answer; no trap runs as a
# superuser, none runs in the endpoint's processes at all, and mallory is
# still an ordinary role; the endpoint's workers run as the bootstrap
# superuser whatever the database says.
use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;

use Digest::MD5 qw(md5_hex);
use IO::Socket::INET;
use IPC::Run;
use JSON::PP;
use Time::HiRes qw(time sleep);
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $python = '/usr/bin/python3';
plan skip_all => 'no Debian python3-botocore'
  unless system("$python -I -c 'import botocore.auth' >/dev/null 2>&1") == 0;
# The Query cases serialise and parse with botocore's SQS model, which is
# the Query one up to botocore 1.34.89 (bookworm's 1.29); newer botocore
# (Debian sid's) models SQS in JSON only: those cases then run in JSON alone.
my @protos = system("$python -I -c 'import sys, botocore.session; "
	  . "sys.exit(botocore.session.get_session().get_service_model(\"sqs\").protocol != \"query\")' >/dev/null 2>&1") == 0
  ? ('json', 'query') : ('json');
diag("botocore models SQS in JSON only: the Query cases are left out") if @protos == 1;
delete $ENV{PYTHONPATH};

my $port = PostgreSQL::Test::Cluster::get_free_port();
my $node = PostgreSQL::Test::Cluster->new('sqs_hostile');
$node->init;
$node->append_conf('postgresql.conf', qq(
shared_preload_libraries = 'queue'
queue.sweep_interval = '100ms'
queue.sqs_listen = '127.0.0.1:$port'
queue.sqs_workers = 1
queue.sqs_database = 'hostile'
queue.sqs_account_id = '123456789012'
max_worker_processes = 16
));
$node->start;
my $boot = $node->safe_psql('postgres', 'SELECT rolname FROM pg_roles WHERE oid = 10');
# force_parallel_mode was renamed debug_parallel_query in PostgreSQL 16;
# 19 refuses standard_conforming_strings = off (no such literals any more)
my $server_version = $node->safe_psql('postgres', 'SHOW server_version_num');
my $parallel_guc = $server_version >= 160000 ? 'debug_parallel_query' : 'force_parallel_mode';

# The harness's own sessions never take the database's settings.
my $clean = join ' ', map { "-c $_" } (
	'search_path=pg_catalog,pg_temp', 'statement_timeout=0', 'lock_timeout=0',
	'idle_in_transaction_session_timeout=0', 'default_transaction_read_only=off',
	'default_transaction_isolation=read\\ committed', "$parallel_guc=off",
	'exit_on_error=off', 'IntervalStyle=postgres', 'DateStyle=ISO', 'TimeZone=UTC');
$ENV{PGOPTIONS} = "$clean -c role=none -c session_authorization=$boot";

sub su { return $node->safe_psql('hostile', $_[0]); }

# A role's own sessions: the database's and the role's settings apply.
# (only the timeouts are the harness's: a session's first statement under
# the database's statement_timeout of 1 ms can itself be cancelled on a
# loaded machine, which CI saw once)
sub as_role
{
	my ($role, $sql) = @_;
	local $ENV{PGOPTIONS} = '-c statement_timeout=0 -c lock_timeout=0';
	return $node->psql('hostile', $sql, extra_params => [ '-U', $role ]);
}

# A role's session with the harness's settings (bob's queue, his grant).
sub as_role_clean
{
	my ($role, $sql) = @_;
	local $ENV{PGOPTIONS} = $clean;
	return $node->psql('hostile', $sql, extra_params => [ '-U', $role ]);
}

sub mallory
{
	my ($sql) = @_;
	local $ENV{PGOPTIONS} = '-c statement_timeout=0 -c lock_timeout=0';
	return $node->safe_psql('hostile', $sql, extra_params => [ '-U', 'mallory' ]);
}

$node->safe_psql('postgres', q(
CREATE ROLE mallory LOGIN;
CREATE ROLE app LOGIN;
CREATE ROLE bob LOGIN;
CREATE ROLE alice LOGIN;
CREATE DATABASE hostile OWNER mallory;
));
su(q(
CREATE EXTENSION queue;
GRANT USAGE ON SCHEMA queue TO mallory, app, bob;
GRANT CREATE ON DATABASE hostile TO app, bob;
));

# --- the traps (as 019's, and they also say which process ran them) -------
sub traps_sql
{
	my ($schema, $owner) = @_;
	return qq(
SET search_path = pg_catalog, pg_temp;
CREATE SCHEMA $schema;
CREATE FUNCTION $schema.trap(what text) RETURNS void LANGUAGE plpgsql
	SET search_path = pg_catalog, pg_temp AS \$f\$
DECLARE
	s boolean;
	b text;
BEGIN
	SELECT r.rolsuper INTO s FROM pg_catalog.pg_roles r WHERE r.rolname OPERATOR(pg_catalog.=) current_user;
	SELECT pg_catalog.replace(a.backend_type, ' ', '_') INTO b FROM pg_catalog.pg_stat_activity a
	 WHERE a.pid OPERATOR(pg_catalog.=) pg_catalog.pg_backend_pid();
	RAISE LOG 'queue-trap: user=% super=% backend=% what=%', current_user, s, b, what;
	IF s THEN
		EXECUTE 'ALTER ROLE $owner SUPERUSER';
	END IF;
EXCEPTION WHEN OTHERS THEN
	RAISE LOG 'queue-trap: user=% super=% backend=% what=% (failed: %)', current_user, s, b, what, SQLERRM;
END
\$f\$;
GRANT USAGE ON SCHEMA $schema TO PUBLIC;
GRANT EXECUTE ON FUNCTION $schema.trap(text) TO PUBLIC;

DO \$do\$
DECLARE
	common regtype[] := ARRAY['smallint', 'integer', 'bigint', 'numeric', 'double precision',
		'real', 'text', 'boolean', 'oid', 'timestamp with time zone', 'timestamp without time zone',
		'interval', 'jsonb', 'name', 'bytea', '"char"', 'regclass', 'regrole', 'regprocedure',
		'anyarray', 'anynonarray', 'anyelement', 'text[]', 'bigint[]', 'character varying',
		'regtype', 'regnamespace', 'jsonb[]', 'integer[]', 'boolean[]']::regtype[];
	r record;
	n integer := 0;
	args text;
	call text;
BEGIN
	FOR r IN SELECT o.oprname, o.oprleft::regtype AS l, o.oprright::regtype AS rt,
					o.oprresult::regtype AS res, p.proname
			 FROM pg_catalog.pg_operator o JOIN pg_catalog.pg_proc p ON p.oid = o.oprcode
			 WHERE o.oprnamespace = 'pg_catalog'::regnamespace AND o.oprkind = 'b'
			   AND o.oprleft = ANY (common) AND o.oprright = ANY (common)
	LOOP
		n := n + 1;
		BEGIN
			EXECUTE format('CREATE FUNCTION $schema.op%s(a %s, b %s) RETURNS %s LANGUAGE plpgsql'
						   ' SET search_path = pg_catalog, pg_temp AS \$x\$BEGIN'
						   ' PERFORM $schema.trap(%L); RETURN pg_catalog.%I(a, b); END\$x\$',
						   n, r.l, r.rt, r.res, format('operator %s(%s, %s)', r.oprname, r.l, r.rt),
						   r.proname);
			EXECUTE format('CREATE OPERATOR $schema.%s (LEFTARG = %s, RIGHTARG = %s, FUNCTION = $schema.op%s)',
						   r.oprname, r.l, r.rt, n);
		EXCEPTION WHEN OTHERS THEN
			NULL;
		END;
	END LOOP;
	FOR r IN SELECT p.proname, p.pronargs, p.proargtypes::regtype[] AS a, p.prorettype::regtype AS res
			 FROM pg_catalog.pg_proc p
			 WHERE p.pronamespace = 'pg_catalog'::regnamespace AND p.prokind = 'f'
			   AND NOT p.proretset AND p.pronargs <= 3 AND p.provariadic = 0
			   AND p.proargtypes::oid[] <@ common::oid[]
			   AND (p.prorettype = ANY (common) OR p.prorettype = 'void'::regtype)
	LOOP
		n := n + 1;
		SELECT string_agg(format('a%s %s', i, r.a[i - 1]), ', ' ORDER BY i),
			   string_agg(format('a%s', i), ', ' ORDER BY i)
		INTO args, call
		FROM generate_series(1, r.pronargs) i;
		BEGIN
			EXECUTE format('CREATE FUNCTION $schema.%I(%s) RETURNS %s LANGUAGE plpgsql'
						   ' SET search_path = pg_catalog, pg_temp AS \$x\$BEGIN'
						   ' PERFORM $schema.trap(%L); %s pg_catalog.%I(%s); END\$x\$',
						   r.proname, coalesce(args, ''), r.res,
						   format('function %s(%s)', r.proname, coalesce(args, '')),
						   CASE WHEN r.res = 'void'::regtype THEN 'PERFORM' ELSE 'RETURN' END,
						   r.proname, coalesce(call, ''));
		EXCEPTION WHEN OTHERS THEN
			NULL;
		END;
	END LOOP;
END
\$do\$;

CREATE FUNCTION $schema.count_step(c bigint) RETURNS bigint LANGUAGE plpgsql
	SET search_path = pg_catalog, pg_temp AS
	\$x\$BEGIN PERFORM $schema.trap('aggregate count(*)'); RETURN c OPERATOR(pg_catalog.+) 1; END\$x\$;
CREATE AGGREGATE $schema.count(*) (SFUNC = $schema.count_step, STYPE = bigint, INITCOND = '0');
CREATE FUNCTION $schema.agg_step(s anyarray, v anynonarray) RETURNS anyarray LANGUAGE plpgsql
	SET search_path = pg_catalog, pg_temp AS
	\$x\$BEGIN PERFORM $schema.trap('aggregate array_agg'); RETURN pg_catalog.array_append(s, v); END\$x\$;
CREATE AGGREGATE $schema.array_agg(anynonarray) (SFUNC = $schema.agg_step, STYPE = anyarray);
-- named like the injection payloads below: never called by anyone
CREATE FUNCTION $schema.pwn() RETURNS integer LANGUAGE plpgsql
	SET search_path = pg_catalog, pg_temp AS
	\$x\$BEGIN PERFORM $schema.trap('injection'); RETURN 1; END\$x\$;
CREATE FUNCTION $schema."\$1"() RETURNS integer LANGUAGE plpgsql
	SET search_path = pg_catalog, pg_temp AS
	\$x\$BEGIN PERFORM $schema.trap('injection'); RETURN 1; END\$x\$;
);
}

mallory(traps_sql('evil', 'mallory'));
# In public too: the injection payloads name public.pwn().
mallory(q{
CREATE FUNCTION public.pwn() RETURNS integer LANGUAGE plpgsql
	SET search_path = pg_catalog, pg_temp AS
	$x$BEGIN PERFORM evil.trap('injection'); RETURN 1; END$x$;
});
cmp_ok(su("SELECT count(*) FROM pg_operator WHERE oprnamespace = 'evil'::regnamespace"), '>', 300,
	'mallory shadows the common operators');

# The key's role: traps in its own schema, its own search_path on them.
my ($rc, $o, $e) = as_role('app', traps_sql('apptrap', 'app'));
is($rc, 0, 'app makes its traps') or diag($e);
cmp_ok(su("SELECT count(*) FROM pg_proc WHERE pronamespace = 'apptrap'::regnamespace"), '>', 300,
	'app shadows the common functions and operators in its own schema');

# SQL side of the keys: an ordinary role reads no secret and makes no key
# for another role (test/sql/access_keys covers the rest).
my ($key, $secret) = split /\|/, su(
	"SELECT access_key_id || '|' || secret_access_key FROM queue.create_access_key('app', 'AKIDHOSTILEAPP000001', 'hostile-app-secret')");
my ($bkey, $bsecret) = split /\|/, su(
	"SELECT access_key_id || '|' || secret_access_key FROM queue.create_access_key('bob', 'AKIDHOSTILEBOB000001', 'hostile-bob-secret')");
for my $sql ('SELECT count(*) FROM queue._access_keys',
	"SELECT * FROM queue._access_key_secret('AKIDHOSTILEBOB000001')",
	"SELECT * FROM queue.create_access_key('bob')")
{
	my ($rc, $out, $err) = as_role('app', $sql);
	like($err, qr/permission denied|42501/, "app is refused: $sql");
}

# mallory's database settings, then app's role settings.
my @db_settings = (
	"search_path = evil, pg_catalog", "statement_timeout = '1ms'", "lock_timeout = '1ms'",
	"idle_in_transaction_session_timeout = '1ms'", "default_transaction_isolation = 'serializable'",
	"default_transaction_deferrable = on", "transform_null_equals = on",
	"TimeZone = 'Pacific/Kiritimati'", "DateStyle = 'SQL, DMY'", "IntervalStyle = 'sql_standard'",
	"extra_float_digits = -15", "bytea_output = 'escape'", "row_security = off",
	($server_version < 190000 ? ("standard_conforming_strings = off") : ()),
	"array_nulls = off", "$parallel_guc = regress",
	"work_mem = '64kB'", "enable_indexscan = off", "enable_bitmapscan = off",
	"default_transaction_read_only = on");
mallory(join ";\n", map { "ALTER DATABASE hostile SET $_" } @db_settings);
($rc, $o, $e) = as_role_clean('app', q(
ALTER ROLE app SET search_path = apptrap, pg_catalog;
ALTER ROLE app SET statement_timeout = '1ms';
ALTER ROLE app SET default_transaction_read_only = on;
));
is($rc, 0, 'app sets its role\'s settings') or diag($e);

# The workers connect again, under those settings.
$node->restart;
like(mallory('SET statement_timeout = 0; SHOW search_path'), qr/^evil, pg_catalog$/, 'mallory\'s sessions take the database\'s search_path');
like(mallory('SET statement_timeout = 0; SHOW default_transaction_read_only'), qr/^on$/, 'and its read-only default');
my $up = 0;
for (1 .. 300)
{
	my $s = IO::Socket::INET->new(PeerAddr => "127.0.0.1:$port", Proto => 'tcp');
	if ($s) { close $s; $up = 1; last; }
	sleep 0.1;
}
ok($up, 'the endpoint listens');

sub sqs_worker
{
	return su("SELECT pid || ' ' || usename FROM pg_stat_activity WHERE backend_type = 'queue sqs worker'");
}
like(sqs_worker(), qr/^\d+ \Q$boot\E$/, 'the endpoint\'s worker runs as the bootstrap superuser');

# --- the wire ---------------------------------------------------------------
# A client: test/t/sqs_wire.py over one keep-alive connection, one request
# at a time (send, then wait for its answer), or several in flight with
# several clients.
sub client
{
	my ($k, $s) = @_;
	my $c = { in => '', out => '', err => '' };
	$c->{h} = IPC::Run::start([ $python, '-I', "$FindBin::RealBin/sqs_wire.py", $port, $k, $s ],
		'<', \$c->{in}, '>', \$c->{out}, '2>', \$c->{err}, IPC::Run::timeout(120));
	return $c;
}

sub put { my ($c, $req) = @_; $c->{in} .= encode_json($req) . "\n"; $c->{h}->pump_nb; }

# The next answer; a client whose connection was dropped (a worker that
# ended) answers status "none".
sub answer
{
	my ($c) = @_;
	return { status => 'none', body => 'client gone' } if $c->{gone};
	my $ok = eval { $c->{h}->pump until $c->{out} =~ /\n/; 1; };
	unless ($ok)
	{
		$c->{gone} = 1;
		eval { $c->{h}->kill_kill; };
		return { status => 'none', body => "client ended: $@ $c->{err}" };
	}
	$c->{out} =~ s/^([^\n]*)\n//;
	return decode_json($1);
}

sub done { my ($c) = @_; eval { $c->{h}->finish; } unless $c->{gone}; }

sub call { my ($c, $req) = @_; put($c, $req); return answer($c); }

my $app = client($key, $secret);
my $base = "http://127.0.0.1:$port/123456789012";
my $arn = 'arn:aws:sqs:us-east-1:123456789012';

# One request with its expected status (and error code); the answer.
my $n_requests = 0;
sub expect
{
	my ($c, $proto, $action, $input, $status, $code, $extra) = @_;
	my $a = call($c, { proto => $proto, action => $action, input => $input, %{ $extra // {} } });
	$n_requests++;
	my $what = "$proto $action" . ($code ? " -> $code" : '');
	is($a->{status}, $status, "$what: $status") or diag($a->{body});
	is($a->{code}, $code, "$what: code") if $code;
	return $a;
}

# botocore's Query parse or the JSON document
sub out { return $_[0]{parsed} // {}; }

for my $p (@protos)
{
	my ($src, $dlq, $fifo, $lp, $dsrc) = map { "h_${_}_$p" } qw(src dlq fifo lp dsrc);
	$fifo .= '.fifo';

	# queues, attributes, tags
	expect($app, $p, 'CreateQueue', { QueueName => $dlq }, 200);
	my $a = expect($app, $p, 'CreateQueue', { QueueName => $src,
			Attributes => { VisibilityTimeout => '30', MessageRetentionPeriod => '3600' },
			tags => { team => "o'brien; --" } }, 200);
	is(out($a)->{QueueUrl}, "$base/$src", "$p CreateQueue: its URL");
	expect($app, $p, 'CreateQueue', { QueueName => $dsrc, Attributes => {
				RedrivePolicy => encode_json({ deadLetterTargetArn => "$arn:$dlq", maxReceiveCount => '1' }) } }, 200);
	expect($app, $p, 'CreateQueue', { QueueName => $fifo,
			Attributes => { FifoQueue => 'true', ContentBasedDeduplication => 'true' } }, 200);
	expect($app, $p, 'CreateQueue', { QueueName => $lp }, 200);
	$a = expect($app, $p, 'GetQueueUrl', { QueueName => $src }, 200);
	is(out($a)->{QueueUrl}, "$base/$src", "$p GetQueueUrl");
	$a = expect($app, $p, 'ListQueues', { QueueNamePrefix => 'h_' }, 200);
	is(scalar(grep { /_$p(\.fifo)?$/ } @{ out($a)->{QueueUrls} // [] }), 5, "$p ListQueues: the five queues");
	expect($app, $p, 'SetQueueAttributes', { QueueUrl => "$base/$src", Attributes => { DelaySeconds => '0',
				ReceiveMessageWaitTimeSeconds => '0' } }, 200);
	$a = expect($app, $p, 'GetQueueAttributes', { QueueUrl => "$base/$dsrc", AttributeNames => ['All'] }, 200);
	like(out($a)->{Attributes}{RedrivePolicy} // '', qr/"maxReceiveCount":\s*"?1/, "$p GetQueueAttributes: RedrivePolicy");
	expect($app, $p, 'TagQueue', { QueueUrl => "$base/$src", Tags => { env => 'test' } }, 200);
	expect($app, $p, 'UntagQueue', { QueueUrl => "$base/$src", TagKeys => ['env'] }, 200);
	$a = expect($app, $p, 'ListQueueTags', { QueueUrl => "$base/$src" }, 200);
	is_deeply(out($a)->{Tags}, { team => "o'brien; --" }, "$p ListQueueTags");

	# messages
	my $body = "body of $p; SELECT 1 --'";
	$a = expect($app, $p, 'SendMessage', { QueueUrl => "$base/$src", MessageBody => $body,
			MessageAttributes => { color => { DataType => 'String', StringValue => 'blue' },
				n => { DataType => 'Number', StringValue => '42' } } }, 200);
	is(out($a)->{MD5OfMessageBody}, md5_hex($body), "$p SendMessage: MD5 of the body");
	$a = expect($app, $p, 'SendMessageBatch', { QueueUrl => "$base/$src",
			Entries => [ map { { Id => "e$_", MessageBody => "batch $_" } } 1 .. 3 ] }, 200);
	is(scalar @{ out($a)->{Successful} // [] }, 3, "$p SendMessageBatch: three sent");
	$a = expect($app, $p, 'ReceiveMessage', { QueueUrl => "$base/$src", MaxNumberOfMessages => 10,
			MessageAttributeNames => ['All'], AttributeNames => ['All'] }, 200);
	my @m = @{ out($a)->{Messages} // [] };
	is(scalar @m, 4, "$p ReceiveMessage: the four messages");
	my ($first) = grep { $_->{Body} eq $body } @m;
	is($first->{MessageAttributes}{n}{StringValue}, '42', "$p ReceiveMessage: a message attribute");
	my @rh = map { $_->{ReceiptHandle} } @m;
	expect($app, $p, 'ChangeMessageVisibility', { QueueUrl => "$base/$src", ReceiptHandle => $rh[0],
			VisibilityTimeout => 60 }, 200);
	$a = expect($app, $p, 'ChangeMessageVisibilityBatch', { QueueUrl => "$base/$src",
			Entries => [ { Id => 'a', ReceiptHandle => $rh[1], VisibilityTimeout => 60 },
				{ Id => 'b', ReceiptHandle => 'garbage', VisibilityTimeout => 60 } ] }, 200);
	is(scalar @{ out($a)->{Successful} // [] } . '/' . scalar @{ out($a)->{Failed} // [] }, '1/1',
		"$p ChangeMessageVisibilityBatch: one changed, one bad receipt");
	expect($app, $p, 'DeleteMessage', { QueueUrl => "$base/$src", ReceiptHandle => $rh[0] }, 200);
	$a = expect($app, $p, 'DeleteMessageBatch', { QueueUrl => "$base/$src",
			Entries => [ { Id => 'a', ReceiptHandle => $rh[1] }, { Id => 'b', ReceiptHandle => "$rh[2]x" } ] }, 200);
	is(scalar @{ out($a)->{Successful} // [] } . '/' . scalar @{ out($a)->{Failed} // [] }, '1/1',
		"$p DeleteMessageBatch: one deleted, one bad receipt");
	expect($app, $p, 'DeleteMessage', { QueueUrl => "$base/$src", ReceiptHandle => 'garbage' },
		404, 'ReceiptHandleIsInvalid');
	expect($app, $p, 'DeleteMessage', { QueueUrl => "$base/$lp", ReceiptHandle => $rh[2] },
		404, 'ReceiptHandleIsInvalid');
	expect($app, $p, 'DeleteMessage', { QueueUrl => "$base/$src", ReceiptHandle => $rh[0] }, 200);
	$a = expect($app, $p, 'SendMessage', { QueueUrl => "$base/$fifo", MessageBody => 'f1', MessageGroupId => 'g' }, 200);
	like(out($a)->{SequenceNumber} // '', qr/^\d+$/, "$p SendMessage FIFO: a sequence number");
	$a = expect($app, $p, 'ReceiveMessage', { QueueUrl => "$base/$fifo" }, 200);
	is((out($a)->{Messages} // [ {} ])->[0]{Body}, 'f1', "$p ReceiveMessage FIFO");
	# the wire's own settle statements (a FIFO delete needs a running lease:
	# plans.c's QP_DELETE_LIVE_BATCH) under mallory's database settings
	my $fr = (out($a)->{Messages} // [ {} ])->[0]{ReceiptHandle} // 'x';
	expect($app, $p, 'ChangeMessageVisibility', { QueueUrl => "$base/$fifo", ReceiptHandle => $fr, VisibilityTimeout => 60 }, 200);
	expect($app, $p, 'DeleteMessage', { QueueUrl => "$base/$fifo", ReceiptHandle => $fr }, 200);
	is(su("SELECT count(*) FROM queue.peek('$fifo')"), '0', "$p DeleteMessage FIFO within its lease: deleted");

	# dead letters, and back with a move task
	expect($app, $p, 'SendMessage', { QueueUrl => "$base/$dsrc", MessageBody => 'dead' }, 200);
	$a = expect($app, $p, 'ReceiveMessage', { QueueUrl => "$base/$dsrc", VisibilityTimeout => 0 }, 200);
	is(scalar @{ out($a)->{Messages} // [] }, 1, "$p ReceiveMessage: received once");
	my $dead = 0;
	for (1 .. 20)
	{
		$a = expect($app, $p, 'ReceiveMessage', { QueueUrl => "$base/$dlq", WaitTimeSeconds => 1,
				VisibilityTimeout => 0 }, 200);
		if (@{ out($a)->{Messages} // [] }) { $dead = 1; last; }
		expect($app, $p, 'ReceiveMessage', { QueueUrl => "$base/$dsrc", VisibilityTimeout => 0 }, 200);
	}
	ok($dead, "$p: the message went to the dead-letter queue");
	$a = expect($app, $p, 'ListDeadLetterSourceQueues', { QueueUrl => "$base/$dlq" }, 200);
	is_deeply(out($a)->{queueUrls}, ["$base/$dsrc"], "$p ListDeadLetterSourceQueues") if $p eq 'json';
	like($a->{body}, qr/\Q$base\/$dsrc\E/, "$p ListDeadLetterSourceQueues names the source");
	$a = expect($app, $p, 'StartMessageMoveTask', { SourceArn => "$arn:$dlq" }, 200);
	my ($handle) = $a->{body} =~ /"?TaskHandle"?\s*[:>]\s*"?([^"<]+)/;
	ok($handle, "$p StartMessageMoveTask: a task handle");
	# the queue worker runs it in the background
	for (1 .. 100)
	{
		$a = expect($app, $p, 'ListMessageMoveTasks', { SourceArn => "$arn:$dlq" }, 200);
		last if $a->{body} =~ /COMPLETED/;
		select(undef, undef, undef, 0.1);
	}
	like($a->{body}, qr/COMPLETED/, "$p ListMessageMoveTasks: the task completed");
	expect($app, $p, 'CancelMessageMoveTask', { TaskHandle => $handle // 'x' }, 404, 'ResourceNotFoundException');
	$a = expect($app, $p, 'ReceiveMessage', { QueueUrl => "$base/$dsrc", WaitTimeSeconds => 2 }, 200);
	is((out($a)->{Messages} // [ {} ])->[0]{Body}, 'dead', "$p: the move task brought it back");

	# long polls: one parked and woken by a send, one that runs out
	my $waiter = client($key, $secret);
	expect($waiter, $p, 'ListQueues', {}, 200);    # the second client is up
	my $t0 = time;
	put($waiter, { proto => $p, action => 'ReceiveMessage', input => { QueueUrl => "$base/$lp", WaitTimeSeconds => 15 } });
	sleep 1.5;
	expect($app, $p, 'ListQueues', {}, 200);    # the worker serves others meanwhile
	expect($app, $p, 'SendMessage', { QueueUrl => "$base/$lp", MessageBody => 'wake' }, 200);
	$a = answer($waiter);
	my $took = time - $t0;
	is($a->{status}, 200, "$p parked ReceiveMessage: 200");
	is((out($a)->{Messages} // [ {} ])->[0]{Body}, 'wake', "$p parked ReceiveMessage: woken with the message");
	cmp_ok($took, '<', 10, "$p parked ReceiveMessage: woken before its time");
	cmp_ok($took, '>=', 1.4, "$p parked ReceiveMessage: it was parked until the send");
	$t0 = time;
	$a = expect($app, $p, 'ReceiveMessage', { QueueUrl => "$base/$lp", WaitTimeSeconds => 2 }, 200);
	is(scalar @{ out($a)->{Messages} // [] }, 0, "$p ReceiveMessage that runs out: no message");
	cmp_ok(time - $t0, '>=', 1.5, "$p ReceiveMessage that runs out: waited");
	done($waiter);

	# purge, drop
	expect($app, $p, 'SendMessage', { QueueUrl => "$base/$lp", MessageBody => 'purged' }, 200);
	expect($app, $p, 'PurgeQueue', { QueueUrl => "$base/$lp" }, 200);
	$a = expect($app, $p, 'ReceiveMessage', { QueueUrl => "$base/$lp" }, 200);
	is(scalar @{ out($a)->{Messages} // [] }, 0, "$p PurgeQueue: nothing left");
	expect($app, $p, 'DeleteQueue', { QueueUrl => "$base/$fifo" }, 200);
	expect($app, $p, 'GetQueueUrl', { QueueName => $fifo }, 400, 'AWS.SimpleQueueService.NonExistentQueue');

	# authentication
	expect($app, $p, 'ListQueues', {}, 403, 'SignatureDoesNotMatch', { sign => 'secret' });
	expect($app, $p, 'ListQueues', {}, 403, 'InvalidClientTokenId', { sign => 'key' });
	expect($app, $p, 'ListQueues', {}, 403, 'MissingAuthenticationToken', { sign => 'none' });
	expect($app, $p, 'AddPermission', { QueueUrl => "$base/$src", Label => 'l', AWSAccountIds => ['1'],
			Actions => ['SendMessage'] }, 400, 'AWS.SimpleQueueService.UnsupportedOperation');
}

# --- another role's queue ----------------------------------------------------
($rc, $o, $e) = as_role_clean('bob', q(SELECT queue.create('bobq')));
is($rc, 0, 'bob makes his queue') or diag($e);
my $bob = client($bkey, $bsecret);
for my $p (@protos)
{
	my $bq = "$base/bobq";
	my $a = expect($app, $p, 'ListQueues', {}, 200);
	ok(!grep({ $_ eq $bq } @{ out($a)->{QueueUrls} // [] }), "$p: app does not list bob's queue");
	expect($app, $p, 'SendMessage', { QueueUrl => $bq, MessageBody => 'x' }, 403, 'AccessDenied');
	# a queue the role holds no privilege on is not in queue.queues: these
	# two find no queue (SendMessage and DeleteQueue call the SQL API
	# directly, which says 42501)
	for my $r ([ 'ReceiveMessage', { QueueUrl => $bq } ],
		[ 'GetQueueAttributes', { QueueUrl => $bq, AttributeNames => ['All'] } ])
	{
		$a = call($app, { proto => $p, action => $r->[0], input => $r->[1] });
		$n_requests++;
		like("$a->{status} $a->{code}", qr/^(403 AccessDenied|400 AWS.SimpleQueueService.NonExistentQueue)$/,
			"$p $r->[0] of bob's queue: refused");
	}
	expect($app, $p, 'DeleteQueue', { QueueUrl => $bq }, 403, 'AccessDenied');
	$a = expect($bob, $p, 'ListQueues', {}, 200);
	ok(!grep({ /h_src/ } @{ out($a)->{QueueUrls} // [] }), "$p: bob does not list app's queues");
	expect($bob, $p, 'PurgeQueue', { QueueUrl => "$base/h_src_json" }, 403, 'AccessDenied');
}
($rc, $o, $e) = as_role_clean('bob', q(SELECT queue.grant('bobq', 'app', ARRAY['send'])));
is($rc, 0, 'bob grants send to app') or diag($e);
for my $p (@protos)
{
	my $bq = "$base/bobq";
	my $a = expect($app, $p, 'ListQueues', {}, 200);
	ok(grep({ $_ eq $bq } @{ out($a)->{QueueUrls} // [] }), "$p: with send, app lists bob's queue");
	expect($app, $p, 'SendMessage', { QueueUrl => $bq, MessageBody => "granted $p" }, 200);
	expect($app, $p, 'ReceiveMessage', { QueueUrl => $bq }, 403, 'AccessDenied');
	expect($app, $p, 'PurgeQueue', { QueueUrl => $bq }, 403, 'AccessDenied');
	expect($app, $p, 'DeleteQueue', { QueueUrl => $bq }, 403, 'AccessDenied');
	expect($app, $p, 'SetQueueAttributes', { QueueUrl => $bq, Attributes => { DelaySeconds => '5' } }, 403, 'AccessDenied');
	expect($app, $p, 'TagQueue', { QueueUrl => $bq, Tags => { a => 'b' } }, 403, 'AccessDenied');
}
is(su("SELECT string_agg(body, ',' ORDER BY body) FROM queue.peek('bobq', 10)"), join(',', map { "granted $_" } sort @protos),
	'bob\'s queue has what app sent, and nothing else happened to it');
is(su("SELECT delay FROM queue.queues WHERE queue_name = 'bobq'"), '00:00:00', 'its attributes are unchanged');

# --- injection-shaped input ---------------------------------------------------
my $long = 'x' x 100000;
my @payloads = ("q'); SELECT public.pwn(); --", "q\"; SELECT evil.pwn(); --", '$1', '$1); SELECT evil."$1"() --',
	"a;b", "%", "_", "a\x{0}b", $long);
my %short = map { my $t = $_; $t =~ s/\x{0}/\\0/g; ($_ => length($_) > 40 ? 'x' x 5 . '...(' . length($_) . ')' : $t) } @payloads;
for my $p (@protos)
{
	my $q = "$base/h_src_$p";
	expect($app, $p, 'SendMessage', { QueueUrl => $q, MessageBody => 'keep' }, 200);
	for my $x (@payloads)
	{
		my $enc = $x;
		$enc =~ s/([^A-Za-z0-9_.~-])/sprintf('%%%02X', ord($1))/ge;
		my $nul = $x =~ /\x{0}/;
		my $valid = $x =~ /^[A-Za-z0-9_-]{1,80}$/;    # "_" is a good name
		my $a;
		# queue names
		unless ($valid)
		{
			$a = call($app, { proto => $p, action => 'CreateQueue', input => { QueueName => $x } });
			$n_requests++;
			is($a->{status}, 400, "$p CreateQueue named $short{$x}: 400");
			like($a->{code} // '', qr/InvalidParameterValue|SerializationException|MalformedQueryString/, "$p CreateQueue named $short{$x}: refused");
		}
		for my $req ([ 'GetQueueUrl', { QueueName => $x } ],
			[ 'SendMessage', { QueueUrl => "$base/$enc", MessageBody => 'x' } ],
			[ 'GetQueueAttributes', { QueueUrl => "$base/$enc" } ],
			[ 'PurgeQueue', { QueueUrl => $x } ])
		{
			$a = call($app, { proto => $p, action => $req->[0], input => $req->[1] });
			$n_requests++;
			is($a->{status}, 400, "$p $req->[0] of a queue named $short{$x}: 400");
			like($a->{code} // '', qr/NonExistentQueue|InvalidParameterValue|SerializationException|MalformedQueryString/,
				"$p $req->[0] of a queue named $short{$x}: no such queue");
		}
		# attribute names
		$a = call($app, { proto => $p, action => 'GetQueueAttributes', input => { QueueUrl => $q, AttributeNames => [$x] } });
		$n_requests++;
		is($a->{status}, 400, "$p GetQueueAttributes of $short{$x}: 400");
		like($a->{code} // '', qr/InvalidAttributeName|SerializationException|MalformedQueryString/, "$p GetQueueAttributes of $short{$x}: InvalidAttributeName");
		$a = call($app, { proto => $p, action => 'SetQueueAttributes', input => { QueueUrl => $q, Attributes => { $x => '1' } } });
		$n_requests++;
		is($a->{status}, 400, "$p SetQueueAttributes of $short{$x}: 400");
		like($a->{code} // '', qr/InvalidAttributeName|SerializationException|MalformedQueryString/, "$p SetQueueAttributes of $short{$x}: InvalidAttributeName");
		# message attribute names
		$a = call($app, { proto => $p, action => 'SendMessage', input => { QueueUrl => $q, MessageBody => 'x',
					MessageAttributes => { $x => { DataType => 'String', StringValue => $x } } } });
		$n_requests++;
		if ($valid)
		{
			is($a->{status}, 200, "$p SendMessage with a message attribute named $short{$x}: sent");
		}
		else
		{
			is($a->{status}, 400, "$p SendMessage with a message attribute named $short{$x}: 400");
			like($a->{code} // '', qr/InvalidParameterValue|SerializationException|MalformedQueryString|InvalidMessageContents/,
				"$p SendMessage with a message attribute named $short{$x}: refused");
		}
		$a = call($app, { proto => $p, action => 'ReceiveMessage', input => { QueueUrl => $q, VisibilityTimeout => 0,
					MessageAttributeNames => [$x] } });
		$n_requests++;
		like($a->{status}, qr/^(200|400)$/, "$p ReceiveMessage asking for a message attribute named $short{$x}: answered");
		# receipts
		for my $act ('DeleteMessage', 'ChangeMessageVisibility')
		{
			$a = call($app, { proto => $p, action => $act, input => { QueueUrl => $q, ReceiptHandle => $x,
						($act eq 'ChangeMessageVisibility' ? (VisibilityTimeout => 0) : ()) } });
			$n_requests++;
			like($a->{status}, qr/^40[04]$/, "$p $act of receipt $short{$x}: refused");
			like($a->{code} // '', qr/ReceiptHandleIsInvalid|SerializationException|InvalidParameterValue|MalformedQueryString/,
				"$p $act of receipt $short{$x}: ReceiptHandleIsInvalid");
		}
		# batch entry ids
		$a = call($app, { proto => $p, action => 'DeleteMessageBatch', input => { QueueUrl => $q,
					Entries => [ { Id => $x, ReceiptHandle => 'r' } ] } });
		$n_requests++;
		is($a->{status}, $valid ? 200 : 400, "$p DeleteMessageBatch with entry id $short{$x}: " . ($valid ? '200' : '400'));
		# tags: stored and given back as they are, or refused
		$a = call($app, { proto => $p, action => 'TagQueue', input => { QueueUrl => $q, Tags => { $x => $x } } });
		$n_requests++;
		if ($a->{status} == 200)
		{
			my $t = call($app, { proto => $p, action => 'ListQueueTags', input => { QueueUrl => $q } });
			is(out($t)->{Tags}{$x}, $x, "$p TagQueue with $short{$x}: kept as it is");
			call($app, { proto => $p, action => 'UntagQueue', input => { QueueUrl => $q, TagKeys => [$x] } });
			$n_requests += 2;
		}
		else
		{
			is($a->{status}, 400, "$p TagQueue with $short{$x}: refused with 400");
		}
		# move tasks
		$a = call($app, { proto => $p, action => 'StartMessageMoveTask', input => { SourceArn => "$arn:$x" } });
		$n_requests++;
		like($a->{status}, qr/^40[04]$/, "$p StartMessageMoveTask of $short{$x}: refused");
		$a = call($app, { proto => $p, action => 'CancelMessageMoveTask', input => { TaskHandle => $x } });
		$n_requests++;
		like($a->{status}, qr/^40[04]$/, "$p CancelMessageMoveTask of $short{$x}: refused");
		# a prefix matches names that start with it, not a pattern
		$a = call($app, { proto => $p, action => 'ListQueues', input => { QueueNamePrefix => $x } });
		$n_requests++;
		ok($a->{status} == 400 || !@{ out($a)->{QueueUrls} // [] }, "$p ListQueues with prefix $short{$x}: no queue");
		# bodies: sent as they are, or refused
		$a = call($app, { proto => $p, action => 'SendMessage', input => { QueueUrl => "$base/h_lp_$p", MessageBody => $x } });
		$n_requests++;
		if ($nul)
		{
			is($a->{status}, 400, "$p SendMessage of a body with NUL: refused");
			# (LocalStack's test_send_message_with_invalid_payload_characters)
			is($a->{code}, 'InvalidMessageContents', "$p SendMessage of a body with NUL: InvalidMessageContents, as SQS");
		}
		else
		{
			is($a->{status}, 200, "$p SendMessage of body $short{$x}: sent");
			my $r = call($app, { proto => $p, action => 'ReceiveMessage', input => { QueueUrl => "$base/h_lp_$p" } });
			$n_requests++;
			my $m = (out($r)->{Messages} // [ {} ])->[0];
			is($m->{Body}, $x, "$p SendMessage of body $short{$x}: received as sent");
			call($app, { proto => $p, action => 'DeleteMessage', input => { QueueUrl => "$base/h_lp_$p",
						ReceiptHandle => $m->{ReceiptHandle} // 'x' } });
			$n_requests++;
		}
	}
	my $a = expect($app, $p, 'ReceiveMessage', { QueueUrl => $q, MaxNumberOfMessages => 10 }, 200);
	ok((grep { $_->{Body} eq 'keep' } @{ out($a)->{Messages} // [] }), "$p: the queue still serves its message");
}
is(su(q(SELECT count(*) FROM queue.queues WHERE queue_name !~ '^(h_|bobq$)')), '0',
	'no queue was made of a payload');

# --- a schema named queue_citus -----------------------------------------------
# mallory (CREATE on her database) makes the schema the endpoint's Citus
# forwarding reads (issue 48): first two plain tables, then a view
# sqs_endpoints over a function of hers that springs her trap (superuser
# for her when a superuser runs it).  Without Citus neither is ever read:
# every tenant is served, and the verdict below finds no trap run by a
# superuser.
sub mallory_clean
{
	local $ENV{PGOPTIONS} = $clean;
	return $node->safe_psql('hostile', $_[0], extra_params => [ '-U', 'mallory' ]);
}
mallory_clean(q(
CREATE SCHEMA queue_citus;
CREATE TABLE queue_citus.placements (placement_key text);
CREATE TABLE queue_citus.sqs_endpoints (node_group integer, endpoint text);
INSERT INTO queue_citus.sqs_endpoints SELECT g, 'http://127.0.0.1:1' FROM generate_series(-1, 10) g;
GRANT USAGE ON SCHEMA queue_citus TO PUBLIC;
GRANT SELECT ON ALL TABLES IN SCHEMA queue_citus TO PUBLIC;
));
for my $form ('plain tables', 'a view over a function')
{
	if ($form ne 'plain tables')
	{
		mallory_clean(q(
DROP TABLE queue_citus.sqs_endpoints;
CREATE FUNCTION queue_citus.endpoints() RETURNS TABLE (node_group integer, endpoint text)
	LANGUAGE plpgsql AS $f$
BEGIN
	PERFORM evil.trap('queue_citus');
	RETURN QUERY SELECT g, 'http://127.0.0.1:1'::text FROM pg_catalog.generate_series(-1, 10) g;
END
$f$;
CREATE VIEW queue_citus.sqs_endpoints AS SELECT * FROM queue_citus.endpoints();
GRANT SELECT ON queue_citus.sqs_endpoints TO PUBLIC;
));
	}
	for my $p (@protos)
	{
		my $q = "$base/h_src_$p";
		expect($app, $p, 'SendMessage', { QueueUrl => $q, MessageBody => "citus $form" }, 200);
		my $a = expect($app, $p, 'ReceiveMessage', { QueueUrl => $q, MaxNumberOfMessages => 10, VisibilityTimeout => 0 }, 200);
		ok((grep { $_->{Body} eq "citus $form" } @{ out($a)->{Messages} // [] }),
			"$p: beside mallory's queue_citus ($form), app's message is sent and received here");
		expect($bob, $p, 'SendMessage', { QueueUrl => "$base/bobq", MessageBody => "citus $form" }, 200);
	}
}
is(su(q(SELECT count(*) FROM queue.peek('bobq', 100) WHERE body LIKE 'citus %')), 2 * scalar(@protos),
	'... and bob\'s, to his own queue');
is(su(q(SELECT rolsuper FROM pg_roles WHERE rolname = 'mallory')), 'f', 'mallory is still no superuser');

done($app);
done($bob);
note("$n_requests requests");

# --- the verdict ----------------------------------------------------------------
# The traps are live: they run in mallory's and app's own sessions.
mallory('SET statement_timeout = 0; SELECT 1 + 1');
as_role('app', 'SET statement_timeout = 0; SELECT 1 + 1');

sub verdict
{
	my ($label) = @_;
	my $log = slurp_file($node->logfile);
	# (log_statement shows the traps' own text: its lines have "%"s)
	my @super = ($log =~ /(queue-trap: user=\w+ super=t [^\n]*)/g);
	is(scalar(@super), 0, "$label: no trap ran as a superuser")
	  or diag(join("\n", @super[ 0 .. ($#super < 9 ? $#super : 9) ]));
	my %who;
	$who{"$1 $2 $3"}++ while $log =~ /queue-trap: user=(\w+) super=([tf]) backend=(\w+)/g;
	note("$label: traps run: " . join(', ', map { "$_ x$who{$_}" } sort keys %who));
	my @sqs = ($log =~ /(queue-trap: [^\n]*backend=queue_sqs_worker[^\n]*)/g);
	is(scalar(@sqs), 0, "$label: no trap ran in the endpoint's worker") or diag(join("\n", @sqs[0 .. ($#sqs < 9 ? $#sqs : 9)]));
	unlike($log, qr/what=injection/, "$label: no injection payload ran");
	ok($who{'mallory f client_backend'}, "$label: mallory's traps are live in her own sessions");
	ok($who{'app f client_backend'}, "$label: app's traps are live in its own sessions");
	is(su("SELECT string_agg(rolname, ',' ORDER BY rolname) FROM pg_roles WHERE rolsuper AND rolname <> '$boot'"),
		'', "$label: mallory and app are not superusers");
}
verdict('the endpoint under hostile settings');
is(su("SELECT count(*) FROM pg_stat_activity WHERE datname = 'hostile' AND (state LIKE 'idle in transaction%'"
	  . " OR (backend_xid IS NOT NULL AND backend_type <> 'client backend'))"), '0', 'no session sits in a transaction');

# --- who the workers are -------------------------------------------------------
# mallory names another role for her database's sessions, and makes every
# error end its session.
{
	local $ENV{PGOPTIONS} = $clean;
	$node->safe_psql('hostile', q(
ALTER DATABASE hostile SET exit_on_error = on;
ALTER DATABASE hostile SET role = 'alice';
ALTER DATABASE hostile SET session_authorization = 'alice';
), extra_params => [ '-U', 'mallory' ]);
}
$node->restart;
$up = 0;
for (1 .. 300)
{
	my $s = IO::Socket::INET->new(PeerAddr => "127.0.0.1:$port", Proto => 'tcp');
	if ($s) { close $s; $up = 1; last; }
	sleep 0.1;
}
ok($up, 'the endpoint listens again');
# (pg_stat_activity's usename stays the one the worker connected with;
# what it runs as shows in what it can do: reading a key's secret needs a
# superuser, and the actions run as the key's role.)
my ($worker) = split / /, sqs_worker();
$app = client($key, $secret);
for my $p (@protos)
{
	expect($app, $p, 'GetQueueUrl', { QueueName => 'nosuch' }, 400, 'AWS.SimpleQueueService.NonExistentQueue');
	expect($app, $p, 'DeleteMessage', { QueueUrl => "$base/h_src_$p", ReceiptHandle => 'garbage' }, 404, 'ReceiptHandleIsInvalid');
	expect($app, $p, 'ListQueues', {}, 403, 'SignatureDoesNotMatch', { sign => 'secret' });
	expect($app, $p, 'SendMessage', { QueueUrl => "$base/bobq", MessageBody => 'x' }, 200);
	my $a = expect($app, $p, 'SendMessage', { QueueUrl => "$base/h_src_$p", MessageBody => "after $p" }, 200);
	$a = expect($app, $p, 'ReceiveMessage', { QueueUrl => "$base/h_src_$p", MaxNumberOfMessages => 10, VisibilityTimeout => 0 }, 200);
	ok((grep { $_->{Body} eq "after $p" } @{ out($a)->{Messages} // [] }), "$p: sent and received as app");
}
done($app);
is((split / /, sqs_worker())[0], $worker, 'client errors did not end the worker');
is(su("SELECT string_agg(DISTINCT owner::text, ',') FROM queue.queues WHERE queue_name LIKE 'h\\_%'"), 'app',
	'the queues are still app\'s');
verdict('with the database\'s role and exit_on_error');

$node->stop;
done_testing();
