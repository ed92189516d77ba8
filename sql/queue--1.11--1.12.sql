/* queue--1.11--1.12.sql: priorities (issue 51) */

\echo Use "ALTER EXTENSION queue UPDATE TO '1.12'" to load this file. \quit

/*
 * DESIGN.md "Rate limits and priorities": a message of a standard queue
 * has a priority, 0 to 9, 9 served first; a send without one takes the
 * queue's default_priority (4 unless set).  The messages' column is null
 * for priority 4 until the queue has had a message of another priority
 * (fair.c and plans.c: a queue that never uses priorities reads as
 * before), so only the prioritised messages are in the partial index.
 * FIFO queues refuse priorities: their order is the group's.
 */
ALTER TABLE @extschema@._queues ADD COLUMN default_priority smallint NOT NULL DEFAULT 4;
COMMENT ON COLUMN @extschema@._queues.default_priority IS
	'the priority (0 to 9, 9 first) of a message sent without one';

ALTER TABLE queue_data.messages ADD COLUMN priority smallint;
CREATE INDEX messages_priority ON queue_data.messages (store_id, priority, visible_at, message_id)
	WHERE priority IS NOT NULL;

/*
 * A dedicated standard queue's table gains the same: those there now, and
 * each one made from now on (by _create's dedicated path, or a move).
 * queue_data is the extension's: no other role makes tables in it.
 */
CREATE FUNCTION @extschema@._add_priority_column(queue_id bigint)
	RETURNS void LANGUAGE plpgsql SECURITY DEFINER
	SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_variable
BEGIN
	IF NOT EXISTS (SELECT FROM pg_catalog.pg_attribute a
				   WHERE a.attrelid OPERATOR(pg_catalog.=)
						 pg_catalog.to_regclass('queue_data.q' OPERATOR(pg_catalog.||) queue_id)
					 AND a.attname OPERATOR(pg_catalog.=) 'priority' AND NOT a.attisdropped) THEN
		EXECUTE pg_catalog.format('ALTER TABLE queue_data.q%s ADD COLUMN priority smallint',
			queue_id);
		EXECUTE pg_catalog.format('CREATE INDEX q%1$s_priority ON queue_data.q%1$s'
			' (priority, visible_at, message_id) WHERE priority IS NOT NULL', queue_id);
	END IF;
END
$$;
REVOKE ALL ON FUNCTION @extschema@._add_priority_column(bigint) FROM PUBLIC;

DO $$
DECLARE
	r record;
BEGIN
	FOR r IN SELECT q.queue_id FROM @extschema@._queues q
			 WHERE q.dedicated AND NOT q.fifo ORDER BY q.queue_id LOOP
		PERFORM @extschema@._add_priority_column(r.queue_id);
	END LOOP;
END
$$;

/* 1.4's _create_tables (a move to the dedicated layout), then the column. */
ALTER FUNCTION @extschema@._create_tables(bigint, boolean, oid) RENAME TO _create_tables_1_4;
CREATE FUNCTION @extschema@._create_tables(queue_id bigint, fifo boolean, owner oid)
	RETURNS void LANGUAGE plpgsql SECURITY DEFINER
	SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_variable
BEGIN
	PERFORM @extschema@._create_tables_1_4(queue_id, fifo, owner);
	IF NOT fifo THEN
		PERFORM @extschema@._add_priority_column(queue_id);
	END IF;
END
$$;
REVOKE ALL ON FUNCTION @extschema@._create_tables(bigint, boolean, oid) FROM PUBLIC;
REVOKE ALL ON FUNCTION @extschema@._create_tables_1_4(bigint, boolean, oid) FROM PUBLIC;

/*
 * 1.4's _move names the columns it copies: the priorities are carried
 * over by message id (a move keeps each message's id).
 */
ALTER FUNCTION @extschema@._move(text, boolean) RENAME TO _move_1_4;
CREATE FUNCTION @extschema@._move(queue_name text, to_dedicated boolean)
	RETURNS void LANGUAGE plpgsql SECURITY DEFINER
	SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_variable
DECLARE
	q @extschema@._queues;
	ids bigint[];
	prios smallint[];
	store bigint;
