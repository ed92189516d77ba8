/*-------------------------------------------------------------------------
 *
 * receive.c
 *	  queue.receive and queue.peek.
 *
 * A receive leases up to max_messages visible messages: one UPDATE that
 * takes them with FOR UPDATE SKIP LOCKED (each visible message goes to
 * exactly one caller), pushes their visible_at to the end of the lease,
 * counts the receive and stamps a new receipt nonce.  Rolled back, it
 * leaves the messages as they were: visible at once.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "catalog/pg_type.h"
#include "utils/array.h"
#include "executor/spi.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"

#include "queue.h"

PG_FUNCTION_INFO_V1(queue_receive);
PG_FUNCTION_INFO_V1(queue_peek);

/* Columns of the RETURNING / SELECT lists of plans.c, 1-based. */
#define COL_MESSAGE_ID		1
#define COL_BODY			2
#define COL_ATTRIBUTES		3
#define COL_GROUP			4
#define COL_DEDUP			5
#define COL_SEQUENCE		6
#define COL_RECEIVE_COUNT	7
#define COL_SENT_AT			8
#define COL_FIRST_RECEIVED	9
#define COL_VISIBLE_AT		10

/* queue.message has 11 columns: the above plus receipt as the second. */
#define MESSAGE_NATTS		11

/*
 * Copy rows of an SPI result into the caller's tuplestore as queue.message,
 * with a receipt per row when with_receipt.
 */
static void
emit_messages(ReturnSetInfo *rsinfo, QueueMeta *q, SPITupleTable *tt,
			  uint64 nrows, bool with_receipt, uint64 nonce)
{
	TupleDesc	src = tt->tupdesc;

	for (uint64 r = 0; r < nrows; r++)
	{
		HeapTuple	tup = tt->vals[r];
		Datum		values[MESSAGE_NATTS];
		bool		nulls[MESSAGE_NATTS];
		int			out = 0;

		for (int col = 1; col <= COL_VISIBLE_AT; col++)
		{
			values[out] = SPI_getbinval(tup, src, col, &nulls[out]);
			out++;
			if (col == COL_MESSAGE_ID)
			{
				/* the receipt goes right after message_id */
				if (with_receipt)
				{
					values[out] = PointerGetDatum(
						queue_receipt_make(q->id, DatumGetInt64(values[0]), nonce));
					nulls[out] = false;
				}
				else
				{
					values[out] = (Datum) 0;
					nulls[out] = true;
				}
				out++;
			}
		}
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
}

/*
 * A retry of a receive_attempt_id seen within RECEIVE_ATTEMPT_WINDOW: if
 * every message it returned is still leased under that receive, unchanged,
 * emit them again with the same receipts and return true.
 */
#define RECEIVE_ATTEMPT_WINDOW	(5 * USECS_PER_MINUTE)

static bool
replay_attempt(ReturnSetInfo *rsinfo, QueueMeta *q, text *attempt,
			   TimestampTz now)
{
	Datum		args[2];
	bool		isnull;
	uint64		nonce;
	Datum		ids;
	ArrayType  *vis;
	Datum	   *vis_elems;
	int			nvis;
	int			rc;

	args[0] = PointerGetDatum(attempt);
	args[1] = TimestampTzGetDatum(now - RECEIVE_ATTEMPT_WINDOW);
	rc = SPI_execute_plan(queue_plan(q, QP_ATTEMPT_GET), args, NULL, false, 1);
	if (rc != SPI_OK_SELECT)
		elog(ERROR, "receive attempt lookup failed: %s", SPI_result_code_string(rc));
	if (SPI_processed == 0)
		return false;
	nonce = (uint64) DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
	ids = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 2, &isnull);
	vis = DatumGetArrayTypeP(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 3, &isnull));
	deconstruct_array(vis, TIMESTAMPTZOID, 8, FLOAT8PASSBYVAL, TYPALIGN_DOUBLE,
					  &vis_elems, NULL, &nvis);

	args[0] = ids;
	args[1] = Int64GetDatum((int64) nonce);
	rc = SPI_execute_plan(queue_plan(q, QP_ATTEMPT_MSGS), args, NULL, false, 0);
	if (rc != SPI_OK_SELECT)
		elog(ERROR, "receive attempt replay failed: %s", SPI_result_code_string(rc));
	if (SPI_processed != (uint64) nvis)
		return false;			/* one was deleted or received again */
	for (int i = 0; i < nvis; i++)
		if (DatumGetTimestampTz(SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc,
											  COL_VISIBLE_AT, &isnull)) !=
			DatumGetTimestampTz(vis_elems[i]))
			return false;		/* its visibility was changed */
	emit_messages(rsinfo, q, SPI_tuptable, SPI_processed, true, nonce);
	return true;
}

