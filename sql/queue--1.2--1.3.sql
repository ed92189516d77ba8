/* queue--1.2--1.3.sql: failed receives that count, retry_delay, consumers */

\echo Use "ALTER EXTENSION queue UPDATE TO '1.3'" to load this file. \quit

/*
 * What 1.3 adds (DESIGN.md "Consumers"; 1.2's header announced both, which
 * 1.2 shipped without):
 *  - retry_delay, a queue attribute: a receive whose transaction rolls back
 *    counts, and its message comes back after retry_delay (failed.c);
 *  - consumers: the worker receives, calls a SQL handler, deletes and
 *    commits (consumer.c).
 *
 * CREATE EXTENSION of 1.3 runs queue--1.0.sql and every upgrade script
 * after it, so a fresh install and an upgraded one have the same catalog.
 */


/* ------------------------------------------------------------------------
 * Failed receives and retry_delay (failed.c)
 * ------------------------------------------------------------------------
 */

/*
 * How long a message whose receive rolled back stays invisible: 0 (at
 * once, the default) to 12 hours, the visibility timeout's range.
 */
ALTER TABLE @extschema@._queues ADD COLUMN retry_delay interval NOT NULL DEFAULT '0';

/*
 * create and alter take retry_delay before tags (DESIGN.md's order).  The
 * 1.2 bodies stay as they were, renamed _create_attributes and
 * _alter_attributes; the new _create and _alter check retry_delay, call
 * them, and store it.  All of it runs in the caller's statement: an error
 * anywhere leaves nothing behind.
 */
ALTER FUNCTION @extschema@._create(text, boolean, interval, interval, interval, integer,
	interval, boolean, interval, text, text, integer, text[], jsonb, oid)
	RENAME TO _create_attributes;
ALTER FUNCTION @extschema@._alter(text, interval, interval, interval, integer, interval,
	boolean, interval, text, text, integer, text[], jsonb, oid)
	RENAME TO _alter_attributes;
COMMENT ON FUNCTION @extschema@._create_attributes(text, boolean, interval, interval, interval,
	integer, interval, boolean, interval, text, text, integer, text[], jsonb, oid)
	IS 'queue.create of every attribute but retry_delay (queue._create adds it)';
COMMENT ON FUNCTION @extschema@._alter_attributes(text, interval, interval, interval, integer,
	interval, boolean, interval, text, text, integer, text[], jsonb, oid)
	IS 'queue.alter of every attribute but retry_delay (queue._alter adds it)';

CREATE FUNCTION @extschema@._check_retry_delay(retry_delay interval)
	RETURNS void LANGUAGE sql IMMUTABLE
	SET search_path = pg_catalog, pg_temp AS $$
	SELECT @extschema@._check_interval(retry_delay, 'retry_delay', '0', '12 hours')
$$;
REVOKE ALL ON FUNCTION @extschema@._check_retry_delay(interval) FROM PUBLIC;
COMMENT ON FUNCTION @extschema@._check_retry_delay(interval) IS 'range check of retry_delay (0 to 12 hours)';

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
	caller oid)
	RETURNS bigint LANGUAGE plpgsql SECURITY DEFINER
	SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_variable
DECLARE
	existed boolean;
	id bigint;
	old_delay interval;
BEGIN
	PERFORM @extschema@._check_retry_delay(retry_delay);
	/* Serialise creators of one name (the 1.2 body takes this lock too). */
	PERFORM pg_catalog.pg_advisory_xact_lock(pg_catalog.hashtext('queue.create:' || queue_name));
	existed := EXISTS (SELECT FROM @extschema@._queues r WHERE r.queue_name = queue_name);
	id := @extschema@._create_attributes(queue_name, fifo, visibility_timeout, delay, retention,
		max_message_size, receive_wait, content_based_deduplication, deduplication_window,
		deduplication_scope, dead_letter_queue, max_receive_count, redrive_allow, tags, caller);
	SELECT r.retry_delay INTO old_delay FROM @extschema@._queues r WHERE r.queue_id = id;
	IF old_delay IS DISTINCT FROM retry_delay THEN
		/* It existed with the same other attributes, or was made just now. */
		IF existed THEN
			RAISE EXCEPTION 'queue "%" already exists with other attributes', queue_name
				USING ERRCODE = '42710',
				HINT = 'Use queue.alter to change its attributes.';
		END IF;
		UPDATE @extschema@._queues r SET retry_delay = _create.retry_delay WHERE r.queue_id = id;
	END IF;
	RETURN id;
