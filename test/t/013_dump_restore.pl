# Dump and restore (DESIGN.md "Backup, restore and upgrades"): a database
# with standard, FIFO and dead-letter queues, messages in every state,
# deduplication ids and grants to two roles is dumped with pg_dump, restored
# with pg_restore into a fresh database of another cluster (whose OIDs
# differ: it made other tables first) and with psql into a second one, and
# the whole API is driven there: the same messages in the same order, the
# same ids, new ids above the old ones, duplicates still found, grants by
# role name, roles that cannot be dropped while they hold grants, and a
# receipt key that is not in the dump (the restored copy has its own).
# Access keys of the SQS endpoint (1.3.2) are not dumped at all: their
# secrets are encrypted under that receipt key; they are made again.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $src = PostgreSQL::Test::Cluster->new('dump_source');
$src->init;
$src->append_conf('postgresql.conf', "shared_preload_libraries = 'queue'\n");
$src->start;

my $roles = q(
CREATE ROLE app_sender LOGIN;
CREATE ROLE app_receiver LOGIN;
CREATE ROLE app_worker LOGIN;
CREATE ROLE app_keys LOGIN;
);
$src->safe_psql('postgres', $roles . q(
CREATE DATABASE shop;
));
$src->safe_psql('shop', q(
CREATE EXTENSION queue;
GRANT USAGE ON SCHEMA queue TO app_sender, app_receiver;
SELECT queue.create('orders_dlq');
SELECT queue.create('orders', dead_letter_queue => 'orders_dlq', max_receive_count => 1,
					retry_delay => '30 s', tags => '{"team": "shop"}');
SELECT queue.create('events.fifo', fifo => true, content_based_deduplication => true);
SELECT queue.create('events_dlq.fifo', fifo => true);
SELECT queue.alter('events.fifo', dead_letter_queue => 'events_dlq.fifo', max_receive_count => 2);
SELECT queue.grant('orders', 'app_sender', '{send}');
SELECT queue.grant('orders', 'app_receiver', '{receive}');
SELECT queue.grant('events.fifo', 'app_sender', '{send}');

-- standard: visible, delayed, in flight, deduplicated, dead-lettered
SELECT queue.send('orders', 'o-visible', attributes => '{"n": 1}');
SELECT queue.send('orders', 'o-delayed', delay => '1 hour');
SELECT queue.send('orders', 'o-inflight', deduplication_id => 'dd-1');
SELECT queue.send('orders', 'o-dead');
SELECT queue.send('orders', 'o-visible-2');
));
# lease o-visible, o-inflight and o-dead for an hour; then end o-dead's
# lease and receive again: past max_receive_count 1 o-dead moves to the
# dead letters, and o-visible-2 is leased
# (the lease is ended by change_visibility: a row written by hand may wait
# up to 30 s for a receive to look below the queue's ready bound)
$src->safe_psql('shop', q(
CREATE TEMP TABLE leased AS
	SELECT body, receipt FROM queue.receive('orders', 3, visibility_timeout => '1 hour');
SELECT queue.change_visibility('orders', receipt, '0') FROM leased WHERE body = 'o-dead';
SELECT count(*) FROM queue.receive('orders', 10, visibility_timeout => '1 hour');
SELECT queue.send('orders', 'o-receipt');
));
$src->safe_psql('shop', q(
-- FIFO: two groups, one with a message in flight
SELECT queue.send_batch('events.fifo', ARRAY['e1', 'e2', 'e3'], message_group_ids => ARRAY['a', 'a', 'b']);
SELECT queue.send('events.fifo', 'e4', message_group_id => 'b', deduplication_id => 'ev-4');
SELECT count(*) FROM queue.receive('events.fifo', 1, visibility_timeout => '1 hour');
-- fair (1.6): tenants of a standard queue, with a cap
SELECT queue.create('tenants', max_in_flight_per_group => 2);
SELECT count(*) FROM queue.send_batch('tenants', ARRAY['t1', 't2', 't3', 't4'],
	message_group_ids => ARRAY['a', 'a', 'a', 'b']);
));

