# Upgrades (DESIGN.md "Backup, restore and upgrades"): a database made with
# the released 1.0 (installed from its frozen script), holding standard and
# FIFO queues with messages in flight, delayed messages, dead letters,
# deduplication ids and grants to two roles, is taken to the newest version
# by ALTER EXTENSION queue UPDATE.  Every message comes through unchanged,
# every rule still holds (leases, receipts, FIFO blocking, deduplication,
# grants, owner), and the upgraded catalog equals a fresh install's.
#
# Each later version adds its step here: install the previous release,
# make state, update, check.
use strict;
use warnings;

use Digest::SHA qw(sha256_hex);
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = PostgreSQL::Test::Cluster->new('upgrade');
$node->init;
$node->append_conf('postgresql.conf', "shared_preload_libraries = 'queue'\n");
$node->start;

# 1.0 is released: its script is never edited.
my $sharedir = `pg_config --sharedir`;
chomp $sharedir;
is(sha256_hex(slurp_file("$sharedir/extension/queue--1.0.sql")),
	'2d790b81aa4f2f92c1ba65e6bc28532813380a42d8429cd76e7dc1f7b9c9896c',
	'queue--1.0.sql is the released script');
is(sha256_hex(slurp_file("$sharedir/extension/queue--1.0--1.1.sql")),
	'00d1c6057ee67a3569a54b23d87b4c9333770873b72e659fe23a01ce2726ca31',
	'queue--1.0--1.1.sql is the released step');
is(sha256_hex(slurp_file("$sharedir/extension/queue--1.1--1.2.sql")),
	'23dc61f6a63e363830f683fc3b2d825906aa4d2b7341eb1ba2e5969380ee9630',
	'queue--1.1--1.2.sql is the released step');

sub sql { return $node->safe_psql('old', $_[0]); }

$node->safe_psql('postgres', q(
CREATE DATABASE old;
CREATE DATABASE fresh;
CREATE ROLE up_owner;
CREATE ROLE up_sender;
CREATE ROLE up_receiver;
CREATE ROLE up_nobody;
));
sql(q(
CREATE EXTENSION queue VERSION '1.0';
GRANT USAGE ON SCHEMA queue TO up_owner, up_sender, up_receiver, up_nobody;
GRANT CREATE ON DATABASE old TO up_owner;
));
is(sql("SELECT extversion FROM pg_extension WHERE extname = 'queue'"), '1.0', 'installed 1.0');

# state made by 1.0's own functions (the owner creates; the superuser,
# who holds everything, sends and receives)
sql(q(
SET ROLE up_owner;
SELECT queue.create('up_dlq');
SELECT queue.create('up_std', dead_letter_queue => 'up_dlq', max_receive_count => 1,
					visibility_timeout => '1 hour', tags => '{"env": "test"}');
SELECT queue.create('up_fifo', fifo => true, content_based_deduplication => true);
SELECT queue.grant('up_std', 'up_sender', '{send}');
SELECT queue.grant('up_std', 'up_receiver', '{receive}');
SELECT queue.grant('up_fifo', 'up_sender', '{send, receive}');
RESET ROLE;
SELECT queue.send('up_std', 's-visible', attributes => '{"k": "v"}');
SELECT queue.send('up_std', 's-delayed', delay => '2 hours');
SELECT queue.send('up_std', 's-inflight', deduplication_id => 'up-dd');
SELECT queue.send('up_std', 's-dead');
SELECT queue.send_batch('up_fifo', ARRAY['f1', 'f2', 'f3'], message_group_ids => ARRAY['a', 'a', 'b']);
));
# s-visible, s-inflight and s-dead leased; s-dead's lease ended and
# received again: past max_receive_count 1, a dead letter
# (their leases end by change_visibility: a row written by hand may wait up
# to 30 s for a receive to look below the queue's ready bound)
sql(q(
CREATE TABLE up_leased AS SELECT body, receipt FROM queue.receive('up_std', 3);
));
my $receipt = sql(q(SELECT receipt FROM up_leased WHERE body = 's-inflight'));
sql(q(
SELECT queue.change_visibility('up_std', receipt, '0') FROM up_leased
WHERE body IN ('s-dead', 's-visible');
DROP TABLE up_leased;
SELECT count(*) FROM queue.receive('up_std', 10, visibility_timeout => '0');
SELECT count(*) FROM queue.receive('up_fifo', 1, visibility_timeout => '1 hour');
));
is(sql("SELECT string_agg(body, ',' ORDER BY body) FROM queue.peek('up_dlq')"), 's-dead,s-visible',
	'1.0 moved the dead letters');

my $peek = q(
SELECT string_agg(format('%s|%s|%s|%s|%s|%s|%s|%s|%s|%s|%s', q.queue_name, m.message_id, m.body,
						 m.attributes, m.message_group_id, m.deduplication_id, m.sequence_number,
						 m.receive_count, m.sent_at, m.first_received_at, m.visible_at),
				  E'\n' ORDER BY q.queue_name, m.ordinality)
FROM queue.queues q, LATERAL queue.peek(q.queue_name, 1000) WITH ORDINALITY m;
);
my $attributes = q(
SELECT string_agg(format('%s', row(q.*)), E'\n' ORDER BY q.queue_id) FROM queue.queues q;
);
my $before_peek = sql($peek);
my $before_attributes = sql($attributes);
my $before_dedup = sql(q(SELECT d.deduplication_id FROM queue_data.d2 d));

