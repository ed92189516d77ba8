-- queue_table_rules: a superuser may add triggers and constraints to a
-- queue's tables (queue_data.q<id>, queue_data.d<id>); sends then obey them
-- as an INSERT would: a BEFORE INSERT trigger fires for queue.send and
-- queue.send_batch and may change the row, a CHECK constraint refuses a
-- send (23514) leaving nothing, a NOT NULL the send would break refuses it
-- (23502), deduplication claims fire the d<id> table's triggers, and the
-- queue keeps working: what was sent is received and deleted.  Once they
-- are dropped, sends go on as before.  Output is bodies, booleans and
-- counts, never ids or timestamps.
CREATE EXTENSION IF NOT EXISTS queue;
-- The dedicated layout, whatever queue.default_storage the suite runs with:
-- rules a superuser adds to a queue's own tables exist only in the dedicated layout.
SET queue.default_storage = dedicated;

-- err(sql): run a statement, show its SQLSTATE and the constraint it broke.
CREATE FUNCTION pg_temp.err(cmd text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
	c text;
BEGIN
	EXECUTE cmd;
	RETURN 'ok';
EXCEPTION WHEN OTHERS THEN
	GET STACKED DIAGNOSTICS c = CONSTRAINT_NAME;
	RETURN SQLSTATE || coalesce(' ' || nullif(c, ''), '');
END
$$;

-- tbl(queue, kind): the queue's table of that kind (q messages, d
-- deduplication ids), found through the registry.
CREATE FUNCTION pg_temp.tbl(q text, kind text) RETURNS text LANGUAGE sql AS $$
	SELECT format('queue_data.%s%s', kind, queue_id) FROM queue.queues WHERE queue_name = q
$$;

-- What the triggers saw, in order.
CREATE TABLE public.rules_log (n serial, seen text);

-- A message row's trigger logs its body and stamps its attributes.  It
-- runs as the tables' owner with pg_catalog as search path: names are
-- qualified.
CREATE FUNCTION public.rules_stamp() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	INSERT INTO public.rules_log (seen) VALUES ('msg ' || NEW.body);
	NEW.attributes := coalesce(NEW.attributes, '{}') || '{"stamped": true}';
	RETURN NEW;
END
$$;
-- A deduplication row's trigger logs the id claimed.
CREATE FUNCTION public.rules_claim() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	INSERT INTO public.rules_log (seen) VALUES ('claim ' || NEW.deduplication_id);
	RETURN NEW;
END
$$;

-- log(): what the triggers saw since the last call, then forget it.
CREATE FUNCTION pg_temp.log() RETURNS text LANGUAGE sql AS $$
	WITH d AS (DELETE FROM public.rules_log RETURNING n, seen)
	SELECT coalesce(string_agg(seen, ', ' ORDER BY n), '(none)') FROM d
$$;