# --- topics (1.2): a standard topic with a filtered subscription, a FIFO
# topic with a live deduplication id, a publish grant by role name
$src->safe_psql('shop', q(
SELECT queue.create('news_q', receive_rate_limit => 40, receive_rate_limit_per_group => 4,
	receive_rate_interval => '90 seconds');
-- priorities (1.12): a default of 6, messages of 2, 9 and the default
SELECT queue.create('ranked', default_priority => 6);
SELECT count(*) FROM queue.send('ranked', 'r2', priority => 2);
SELECT count(*) FROM queue.send('ranked', 'r9', priority => 9);
SELECT count(*) FROM queue.send('ranked', 'r6');
SELECT queue.create('news.fifo', fifo => true);
SELECT queue.create_topic('news', tags => '{"team": "shop"}');
SELECT queue.create_topic('news_ordered', fifo => true);
SELECT queue.subscribe('news', 'news_q', filter_tags => '{eu}', filter_policy => '{"kind": ["sale"]}');
SELECT queue.subscribe('news_ordered', 'news.fifo');
SELECT queue.grant_topic('news', 'app_sender', '{publish}');
SELECT queue.publish('news', 'n1', tags => '{eu}', attributes => '{"kind": "sale"}');
SELECT queue.publish('news_ordered', 'nf1', message_group_id => 'g', deduplication_id => 'tp-1');
));
my $topics = q(
SELECT string_agg(format('%s %s %s %s', t.topic_name, t.fifo, t.tags, t.owner), E'\n' ORDER BY t.topic_id)
	|| E'\n' || (SELECT string_agg(format('%s %s %s %s %s %s', s.topic_name, s.queue_name, s.subscription_id,
					  s.filter_tags, s.binding_keys, s.filter_policy), E'\n' ORDER BY s.subscription_id)
				  FROM queue.subscriptions s)
	|| E'\n' || (SELECT string_agg(format('%s %s %s', tt.topic_name, a.grantee::regrole, a.privilege_type), E'\n' ORDER BY 1)
				  FROM queue.topics tt
				  JOIN pg_class c ON c.relnamespace = 'queue_data'::regnamespace AND c.relname = 't' || tt.topic_id,
				  LATERAL aclexplode(c.relacl) a WHERE a.grantee <> c.relowner)
FROM queue.topics t;
);
my $src_topics = $src->safe_psql('shop', $topics);
like($src_topics, qr/news_ordered news\.fifo/, 'source has the subscriptions');
my $max_sub = $src->safe_psql('shop', 'SELECT max(subscription_id) FROM queue._subscriptions');
my $nf1_id = $src->safe_psql('shop', "SELECT message_id FROM queue.publish('news_ordered', 'nf1 again', message_group_id => 'g', deduplication_id => 'tp-1')");

# --- the SQS endpoint's queue attributes (1.7): kept by queue id
$src->safe_psql('shop', q(
INSERT INTO queue._sqs_attributes SELECT queue_id, '{"SqsManagedSseEnabled": "true", "KmsMasterKeyId": "alias/aws/sqs"}'
FROM queue._queues WHERE queue_name = 'orders'));
my $sqs_attrs = q(SELECT q.queue_name || ' ' || a.attributes::text FROM queue._sqs_attributes a
	JOIN queue._queues q USING (queue_id));

# --- consumers (1.3): two paused consumers, one of a role by name, with a
# handler in public; paused in the transaction that creates them, so
# neither touches a message before the dump
$src->safe_psql('shop', q(
CREATE TABLE public.handled (body text);
CREATE FUNCTION public.handle(msgs queue.message[]) RETURNS void LANGUAGE sql AS $$
	INSERT INTO public.handled SELECT m.body FROM pg_catalog.unnest(msgs) m
$$;
GRANT INSERT ON public.handled TO app_receiver;
BEGIN;
SELECT queue.create_consumer('c_news', 'news_q', 'public.handle(queue.message[])', batch_size => 5, retry => 'fixed');
SELECT queue.pause_consumer('c_news');
SET ROLE app_receiver;
SELECT queue.create_consumer('c_orders', 'orders', 'public.handle(queue.message[])', concurrency => 2);
SELECT queue.pause_consumer('c_orders');
RESET ROLE;
COMMIT;
));
# app_worker owns a consumer and nothing else: its grants are gone, so only
# the consumer keeps DROP ROLE from dropping it (1.3.1)
$src->safe_psql('shop', q(
GRANT USAGE ON SCHEMA queue TO app_worker;
SELECT queue.grant('news_q', 'app_worker', '{receive}');
BEGIN;
SET ROLE app_worker;
SELECT queue.create_consumer('c_worker', 'news_q', 'public.handle(queue.message[])');
SELECT queue.pause_consumer('c_worker');
RESET ROLE;
COMMIT;
SELECT queue.revoke('news_q', 'app_worker', '{receive}');
REVOKE USAGE ON SCHEMA queue FROM app_worker;
));
# roles are cluster-wide: refused from the postgres database too
sub drop_role_refused
{
	my ($node, $db, $role, $what) = @_;
	my ($rc, $out, $err) = $node->psql($db, "\\set VERBOSITY verbose\nDROP ROLE $role");
	like($err, qr/ERROR:  2BP01: role "$role" cannot be dropped because some objects depend on it/,
		"$what: DROP ROLE $role in database $db is refused");
	return $err;
}
like(drop_role_refused($src, 'postgres', 'app_worker', 'consumers'),
	qr/DETAIL:  1 object in database shop/, 'consumers: and counts the consumer\'s grant in shop');
