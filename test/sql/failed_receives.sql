-- failed_receives: a receive whose transaction rolls back still counts
-- (DESIGN.md "Consumers", SQS counts every receive), and its message comes
-- back after the queue's retry_delay (default 0: at once).  A rollback's
-- count is written by the next receive of the queue or by the worker,
-- whichever comes first: every check here holds either way (the worker's
-- own writes, with nobody receiving, are in test/t/016_failed_receives.pl).
-- Output is bodies, counts and booleans, never ids or timestamps.
CREATE EXTENSION IF NOT EXISTS queue;

CREATE FUNCTION pg_temp.err(cmd text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
	EXECUTE cmd;
	RETURN 'ok';
EXCEPTION WHEN OTHERS THEN
	RETURN SQLSTATE || ': ' || SQLERRM;
END
$$;

-- content(queue): every message, as body:receive_count[:held], held when
-- it is not visible now.
CREATE FUNCTION pg_temp.content(q text) RETURNS text LANGUAGE sql AS $$
	SELECT coalesce(string_agg(body || ':' || receive_count ||
		CASE WHEN visible_at > clock_timestamp() THEN ':held' ELSE '' END, ' '), '(empty)')
	FROM queue.peek(q, 1000)
$$;

-- settled(queue): wait until no rolled-back receive of the queue waits to
-- be written (the worker writes them within a pass); true when none does.
CREATE FUNCTION pg_temp.settled(q text) RETURNS boolean LANGUAGE plpgsql AS $$
DECLARE
	id bigint := (SELECT queue_id FROM queue.queues WHERE queue_name = q);
BEGIN
	FOR i IN 1 .. 3000 LOOP
		IF queue._failed_pending(id) = 0 THEN
			RETURN true;
		END IF;
		PERFORM pg_sleep(0.01);
	END LOOP;
	RETURN false;
END
$$;

-- retry_delay: an attribute like the others, 0 to 12 hours.
SELECT queue.create('fr_plain') > 0 AS created;
SELECT queue_name, retry_delay FROM queue.queues WHERE queue_name = 'fr_plain';
SELECT pg_temp.err($$SELECT queue.create('fr_bad', retry_delay => '-1 s')$$);
SELECT pg_temp.err($$SELECT queue.create('fr_bad', retry_delay => '12 hours 1 second')$$);
SELECT pg_temp.err($$SELECT queue.create('fr_bad', retry_delay => NULL)$$);
SELECT count(*) AS bad_created FROM queue.queues WHERE queue_name = 'fr_bad';
-- identical attributes: the same queue; another retry_delay: 42710
SELECT queue.create('fr_plain') = (SELECT queue_id FROM queue.queues WHERE queue_name = 'fr_plain') AS same_id;
SELECT queue.create('fr_plain', retry_delay => '0') > 0 AS same_again;
SELECT pg_temp.err($$SELECT queue.create('fr_plain', retry_delay => '5 s')$$);
SELECT queue.create('fr_twelve', retry_delay => '12 hours') > 0 AS twelve_hours_ok;
SELECT queue.create('fr_twelve', retry_delay => '12 hours') > 0 AS twelve_hours_again;
-- alter: null leaves it, a bad value changes nothing
SELECT queue.alter('fr_plain', retry_delay => '1 minute');
SELECT queue.alter('fr_plain', visibility_timeout => '10 s');
SELECT retry_delay, visibility_timeout FROM queue.queues WHERE queue_name = 'fr_plain';
SELECT pg_temp.err($$SELECT queue.alter('fr_plain', retry_delay => '13 hours', visibility_timeout => '20 s')$$);
SELECT retry_delay, visibility_timeout FROM queue.queues WHERE queue_name = 'fr_plain';
SELECT queue.drop('fr_plain'), queue.drop('fr_twelve');

-- The issue's case: BEGIN; receive; ROLLBACK three times on a queue with
-- max_receive_count 2 and a dead-letter queue: the message ends there.
SELECT queue.create('fr_dlq') > 0 AS dlq;
SELECT queue.create('fr_jobs', dead_letter_queue => 'fr_dlq', max_receive_count => 2) > 0 AS jobs;
SELECT count(*) FROM queue.send('fr_jobs', 'poison');
BEGIN;
SELECT body, receive_count FROM queue.receive('fr_jobs');
ROLLBACK;
BEGIN;
SELECT body, receive_count FROM queue.receive('fr_jobs');
ROLLBACK;
-- received twice: the third receive moves it instead of delivering it
BEGIN;
SELECT body, receive_count FROM queue.receive('fr_jobs');
ROLLBACK;
SELECT pg_temp.settled('fr_jobs');
SELECT pg_temp.content('fr_jobs') AS jobs, pg_temp.content('fr_dlq') AS dead_letters;
SELECT attributes -> 'queue.dead_letter' ->> 'receive_count' AS moved_after
FROM queue.peek('fr_dlq');
SELECT dead_lettered, received FROM queue.stats WHERE queue_name = 'fr_jobs';

-- retry_delay holds the message back after each rollback, and a savepoint
-- rolled back counts as well; a committed receive is not counted twice.
SELECT queue.create('fr_delay', retry_delay => '1 hour') > 0 AS delay;
SELECT count(*) FROM queue.send('fr_delay', 'held');
SELECT count(*) FROM queue.send('fr_delay', 'other');
BEGIN;
SELECT body, receive_count FROM queue.receive('fr_delay');
ROLLBACK;
-- back only after an hour: the next receive gets the other message
SELECT body, receive_count FROM queue.receive('fr_delay', visibility_timeout => '0');
SELECT pg_temp.settled('fr_delay');
SELECT pg_temp.content('fr_delay');
SELECT queue.alter('fr_delay', retry_delay => '0');
SELECT queue.purge('fr_delay');
SELECT count(*) FROM queue.send('fr_delay', 'sp');
BEGIN;
SAVEPOINT a;
SELECT body, receive_count FROM queue.receive('fr_delay');
ROLLBACK TO SAVEPOINT a;
-- the savepoint's receive counted; this one commits
SELECT body, receive_count FROM queue.receive('fr_delay', visibility_timeout => '0');
COMMIT;
SELECT pg_temp.settled('fr_delay');
SELECT pg_temp.content('fr_delay');

-- A savepoint released into a transaction that rolls back counts too; an
-- error inside the transaction (it aborts) as well.
BEGIN;
SAVEPOINT b;
SELECT body, receive_count FROM queue.receive('fr_delay');
RELEASE SAVEPOINT b;
ROLLBACK;
BEGIN;
SELECT body, receive_count FROM queue.receive('fr_delay');
SELECT 1 / 0;
ROLLBACK;
SELECT pg_temp.settled('fr_delay');
SELECT pg_temp.content('fr_delay');

-- Two-phase commit: ROLLBACK PREPARED counts the receive, COMMIT PREPARED
-- leaves the committed count alone.
BEGIN;
SELECT body, receive_count FROM queue.receive('fr_delay');
PREPARE TRANSACTION 'fr_gid_1';
ROLLBACK PREPARED 'fr_gid_1';
SELECT pg_temp.settled('fr_delay');
SELECT pg_temp.content('fr_delay');
BEGIN;
SELECT body, receive_count FROM queue.receive('fr_delay', visibility_timeout => '0');
PREPARE TRANSACTION 'fr_gid_2';
COMMIT PREPARED 'fr_gid_2';
SELECT pg_temp.settled('fr_delay');
SELECT pg_temp.content('fr_delay');

-- A message deleted after its receive rolled back leaves nothing behind.
BEGIN;
SELECT body FROM queue.receive('fr_delay');
ROLLBACK;
SELECT queue.delete('fr_delay', receipt) FROM queue.receive('fr_delay');
SELECT pg_temp.settled('fr_delay');
SELECT pg_temp.content('fr_delay');

-- FIFO: the group stays blocked for the retry delay after a rollback, and
-- its order is kept.
SELECT queue.create('fr_fifo.fifo', fifo => true, retry_delay => '1 hour') > 0 AS fifo;
SELECT count(*) FROM queue.send('fr_fifo.fifo', 'g1-a', message_group_id => 'g1', deduplication_id => 'a');
SELECT count(*) FROM queue.send('fr_fifo.fifo', 'g1-b', message_group_id => 'g1', deduplication_id => 'b');
SELECT count(*) FROM queue.send('fr_fifo.fifo', 'g2-a', message_group_id => 'g2', deduplication_id => 'c');
BEGIN;
SELECT body, receive_count FROM queue.receive('fr_fifo.fifo');
ROLLBACK;
-- g1 is held back whole (its head waits an hour): only g2 gives
SELECT body, receive_count FROM queue.receive('fr_fifo.fifo', max_messages => 10, visibility_timeout => '0');
SELECT pg_temp.settled('fr_fifo.fifo');
SELECT pg_temp.content('fr_fifo.fifo');

SELECT queue.drop('fr_jobs'), queue.drop('fr_dlq'), queue.drop('fr_delay'), queue.drop('fr_fifo.fifo');
