/*-------------------------------------------------------------------------
 *
 * consumer.c
 *	  The SQL side of consumers (DESIGN.md "Consumers") that is not
 *	  PL/pgSQL: the runtime counters queue.consumers shows, and their reset
 *	  when a consumer is created.
 *
 * create_consumer, drop_consumer, pause_consumer and resume_consumer are
 * PL/pgSQL (queue--1.2--1.3.sql), reached through queue_admin_call like
 * the other administrative functions.  The processes that run consumers
 * are in consumer_worker.c.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "funcapi.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/tuplestore.h"

#include "common/queue_common.h"
#include "storage/queue_storage.h"
#include "state/queue_state.h"
#include "push/queue_push.h"

PG_FUNCTION_INFO_V1(queue_consumer_reset_sql);
PG_FUNCTION_INFO_V1(queue_consumer_stats_sql);

/*
 * queue._consumer_reset(consumer_id, queue_id): a new consumer starts from
 * zero (ids restart when the extension is created again).  Not granted to
 * PUBLIC.
 */
Datum
queue_consumer_reset_sql(PG_FUNCTION_ARGS)
{
	QueueConsumerStat *st;

	if (queue_consumer_shared == NULL)
		PG_RETURN_VOID();
	LWLockAcquire(queue_consumer_shared->lock, LW_EXCLUSIVE);
	st = queue_consumer_stat(MyDatabaseId, PG_GETARG_INT64(0), PG_GETARG_INT64(1));
	if (st != NULL)
	{
		st->queue_id = PG_GETARG_INT64(1);
		st->processed = st->failed = 0;
		st->failing = false;
		st->last_error_at = st->last_success_at = 0;
		st->last_error[0] = '\0';
		st->one_by_one_until = 0;
	}
	LWLockRelease(queue_consumer_shared->lock);
	PG_RETURN_VOID();
}

/*
 * queue._consumer_stats(): the counters of this database's consumers whose
 * queue the current role holds a privilege on (the view's rule), so every
 * role may call it.  Copied out under the lock, then filtered: the
 * privilege check reads the syscache, which may not run under an LWLock.
 */
Datum
queue_consumer_stats_sql(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	QueueConsumerStat *copy;
	int			n = 0;

	InitMaterializedSRF(fcinfo, 0);
	if (queue_consumer_shared == NULL)
		return (Datum) 0;

	copy = palloc(Max(queue_consumer_shared->nstats, 1) * sizeof(QueueConsumerStat));
	LWLockAcquire(queue_consumer_shared->lock, LW_SHARED);
	for (int i = 0; i < queue_consumer_shared->nstats; i++)
		if (queue_consumer_shared->stats[i].dbid == MyDatabaseId)
			copy[n++] = queue_consumer_shared->stats[i];
	LWLockRelease(queue_consumer_shared->lock);

	for (int i = 0; i < n; i++)
	{
		QueueConsumerStat *st = &copy[i];
		Datum		values[8];
		bool		nulls[8] = {false};

		if (!queue_may_see(st->queue_id))
			continue;
		values[0] = Int64GetDatum(st->consumer_id);
		values[1] = Int64GetDatum(st->processed);
		values[2] = Int64GetDatum(st->failed);
		values[3] = BoolGetDatum(st->failing);
		st->last_error[QUEUE_CONSUMER_ERROR_LEN - 1] = '\0';
		if (st->last_error[0] != '\0')
			values[4] = CStringGetTextDatum(st->last_error);
		else
			nulls[4] = true;
		values[5] = TimestampTzGetDatum(st->last_error_at);
		nulls[5] = st->last_error_at == 0;
		values[6] = TimestampTzGetDatum(st->last_success_at);
		nulls[6] = st->last_success_at == 0;
		st->waiting[QUEUE_CONSUMER_WAIT_LEN - 1] = '\0';
		values[7] = CStringGetTextDatum(st->waiting);
		nulls[7] = st->waiting[0] == '\0';
		/* 1.3 declared seven columns (no waiting): the eighth is ignored */
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	return (Datum) 0;
}