like(drop_role_refused($src, 'shop', 'app_worker', 'consumers'),
	qr/DETAIL:  owner of consumer "c_worker"/, 'consumers: which shop names');
my $consumers = q(
SELECT string_agg(format('%s %s %s %s %s %s %s', consumer_name, queue_name, handler, role, batch_size,
						 concurrency, state), E'\n' ORDER BY consumer_name)
FROM queue.consumers;
);
my $src_consumers = $src->safe_psql('shop', $consumers);
like($src_consumers, qr/c_orders orders handle\(queue\.message\[\]\) app_receiver 1 2 paused/,
	'consumers: the source has them');
my $max_consumer = $src->safe_psql('shop', 'SELECT max(consumer_id) FROM queue._consumers');
# --- end of consumers (1.3)

# --- access keys (1.3.2): a given pair and a generated one, of a role that
# holds nothing else, which therefore cannot be dropped
my $ak_id     = 'AKIADUMPTEST0000001';
my $ak_secret = 'dumpSecret/0123456789+abcdefghijklmnopqr';
$src->safe_psql('shop',
	"SELECT queue.create_access_key('app_keys', '$ak_id', '$ak_secret')");
my ($ak_gen_id, $ak_gen_secret) = split /\|/,
  $src->safe_psql('shop', "SELECT access_key_id, secret_access_key FROM queue.create_access_key('app_keys')");
like($ak_gen_id, qr/^AKIA[A-Z2-7]{16}$/, 'access keys: one generated');
like(drop_role_refused($src, 'postgres', 'app_keys', 'access keys'),
	qr/DETAIL:  1 object in database shop/, 'access keys: the holder\'s grant counts in shop');
# --- end of access keys (1.3.2)

# What must come back: every message of every queue as peek sees it, the
# registry, the grants, and the ids in use.
my $peek = q(
SELECT string_agg(format('%s|%s|%s|%s|%s|%s|%s|%s|%s|%s', q.queue_name, m.message_id, m.body,
						 m.attributes, m.message_group_id, m.deduplication_id, m.sequence_number,
						 m.receive_count, m.sent_at, m.visible_at), E'\n' ORDER BY q.queue_name)
FROM queue.queues q, LATERAL queue.peek(q.queue_name, 1000) m;
);
my $queues = q(
SELECT string_agg(format('%s', row(q.*)), E'\n' ORDER BY q.queue_id) FROM queue.queues q;
);
my $grants = q(
SELECT string_agg(format('%s %s %s', q.queue_name, a.grantee::regrole, a.privilege_type), E'\n'
				  ORDER BY 1, 2, 3)
FROM queue.queues q
JOIN pg_class c ON c.relnamespace = 'queue_data'::regnamespace AND c.relname = 'q' || q.queue_id,
LATERAL aclexplode(c.relacl) a WHERE a.grantee <> c.relowner;
);
my $src_peek   = $src->safe_psql('shop', $peek);
my $src_queues = $src->safe_psql('shop', $queues);
my $src_grants = $src->safe_psql('shop', $grants);
my $max_id = $src->safe_psql('shop', 'SELECT last_value FROM queue_data.message_id_seq');
my $max_queue = $src->safe_psql('shop', 'SELECT max(queue_id) FROM queue._queues');
my $key = $src->safe_psql('shop', "SELECT encode(key, 'hex') FROM queue._secret");
my $receipt = $src->safe_psql('shop',
	"SELECT receipt FROM queue.receive('orders', 1, visibility_timeout => '1 hour')");
ok($src_peek =~ /o-delayed/ && $src_peek =~ /e4/, 'source holds the messages');
is($src->safe_psql('shop', 'SELECT count(*) FROM queue.peek(\'orders_dlq\')'), '1',
	'source has a dead letter');
