# A hostile database (issue 23, DESIGN.md "Access"): nothing the extension
# runs with elevated rights can be steered by a database's, a role's or a
# session's settings, and a consumer's handler runs as its role in a
# sandbox whose settings are undone after every batch.
#
# The database's owner (mallory: LOGIN, owner of the database, USAGE on
# schema queue, nothing else) makes a schema "evil" that shadows every
# pg_catalog operator over the common types, the common functions and the
# aggregates count(*) and array_agg, each wrapper calling a trap that
# RAISEs a LOG line (which survives a rollback) and, when run by a
# superuser, makes mallory superuser.  Then ALTER DATABASE ... SET
# search_path = evil, pg_catalog, a restart, and every background path:
# sweeps of expiry, dead letters, deduplication ids, receive attempts,
# FIFO groups and topics; vacuum; rolled-back receives written by the
# worker; consumers that succeed, fail, run past their timeout, and change
# their session (search_path, statement_timeout, role, session
# authorization, temporary tables, PREPARE, LISTEN, advisory locks); again
# after a restart and on a promoted standby.  No trap may ever run as a
# superuser, and mallory stays an ordinary role.
#
# Every path runs on shared queues too (DESIGN.md "Storage": rows in
# queue_data.messages, fifo_messages, groups, dedup_ids and
# receive_attempts), beside the dedicated ones the TAP settings make by
# default: expiry, dead letters, deduplication ids, receive attempts and
# FIFO groups read from the shared tables, a topic delivering into a
# shared queue, consumers on shared queues, the vacuum of a churned shared
# table; and what only shared queues have: a purge and a drop leave their
# rows to the worker's reclaim (queue._reclaim), and the owner and
# grantees of a shared queue are held by grants on queue._queue_roles,
# which DROP ROLE refuses and DROP OWNED takes away.
use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = PostgreSQL::Test::Cluster->new('hostile');
$node->init(allows_streaming => 1);
$node->append_conf('postgresql.conf', q(
shared_preload_libraries = 'queue'
queue.sweep_interval = '100ms'
max_worker_processes = 24
queue.max_consumer_processes = 8
));
$node->start;

# The harness's own sessions never take the database's search_path.
$ENV{PGOPTIONS} = '-c search_path=pg_catalog,pg_temp';

sub su { return $node->safe_psql('hostile', $_[0]); }

# A superuser's session under the database's settings (search_path and
# the rest) but its own identity: what a superuser who connects runs.
my $boot;
sub su_hostile
{
	my ($sql) = @_;
	local $ENV{PGOPTIONS} = "-c role=none -c session_authorization=$boot";
	return $node->psql('hostile', $sql);
}

# mallory's sessions: the database's settings apply (no PGOPTIONS).
sub mallory
{
	my ($sql) = @_;
	local $ENV{PGOPTIONS} = '';
	return $node->safe_psql('hostile', $sql, extra_params => [ '-U', 'mallory' ]);
}

$node->safe_psql('postgres', q(
CREATE ROLE mallory LOGIN;
CREATE ROLE trudy;
CREATE DATABASE hostile OWNER mallory;
));
su(q(
CREATE EXTENSION queue;
GRANT USAGE ON SCHEMA queue TO mallory, trudy;
GRANT CREATE ON DATABASE hostile TO trudy;
));
$boot = su('SELECT session_user');

