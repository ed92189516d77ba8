/*-------------------------------------------------------------------------
 *
 * stats.c
 *	  Per-queue cumulative counters, and the commit-time hand-off of
 *	  counts and long-poll wake-ups.
 *
 * A call notes what it did in a small backend-local list; at commit the
 * list goes to shared memory (counters by atomic add, wake-ups by
 * broadcasting the queues' condition variables), at abort it is dropped,
 * and so are the notes of a savepoint rolled back.  A prepared transaction
 * counts as aborted here: its counts are lost and its commit wakes no one.
 * So a sent message is counted, and wakes a waiting receiver, only once a
 * receiver can see it.  A receive that rolls back hands its messages back
 * at once, so it wakes waiters too.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "common/hashfn.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/memutils.h"

#include "queue.h"

PG_FUNCTION_INFO_V1(queue_counters_sql);

typedef struct PendingQueue
{
	int64		queue_id;
	SubTransactionId subid;		/* what it was noted in */
	bool		forget;			/* dropped: free its counters at commit */
	bool		wake_on_commit;
	bool		wake_on_abort;
	int64		c[QC_NUM];
} PendingQueue;

static PendingQueue *pending = NULL;
static int	npending = 0;
static int	maxpending = 0;
static bool callback_registered = false;
static bool register_pending = false;	/* queue._register() at commit */

/*
 * The counter entry of (dbid, queue_id) by linear probing from its hash,
 * created if asked and there is room.  The caller holds the lock, or is the
 * postmaster at startup.
 */
static QueueCounterEntry *
counter_probe(Oid dbid, int64 queue_id, bool create)
{
	QueueShared *sh = queue_shared;
	uint32		start = (hash_bytes_uint32((uint32) queue_id) ^ dbid) % sh->ncounters;
	QueueCounterEntry *reuse = NULL;

	for (int i = 0; i < sh->ncounters; i++)
	{
		QueueCounterEntry *e = &sh->counters[(start + i) % sh->ncounters];

		if (e->dbid == dbid && e->queue_id == queue_id)
			return e;
		/* A dropped queue's slot keeps the chain going but may be reused. */
		if (e->dbid != InvalidOid && e->queue_id == 0 && reuse == NULL)
			reuse = e;
		if (e->dbid == InvalidOid)
		{
			if (!create)
				return NULL;
			if (reuse == NULL)
				reuse = e;
			break;
		}
	}
	if (!create || reuse == NULL)
		return NULL;
	for (int c = 0; c < QC_NUM; c++)
		pg_atomic_write_u64(&reuse->c[c], 0);
	reuse->queue_id = queue_id;
	reuse->dbid = dbid;
	return reuse;
}

/* The counter entry of a queue of this database, created on first use. */
static QueueCounterEntry *
counter_entry(int64 queue_id, bool create)
{
	QueueCounterEntry *found;

	LWLockAcquire(queue_shared->lock, create ? LW_EXCLUSIVE : LW_SHARED);
	found = counter_probe(MyDatabaseId, queue_id, create);
	LWLockRelease(queue_shared->lock);
	return found;
}

/*
 * Counters loaded from disk sit in slots 0..n-1; move each to where probing
 * finds it (dropped queues' slots are not saved).  Runs in the postmaster
 * before anyone else looks.
 */
void
queue_rehome_counters(int n)
{
	QueueCounterEntry *saved = palloc(Max(n, 1) * sizeof(QueueCounterEntry));

	memcpy(saved, queue_shared->counters, n * sizeof(QueueCounterEntry));
	for (int i = 0; i < n; i++)
		queue_shared->counters[i].dbid = InvalidOid;
	for (int i = 0; i < n; i++)
	{
		QueueCounterEntry *e = counter_probe(saved[i].dbid, saved[i].queue_id, true);

		if (e != NULL)
			for (int c = 0; c < QC_NUM; c++)
				pg_atomic_write_u64(&e->c[c], pg_atomic_read_u64(&saved[i].c[c]));
	}
	pfree(saved);
}

/*
 * A queue's committed counts, indexed by QC_* (all 0 for a queue that has
 * no slot); false, and all 0, without shared memory.
 */
bool
queue_counters_read(int64 queue_id, int64 *counts)
{
	QueueCounterEntry *e = NULL;

	if (queue_shared != NULL)
		e = counter_entry(queue_id, false);
	for (int c = 0; c < QC_NUM; c++)
		counts[c] = e ? (int64) pg_atomic_read_u64(&e->c[c]) : 0;
	return queue_shared != NULL;
}

/* How many sends of a queue have committed (-1: no shared memory). */
int64
queue_sent_count(int64 queue_id)
{
	int64		counts[QC_NUM];

	return queue_counters_read(queue_id, counts) ? counts[QC_SENT] : -1;
}

/*
 * A queue is dropped: its slot becomes reusable (and reads nothing).
 */