$src_peek = $src->safe_psql('shop', $peek);    # after that receive

# the dumps
my $tmp = PostgreSQL::Test::Utils::tempdir;
$src->command_ok([ 'pg_dump', '-Fc', '-d', $src->connstr('shop'), '-f', "$tmp/shop.dump" ],
	'pg_dump -Fc');
$src->command_ok([ 'pg_dump', '-d', $src->connstr('shop'), '-f', "$tmp/shop.sql" ],
	'pg_dump plain');
my $plain = slurp_file("$tmp/shop.sql");
ok(index(lc($plain), lc($key)) < 0, 'the receipt key is not in the dump');
like($plain, qr/GRANT INSERT ON TABLE queue_data\.q\d+ TO app_sender/, 'grants are dumped by role name');
like($plain, qr/GRANT SELECT ON TABLE queue\._consumer_owners TO app_worker/,
	'consumers: the owner\'s grant is dumped by role name');
# access keys (1.3.2): neither the keys nor their secrets are in the dump
ok(index($plain, $ak_id) < 0 && index($plain, $ak_gen_id) < 0, 'access keys: no key id in the dump');
ok(index($plain, $ak_secret) < 0 && index($plain, $ak_gen_secret) < 0,
	'access keys: no secret in the dump');
my $custom = `pg_restore -f - "$tmp/shop.dump"`;
like($custom, qr/GRANT SELECT ON TABLE queue\._access_key_owners TO app_keys/,
	'access keys: the custom-format dump, as SQL, holds the holder\'s grant');
ok(index($custom, $ak_id) < 0 && index($custom, $ak_secret) < 0,
	'access keys: but neither key nor secret');

# another cluster, whose OIDs differ: it made tables of its own first
my $dst = PostgreSQL::Test::Cluster->new('dump_target');
$dst->init;
$dst->append_conf('postgresql.conf', "shared_preload_libraries = 'queue'\n");
$dst->start;
$dst->safe_psql('postgres', $roles . q(
CREATE DATABASE shop;
CREATE DATABASE shop2;
));
for my $i (1 .. 40)
{
	$dst->safe_psql('shop', "CREATE TABLE public.filler_$i (a int)");
}
$dst->command_ok([ 'pg_restore', '-d', $dst->connstr('shop'), '--exit-on-error', "$tmp/shop.dump" ],
	'pg_restore into another cluster');
my ($rc, $out, $err) = $dst->psql('shop2', undef, extra_params => [ '-v', 'ON_ERROR_STOP=1', '-f', "$tmp/shop.sql" ]);
is($rc, 0, 'psql restore of the plain dump');

for my $db ('shop', 'shop2')
{
	isnt($dst->safe_psql($db, "SELECT 'queue_data.q2'::regclass::oid"),
		$src->safe_psql('shop', "SELECT 'queue_data.q2'::regclass::oid"), "$db: other OIDs");
	is($dst->safe_psql($db, $peek),   $src_peek,   "$db: every message, in order, with its fields");
	is($dst->safe_psql($db, $queues), $src_queues, "$db: every queue with its attributes and owner");
	is($dst->safe_psql($db, "SELECT retry_delay FROM queue.queues WHERE queue_name = 'orders'"),
		'00:00:30', "$db: retry_delay came back");
	is($dst->safe_psql($db, $grants), $src_grants, "$db: the grants, by role");
	is($dst->safe_psql($db, $topics), $src_topics, "$db: topics, subscriptions and topic grants");
	is($dst->safe_psql($db, $sqs_attrs), 'orders {"KmsMasterKeyId": "alias/aws/sqs", "SqsManagedSseEnabled": "true"}',
		"$db: the SQS endpoint's queue attributes, with their queue");
	is($dst->safe_psql($db, 'SELECT count(*) FROM queue._secret'), '1', "$db: one receipt key");
	isnt($dst->safe_psql($db, "SELECT encode(key, 'hex') FROM queue._secret"), $key,
		"$db: a key of its own");
}

