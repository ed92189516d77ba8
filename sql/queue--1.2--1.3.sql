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


/* ------------------------------------------------------------------------
 * Consumers (consumer.c, consumer_worker.c): the worker receives up to
 * batch_size messages, calls a SQL handler with them, deletes them and
 * commits, all in one transaction (DESIGN.md "Consumers").
 * ------------------------------------------------------------------------
 */

/*
 * The registry of consumers.  owner is the role that created the consumer:
 * the handler runs as that role.  handler and owner are stored as
 * regprocedure and regrole, so a dump names them (restored into another
 * cluster, they are found by name).  Runtime counters and the failing state
 * live in shared memory (queue._consumer_stats).  A consumer goes with its
 * queue.
 */
CREATE TABLE @extschema@._consumers (
	consumer_id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	consumer_name text NOT NULL UNIQUE,
	queue_id bigint NOT NULL REFERENCES @extschema@._queues ON DELETE CASCADE,
	handler regprocedure NOT NULL,
	owner regrole NOT NULL,
	batch_size integer NOT NULL,
	concurrency integer NOT NULL,
	retry text NOT NULL,
	paused boolean NOT NULL DEFAULT false,
	created_at timestamptz NOT NULL DEFAULT pg_catalog.now()
);
CREATE INDEX ON @extschema@._consumers (queue_id);
REVOKE ALL ON @extschema@._consumers FROM PUBLIC;
COMMENT ON TABLE @extschema@._consumers IS 'registry of consumers: the queue, the handler and the role it runs as';
SELECT pg_catalog.pg_extension_config_dump('@extschema@._consumers', '');
SELECT pg_catalog.pg_extension_config_dump('@extschema@._consumers_consumer_id_seq', '');

CREATE FUNCTION @extschema@._consumer_reset(consumer_id bigint, queue_id bigint)
	RETURNS void LANGUAGE C STRICT AS 'MODULE_PATHNAME', 'queue_consumer_reset_sql';
REVOKE ALL ON FUNCTION @extschema@._consumer_reset(bigint, bigint) FROM PUBLIC;
COMMENT ON FUNCTION @extschema@._consumer_reset(bigint, bigint) IS 'zero the shared counters of a new consumer id';

/* Callable by every role: it answers only on consumers of queues the role may see. */
CREATE FUNCTION @extschema@._consumer_stats(OUT consumer_id bigint, OUT processed bigint,
	OUT failed bigint, OUT failing boolean, OUT last_error text, OUT last_error_at timestamptz,
	OUT last_success_at timestamptz)
	RETURNS SETOF record LANGUAGE C STABLE AS 'MODULE_PATHNAME', 'queue_consumer_stats_sql';
COMMENT ON FUNCTION @extschema@._consumer_stats() IS 'runtime counters of the consumers of queues the current role holds a privilege on (none without preload)';

/* A consumer by name, 42704 if there is none. */
CREATE FUNCTION @extschema@._lookup_consumer(consumer_name text, for_update boolean DEFAULT false)
	RETURNS @extschema@._consumers LANGUAGE plpgsql
	SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_variable
DECLARE
	c @extschema@._consumers;
BEGIN
	PERFORM @extschema@._check_name(consumer_name, 'consumer_name');
	IF for_update THEN
		SELECT * INTO c FROM @extschema@._consumers r WHERE r.consumer_name = consumer_name FOR UPDATE;
	ELSE
		SELECT * INTO c FROM @extschema@._consumers r WHERE r.consumer_name = consumer_name;
	END IF;
	IF NOT FOUND THEN
		RAISE EXCEPTION 'consumer "%" does not exist', consumer_name USING ERRCODE = '42704';
	END IF;
	RETURN c;
END
$$;
REVOKE ALL ON FUNCTION @extschema@._lookup_consumer(text, boolean) FROM PUBLIC;
COMMENT ON FUNCTION @extschema@._lookup_consumer(text, boolean) IS 'registry row of a consumer by name';

/* 25006 in a read-only transaction (and so on a hot standby), before anything else. */
CREATE FUNCTION @extschema@._check_consumer_writable()
	RETURNS void LANGUAGE plpgsql
	SET search_path = pg_catalog, pg_temp AS $$