# --- the traps ------------------------------------------------------------
mallory(q(
SET search_path = pg_catalog, pg_temp;
CREATE SCHEMA evil;
CREATE FUNCTION evil.trap(what text) RETURNS void LANGUAGE plpgsql
	SET search_path = pg_catalog, pg_temp AS $f$
DECLARE
	s boolean;
BEGIN
	SELECT r.rolsuper INTO s FROM pg_catalog.pg_roles r WHERE r.rolname OPERATOR(pg_catalog.=) current_user;
	RAISE LOG 'queue-trap: user=% super=% what=%', current_user, s, what;
	IF s THEN
		EXECUTE 'ALTER ROLE mallory SUPERUSER';
	END IF;
EXCEPTION WHEN OTHERS THEN
	RAISE LOG 'queue-trap: user=% super=% what=% (failed: %)', current_user, s, what, SQLERRM;
END
$f$;
GRANT EXECUTE ON FUNCTION evil.trap(text) TO PUBLIC;

DO $do$
DECLARE
	common regtype[] := ARRAY['smallint', 'integer', 'bigint', 'numeric', 'double precision',
		'real', 'text', 'boolean', 'oid', 'timestamp with time zone', 'timestamp without time zone',
		'interval', 'jsonb', 'name', 'bytea', '"char"', 'regclass', 'regrole', 'regprocedure',
		'anyarray', 'anynonarray', 'anyelement', 'text[]', 'bigint[]', 'character varying',
		'regtype', 'regnamespace']::regtype[];
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
			EXECUTE format('CREATE FUNCTION evil.op%s(a %s, b %s) RETURNS %s LANGUAGE plpgsql'
						   ' SET search_path = pg_catalog, pg_temp AS $x$BEGIN'
						   ' PERFORM evil.trap(%L); RETURN pg_catalog.%I(a, b); END$x$',
						   n, r.l, r.rt, r.res, format('operator %s(%s, %s)', r.oprname, r.l, r.rt),
						   r.proname);
			EXECUTE format('CREATE OPERATOR evil.%s (LEFTARG = %s, RIGHTARG = %s, FUNCTION = evil.op%s)',
						   r.oprname, r.l, r.rt, n);
		EXCEPTION WHEN OTHERS THEN
			NULL;				-- a polymorphic combination plpgsql refuses
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
			EXECUTE format('CREATE FUNCTION evil.%I(%s) RETURNS %s LANGUAGE plpgsql'
						   ' SET search_path = pg_catalog, pg_temp AS $x$BEGIN'
						   ' PERFORM evil.trap(%L); %s pg_catalog.%I(%s); END$x$',
						   r.proname, coalesce(args, ''), r.res,
						   format('function %s(%s)', r.proname, coalesce(args, '')),
						   CASE WHEN r.res = 'void'::regtype THEN 'PERFORM' ELSE 'RETURN' END,
						   r.proname, coalesce(call, ''));
		EXCEPTION WHEN OTHERS THEN
			NULL;
		END;
	END LOOP;
END
$do$;

CREATE FUNCTION evil.count_step(c bigint) RETURNS bigint LANGUAGE plpgsql
	SET search_path = pg_catalog, pg_temp AS
	$x$BEGIN PERFORM evil.trap('aggregate count(*)'); RETURN c OPERATOR(pg_catalog.+) 1; END$x$;
CREATE AGGREGATE evil.count(*) (SFUNC = evil.count_step, STYPE = bigint, INITCOND = '0');
CREATE FUNCTION evil.agg_step(s anyarray, v anynonarray) RETURNS anyarray LANGUAGE plpgsql
	SET search_path = pg_catalog, pg_temp AS
	$x$BEGIN PERFORM evil.trap('aggregate array_agg'); RETURN pg_catalog.array_append(s, v); END$x$;
CREATE AGGREGATE evil.array_agg(anynonarray) (SFUNC = evil.agg_step, STYPE = anyarray);
));

# The traps cover what the extension's statements use.
my $shadowed = su(q(
SELECT count(*) FILTER (WHERE o.oprnamespace = 'evil'::regnamespace) FROM pg_operator o
));
cmp_ok($shadowed, '>', 300, "evil shadows $shadowed operators");
is(su(q(
SELECT string_agg(x, ',' ORDER BY x) FROM (
	SELECT DISTINCT o.oprname || '(' || o.oprleft::regtype || ',' || o.oprright::regtype || ')' AS x
	FROM pg_operator o WHERE o.oprnamespace = 'evil'::regnamespace AND (
		(o.oprname = '=' AND o.oprleft = 'bigint'::regtype AND o.oprright = 'bigint'::regtype) OR
		(o.oprname = '*' AND o.oprleft = 'numeric'::regtype AND o.oprright = 'numeric'::regtype) OR
		(o.oprname = '<' AND o.oprleft = 'timestamptz'::regtype AND o.oprright = 'timestamptz'::regtype) OR
		(o.oprname = '+' AND o.oprleft = 'timestamptz'::regtype AND o.oprright = 'interval'::regtype))
	UNION ALL
	SELECT DISTINCT p.proname FROM pg_proc p WHERE p.pronamespace = 'evil'::regnamespace
	  AND p.proname IN ('now', 'date_part', 'to_regclass', 'count', 'array_agg', 'hashtext', 'int8')) s
)), '*(numeric,numeric),+(timestamp with time zone,interval),<(timestamp with time zone,timestamp with time zone),=(bigint,bigint),array_agg,count,date_part,hashtext,int8,now,to_regclass',
	'the shadowed set includes the common operators, functions and aggregates');

