# Shared storage (DESIGN.md "Storage") with the worker, a crash, a move and
# pg_dump/restore: queues that are rows in the shared tables, beside a
# dedicated one and queues moved both ways.
#  - the worker sweeps a shared queue's expired messages and moves its
#    poison messages to a shared dead-letter queue when nobody receives;
#  - the drop of a shared queue holding 100,000 messages returns, the
#    worker deletes its rows in the background, and another shared queue
#    works meanwhile;
#  - after kill -9 of the server every message is there;
#  - pg_dump -Fc and pg_restore into another cluster (other OIDs) give
#    every shared queue back with its messages, order, leases, ids,
#    deduplication ids, owner and grants by role name, and none of the
#    rows a purge left for the worker.
# (The TAP runs set queue.default_storage = dedicated: every queue here
# names its layout.)
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $src = PostgreSQL::Test::Cluster->new('shared_src');
$src->init;
$src->append_conf('postgresql.conf', qq(
shared_preload_libraries = 'queue'
queue.sweep_interval = '100ms'
));
$src->start;

my $roles = q(
CREATE ROLE st_owner LOGIN;
CREATE ROLE st_sender LOGIN;
);
$src->safe_psql('postgres', $roles . 'CREATE DATABASE shop;');
sub sql { return $src->safe_psql('shop', $_[0]); }

sql(q(
CREATE EXTENSION queue;
GRANT USAGE ON SCHEMA queue TO st_owner, st_sender;
GRANT CREATE ON DATABASE shop TO st_owner;
SELECT queue.create('s_dlq', dedicated => false);
SELECT queue.create('s_orders', dead_letter_queue => 's_dlq', max_receive_count => 1, dedicated => false);
SELECT queue.create('s_fifo', fifo => true, content_based_deduplication => true, dedicated => false);
SELECT queue.create('d_plain', dedicated => true);
SELECT queue.create('moved_to_shared', fifo => true, dedicated => true);
SELECT queue.create('moved_to_dedicated', dedicated => false);
SET ROLE st_owner;
SELECT queue.create('s_owned', dedicated => false);
SELECT queue.grant('s_owned', 'st_sender', '{send}');
RESET ROLE;
));
is(sql("SELECT string_agg(queue_name || '=' || dedicated, ' ' ORDER BY queue_name) FROM queue.queues"),
	'd_plain=true moved_to_dedicated=false moved_to_shared=true s_dlq=false s_fifo=false s_orders=false s_owned=false',
	'the layouts asked for');

# messages in every state
sql(q(
SELECT queue.send('s_orders', 'o-visible', attributes => '{"n": 1}');
SELECT queue.send('s_orders', 'o-delayed', delay => '1 hour');
SELECT queue.send('s_orders', 'o-inflight', deduplication_id => 'dd-1');
SELECT queue.send_batch('s_fifo', ARRAY['e1', 'e2', 'e3'], message_group_ids => ARRAY['a', 'a', 'b']);
SELECT queue.send_batch('moved_to_shared', ARRAY['m1', 'm2'], message_group_ids => ARRAY['g', 'g'],
	deduplication_ids => ARRAY['m1', 'm2']);
SELECT queue.send('moved_to_dedicated', 'md1', deduplication_id => 'md-1');
SELECT queue.send('d_plain', 'p1');
));
sql(q(
SELECT count(*) FROM queue.receive('s_orders', 1, visibility_timeout => '1 hour');
SELECT count(*) FROM queue.receive('s_fifo', 1, visibility_timeout => '1 hour');
SELECT count(*) FROM queue.receive('moved_to_shared', 1, visibility_timeout => '1 hour');
));
$src->safe_psql('shop', "SET ROLE st_sender; SELECT queue.send('s_owned', 'by the sender');");
sql(q(
SELECT queue.alter('moved_to_shared', dedicated => false);
SELECT queue.alter('moved_to_dedicated', dedicated => true);
));
is(sql("SELECT string_agg(queue_name || '=' || dedicated, ' ' ORDER BY queue_name) FROM queue.queues WHERE queue_name LIKE 'moved%'"),
	'moved_to_dedicated=true moved_to_shared=false', 'moved both ways');
is(sql("SELECT duplicate FROM queue.send('moved_to_shared', 'm2 again', message_group_id => 'g', deduplication_id => 'm2')"),
	't', 'a moved FIFO queue keeps its deduplication ids');
is(sql("SELECT count(*) FROM queue.receive('moved_to_shared', 10)"), '0',
	'... and its group stays in flight');

# --- the worker on shared queues
# an expired message is swept (its sent_at moved back past the retention)
sql(q(
SELECT queue.create('s_expiring', retention => '1 minute', dedicated => false);
SELECT queue.send_batch('s_expiring', ARRAY['x1', 'x2', 'x3']);
UPDATE queue_data.messages SET sent_at = sent_at - interval '2 minutes'
WHERE store_id = (SELECT queue_id FROM queue.queues WHERE queue_name = 's_expiring');
));
ok($src->poll_query_until('shop', q(
SELECT count(*) = 0 FROM queue_data.messages
WHERE store_id = (SELECT queue_id FROM queue.queues WHERE queue_name = 's_expiring')),
	't'), 'the worker sweeps the expired messages of a shared queue');