sql("ALTER EXTENSION queue UPDATE TO '1.1'");
is(sql("SELECT extversion FROM pg_extension WHERE extname = 'queue'"), '1.1', 'updated to 1.1');

# every message and attribute as it was
is(sql($peek), $before_peek, 'every message unchanged, in delivery order');
is(sql($attributes), $before_attributes, 'every queue with its attributes and owner unchanged');
is(sql("SELECT string_agg(owner::text, ',') FROM queue.queues"), 'up_owner,up_owner,up_owner',
	'the owner is a role');

# the rules still hold
is(sql("SELECT format('%s %s', message_id, duplicate) FROM queue.send('up_std', 'again', deduplication_id => 'up-dd')"),
	sql("SELECT message_id FROM queue.peek('up_std') WHERE body = 's-inflight'") . ' t',
	'a deduplication id from before the upgrade still finds its original');
is(sql("SELECT duplicate FROM queue.send('up_fifo', 'f2', message_group_id => 'a')"), 't',
	'content-based deduplication from before the upgrade');
is(sql("SELECT string_agg(body, ',') FROM queue.receive('up_std', 10)"), '',
	'in flight and delayed messages stay invisible');
is(sql("SELECT queue.delete('up_std', '$receipt')"), 't',
	'a receipt from before the upgrade deletes its message');
is(sql("SELECT string_agg(body, ',') FROM queue.receive('up_fifo', 10)"), 'f3',
	'a FIFO group in flight stays blocked; the other delivers');
is(sql("SELECT queue.redrive('up_dlq')"), '2', 'dead letters redrive');

# grants, now the message table's: each role holds what it held
sub as_role
{
	my ($role, $query) = @_;
	my ($rc, $out, $err) = $node->psql('old', "SET ROLE $role; $query");
	return $rc == 0 ? 'ok' : ($err =~ /permission denied/ ? 'denied' : $err);
}
is(as_role('up_sender', "SELECT queue.send('up_std', 'x')"), 'ok', 'sender sends');
is(as_role('up_sender', "SELECT queue.receive('up_std')"), 'denied', 'sender may not receive');
is(as_role('up_receiver', "SELECT queue.receive('up_std')"), 'ok', 'receiver receives');
is(as_role('up_receiver', "SELECT queue.send('up_std', 'x')"), 'denied', 'receiver may not send');
is(as_role('up_sender', "SELECT queue.receive('up_fifo')"), 'ok', 'FIFO grants too');
is(as_role('up_nobody', "SELECT queue.send('up_std', 'x')"), 'denied', 'others hold nothing');
is(as_role('up_owner', "SELECT queue.purge('up_fifo')"), 'ok', 'the owner manages');
is(as_role('up_nobody', "SELECT count(*) FROM queue.queues"), 'ok', 'the view answers everyone');
is($node->safe_psql('old', "SET ROLE up_nobody; SELECT count(*) FROM queue.queues"), '0',
	'and shows a role only its queues');
my ($rc, $out, $err) = $node->psql('old', 'DROP ROLE up_sender');
like($err, qr/cannot be dropped because some objects depend on it/, 'a grantee cannot be dropped');
is(sql("SELECT count(*) FROM pg_extension e, unnest(e.extconfig) c WHERE e.extname = 'queue' AND c = 'queue._secret'::regclass"),
	'0', 'the receipt key is no longer dumped');

# 1.1 -> 1.2: the queues of 1.1 keep every message and attribute
$before_peek = sql($peek);
sql("ALTER EXTENSION queue UPDATE TO '1.2'");
is(sql("SELECT extversion FROM pg_extension WHERE extname = 'queue'"), '1.2', 'updated to 1.2');
is(sql($peek), $before_peek, '1.2: every message unchanged, in delivery order');

# --- topics on upgraded queues: a queue made by 1.0 subscribes and receives
is(sql(q(
SELECT queue.create_topic('up_topic');
SELECT queue.subscribe('up_topic', 'up_dlq');
SELECT delivered FROM queue.publish('up_topic', 'via topic');
)), "1\n1\n1", 'a queue from 1.0 subscribes to a topic and gets its message');
is(sql("SELECT count(*) FROM queue.peek('up_dlq') WHERE body = 'via topic'"), '1',
	'the copy is in the upgraded queue');
sql("SELECT queue.drop_topic('up_topic')");
$before_peek = sql($peek);

# 1.2 -> 1.3: the queues gain retry_delay '0'; every message unchanged;
# create and alter take retry_delay; a rolled-back receive now counts; a
# queue made by 1.0 takes a consumer
sql("ALTER EXTENSION queue UPDATE TO '1.3'");
is(sql("SELECT extversion FROM pg_extension WHERE extname = 'queue'"), '1.3', 'updated to 1.3');
is(sql($peek), $before_peek, '1.3: every message unchanged, in delivery order');
is(sql("SELECT string_agg(queue_name || '=' || retry_delay, ',' ORDER BY queue_name) FROM queue.queues"),
	'up_dlq=00:00:00,up_fifo=00:00:00,up_std=00:00:00', 'every queue has retry_delay 0');
sql(q(
SELECT queue.alter('up_dlq', retry_delay => '1 hour');
SELECT queue.create('up_new', retry_delay => '5 s');
));
is(sql("SELECT string_agg(queue_name || '=' || retry_delay, ',' ORDER BY queue_name) FROM queue.queues WHERE queue_name IN ('up_dlq', 'up_new')"),
	'up_dlq=01:00:00,up_new=00:00:05', 'alter and create take retry_delay');
