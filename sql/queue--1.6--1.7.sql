/* queue--1.6--1.7.sql: message move tasks run in the background (issue 34) */

\echo Use "ALTER EXTENSION queue UPDATE TO '1.7'" to load this file. \quit

/*
 * The SQS endpoint's message move tasks (StartMessageMoveTask) no longer run
 * inside the request: the endpoint records a RUNNING task and the queue
 * worker moves its messages in slices (src/move_task.c).  A task is keyed by
 * its source queue's id, not its name, so a new queue of the same name sees
 * none of an old one's tasks, and a dropped queue's tasks go with it (the
 * foreign key).  The worker runs the task as the role that started it
 * (role), at max_per_second (null: as fast as the worker's slices allow),
 * over the messages whose ids are at most upto_id (the ids issued when the
 * task started: dead letters arriving later are not its business).
 *
 * The records of 1.6 were all COMPLETED (a move ran to its end inside the
 * request) and keyed by name: each comes through keyed by the id its source
 * queue has now, with no role (it never runs again); a record whose source
 * queue no longer exists is dropped, as a dropped queue's tasks are from 1.7.
 *
 * Not dumped (no pg_extension_config_dump), as in 1.6: a task does not
 * outlive its cluster, and a restored queue gets new message ids anyway.
 */
ALTER TABLE @extschema@._move_tasks RENAME TO _move_tasks_16;
ALTER INDEX @extschema@._move_tasks_pkey RENAME TO _move_tasks_16_pkey;

CREATE TABLE @extschema@._move_tasks (
	task_handle text PRIMARY KEY,
	source_queue_id bigint NOT NULL
		REFERENCES @extschema@._queues (queue_id) ON DELETE CASCADE,
	destination_queue_id bigint,
	destination_queue text,
	role oid,
	status text NOT NULL
		CHECK (status IN ('RUNNING', 'COMPLETED', 'CANCELLED', 'FAILED')),
	max_per_second integer CHECK (max_per_second BETWEEN 1 AND 500),
	moved bigint NOT NULL DEFAULT 0,
	to_move bigint,
	upto_id bigint,
	started_at timestamptz NOT NULL,
	ended_at timestamptz,
	failure_reason text,
	CHECK (status <> 'RUNNING' OR (role IS NOT NULL AND upto_id IS NOT NULL))
);
REVOKE ALL ON @extschema@._move_tasks FROM PUBLIC;
/* one RUNNING task per source queue, as SQS allows */
CREATE UNIQUE INDEX _move_tasks_running ON @extschema@._move_tasks (source_queue_id)
	WHERE status = 'RUNNING';
CREATE INDEX _move_tasks_source ON @extschema@._move_tasks (source_queue_id, started_at);
COMMENT ON TABLE @extschema@._move_tasks IS 'message move tasks of the SQS endpoint, run by the queue worker (not dumped: a task does not outlive its cluster)';
COMMENT ON COLUMN @extschema@._move_tasks.role IS 'the role the task runs as (the one that started it); null for tasks recorded before 1.7';
COMMENT ON COLUMN @extschema@._move_tasks.upto_id IS 'the task moves only messages whose ids are at most this (the last id issued when it started)';
COMMENT ON COLUMN @extschema@._move_tasks.destination_queue IS 'the destination''s name when the task started (null: each message''s source queue)';

INSERT INTO @extschema@._move_tasks (task_handle, source_queue_id, destination_queue_id,
	destination_queue, role, status, max_per_second, moved, to_move, upto_id, started_at,
	ended_at, failure_reason)
SELECT o.task_handle, s.queue_id, d.queue_id, o.destination_queue, NULL,
	   CASE WHEN o.status IN ('COMPLETED', 'CANCELLED', 'FAILED') THEN o.status ELSE 'COMPLETED' END,
	   NULL, o.moved, o.to_move, NULL, o.started_at, o.started_at, o.failure_reason
FROM @extschema@._move_tasks_16 o
JOIN @extschema@._queues s ON s.queue_name = o.source_queue
LEFT JOIN @extschema@._queues d ON d.queue_name = o.destination_queue;

DROP TABLE @extschema@._move_tasks_16;

/* ---------------------------------------------------------------------
 * Message ids as UUIDs (issue 36): the SQS endpoint answers MessageIds as
 * UUIDs, as SQS does, mapped one to one onto message_id (src/sqs/actions.c
 * computes the same mapping): 00000000-HHHH-4000-8000-LLLLLLLLLLLL, HHHH the
 * id's top 16 bits and L its low 48, in hex.  These two functions convert,
 * so a MessageId seen over HTTP and a message_id seen in SQL can be matched
 * (and kept in uuid columns).  Pure functions of their argument: nothing is
 * stored, so nothing changes across pg_dump and restore.
 * ---------------------------------------------------------------------
 */
CREATE FUNCTION @extschema@.message_uuid(message_id bigint)
	RETURNS uuid LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
	SET search_path = pg_catalog, pg_temp
	RETURN ('00000000-' OPERATOR(pg_catalog.||)
			pg_catalog.lpad(pg_catalog.to_hex((message_id OPERATOR(pg_catalog.>>) 48)
				OPERATOR(pg_catalog.&) 65535), 4, '0') OPERATOR(pg_catalog.||)
			'-4000-8000-' OPERATOR(pg_catalog.||)
			pg_catalog.lpad(pg_catalog.to_hex(message_id OPERATOR(pg_catalog.&)
				281474976710655::bigint), 12, '0'))::uuid;
COMMENT ON FUNCTION @extschema@.message_uuid(bigint) IS 'a message id as the SQS endpoint''s MessageId (a UUID)';

CREATE FUNCTION @extschema@.message_id(message_uuid uuid)
	RETURNS bigint LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
	SET search_path = pg_catalog, pg_temp
	RETURN CASE WHEN pg_catalog.substr(message_uuid::text, 1, 9) OPERATOR(pg_catalog.=) '00000000-'
				 AND pg_catalog.substr(message_uuid::text, 14, 11) OPERATOR(pg_catalog.=) '-4000-8000-'
		THEN ('x' OPERATOR(pg_catalog.||) pg_catalog.substr(message_uuid::text, 10, 4)
			  OPERATOR(pg_catalog.||) pg_catalog.substr(message_uuid::text, 25, 12))::bit(64)::bigint
		END;
COMMENT ON FUNCTION @extschema@.message_id(uuid) IS 'the message id of an SQS endpoint''s MessageId (null: not one of ours)';

/* ---------------------------------------------------------------------
 * SQS's encryption attributes of a queue (issue 36): SqsManagedSseEnabled,
 * KmsMasterKeyId and KmsDataKeyReusePeriodSeconds, which infrastructure
 * code (CDK, CloudFormation) sends, are accepted by the SQS endpoint and
 * reported back as they were set; they change nothing (docs/sqs-api.md
 * "What differs from AWS" says what is encrypted at rest).  Written and
 * read only by the endpoint, as the tables' owner, after the SQL API
 * checked the caller's rights; dumped, and gone with their queue.
 * ---------------------------------------------------------------------
 */
CREATE TABLE @extschema@._sqs_attributes (
	queue_id bigint PRIMARY KEY REFERENCES @extschema@._queues ON DELETE CASCADE,
	attributes jsonb NOT NULL
);
REVOKE ALL ON @extschema@._sqs_attributes FROM PUBLIC;
SELECT pg_catalog.pg_extension_config_dump('@extschema@._sqs_attributes', '');
COMMENT ON TABLE @extschema@._sqs_attributes IS 'SQS queue attributes kept for the SQS endpoint only (encryption settings, as set; not enforced)';
