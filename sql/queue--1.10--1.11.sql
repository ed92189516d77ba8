/* queue--1.10--1.11.sql: rate limits per queue and per tenant (issue 51) */

\echo Use "ALTER EXTENSION queue UPDATE TO '1.11'" to load this file. \quit

/*
 * DESIGN.md "Rate limits and priorities": a queue hands out at most
 * receive_rate_limit messages in any span of receive_rate_interval (all
 * tenants together), and at most receive_rate_limit_per_group to one
 * tenant.  The window's state is in shared memory (fifo/rate.c); the
 * catalog keeps the attributes.
 */
ALTER TABLE @extschema@._queues ADD COLUMN receive_rate_limit integer;
ALTER TABLE @extschema@._queues ADD COLUMN receive_rate_limit_per_group integer;
ALTER TABLE @extschema@._queues ADD COLUMN receive_rate_interval interval NOT NULL DEFAULT '1 second';
COMMENT ON COLUMN @extschema@._queues.receive_rate_limit IS
	'messages the queue hands out in any span of receive_rate_interval, all tenants together; null: no limit';
COMMENT ON COLUMN @extschema@._queues.receive_rate_limit_per_group IS
	'standard queues: messages one tenant (message group) is handed out in any span of receive_rate_interval; null: no limit';
COMMENT ON COLUMN @extschema@._queues.receive_rate_interval IS
	'the sliding window of the rate limits (1 ms to 1 day)';

/*
 * 22023 unless the limits are null (or 0 in alter: none) or 1 to
 * 1,000,000,000, the per-tenant one on a standard queue, and the interval
 * null or 1 ms to 1 day.
 */
CREATE FUNCTION @extschema@._check_rate_limits(lim integer, per_group integer,
	rate_interval interval, fifo boolean, in_alter boolean)
	RETURNS void LANGUAGE plpgsql IMMUTABLE
	SET search_path = pg_catalog, pg_temp AS $$
BEGIN
	IF lim IS NOT NULL AND NOT (in_alter AND lim OPERATOR(pg_catalog.=) 0)
	   AND (lim OPERATOR(pg_catalog.<) 1 OR lim OPERATOR(pg_catalog.>) 1000000000) THEN
		RAISE EXCEPTION 'argument "receive_rate_limit" must be between 1 and 1000000000%',
			CASE WHEN in_alter THEN ' (0 removes it)' ELSE '' END USING ERRCODE = '22023';
	END IF;
	IF per_group IS NOT NULL AND NOT (in_alter AND per_group OPERATOR(pg_catalog.=) 0) THEN
		IF per_group OPERATOR(pg_catalog.<) 1 OR per_group OPERATOR(pg_catalog.>) 1000000000 THEN
			RAISE EXCEPTION 'argument "receive_rate_limit_per_group" must be between 1 and 1000000000%',
				CASE WHEN in_alter THEN ' (0 removes it)' ELSE '' END USING ERRCODE = '22023';
		END IF;
		IF fifo THEN
			RAISE EXCEPTION 'argument "receive_rate_limit_per_group" is for standard queues'
				USING ERRCODE = '22023',
				DETAIL = 'A FIFO queue hands out one message group''s messages one lease at a time; receive_rate_limit limits the whole queue.';
		END IF;
	END IF;
	IF rate_interval IS NOT NULL
	   AND (rate_interval OPERATOR(pg_catalog.<) '1 millisecond'::pg_catalog.interval
			OR rate_interval OPERATOR(pg_catalog.>) '1 day'::pg_catalog.interval) THEN
		RAISE EXCEPTION 'argument "receive_rate_interval" must be between 1 millisecond and 1 day'
			USING ERRCODE = '22023';
	END IF;
END
$$;
REVOKE ALL ON FUNCTION @extschema@._check_rate_limits(integer, integer, interval, boolean, boolean)
	FROM PUBLIC;

/* ------------------------------------------------------------------------
 * create and alter take the three attributes
 * ------------------------------------------------------------------------
 */