is(sql("SELECT expired FROM queue.stats WHERE queue_name = 's_expiring'"), '3', '... and counts them');

# The worker visits only the queues a commit changed and those whose time
# came (worker.c): a queue it found empty is swept again once a message
# arrives; a shared queue created since it listed (no invalidation) is
# swept; and more changed queues than it is told of one by one (200 in one
# commit) make it visit every queue.
sql(q(
SELECT queue.send_batch('s_expiring', ARRAY['y1', 'y2']);
UPDATE queue_data.messages SET sent_at = sent_at - interval '2 minutes'
WHERE store_id = (SELECT queue_id FROM queue.queues WHERE queue_name = 's_expiring');
SELECT queue.create('s_late', retention => '1 minute', dedicated => false);
SELECT queue.send('s_late', 'late');
UPDATE queue_data.messages SET sent_at = sent_at - interval '2 minutes'
WHERE store_id = (SELECT queue_id FROM queue.queues WHERE queue_name = 's_late');
));
ok($src->poll_query_until('shop', q(
SELECT count(*) = 0 FROM queue_data.messages
WHERE store_id IN (SELECT queue_id FROM queue.queues WHERE queue_name IN ('s_expiring', 's_late'))),
	't'), 'the worker sweeps a queue it had found empty once a message came, and a queue created since it listed');
is(sql(q(
BEGIN;
SELECT count(queue.create('s_many_' || i, retention => '1 minute', dedicated => false))
FROM generate_series(1, 200) i \g /dev/null
SELECT count(*) FROM generate_series(1, 200) i, LATERAL queue.send('s_many_' || i, 'm') \g /dev/null
UPDATE queue_data.messages SET sent_at = sent_at - interval '2 minutes'
WHERE store_id IN (SELECT queue_id FROM queue.queues WHERE queue_name LIKE 's\_many\_%');
SELECT count(*) FROM queue_data.messages
WHERE store_id IN (SELECT queue_id FROM queue.queues WHERE queue_name LIKE 's\_many\_%');
COMMIT;
)), '200', '200 new queues hold a message each, in one commit');
ok($src->poll_query_until('shop', q(
SELECT count(*) = 0 FROM queue_data.messages
WHERE store_id IN (SELECT queue_id FROM queue.queues WHERE queue_name LIKE 's\_many\_%')),
	't'), 'the worker sweeps 200 queues changed in one commit');
is(sql("SELECT sum(expired) FROM queue.stats WHERE queue_name LIKE 's\\_many\\_%'"), '200', '... and counts them');

# a poison message goes to the dead-letter queue with nobody receiving
sql(q(
SELECT queue.send('s_orders', 'o-dead');
SELECT count(*) FROM queue.receive('s_orders', 10, visibility_timeout => '1 second');
));
ok($src->poll_query_until('shop', "SELECT count(*) = 1 FROM queue.peek('s_dlq') WHERE body = 'o-dead'", 't'),
	'the worker moves a poison message of a shared queue to its shared dead-letter queue');
# ... also when its lease is cut short after the worker looked (the worker
# leaves a queue alone until a lease can end, and the change tells it)
my $receipt = sql(q(
SELECT queue.send('s_orders', 'o-dead-2') \g /dev/null
SELECT receipt FROM queue.receive('s_orders', 1, visibility_timeout => '1 hour');
));
ok($receipt ne '', 'o-dead-2 received for an hour');
sleep(1);
is(sql("SELECT count(*) FROM queue.peek('s_dlq') WHERE body = 'o-dead-2'"), '0', 'not moved while its lease lasts');
sql("SELECT queue.change_visibility('s_orders', '$receipt', '1 second')");
ok($src->poll_query_until('shop', "SELECT count(*) = 1 FROM queue.peek('s_dlq') WHERE body = 'o-dead-2'", 't'),
	'the worker moves it once the shortened lease ends');

# a drop of 100,000 messages: the rows go in the background
sql(q(
SELECT queue.create('s_big', dedicated => false);
DO $$ BEGIN
	FOR i IN 1..100 LOOP
		PERFORM queue.send_batch('s_big', array_fill('payload'::text, ARRAY[1000]));
	END LOOP;
END $$;
));
my $big_id = sql("SELECT queue_id FROM queue.queues WHERE queue_name = 's_big'");
is(sql("SELECT count(*) FROM queue_data.messages WHERE store_id = $big_id"), '100000', 's_big holds 100,000');
is(sql("SELECT queue.drop('s_big')"), 't', 'dropped');
is(sql("SELECT count(*) FROM queue.queues WHERE queue_name = 's_big'"), '0', 'the queue is gone at once');
is(sql(q(
SELECT queue.create('s_big', dedicated => false) > 0;
SELECT count(*) FROM queue.send('s_big', 'new');
SELECT string_agg(body, ',') FROM queue.receive('s_big', 10);
)), "t\n1\nnew", 'its name is free at once, for an empty queue');
ok($src->poll_query_until('shop', "SELECT count(*) = 0 FROM queue_data.messages WHERE store_id = $big_id", 't'),
	'the worker deleted the dropped queue\'s rows');