sql(q(
SELECT queue.send('up_new', 'counted');
BEGIN;
SELECT count(*) FROM queue.receive('up_new');
ROLLBACK;
));
$node->poll_query_until('old',
	"SELECT receive_count = 1 AND visible_at > now() FROM queue.peek('up_new')")
  or die 'the rolled-back receive was not counted';
pass('a rolled-back receive on the upgraded database counts and waits retry_delay');
sql("SELECT queue.drop('up_new'); SELECT queue.alter('up_dlq', retry_delay => '0')");
sql(q(
CREATE FUNCTION up_handler(msgs queue.message[]) RETURNS void LANGUAGE sql AS 'SELECT';
SELECT queue.create_consumer('up_consumer', 'up_dlq', 'up_handler(queue.message[])');
SELECT queue.pause_consumer('up_consumer');
));
is(sql("SELECT consumer_name || ' ' || queue_name || ' ' || state FROM queue.consumers"),
	'up_consumer up_dlq paused', 'a queue from 1.0 takes a consumer');

# 1.3 -> 1.3.1: roles that own a consumer or a subscription made by 1.3
# cannot be dropped any more, from this database or another; one whose
# owner 1.3 already let go (a dangling OID) does not stop the update
$node->safe_psql('postgres', q(
CREATE ROLE up_cons;
CREATE ROLE up_gone;
));
sql(q(
SELECT queue.create_topic('up_topic');
GRANT USAGE ON SCHEMA queue TO up_cons, up_gone;
SELECT queue.grant('up_dlq', r, '{receive, send}') FROM unnest(ARRAY['up_cons', 'up_gone']) r;
SELECT queue.grant_topic('up_topic', 'up_cons', '{manage}');
BEGIN;
SET ROLE up_cons;
SELECT queue.create_consumer('up_cons_c', 'up_dlq', 'up_handler(queue.message[])');
SELECT queue.pause_consumer('up_cons_c');
SELECT queue.subscribe('up_topic', 'up_dlq');
SET ROLE up_gone;
SELECT queue.create_consumer('up_gone_c', 'up_dlq', 'up_handler(queue.message[])');
SELECT queue.pause_consumer('up_gone_c');
RESET ROLE;
COMMIT;
SELECT queue.revoke('up_dlq', r, '{receive, send}') FROM unnest(ARRAY['up_cons', 'up_gone']) r;
SELECT queue.revoke_topic('up_topic', 'up_cons', '{manage}');
REVOKE USAGE ON SCHEMA queue FROM up_cons, up_gone;
));
$node->safe_psql('postgres', 'DROP ROLE up_gone');
pass('1.3 let the owner of a consumer go');

# 1.3 -> 1.3.1: a consumer made by 1.3 keeps working, with PostgreSQL's
# default search_path for its handler; new consumers keep their creator's
sql("ALTER EXTENSION queue UPDATE TO '1.3.1'");
is(sql("SELECT extversion FROM pg_extension WHERE extname = 'queue'"), '1.3.1', 'updated to 1.3.1');
is(sql($peek), $before_peek, '1.3.1: every message unchanged, in delivery order');
is(sql("SELECT consumer_name || ' ' || state || ' ' || search_path FROM queue.consumers WHERE consumer_name = 'up_consumer'"),
	'up_consumer paused "$user", public', 'the 1.3 consumer has the default search_path');
sql(q(
CREATE SCHEMA up_app;
SET search_path = up_app, public;
SELECT queue.create_consumer('up_consumer2', 'up_dlq', 'up_handler(queue.message[])');
SELECT queue.pause_consumer('up_consumer2');
RESET search_path;
));
is(sql("SELECT search_path FROM queue.consumers WHERE consumer_name = 'up_consumer2'"),
	'up_app, public', 'a consumer made by 1.3.1 keeps its creator\'s search_path');

is(sql(q(SELECT string_agg(c.relname || ' ' || x.grantee::regrole, ',' ORDER BY c.relname)
		 FROM pg_class c, aclexplode(c.relacl) x
		 WHERE c.oid IN ('queue._consumer_owners'::regclass, 'queue._subscription_owners'::regclass)
		   AND x.grantee <> c.relowner)),
	'_consumer_owners up_cons,_subscription_owners up_cons',
	'1.3.1: the owner of a consumer and a subscription holds SELECT on their tables');
is(sql(q(SELECT count(*) FROM pg_init_privs i, aclexplode(i.initprivs) x
		 WHERE i.objoid IN ('queue._consumer_owners'::regclass, 'queue._subscription_owners'::regclass)
		   AND i.classoid = 'pg_class'::regclass AND x.grantee = 'up_cons'::regrole)),
	'0', '1.3.1: those grants are not initial privileges of the extension');
for my $db ('old', 'postgres')
{
	($rc, $out, $err) = $node->psql($db, "\\set VERBOSITY verbose\nDROP ROLE up_cons");
	like($err, qr/ERROR:  2BP01: role "up_cons" cannot be dropped because some objects depend on it/,
		"1.3.1: DROP ROLE of that owner is refused in database $db");
}
like($err, qr/DETAIL:  2 objects in database old/, 'the other database counts them');
($rc, $out, $err) = $node->psql('old', 'DROP ROLE up_cons');
like($err, qr/owner of consumer "up_cons_c"\nowner of subscription of queue "up_dlq" to topic "up_topic"/,
	'their own database names them');
sql(q(
SELECT queue.drop_consumer(c) FROM unnest(ARRAY['up_cons_c', 'up_gone_c']) c;
SELECT queue.drop_topic('up_topic');
));
($rc, $out, $err) = $node->psql('postgres', 'DROP ROLE up_cons');
is($rc, 0, '1.3.1: without them the role drops');

