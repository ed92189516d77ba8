/* queue--1.5--1.6.sql: fair queues, tenants on a standard queue (issue 26) */

\echo Use "ALTER EXTENSION queue UPDATE TO '1.6'" to load this file. \quit

/*
 * On a standard queue message_group_id names a tenant (DESIGN.md "Fair
 * queues").  A receive of a queue whose messages carry group ids picks
 * tenants with the fewest messages in flight first (fair.c); it finds them
 * through an index of the messages that have a group id, so the messages
 * of a queue without group ids are not in it and cost nothing more.
 */
ALTER TABLE @extschema@._queues ADD COLUMN max_in_flight_per_group integer;
COMMENT ON COLUMN @extschema@._queues.max_in_flight_per_group IS
	'standard queues: a tenant (message group) with this many messages in flight gets no more until one is deleted or its lease ends; null: no cap';

CREATE INDEX messages_tenant ON queue_data.messages (store_id, message_group_id, visible_at, message_id)
	WHERE message_group_id IS NOT NULL;

/* The same index on a dedicated standard queue's table. */
CREATE FUNCTION @extschema@._tenant_index(queue_id bigint)
	RETURNS void LANGUAGE plpgsql SECURITY DEFINER
	SET search_path = pg_catalog, pg_temp AS $$
BEGIN
	EXECUTE pg_catalog.format('CREATE INDEX IF NOT EXISTS q%1$s_tenant ON queue_data.q%1$s'
		' (message_group_id, visible_at, message_id) WHERE message_group_id IS NOT NULL', queue_id);
END
$$;
REVOKE ALL ON FUNCTION @extschema@._tenant_index(bigint) FROM PUBLIC;
COMMENT ON FUNCTION @extschema@._tenant_index(bigint) IS 'the tenants'' index of a dedicated standard queue';

SELECT @extschema@._tenant_index(r.queue_id) FROM @extschema@._queues r
WHERE r.dedicated AND NOT r.fifo
  AND pg_catalog.to_regclass(pg_catalog.format('queue_data.q%s', r.queue_id)) IS NOT NULL;

/* 22023 unless null (or 0 in alter: none) or 1 to 120,000 on a standard queue. */
CREATE FUNCTION @extschema@._check_in_flight_cap(cap integer, fifo boolean, in_alter boolean)
	RETURNS void LANGUAGE plpgsql IMMUTABLE
	SET search_path = pg_catalog, pg_temp AS $$
BEGIN
	IF cap IS NULL OR (in_alter AND cap = 0) THEN
		RETURN;
	END IF;
	IF cap < 1 OR cap > 120000 THEN
		RAISE EXCEPTION 'argument "max_in_flight_per_group" must be between 1 and 120000%',
			CASE WHEN in_alter THEN ' (0 removes it)' ELSE '' END USING ERRCODE = '22023';
	END IF;
	IF fifo THEN
		RAISE EXCEPTION 'argument "max_in_flight_per_group" is for standard queues'
			USING ERRCODE = '22023',
			DETAIL = 'A FIFO queue delivers one message group''s messages one lease at a time already.';
	END IF;
END
$$;
REVOKE ALL ON FUNCTION @extschema@._check_in_flight_cap(integer, boolean, boolean) FROM PUBLIC;

/* ------------------------------------------------------------------------
 * create and alter take max_in_flight_per_group
 * ------------------------------------------------------------------------
 */
DROP FUNCTION @extschema@.create(text, boolean, interval, interval, interval, integer,
	interval, boolean, interval, text, text, integer, text[], interval, jsonb, boolean);
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
	max_in_flight_per_group integer DEFAULT NULL)
	RETURNS bigint
	LANGUAGE C AS 'MODULE_PATHNAME', 'queue_admin_call';
COMMENT ON FUNCTION @extschema@.create(text, boolean, interval, interval, interval, integer,
	interval, boolean, interval, text, text, integer, text[], interval, jsonb, boolean, integer)
	IS 'create a queue (or return the id of an identical one): rows in the shared tables, or tables of its own with dedicated => true';

/* 1.4's _create, then the cap (an attribute: an existing queue must have the same). */
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
	caller oid)
	RETURNS bigint LANGUAGE plpgsql SECURITY DEFINER
	SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_variable
DECLARE
	id bigint;
	old @extschema@._queues;
BEGIN
	PERFORM @extschema@._check_in_flight_cap(max_in_flight_per_group, fifo, false);
	/* 1.4's takes the same lock: the name's creators are serialised from here */
	IF queue_name IS NOT NULL THEN
		PERFORM pg_catalog.pg_advisory_xact_lock(pg_catalog.hashtext('queue.create:' || queue_name));
	END IF;
	SELECT * INTO old FROM @extschema@._queues r WHERE r.queue_name = queue_name;
	id := @extschema@._create(queue_name, fifo, visibility_timeout, delay, retention,
		max_message_size, receive_wait, content_based_deduplication, deduplication_window,
		deduplication_scope, dead_letter_queue, max_receive_count, redrive_allow,
		retry_delay, tags, dedicated, caller);
	IF old.queue_id IS NOT NULL THEN
		IF old.max_in_flight_per_group IS DISTINCT FROM max_in_flight_per_group THEN
			RAISE EXCEPTION 'queue "%" already exists with other attributes', queue_name
				USING ERRCODE = '42710',
				HINT = 'Use queue.alter to change its attributes.';
		END IF;
		RETURN id;
	END IF;
	IF max_in_flight_per_group IS NOT NULL THEN
		UPDATE @extschema@._queues r SET max_in_flight_per_group = max_in_flight_per_group
		WHERE r.queue_id = id;
	END IF;
	IF dedicated AND NOT fifo THEN
		PERFORM @extschema@._tenant_index(id);
	END IF;
	RETURN id;
