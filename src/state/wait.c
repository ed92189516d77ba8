/*-------------------------------------------------------------------------
 *
 * wait.c
 *	  Long polling: a receive that found nothing sleeps until a sender's
 *	  commit, or the moment a delayed or leased message turns visible.
 *
 * Queues hash onto QUEUE_WAIT_SLOTS condition variables in shared memory
 * (two queues may share one; a spurious wake-up only costs a re-check).
 * Senders broadcast from their commit callback (counts.c), after their rows
 * became visible, so the woken receiver finds them.  Time-driven
 * visibility needs no one to wake us: before sleeping we ask the queue when
 * its next invisible message turns visible and sleep no longer than that.
 *
 * A commit that lands between a receiver's try and its sleep must not be
 * lost: each slot has a generation counter that wakers bump before they
 * broadcast; the receiver reads it before its try and, having joined the
 * wait list, checks it again before sleeping.  (The wait list alone would
 * do if a try could not leave it; but a try that found nothing rolls back
 * its subtransaction, and that cancels any prepared sleep.)
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
#include "access/htup_details.h"
#include "funcapi.h"
#include "tcop/tcopprot.h"
#include "miscadmin.h"
#include "port/pg_bitutils.h"
#include "pgstat.h"
#include "storage/latch.h"
#include "utils/timestamp.h"
#include "utils/wait_event.h"

#include "core_api.h"
#include "common/queue_common.h"
#include "storage/queue_storage.h"
#include "access/queue_access.h"
#include "state/queue_state.h"

#define QUEUE_FALLBACK_POLL_MS	100

/*
 * The SQS endpoint's workers (core_api.h).  A watcher's bit in a slot's
 * mask makes every wake of that slot set the watcher's latch.  The mask is
 * set with a full barrier before the watcher compares the generation
 * again, and wake_slot bumps the generation before it reads the mask: a
 * wake either sees the bit or moved the generation the watcher compares.
 */
void
queue_wait_watcher_attach(int watcher)
{
	if (queue_shared == NULL || watcher < 0 || watcher >= QUEUE_MAX_WATCHERS)
		elog(ERROR, "queue wait watcher %d out of range", watcher);
	queue_shared->watcher_latch[watcher] = MyLatch;
}

void
queue_wait_watcher_detach(int watcher)
{
	uint64		bit = UINT64CONST(1) << watcher;

	if (queue_shared == NULL || watcher < 0 || watcher >= QUEUE_MAX_WATCHERS)
		return;
	for (int slot = 0; slot < QUEUE_WAIT_SLOTS; slot++)
		pg_atomic_fetch_and_u64(&queue_shared->watch_mask[slot], ~bit);
	queue_shared->watcher_latch[watcher] = NULL;
}

void
queue_wait_watch(int watcher, int64 queue_id, bool on)
{
	uint64		bit = UINT64CONST(1) << watcher;
	int			slot = queue_wait_slot_of(queue_id);

	if (queue_shared == NULL || watcher < 0 || watcher >= QUEUE_MAX_WATCHERS)
		return;
	if (on)
		pg_atomic_fetch_or_u64(&queue_shared->watch_mask[slot], bit);
	else
		pg_atomic_fetch_and_u64(&queue_shared->watch_mask[slot], ~bit);
}

uint64
queue_wait_generation_of(int64 queue_id)
{
	if (queue_shared == NULL)
		return 0;
	return pg_atomic_read_u64(&queue_shared->wait_gen[queue_wait_slot_of(queue_id)]);
}

/* Read before each try of a waiting receive; handed to queue_wait. */
uint64
queue_wait_generation(QueueMeta *q)
{
	if (queue_shared == NULL)
		return 0;
	return pg_atomic_read_u64(&queue_shared->wait_gen[queue_wait_slot_of(q->id)]);
}

/*
 * When the queue's next not-yet-visible message turns visible, or 0; on a
 * FIFO queue, when its next group opens (a lease ends, or a delayed head
 * turns visible).
 */
