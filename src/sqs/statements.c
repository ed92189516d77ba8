/*-------------------------------------------------------------------------
 *
 * statements.c
 *	  The SQS actions' statements of the SQL API (actions.h's PlanKind):
 *	  each schema-qualified, its input as parameters only, prepared once
 *	  per backend and kept (plan_defs, SPI_keepplan); their runs, as the
 *	  caller's role (sqs_run), as the tables' owner for the records the
 *	  caller may not write itself (sqs_run_as_owner: the move tasks, the
 *	  encryption attributes), or in a subtransaction whose error is
 *	  returned (sqs_run_in_subxact: a batch entry's, a settle's); reading a
 *	  result's columns; a queue's row of queue.queues as the caller sees it
 *	  and its depth (queue.stats).
 *
 * May call: SPI, PostgreSQL, wire.c (sqs_fail).  Called by: every action
 * room (queues.c, attributes.c, send.c, receive.c, settle.c,
 * move_tasks.c).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "catalog/pg_authid.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/memutils.h"
#include "utils/resowner.h"
#include "utils/timestamp.h"

#include "common/compat.h"
#include "actions.h"

/* ---------------------------------------------------------------------
 * Statements, prepared once per backend and kept
 * ---------------------------------------------------------------------
 */
typedef struct PlanDef
{
	const char *sql;
	int			nargs;
	Oid			types[14];
} PlanDef;