is(sql("SELECT count(*) FROM queue._reclaim"), '0', 'nothing left to reclaim');

# --- kill -9: the shared queues are there after the restart
my $peek = q(
SELECT string_agg(format('%s|%s|%s|%s|%s|%s|%s|%s|%s|%s', q.queue_name, m.message_id, m.body,
						 m.attributes, m.message_group_id, m.deduplication_id, m.sequence_number,
						 m.receive_count, m.sent_at, m.visible_at), E'\n' ORDER BY q.queue_name)
FROM queue.queues q, LATERAL queue.peek(q.queue_name, 1000) m;
);
my $before = sql($peek);
$src->stop('immediate');
$src->start;
is(sql($peek), $before, 'after kill -9: every message as it was');

# --- pg_dump and pg_restore into another cluster
# a purge leaves rows for the worker; the dump must not carry them
sql(q(
SELECT queue.create('s_purged', dedicated => false);
SELECT queue.send_batch('s_purged', ARRAY['gone1', 'gone2']);
SELECT queue.purge('s_purged');
SELECT queue.send('s_purged', 'kept');
));
$before = sql($peek);
my $queues = q(
SELECT string_agg(format('%s', row(q.*)), E'\n' ORDER BY q.queue_id) FROM queue.queues q;
);
my $grants = q(
SELECT string_agg(format('%s %s %s %s %s', queue_name, owner, send_roles, receive_roles, manage_roles),
				  E'\n' ORDER BY queue_name)
FROM queue._queues WHERE NOT dedicated;
);
my $src_queues = sql($queues);
my $src_grants = sql($grants);
like($src_grants, qr/s_owned st_owner \{st_sender\}/, 'source: the shared queue\'s owner and grant');
my $max_id = sql('SELECT last_value FROM queue_data.message_id_seq');

my $tmp = PostgreSQL::Test::Utils::tempdir;
$src->command_ok([ 'pg_dump', '-Fc', '-d', $src->connstr('shop'), '-f', "$tmp/shop.dump" ], 'pg_dump -Fc');

my $dst = PostgreSQL::Test::Cluster->new('shared_dst');
$dst->init;
$dst->append_conf('postgresql.conf', "shared_preload_libraries = 'queue'\n");
$dst->start;
# other OIDs: tables made first
$dst->safe_psql('postgres', $roles . q(
CREATE TABLE filler AS SELECT g FROM generate_series(1, 10) g;
CREATE DATABASE shop;
));
$dst->command_ok([ 'pg_restore', '-d', $dst->connstr('shop'), "$tmp/shop.dump" ], 'pg_restore');
sub dsql { return $dst->safe_psql('shop', $_[0]); }
is(dsql($peek), $before, 'restored: every message, in order, with its ids, counts and times');
is(dsql($queues), $src_queues, 'restored: every queue with its layout and attributes');
is(dsql($grants), $src_grants, 'restored: owners and grants of shared queues, by role name');
is(dsql(q(
SELECT (SELECT count(*) FROM queue_data.messages) + (SELECT count(*) FROM queue_data.fifo_messages)
	= (SELECT count(*) FROM queue.queues q, LATERAL queue.peek(q.queue_name, 1000) m WHERE NOT q.dedicated)
)), 't', 'restored: no rows of purged or dropped queues');
is(dsql("SELECT duplicate FROM queue.send('s_orders', 'again', deduplication_id => 'dd-1')"), 't',
	'restored: deduplication ids hold');
cmp_ok(dsql("SELECT message_id FROM queue.send('s_orders', 'new')"), '>', $max_id,
	'restored: new ids above the old');
is($dst->safe_psql('shop', "SET ROLE st_sender; SELECT count(*) FROM queue.send('s_owned', 'after restore');"),
	'1', 'restored: the grant works');
my ($rc, $out, $err) = $dst->psql('shop', "SET ROLE st_sender; SELECT queue.receive('s_owned');");
like($err, qr/permission denied for queue "s_owned"/, 'restored: and gives no more');
($rc, $out, $err) = $dst->psql('postgres', 'DROP ROLE st_owner');
like($err, qr/cannot be dropped because some objects depend on it/,
	'restored: the owner of a shared queue cannot be dropped');
is(dsql(q(
SELECT string_agg(body, ' ' ORDER BY sequence_number) FROM queue.receive('s_fifo', 10, visibility_timeout => '0');
)), 'e3', 'restored: a FIFO group in flight stays in flight, the other delivers');
is(dsql("SELECT queue.alter('s_fifo', dedicated => true); SELECT dedicated FROM queue.queues WHERE queue_name = 's_fifo'"),
	"\nt", 'restored: a shared queue moves to its own tables');

done_testing();
