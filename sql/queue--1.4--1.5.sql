/* queue--1.4--1.5.sql: create and drop among 100,000 queues (issue 25) */

\echo Use "ALTER EXTENSION queue UPDATE TO '1.5'" to load this file. \quit

/*
 * What a shared queue's create spends besides its commit went mostly to
 * interpreting: six interval checks in PL/pgSQL, each with its own
 * search_path, one of them wrapped in an SQL function planned afresh per
 * call, and a PL/pgSQL trigger that read the ACL of queue._queue_roles
 * through aclexplode for every row.  The same checks and the same trigger,
 * with the same messages and SQLSTATEs, in C (args.c, role_refs.c).
 * REVOKEs and comments of the replaced functions stay as they were.
 */

CREATE OR REPLACE FUNCTION @extschema@._check_interval(val interval, argname text, lo interval, hi interval)
	RETURNS void LANGUAGE C IMMUTABLE
	AS 'MODULE_PATHNAME', 'queue_check_interval_sql';

CREATE OR REPLACE FUNCTION @extschema@._check_retry_delay(retry_delay interval)
	RETURNS void LANGUAGE C IMMUTABLE
	AS 'MODULE_PATHNAME', 'queue_check_retry_delay_sql';

CREATE OR REPLACE FUNCTION @extschema@._queue_roles_trigger()
	RETURNS trigger LANGUAGE C SECURITY DEFINER
	SET search_path = pg_catalog, pg_temp
	AS 'MODULE_PATHNAME', 'queue_queue_roles_trigger';

/*
 * A drop (and a forced one's sources) looks for the queues whose
 * dead-letter queue it is, three times: without an index each look read the
 * whole registry, which with 100,000 queues made a drop take some 25 ms.
 */
CREATE INDEX _queues_dead_letter_queue ON @extschema@._queues (dead_letter_queue)
	WHERE dead_letter_queue IS NOT NULL;