DROP FUNCTION @extschema@.create(text, boolean, interval, interval, interval, integer,
	interval, boolean, interval, text, text, integer, text[], interval, jsonb, boolean, integer);
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
	receive_rate_interval interval DEFAULT '1 second')
	RETURNS bigint
	LANGUAGE C AS 'MODULE_PATHNAME', 'queue_admin_call';
COMMENT ON FUNCTION @extschema@.create(text, boolean, interval, interval, interval, integer,
	interval, boolean, interval, text, text, integer, text[], interval, jsonb, boolean, integer,
	integer, integer, interval)
	IS 'create a queue (or return the id of an identical one): rows in the shared tables, or tables of its own with dedicated => true';

/* 1.6's _create, then the limits (attributes: an existing queue must have the same). */
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
	caller oid)
	RETURNS bigint LANGUAGE plpgsql SECURITY DEFINER
	SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_variable
DECLARE
	id bigint;
	old @extschema@._queues;
	rate_interval interval := coalesce(receive_rate_interval, '1 second'::pg_catalog.interval);
BEGIN
	PERFORM @extschema@._check_rate_limits(receive_rate_limit, receive_rate_limit_per_group,
		rate_interval, coalesce(fifo, false), false);
	/* 1.6's takes the same lock: the name's creators are serialised from here */
	IF queue_name IS NOT NULL THEN
		PERFORM pg_catalog.pg_advisory_xact_lock(pg_catalog.hashtext('queue.create:' || queue_name));
	END IF;
	SELECT * INTO old FROM @extschema@._queues r WHERE r.queue_name OPERATOR(pg_catalog.=) queue_name;
	id := @extschema@._create(queue_name, fifo, visibility_timeout, delay, retention,
		max_message_size, receive_wait, content_based_deduplication, deduplication_window,
		deduplication_scope, dead_letter_queue, max_receive_count, redrive_allow,
		retry_delay, tags, dedicated, max_in_flight_per_group, caller);
	IF old.queue_id IS NOT NULL THEN
		IF old.receive_rate_limit IS DISTINCT FROM receive_rate_limit
		   OR old.receive_rate_limit_per_group IS DISTINCT FROM receive_rate_limit_per_group
		   OR old.receive_rate_interval IS DISTINCT FROM rate_interval THEN
			RAISE EXCEPTION 'queue "%" already exists with other attributes', queue_name
				USING ERRCODE = '42710',
				HINT = 'Use queue.alter to change its attributes.';
		END IF;
		RETURN id;
	END IF;
	IF receive_rate_limit IS NOT NULL OR receive_rate_limit_per_group IS NOT NULL
	   OR rate_interval IS DISTINCT FROM '1 second'::pg_catalog.interval THEN
		UPDATE @extschema@._queues r
		SET receive_rate_limit = receive_rate_limit,
			receive_rate_limit_per_group = receive_rate_limit_per_group,
			receive_rate_interval = rate_interval
		WHERE r.queue_id OPERATOR(pg_catalog.=) id;
	END IF;
	RETURN id;
END
$$;
REVOKE ALL ON FUNCTION @extschema@._create(text, boolean, interval, interval, interval, integer,
	interval, boolean, interval, text, text, integer, text[], interval, jsonb, boolean, integer,
	integer, integer, interval, oid) FROM PUBLIC;
COMMENT ON FUNCTION @extschema@._create(text, boolean, interval, interval, interval, integer,
	interval, boolean, interval, text, text, integer, text[], interval, jsonb, boolean, integer,
	integer, integer, interval, oid)
	IS 'queue.create as the tables'' owner, for caller';

DROP FUNCTION @extschema@.alter(text, interval, interval, interval, integer, interval,
	boolean, interval, text, text, integer, text[], interval, jsonb, boolean, integer);
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
	receive_rate_interval interval DEFAULT NULL)
	RETURNS void
	LANGUAGE C AS 'MODULE_PATHNAME', 'queue_admin_call';