END
$$;
REVOKE ALL ON FUNCTION @extschema@._create(text, boolean, interval, interval, interval, integer,
	interval, boolean, interval, text, text, integer, text[], interval, jsonb, boolean, integer, oid)
	FROM PUBLIC;
COMMENT ON FUNCTION @extschema@._create(text, boolean, interval, interval, interval, integer,
	interval, boolean, interval, text, text, integer, text[], interval, jsonb, boolean, integer, oid)
	IS 'queue.create as the tables'' owner, for caller';

DROP FUNCTION @extschema@.alter(text, interval, interval, interval, integer, interval,
	boolean, interval, text, text, integer, text[], interval, jsonb, boolean);
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
	max_in_flight_per_group integer DEFAULT NULL)
	RETURNS void
	LANGUAGE C AS 'MODULE_PATHNAME', 'queue_admin_call';
COMMENT ON FUNCTION @extschema@.alter(text, interval, interval, interval, integer, interval,
	boolean, interval, text, text, integer, text[], interval, jsonb, boolean, integer)
	IS 'change a queue''s attributes (null: unchanged; max_in_flight_per_group => 0 removes the cap); dedicated moves it between the layouts with all its state';

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
	caller oid)
	RETURNS void LANGUAGE plpgsql SECURITY DEFINER
	SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_variable
DECLARE
	q @extschema@._queues;
BEGIN
	/* 1.4's: checks manage, changes the other attributes, moves */
	PERFORM @extschema@._alter(queue_name, visibility_timeout, delay, retention,
		max_message_size, receive_wait, content_based_deduplication, deduplication_window,
		deduplication_scope, dead_letter_queue, max_receive_count, redrive_allow,
		retry_delay, tags, dedicated, caller);
	q := @extschema@._lookup(queue_name, true);
	IF max_in_flight_per_group IS NOT NULL THEN
		PERFORM @extschema@._check_in_flight_cap(max_in_flight_per_group, q.fifo, true);
		UPDATE @extschema@._queues r
		SET max_in_flight_per_group = NULLIF(max_in_flight_per_group, 0)
		WHERE r.queue_id = q.queue_id;
		PERFORM @extschema@._invalidate_queue(q.queue_id);
	END IF;
	IF dedicated AND NOT q.fifo THEN
		PERFORM @extschema@._tenant_index(q.queue_id);
	END IF;
END
$$;
REVOKE ALL ON FUNCTION @extschema@._alter(text, interval, interval, interval, integer, interval,
	boolean, interval, text, text, integer, text[], interval, jsonb, boolean, integer, oid) FROM PUBLIC;
COMMENT ON FUNCTION @extschema@._alter(text, interval, interval, interval, integer, interval,
	boolean, interval, text, text, integer, text[], interval, jsonb, boolean, integer, oid)
	IS 'queue.alter as the tables'' owner, for caller';

/* ------------------------------------------------------------------------
 * Tenants in the views
 * ------------------------------------------------------------------------
 */
CREATE OR REPLACE VIEW @extschema@.queues WITH (security_barrier) AS
	SELECT r.queue_name, r.queue_id, r.fifo, r.visibility_timeout, r.delay, r.retention,
		   r.max_message_size, r.receive_wait, r.content_based_deduplication,
		   r.deduplication_window, r.deduplication_scope,
		   d.queue_name AS dead_letter_queue, r.max_receive_count, r.redrive_allow,
		   r.retry_delay, r.tags,
		   coalesce(r.owner, c.relowner::regrole) AS owner, r.created_at, r.dedicated,
		   r.max_in_flight_per_group
	FROM @extschema@._queues r
	LEFT JOIN pg_catalog.pg_class c
	  ON r.dedicated AND c.relnamespace = 'queue_data'::regnamespace AND c.relname = 'q' || r.queue_id
	LEFT JOIN @extschema@._queues d ON d.queue_id = r.dead_letter_queue
	WHERE @extschema@._may_see(r.queue_id);

/* groups and noisy_groups of queue.stats (fair.c): checks the caller as _depth_checked does */
CREATE FUNCTION @extschema@._group_counts(queue_name text,
	OUT groups bigint, OUT noisy_groups bigint)
	LANGUAGE C AS 'MODULE_PATHNAME', 'queue_group_counts_sql';
COMMENT ON FUNCTION @extschema@._group_counts(text) IS 'tenants with messages, and the noisy ones, of a queue the caller holds a privilege on (42501 otherwise)';

CREATE OR REPLACE VIEW @extschema@.stats WITH (security_barrier) AS
	SELECT r.queue_name, d.visible, d.in_flight, d.delayed, d.oldest_sent_at, d.oldest_visible_age,
		   c.sent, c.received, c.deleted, c.deduplicated, c.dead_lettered, c.expired,
		   c.waits, c.wakeups, g.groups, g.noisy_groups
	FROM (SELECT * FROM @extschema@._queues q WHERE @extschema@._may_see(q.queue_id) OFFSET 0) r,
		 LATERAL @extschema@._depth_checked(r.queue_id, r.retention) d,
		 LATERAL @extschema@._counters(r.queue_id) c,
		 LATERAL @extschema@._group_counts(r.queue_name) g;

CREATE FUNCTION @extschema@.group_stats(queue_name text, max_groups integer DEFAULT 100)
	RETURNS TABLE (message_group_id text, visible bigint, in_flight bigint, delayed bigint,
				   oldest_sent_at timestamptz)
	LANGUAGE C AS 'MODULE_PATHNAME', 'queue_group_stats';
COMMENT ON FUNCTION @extschema@.group_stats(text, integer) IS 'the busiest tenants (message groups) of a queue: most in flight first, then most visible';