BEGIN
	IF pg_catalog.current_setting('transaction_read_only')::boolean THEN
		RAISE EXCEPTION 'cannot change consumers in a read-only transaction' USING ERRCODE = '25006';
	END IF;
END
$$;
REVOKE ALL ON FUNCTION @extschema@._check_consumer_writable() FROM PUBLIC;
COMMENT ON FUNCTION @extschema@._check_consumer_writable() IS 'refuse (25006) a change of consumers in a read-only transaction';

/* Only the consumer's creator, the queue's owner (or their members) and superusers. */
CREATE FUNCTION @extschema@._check_consumer_owner(c @extschema@._consumers, caller oid)
	RETURNS void LANGUAGE plpgsql
	SET search_path = pg_catalog, pg_temp AS $$
BEGIN
	IF pg_catalog.pg_has_role(caller, c.owner::oid, 'USAGE')
	   OR EXISTS (SELECT 1 FROM pg_catalog.pg_class k
				  WHERE k.oid = pg_catalog.to_regclass(pg_catalog.format('queue_data.q%s', c.queue_id))
					AND pg_catalog.pg_has_role(caller, k.relowner, 'USAGE')) THEN
		RETURN;
	END IF;
	RAISE EXCEPTION 'permission denied for consumer "%"', c.consumer_name
		USING ERRCODE = '42501',
		DETAIL = 'Only the role that created the consumer, the owner of its queue or a superuser may change it.';
END
$$;
REVOKE ALL ON FUNCTION @extschema@._check_consumer_owner(@extschema@._consumers, oid) FROM PUBLIC;
COMMENT ON FUNCTION @extschema@._check_consumer_owner(@extschema@._consumers, oid) IS 'refuse (42501) a caller who may not drop, pause or resume the consumer';

CREATE FUNCTION @extschema@._create_consumer(consumer_name text, queue_name text, handler regprocedure,
	batch_size integer, concurrency integer, retry text, caller oid)
	RETURNS bigint LANGUAGE plpgsql SECURITY DEFINER
	SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_variable
DECLARE
	q @extschema@._queues;
	c @extschema@._consumers;
	p record;
BEGIN
	PERFORM @extschema@._check_consumer_writable();
	PERFORM @extschema@._check_name(consumer_name, 'consumer_name');
	q := @extschema@._lookup(queue_name);
	IF handler IS NULL THEN
		RAISE EXCEPTION 'argument "handler" must not be null' USING ERRCODE = '22004';
	END IF;
	IF batch_size IS NULL THEN
		RAISE EXCEPTION 'argument "batch_size" must not be null' USING ERRCODE = '22004';
	END IF;
	IF concurrency IS NULL THEN
		RAISE EXCEPTION 'argument "concurrency" must not be null' USING ERRCODE = '22004';
	END IF;
	IF retry IS NULL THEN
		RAISE EXCEPTION 'argument "retry" must not be null' USING ERRCODE = '22004';
	END IF;
	IF batch_size NOT BETWEEN 1 AND 1000 THEN
		RAISE EXCEPTION 'argument "batch_size" must be between 1 and 1000'
			USING ERRCODE = '22023', DETAIL = pg_catalog.format('The value given was %s.', batch_size);
	END IF;
	IF concurrency NOT BETWEEN 1 AND 64 THEN
		RAISE EXCEPTION 'argument "concurrency" must be between 1 and 64'
			USING ERRCODE = '22023', DETAIL = pg_catalog.format('The value given was %s.', concurrency);
	END IF;
	IF retry NOT IN ('exponential', 'fixed') THEN
		RAISE EXCEPTION 'argument "retry" must be ''exponential'' or ''fixed'''
			USING ERRCODE = '22023', DETAIL = pg_catalog.format('The value given was %L.', retry);
	END IF;
	SELECT f.prokind, f.pronargs, f.proargtypes INTO p FROM pg_catalog.pg_proc f WHERE f.oid = handler;
	IF NOT FOUND THEN
		RAISE EXCEPTION 'argument "handler": function with OID % does not exist', handler::oid
			USING ERRCODE = '42883';
	END IF;
	IF p.prokind NOT IN ('f', 'p') OR p.pronargs <> 1
	   OR p.proargtypes[0] <> '@extschema@.message[]'::pg_catalog.regtype THEN
		RAISE EXCEPTION 'argument "handler": % must be a function or procedure taking one argument of type queue.message[]',
			handler::text
			USING ERRCODE = '22023';
	END IF;
	IF NOT @extschema@._may(q, caller, 'receive') THEN
		RAISE EXCEPTION 'permission denied for queue "%"', queue_name
			USING ERRCODE = '42501',
			DETAIL = 'Creating a consumer needs the receive privilege on the queue.',
			HINT = pg_catalog.format('Its owner can run queue.grant(%L, <role>, ''{receive}'').', queue_name);
	END IF;
	IF NOT pg_catalog.has_function_privilege(caller, handler::oid, 'EXECUTE') THEN
		RAISE EXCEPTION 'permission denied for function %', handler::text
			USING ERRCODE = '42501',
			DETAIL = 'Creating a consumer needs the EXECUTE privilege on its handler.';
	END IF;
	/* Serialise creators of one name, so "idempotent" holds under races. */
	PERFORM pg_catalog.pg_advisory_xact_lock(pg_catalog.hashtext('queue.create_consumer:' || consumer_name));
	SELECT * INTO c FROM @extschema@._consumers r WHERE r.consumer_name = consumer_name;
	IF FOUND THEN
		IF (c.queue_id, c.handler::oid, c.batch_size, c.concurrency, c.retry)
		   IS NOT DISTINCT FROM (q.queue_id, handler::oid, batch_size, concurrency, retry) THEN
			RETURN c.consumer_id;
		END IF;
		RAISE EXCEPTION 'consumer "%" already exists with other attributes', consumer_name
			USING ERRCODE = '42710',
			HINT = 'Drop it first to change its attributes.';
	END IF;
	INSERT INTO @extschema@._consumers (consumer_name, queue_id, handler, owner, batch_size, concurrency, retry)
	VALUES (consumer_name, q.queue_id, handler, caller::regrole, batch_size, concurrency, retry)
	RETURNING * INTO c;
	PERFORM @extschema@._consumer_reset(c.consumer_id, c.queue_id);
	/* The worker re-reads the consumers (consumer_worker.c). */
	PERFORM @extschema@._invalidate('@extschema@._consumers'::regclass);
	RETURN c.consumer_id;