sql(q(
SELECT queue.drop_consumer('up_consumer');
SELECT queue.drop_consumer('up_consumer2');
DROP FUNCTION up_handler(queue.message[]);
DROP SCHEMA up_app;
));
$before_peek = sql($peek);

# 1.3.1 -> 1.3.2: the SQS endpoint's access keys and long-poll hint; no
# message changes
sql("ALTER EXTENSION queue UPDATE TO '1.3.2'");
is(sql("SELECT extversion FROM pg_extension WHERE extname = 'queue'"), '1.3.2', 'updated to 1.3.2');
is(sql($peek), $before_peek, '1.3.2: every message unchanged, in delivery order');

# 1.3.2 -> 1.4: shared storage (DESIGN.md "Storage"); nothing moves: every
# queue that exists stays dedicated, with its tables and messages
my $own_tables = q(SELECT count(*) FROM pg_class
	WHERE relnamespace = 'queue_data'::regnamespace AND relname ~ '^[qdag][0-9]');
my $tables_before = sql($own_tables);
sql("ALTER EXTENSION queue UPDATE TO '1.4'");
is(sql("SELECT extversion FROM pg_extension WHERE extname = 'queue'"), '1.4', 'updated to 1.4');
is(sql($peek), $before_peek, '1.4: every message unchanged, in delivery order');
is(sql("SELECT count(*) FROM queue.queues WHERE NOT dedicated"), '0', '1.4: every queue stays dedicated');
cmp_ok($tables_before, '>', 0, '1.3.2 had dedicated tables');
is(sql($own_tables), $tables_before, '1.4: the dedicated tables are all there');
# a shared queue works beside the old ones
is(sql(q(
SELECT queue.create('up_shared', dedicated => false) > 0;
SELECT count(*) FROM queue.send('up_shared', 'after 1.4');
SELECT string_agg(body, ',') FROM queue.receive('up_shared', 10);
SELECT dedicated FROM queue.queues WHERE queue_name = 'up_shared';
SELECT queue.drop('up_shared');
)), "t\n1\nafter 1.4\nf\nt", '1.4: a shared queue works');
$before_peek = sql($peek);

# 1.4 -> 1.5: the create's checks and the shared queues' role trigger in C;
# nothing else changes.  A shared queue's owner is still held by its grant
# on queue._queue_roles, and bad input still gets 1.4's errors.
sql("ALTER EXTENSION queue UPDATE TO '1.5'");
is(sql("SELECT extversion FROM pg_extension WHERE extname = 'queue'"), '1.5', 'updated to 1.5');
is(sql($peek), $before_peek, '1.5: every message unchanged, in delivery order');
is(sql(q(
SET ROLE up_owner;
SELECT queue.create('up_shared15', dedicated => false) > 0;
RESET ROLE;
SELECT has_table_privilege('up_owner', 'queue._queue_roles', 'SELECT');
SELECT queue.drop('up_shared15');
SELECT has_table_privilege('up_owner', 'queue._queue_roles', 'SELECT');
)), "t\nt\nt\nf", '1.5: a shared queue\'s owner holds its grant while it owns one');
my ($rc15, $out15, $err15) = $node->psql('old',
	"SELECT queue.create('up_bad', retention => '30 seconds', dedicated => false)");
like($err15, qr/argument "retention" must be between 00:01:00 and 14 days/, '1.5: the interval checks\' message');


# 1.5 -> 1.6: fair queues (DESIGN.md "Fair queues").  A dedicated standard
# queue made before gets the tenants' index; messages with group ids sent
# at 1.5 are served fairly at 1.6, and the cap can be set by alter.
is(sql(q(
SELECT queue.create('up_fair', dedicated => true) > 0;
SELECT count(*) FROM generate_series(1, 5) i, queue.send('up_fair', 'a' || i, message_group_id => 'A');
SELECT count(*) FROM queue.send('up_fair', 'b1', message_group_id => 'B');
)), "t\n5\n1", '1.5: a dedicated queue with tenants');
$before_peek = sql($peek);
sql("ALTER EXTENSION queue UPDATE TO '1.6'");
is(sql("SELECT extversion FROM pg_extension WHERE extname = 'queue'"), '1.6', 'updated to 1.6');
is(sql($peek), $before_peek, '1.6: every message unchanged, in delivery order');
is(sql(q(
SELECT count(*) > 1, bool_and(EXISTS (SELECT FROM pg_class c
	WHERE c.relnamespace = 'queue_data'::regnamespace AND c.relname = 'q' || r.queue_id || '_tenant'))
FROM queue._queues r WHERE r.dedicated AND NOT r.fifo;
)), "t|t", '1.6: every dedicated standard queue has the tenants\' index');
is(sql(q(
SELECT count(*) FROM queue.send('up_fair', 'a6', message_group_id => 'A');
SELECT string_agg(body, ' ' ORDER BY body) FROM queue.receive('up_fair', 2);
SELECT queue.alter('up_fair', max_in_flight_per_group => 2);
SELECT string_agg(body, ' ' ORDER BY body) FROM queue.receive('up_fair', 10);
SELECT max_in_flight_per_group FROM queue.queues WHERE queue_name = 'up_fair';
SELECT groups FROM queue.stats WHERE queue_name = 'up_fair';
SELECT queue.drop('up_fair');
)), "1\na1 b1\n\na2\n2\n2\nt", '1.6: tenants sent at 1.5 are served fairly, and capped');
my ($rc16, $out16, $err16) = $node->psql('old',
	"SELECT queue.create('up_bad.fifo', fifo => true, max_in_flight_per_group => 2)");