# The application's side: mallory's queues, topic and consumers.
mallory(q(
SET search_path = pg_catalog, pg_temp;
CREATE SCHEMA app;
CREATE TABLE app.done (consumer text, message_id bigint);
CREATE TABLE app.attempts (what text, outcome text);
SET search_path = app, pg_catalog;
CREATE FUNCTION app.h_ok(msgs queue.message[]) RETURNS void LANGUAGE sql AS $x$
	INSERT INTO done SELECT 'ok', m.message_id FROM unnest(msgs) m
$x$;
CREATE FUNCTION app.h_fail(msgs queue.message[]) RETURNS void LANGUAGE plpgsql AS $x$
BEGIN
	RAISE EXCEPTION 'poison';
END
$x$;
CREATE FUNCTION app.h_slow(msgs queue.message[]) RETURNS void LANGUAGE plpgsql AS $x$
BEGIN
	PERFORM pg_sleep(3);
END
$x$;
-- Changes everything about its session it can; records what was refused.
CREATE FUNCTION app.h_evil(msgs queue.message[]) RETURNS void LANGUAGE plpgsql AS $x$
DECLARE
	step text;
BEGIN
	INSERT INTO done SELECT 'evil', m.message_id FROM unnest(msgs) m;
	PERFORM set_config('search_path', 'evil, pg_catalog', false);
	PERFORM pg_advisory_lock(4242);
	FOREACH step IN ARRAY ARRAY['SET ROLE postgres', 'SET SESSION AUTHORIZATION postgres',
		'SELECT set_config(''role'', ''postgres'', false)', 'CREATE TEMP TABLE t_evil (x int)',
		'PREPARE p_evil AS SELECT 1', 'LISTEN evil', 'RESET ALL',
		'SET queue.durable_receives = off', 'SET search_path = evil, pg_catalog']
	LOOP
		BEGIN
			EXECUTE step;
			INSERT INTO app.attempts VALUES (step, 'done');
		EXCEPTION WHEN OTHERS THEN
			INSERT INTO app.attempts VALUES (step, SQLSTATE);
		END;
	END LOOP;
	PERFORM set_config('statement_timeout', '1', false);
END
$x$;
SELECT queue.create('h_dlq');
SELECT queue.create('hq', retention => '1 min', dead_letter_queue => 'h_dlq', max_receive_count => 2);
SELECT queue.create('hf', fifo => true, retention => '1 min', content_based_deduplication => true);
SELECT queue.create('h_ok');
SELECT queue.create('h_fail', dead_letter_queue => 'h_dlq', max_receive_count => 2, visibility_timeout => '2 s');
SELECT queue.create('h_slow', visibility_timeout => '1 s');
SELECT queue.create('h_evil');
SELECT queue.create('hs_dlq', dedicated => false);
SELECT queue.create('hsq', retention => '1 min', dead_letter_queue => 'hs_dlq', max_receive_count => 2,
	dedicated => false);
SELECT queue.create('hsf', fifo => true, retention => '1 min', content_based_deduplication => true,
	dedicated => false);
SELECT queue.create('hs_ok', dedicated => false, max_in_flight_per_group => 2);
SELECT queue.create('hs_fail', dead_letter_queue => 'hs_dlq', max_receive_count => 2, visibility_timeout => '2 s',
	dedicated => false);
SELECT queue.create('hs_purged', dedicated => false);
SELECT queue.create('hp', dead_letter_queue => 'h_dlq', max_receive_count => 2);
SELECT queue.create('hsp', dead_letter_queue => 'hs_dlq', max_receive_count => 2, dedicated => false);
SELECT queue.grant('hsq', 'trudy', '{send,receive}');
SELECT queue.create_topic('ht');
SELECT queue.subscribe('ht', 'hq', filter_policy => '{"n": [{"numeric": [">", 1]}]}');
SELECT queue.subscribe('ht', 'hsq', filter_policy => '{"n": [{"numeric": [">", 1]}]}');
SET search_path = app, pg_catalog;
SELECT queue.create_consumer('c_ok', 'h_ok', 'app.h_ok(queue.message[])');
SELECT queue.create_consumer('c_fail', 'h_fail', 'app.h_fail(queue.message[])', retry => 'fixed');
SELECT queue.create_consumer('c_slow', 'h_slow', 'app.h_slow(queue.message[])');
SELECT queue.create_consumer('c_evil', 'h_evil', 'app.h_evil(queue.message[])');
SELECT queue.create_consumer('c_sok', 'hs_ok', 'app.h_ok(queue.message[])');
SELECT queue.create_consumer('c_sfail', 'hs_fail', 'app.h_fail(queue.message[])', retry => 'fixed');
));
is(su("SELECT string_agg(consumer_name || ':' || search_path, ' ' ORDER BY consumer_name) FROM queue.consumers"),
	'c_evil:app, pg_catalog c_fail:app, pg_catalog c_ok:app, pg_catalog c_sfail:app, pg_catalog '
	  . 'c_slow:app, pg_catalog c_sok:app, pg_catalog',
	'each consumer keeps its creator\'s search_path');
