/*-------------------------------------------------------------------------
 *
 * settle.c
 *	  What a consumer does with a received message: queue.delete,
 *	  queue.change_visibility and their batch forms.
 *
 * Each statement matches rows on (message_id, receipt nonce), so only the
 * latest receipt acts.  When fewer rows match than were asked for, a second
 * look tells why for each miss: the row still exists with another nonce
 * (the receipt is stale: 55000, and the whole call fails, so a batch never
 * acts in part) or the row is gone (already deleted: false).  A visibility
 * change also needs the lease to be running: once the message's visible_at
 * has passed, its latest receipt finds the row with its own nonce, and the
 * change is refused as well (55000, SQS's MessageNotInflight); without that
 * a lease could be extended forever after it ended.  (The SQS endpoint
 * alone, answering as SQS, lets the latest receipt of a standard queue's
 * message lease it again: queue_sqs_wire, elevated.c.)
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "funcapi.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"
#include "utils/tuplestore.h"

#include "common/queue_common.h"
#include "storage/queue_storage.h"
#include "access/queue_access.h"
#include "state/queue_state.h"
#include "fifo/queue_fifo.h"
#include "api/queue_api.h"

PG_FUNCTION_INFO_V1(queue_delete);
PG_FUNCTION_INFO_V1(queue_delete_batch);
PG_FUNCTION_INFO_V1(queue_change_visibility);
PG_FUNCTION_INFO_V1(queue_change_visibility_batch);

static QueuePlanKind fifo_delete_kind(void);

/* The receipts of a batch argument, decoded and checked. */
typedef struct ReceiptBatch
{
	int			n;
	int64	   *ids;
	uint64	   *nonces;
	bool	   *done;			/* acted on */
} ReceiptBatch;

static void
parse_batch(ArrayType *arr, int64 queue_id, ReceiptBatch *b)
{
	Datum	   *elems;

	b->n = queue_array_len(arr, "receipts", false);
	deconstruct_array(arr, TEXTOID, -1, false, TYPALIGN_INT, &elems, NULL, &b->n);
	b->ids = palloc(b->n * sizeof(int64));
	b->nonces = palloc(b->n * sizeof(uint64));
	b->done = palloc0(b->n * sizeof(bool));
	for (int i = 0; i < b->n; i++)
		queue_receipt_parse(DatumGetTextPP(elems[i]), queue_id, "receipts", i + 1,
							&b->ids[i], &b->nonces[i]);
}

static void
stale(int64 message_id)
{
	ereport(ERROR,
			(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
			 errmsg("receipt of message " INT64_FORMAT " is stale", message_id),
			 errdetail("The message was received again since this receipt was issued."),
			 errhint("Use the receipt of the latest receive.")));
}

/*
 * A visibility change with the latest receipt of a message whose lease has
 * ended (SQS's MessageNotInflight): it is visible again, for anyone.
 */
static void
lease_ended(int64 message_id)
{
	ereport(ERROR,
			(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
			 errmsg("receipt of message " INT64_FORMAT " is for a lease that has ended", message_id),
			 errdetail("The message's visibility timeout has passed: it is visible again, not in flight."),
			 errhint("Receive the message again for a new lease.")));
}

/*
 * Mark the batch entries that the statement just run acted on (its
 * RETURNING gives message_id, receipt), failing if a row was matched
 * through another entry's receipt: the loose ANY/ANY match of plans.c is
 * made exact here.
 */
static void
mark_done(ReceiptBatch *b, bool first_only)
{
	for (uint64 r = 0; r < SPI_processed; r++)
	{
		bool		isnull;
		int64		id = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[r],
													 SPI_tuptable->tupdesc, 1, &isnull));
		uint64		nonce = (uint64) DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[r],
																 SPI_tuptable->tupdesc, 2, &isnull));
		bool		matched = false;

		/*
		 * A receipt given twice deletes once (the repeat finds the message
		 * gone: false) but changes visibility for both entries.
		 */
		for (int i = 0; i < b->n && !(first_only && matched); i++)
			if (b->ids[i] == id && b->nonces[i] == nonce)
			{
				b->done[i] = true;
				matched = true;
			}
		if (!matched)
			stale(id);
	}
}

