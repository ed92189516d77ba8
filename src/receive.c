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
 * Copy the rows of the last SPI result into the caller's tuplestore as
 * queue.message, with a receipt per row when nonce_valid.
 */
static void
emit_messages(ReturnSetInfo *rsinfo, QueueMeta *q, bool with_receipt,
			  uint64 nonce)
{
	TupleDesc	src = SPI_tuptable->tupdesc;

	for (uint64 r = 0; r < SPI_processed; r++)
	{
		HeapTuple	tup = SPI_tuptable->vals[r];
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
	uint64		nonce;
	TimestampTz deadline = 0;
	int			rc;

	queue_arg_notnull(fcinfo, 0, "queue_name");
	max_messages = queue_arg_int(fcinfo, 1, "max_messages", 1,
								 QUEUE_MAX_MESSAGES, -1);
	(void) queue_arg_token(fcinfo, 4, "receive_attempt_id");
	queue_check_read_write();
	InitMaterializedSRF(fcinfo, MAT_SRF_USE_EXPECTED_DESC);

	SPI_connect();
	q = queue_lookup(PG_GETARG_TEXT_PP(0));
	if (q->fifo)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("FIFO queues are not supported yet")));
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

	nonce = queue_receipt_nonce();
	if (wait > 0)
		queue_wait_begin(q);
	for (;;)
	{
		TimestampTz now = GetCurrentTimestamp();
		Datum		args[5];

		args[0] = TimestampTzGetDatum(now);
		args[1] = TimestampTzGetDatum(now + vt);
		args[2] = Int64GetDatum((int64) nonce);
		args[3] = TimestampTzGetDatum(now - q->retention);
		args[4] = Int32GetDatum(max_messages);
		rc = SPI_execute_plan(queue_plan(q, QP_RECEIVE), args, NULL, false, 0);
		if (rc != SPI_OK_UPDATE_RETURNING)
			elog(ERROR, "queue receive failed: %s", SPI_result_code_string(rc));
		if (SPI_processed > 0 || wait == 0)
			break;
		if (deadline == 0)
			deadline = now + wait;
		if (!queue_wait(q, deadline))
			break;
	}
	if (wait > 0)
		queue_wait_end();

	emit_messages(rsinfo, q, true, nonce);
	if (SPI_processed > 0)
		queue_count(q->id, QC_RECEIVED, SPI_processed);
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
	emit_messages(rsinfo, q, false, 0);
	SPI_finish();
	return (Datum) 0;
}