void
queue_forget_counters(int64 queue_id)
{
	QueueCounterEntry *e;

	if (queue_shared == NULL)
		return;
	LWLockAcquire(queue_shared->lock, LW_EXCLUSIVE);
	e = counter_probe(MyDatabaseId, queue_id, false);
	if (e != NULL)
		e->queue_id = 0;
	LWLockRelease(queue_shared->lock);
}

/*
 * A queue id is new (queue.create): zero any counters left by an earlier
 * queue of that id (ids restart when the extension is created again).
 */
void
queue_reset_counters(int64 queue_id)
{
	QueueCounterEntry *e;

	if (queue_shared == NULL)
		return;
	e = counter_entry(queue_id, false);
	if (e != NULL)
		for (int c = 0; c < QC_NUM; c++)
			pg_atomic_write_u64(&e->c[c], 0);
}

static void
flush_pending(bool commit)
{
	for (int i = 0; i < npending; i++)
	{
		PendingQueue *p = &pending[i];

		if (queue_shared == NULL)
			continue;
		if (commit && p->forget)
			queue_forget_counters(p->queue_id);
		else if (commit)
		{
			QueueCounterEntry *e = counter_entry(p->queue_id, false);

			if (e == NULL)
				e = counter_entry(p->queue_id, true);
			if (e != NULL)
				for (int c = 0; c < QC_NUM; c++)
					if (p->c[c] != 0)
						pg_atomic_fetch_add_u64(&e->c[c], p->c[c]);
		}
		if (commit ? p->wake_on_commit : p->wake_on_abort)
			queue_wake(p->queue_id);
	}
	npending = 0;
	if (commit && register_pending)
		queue_register_database();
	register_pending = false;
}

/*
 * A savepoint rolled back takes its notes with it; what it received is
 * visible again at once, so waiters are woken now.  Subtransaction ids
 * grow, and a subtransaction ends before any later sibling starts, so the
 * notes of the one aborting and of its children are those with an id at
 * least its own.
 */
static void
queue_subxact_callback(SubXactEvent event, SubTransactionId mySubid,
					   SubTransactionId parentSubid, void *arg)
{
	int			kept = 0;

	if (event != SUBXACT_EVENT_ABORT_SUB)
		return;
	for (int i = 0; i < npending; i++)
	{
		if (pending[i].subid < mySubid)
			pending[kept++] = pending[i];
		else if (pending[i].wake_on_abort && queue_shared != NULL)
			queue_wake(pending[i].queue_id);
	}
	npending = kept;
}

static void
queue_xact_callback(XactEvent event, void *arg)
{
	switch (event)
	{
		case XACT_EVENT_COMMIT:
		case XACT_EVENT_PARALLEL_COMMIT:
			flush_pending(true);
			break;
		case XACT_EVENT_ABORT:
		case XACT_EVENT_PARALLEL_ABORT:
		case XACT_EVENT_PREPARE:
			flush_pending(false);
			break;
		default:
			break;
	}
}

/* The pending entry of a queue in this transaction. */
static void
register_callbacks(void)
{
	if (!callback_registered)
	{
		RegisterXactCallback(queue_xact_callback, NULL);
		RegisterSubXactCallback(queue_subxact_callback, NULL);
		callback_registered = true;
	}
}

static PendingQueue *
pending_entry(int64 queue_id)
{
	SubTransactionId subid = GetCurrentSubTransactionId();

	register_callbacks();
	for (int i = 0; i < npending; i++)
		if (pending[i].queue_id == queue_id && pending[i].subid == subid)
			return &pending[i];
	if (npending == maxpending)
	{
		maxpending = maxpending == 0 ? 8 : maxpending * 2;
		pending = pending == NULL ?
			MemoryContextAlloc(TopMemoryContext, maxpending * sizeof(PendingQueue)) :
			repalloc(pending, maxpending * sizeof(PendingQueue));
	}
	memset(&pending[npending], 0, sizeof(PendingQueue));
	pending[npending].queue_id = queue_id;
	pending[npending].subid = subid;
	return &pending[npending++];
}

/*
 * queue._register() (CREATE EXTENSION): ask for this database's worker
 * once the transaction commits, when the worker can see the extension.
 */
void
queue_register_at_commit(void)
{
	register_callbacks();
	register_pending = true;
}

/*
 * Note n events of one counter for a queue, to take effect at commit.  A
 * send wakes long-pollers when it commits; a receive wakes them if it
 * aborts (its messages are visible again at once).
 */
void
queue_count(int64 queue_id, int counter, int64 n)
{
	PendingQueue *p = pending_entry(queue_id);

	p->c[counter] += n;
	if (counter == QC_SENT)
		p->wake_on_commit = true;
	if (counter == QC_RECEIVED)
		p->wake_on_abort = true;
}

/* A dropped queue frees its counter slot when the drop commits. */
void
queue_forget_counters_at_commit(int64 queue_id)
{
	pending_entry(queue_id)->forget = true;
}

/* Wake long-pollers at commit without counting anything. */
void
queue_note_wakeup(int64 queue_id)
{
	pending_entry(queue_id)->wake_on_commit = true;
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