END
$$;
REVOKE ALL ON FUNCTION @extschema@._create_consumer(text, text, regprocedure, integer, integer, text, oid) FROM PUBLIC;
COMMENT ON FUNCTION @extschema@._create_consumer(text, text, regprocedure, integer, integer, text, oid) IS 'queue.create_consumer as the tables'' owner, for caller';

CREATE FUNCTION @extschema@._drop_consumer(consumer_name text, if_exists boolean, caller oid)
	RETURNS boolean LANGUAGE plpgsql SECURITY DEFINER
	SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_variable
DECLARE
	c @extschema@._consumers;
BEGIN
	PERFORM @extschema@._check_consumer_writable();
	IF if_exists IS NULL THEN
		RAISE EXCEPTION 'argument "if_exists" must not be null' USING ERRCODE = '22004';
	END IF;
	PERFORM @extschema@._check_name(consumer_name, 'consumer_name');
	SELECT * INTO c FROM @extschema@._consumers r WHERE r.consumer_name = consumer_name FOR UPDATE;
	IF NOT FOUND THEN
		IF if_exists THEN
			RETURN false;
		END IF;
		RAISE EXCEPTION 'consumer "%" does not exist', consumer_name USING ERRCODE = '42704';
	END IF;
	PERFORM @extschema@._check_consumer_owner(c, caller);
	DELETE FROM @extschema@._consumers r WHERE r.consumer_id = c.consumer_id;
	PERFORM @extschema@._invalidate('@extschema@._consumers'::regclass);
	RETURN true;
END
$$;
REVOKE ALL ON FUNCTION @extschema@._drop_consumer(text, boolean, oid) FROM PUBLIC;
COMMENT ON FUNCTION @extschema@._drop_consumer(text, boolean, oid) IS 'queue.drop_consumer as the tables'' owner, for caller';

CREATE FUNCTION @extschema@._set_consumer_paused(consumer_name text, paused boolean, caller oid)
	RETURNS void LANGUAGE plpgsql SECURITY DEFINER
	SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_variable
DECLARE
	c @extschema@._consumers;