BEGIN
	SELECT * INTO q FROM @extschema@._queues r WHERE r.queue_name OPERATOR(pg_catalog.=) queue_name;
	IF q.queue_id IS NOT NULL AND NOT q.fifo AND q.dedicated IS DISTINCT FROM to_dedicated THEN
		/* 1.4's takes it again: no send comes between the read and the move */
		PERFORM @extschema@._lock_queue(q.queue_id);
		IF q.dedicated THEN
			EXECUTE pg_catalog.format('SELECT pg_catalog.array_agg(m.message_id), pg_catalog.array_agg(m.priority)'
				' FROM queue_data.q%s m WHERE m.priority IS NOT NULL', q.queue_id) INTO ids, prios;
		ELSE
			store := coalesce(q.store_id, q.queue_id);
			SELECT pg_catalog.array_agg(m.message_id), pg_catalog.array_agg(m.priority) INTO ids, prios
			FROM queue_data.messages m
			WHERE m.store_id OPERATOR(pg_catalog.=) store AND m.priority IS NOT NULL;
		END IF;
	END IF;
	PERFORM @extschema@._move_1_4(queue_name, to_dedicated);
	IF ids IS NOT NULL THEN
		SELECT * INTO q FROM @extschema@._queues r WHERE r.queue_id OPERATOR(pg_catalog.=) q.queue_id;
		IF q.dedicated THEN
			EXECUTE pg_catalog.format('UPDATE queue_data.q%s m SET priority = p.priority'
				' FROM ROWS FROM (pg_catalog.unnest($1), pg_catalog.unnest($2)) AS p(message_id, priority)'
				' WHERE m.message_id OPERATOR(pg_catalog.=) p.message_id', q.queue_id)
				USING ids, prios;
		ELSE
			UPDATE queue_data.messages m SET priority = p.priority
			FROM ROWS FROM (pg_catalog.unnest(ids), pg_catalog.unnest(prios)) AS p(message_id, priority)
			WHERE m.store_id OPERATOR(pg_catalog.=) coalesce(q.store_id, q.queue_id)
			  AND m.message_id OPERATOR(pg_catalog.=) p.message_id;
		END IF;
	END IF;
END
$$;
REVOKE ALL ON FUNCTION @extschema@._move(text, boolean) FROM PUBLIC;
REVOKE ALL ON FUNCTION @extschema@._move_1_4(text, boolean) FROM PUBLIC;
COMMENT ON FUNCTION @extschema@._move(text, boolean) IS 'move a queue between the shared and the dedicated layout with all its rows';

/* 22023 unless null, or 0 to 9 (4 only on a FIFO queue). */
CREATE FUNCTION @extschema@._check_default_priority(default_priority integer, fifo boolean)
	RETURNS void LANGUAGE plpgsql IMMUTABLE
	SET search_path = pg_catalog, pg_temp AS $$
BEGIN
	IF default_priority IS NULL THEN
		RETURN;
	END IF;
	IF default_priority OPERATOR(pg_catalog.<) 0 OR default_priority OPERATOR(pg_catalog.>) 9 THEN
		RAISE EXCEPTION 'argument "default_priority" must be between 0 and 9'
			USING ERRCODE = '22023';
	END IF;
	IF fifo AND default_priority OPERATOR(pg_catalog.<>) 4 THEN
		RAISE EXCEPTION 'argument "default_priority" is for standard queues'
			USING ERRCODE = '22023',
			DETAIL = 'A FIFO queue delivers each message group in the order it was sent.';
	END IF;
END
$$;
REVOKE ALL ON FUNCTION @extschema@._check_default_priority(integer, boolean) FROM PUBLIC;

/* ------------------------------------------------------------------------
 * create and alter take default_priority
 * ------------------------------------------------------------------------
 */
DROP FUNCTION @extschema@.create(text, boolean, interval, interval, interval, integer,
	interval, boolean, interval, text, text, integer, text[], interval, jsonb, boolean, integer,
	integer, integer, interval);