like($err16, qr/argument "max_in_flight_per_group" is for standard queues/, '1.6: the cap is refused on a FIFO queue');

# 1.6 -> 1.7: message move tasks run in the background (issue 34), keyed
# by their source queue's id.  1.6's records (all COMPLETED, keyed by name)
# come through keyed by the id their source has now; a record whose source
# no longer exists is dropped, as a dropped queue's tasks are from 1.7 on.
$before_peek = sql($peek);
is(sql(q(
SELECT queue.create('up_mv_dlq') > 0;
INSERT INTO queue._move_tasks (task_handle, source_queue, destination_queue, status, moved, to_move,
	started_at, failure_reason)
VALUES ('h16', 'up_mv_dlq', NULL, 'COMPLETED', 3, 3, now() - interval '1 hour', NULL),
	   ('h16gone', 'up_mv_gone', 'up_mv_dlq', 'COMPLETED', 1, 1, now(), NULL);
SELECT count(*) FROM queue._move_tasks;
)), "t\n2", '1.6: two move task records, one of a queue that is gone');
sql("ALTER EXTENSION queue UPDATE TO '1.7'");
is(sql("SELECT extversion FROM pg_extension WHERE extname = 'queue'"), '1.7', 'updated to 1.7');
is(sql($peek), $before_peek, '1.7: every message unchanged, in delivery order');
is(sql(q(
SELECT string_agg(t.task_handle || ' ' || (t.source_queue_id = q.queue_id) || ' ' || t.status || ' ' ||
	t.moved || ' ' || t.to_move || ' ' || (t.role IS NULL) || ' ' || (t.ended_at = t.started_at), ', ')
FROM queue._move_tasks t, queue._queues q WHERE q.queue_name = 'up_mv_dlq';
SELECT count(*) FROM queue._move_tasks;
SELECT queue.drop('up_mv_dlq');
SELECT count(*) FROM queue._move_tasks;
)), "h16 true COMPLETED 3 3 true true\n1\nt\n0",
	'1.7: the record comes through keyed by its queue\'s id, the orphan is dropped, and a dropped queue takes its records');
# 1.7 also (issue 36): queue.message_uuid / queue.message_id map the
# messages kept from 1.0 to the SQS endpoint's MessageIds and back, and
# queue._sqs_attributes (the SSE attributes set over HTTP) is there, empty,
# dumped, and goes with its queue.
is(sql(q(
SELECT bool_and(queue.message_id(queue.message_uuid(m.message_id)) = m.message_id)
	AND bool_and(queue.message_uuid(m.message_id)::text LIKE '00000000-____-4000-8000-____________')
FROM (SELECT message_id FROM queue.peek('up_std') UNION ALL SELECT message_id FROM queue.peek('up_dlq')) m;
SELECT count(*) FROM queue._sqs_attributes;
SELECT count(*) FROM pg_extension e, unnest(e.extconfig) c
WHERE e.extname = 'queue' AND c = 'queue._sqs_attributes'::regclass;
SELECT queue.create('up_sse') > 0;
INSERT INTO queue._sqs_attributes SELECT queue_id, '{"SqsManagedSseEnabled": "true"}' FROM queue._queues
WHERE queue_name = 'up_sse';
SELECT queue.drop('up_sse');
SELECT count(*) FROM queue._sqs_attributes;
)), "t\n0\n1\nt\nt\n0",
	'1.7: message ids map to UUIDs and back; queue._sqs_attributes is dumped and goes with its queue');