-- drain(queue): receive everything visible, show bodies and the stamp,
-- and delete what was received.
CREATE TEMP TABLE held (body text, stamped boolean, receipt text);
CREATE FUNCTION pg_temp.drain(q text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
	got text;
	deleted bigint;
BEGIN
	DELETE FROM held;
	INSERT INTO held
		SELECT body, coalesce((attributes ->> 'stamped')::boolean, false), receipt
		FROM queue.receive(q, max_messages => 10);
	SELECT coalesce(string_agg(body || CASE WHEN stamped THEN '+' ELSE '' END, ' ' ORDER BY body), '(none)')
		INTO got FROM held;
	SELECT count(*) FILTER (WHERE queue.delete(q, receipt)) INTO deleted FROM held;
	RETURN got || ' deleted=' || deleted;
END
$$;

-- left(queue): messages still in the queue, from its table.
CREATE FUNCTION pg_temp.left(q text) RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
	n bigint;
BEGIN
	EXECUTE format('SELECT count(*) FROM %s', pg_temp.tbl(q, 'q')) INTO n;
	RETURN n;
END
$$;

SELECT queue.create('rules_q') > 0 AS created;
SELECT pg_temp.tbl('rules_q', 'q') AS tq, pg_temp.tbl('rules_q', 'd') AS td \gset

-- A trigger and a CHECK constraint on the message table.
CREATE TRIGGER rules_stamp BEFORE INSERT ON :tq
	FOR EACH ROW EXECUTE FUNCTION public.rules_stamp();
ALTER TABLE :tq ADD CONSTRAINT rules_no_bad CHECK (body <> 'bad');

-- The trigger fires for a send and for each entry of a batch.
SELECT duplicate FROM queue.send('rules_q', 'one');
SELECT ordinal, duplicate FROM queue.send_batch('rules_q', ARRAY['two', 'three']);
SELECT pg_temp.log();

-- A send the constraint refuses fails with 23514 and leaves nothing; a
-- batch with one such entry leaves none of its entries.
SELECT pg_temp.err($$SELECT queue.send('rules_q', 'bad')$$);
SELECT pg_temp.err($$SELECT queue.send_batch('rules_q', ARRAY['four', 'bad'])$$);
SELECT pg_temp.left('rules_q') AS messages;

-- The queue is not stuck: what was sent is received (stamped by the
-- trigger) and deleted.
SELECT pg_temp.drain('rules_q');
SELECT pg_temp.drain('rules_q');
SELECT pg_temp.left('rules_q') AS messages;

-- Priorities take the same way in (1.12): the trigger fires for each entry,
-- each keeps its own (a null entry the queue's default, 4), and a receive
-- hands out the highest first.
SELECT ordinal, duplicate FROM queue.send_batch('rules_q', ARRAY['p2', 'p7', 'p4'],
	priorities => ARRAY[2, 7, NULL]);
SELECT pg_temp.log();
SELECT body, priority FROM queue.receive('rules_q', 10, visibility_timeout => '0');
SELECT pg_temp.drain('rules_q');

-- Deduplication ids: a trigger on d<id> fires for each claim, as for an
-- INSERT ... ON CONFLICT (a duplicate's claim fires it too, then finds the
-- id held); the duplicate is still found.
CREATE TRIGGER rules_claim BEFORE INSERT ON :td
	FOR EACH ROW EXECUTE FUNCTION public.rules_claim();
SELECT duplicate FROM queue.send('rules_q', 'five', deduplication_id => 'k5');
SELECT duplicate FROM queue.send('rules_q', 'five again', deduplication_id => 'k5');
SELECT ordinal, duplicate FROM queue.send_batch('rules_q', ARRAY['six', 'seven'],
	deduplication_ids => ARRAY['k6', 'k5']);
SELECT pg_temp.log();
SELECT pg_temp.drain('rules_q');

-- NOT NULL on a column a send may leave null (the trigger, which filled
-- it, dropped first): a send without attributes breaks it (23502), one
-- with attributes goes in.
DROP TRIGGER rules_stamp ON :tq;
ALTER TABLE :tq ALTER COLUMN attributes SET NOT NULL;
SELECT pg_temp.err($$SELECT queue.send('rules_q', 'eight')$$);
SELECT duplicate FROM queue.send('rules_q', 'nine', attributes => '{"stamped": true}');
SELECT pg_temp.drain('rules_q');
ALTER TABLE :tq ALTER COLUMN attributes DROP NOT NULL;

-- A FIFO queue with a trigger: sequence numbers and groups as always.
SELECT queue.create('rules_f', fifo => true) > 0 AS created;
SELECT pg_temp.tbl('rules_f', 'q') AS tf \gset
CREATE TRIGGER rules_stamp BEFORE INSERT ON :tf
	FOR EACH ROW EXECUTE FUNCTION public.rules_stamp();
SELECT sequence_number = message_id AS seq_is_id, duplicate
FROM queue.send('rules_f', 'f1', message_group_id => 'g', deduplication_id => 'f1');
SELECT ordinal, sequence_number = message_id AS seq_is_id, duplicate
FROM queue.send_batch('rules_f', ARRAY['f2', 'f3'], message_group_ids => ARRAY['g', 'h'],
	deduplication_ids => ARRAY['f2', 'f3']);
SELECT pg_temp.log();
SELECT pg_temp.drain('rules_f');

-- Trigger and constraint dropped: sends go on without them.
DROP TRIGGER rules_claim ON :td;
ALTER TABLE :tq DROP CONSTRAINT rules_no_bad;
SELECT duplicate FROM queue.send('rules_q', 'bad');
SELECT duplicate FROM queue.send('rules_q', 'ten', deduplication_id => 'k10');
SELECT pg_temp.log();
SELECT pg_temp.drain('rules_q');

SELECT queue.drop('rules_q');
SELECT queue.drop('rules_f');
DROP TABLE public.rules_log;
DROP FUNCTION public.rules_stamp(), public.rules_claim();
