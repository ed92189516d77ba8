/*-------------------------------------------------------------------------
 *
 * wait.c
 *	  Long polling: a receive that found nothing sleeps until a sender's
 *	  commit, or the moment a delayed or leased message turns visible.
 *
 * Queues hash onto QUEUE_WAIT_SLOTS condition variables in shared memory
 * (two queues may share one; a spurious wake-up only costs a re-check).
 * Senders broadcast from their commit callback (stats.c), after their rows
 * became visible, so the woken receiver finds them.  Time-driven
 * visibility needs no one to wake us: before sleeping we ask the queue when
 * its next invisible message turns visible and sleep no longer than that.
 *
 * A waiting receive joins the wait list before its first try, so a commit
 * that lands between a try and the sleep still wakes it.
 *
 * Without shared_preload_libraries there is no shared memory: the wait
 * falls back to re-checking every QUEUE_FALLBACK_POLL_MS, and says so once.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "common/hashfn.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "storage/latch.h"
#include "utils/timestamp.h"
#include "utils/wait_event.h"

#include "queue.h"

#define QUEUE_FALLBACK_POLL_MS	100

ConditionVariable *
queue_wait_cv(int64 queue_id)
{
	uint32		h = hash_bytes_uint32((uint32) queue_id ^ (uint32) (queue_id >> 32)) ^
		MyDatabaseId;

	return &queue_shared->wait_cv[h % QUEUE_WAIT_SLOTS];
}

/*
 * When the queue's next not-yet-visible message turns visible, or 0.  On a
 * FIFO queue a group can open only when one of its messages turns visible,
 * so this bounds its wait too (a wake-up that finds nothing sleeps again).
 */
static TimestampTz
next_visible_at(QueueMeta *q, TimestampTz now)
{
	Datum		arg = TimestampTzGetDatum(now);
	bool		isnull;
	int			rc;

	rc = SPI_execute_plan(queue_plan(q, QP_NEXT_VISIBLE), &arg, NULL, false, 1);
	if (rc != SPI_OK_SELECT)
		elog(ERROR, "queue wait failed: %s", SPI_result_code_string(rc));
	if (SPI_processed == 0)
		return 0;
	return DatumGetTimestampTz(SPI_getbinval(SPI_tuptable->vals[0],
											 SPI_tuptable->tupdesc, 1, &isnull));
}

/*
 * Sleep until something may have become receivable or the deadline passes.
 * Returns false once the deadline has passed (the caller stops trying).
 * Interrupts (statement_timeout, pg_cancel_backend) are served while
 * sleeping.
 */
bool
queue_wait(QueueMeta *q, TimestampTz deadline)
{
	TimestampTz now = GetCurrentTimestamp();
	TimestampTz until;
	TimestampTz next;
	long		ms;

	if (now >= deadline)
		return false;

	until = deadline;
	next = next_visible_at(q, now);
	if (next != 0 && next < until)
		until = next;
	ms = (long) ((until - now + 999) / 1000);
	if (ms < 1)
		ms = 1;

	if (queue_shared == NULL)
	{
		static bool told = false;

		if (!told)
		{
			ereport(NOTICE,
					(errmsg("queue is not in shared_preload_libraries: a waiting receive re-checks every %d ms",
							QUEUE_FALLBACK_POLL_MS),
					 errhint("Add queue to shared_preload_libraries to be woken at commit.")));
			told = true;
		}
		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 Min(ms, QUEUE_FALLBACK_POLL_MS), PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
		CHECK_FOR_INTERRUPTS();
		return true;
	}

	/*
	 * queue_wait_begin put us on the wait list before the caller's try, so
	 * a commit since then has either been seen by that try or has woken
	 * us, and this returns at once.  After a wake-up the sleep re-joins
	 * the list and returns for another try.
	 */
	(void) ConditionVariableTimedSleep(queue_wait_cv(q->id), ms, PG_WAIT_EXTENSION);
	return true;
}

/* Join the queue's wait list before the first try of a waiting receive. */
void
queue_wait_begin(QueueMeta *q)
{
	if (queue_shared != NULL)
		ConditionVariablePrepareToSleep(queue_wait_cv(q->id));
}

/* Leave the wait list (an error leaves it through transaction abort). */
void
queue_wait_end(void)
{
	if (queue_shared != NULL)
		ConditionVariableCancelSleep();
}