# 1.7 -> 1.8: queues on a Citus cluster (issue 37).  Nothing changes without
# Citus: every message is there, the API works as before, the placement
# type hashes a name by its tenant key, and queue.citus_setup() says Citus
# is missing (55000) instead of doing anything.
$before_peek = sql($peek);
sql("ALTER EXTENSION queue UPDATE TO '1.8'");
is(sql("SELECT extversion FROM pg_extension WHERE extname = 'queue'"), '1.8', 'updated to 1.8');
is(sql($peek), $before_peek, '1.8: every message unchanged, in delivery order');
is(sql(q(
SELECT queue.placement_of('acme.orders') || ' ' || queue.placement_of('orders');
SELECT queue.placement_key_hash('acme.orders') = queue.placement_key_hash('acme.dlq')
	AND queue.placement_key_hash('acme') <> queue.placement_key_hash('acne');
SELECT count(*) FROM queue.citus_placement('up_std');
SELECT count(*) FROM queue.send('up_std', 'sent at 1.8');
)), "acme orders
t
0
1", '1.8: tenant keys and their hash; no placement without Citus; sends work');
($rc, $out, $err) = $node->psql('old', 'SELECT queue.citus_setup()');
like($err, qr/extension "citus" is not installed/, '1.8: queue.citus_setup() without Citus says so');
is(sql("SELECT count(*) FROM pg_namespace WHERE nspname = 'queue_citus'"), '0', '... and makes nothing');

# 1.8 -> 1.9: the shared tables' key columns keep one distinct value in
# their statistics (issue 38), so that an ANALYZE under a held snapshot
# cannot make their plans read a store's whole range.
# The same step brings the extension's own move of queues between Citus
# nodes (queue.citus_move_shard, issue 37).  Nothing changes without
# Citus: sends work, no move is recorded, and the move says Citus is
# missing (55000).
$before_peek = sql($peek);
sql("ALTER EXTENSION queue UPDATE TO '1.9'");
is(sql("SELECT extversion FROM pg_extension WHERE extname = 'queue'"), '1.9', 'updated to 1.9');
is(sql($peek), $before_peek, '1.9: every message unchanged, in delivery order');
my $key_stats = q(
SELECT string_agg(c.relname || '.' || a.attname || ' ' ||
				  (SELECT string_agg(o, ',') FROM unnest(a.attoptions) o WHERE o LIKE 'n_distinct=%'),
				  '; ' ORDER BY c.relname)
FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid
WHERE c.relnamespace = 'queue_data'::regnamespace AND c.relkind = 'r'
  AND a.attname IN ('store_id', 'queue_id') AND c.relname !~ '^[qgda][0-9]');
is(sql($key_stats), 'dedup_ids.queue_id n_distinct=1; fifo_messages.store_id n_distinct=1; '
	. 'groups.store_id n_distinct=1; messages.store_id n_distinct=1; receive_attempts.queue_id n_distinct=1',
	'1.9: the shared tables\' keys have one distinct value in their statistics');
is(sql(q(
SELECT queue.create('up_keys', dedicated => false) > 0;
SELECT count(*) FROM queue.send_batch('up_keys', ARRAY['a', 'b', 'c']);
ANALYZE queue_data.messages;
SELECT n_distinct FROM pg_stats
WHERE schemaname = 'queue_data' AND tablename = 'messages' AND attname = 'store_id';
SELECT queue.drop('up_keys');
)), "t\n3\n1\nt", '... which ANALYZE keeps');
is(sql(q(
SELECT count(*) FROM queue.send('up_std', 'sent at 1.9');
SELECT count(*) FROM queue._citus_moves;
)), "1\n0", '1.9: sends work; no move recorded');
($rc, $out, $err) = $node->psql('old', "CALL queue.citus_move_shard(1, 'localhost', 5432)");
like($err, qr/not set up for queues on Citus/, '1.9: queue.citus_move_shard without Citus says so');

# 1.9 -> 1.10: a topic moved between Citus nodes keeps its table's grants
# exactly (issue 48): queue._citus_grant_acl, which the move's target runs
# with the old node's ACL as text, gives each item by its grantor with its
# grant option (1.9 gave SELECT to up_sender without its option, and
# up_receiver's as the owner's).
$before_peek = sql($peek);
sql("ALTER EXTENSION queue UPDATE TO '1.10'");
is(sql("SELECT extversion FROM pg_extension WHERE extname = 'queue'"), '1.10', 'updated to 1.10');
is(sql($peek), $before_peek, '1.10: every message unchanged, in delivery order');
my $acl_of = sub {
	return "(SELECT string_agg(a::text, ',' ORDER BY a::text) FROM pg_class c, unnest(c.relacl) a "
	  . "WHERE c.oid = 'queue_data.$_[0]'::regclass)";
};
is(sql(q(
CREATE TABLE queue_data.up_acl_from (x integer);
CREATE TABLE queue_data.up_acl_to (x integer);
GRANT SELECT, INSERT ON queue_data.up_acl_from TO up_sender WITH GRANT OPTION;
GRANT USAGE ON SCHEMA queue_data TO up_sender;
SET ROLE up_sender;
GRANT SELECT ON queue_data.up_acl_from TO up_receiver;
RESET ROLE;
REVOKE USAGE ON SCHEMA queue_data FROM up_sender;
DO $$ BEGIN PERFORM queue._citus_grant_acl('queue_data.up_acl_to',
	(SELECT relacl::text FROM pg_class WHERE oid = 'queue_data.up_acl_from'::regclass)); END $$;
) . 'SELECT ' . $acl_of->('up_acl_from') . ' || \' \' || (' . $acl_of->('up_acl_from') . ' = ' . $acl_of->('up_acl_to')
	  . ") || ' ' || has_schema_privilege('up_sender', 'queue_data', 'USAGE');
DROP TABLE queue_data.up_acl_from, queue_data.up_acl_to;"),
	# (the owner's own item as this PostgreSQL gives it: 17 added MAINTAIN, 'm')
	sql("SELECT (acldefault('r', (SELECT oid FROM pg_roles WHERE rolname = current_user)))[1]::text")
	  . ",up_receiver=r/up_sender,up_sender=a*r*/" . sql("SELECT current_user") . ' true false',
	'1.10: the grants given again are the same, grant options and grantors too; no USAGE left lent');

# 1.10 -> 1.11: rate limits (issue 51).  The queues made before keep
# their messages and get no limit; a limit set after the update holds at
# once on the live data (the queue existed before the server started: so
# its first window after the start is closed, and the regress suite shows
# the open one).
$before_peek = sql($peek);
sql("ALTER EXTENSION queue UPDATE TO '1.11'");
is(sql("SELECT extversion FROM pg_extension WHERE extname = 'queue'"), '1.11', 'updated to 1.11');
is(sql($peek), $before_peek, '1.11: every message unchanged, in delivery order');
is(sql(q(SELECT count(*) FILTER (WHERE receive_rate_limit IS NULL AND receive_rate_limit_per_group IS NULL
	AND receive_rate_interval = '1 second') = count(*) FROM queue.queues)), 't',
	'1.11: every queue made before has no rate limit and the default interval');
is(sql(q(
SELECT queue.alter('up_std', receive_rate_limit => 2, receive_rate_interval => '1 hour');
SELECT count(*) FROM queue.send_batch('up_std', ARRAY['r1', 'r2', 'r3']);
SELECT receive_rate_limit, receive_rate_interval FROM queue.queues WHERE queue_name = 'up_std';
SELECT rate_limited >= 0 FROM queue.stats WHERE queue_name = 'up_std';
SELECT queue.alter('up_std', receive_rate_limit => 0);
SELECT receive_rate_limit IS NULL FROM queue.queues WHERE queue_name = 'up_std';
)), "\n3\n2|01:00:00\nt\n\nt", '1.11: a limit is set, shown, counted and removed on a queue made at 1.0');
my ($rc11, $out11, $err11) = $node->psql('old', "SELECT queue.alter('up_std', receive_rate_limit => -1)");
like($err11, qr/argument "receive_rate_limit" must be between 1 and 1000000000/, '1.11: a bad limit is 22023 naming it');

# 1.11 -> 1.12: priorities (issue 51).  The messages of the queues made
# before keep their order and are priority 4 (null in their column); a
# prioritised message sent after the update comes before them, a lower one
# after, on a queue made at 1.0 (a dedicated table, given the column here).
sql(q(SELECT queue.purge('up_std')));
sql(q(SELECT count(*) FROM queue.send_batch('up_std', ARRAY['old1', 'old2'])));
$before_peek = sql($peek);
sql("ALTER EXTENSION queue UPDATE TO '1.12'");
is(sql("SELECT extversion FROM pg_extension WHERE extname = 'queue'"), '1.12', 'updated to 1.12');
is(sql($peek), $before_peek, '1.12: every message unchanged, in delivery order');
is(sql(q(SELECT count(*) FILTER (WHERE default_priority = 4) = count(*) FROM queue.queues)), 't',
	'1.12: every queue made before has the default priority 4');
is(sql(q(SELECT string_agg(DISTINCT coalesce(priority::text, 'null'), ',')
	FROM queue.peek('up_std', 100))), '4', '1.12: its messages show priority 4');
is(sql(q(
SELECT count(*) FROM queue.send('up_std', 'new9', priority => 9);
SELECT count(*) FROM queue.send('up_std', 'new0', priority => 0);
SELECT string_agg(body || ':' || priority, ' ' ORDER BY o)
FROM queue.receive('up_std', 10) WITH ORDINALITY AS r(message_id, receipt, body, attributes,
	message_group_id, deduplication_id, sequence_number, receive_count, sent_at,
	first_received_at, visible_at, priority, o);
)), "1\n1\nnew9:9 old1:4 old2:4 new0:0", '1.12: a queue made at 1.0 serves by priority, its old messages at 4');
my ($rc12, $out12, $err12) = $node->psql('old', "SELECT queue.send('up_std', 'x', priority => 10)");
like($err12, qr/argument "priority" must be between 0 and 9/, '1.12: a bad priority is 22023 naming it');

# 1.12 -> 1.13: the visible_at index holds only the messages without a
# priority (issue 51).  Before the update a shared queue made at 1.12 holds
# two of its first messages (null), a prioritised one and one after it (4,
# stored); up_std (dedicated, made at 1.0) a 2, a 4 and a 9, and
# another shared one only a prioritised message.  After it both
# layouts' indexes are partial, every message is where it was, peek and
# receive give them by priority, and queue.stats sees the oldest visible
# message of each index.
sql(q(
SELECT queue.create('up_mix', dedicated => false) > 0;
SELECT count(*) FROM queue.send_batch('up_mix', ARRAY['n1', 'n2']);
SELECT count(*) FROM queue.send('up_mix', 'p8', priority => 8);
SELECT count(*) FROM queue.send('up_mix', 'n3');
SELECT queue.purge('up_std');
SELECT count(*) FROM queue.send('up_std', 'x2', priority => 2);
SELECT count(*) FROM queue.send('up_std', 'x4');
SELECT count(*) FROM queue.send('up_std', 'x9', priority => 9);
SELECT queue.create('up_sp', dedicated => false) > 0;
SELECT count(*) FROM queue.send('up_sp', 's7', priority => 7);
));
my $visible_preds = q(
SELECT string_agg(i.indexrelid::regclass::text || ' ' || coalesce(pg_get_expr(i.indpred, i.indrelid), 'all'), ', '
	ORDER BY i.indexrelid::regclass::text)
FROM pg_index i WHERE i.indexrelid IN ('queue_data.messages_visible'::regclass,
	(SELECT format('queue_data.q%s_visible', queue_id)::regclass FROM queue.queues WHERE queue_name = 'up_std')));
my $std_id = sql(q(SELECT queue_id FROM queue.queues WHERE queue_name = 'up_std'));
is(sql($visible_preds), "queue_data.messages_visible all, queue_data.q${std_id}_visible all",
	'1.12: the visible_at indexes hold every message');
$before_peek = sql($peek);
sql("ALTER EXTENSION queue UPDATE TO '1.13'");
is(sql("SELECT extversion FROM pg_extension WHERE extname = 'queue'"), '1.13', 'updated to 1.13');
is(sql($visible_preds),
	"queue_data.messages_visible (priority IS NULL), queue_data.q${std_id}_visible (priority IS NULL)",
	'1.13: the visible_at indexes hold the messages without a priority, in both layouts');
is(sql($peek), $before_peek, '1.13: every message unchanged, in delivery order');
is(sql(q(
SELECT string_agg(q, ' ' ORDER BY q) FROM (
	SELECT queue_name || ':' || (oldest_visible_age IS NOT NULL)::text AS q FROM queue.stats
	WHERE queue_name IN ('up_mix', 'up_std', 'up_sp')) s;
)), 'up_mix:true up_sp:true up_std:true',
	'1.13: queue.stats finds the oldest visible message, prioritised or not');
is(sql(q(
SELECT string_agg(body, ' ' ORDER BY o) FROM queue.peek('up_mix', 10) WITH ORDINALITY AS p(message_id, receipt, body,
	attributes, message_group_id, deduplication_id, sequence_number, receive_count, sent_at,
	first_received_at, visible_at, priority, o);
SELECT string_agg(body || ':' || priority, ' ' ORDER BY o)
FROM queue.receive('up_mix', 10) WITH ORDINALITY AS r(message_id, receipt, body, attributes,
	message_group_id, deduplication_id, sequence_number, receive_count, sent_at,
	first_received_at, visible_at, priority, o);
SELECT string_agg(body || ':' || priority, ' ' ORDER BY o)
FROM queue.receive('up_std', 10) WITH ORDINALITY AS r(message_id, receipt, body, attributes,
	message_group_id, deduplication_id, sequence_number, receive_count, sent_at,
	first_received_at, visible_at, priority, o);
SELECT string_agg(body || ':' || priority, ' ')
FROM queue.receive('up_sp', 10);
)), "p8 n1 n2 n3\np8:8 n1:4 n2:4 n3:4\nx9:9 x4:4 x2:2\ns7:7",
	'1.13: the messages of both indexes are peeked and received by priority, in both layouts');

# the upgraded catalog equals a fresh install's: pg_dump --schema-only
# (the per-queue tables aside) and every member object's definition
$node->safe_psql('fresh', q(
CREATE EXTENSION queue;
GRANT USAGE ON SCHEMA queue TO up_owner, up_sender, up_receiver, up_nobody;
));
is($node->safe_psql('fresh', "SELECT extversion FROM pg_extension WHERE extname = 'queue'"), '1.13',
	'a fresh install is 1.13');
is($node->safe_psql('fresh', $key_stats), sql($key_stats), '... with the same key statistics as the upgraded one');
sub schema_dump
{
	my ($db) = @_;
	my $dump = `pg_dump --schema-only --no-owner --exclude-table='queue_data.*' -d '@{[ $node->connstr($db) ]}'`;
	$dump =~ s/^\\(un)?restrict .*$//mg;
	$dump =~ s/^--.*$//mg;
	$dump =~ s/\b$db\b/DB/g;
	return $dump;
}
is(schema_dump('old'), schema_dump('fresh'), 'pg_dump --schema-only is the same');
my $members = q(
SELECT string_agg(d, E'\n' ORDER BY d) FROM (
	SELECT pg_describe_object(dep.classid, dep.objid, dep.objsubid) || ' ' ||
		   coalesce(CASE dep.classid
				WHEN 'pg_proc'::regclass THEN
					(SELECT pg_get_functiondef(p.oid) || coalesce(p.proacl::text, '')
					 FROM pg_proc p WHERE p.oid = dep.objid AND p.prokind <> 'a')
				WHEN 'pg_class'::regclass THEN
					(SELECT c.relkind::text || coalesce(c.relacl::text, '') || coalesce(pg_get_viewdef(c.oid), '') ||
							(SELECT string_agg(a.attname || ' ' || format_type(a.atttypid, a.atttypmod) ||
											   coalesce(' default ' || pg_get_expr(ad.adbin, ad.adrelid), ''),
											   ', ' ORDER BY a.attnum)
							 FROM pg_attribute a LEFT JOIN pg_attrdef ad ON ad.adrelid = a.attrelid AND ad.adnum = a.attnum
							 WHERE a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped)
					 FROM pg_class c WHERE c.oid = dep.objid)
				WHEN 'pg_namespace'::regclass THEN
					(SELECT coalesce(n.nspacl::text, '') FROM pg_namespace n WHERE n.oid = dep.objid)
			END, '') ||
		   coalesce(' -- ' || obj_description(dep.objid, dep.classid::regclass::name), '') AS d
	FROM pg_depend dep
	WHERE dep.refclassid = 'pg_extension'::regclass AND dep.deptype = 'e'
	  AND dep.refobjid = (SELECT oid FROM pg_extension WHERE extname = 'queue')) m;
);
my $fresh_members = $node->safe_psql('fresh', $members);
is(sql($members), $fresh_members, 'every member object is defined the same');
like($fresh_members, qr/function queue\."create"/, 'the member list is not empty');

# CREATE EXTENSION refuses a schema "queue" that a non-superuser made
# beforehand (it would own the API's schema); one a superuser made, as a
# dump's restore does, is fine
$node->safe_psql('postgres', q(
CREATE DATABASE squatted;
CREATE ROLE up_squatter;
));
$node->safe_psql('squatted', 'CREATE SCHEMA queue AUTHORIZATION up_squatter');
($rc, $out, $err) = $node->psql('squatted', 'CREATE EXTENSION queue');
like($err, qr/schema "queue" is owned by role "up_squatter", who is not a superuser/,
	'CREATE EXTENSION refuses a schema queue owned by another role');
is($node->safe_psql('squatted', "SELECT count(*) FROM pg_extension WHERE extname = 'queue'"), '0',
	'and installs nothing');
$node->safe_psql('squatted', 'DROP SCHEMA queue; CREATE SCHEMA queue; CREATE EXTENSION queue');
is($node->safe_psql('squatted', "SELECT extversion FROM pg_extension WHERE extname = 'queue'"), '1.13',
	'a schema queue that a superuser made is used');

$node->stop;
done_testing();
