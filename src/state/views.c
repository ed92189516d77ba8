/*-------------------------------------------------------------------------
 *
 * views.c
 *	  What the admin views (queue.queues, queue.stats) may show a role.
 *
 * DESIGN.md "Access": the views show a role only the queues it holds a
 * privilege on.  The views filter their rows with queue._may_see, and the
 * functions that read a queue's tables or counters for them check it again
 * themselves, because anyone with USAGE on schema queue can call them
 * directly.  Those functions cannot be SECURITY DEFINER: a definer function
 * no longer knows who called it.  So they are plain C functions that check
 * the caller, then do their reading as the tables' owner (queue_enter).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "storage/lmgr.h"
#include "utils/acl.h"
#include "utils/rel.h"
#include "utils/relcache.h"

#include "common/queue_common.h"
#include "storage/queue_storage.h"
#include "access/queue_access.h"
#include "state/queue_state.h"

PG_FUNCTION_INFO_V1(queue_may_see_sql);
PG_FUNCTION_INFO_V1(queue_depth_checked_sql);
PG_FUNCTION_INFO_V1(queue_counters_sql);
PG_FUNCTION_INFO_V1(queue_reset_counters_sql);

/* Whether the current role holds any privilege on the queue. */
bool
queue_may_see(int64 queue_id)
{
	Oid			relid = queue_table_relid(queue_id, 'q');
	AclMode		any = 0;

	for (int p = 0; p < QPRIV_NUM; p++)
		any |= queue_priv_mode((QueuePriv) p);
	if (!OidIsValid(relid))		/* shared, or gone */
		return queue_holds_by_id(queue_id, GetUserId(), QPRIV_SEND, true);
	return queue_role_holds(relid, GetUserId(), any);
}

/* 42501 unless the current role may see the queue. */
void
queue_check_may_see(int64 queue_id)
{
	if (!queue_may_see(queue_id))
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("permission denied for queue id " INT64_FORMAT, queue_id),
				 errdetail("This needs a privilege on the queue.")));
}

/* queue._may_see(queue_id): the views' row filter. */
Datum
queue_may_see_sql(PG_FUNCTION_ARGS)
{
	if (PG_ARGISNULL(0))
		PG_RETURN_BOOL(false);
	PG_RETURN_BOOL(queue_may_see(PG_GETARG_INT64(0)));
}

/*
 * The read locks queue._depth takes on a queue's table and its indexes.
 * queue.stats reads every queue in one statement; were those locks kept to
 * the end of the transaction, as a statement's are, 10,000 queues would
 * need more lock slots than max_locks_per_transaction gives and the view
 * would fail.  So they go as soon as the queue is read: nothing else of
 * the statement reads that table again.  A lock the transaction held
 * before (an earlier statement's) is left alone.
 */

static bool
holds_read_lock(Oid relid)
{
	Relation	rel = RelationIdGetRelation(relid);
	bool		held;

	if (rel == NULL)
		return false;
	held = CheckRelationLockedByMe(rel, AccessShareLock, false);
	RelationClose(rel);
	return held;
}

void
queue_note_read_locks(QueueReadLocks *locks, Oid relid)
{
	Relation	rel = RelationIdGetRelation(relid);
	List	   *indexes = NIL;
	ListCell   *lc;
	int			i = 0;

	if (rel != NULL)
	{
		indexes = RelationGetIndexList(rel);
		RelationClose(rel);
	}
	locks->n = 1 + list_length(indexes);
	locks->relids = palloc(locks->n * sizeof(Oid));
	locks->held_before = palloc(locks->n * sizeof(bool));
	locks->relids[i++] = relid;
	foreach(lc, indexes)
		locks->relids[i++] = lfirst_oid(lc);
	for (i = 0; i < locks->n; i++)
		locks->held_before[i] = holds_read_lock(locks->relids[i]);
	list_free(indexes);
}

void
queue_release_read_locks(QueueReadLocks *locks)
{
	for (int i = 0; i < locks->n; i++)
	{
		if (locks->held_before[i])
			continue;
		while (holds_read_lock(locks->relids[i]))
			UnlockRelationOid(locks->relids[i], AccessShareLock);
	}
}