/*
 * For the entries not acted on: fail if any of their messages still exists
 * (its receipt is stale, or, for a visibility change, the row still has
 * the entry's own receipt: its lease has ended); those that are gone were
 * deleted already.
 */
static void
check_misses(QueueMeta *q, ReceiptBatch *b, bool visibility)
{
	Datum	   *missing = palloc(b->n * sizeof(Datum));
	int			nmissing = 0;
	Datum		arg;
	int			rc;

	for (int i = 0; i < b->n; i++)
		if (!b->done[i])
			missing[nmissing++] = Int64GetDatum(b->ids[i]);
	if (nmissing == 0)
		return;
	arg = PointerGetDatum(construct_array(missing, nmissing, INT8OID, 8,
										  FLOAT8PASSBYVAL, TYPALIGN_DOUBLE));
	rc = queue_exec(q, QP_RECEIPTS_OF, &arg, NULL, false, 0);
	if (rc != SPI_OK_SELECT)
		elog(ERROR, "queue receipt check failed: %s", SPI_result_code_string(rc));
	for (uint64 r = 0; r < SPI_processed; r++)
	{
		bool		isnull;
		int64		id = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[r],
													 SPI_tuptable->tupdesc, 1, &isnull));
		Datum		nonce = SPI_getbinval(SPI_tuptable->vals[r],
										  SPI_tuptable->tupdesc, 2, &isnull);

		if (visibility && !isnull)
			for (int i = 0; i < b->n; i++)
				if (!b->done[i] && b->ids[i] == id &&
					b->nonces[i] == (uint64) DatumGetInt64(nonce))
					lease_ended(id);
		stale(id);
	}
}

/* Emit (ordinal, done) rows of a batch. */
static void
emit_batch(FunctionCallInfo fcinfo, ReceiptBatch *b)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;

	for (int i = 0; i < b->n; i++)
	{
		Datum		values[2] = {Int32GetDatum(i + 1), BoolGetDatum(b->done[i])};
		bool		nulls[2] = {false, false};

		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
}

/*
 * Run a batch statement (delete or change visibility) over the receipts
 * and classify the misses.  A visibility change gives its statement the
 * new visible_at and the time of the call (only leases still running at
 * that time change).
 */
static int
settle_batch(QueueMeta *q, QueuePlanKind kind, ReceiptBatch *b,
			 TimestampTz visible_at, TimestampTz now)
{
	Datum		args[4];
	int			rc;
	int			ndone = 0;
	Datum	   *groups = NULL;
	int			ngroups = 0;

	/* On a FIFO queue the groups are locked first (groups.c). */
	if (q->fifo)
		queue_fifo_lock_groups_of(q, b->n, b->ids);

	args[0] = queue_int8_array(b->n, b->ids);
	args[1] = queue_int8_array(b->n, (int64 *) b->nonces);
	args[2] = TimestampTzGetDatum(visible_at);
	args[3] = TimestampTzGetDatum(now);
	rc = queue_exec(q, kind, args, NULL, false, 0);
	if (rc != SPI_OK_DELETE_RETURNING && rc != SPI_OK_UPDATE_RETURNING)
		elog(ERROR, "queue batch failed: %s", SPI_result_code_string(rc));
	ndone = (int) SPI_processed;
	mark_done(b, kind == QP_DELETE_BATCH || kind == QP_DELETE_LIVE_BATCH);
	if (q->fifo)
	{
		/* The groups acted on (column 3), for the refresh below. */
		ngroups = queue_spi_groups(3, &groups);
		ngroups = queue_sort_unique_texts(groups, ngroups);
	}
	check_misses(q, b, kind == QP_CHANGE_VIS_BATCH || kind == QP_DELETE_LIVE_BATCH);
	if (q->fifo)
	{
		queue_fifo_refresh_groups(q, ngroups, groups);
		/* Settling a FIFO group may open it to a waiting receiver. */
		if (ndone > 0)
			queue_note_wakeup(q->id);
	}
	return ndone;
}

