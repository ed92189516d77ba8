# A poison message costs only itself (issue 24, DESIGN.md "Consumers"):
# when the handler fails on a batch, that batch rolls back without counting
# its messages, and the next batch calls the handler with each message
# alone, each in a subtransaction of its own, so the healthy messages are
# handled and deleted exactly once and only the failing one is counted,
# comes back after the retry delay and reaches the dead-letter queue after
# max_receive_count.  On a FIFO queue the batches after a failure take one
# message, so the messages before the poison one are handled and the group
# waits behind it, in order.
use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use QueueWorkerNode;

my $node = QueueWorkerNode::start('poison', q(
max_worker_processes = 16
));

sub sql { return $node->safe_psql('postgres', $_[0]); }

sql(q(
CREATE TABLE public.handled (body text, n bigserial);
-- Fails on any batch holding 'poison'; records every call and what it handled.
CREATE FUNCTION public.h(msgs queue.message[]) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
	INSERT INTO public.handled (body) SELECT m.body FROM unnest(msgs) m;
	IF EXISTS (SELECT 1 FROM unnest(msgs) m WHERE m.body LIKE 'poison%') THEN
		RAISE EXCEPTION 'cannot handle %', (SELECT string_agg(m.body, ',') FROM unnest(msgs) m WHERE m.body LIKE 'poison%')
			USING ERRCODE = '22000';
	END IF;
END
$$;
SELECT queue.create('pq_dlq');
SELECT queue.create('pq', dead_letter_queue => 'pq_dlq', max_receive_count => 3);
SELECT count(*) FROM queue.send_batch('pq', ARRAY['h1', 'h2', 'poison', 'h3', 'h4']);
SELECT queue.create_consumer('c_poison', 'pq', 'public.h(queue.message[])', batch_size => 5, retry => 'exponential');
));

ok($node->poll_query_until('postgres', "SELECT count(*) = 1 FROM queue.peek('pq_dlq') WHERE body = 'poison'"),
	'the poison message reaches the dead-letter queue');
# What committed: each healthy message handled once (the failed whole-batch
# call and the poison's own calls rolled back).
is(sql("SELECT string_agg(body || '=' || c, ',' ORDER BY body) FROM (SELECT body, count(*) c FROM public.handled GROUP BY body) s"),
	'h1=1,h2=1,h3=1,h4=1', 'the four healthy messages were handled once each, the poison one never committed');
is(sql("SELECT count(*) FROM queue.peek('pq')"), '0', 'the queue is empty: the healthy ones were deleted');
is(sql("SELECT receive_count FROM queue.peek('pq_dlq') WHERE body = 'poison'"), '3',
	'the poison message was received max_receive_count (3) times');
is(sql("SELECT count(*) FROM queue.peek('pq_dlq')"), '1', 'only the poison message is in the dead-letter queue');
is(sql("SELECT processed FROM queue.consumers WHERE consumer_name = 'c_poison'"), '4',
	'queue.consumers counts the four it handled');
is(sql("SELECT state, last_error LIKE '22000: cannot handle poison' FROM queue.consumers WHERE consumer_name = 'c_poison'"),
	"failing|t", 'and says the last batch failed, with the error of the poison message');

# A batch without a failure afterwards makes it running again.
sql("SELECT queue.send('pq', 'h5')");
ok($node->poll_query_until('postgres',
		"SELECT state = 'running' AND processed = 5 FROM queue.consumers WHERE consumer_name = 'c_poison'"),
	'a healthy batch afterwards: running, 5 processed');
sql("SELECT queue.drop_consumer('c_poison')");

# --- FIFO: the group waits behind its poison message, in order ----------------
sql(q(
TRUNCATE public.handled;
SELECT queue.create('pf_dlq', fifo => true);
SELECT queue.create('pf', fifo => true, dead_letter_queue => 'pf_dlq', max_receive_count => 3,
	visibility_timeout => '2 s', content_based_deduplication => true);
SELECT count(*) FROM queue.send_batch('pf', ARRAY['f1', 'f2', 'poison-f', 'f4'],
	message_group_ids => ARRAY['g', 'g', 'g', 'g']);
SELECT queue.create_consumer('c_fifo', 'pf', 'public.h(queue.message[])', batch_size => 4, retry => 'fixed');
));
ok($node->poll_query_until('postgres', "SELECT count(*) = 1 FROM queue.peek('pf_dlq') WHERE body = 'poison-f'"),
	'FIFO: the poison message reaches the dead-letter queue');
ok($node->poll_query_until('postgres', "SELECT count(*) = 0 FROM queue.peek('pf')"),
	'FIFO: and the group goes on after it');
is(sql("SELECT string_agg(body, ',' ORDER BY n) FROM public.handled"), 'f1,f2,f4',
	'FIFO: f1 and f2 before the poison one, f4 after it, once each and in order');
# The failed calls rolled back; the log keeps them.
my $fifo_log = slurp_file($node->logfile);
my @fifo_failures = ($fifo_log =~ /queue consumer "c_fifo": batch of (\d+) messages failed/g);
my @fifo_back = ($fifo_log =~ /queue consumer "c_fifo": (\d+ of \d+) messages went back/g);
is(join(',', @fifo_failures) . ' / ' . join(',', @fifo_back), '4,1,1 / 2 of 3',
	'FIFO: the batch of four failed whole (not counted); f1 alone; then f2, the poison one and f4 one by one: f2 handled, the poison one and f4 behind it back; then the poison one alone, twice');
is(sql("SELECT count(*) FROM queue.peek('pf_dlq')"), '1', 'FIFO: only the poison message is in the dead-letter queue');

$node->stop;
done_testing();