/* Remember what a receive with a receive_attempt_id returned. */
static void
record_attempt(QueueMeta *q, text *attempt, TimestampTz now, uint64 nonce,
			   SPITupleTable *tt, uint64 nrows)
{
	int64	   *ids = palloc(nrows * sizeof(int64));
	Datum	   *vis = palloc(nrows * sizeof(Datum));
	Datum		args[5];
	int			rc;

	for (uint64 r = 0; r < nrows; r++)
	{
		bool		isnull;

		ids[r] = DatumGetInt64(SPI_getbinval(tt->vals[r], tt->tupdesc, COL_MESSAGE_ID, &isnull));
		vis[r] = SPI_getbinval(tt->vals[r], tt->tupdesc, COL_VISIBLE_AT, &isnull);
	}
	args[0] = PointerGetDatum(attempt);
	args[1] = TimestampTzGetDatum(now);
	args[2] = Int64GetDatum((int64) nonce);
	args[3] = queue_int8_array((int) nrows, ids);
	args[4] = PointerGetDatum(construct_array(vis, (int) nrows, TIMESTAMPTZOID, 8,
											  FLOAT8PASSBYVAL, TYPALIGN_DOUBLE));
	rc = SPI_execute_plan(queue_plan(q, QP_ATTEMPT_PUT), args, NULL, false, 0);
	if (rc != SPI_OK_INSERT)
		elog(ERROR, "recording receive attempt failed: %s", SPI_result_code_string(rc));
}

/*
 * queue.receive(queue_name, max_messages, visibility_timeout, wait,
 *				 receive_attempt_id)
 */
Datum
queue_receive(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	QueueMeta  *q;
	int32		max_messages;
	int64		vt;
	int64		wait;
	text	   *attempt;
	uint64		nonce;
	TimestampTz deadline = 0;
	TimestampTz now;
	SPITupleTable *tt;
	uint64		nrows;
	int			rc;

	queue_arg_notnull(fcinfo, 0, "queue_name");
	max_messages = queue_arg_int(fcinfo, 1, "max_messages", 1,
								 QUEUE_MAX_MESSAGES, -1);
	attempt = queue_arg_token(fcinfo, 4, "receive_attempt_id");
	queue_check_read_write();
	InitMaterializedSRF(fcinfo, MAT_SRF_USE_EXPECTED_DESC);

	SPI_connect();
	q = queue_lookup(PG_GETARG_TEXT_PP(0));
	vt = queue_arg_interval(fcinfo, 2, "visibility_timeout", 0,
							QUEUE_MAX_VISIBILITY, q->visibility_timeout);
	wait = queue_arg_interval(fcinfo, 3, "wait", 0, QUEUE_MAX_WAIT,
							  q->receive_wait);

	/*
	 * A wait re-runs the receive; only a fresh snapshot per try can see
	 * messages committed meanwhile, which REPEATABLE READ and SERIALIZABLE
	 * do not give.
	 */
	if (wait > 0 && IsolationUsesXactSnapshot())
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_TRANSACTION_STATE),
				 errmsg("argument \"wait\" needs READ COMMITTED isolation"),
				 errdetail("A waiting receive must see messages committed after it began."),
				 errhint("Receive with wait => '0', or in a READ COMMITTED transaction.")));

	now = GetCurrentTimestamp();
	if (attempt != NULL && replay_attempt(rsinfo, q, attempt, now))
	{
		SPI_finish();
		return (Datum) 0;
	}

	nonce = queue_receipt_nonce();
	if (wait > 0)
		queue_wait_begin(q);
	for (;;)
	{
		Datum		args[5];

		args[0] = TimestampTzGetDatum(now);
		args[1] = TimestampTzGetDatum(now + vt);
		args[2] = Int64GetDatum((int64) nonce);
		args[3] = TimestampTzGetDatum(now - q->retention);
		args[4] = Int32GetDatum(max_messages);
		rc = SPI_execute_plan(queue_plan(q, q->fifo ? QP_FIFO_RECEIVE : QP_RECEIVE),
							  args, NULL, false, 0);
		if (rc != SPI_OK_UPDATE_RETURNING && rc != SPI_OK_SELECT)
			elog(ERROR, "queue receive failed: %s", SPI_result_code_string(rc));
		if (SPI_processed > 0 || wait == 0)
			break;
		if (deadline == 0)
			deadline = now + wait;
		if (!queue_wait(q, deadline))
			break;
		now = GetCurrentTimestamp();
	}
	if (wait > 0)
		queue_wait_end();

	tt = SPI_tuptable;
	nrows = SPI_processed;
	emit_messages(rsinfo, q, tt, nrows, true, nonce);
	if (nrows > 0)
	{
		queue_count(q->id, QC_RECEIVED, nrows);
		if (attempt != NULL)
			record_attempt(q, attempt, now, nonce, tt, nrows);
	}
	SPI_finish();
	return (Datum) 0;
}

/* queue.peek(queue_name, max_messages): look, change nothing. */
Datum
queue_peek(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	QueueMeta  *q;
	int32		max_messages;
	Datum		args[2];
	int			rc;

	queue_arg_notnull(fcinfo, 0, "queue_name");
	max_messages = queue_arg_int(fcinfo, 1, "max_messages", 1, PG_INT32_MAX, -1);
	InitMaterializedSRF(fcinfo, MAT_SRF_USE_EXPECTED_DESC);

	SPI_connect();
	q = queue_lookup(PG_GETARG_TEXT_PP(0));
	args[0] = TimestampTzGetDatum(GetCurrentTimestamp() - q->retention);
	args[1] = Int32GetDatum(max_messages);
	rc = SPI_execute_plan(queue_plan(q, QP_PEEK), args, NULL, true, 0);
	if (rc != SPI_OK_SELECT)
		elog(ERROR, "queue peek failed: %s", SPI_result_code_string(rc));
	emit_messages(rsinfo, q, SPI_tuptable, SPI_processed, false, 0);
	SPI_finish();
	return (Datum) 0;
}