# --- consumers (1.3): restored with their attributes, role and handler by name
for my $db ('shop', 'shop2')
{
	is($dst->safe_psql($db, $consumers), $src_consumers, "$db: consumers with their attributes");
	# and the owner of one cannot be dropped (1.3.1), here or from postgres
	like(drop_role_refused($dst, $db, 'app_worker', "$db restored"),
		qr/DETAIL:  owner of consumer "c_worker"/, "$db: names the consumer");
}
my $dst_err = drop_role_refused($dst, 'postgres', 'app_worker', 'restored');
ok($dst_err =~ /1 object in database shop$/m && $dst_err =~ /1 object in database shop2$/m,
	'restored: both databases hold the consumer\'s grant');
# --- end of consumers (1.3)

# --- access keys (1.3.2): restored without keys; the dumped grant of the
# holder was taken back as it was restored, so the role drops; the same
# pair made again works
for my $db ('shop', 'shop2')
{
	is($dst->safe_psql($db, 'SELECT count(*) FROM queue.access_keys'), '0', "$db: no access key restored");
	is($dst->safe_psql($db, q(SELECT count(*) FROM pg_class c, aclexplode(c.relacl) x
		WHERE c.oid = 'queue._access_key_owners'::regclass AND x.grantee <> c.relowner)),
		'0', "$db: no grant left on queue._access_key_owners");
}
is($dst->safe_psql('shop', "SELECT access_key_id || ' ' || secret_access_key FROM queue.create_access_key('app_keys', '$ak_id', '$ak_secret')"),
	"$ak_id $ak_secret", 'access keys: the same pair is made again after the restore');
is($dst->safe_psql('shop', "SELECT role::regrole || ' ' || secret FROM queue._access_key_secret('$ak_id')"),
	"app_keys $ak_secret", 'access keys: and read back under the restored copy\'s own receipt key');
is($dst->safe_psql('shop', "SELECT queue.drop_access_key('$ak_id')"), 't', 'access keys: dropped');
($rc, $out, $err) = $dst->psql('postgres', 'DROP ROLE app_keys');
is($rc, 0, 'access keys: the holder of keys that were not restored drops');
# --- end of access keys (1.3.2)

# drive the API on the pg_restore'd copy
my $db = 'shop';
sub dq { return $dst->safe_psql($db, $_[0]); }

for my $probe (
	[ 'orders', "deduplication_id => 'dd-1'", 'o-inflight' ],
	[ 'events.fifo', "message_group_id => 'a', deduplication_id => 'ev-4'", 'e4' ],
	[ 'events.fifo', "message_group_id => 'a'", 'e2' ])
{
	my ($queue, $args, $original) = @$probe;
	my $body = $probe->[2] eq 'e2' ? 'e2' : 'probe';
	is(dq("SELECT format('%s %s', message_id, duplicate) FROM queue.send('$queue', '$body', $args)"),
		$src->safe_psql('shop', "SELECT message_id FROM queue.peek('$queue') WHERE body = '$original'") . ' t',
		"$queue: a resend with $args is a duplicate of $original");
}
my $new_id = dq("SELECT message_id FROM queue.send('orders', 'after restore')");
cmp_ok($new_id, '>', $max_id, 'new message ids continue above the restored ones');
my $new_queue = dq("SELECT queue.create('after_restore')");
cmp_ok($new_queue, '>', $max_queue, 'new queue ids continue above the restored ones');
my $seq = dq("SELECT sequence_number FROM queue.send('events.fifo', 'e5', message_group_id => 'b', deduplication_id => 'ev-5')");
cmp_ok($seq, '>', $max_id, 'FIFO sequence numbers continue above the restored ones');

($rc, $out, $err) = $dst->psql($db, "SELECT queue.delete('orders', '$receipt')");
like($err, qr/is not a valid receipt/, 'a receipt of the source does not verify here');

# FIFO order: group a is free (e1, e2); b is in flight behind e3's lease? no:
# the message in flight is e1 (group a, oldest), so b delivers e3, e4, e5
is(dq("SELECT string_agg(body, ',' ORDER BY sequence_number) FROM queue.receive('events.fifo', 10)"),
	'e3,e4,e5', 'FIFO: a group in flight stays blocked, the other delivers in order');

# grants by name: the sender sends, the receiver receives and deletes
is($dst->safe_psql($db, q(SET ROLE app_sender; SELECT count(*) FROM queue.send('orders', 'by app'))),
	'1', 'app_sender sends');
($rc, $out, $err) = $dst->psql($db, q(SET ROLE app_sender; SELECT queue.receive('orders')));
like($err, qr/permission denied/, 'app_sender may not receive');
is($dst->safe_psql($db, q(SET ROLE app_receiver;
	SELECT count(*) FROM queue.receive('orders', 10) r WHERE queue.delete('orders', r.receipt))),
	'2', 'app_receiver receives and deletes what is visible');