static const PlanDef plan_defs[P_NUM] = {
	[P_CREATE] = {
		"SELECT queue.create(queue_name => $1, fifo => $2, visibility_timeout => $3,"
		" delay => $4, retention => $5, max_message_size => $6, receive_wait => $7,"
		" content_based_deduplication => $8, deduplication_scope => $9,"
		" dead_letter_queue => $10, max_receive_count => $11, redrive_allow => $12,"
		" tags => $13)",
		13, {TEXTOID, BOOLOID, INTERVALOID, INTERVALOID, INTERVALOID, INT4OID,
			INTERVALOID, BOOLOID, TEXTOID, TEXTOID, INT4OID, TEXTARRAYOID, JSONBOID}
	},
	[P_ALTER] = {
		"SELECT queue.alter(queue_name => $1, visibility_timeout => $2, delay => $3,"
		" retention => $4, max_message_size => $5, receive_wait => $6,"
		" content_based_deduplication => $7, deduplication_scope => $8,"
		" dead_letter_queue => $9, max_receive_count => $10, redrive_allow => $11)",
		11, {TEXTOID, INTERVALOID, INTERVALOID, INTERVALOID, INT4OID, INTERVALOID,
			BOOLOID, TEXTOID, TEXTOID, INT4OID, TEXTARRAYOID}
	},
	/* forced: SQS deletes a queue that is another's dead-letter queue */
	[P_DROP] = {"SELECT queue.drop(queue_name => $1, force => true)", 1, {TEXTOID}},
	[P_PURGE] = {"SELECT queue.purge(queue_name => $1)", 1, {TEXTOID}},
	[P_QUEUE] = {
		"SELECT q.queue_name, q.fifo, q.visibility_timeout, q.delay, q.retention,"
		" q.max_message_size, q.receive_wait, q.content_based_deduplication,"
		" q.deduplication_scope, q.dead_letter_queue, q.max_receive_count,"
		" q.redrive_allow, q.tags, q.created_at"
		" FROM queue.queues q WHERE q.queue_name OPERATOR(pg_catalog.=) $1",
		1, {TEXTOID}
	},
	[P_LIST] = {
		"SELECT q.queue_name FROM queue.queues q"
		" WHERE ($1::pg_catalog.text IS NULL OR pg_catalog.starts_with(q.queue_name, $1))"
		" AND ($2::pg_catalog.text IS NULL"
		"  OR q.queue_name COLLATE pg_catalog.\"C\" OPERATOR(pg_catalog.>) $2)"
		" ORDER BY q.queue_name COLLATE pg_catalog.\"C\" LIMIT $3",
		3, {TEXTOID, TEXTOID, INT8OID}
	},
	[P_DLQ_SOURCES] = {
		"SELECT q.queue_name FROM queue.queues q"
		" WHERE q.dead_letter_queue OPERATOR(pg_catalog.=) $1"
		" AND ($2::pg_catalog.text IS NULL"
		"  OR q.queue_name COLLATE pg_catalog.\"C\" OPERATOR(pg_catalog.>) $2)"
		" ORDER BY q.queue_name COLLATE pg_catalog.\"C\" LIMIT $3",
		3, {TEXTOID, TEXTOID, INT8OID}
	},
	[P_STATS] = {
		"SELECT s.visible, s.in_flight, s.delayed FROM queue.stats s"
		" WHERE s.queue_name OPERATOR(pg_catalog.=) $1",
		1, {TEXTOID}
	},
	[P_SEND] = {
		"SELECT s.message_id, s.sequence_number, s.duplicate"
		" FROM queue.send(queue_name => $1, body => $2, delay => $3,"
		" message_group_id => $4, deduplication_id => $5, attributes => $6) s",
		6, {TEXTOID, TEXTOID, INTERVALOID, TEXTOID, TEXTOID, JSONBOID}
	},
	[P_SEND_BATCH] = {
		"SELECT s.ordinal, s.message_id, s.sequence_number, s.duplicate"
		" FROM queue.send_batch(queue_name => $1, bodies => $2, delay => $3,"
		" message_group_ids => $4, deduplication_ids => $5, attributes => $6) s",
		6, {TEXTOID, TEXTARRAYOID, INTERVALOID, TEXTARRAYOID, TEXTARRAYOID, JSONBARRAYOID}
	},
	[P_WAIT_HINT] = {
		"SELECT h.queue_id, h.generation, h.next_visible_at FROM queue._wait_hint($1) h",
		1, {TEXTOID}
	},
	[P_RECEIVE] = {
		"SELECT m.message_id, m.receipt, m.body, m.attributes, m.message_group_id,"
		" m.deduplication_id, m.sequence_number, m.receive_count, m.sent_at,"
		" m.first_received_at"
		" FROM queue.receive(queue_name => $1, max_messages => $2,"
		" visibility_timeout => $3, wait => '0'::pg_catalog.interval,"
		" receive_attempt_id => $4) m",
		4, {TEXTOID, INT4OID, INTERVALOID, TEXTOID}
	},
	[P_DELETE] = {"SELECT queue.delete(queue_name => $1, receipt => $2)", 2, {TEXTOID, TEXTOID}},
	[P_CHANGE_VIS] = {
		"SELECT queue.change_visibility(queue_name => $1, receipt => $2, visibility_timeout => $3)",
		3, {TEXTOID, TEXTOID, INTERVALOID}
	},
	[P_TAG] = {
		"SELECT queue.alter(queue_name => $1, tags => (SELECT q.tags FROM queue.queues q"
		" WHERE q.queue_name OPERATOR(pg_catalog.=) $1) OPERATOR(pg_catalog.||) $2)",
		2, {TEXTOID, JSONBOID}
	},
	[P_UNTAG] = {
		"SELECT queue.alter(queue_name => $1, tags => (SELECT q.tags FROM queue.queues q"
		" WHERE q.queue_name OPERATOR(pg_catalog.=) $1) OPERATOR(pg_catalog.-) $2)",
		2, {TEXTOID, TEXTARRAYOID}
	},
	/* the move tasks' records are the tables' owner's: sqs_run_as_owner */
	[P_TASK_SOURCE] = {
		"SELECT q.queue_id, q.fifo, EXISTS (SELECT FROM queue._queues s"
		"  WHERE s.dead_letter_queue OPERATOR(pg_catalog.=) q.queue_id),"
		" queue._may(q, $2, 'manage'), queue._may(q, $2, 'send')"
		" FROM queue._queues q WHERE q.queue_name OPERATOR(pg_catalog.=) $1",
		2, {TEXTOID, OIDOID}
	},
	[P_TASK_ADD] = {
		"INSERT INTO queue._move_tasks (task_handle, source_queue_id, destination_queue_id,"
		" destination_queue, role, status, max_per_second, moved, to_move, upto_id, started_at)"
		" VALUES ($1, $2, $3, $4, $5, 'RUNNING', $6, 0, $7,"
		" COALESCE(pg_catalog.pg_sequence_last_value("
		"  'queue_data.message_id_seq'::pg_catalog.regclass), 0::pg_catalog.int8), $8)"
		" ON CONFLICT (source_queue_id) WHERE status OPERATOR(pg_catalog.=) 'RUNNING' DO NOTHING"
		" RETURNING task_handle",
		8, {TEXTOID, INT8OID, INT8OID, TEXTOID, OIDOID, INT4OID, INT8OID, TIMESTAMPTZOID}
	},
	[P_TASK_PRUNE] = {
		"DELETE FROM queue._move_tasks t WHERE t.source_queue_id OPERATOR(pg_catalog.=) $1"
		" AND t.status OPERATOR(pg_catalog.<>) 'RUNNING'"
		" AND t.task_handle OPERATOR(pg_catalog.<>) ALL (ARRAY(SELECT x.task_handle"
		"  FROM queue._move_tasks x WHERE x.source_queue_id OPERATOR(pg_catalog.=) $1"
		"  ORDER BY x.started_at DESC, x.task_handle LIMIT $2))",
		2, {INT8OID, INT8OID}
	},
	[P_TASK_LIST] = {
		"SELECT t.task_handle, t.destination_queue, t.status, t.moved, t.to_move,"
		" t.started_at, t.failure_reason, t.max_per_second FROM queue._move_tasks t"
		" WHERE t.source_queue_id OPERATOR(pg_catalog.=) $1"
		" ORDER BY t.started_at DESC, t.task_handle LIMIT $2",
		2, {INT8OID, INT8OID}
	},
	[P_TASK_CANCEL] = {
		"UPDATE queue._move_tasks t SET status = 'CANCELLED', ended_at = pg_catalog.now()"
		" FROM queue._queues q WHERE t.task_handle OPERATOR(pg_catalog.=) $1"
		" AND t.status OPERATOR(pg_catalog.=) 'RUNNING'"
		" AND q.queue_id OPERATOR(pg_catalog.=) t.source_queue_id"
		" AND t.source_queue_id OPERATOR(pg_catalog.=) $3"
		" AND queue._may(q, $2, 'manage') RETURNING t.moved",
		3, {TEXTOID, OIDOID, INT8OID}
	},
	/*
	 * SQS's encryption attributes, kept as given (queue._sqs_attributes is
	 * the tables' owner's: sqs_run_as_owner, after queue.create or queue.alter
	 * checked the caller's rights in the same transaction)
	 */
	[P_SSE_SET] = {
		"INSERT INTO queue._sqs_attributes AS a (queue_id, attributes)"
		" SELECT q.queue_id, $2 FROM queue._queues q WHERE q.queue_name OPERATOR(pg_catalog.=) $1"
		" ON CONFLICT (queue_id) DO UPDATE"
		" SET attributes = a.attributes OPERATOR(pg_catalog.||) EXCLUDED.attributes",
		2, {TEXTOID, JSONBOID}
	},
	[P_SSE_GET] = {
		"SELECT a.attributes FROM queue._sqs_attributes a JOIN queue._queues q"
		" ON q.queue_id OPERATOR(pg_catalog.=) a.queue_id"
		" WHERE q.queue_name OPERATOR(pg_catalog.=) $1",
		1, {TEXTOID}
	},
};