BEGIN
	PERFORM @extschema@._check_consumer_writable();
	c := @extschema@._lookup_consumer(consumer_name, true);
	PERFORM @extschema@._check_consumer_owner(c, caller);
	UPDATE @extschema@._consumers r SET paused = paused WHERE r.consumer_id = c.consumer_id;
	PERFORM @extschema@._invalidate('@extschema@._consumers'::regclass);
END
$$;
REVOKE ALL ON FUNCTION @extschema@._set_consumer_paused(text, boolean, oid) FROM PUBLIC;
COMMENT ON FUNCTION @extschema@._set_consumer_paused(text, boolean, oid) IS 'pause or resume a consumer, for caller';

CREATE FUNCTION @extschema@._pause_consumer(consumer_name text, caller oid)
	RETURNS void LANGUAGE sql
	SET search_path = pg_catalog, pg_temp AS $$
	SELECT @extschema@._set_consumer_paused(consumer_name, true, caller)
$$;
REVOKE ALL ON FUNCTION @extschema@._pause_consumer(text, oid) FROM PUBLIC;
COMMENT ON FUNCTION @extschema@._pause_consumer(text, oid) IS 'queue.pause_consumer as the tables'' owner, for caller';

CREATE FUNCTION @extschema@._resume_consumer(consumer_name text, caller oid)
	RETURNS void LANGUAGE sql
	SET search_path = pg_catalog, pg_temp AS $$
	SELECT @extschema@._set_consumer_paused(consumer_name, false, caller)
$$;
REVOKE ALL ON FUNCTION @extschema@._resume_consumer(text, oid) FROM PUBLIC;
COMMENT ON FUNCTION @extschema@._resume_consumer(text, oid) IS 'queue.resume_consumer as the tables'' owner, for caller';

/* The API: administrative calls go through queue_admin_call (acl.c). */
CREATE FUNCTION @extschema@.create_consumer(consumer_name text, queue_name text, handler regprocedure,
	batch_size integer DEFAULT 1, concurrency integer DEFAULT 1, retry text DEFAULT 'exponential')
	RETURNS bigint LANGUAGE C AS 'MODULE_PATHNAME', 'queue_admin_call';
CREATE FUNCTION @extschema@.drop_consumer(consumer_name text, if_exists boolean DEFAULT false)
	RETURNS boolean LANGUAGE C AS 'MODULE_PATHNAME', 'queue_admin_call';
CREATE FUNCTION @extschema@.pause_consumer(consumer_name text)
	RETURNS void LANGUAGE C AS 'MODULE_PATHNAME', 'queue_admin_call';
CREATE FUNCTION @extschema@.resume_consumer(consumer_name text)
	RETURNS void LANGUAGE C AS 'MODULE_PATHNAME', 'queue_admin_call';
COMMENT ON FUNCTION @extschema@.create_consumer(text, text, regprocedure, integer, integer, text) IS 'make the worker call a handler with the queue''s messages, batch by batch (idempotent with the same attributes); returns its id';
COMMENT ON FUNCTION @extschema@.drop_consumer(text, boolean) IS 'drop a consumer (never its queue or handler)';
COMMENT ON FUNCTION @extschema@.pause_consumer(text) IS 'stop a consumer''s processes until resume_consumer';
COMMENT ON FUNCTION @extschema@.resume_consumer(text) IS 'start a paused consumer again';

/* A role sees the consumers of the queues it holds a privilege on. */
CREATE VIEW @extschema@.consumers WITH (security_barrier) AS
	SELECT c.consumer_name, q.queue_name, c.handler, c.owner AS role, c.batch_size, c.concurrency,
		   CASE WHEN c.paused THEN 'paused' WHEN s.failing THEN 'failing' ELSE 'running' END AS state,
		   s.processed, s.failed, s.last_error, s.last_error_at, s.last_success_at
	FROM @extschema@._consumers c
	JOIN @extschema@._queues q ON q.queue_id = c.queue_id
	LEFT JOIN @extschema@._consumer_stats() s ON s.consumer_id = c.consumer_id
	WHERE @extschema@._may_see(c.queue_id);
COMMENT ON VIEW @extschema@.consumers IS 'consumers of the queues the current role holds a privilege on, with their state and counters';
GRANT SELECT ON @extschema@.consumers TO PUBLIC;