/*
 * queue._depth_checked(queue_id, retention): queue._depth (the counts of
 * queue.stats, PL/pgSQL, not granted to PUBLIC) for a caller who may see
 * the queue, run as the tables' owner.
 */
Datum
queue_depth_checked_sql(PG_FUNCTION_ARGS)
{
	static SPIPlanPtr plan = NULL;
	static SPIPlanPtr shared_plan = NULL;
	Oid			relid;
	TupleDesc	desc;
	QueueCall	call;
	Datum		args[2];
	Datum		values[5];
	bool		nulls[5];
	HeapTuple	result;
	QueueReadLocks locks;
	int			rc;

	if (get_call_result_type(fcinfo, NULL, &desc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "return type must be a row type");
	if (PG_ARGISNULL(0) || PG_ARGISNULL(1))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("arguments \"queue_id\" and \"retention\" must not be null")));
	queue_check_may_see(PG_GETARG_INT64(0));
	relid = queue_table_relid(PG_GETARG_INT64(0), 'q');
	if (OidIsValid(relid))
		queue_note_read_locks(&locks, relid);
	else
		memset(&locks, 0, sizeof(locks));	/* shared: one lock for all, kept */

	queue_enter(&call);
	SPI_connect();
	if (plan == NULL)
	{
		Oid			types[2] = {INT8OID, INTERVALOID};

		plan = queue_keep_plan("SELECT visible, in_flight, delayed, oldest_sent_at,"
						       " oldest_visible_age FROM queue._depth($1, $2)",
						       2, types);
	}
	if (shared_plan == NULL && !OidIsValid(relid))
	{
		Oid			types[2] = {INT8OID, INTERVALOID};

		shared_plan = queue_keep_plan("SELECT d.visible, d.in_flight, d.delayed, d.oldest_sent_at,"
								      " d.oldest_visible_age FROM queue._queues r,"
								      " queue._depth_shared(coalesce(r.store_id, r.queue_id), r.fifo, $2) d"
								      " WHERE r.queue_id = $1",
								      2, types);
	}
	args[0] = PG_GETARG_DATUM(0);
	args[1] = PG_GETARG_DATUM(1);
	rc = SPI_execute_plan(OidIsValid(relid) ? plan : shared_plan, args, NULL, true, 1);
	if (rc != SPI_OK_SELECT || SPI_processed != 1)
		elog(ERROR, "queue._depth failed: %s", SPI_result_code_string(rc));
	for (int i = 0; i < 5; i++)
	{
		Form_pg_attribute att = TupleDescAttr(SPI_tuptable->tupdesc, i);

		values[i] = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc,
								  i + 1, &nulls[i]);
		if (!nulls[i])
			values[i] = SPI_datumTransfer(values[i], att->attbyval, att->attlen);
	}
	SPI_finish();
	queue_leave(&call);
	queue_release_read_locks(&locks);
	result = heap_form_tuple(desc, values, nulls);
	PG_RETURN_DATUM(HeapTupleGetDatum(result));
}

/* queue._reset_counters(queue_id, dropped), for queue.create and drop. */
Datum
queue_reset_counters_sql(PG_FUNCTION_ARGS)
{
	if (PG_GETARG_BOOL(1))
		queue_forget_counters_at_commit(PG_GETARG_INT64(0));
	else
		queue_reset_counters(PG_GETARG_INT64(0));
	PG_RETURN_VOID();
}

/* queue._counters(queue_id): one row, nulls without shared memory. */
Datum
queue_counters_sql(PG_FUNCTION_ARGS)
{
	TupleDesc	desc;
	Datum		values[QC_NUM];
	bool		nulls[QC_NUM];
	int64		counts[QC_NUM] = {0};
	bool		shared = queue_shared != NULL;

	if (get_call_result_type(fcinfo, NULL, &desc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "return type must be a row type");
	if (!PG_ARGISNULL(0))
	{
		queue_check_may_see(PG_GETARG_INT64(0));	/* views.c */
		shared = queue_counters_read(PG_GETARG_INT64(0), counts);
	}
	for (int c = 0; c < QC_NUM; c++)
	{
		nulls[c] = !shared;
		values[c] = Int64GetDatum(counts[c]);
	}
	PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(desc, values, nulls)));
}
