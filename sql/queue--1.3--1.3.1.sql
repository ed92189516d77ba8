/* queue--1.3--1.3.1.sql: what runs in the background is safe (issue 23) */

\echo Use "ALTER EXTENSION queue UPDATE TO '1.3.1'" to load this file. \quit

/*
 * 1.3.1 changes no message and no queue.  It is numbered 1.3.1, not 1.4,
 * because DESIGN.md keeps 1.4 for the storage rework.  What it adds:
 *  - consumers keep the search_path their creator had at create_consumer
 *    (the handler runs under it) and show it in queue.consumers, with the
 *    state 'waiting' when no process is free for them;
 *  - roles that own a consumer or a subscription cannot be dropped.
 */


/* ------------------------------------------------------------------------
 * Consumers: the creator's search_path, and the state 'waiting'
 * (consumer_worker.c, consumer_tend.c, elevated.c)
 * ------------------------------------------------------------------------
 */

/*
 * The handler runs under the search_path its creator had at
 * create_consumer, so a handler naming its tables unqualified works as it
 * did when its author tried it.  Consumers made before 1.3.1 take
 * PostgreSQL's default.
 */
ALTER TABLE @extschema@._consumers ADD COLUMN search_path text NOT NULL DEFAULT '"$user", public';
ALTER TABLE @extschema@._consumers ALTER COLUMN search_path DROP DEFAULT;

CREATE FUNCTION @extschema@._caller_search_path()
	RETURNS text LANGUAGE C AS 'MODULE_PATHNAME', 'queue_caller_search_path_sql';
REVOKE ALL ON FUNCTION @extschema@._caller_search_path() FROM PUBLIC;
COMMENT ON FUNCTION @extschema@._caller_search_path() IS 'the search_path of the session calling the administrative function now running (create_consumer keeps it)';

/* 1.3's body, which now stores the creator's search_path. */
CREATE OR REPLACE FUNCTION @extschema@._create_consumer(consumer_name text, queue_name text, handler regprocedure,
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
	INSERT INTO @extschema@._consumers (consumer_name, queue_id, handler, owner, batch_size, concurrency, retry,
		search_path)
	VALUES (consumer_name, q.queue_id, handler, caller::regrole, batch_size, concurrency, retry,
		COALESCE(@extschema@._caller_search_path(), '"$user", public'))
	RETURNING * INTO c;
	PERFORM @extschema@._consumer_reset(c.consumer_id, c.queue_id);
	/* The worker re-reads the consumers (consumer_worker.c). */
	PERFORM @extschema@._invalidate('@extschema@._consumers'::regclass);
	RETURN c.consumer_id;
END
$$;

/* The shared counters gain why a consumer waits for a process (null: it does not). */
DROP VIEW @extschema@.consumers;
DROP FUNCTION @extschema@._consumer_stats();
CREATE FUNCTION @extschema@._consumer_stats(OUT consumer_id bigint, OUT processed bigint,
	OUT failed bigint, OUT failing boolean, OUT last_error text, OUT last_error_at timestamptz,
	OUT last_success_at timestamptz, OUT waiting text)
	RETURNS SETOF record LANGUAGE C STABLE AS 'MODULE_PATHNAME', 'queue_consumer_stats_sql';
COMMENT ON FUNCTION @extschema@._consumer_stats() IS 'runtime counters of the consumers of queues the current role holds a privilege on (none without preload)';

/*
 * A role sees the consumers of the queues it holds a privilege on.  state:
 * paused, failing (the last batch with messages failed), waiting (no
 * process free for it: last_error says why), running.
 */
CREATE VIEW @extschema@.consumers WITH (security_barrier) AS
	SELECT c.consumer_name, q.queue_name, c.handler, c.owner AS role, c.search_path, c.batch_size,
		   c.concurrency,
		   CASE WHEN c.paused THEN 'paused' WHEN s.failing THEN 'failing'
				WHEN s.waiting IS NOT NULL THEN 'waiting' ELSE 'running' END AS state,
		   s.processed, s.failed,
		   CASE WHEN s.waiting IS NOT NULL AND NOT c.paused AND NOT s.failing
				THEN s.waiting ELSE s.last_error END AS last_error,
		   s.last_error_at, s.last_success_at
	FROM @extschema@._consumers c
	JOIN @extschema@._queues q ON q.queue_id = c.queue_id
	LEFT JOIN @extschema@._consumer_stats() s ON s.consumer_id = c.consumer_id
	WHERE @extschema@._may_see(c.queue_id);
COMMENT ON VIEW @extschema@.consumers IS 'consumers of the queues the current role holds a privilege on, with their state and counters';
GRANT SELECT ON @extschema@.consumers TO PUBLIC;