COMMENT ON FUNCTION @extschema@.alter(text, interval, interval, interval, integer, interval,
	boolean, interval, text, text, integer, text[], interval, jsonb, boolean, integer,
	integer, integer, interval)
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
	caller oid)
	RETURNS void LANGUAGE plpgsql SECURITY DEFINER
	SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_variable
DECLARE
	q @extschema@._queues;
BEGIN
	/* 1.6's: checks manage, changes the other attributes, moves */
	PERFORM @extschema@._alter(queue_name, visibility_timeout, delay, retention,
		max_message_size, receive_wait, content_based_deduplication, deduplication_window,
		deduplication_scope, dead_letter_queue, max_receive_count, redrive_allow,
		retry_delay, tags, dedicated, max_in_flight_per_group, caller);
	IF receive_rate_limit IS NULL AND receive_rate_limit_per_group IS NULL
	   AND receive_rate_interval IS NULL THEN
		RETURN;
	END IF;
	q := @extschema@._lookup(queue_name, true);
	PERFORM @extschema@._check_rate_limits(receive_rate_limit, receive_rate_limit_per_group,
		receive_rate_interval, q.fifo, true);
	UPDATE @extschema@._queues r
	SET receive_rate_limit = CASE WHEN receive_rate_limit IS NULL THEN r.receive_rate_limit
			ELSE NULLIF(receive_rate_limit, 0) END,
		receive_rate_limit_per_group = CASE WHEN receive_rate_limit_per_group IS NULL
			THEN r.receive_rate_limit_per_group
			ELSE NULLIF(receive_rate_limit_per_group, 0) END,
		receive_rate_interval = coalesce(receive_rate_interval, r.receive_rate_interval)
	WHERE r.queue_id OPERATOR(pg_catalog.=) q.queue_id;
	PERFORM @extschema@._invalidate_queue(q.queue_id);
END
$$;
REVOKE ALL ON FUNCTION @extschema@._alter(text, interval, interval, interval, integer, interval,
	boolean, interval, text, text, integer, text[], interval, jsonb, boolean, integer,
	integer, integer, interval, oid) FROM PUBLIC;
COMMENT ON FUNCTION @extschema@._alter(text, interval, interval, interval, integer, interval,
	boolean, interval, text, text, integer, text[], interval, jsonb, boolean, integer,
	integer, integer, interval, oid)
	IS 'queue.alter as the tables'' owner, for caller';

/* ------------------------------------------------------------------------
 * The limits in the views
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
		   r.receive_rate_interval
	FROM @extschema@._queues r
	LEFT JOIN pg_catalog.pg_class c
	  ON r.dedicated AND c.relnamespace = 'queue_data'::regnamespace AND c.relname = 'q' || r.queue_id
	LEFT JOIN @extschema@._queues d ON d.queue_id = r.dead_letter_queue
	WHERE @extschema@._may_see(r.queue_id);

/* messages a queue's rate limits held back since the server started (rate.c) */
CREATE FUNCTION @extschema@._rate_limited(queue_id bigint) RETURNS bigint
	LANGUAGE C STRICT AS 'MODULE_PATHNAME', 'queue_rate_limited_sql';
COMMENT ON FUNCTION @extschema@._rate_limited(bigint) IS 'messages a queue''s rate limits held back, counted since the server started';

CREATE OR REPLACE VIEW @extschema@.stats WITH (security_barrier) AS
	SELECT r.queue_name, d.visible, d.in_flight, d.delayed, d.oldest_sent_at, d.oldest_visible_age,
		   c.sent, c.received, c.deleted, c.deduplicated, c.dead_lettered, c.expired,
		   c.waits, c.wakeups, g.groups, g.noisy_groups,
		   @extschema@._rate_limited(r.queue_id) AS rate_limited
	FROM (SELECT * FROM @extschema@._queues q WHERE @extschema@._may_see(q.queue_id) OFFSET 0) r,
		 LATERAL @extschema@._depth_checked(r.queue_id, r.retention) d,
		 LATERAL @extschema@._counters(r.queue_id) c,
		 LATERAL @extschema@._group_counts(r.queue_name) g;
