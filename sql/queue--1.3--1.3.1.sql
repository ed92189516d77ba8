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
CREATE FUNCTION @extschema@._caller_search_path()
	RETURNS text LANGUAGE C AS 'MODULE_PATHNAME', 'queue_caller_search_path_sql';
REVOKE ALL ON FUNCTION @extschema@._caller_search_path() FROM PUBLIC;
COMMENT ON FUNCTION @extschema@._caller_search_path() IS 'the search_path of the session calling the administrative function now running (create_consumer keeps it)';

/*
 * _create_consumer (1.3) inserts the row without naming the column: the
 * default takes the caller's search_path, or PostgreSQL's default when no
 * administrative call is running (this update, a restore's COPY names the
 * column).
 */
ALTER TABLE @extschema@._consumers ADD COLUMN search_path text NOT NULL
	DEFAULT COALESCE(@extschema@._caller_search_path(), '"$user", public');

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