is(su(q(
SELECT string_agg(queue_name || ':' || CASE WHEN dedicated THEN 'dedicated' ELSE 'shared' END, ' '
				  ORDER BY queue_name COLLATE "C")
FROM queue.queues
)), 'h_dlq:dedicated h_evil:dedicated h_fail:dedicated h_ok:dedicated h_slow:dedicated hf:dedicated '
	  . 'hp:dedicated hq:dedicated hs_dlq:shared hs_fail:shared hs_ok:shared hs_purged:shared hsf:shared '
	  . 'hsp:shared hsq:shared',
	'the h queues have tables of their own, the hs queues are rows in the shared tables');

# The owner points the database at the traps; the worker and the consumer
# processes connect again under it.
mallory('ALTER DATABASE hostile SET search_path = evil, pg_catalog');
$node->restart;
ok($node->poll_query_until('hostile',
		"SELECT count(*) = 1 FROM pg_stat_activity WHERE backend_type = 'queue worker' AND datname = 'hostile'"),
	'the worker of the hostile database runs');
like(mallory('SHOW search_path'), qr/^evil, pg_catalog$/, 'mallory\'s sessions take the database\'s search_path');

# trudy owns a shared queue, and mallory granted her hsq: both hold her
# grant on queue._queue_roles (made in a superuser's session under the
# database's search_path, then as trudy).
my ($rc, $out, $err) = su_hostile(q(
SET ROLE trudy;
SELECT queue.create('hs_trudy', dedicated => false);
SELECT queue.send_batch('hs_trudy', ARRAY['t1', 't2']);
));
is($rc, 0, 'trudy made a shared queue') or diag($err);
my $queue_roles = q(
SELECT coalesce(string_agg(x.grantee::regrole::text, ' ' ORDER BY x.grantee::regrole::text), '')
FROM pg_class k, aclexplode(k.relacl) x
WHERE k.oid = 'queue._queue_roles'::regclass AND x.privilege_type = 'SELECT' AND x.grantee <> k.relowner
);
is(su($queue_roles), 'mallory trudy', 'the owner and the grantee of shared queues hold SELECT on queue._queue_roles');

# The key of a shared queue's rows in queue_data.messages, fifo_messages
# and groups (its id, or a new one after a purge).
sub store_of
{
	my ($name) = @_;
	return "(SELECT coalesce(store_id, queue_id) FROM queue._queues WHERE queue_name = '$name')";
}