CREATE FUNCTION @extschema@.create(
	queue_name text,
	fifo boolean DEFAULT false,
	visibility_timeout interval DEFAULT '30 seconds',
	delay interval DEFAULT '0',
	retention interval DEFAULT '4 days',
	max_message_size integer DEFAULT 1048576,
	receive_wait interval DEFAULT '0',
	content_based_deduplication boolean DEFAULT false,
	deduplication_window interval DEFAULT '5 minutes',
	deduplication_scope text DEFAULT 'queue',
	dead_letter_queue text DEFAULT NULL,
	max_receive_count integer DEFAULT NULL,
	redrive_allow text[] DEFAULT NULL,
	retry_delay interval DEFAULT '0',
	tags jsonb DEFAULT '{}',
	/* false, unless the setting queue.default_storage says dedicated */
	dedicated boolean DEFAULT coalesce(
		pg_catalog.current_setting('queue.default_storage', true) = 'dedicated', false),
	max_in_flight_per_group integer DEFAULT NULL,
	receive_rate_limit integer DEFAULT NULL,
	receive_rate_limit_per_group integer DEFAULT NULL,
	receive_rate_interval interval DEFAULT '1 second',
	default_priority integer DEFAULT 4)
	RETURNS bigint
	LANGUAGE C AS 'MODULE_PATHNAME', 'queue_admin_call';
COMMENT ON FUNCTION @extschema@.create(text, boolean, interval, interval, interval, integer,
	interval, boolean, interval, text, text, integer, text[], interval, jsonb, boolean, integer,
	integer, integer, interval, integer)
	IS 'create a queue (or return the id of an identical one): rows in the shared tables, or tables of its own with dedicated => true';

/* 1.11's _create, then the default priority (an existing queue must have the same). */
CREATE FUNCTION @extschema@._create(
	queue_name text,
	fifo boolean,
	visibility_timeout interval,
	delay interval,
	retention interval,
	max_message_size integer,
	receive_wait interval,
	content_based_deduplication boolean,
	deduplication_window interval,
	deduplication_scope text,
	dead_letter_queue text,
	max_receive_count integer,
	redrive_allow text[],
	retry_delay interval,
	tags jsonb,
	dedicated boolean,
	max_in_flight_per_group integer,
	receive_rate_limit integer,
	receive_rate_limit_per_group integer,
	receive_rate_interval interval,
	default_priority integer,
	caller oid)
	RETURNS bigint LANGUAGE plpgsql SECURITY DEFINER
	SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_variable
DECLARE
	id bigint;
	old @extschema@._queues;
	prio integer := coalesce(default_priority, 4);
BEGIN
	PERFORM @extschema@._check_default_priority(prio, coalesce(fifo, false));
	IF queue_name IS NOT NULL THEN
		PERFORM pg_catalog.pg_advisory_xact_lock(pg_catalog.hashtext('queue.create:' || queue_name));
	END IF;
	SELECT * INTO old FROM @extschema@._queues r WHERE r.queue_name OPERATOR(pg_catalog.=) queue_name;
	id := @extschema@._create(queue_name, fifo, visibility_timeout, delay, retention,
		max_message_size, receive_wait, content_based_deduplication, deduplication_window,
		deduplication_scope, dead_letter_queue, max_receive_count, redrive_allow,
		retry_delay, tags, dedicated, max_in_flight_per_group, receive_rate_limit,
		receive_rate_limit_per_group, receive_rate_interval, caller);
	IF old.queue_id IS NOT NULL THEN
		IF old.default_priority OPERATOR(pg_catalog.<>) prio THEN
			RAISE EXCEPTION 'queue "%" already exists with other attributes', queue_name
				USING ERRCODE = '42710',
				HINT = 'Use queue.alter to change its attributes.';
		END IF;
		RETURN id;
	END IF;
	IF prio OPERATOR(pg_catalog.<>) 4 THEN
		UPDATE @extschema@._queues r SET default_priority = prio
		WHERE r.queue_id OPERATOR(pg_catalog.=) id;
	END IF;
	IF NOT coalesce(fifo, false) AND EXISTS (SELECT FROM @extschema@._queues r
			WHERE r.queue_id OPERATOR(pg_catalog.=) id AND r.dedicated) THEN
		PERFORM @extschema@._add_priority_column(id);
	END IF;
	RETURN id;
END
$$;
REVOKE ALL ON FUNCTION @extschema@._create(text, boolean, interval, interval, interval, integer,
	interval, boolean, interval, text, text, integer, text[], interval, jsonb, boolean, integer,
	integer, integer, interval, integer, oid) FROM PUBLIC;
COMMENT ON FUNCTION @extschema@._create(text, boolean, interval, interval, interval, integer,
	interval, boolean, interval, text, text, integer, text[], interval, jsonb, boolean, integer,
	integer, integer, interval, integer, oid)
	IS 'queue.create as the tables'' owner, for caller';