/*
 * A delete that rolls back puts its rows back where they were, maybe below
 * a standard queue's ready bound: the bound goes back to the start then
 * (common/counts.c).  Noted before the statement, which may fail halfway.
 */
static void
note_delete(QueueMeta *q)
{
	queue_note_ready(q->id, QUEUE_READY_NONE, DT_NOBEGIN);
}

/* queue.delete(queue_name, receipt) */
Datum
queue_delete(PG_FUNCTION_ARGS)
{
	QueueCall	call;
	QueueMeta  *q;
	ReceiptBatch b;
	int64		id;
	uint64		nonce;
	Datum		args[2];
	int			rc;

	queue_arg_notnull(fcinfo, 0, "queue_name");
	queue_arg_notnull(fcinfo, 1, "receipt");
	queue_check_read_write();

	q = queue_open(&call, PG_GETARG_TEXT_PP(0), QPRIV_RECEIVE);
	queue_receipt_parse(PG_GETARG_TEXT_PP(1), q->id, "receipt", 0, &id, &nonce);

	/* FIFO deletes lock and refresh the group: the batch path does that. */
	if (!q->fifo)
		note_delete(q);
	if (q->fifo)
	{
		b.n = 1;
		b.ids = &id;
		b.nonces = &nonce;
		b.done = (bool[1]) {false};
		if (settle_batch(q, fifo_delete_kind(), &b, 0, GetCurrentTimestamp()) > 0)
			queue_count(q->id, QC_DELETED, 1);
		queue_close(&call);
		PG_RETURN_BOOL(b.done[0]);
	}

	args[0] = Int64GetDatum(id);
	args[1] = Int64GetDatum((int64) nonce);
	rc = queue_exec(q, QP_DELETE, args, NULL, false, 0);
	if (rc != SPI_OK_DELETE)
		elog(ERROR, "queue delete failed: %s", SPI_result_code_string(rc));
	if (SPI_processed == 1)
	{
		queue_count(q->id, QC_DELETED, 1);
		queue_close(&call);
		PG_RETURN_BOOL(true);
	}

	/* Not deleted: stale (error) or already gone (false). */
	b.n = 1;
	b.ids = &id;
	b.nonces = &nonce;
	b.done = (bool[1]) {false};
	check_misses(q, &b, false);
	queue_close(&call);
	PG_RETURN_BOOL(false);
}

/* queue.delete_batch(queue_name, receipts) */
Datum
queue_delete_batch(PG_FUNCTION_ARGS)
{
	QueueCall	call;
	QueueMeta  *q;
	ReceiptBatch b;
	int			ndone;

	queue_arg_notnull(fcinfo, 0, "queue_name");
	queue_arg_notnull(fcinfo, 1, "receipts");
	queue_check_read_write();
	InitMaterializedSRF(fcinfo, 0);

	q = queue_open(&call, PG_GETARG_TEXT_PP(0), QPRIV_RECEIVE);
	parse_batch(PG_GETARG_ARRAYTYPE_P(1), q->id, &b);
	if (!q->fifo)
		note_delete(q);
	ndone = settle_batch(q, q->fifo ? fifo_delete_kind() : QP_DELETE_BATCH, &b, 0,
						 GetCurrentTimestamp());
	if (ndone > 0)
		queue_count(q->id, QC_DELETED, ndone);
	emit_batch(fcinfo, &b);
	queue_close(&call);
	return (Datum) 0;
}

/*
 * On the SQS endpoint's wire (queue_sqs_wire, elevated.c), as SQS: a FIFO
 * message's delete needs its lease still running ("The receipt handle has
 * expired"), and the latest receipt of a standard queue's message whose
 * lease has ended leases it again.  The SQL API deletes with the latest
 * receipt whenever and refuses the late change (55000).
 */
static QueuePlanKind
fifo_delete_kind(void)
{
	return queue_sqs_wire ? QP_DELETE_LIVE_BATCH : QP_DELETE_BATCH;
}

/* Leases that may be changed: those running at now, or any (above). */
static TimestampTz
lease_floor(QueueMeta *q, TimestampTz now)
{
	return queue_sqs_wire && !q->fifo ? DT_NOBEGIN : now;
}