# Every background path, driven by mallory's own calls.
sub drive
{
	my ($round) = @_;
	# (hsq's message to expire comes after its receives: received twice,
	# it would be the dead-letter queue's)
	mallory(qq(
SELECT queue.send('hq', 'expiring $round', deduplication_id => 'd$round');
SELECT queue.send('hq', 'dead $round');
SELECT queue.send('hsq', 'dead $round');
SELECT count(*) FROM queue.receive('hq', 10, visibility_timeout => '1 s', receive_attempt_id => 'a$round');
SELECT count(*) FROM queue.receive('hsq', 10, visibility_timeout => '1 s', receive_attempt_id => 'a$round');
SELECT pg_sleep(1.2);
SELECT count(*) FROM queue.receive('hq', 10, visibility_timeout => '1 s');
SELECT count(*) FROM queue.receive('hsq', 10, visibility_timeout => '1 s');
SELECT queue.send('hsq', 'expiring $round', deduplication_id => 'd$round');
SELECT queue.send('hf', 'g1 $round', message_group_id => 'g1');
SELECT queue.send('hf', 'g2 $round', message_group_id => 'g2');
SELECT count(*) FROM queue.receive('hf', 2, visibility_timeout => '1 s');
SELECT queue.send('hsf', 'g1 $round', message_group_id => 'g1');
SELECT queue.send('hsf', 'g2 $round', message_group_id => 'g2');
SELECT count(*) FROM queue.receive('hsf', 2, visibility_timeout => '1 s');
SELECT queue.send('hsf', 'expiring $round', message_group_id => 'g3');
SELECT delivered FROM queue.publish('ht', 'topic $round', attributes => '{"n": 5}');
BEGIN;
SELECT count(*) FROM queue.receive('hq', 10);
SELECT count(*) FROM queue.receive('hsq', 10);
ROLLBACK;
SELECT queue.send_batch('h_ok', ARRAY['o1 $round', 'o2 $round', 'o3 $round']);
SELECT queue.send('h_fail', 'poison $round');
SELECT queue.send_batch('hs_ok', ARRAY['o1 $round', 'o2 $round', 'o3 $round'],
	message_group_ids => ARRAY['t1', 't1', 't2']);
SELECT count(*) FROM queue.group_stats('hsq');
SELECT groups FROM queue.stats WHERE queue_name = 'hs_ok';
SELECT queue.send('hs_fail', 'poison $round');
SELECT queue.send('h_slow', 'slow $round');
SELECT queue.send_batch('h_evil', ARRAY['e1 $round', 'e2 $round']);
SELECT queue.send('h_evil', 'e3 $round');
SELECT queue.send('h_evil', 'e4 $round');
));
	# priorities (1.12) under mallory's settings: a 4 (null in round 1,
	# before the queue's first priority), a 9 and a 1; peek and the lease
	# by priority (with a dead-letter queue, the null look in round 1) run
	# under her search_path, and the receive hands out 9, 4, 1
	for my $pq ('hp', 'hsp')
	{
		is( mallory(qq(
SELECT count(*) FROM queue.send('$pq', 'plain $round');
SELECT count(*) FROM queue.send_batch('$pq', ARRAY['p9 $round', 'p1 $round'], priorities => ARRAY[9, 1]);
SELECT count(*) FROM queue.peek('$pq');
SELECT string_agg(r.body || ':' || r.priority || ':' || queue.delete('$pq', r.receipt), ' '
				  ORDER BY r.ordinality)
FROM queue.receive('$pq', 10) WITH ORDINALITY AS r;
)),
			"1\n2\n3\np9 $round:9:true plain $round:4:true p1 $round:1:true",
			"round $round: $pq hands out by priority under the database's search_path");
	}
	# expiry: the messages of hq are made older than its retention
	su(qq(
UPDATE queue_data.q@{[ su("SELECT queue_id FROM queue.queues WHERE queue_name = 'hq'") ]}
SET sent_at = now() - interval '2 minutes' WHERE body = 'expiring $round';
));
	# and on the shared queues: a message of hsq and one of hsf (the only
	# one of its group) past retention, their deduplication ids and hsq's
	# receive attempt past their windows; a reload makes the worker look
	# at every queue at once, not a retention after the sends.
	is(su(qq(
WITH m AS (UPDATE queue_data.messages SET sent_at = now() - interval '2 minutes'
		   WHERE store_id = @{[ store_of('hsq') ]} AND body = 'expiring $round' RETURNING 1),
	 f AS (UPDATE queue_data.fifo_messages SET sent_at = now() - interval '2 minutes'
		   WHERE store_id = @{[ store_of('hsf') ]} AND body = 'expiring $round' RETURNING 1),
	 d AS (UPDATE queue_data.dedup_ids SET accepted_at = now() - interval '1 hour'
		   WHERE queue_id IN (SELECT queue_id FROM queue._queues WHERE queue_name IN ('hsq', 'hsf'))
		   RETURNING queue_id),
	 a AS (UPDATE queue_data.receive_attempts SET received_at = now() - interval '1 hour'
		   WHERE queue_id = (SELECT queue_id FROM queue._queues WHERE queue_name = 'hsq') RETURNING 1)
SELECT format('%s %s %s %s', (SELECT count(*) FROM m), (SELECT count(*) FROM f),
			  (SELECT count(DISTINCT queue_id) FROM d), (SELECT count(*) FROM a))
)), '1 1 2 1', "round $round: aged a message, deduplication ids and a receive attempt in the shared tables");
	$node->reload;
	# vacuum: enough churn on h_ok and hs_ok for the worker to vacuum
	# h_ok's table and the shared one
	mallory(q(
SELECT count(*) FROM queue.send_batch('h_ok', ARRAY(SELECT 'v' || i FROM generate_series(1, 600) i));
SELECT count(*) FROM queue.send_batch('h_ok', ARRAY(SELECT 'w' || i FROM generate_series(1, 600) i));
SELECT count(*) FROM queue.send_batch('hs_ok', ARRAY(SELECT 'v' || i FROM generate_series(1, 600) i),
	message_group_ids => ARRAY(SELECT 't' || i % 100 FROM generate_series(1, 600) i));
SELECT count(*) FROM queue.send_batch('hs_ok', ARRAY(SELECT 'w' || i FROM generate_series(1, 600) i),
	message_group_ids => ARRAY(SELECT 't' || i % 100 FROM generate_series(1, 600) i));
));
	# purge and drop of shared queues return at once and leave the rows to
	# the worker: a FIFO queue with messages, groups, deduplication ids and
	# a receive attempt is dropped (its name is free for the next round),
	# a standard one purged
	mallory(qq(
SELECT queue.create('hs_gone', fifo => true, content_based_deduplication => true, dedicated => false);
SELECT count(*) FROM queue.send_batch('hs_gone', ARRAY(SELECT 'gone $round ' || i FROM generate_series(1, 40) i),
	message_group_ids => ARRAY(SELECT 'g' || i % 4 FROM generate_series(1, 40) i));
SELECT count(*) FROM queue.receive('hs_gone', 3, receive_attempt_id => 'gone$round');
SELECT count(*) FROM queue.send_batch('hs_purged', ARRAY(SELECT 'purged $round ' || i FROM generate_series(1, 300) i));
));
	my ($gone_id, $gone_store, $purged_store) = split /\|/, su(q(
SELECT format('%s|%s|%s', g.queue_id, coalesce(g.store_id, g.queue_id), coalesce(p.store_id, p.queue_id))
FROM queue._queues g, queue._queues p WHERE g.queue_name = 'hs_gone' AND p.queue_name = 'hs_purged'
));
	my $left = qq(
SELECT format('%s %s %s %s %s', (SELECT count(*) FROM queue_data.fifo_messages WHERE store_id = $gone_store),
			  (SELECT count(*) FROM queue_data.groups WHERE store_id = $gone_store),
			  (SELECT count(*) FROM queue_data.dedup_ids WHERE queue_id = $gone_id),
			  (SELECT count(*) FROM queue_data.receive_attempts WHERE queue_id = $gone_id),
			  (SELECT count(*) FROM queue_data.messages WHERE store_id = $purged_store))
);
	is(su($left), '40 4 40 1 300', "round $round: the queues to drop and to purge hold rows in the shared tables");
	is(mallory(q(
SELECT queue.drop('hs_gone');
SELECT queue.purge('hs_purged');
)), "t\n300", "round $round: mallory dropped a shared FIFO queue and purged a shared queue of 300");
	ok($node->poll_query_until('hostile',
			"SELECT NOT EXISTS (SELECT FROM queue._reclaim) AND ($left) = '0 0 0 0 0'"
			  . " AND " . store_of('hs_purged') . " <> $purged_store"),
		"round $round: the worker reclaimed the rows of the dropped and the purged queue")
	  or diag(su("SELECT * FROM queue._reclaim") . "\n" . su($left));
	# (its table, not queue.peek, which hides an expired message at once)
	ok($node->poll_query_until('hostile',
			"SELECT NOT EXISTS (SELECT FROM queue_data.q"
			  . su("SELECT queue_id FROM queue.queues WHERE queue_name = 'hq'")
			  . " WHERE body = 'expiring $round')"),
		"round $round: the worker expired a message");
	ok($node->poll_query_until('hostile', qq(
SELECT NOT EXISTS (SELECT FROM queue_data.messages WHERE body = 'expiring $round')
   AND NOT EXISTS (SELECT FROM queue_data.fifo_messages WHERE body = 'expiring $round')
   AND NOT EXISTS (SELECT FROM queue_data.dedup_ids WHERE accepted_at < now() - interval '30 minutes')
   AND NOT EXISTS (SELECT FROM queue_data.receive_attempts WHERE received_at < now() - interval '30 minutes')
)), "round $round: the worker expired a message of each shared queue, their deduplication ids and receive attempt");
	# (received once, in the transaction that rolled back)
	ok($node->poll_query_until('hostile',
			"SELECT receive_count = 1 FROM queue_data.messages"
			  . " WHERE store_id = @{[ store_of('hsq') ]} AND body = 'topic $round'"),
		"round $round: the topic delivered into the shared queue, and the worker wrote the receive that rolled back");
	ok($node->poll_query_until('hostile',
			"SELECT count(*) >= 1 FROM queue.peek('h_dlq', 1000) WHERE body = 'poison $round'"),
		"round $round: a failing consumer's message reached the dead-letter queue");
	ok($node->poll_query_until('hostile',
			"SELECT count(*) >= 1 FROM queue.peek('hs_dlq', 1000) WHERE body = 'poison $round'"),
		"round $round: a failing consumer's message reached the shared dead-letter queue");
	ok($node->poll_query_until('hostile',
			"SELECT count(*) = 4 FROM app.done WHERE consumer = 'evil'"
			  . " AND (SELECT count(*) FROM queue.peek('h_evil', 100)) = 0"),
		"round $round: the session-changing handler handled its four messages, batch after batch")
	  or diag(su("SELECT * FROM queue.consumers"));
	ok($node->poll_query_until('hostile',
			"SELECT count(*) = 0 FROM queue.peek('h_ok', 2000)"),
		"round $round: the healthy consumer drained its queue");
	ok($node->poll_query_until('hostile',
			"SELECT NOT EXISTS (SELECT FROM queue_data.messages WHERE store_id = @{[ store_of('hs_ok') ]})"),
		"round $round: the healthy consumer of a shared queue handled and deleted its messages");
	ok($node->poll_query_until('hostile',
			"SELECT last_error LIKE '57014:%' FROM queue.consumers WHERE consumer_name = 'c_slow'"),
		"round $round: the slow handler was cancelled at its visibility timeout");
	su("DELETE FROM app.done WHERE consumer = 'evil'");
}