static SPIPlanPtr plans[P_NUM];

/* Run a statement kind, preparing it the first time. */
void
sqs_run(PlanKind k, Datum *values, const char *nulls)
{
	int			rc;

	if (plans[k] == NULL)
	{
		SPIPlanPtr	p = SPI_prepare(plan_defs[k].sql, plan_defs[k].nargs,
									(Oid *) plan_defs[k].types);

		if (p == NULL)
			elog(ERROR, "SQS endpoint: could not prepare statement %d: %s",
				 (int) k, SPI_result_code_string(SPI_result));
		if (SPI_keepplan(p) != 0)
			elog(ERROR, "SQS endpoint: could not keep statement %d", (int) k);
		plans[k] = p;
	}
	rc = SPI_execute_plan(plans[k], values, nulls, false, 0);
	if (rc < 0)
		elog(ERROR, "SQS endpoint: statement %d failed: %s",
			 (int) k, SPI_result_code_string(rc));
}

/* Run a statement as the bootstrap superuser (the move task records). */
void
sqs_run_as_owner(PlanKind k, Datum *values, const char *nulls)
{
	Oid			saved_uid;
	int			saved_sec;

	GetUserIdAndSecContext(&saved_uid, &saved_sec);
	SetUserIdAndSecContext(BOOTSTRAP_SUPERUSERID,
						   saved_sec | SECURITY_LOCAL_USERID_CHANGE);
	PG_TRY();
	{
		sqs_run(k, values, nulls);
	}
	PG_FINALLY();
	{
		SetUserIdAndSecContext(saved_uid, saved_sec);
	}
	PG_END_TRY();
}

/*
 * Run a statement in a subtransaction: NULL when it succeeded (its result
 * in SPI_tuptable), else the error it raised, rolled back.
 */
ErrorData *
sqs_run_in_subxact(PlanKind k, Datum *values, const char *nulls, bool *result)
{
	MemoryContext oldcxt = CurrentMemoryContext;
	ResourceOwner oldowner = CurrentResourceOwner;
	ErrorData  *volatile edata = NULL;

	BeginInternalSubTransaction(NULL);
	MemoryContextSwitchTo(oldcxt);
	PG_TRY();
	{
		sqs_run(k, values, nulls);
		if (result != NULL)
		{
			bool		isnull;
			Datum		d = SPI_processed > 0 ?
				SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull) : (Datum) 0;

			*result = SPI_processed > 0 && !isnull && DatumGetBool(d);
		}
		ReleaseCurrentSubTransaction();
		MemoryContextSwitchTo(oldcxt);
		CurrentResourceOwner = oldowner;
	}
	PG_CATCH();
	{
		MemoryContextSwitchTo(oldcxt);
		edata = CopyErrorData();
		FlushErrorState();
		RollbackAndReleaseCurrentSubTransaction();
		MemoryContextSwitchTo(oldcxt);
		CurrentResourceOwner = oldowner;

		/*
		 * A lock wait or the request's time running out is the request's,
		 * not the entry's: the whole request is retried or refused
		 * (protocol.c's bounds).
		 */
		if (edata->sqlerrcode == ERRCODE_LOCK_NOT_AVAILABLE ||
			edata->sqlerrcode == ERRCODE_QUERY_CANCELED)
			ReThrowError(edata);
	}
	PG_END_TRY();
	return edata;
}