static TimestampTz
next_visible_at(QueueMeta *q, TimestampTz now)
{
	Datum		arg = TimestampTzGetDatum(now);
	bool		isnull;
	int			rc;
	TimestampTz next;

	rc = queue_exec(q, q->fifo ? QP_NEXT_AVAILABLE_FIFO : QP_NEXT_VISIBLE, &arg, NULL, false, 1);
	if (rc != SPI_OK_SELECT)
		elog(ERROR, "queue wait failed: %s", SPI_result_code_string(rc));
	if (SPI_processed == 0)
		return 0;
	next = DatumGetTimestampTz(SPI_getbinval(SPI_tuptable->vals[0],
											 SPI_tuptable->tupdesc, 1, &isnull));
	return isnull ? 0 : next;
}

/*
 * A waiting receive whose client has gone must not try again: it would
 * lease messages that nobody can get (the loss shows only when the result
 * is flushed, after the lease committed), and they would sit out their
 * visibility timeout.  PostgreSQL notices a closed socket only when
 * client_connection_check_interval is set; we look after every sleep.
 */
/*
 * From libpq/libpq.h, which cannot be included without the GSSAPI headers
 * of PostgreSQL's build (libpq-be.h); the function exists since 14.
 */
extern bool pq_check_connection(void);

static void
check_client(void)
{
	if (whereToSendOutput == DestRemote && !pq_check_connection())
		ereport(FATAL,
				(errcode(ERRCODE_CONNECTION_FAILURE),
				 errmsg("connection to client lost during a waiting receive")));
}

/*
 * Sleep until something may have become receivable or the deadline passes.
 * generation is what queue_wait_generation said before the caller's last
 * try: a wake-up since then means "try again" at once.  Returns false once
 * the deadline has passed (the caller stops trying).  Interrupts
 * (statement_timeout, pg_cancel_backend) are served while sleeping.
 */
bool
queue_wait(QueueMeta *q, TimestampTz deadline, uint64 generation)
{
	TimestampTz now = GetCurrentTimestamp();
	TimestampTz until;
	TimestampTz next;
	long		ms;
	ConditionVariable *cv;

	if (now >= deadline)
		return false;

	until = deadline;
	next = next_visible_at(q, now);
	if (next != 0 && next < until)
		until = next;
	/* a rate limit's window that opens sooner (fifo/rate.c): a timer, not a poll */
	if (q->rate_opens_at > now && q->rate_opens_at < until)
		until = q->rate_opens_at;
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
		check_client();
		return true;
	}

	/*
	 * Join the wait list, then look at the generation: a commit after the
	 * caller's try bumped it (try again now) or will broadcast to us.
	 */
	cv = &queue_shared->wait_cv[queue_wait_slot_of(q->id)];
	ConditionVariablePrepareToSleep(cv);
	if (queue_wait_generation(q) != generation)
	{
		ConditionVariableCancelSleep();
		return true;
	}
	(void) ConditionVariableTimedSleep(cv, ms, PG_WAIT_EXTENSION);
	ConditionVariableCancelSleep();
	check_client();
	return true;
}

/* Leave the wait list (an error leaves it through transaction abort). */
void
queue_wait_end(void)
{
	if (queue_shared != NULL)
		ConditionVariableCancelSleep();
}

PG_FUNCTION_INFO_V1(queue_wait_hint_sql);

/*
 * queue._wait_hint(queue_name) returns (queue_id, generation,
 * next_visible_at): what the SQS endpoint reads before it tries a receive
 * it may park (core_api.h).  Needs receive on the queue.  Not granted to
 * PUBLIC.
 */
Datum
queue_wait_hint_sql(PG_FUNCTION_ARGS)
{
	QueueCall	call;
	QueueMeta  *q;
	TupleDesc	tupdesc;
	Datum		values[3];
	bool		nulls[3] = {false, false, false};
	TimestampTz next;
	HeapTuple	tuple;

	queue_arg_notnull(fcinfo, 0, "queue_name");
	if (get_call_result_type(fcinfo, NULL, &tupdesc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "queue._wait_hint must return a row");
	tupdesc = BlessTupleDesc(tupdesc);

	q = queue_open(&call, PG_GETARG_TEXT_PP(0), QPRIV_RECEIVE);
	values[0] = Int64GetDatum(q->id);
	values[1] = Int64GetDatum((int64) queue_wait_generation(q));
	next = next_visible_at(q, GetCurrentTimestamp());
	values[2] = TimestampTzGetDatum(next);
	nulls[2] = (next == 0);
	queue_close(&call);

	tuple = heap_form_tuple(tupdesc, values, nulls);
	PG_RETURN_DATUM(HeapTupleGetDatum(tuple));
}