drive(1);
ok($node->poll_query_until('hostile',
		"SELECT vacuum_count > 0 FROM pg_stat_all_tables WHERE schemaname = 'queue_data'"
		  . " AND relname = 'q' || (SELECT queue_id FROM queue.queues WHERE queue_name = 'h_ok')"),
	'the worker vacuumed a churned queue');
ok($node->poll_query_until('hostile',
		"SELECT vacuum_count > 0 FROM pg_stat_all_tables WHERE relid = 'queue_data.messages'::regclass"),
	'the worker vacuumed the churned shared message table');
ok($node->poll_query_until('hostile',
		"SELECT count(*) >= 1 FROM queue.peek('h_dlq', 1000) WHERE body = 'dead 1'"),
	'the worker moved a message received max_receive_count times to the dead-letter queue');
ok($node->poll_query_until('hostile',
		"SELECT count(*) >= 1 FROM queue.peek('hs_dlq', 1000) WHERE body = 'dead 1'"),
	'... and one of a shared queue to the shared dead-letter queue');

# What the session-changing handler was refused, and what it could do but
# did not keep.
is(su("SELECT string_agg(DISTINCT what || '=' || outcome, '; ' ORDER BY what || '=' || outcome) FROM app.attempts"),
	'CREATE TEMP TABLE t_evil (x int)=42501; LISTEN evil=42501; PREPARE p_evil AS SELECT 1=42501; '
	  . 'RESET ALL=done; SELECT set_config(\'role\', \'postgres\', false)=42501; SET ROLE postgres=42501; '
	  . 'SET SESSION AUTHORIZATION postgres=42501; SET queue.durable_receives = off=done; '
	  . 'SET search_path = evil, pg_catalog=done',
	'the handler could not change role, make temporary objects, PREPARE or LISTEN');