/* ---------------------------------------------------------------------
 * A statement's result, a queue's row and depth
 * ---------------------------------------------------------------------
 */
static int64
interval_secs(Datum d)
{
	Interval   *iv = DatumGetIntervalP(d);

	return iv->time / USECS_PER_SEC + (int64) iv->day * SECS_PER_DAY +
		(int64) iv->month * DAYS_PER_MONTH * SECS_PER_DAY;
}

void
sqs_check_result_cols(int n)
{
	if (SPI_tuptable == NULL || SPI_tuptable->tupdesc->natts < n)
		elog(ERROR, "SQS endpoint: unexpected result shape");
}

Datum
sqs_col(uint64 row, int c, bool *isnull)
{
	return SPI_getbinval(SPI_tuptable->vals[row], SPI_tuptable->tupdesc, c, isnull);
}

char *
sqs_col_text(uint64 row, int c)
{
	bool		isnull;
	Datum		d = sqs_col(row, c, &isnull);

	return isnull ? NULL : TextDatumGetCString(d);
}

/* Look a queue up as the caller sees it; false when it may not see it. */
bool
sqs_fetch_queue(const char *name, QueueRow *q)
{
	Datum		v[1] = {CStringGetTextDatum(name)};
	bool		isnull;
	Datum		d;

	sqs_run(P_QUEUE, v, NULL);
	if (SPI_processed == 0)
		return false;
	sqs_check_result_cols(14);
	q->name = sqs_col_text(0, 1);
	q->fifo = DatumGetBool(sqs_col(0, 2, &isnull));
	q->visibility = interval_secs(sqs_col(0, 3, &isnull));
	q->delay = interval_secs(sqs_col(0, 4, &isnull));
	q->retention = interval_secs(sqs_col(0, 5, &isnull));
	q->max_message_size = DatumGetInt32(sqs_col(0, 6, &isnull));
	q->receive_wait = interval_secs(sqs_col(0, 7, &isnull));
	q->cbd = DatumGetBool(sqs_col(0, 8, &isnull));
	q->scope = sqs_col_text(0, 9);
	q->dlq = sqs_col_text(0, 10);
	d = sqs_col(0, 11, &isnull);
	q->max_receive_count = isnull ? 0 : DatumGetInt32(d);
	d = sqs_col(0, 12, &isnull);
	q->allow_null = isnull;
	q->nallow = 0;
	if (!isnull)
	{
		Datum	   *elems;
		bool	   *nulls;

		deconstruct_array(DatumGetArrayTypeP(d), TEXTOID, -1, false, TYPALIGN_INT,
						  &elems, &nulls, &q->nallow);
		q->allow = palloc0(Max(q->nallow, 1) * sizeof(char *));
		for (int i = 0; i < q->nallow; i++)
			q->allow[i] = nulls[i] ? "" : TextDatumGetCString(elems[i]);
	}
	d = sqs_col(0, 13, &isnull);
	q->tags = isnull ? NULL : DatumGetJsonbPCopy(d);
	q->created_at = DatumGetTimestampTz(sqs_col(0, 14, &isnull));
	return true;
}

void
sqs_need_queue(const char *name, QueueRow *q)
{
	if (!sqs_fetch_queue(name, q))
		sqs_fail(SQS_ERR_QUEUE_DOES_NOT_EXIST, "The specified queue does not exist.");
}

/*
 * A queue's visible, in-flight and delayed counts from queue.stats
 * (ApproximateNumberOfMessages*, a move task's messages to move).
 */
void
sqs_queue_depth(const char *name, int64 *counts)
{
	Datum		v[1] = {CStringGetTextDatum(name)};

	counts[0] = counts[1] = counts[2] = 0;
	sqs_run(P_STATS, v, NULL);
	if (SPI_processed == 0)
		return;
	sqs_check_result_cols(3);
	for (int c = 0; c < 3; c++)
	{
		bool		isnull;
		Datum		d = sqs_col(0, c + 1, &isnull);

		counts[c] = isnull ? 0 : DatumGetInt64(d);
	}
}