END
$$;
REVOKE ALL ON FUNCTION @extschema@._create(text, boolean, interval, interval, interval, integer,
	interval, boolean, interval, text, text, integer, text[], interval, jsonb, oid) FROM PUBLIC;
COMMENT ON FUNCTION @extschema@._create(text, boolean, interval, interval, interval, integer,
	interval, boolean, interval, text, text, integer, text[], interval, jsonb, oid)
	IS 'queue.create as the tables'' owner, for caller';

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
	caller oid)
	RETURNS void LANGUAGE plpgsql SECURITY DEFINER
	SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_variable
BEGIN
	IF retry_delay IS NOT NULL THEN
		PERFORM @extschema@._check_retry_delay(retry_delay);
	END IF;
	/* Checks the caller's manage privilege and invalidates the queue. */
	PERFORM @extschema@._alter_attributes(queue_name, visibility_timeout, delay, retention,
		max_message_size, receive_wait, content_based_deduplication, deduplication_window,
		deduplication_scope, dead_letter_queue, max_receive_count, redrive_allow, tags, caller);
	IF retry_delay IS NOT NULL THEN
		UPDATE @extschema@._queues r SET retry_delay = _alter.retry_delay
		WHERE r.queue_name = queue_name;
	END IF;
END
$$;
REVOKE ALL ON FUNCTION @extschema@._alter(text, interval, interval, interval, integer, interval,
	boolean, interval, text, text, integer, text[], interval, jsonb, oid) FROM PUBLIC;
COMMENT ON FUNCTION @extschema@._alter(text, interval, interval, interval, integer, interval,
	boolean, interval, text, text, integer, text[], interval, jsonb, oid)
	IS 'queue.alter as the tables'' owner, for caller';

DROP FUNCTION @extschema@.create(text, boolean, interval, interval, interval, integer, interval,
	boolean, interval, text, text, integer, text[], jsonb);
DROP FUNCTION @extschema@.alter(text, interval, interval, interval, integer, interval, boolean,
	interval, text, text, integer, text[], jsonb);

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
	tags jsonb DEFAULT '{}')
	RETURNS bigint
	LANGUAGE C AS 'MODULE_PATHNAME', 'queue_admin_call';
COMMENT ON FUNCTION @extschema@.create(text, boolean, interval, interval, interval, integer,
	interval, boolean, interval, text, text, integer, text[], interval, jsonb)
	IS 'create a queue; returns its id (idempotent for identical attributes)';

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
	tags jsonb DEFAULT NULL)
	RETURNS void
	LANGUAGE C AS 'MODULE_PATHNAME', 'queue_admin_call';
COMMENT ON FUNCTION @extschema@.alter(text, interval, interval, interval, integer, interval,
	boolean, interval, text, text, integer, text[], interval, jsonb)
	IS 'change attributes of a queue (null leaves one unchanged; dead_letter_queue => '''' removes it)';

/* The view shows retry_delay among the attributes, in the arguments' order. */
DROP VIEW @extschema@.queues;
CREATE VIEW @extschema@.queues WITH (security_barrier) AS
	SELECT r.queue_name, r.queue_id, r.fifo, r.visibility_timeout, r.delay, r.retention,
		   r.max_message_size, r.receive_wait, r.content_based_deduplication,
		   r.deduplication_window, r.deduplication_scope,
		   d.queue_name AS dead_letter_queue, r.max_receive_count, r.redrive_allow,
		   r.retry_delay, r.tags,
		   c.relowner::regrole AS owner, r.created_at
	FROM @extschema@._queues r
	JOIN pg_catalog.pg_class c
	  ON c.relnamespace = 'queue_data'::regnamespace AND c.relname = 'q' || r.queue_id
	LEFT JOIN @extschema@._queues d ON d.queue_id = r.dead_letter_queue
	WHERE @extschema@._may_see(r.queue_id);
COMMENT ON VIEW @extschema@.queues IS 'one row a queue the current role holds a privilege on, with its attributes';
GRANT SELECT ON @extschema@.queues TO PUBLIC;

/*
 * Failed receives are kept in shared memory until the worker (or the next
 * receive) writes them into the message rows (failed.c); this reports how
 * many wait, for tests and the curious.
 */
CREATE FUNCTION @extschema@._failed_pending(queue_id bigint)
	RETURNS bigint LANGUAGE C STRICT AS 'MODULE_PATHNAME', 'queue_failed_pending';
REVOKE ALL ON FUNCTION @extschema@._failed_pending(bigint) FROM PUBLIC;
COMMENT ON FUNCTION @extschema@._failed_pending(bigint) IS 'rolled-back receives of a queue not yet counted in its messages';
