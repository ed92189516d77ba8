/* queue--1.3.1--1.3.2.sql: Amazon SQS's own API, served by PostgreSQL (issue 27) */

\echo Use "ALTER EXTENSION queue UPDATE TO '1.3.2'" to load this file. \quit

/*
 * 1.3.2 changes no message and no queue.  It adds what the SQS endpoint
 * (the queue_sqs library, src/sqs/) needs from the database: access keys
 * mapped to roles, the long-poll hint its workers read before they park a
 * request, and the record of message move tasks.  It is not 1.4, because
 * DESIGN.md keeps 1.4 for the storage rework.
 */


/* ------------------------------------------------------------------------
 * Long polls parked by the SQS endpoint (wait.c, core_api.h)
 * ------------------------------------------------------------------------
 */
CREATE FUNCTION @extschema@._wait_hint(queue_name text,
	OUT queue_id bigint, OUT generation bigint, OUT next_visible_at timestamptz)
	RETURNS record LANGUAGE C AS 'MODULE_PATHNAME', 'queue_wait_hint_sql';
COMMENT ON FUNCTION @extschema@._wait_hint(text) IS 'SQS endpoint: the queue id, its wait slot generation (read before a receive it may park) and when its next message turns visible; needs receive, like queue.receive, so it is executable as any API function is (the endpoint calls it as the key''s role)';