DROP FUNCTION @extschema@.alter(text, interval, interval, interval, integer, interval,
	boolean, interval, text, text, integer, text[], interval, jsonb, boolean, integer,
	integer, integer, interval);
CREATE FUNCTION @extschema@.alter(
	queue_name text,
	visibility_timeout interval DEFAULT NULL,
	delay interval DEFAULT NULL,
	retention interval DEFAULT NULL,
	max_message_size integer DEFAULT NULL,
	receive_wait interval DEFAULT NULL,
	content_based_deduplication boolean DEFAULT NULL,
	deduplication_window interval DEFAULT NULL,
	deduplication_scope text DEFAULT NULL,
	dead_letter_queue text DEFAULT NULL,
	max_receive_count integer DEFAULT NULL,
	redrive_allow text[] DEFAULT NULL,
	retry_delay interval DEFAULT NULL,
	tags jsonb DEFAULT NULL,
	dedicated boolean DEFAULT NULL,
	max_in_flight_per_group integer DEFAULT NULL,
	receive_rate_limit integer DEFAULT NULL,
	receive_rate_limit_per_group integer DEFAULT NULL,
	receive_rate_interval interval DEFAULT NULL,
	default_priority integer DEFAULT NULL)
	RETURNS void
	LANGUAGE C AS 'MODULE_PATHNAME', 'queue_admin_call';
COMMENT ON FUNCTION @extschema@.alter(text, interval, interval, interval, integer, interval,
	boolean, interval, text, text, integer, text[], interval, jsonb, boolean, integer,
	integer, integer, interval, integer)
	IS 'change a queue''s attributes (null: unchanged; max_in_flight_per_group, receive_rate_limit or receive_rate_limit_per_group => 0 removes it); dedicated moves it between the layouts with all its state';

CREATE FUNCTION @extschema@._alter(
	queue_name text,
	visibility_timeout interval,
	delay interval,
	retention interval,
	max_message_size integer,
	receive_wait interval,
	content_based_deduplication boolean,
	deduplication_window interval,
	deduplication_scope text,
	dead_letter_queue text,
	max_receive_count integer,
	redrive_allow text[],
	retry_delay interval,
	tags jsonb,
	dedicated boolean,
	max_in_flight_per_group integer,
	receive_rate_limit integer,
	receive_rate_limit_per_group integer,
	receive_rate_interval interval,
	default_priority integer,
	caller oid)
	RETURNS void LANGUAGE plpgsql SECURITY DEFINER
	SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_variable
DECLARE
	q @extschema@._queues;
BEGIN
	/* 1.11's: checks manage, changes the other attributes, moves */
	PERFORM @extschema@._alter(queue_name, visibility_timeout, delay, retention,
		max_message_size, receive_wait, content_based_deduplication, deduplication_window,
		deduplication_scope, dead_letter_queue, max_receive_count, redrive_allow,
		retry_delay, tags, dedicated, max_in_flight_per_group, receive_rate_limit,
		receive_rate_limit_per_group, receive_rate_interval, caller);
	IF default_priority IS NULL THEN
		RETURN;
	END IF;
	q := @extschema@._lookup(queue_name, true);
	PERFORM @extschema@._check_default_priority(default_priority, q.fifo);
	UPDATE @extschema@._queues r SET default_priority = default_priority
	WHERE r.queue_id OPERATOR(pg_catalog.=) q.queue_id;
	PERFORM @extschema@._invalidate_queue(q.queue_id);
END
$$;
REVOKE ALL ON FUNCTION @extschema@._alter(text, interval, interval, interval, integer, interval,
	boolean, interval, text, text, integer, text[], interval, jsonb, boolean, integer,
	integer, integer, interval, integer, oid) FROM PUBLIC;
COMMENT ON FUNCTION @extschema@._alter(text, interval, interval, interval, integer, interval,
	boolean, interval, text, text, integer, text[], interval, jsonb, boolean, integer,
	integer, integer, interval, integer, oid)
	IS 'queue.alter as the tables'' owner, for caller';

/* ------------------------------------------------------------------------
 * send and send_batch take a priority; a message shows its own
 * ------------------------------------------------------------------------
 */