is(su("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND objid = 4242 AND granted"), '0',
	'the handler\'s session advisory lock did not outlive its batch');
is(su("SELECT failed FROM queue.consumers WHERE consumer_name = 'c_evil'"), '0',
	'its statement_timeout of 1 ms did not outlive its batch either');

# The owner also names who a superuser's session of her database becomes
# (session_authorization, role: PostgreSQL applies them when the worker and
# the consumer processes connect) and makes every error end a process
# (exit_on_error).  They take their own identity back, and keep working.
$boot = su('SELECT session_user');
$ENV{PGOPTIONS} = "-c search_path=pg_catalog,pg_temp -c role=none -c session_authorization=$boot -c exit_on_error=off";
mallory(q(
ALTER DATABASE hostile SET exit_on_error = on;
ALTER DATABASE hostile SET role = 'mallory';
ALTER DATABASE hostile SET session_authorization = 'mallory';
));
is(mallory('SELECT current_user'), 'mallory', 'the database\'s role setting applies to sessions');

# Again after a restart, and on a promoted standby.
$node->restart;
ok($node->poll_query_until('hostile',
		"SELECT count(*) = 1 FROM pg_stat_activity WHERE backend_type = 'queue worker' AND datname = 'hostile'"),
	'the worker runs again after a restart');