/* The new lease deadline: now + visibility_timeout (0 to 12 hours). */
static TimestampTz
new_visible_at(FunctionCallInfo fcinfo, int argno, QueueMeta *q, TimestampTz now)
{
	int64		vt = queue_arg_interval(fcinfo, argno, "visibility_timeout", 0,
										QUEUE_MAX_VISIBILITY, -1);

	/* Handing a message back early may let a waiting receiver have it. */
	if (vt == 0)
		queue_note_wakeup(q->id);
	/* A lease that ends sooner may make a dead letter sooner (sweep.c). */
	queue_note_change(q->id);
	/*
	 * Ready from the new visible_at if this commits; the leases it
	 * restores if it aborts end after now (counts.c).
	 */
	if (!q->fifo)
		queue_note_ready(q->id, now + vt, now);
	return now + vt;
}

/* queue.change_visibility(queue_name, receipt, visibility_timeout) */
Datum
queue_change_visibility(PG_FUNCTION_ARGS)
{
	QueueCall	call;
	QueueMeta  *q;
	int64		id;
	uint64		nonce;
	TimestampTz now;
	TimestampTz visible_at;
	Datum		args[4];
	int			rc;

	queue_arg_notnull(fcinfo, 0, "queue_name");
	queue_arg_notnull(fcinfo, 1, "receipt");
	queue_arg_notnull(fcinfo, 2, "visibility_timeout");
	queue_check_read_write();

	q = queue_open(&call, PG_GETARG_TEXT_PP(0), QPRIV_RECEIVE);
	queue_receipt_parse(PG_GETARG_TEXT_PP(1), q->id, "receipt", 0, &id, &nonce);
	now = GetCurrentTimestamp();
	visible_at = new_visible_at(fcinfo, 2, q, now);

	/* FIFO changes lock and refresh the group: the batch path does that. */
	if (q->fifo)
	{
		ReceiptBatch b = {1, &id, &nonce, (bool[1]) {false}};

		(void) settle_batch(q, QP_CHANGE_VIS_BATCH, &b, visible_at, now);
		if (!b.done[0])
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("message " INT64_FORMAT " was deleted", id)));
		queue_close(&call);
		PG_RETURN_VOID();
	}

	args[0] = Int64GetDatum(id);
	args[1] = Int64GetDatum((int64) nonce);
	args[2] = TimestampTzGetDatum(visible_at);
	args[3] = TimestampTzGetDatum(lease_floor(q, now));
	rc = queue_exec(q, QP_CHANGE_VIS, args, NULL, false, 0);
	if (rc != SPI_OK_UPDATE)
		elog(ERROR, "queue change_visibility failed: %s", SPI_result_code_string(rc));
	if (SPI_processed == 0)
	{
		ReceiptBatch b = {1, &id, &nonce, (bool[1]) {false}};

		check_misses(q, &b, true);
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("message " INT64_FORMAT " was deleted", id)));
	}
	queue_close(&call);
	PG_RETURN_VOID();
}

/* queue.change_visibility_batch(queue_name, receipts, visibility_timeout) */
Datum
queue_change_visibility_batch(PG_FUNCTION_ARGS)
{
	QueueCall	call;
	QueueMeta  *q;
	ReceiptBatch b;
	TimestampTz now;

	queue_arg_notnull(fcinfo, 0, "queue_name");
	queue_arg_notnull(fcinfo, 1, "receipts");
	queue_arg_notnull(fcinfo, 2, "visibility_timeout");
	queue_check_read_write();
	InitMaterializedSRF(fcinfo, 0);

	q = queue_open(&call, PG_GETARG_TEXT_PP(0), QPRIV_RECEIVE);
	parse_batch(PG_GETARG_ARRAYTYPE_P(1), q->id, &b);
	now = GetCurrentTimestamp();
	(void) settle_batch(q, QP_CHANGE_VIS_BATCH, &b, new_visible_at(fcinfo, 2, q, now),
						lease_floor(q, now));
	emit_batch(fcinfo, &b);
	queue_close(&call);
	return (Datum) 0;
}