DROP FUNCTION @extschema@.send(text, text, interval, text, text, jsonb);
DROP FUNCTION @extschema@.send(text, jsonb, interval, text, text, jsonb);
DROP FUNCTION @extschema@.send_batch(text, text[], interval, text[], text[], jsonb[]);
DROP FUNCTION @extschema@.send_batch(text, jsonb[], interval, text[], text[], jsonb[]);

CREATE FUNCTION @extschema@.send(queue_name text, body text, delay interval DEFAULT NULL,
	message_group_id text DEFAULT NULL, deduplication_id text DEFAULT NULL,
	attributes jsonb DEFAULT NULL, priority integer DEFAULT NULL)
	RETURNS TABLE (message_id bigint, sequence_number bigint, duplicate boolean)
	LANGUAGE C
	AS 'MODULE_PATHNAME', 'queue_send';
COMMENT ON FUNCTION @extschema@.send(text, text, interval, text, text, jsonb, integer) IS 'send a text message';

CREATE FUNCTION @extschema@.send(queue_name text, body jsonb, delay interval DEFAULT NULL,
	message_group_id text DEFAULT NULL, deduplication_id text DEFAULT NULL,
	attributes jsonb DEFAULT NULL, priority integer DEFAULT NULL)
	RETURNS TABLE (message_id bigint, sequence_number bigint, duplicate boolean)
	LANGUAGE C
	AS 'MODULE_PATHNAME', 'queue_send';
COMMENT ON FUNCTION @extschema@.send(text, jsonb, interval, text, text, jsonb, integer) IS 'send a jsonb message (stored and returned as its text)';

CREATE FUNCTION @extschema@.send_batch(queue_name text, bodies text[], delay interval DEFAULT NULL,
	message_group_ids text[] DEFAULT NULL, deduplication_ids text[] DEFAULT NULL,
	attributes jsonb[] DEFAULT NULL, priority integer DEFAULT NULL,
	priorities integer[] DEFAULT NULL)
	RETURNS TABLE (ordinal integer, message_id bigint, sequence_number bigint, duplicate boolean)
	LANGUAGE C
	AS 'MODULE_PATHNAME', 'queue_send_batch';
COMMENT ON FUNCTION @extschema@.send_batch(text, text[], interval, text[], text[], jsonb[], integer, integer[]) IS 'send text messages, all or none';

CREATE FUNCTION @extschema@.send_batch(queue_name text, bodies jsonb[], delay interval DEFAULT NULL,
	message_group_ids text[] DEFAULT NULL, deduplication_ids text[] DEFAULT NULL,
	attributes jsonb[] DEFAULT NULL, priority integer DEFAULT NULL,
	priorities integer[] DEFAULT NULL)
	RETURNS TABLE (ordinal integer, message_id bigint, sequence_number bigint, duplicate boolean)
	LANGUAGE C
	AS 'MODULE_PATHNAME', 'queue_send_batch';
COMMENT ON FUNCTION @extschema@.send_batch(text, jsonb[], interval, text[], text[], jsonb[], integer, integer[]) IS 'send jsonb messages, all or none';

ALTER TYPE @extschema@.message ADD ATTRIBUTE priority integer;

/* ------------------------------------------------------------------------
 * The default priority in queue.queues
 * ------------------------------------------------------------------------
 */
CREATE OR REPLACE VIEW @extschema@.queues WITH (security_barrier) AS
	SELECT r.queue_name, r.queue_id, r.fifo, r.visibility_timeout, r.delay, r.retention,
		   r.max_message_size, r.receive_wait, r.content_based_deduplication,
		   r.deduplication_window, r.deduplication_scope,
		   d.queue_name AS dead_letter_queue, r.max_receive_count, r.redrive_allow,
		   r.retry_delay, r.tags,
		   coalesce(r.owner, c.relowner::regrole) AS owner, r.created_at, r.dedicated,
		   r.max_in_flight_per_group, r.receive_rate_limit, r.receive_rate_limit_per_group,
		   r.receive_rate_interval, r.default_priority::integer AS default_priority
	FROM @extschema@._queues r
	LEFT JOIN pg_catalog.pg_class c
	  ON r.dedicated AND c.relnamespace = 'queue_data'::regnamespace AND c.relname = 'q' || r.queue_id
	LEFT JOIN @extschema@._queues d ON d.queue_id = r.dead_letter_queue
	WHERE @extschema@._may_see(r.queue_id);