is(dq("SELECT body FROM queue.peek('orders_dlq')"), 'o-dead', 'the dead letter is there');
is(dq("SELECT queue.redrive('orders_dlq')"), '1', 'and redrives');
dq("SELECT queue.alter('orders', visibility_timeout => '2 minutes')");
dq("SELECT queue.grant('orders', 'app_sender', '{receive}')");
dq("SELECT queue.revoke('orders', 'app_sender', '{receive}')");
dq("SELECT queue.purge('after_restore')");
is(dq("SELECT count(*) FROM queue.stats WHERE visible IS NOT NULL"), '9', 'stats reads every queue');
is(dq("SELECT default_priority FROM queue.queues WHERE queue_name = 'ranked'"), '6',
	'priorities (1.12): the default is restored');
is(dq("SELECT string_agg(body || ':' || priority, ' ') FROM queue.peek('ranked')"), 'r9:9 r6:6 r2:2',
	'priorities: each message keeps its own');
is(dq("SELECT string_agg(body, ' ') FROM queue.receive('ranked', 1)"), 'r9',
	'priorities: the restored copy serves the highest first');
is(dq("SELECT max_in_flight_per_group FROM queue.queues WHERE queue_name = 'tenants'"), '2',
	'fair: the cap is restored');
is(dq("SELECT receive_rate_limit || ' ' || receive_rate_limit_per_group || ' ' || receive_rate_interval"
	  . " FROM queue.queues WHERE queue_name = 'news_q'"), '40 4 00:01:30',
	'rate limits (1.11): restored');
is(dq("SELECT string_agg(body, ',' ORDER BY body) FROM queue.receive('tenants', 10)"), 't1,t2,t4',
	'fair: tenants are served fairly and capped on the restored copy');
is(dq("SELECT groups FROM queue.stats WHERE queue_name = 'tenants'"), '2', 'fair: two tenants');

# topics work on the restored copy: the publish grant by name, the filters,
# the FIFO topic's live deduplication id, ids above the restored ones
is($dst->safe_psql($db, q(SET ROLE app_sender;
	SELECT delivered FROM queue.publish('news', 'n2', tags => '{eu}', attributes => '{"kind": "sale"}'))),
	'1', 'topics: app_sender publishes, the filtered subscription takes it');
is(dq(q(SELECT delivered FROM queue.publish('news', 'n3', tags => '{us}', attributes => '{"kind": "sale"}'))),
	'0', 'topics: the filter tags came back');
is(dq("SELECT string_agg(body, ',' ORDER BY message_id) FROM queue.peek('news_q')"), 'n1,n2',
	'topics: the subscribed queue holds both copies');
is(dq("SELECT format('%s %s %s', message_id, delivered, duplicate) FROM queue.publish('news_ordered', 'nf1 again', message_group_id => 'g', deduplication_id => 'tp-1')"),
	"$nf1_id 0 t", 'topics: a deduplication id accepted before the dump is still a duplicate');
cmp_ok(dq("SELECT queue.subscribe('news', 'orders')"), '>', $max_sub,
	'topics: new subscription ids continue above the restored ones');
($rc, $out, $err) = $dst->psql('postgres', 'DROP ROLE app_sender');
like($err, qr/cannot be dropped because some objects depend on it/,
	'a role holding grants on a restored queue cannot be dropped');
is(dq("SELECT queue.drop('after_restore')"), 't', 'drop');

# --- consumers (1.3): a restored consumer runs once resumed; new ids
# continue above the restored ones
dq("SELECT queue.resume_consumer('c_news')");
ok($dst->poll_query_until($db, "SELECT count(*) = 0 FROM queue.peek('news_q')"),
	'consumers: a restored consumer, resumed, takes its queue\'s messages');
is(dq("SELECT string_agg(body, ',' ORDER BY body) FROM public.handled"), 'n1,n2',
	'consumers: through its handler');
cmp_ok(dq("SELECT queue.create_consumer('c_new', 'news_q', 'public.handle(queue.message[])')"), '>',
	$max_consumer, 'consumers: new ids continue above the restored ones');
dq("SELECT queue.drop_consumer(c) FROM unnest(ARRAY['c_new', 'c_news', 'c_orders']) c");
# --- end of consumers (1.3)

$src->stop;
$dst->stop;
done_testing();