drive(2);

$node->backup('b');
my $standby = PostgreSQL::Test::Cluster->new('hostile_standby');
$standby->init_from_backup($node, 'b', has_streaming => 1);
$standby->start;
$node->wait_for_catchup($standby);
$node->stop;
$standby->promote;
$node = $standby;
ok($node->poll_query_until('hostile',
		"SELECT count(*) = 1 FROM pg_stat_activity WHERE backend_type = 'queue worker' AND datname = 'hostile'"),
	'the promoted standby runs the worker');
drive(3);

# The role hooks under the same settings: a superuser's DROP ROLE in this
# database (the hook reads the registries as the tables' owner) and
# mallory's own DROP OWNED (the event trigger drops her consumers,
# subscriptions and shared queues as the tables' owner, and the trigger on
# the registry takes back the grants on queue._queue_roles).
{
	local $ENV{PGOPTIONS} = '';
	my ($rc, $out, $err) = $node->psql('hostile', 'DROP ROLE mallory');
	like($err, qr/role "mallory" cannot be dropped.*\n.*owner of consumer "c_evil"/s,
		'DROP ROLE of the owner of consumers is refused, naming them, under the database\'s search_path');
	like($err, qr/\n\s*owner of queue "hsq"\n/, '... and her shared queues');
}
($rc, $out, $err) = su_hostile('DROP ROLE trudy');
like($err, qr/role "trudy" cannot be dropped.*\n(DETAIL:\s+)?owner of queue "hs_trudy"\nprivileges for queue "hsq"\n/s,
	'a superuser\'s DROP ROLE of the owner of a shared queue and grantee of another is refused, naming them');
($rc, $out, $err) = su_hostile('DROP OWNED BY trudy');
is($rc, 0, 'a superuser\'s DROP OWNED BY trudy under the database\'s settings') or diag($err);
is(su(q(
SELECT format('%s %s', (SELECT count(*) FROM queue.queues WHERE queue_name = 'hs_trudy'),
			  (SELECT send_roles::text || receive_roles::text FROM queue._queues WHERE queue_name = 'hsq'))
)), '0 {}{}', 'it dropped her shared queue and her grants on mallory\'s');
is(su($queue_roles), 'mallory', 'the trigger took back trudy\'s grant on queue._queue_roles');
su('DROP ROLE trudy');
mallory('DROP OWNED BY mallory');
is(su('SELECT count(*) FROM queue.consumers'), '0', 'mallory\'s DROP OWNED dropped her consumers');
is(su('SELECT count(*) FROM queue.queues WHERE NOT dedicated'), '0', '... and her shared queues');
is(su($queue_roles), '', 'the trigger took back mallory\'s grant on queue._queue_roles');
ok($node->poll_query_until('hostile', q(
SELECT NOT EXISTS (SELECT FROM queue._reclaim) AND NOT EXISTS (SELECT FROM queue_data.messages)
   AND NOT EXISTS (SELECT FROM queue_data.fifo_messages) AND NOT EXISTS (SELECT FROM queue_data.groups)
   AND NOT EXISTS (SELECT FROM queue_data.dedup_ids) AND NOT EXISTS (SELECT FROM queue_data.receive_attempts)
)), 'the worker reclaimed every row of the shared queues DROP OWNED dropped');

# The verdict: over every log of both servers, no trap ran as a superuser,
# and mallory is still an ordinary role; the traps did run in mallory's
# own sessions, so they were live.
my $log = slurp_file($standby->logfile);
my $primary_log = '';
foreach my $f (glob("$PostgreSQL::Test::Utils::log_path/*hostile.log"))
{
	$primary_log .= slurp_file($f);
}
$log .= $primary_log;
my @super = ($log =~ /(queue-trap: user=\S+ super=t [^\n]*)/g);
is(scalar(@super), 0, 'no trap ran as a superuser')
  or diag(join("\n", @super[ 0 .. ($#super < 9 ? $#super : 9) ]));
my @ordinary = ($log =~ /queue-trap: user=mallory super=f/g);
cmp_ok(scalar(@ordinary), '>', 0, 'the traps ran in mallory\'s own sessions and handlers');
is(su("SELECT rolsuper FROM pg_roles WHERE rolname = 'mallory'"), 'f', 'mallory is not a superuser');

$node->stop;
done_testing();
