/*-------------------------------------------------------------------------
 *
 * counts.c
 *	  Per-queue cumulative counters, and the commit-time hand-off of
 *	  counts and long-poll wake-ups (the condition variables of the wait
 *	  slots are broadcast here; wait.c sleeps on them).
 *
 * A call notes what it did in a small backend-local list; at commit the
 * list goes to shared memory (counters by atomic add, wake-ups by
 * broadcasting the queues' condition variables), at abort it is dropped,
 * and so are the notes of a savepoint rolled back.  So a sent message is
 * counted, and wakes a waiting receiver, only once a receiver can see it.
 * A receive that rolls back hands its messages back at once, so it wakes
 * waiters too.
 *
 * A prepared transaction's notes wait in shared memory under its GID
 * (QueuePrepared, one slot per max_prepared_transactions) until COMMIT
 * PREPARED applies them or ROLLBACK PREPARED drops them (waking whom an
 * abort wakes); the utility hook (worker.c) tells us the GID of PREPARE
 * TRANSACTION, and which GID a COMMIT or ROLLBACK PREPARED finished.  A
 * slot keeps QUEUE_PREPARED_QUEUES queues: the counts of any further
 * queue are lost, and its finish wakes every waiting receive of the
 * cluster instead.  Slots do not survive a restart: a transaction
 * prepared before one commits without counting and wakes no one (a
 * waiting receive finds its messages when its wait ends).  Counts may be
 * lost, messages never.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/twophase.h"
#include "access/xact.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "storage/proc.h"
#include "utils/builtins.h"
#include "utils/memutils.h"

#include "common/hashfn.h"
#include "port/pg_bitutils.h"

#include "common/queue_common.h"

typedef struct PendingQueue
{
	int64		queue_id;
	SubTransactionId subid;		/* what it was noted in */
	bool		forget;			/* dropped: free its counters at commit */
	bool		wake_on_commit;
	bool		wake_on_abort;
	int64		c[QC_NUM];
	int64		arrived;		/* messages moved in (queue_note_arrival) */
	uint32		tenants;		/* QUEUE_TENANTS_* its sends carried */
	TimestampTz commit_floor;	/* the ready bound's lowering at commit ... */
	TimestampTz abort_floor;	/* ... and at abort (QUEUE_READY_NONE: none) */
	bool		named;			/* names the queue to its worker at commit (not
								 * a ready bound's note alone) */
} PendingQueue;


static PendingQueue *pending = NULL;
static int	npending = 0;
static int	maxpending = 0;
static bool callback_registered = false;

/* The GID of the PREPARE TRANSACTION this transaction is running, if any. */
static char prepare_gid[GIDSIZE];
static bool prepare_named = false;

static void register_callbacks(void);
static PendingQueue *pending_find(int64 queue_id);
static PendingQueue *pending_entry(int64 queue_id);

/* The wait slot of a queue of this database (wait.c sleeps on it). */
int
queue_wait_slot_of(int64 queue_id)
{
	uint32		h = hash_bytes_uint32((uint32) queue_id ^ (uint32) (queue_id >> 32)) ^
		MyDatabaseId;

	return h % QUEUE_WAIT_SLOTS;
}

/*
 * Wake the receivers waiting on one slot.  The generation goes up first,
 * so a receiver that checks it after joining the wait list either sees
 * the bump or gets the broadcast.
 */
static void
wake_slot(int slot)
{
	uint64		watchers;

	pg_atomic_fetch_add_u64(&queue_shared->wait_gen[slot], 1);
	ConditionVariableBroadcast(&queue_shared->wait_cv[slot]);

	/* the SQS endpoint's workers with a long poll parked on this slot */
	watchers = pg_atomic_read_u64(&queue_shared->watch_mask[slot]);
	while (watchers != 0)
	{
		int			w = pg_rightmost_one_pos64(watchers);
		Latch	   *latch = queue_shared->watcher_latch[w];

		watchers &= watchers - 1;
		if (latch != NULL)
			SetLatch(latch);
	}
}

/* Wake the receivers waiting on a queue (from commit callbacks). */
void
queue_wake(int64 queue_id)
{
	wake_slot(queue_wait_slot_of(queue_id));
}

/*
 * Wake every waiting receive of the cluster (each re-checks its queue):
 * for a commit that cannot name the queues it made receivable (counts.c).
 */
void
queue_wake_all(void)
{
	for (int slot = 0; slot < QUEUE_WAIT_SLOTS; slot++)
		wake_slot(slot);
}

/* The counter entry of a queue of this database, created on first use. */
static QueueCounterEntry *
counter_entry(int64 queue_id, bool create)
{
	QueueCounterEntry *found;

	LWLockAcquire(queue_shared->lock, create ? LW_EXCLUSIVE : LW_SHARED);
	found = queue_counter_probe(MyDatabaseId, queue_id, create);
	LWLockRelease(queue_shared->lock);
	return found;
}

/*
 * The ready bound of a standard queue (issue 38): a time below which no
 * message of the queue's table is ready to receive, so that a receive's
 * scan of the (visible_at, message_id) index starts there instead of at
 * the index's start, past the entries of messages received and deleted
 * that a long-held snapshot keeps VACUUM from removing.  Kept in the
 * queue's counter slot, under its spinlock, with a generation.
 *
 * Invariant: every message of the table that is ready (visible_at <= now,
 * committed, not deleted) has visible_at >= ready_from, or is written or
 * locked by a transaction still running that lowers the bound below it
 * when it ends.  So:
 *  - a receive that scanned from the bound up to now and leased fewer
 *    than it asked for raises it to now: every row below that it passed
 *    was dead to it, invisible (its writer still running) or locked (its
 *    locker still running); one that filled its batch raises it to the
 *    latest sent_at it leased (sent_at <= visible_at, and the scan is in
 *    visible_at order).  A raise counts only if no lowering came between
 *    the receive's read of the bound and the raise (the generation): a
 *    commit that lowered it made rows visible that the receive's snapshot
 *    may not have seen.  REPEATABLE READ receives never raise.
 *  - whatever may make a row ready below the bound lowers it when its
 *    transaction ends, after its rows are visible (queue_note_ready): a
 *    send to its messages' visible_at at commit, a visibility change to
 *    its new visible_at at commit and to its call's time at abort (the
 *    lease it restores ends after that), a receive to the bound it read at
 *    abort (the rows it leased are restored where it found them), a
 *    delete to the start at abort, moves into a queue (dead letters,
 *    redrive) to the time of the move at commit, the worker's rolled-back
 *    receive counts to the start at commit.  Prepared transactions carry
 *    theirs to COMMIT or ROLLBACK PREPARED (all of the database's bounds
 *    go to the start when the slot overflowed).
 *  - a bound is of one table or store (ready_key): a move between the
 *    layouts starts it afresh; so does a restart (shared memory) and a
 *    queue id used again (queue_reset_counters); and every READY_RECHECK
 *    one receive scans from the start anyway, so that rows written by hand
 *    into a queue's table are found within that time.
 *
 * A queue that reads by priority (fifo/priority.c) walks each level of its
 * partial index (priority, visible_at, message_id) from a bound of that
 * level's own (level_from), under the same invariant for the rows of that
 * priority: every lowering lowers all of them with the queue's bound (and
 * a receive's abort floor is the lowest it read), the same generation
 * guards a raise, and a lease by priority raises each level it walked
 * (queue_priority_raise) as a plain lease raises the queue's.  The
 * queue's own bound covers the rows stored without a priority, the only
 * ones in the visible_at index (1.13) and the only ones a plain lease
 * reads (a lease by priority reads the nulls of priority 4 through it,
 * and never raises it).
 *
 * A FIFO queue keeps the same bound over its groups' rows (g<id>) and in
 * message ids: no group row has a head_seq below it, so the receive's walk
 * of the groups' head index starts there, past the versions of rows whose
 * head has moved on (every delete moves a head) that a held snapshot
 * keeps.  A group's messages all have ids at or above its head_seq (a
 * send's are newer; a move into a group lowers its head in the same
 * transaction), so the walk of a group's messages starts at its head.
 * Raised at most every READY_PROBE by one receive, to the first head it
 * finds from the bound (QP_GROUP_MIN_HEAD), under the same generation
 * rule; lowered when a transaction ends that made a group row with a head
 * below the bound: a send's new groups (their heads at commit) and moves
 * into groups (queue_fifo_add_moved_groups: to the start at commit).  A
 * receive or an abort never lowers a head (a receive does not write it; an
 * abort puts back a head already counted).  Resets and the 30 s look from
 * the start as above.
 */
#define READY_RECHECK	(30 * USECS_PER_SEC)
#define READY_PROBE		(100 * 1000)

static void
ready_lower(QueueCounterEntry *e, int64 queue_id, TimestampTz v)
{
	/*
	 * A time not yet come changes nothing: the bound is below now, and a
	 * receive that read it before this raises it to no more than its own
	 * start, also below now.  (So a lease's commit, which makes its rows
	 * ready at its end, costs nothing here unless that end has passed.)
	 */
	if (v >= GetCurrentTimestamp())
		return;
	SpinLockAcquire(&e->ready_lock);
	if (e->dbid == MyDatabaseId && e->queue_id == queue_id)
	{
		if (v < e->ready_from)
			e->ready_from = v;
		for (int l = 0; l < QUEUE_PRIO_LEVELS; l++)
			if (v < e->level_from[l])
				e->level_from[l] = v;
		e->ready_gen++;
	}
	SpinLockRelease(&e->ready_lock);
}

/* Every bound of this database back to the start. */
static void
ready_lower_all(void)
{
	LWLockAcquire(queue_shared->lock, LW_SHARED);
	for (int i = 0; i < queue_shared->ncounters; i++)
	{
		QueueCounterEntry *e = &queue_shared->counters[i];

		if (e->dbid == MyDatabaseId && e->queue_id != 0)
			ready_lower(e, e->queue_id, DT_NOBEGIN);
	}
	LWLockRelease(queue_shared->lock);
}

/*
 * Where a receive of queue_id (whose table or store is key) starts its
 * scan at now: the bound, or DT_NOBEGIN (the index's start).  *cache keeps
 * the queue's counter slot for the backend (checked here each time).  The
 * receive notes r->from as its abort's floor when it leased something; r
 * is for queue_ready_raise.
 */
TimestampTz
queue_ready_from(int64 queue_id, int64 key, TimestampTz now, void **cache,
				 QueueReadyRead *r)
{
	QueueCounterEntry *e;
	TimestampTz from = DT_NOBEGIN;

	r->slot = NULL;
	r->queue_id = queue_id;
	r->from = DT_NOBEGIN;
	for (int l = 0; l < QUEUE_PRIO_LEVELS; l++)
		r->level_from[l] = DT_NOBEGIN;
	r->kinds = -1;
	if (queue_shared == NULL)
		return DT_NOBEGIN;
	e = (QueueCounterEntry *) *cache;
	for (int attempt = 0; attempt < 2; attempt++)
	{
		if (e == NULL)
			e = counter_entry(queue_id, false);
		*cache = e;
		if (e == NULL)
			return DT_NOBEGIN;	/* no slot: no bound */
		SpinLockAcquire(&e->ready_lock);
		if (e->dbid == MyDatabaseId && e->queue_id == queue_id)
			break;
		SpinLockRelease(&e->ready_lock);
		e = NULL;				/* the slot is another queue's now */
	}
	if (e == NULL)
		return DT_NOBEGIN;
	if (e->ready_key != key)
	{
		e->ready_key = key;
		e->ready_from = DT_NOBEGIN;
		for (int l = 0; l < QUEUE_PRIO_LEVELS; l++)
			e->level_from[l] = DT_NOBEGIN;
		e->ready_gen++;
		e->ready_checked = now;
	}
	else if (now - e->ready_checked > READY_RECHECK)
		e->ready_checked = now; /* this one from the start */
	else
	{
		from = e->ready_from;
		memcpy(r->level_from, e->level_from, sizeof(r->level_from));
	}
	r->gen = e->ready_gen;
	/*
	 * (after the generation: a commit notes its kinds before it lowers the
	 * bound, so kinds older than a send that became visible mean a changed
	 * generation, and no raise; fifo/priority.c's levels rely on it)
	 */
	r->kinds = (int) pg_atomic_read_u32(&e->tenants);
	r->slot = e;
	r->from = from;
	SpinLockRelease(&e->ready_lock);
	/* ... and what this transaction wrote, which it sees (not yet noted) */
	r->kinds |= (int) queue_pending_kinds(queue_id);
	return from;
}

/*
 * Whether this FIFO receive is the one to look for the first group head
 * (at most one every READY_PROBE per queue); claims the look when it is.
 */
bool
queue_ready_probe_due(const QueueReadyRead *r, TimestampTz now)
{
	QueueCounterEntry *e = (QueueCounterEntry *) r->slot;
	bool		due = false;

	if (e == NULL || IsolationUsesXactSnapshot())
		return false;
	SpinLockAcquire(&e->ready_lock);
	if (e->dbid == MyDatabaseId && e->queue_id == r->queue_id &&
		(now - e->ready_probed > READY_PROBE || now < e->ready_probed))
	{
		e->ready_probed = now;
		due = true;
	}
	SpinLockRelease(&e->ready_lock);
	return due;
}

/* After the receive's scan: no message of the queue is ready below to. */
void
queue_ready_raise(const QueueReadyRead *r, TimestampTz to)
{
	QueueCounterEntry *e = (QueueCounterEntry *) r->slot;

	if (e == NULL || IsolationUsesXactSnapshot())
		return;
	SpinLockAcquire(&e->ready_lock);
	if (e->dbid == MyDatabaseId && e->queue_id == r->queue_id &&
		e->ready_gen == r->gen && to > e->ready_from)
		e->ready_from = to;
	SpinLockRelease(&e->ready_lock);
}

/*
 * The same for a lease by priority (fifo/priority.c), level by level: no
 * message of priority l is ready below to[l] (DT_NOBEGIN: not raised).
 */
void
queue_ready_raise_levels(const QueueReadyRead *r, const TimestampTz *to)
{
	QueueCounterEntry *e = (QueueCounterEntry *) r->slot;

	if (e == NULL || IsolationUsesXactSnapshot())
		return;
	SpinLockAcquire(&e->ready_lock);
	if (e->dbid == MyDatabaseId && e->queue_id == r->queue_id &&
		e->ready_gen == r->gen)
		for (int l = 0; l < QUEUE_PRIO_LEVELS; l++)
			if (to[l] > e->level_from[l])
				e->level_from[l] = to[l];
	SpinLockRelease(&e->ready_lock);
}

/*
 * The lowest bound r read: the receive's floor at abort (what it leased
 * goes back at or above the bound its scan started from); with levels, of
 * the priorities' too.
 */
TimestampTz
queue_ready_floor(const QueueReadyRead *r, bool levels)
{
	TimestampTz floor = r->from;

	for (int l = 0; levels && l < QUEUE_PRIO_LEVELS; l++)
		floor = Min(floor, r->level_from[l]);
	return floor;
}

/*
 * This transaction may make messages of queue_id ready from at_commit on
 * if it commits, or from at_abort on if it aborts (QUEUE_READY_NONE:
 * none): the bound is lowered then.
 */
void
queue_note_ready(int64 queue_id, TimestampTz at_commit, TimestampTz at_abort)
{
	PendingQueue *p = pending_find(queue_id);	/* the worker need not look */

	p->commit_floor = Min(p->commit_floor, at_commit);
	p->abort_floor = Min(p->abort_floor, at_abort);
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

/*
 * How many messages have come into a queue, by committed sends and by
 * moves (dead letters in, redrives back): the worker's sign that a queue
 * it found empty is not any more.  -1 when that cannot be told: without
 * shared memory, or for a queue that has no counter slot (all taken).
 */
int64
queue_arrival_count(int64 queue_id)
{
	QueueCounterEntry *e;

	if (queue_shared == NULL)
		return -1;
	e = counter_entry(queue_id, false);
	if (e == NULL)
		return -1;
	return (int64) (pg_atomic_read_u64(&e->c[QC_SENT]) +
					pg_atomic_read_u64(&e->arrived));
}

/*
 * A commit changed a queue (e its counter slot, NULL when it has none):
 * name it to this database's worker, once until the worker looks (the
 * slot's active flag), so a queue nothing happens to costs the worker
 * nothing (worker.c).  The first commit after the worker looked pays one
 * exclusive lock; the others, an atomic read.
 */
static QueueDbSlot *my_db_slot = NULL;	/* this database's, once it has one */

static void
note_active(QueueCounterEntry *e, int64 queue_id)
{
	if (e != NULL && (pg_atomic_read_u32(&e->active) != 0 ||
					  pg_atomic_exchange_u32(&e->active, 1) != 0))
		return;
	/* (a stale read only costs the lock below) */
	if (e == NULL && my_db_slot != NULL && my_db_slot->active_overflow)
		return;
	LWLockAcquire(queue_shared->lock, LW_EXCLUSIVE);
	if (my_db_slot == NULL)
		my_db_slot = queue_db_slot(MyDatabaseId, false);
	if (my_db_slot != NULL)
	{
		if (e != NULL && my_db_slot->nactive < QUEUE_ACTIVE_IDS)
			my_db_slot->active[my_db_slot->nactive++] = queue_id;
		else
			my_db_slot->active_overflow = true;
	}
	LWLockRelease(queue_shared->lock);
}

/*
 * The worker takes the queues changed since it last looked, at most
 * QUEUE_ACTIVE_IDS into ids, and clears their flags; true when it must
 * look at every queue instead (it asks so at its start; too many; one
 * without a counter slot; no slot for the database), in which case every
 * flag of the database is cleared.  A commit that flags a queue after
 * this names it again.
 */
bool
queue_take_active(bool all, int64 *ids, int *nids)
{
	QueueDbSlot *s;

	*nids = 0;
	if (queue_shared == NULL)
		return true;
	LWLockAcquire(queue_shared->lock, LW_EXCLUSIVE);
	s = queue_db_slot(MyDatabaseId, false);
	all |= s == NULL || s->active_overflow;
	if (all)
	{
		for (int i = 0; i < queue_shared->ncounters; i++)
			if (queue_shared->counters[i].dbid == MyDatabaseId)
				pg_atomic_write_u32(&queue_shared->counters[i].active, 0);
	}
	else
	{
		for (int i = 0; i < s->nactive; i++)
		{
			QueueCounterEntry *e = queue_counter_probe(MyDatabaseId, s->active[i], false);

			if (e != NULL)
				pg_atomic_write_u32(&e->active, 0);
			ids[(*nids)++] = s->active[i];
		}
	}
	if (s != NULL)
	{
		s->nactive = 0;
		s->active_overflow = false;
	}
	LWLockRelease(queue_shared->lock);
	return all;
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
	e = queue_counter_probe(MyDatabaseId, queue_id, false);
	if (e != NULL)
		e->queue_id = 0;
	LWLockRelease(queue_shared->lock);
}

/*
 * A queue id is new (queue.create): zero any counters left by an earlier
 * queue of that id (ids restart when the extension is created again).  Its
 * slot is made when the create commits (an empty note does that), so the
 * worker can tell from the start whether anything arrived in it.
 */
void
queue_reset_counters(int64 queue_id)
{
	QueueCounterEntry *e;

	if (queue_shared == NULL)
		return;
	e = counter_entry(queue_id, false);
	if (e != NULL)
	{
		for (int c = 0; c < QC_NUM; c++)
			pg_atomic_write_u64(&e->c[c], 0);
		pg_atomic_write_u64(&e->arrived, 0);
		pg_atomic_write_u32(&e->tenants, 0);
		SpinLockAcquire(&e->ready_lock);
		e->ready_key = 0;
		SpinLockRelease(&e->ready_lock);
	}
	/* a new queue has no message: its slot knows all (fifo/priority.c) */
	pending_entry(queue_id)->tenants |= QUEUE_PRIORITIES_CHECKED;
}

/*
 * What a transaction did to one queue takes effect: at commit its counts
 * are added (or, dropped, the queue's slot freed) and the waiters a send
 * wakes are woken; at abort only those a receive wakes.
 */
static void
apply_counts(int64 queue_id, const int64 *counts, int64 arrived, uint32 tenants,
			 bool forget, bool wake, bool commit, TimestampTz floor, bool named)
{
	if (commit && forget)
		queue_forget_counters(queue_id);
	else if (commit && named)
	{
		QueueCounterEntry *e = counter_entry(queue_id, false);

		if (e == NULL)
			e = counter_entry(queue_id, true);
		if (e != NULL)
		{
			for (int c = 0; c < QC_NUM; c++)
				if (counts[c] != 0)
					pg_atomic_fetch_add_u64(&e->c[c], counts[c]);
			if (arrived != 0)
				pg_atomic_fetch_add_u64(&e->arrived, arrived);
			/* (read first: a slot's kinds are soon all set) */
			if (tenants != 0 &&
				(pg_atomic_read_u32(&e->tenants) & tenants) != tenants)
				pg_atomic_fetch_or_u32(&e->tenants, tenants);
			if (floor != QUEUE_READY_NONE)
				ready_lower(e, queue_id, floor);
		}
		note_active(e, queue_id);
	}
	else if (floor != QUEUE_READY_NONE)
	{
		/* an abort's, or a commit's that changed nothing else */
		QueueCounterEntry *e = counter_entry(queue_id, false);

		if (e != NULL)
			ready_lower(e, queue_id, floor);
	}
	/* (after the bound is lowered: the woken scan from it) */
	if (wake)
		queue_wake(queue_id);
}

static void
flush_pending(bool commit)
{
	for (int i = 0; i < npending && queue_shared != NULL; i++)
	{
		PendingQueue *p = &pending[i];

		apply_counts(p->queue_id, p->c, p->arrived, p->tenants, p->forget,
					 commit ? p->wake_on_commit : p->wake_on_abort, commit,
					 commit ? p->commit_floor : p->abort_floor, p->named);
	}
	npending = 0;
}

/*
 * PREPARE TRANSACTION: the utility hook names the GID before the
 * transaction is prepared (at the end of the statement); the name lasts
 * until the transaction ends, however it ends.
 */
void
queue_prepare_gid(const char *gid)
{
	register_callbacks();
	strlcpy(prepare_gid, gid, GIDSIZE);
	prepare_named = true;
}

/*
 * The transaction was prepared: keep its notes in a free slot (else the
 * oldest slot's, which are lost) under its GID.  Notes of one queue made
 * in several subtransactions become one.
 */
static void
keep_prepared(void)
{
	QueuePrepared *slot = NULL;

	if (queue_shared == NULL || queue_shared->nprepared == 0 ||
		!prepare_named || npending == 0)
		return;

	LWLockAcquire(queue_shared->lock, LW_EXCLUSIVE);
	for (int i = 0; i < queue_shared->nprepared; i++)
	{
		QueuePrepared *p = &queue_shared->prepared[i];

		if (p->dbid == InvalidOid)
		{
			slot = p;
			break;
		}
		if (slot == NULL || p->seq < slot->seq)
			slot = p;
	}
	memset(slot, 0, sizeof(*slot));
	slot->dbid = MyDatabaseId;
	slot->seq = ++queue_shared->prepared_seq;
	strlcpy(slot->gid, prepare_gid, GIDSIZE);
	for (int i = 0; i < npending; i++)
	{
		PendingQueue *p = &pending[i];
		QueuePreparedQueue *q = NULL;

		for (int k = 0; k < slot->nqueues && q == NULL; k++)
			if (slot->queues[k].queue_id == p->queue_id)
				q = &slot->queues[k];
		if (q == NULL && slot->nqueues == QUEUE_PREPARED_QUEUES)
		{
			slot->overflow = true;
			continue;
		}
		if (q == NULL)
		{
			q = &slot->queues[slot->nqueues++];
			q->queue_id = p->queue_id;
			q->commit_floor = QUEUE_READY_NONE;
			q->abort_floor = QUEUE_READY_NONE;
		}
		for (int c = 0; c < QC_NUM; c++)
			q->c[c] += p->c[c];
		q->arrived += p->arrived;
		q->tenants |= p->tenants;
		q->commit_floor = Min(q->commit_floor, p->commit_floor);
		q->abort_floor = Min(q->abort_floor, p->abort_floor);
		q->forget |= p->forget;
		q->wake_on_commit |= p->wake_on_commit;
		q->wake_on_abort |= p->wake_on_abort;
	}
	LWLockRelease(queue_shared->lock);
}

/*
 * COMMIT PREPARED or ROLLBACK PREPARED of gid succeeded (the utility hook
 * calls this after PostgreSQL did it): apply or drop what the prepared
 * transaction noted, as its own commit or abort would have.
 */
void
queue_finish_prepared(const char *gid, bool commit)
{
	QueuePrepared done;
	bool		found = false;

	if (queue_shared == NULL || queue_shared->nprepared == 0)
		return;
	LWLockAcquire(queue_shared->lock, LW_EXCLUSIVE);
	for (int i = 0; i < queue_shared->nprepared && !found; i++)
	{
		QueuePrepared *p = &queue_shared->prepared[i];

		if (p->dbid == MyDatabaseId && strcmp(p->gid, gid) == 0)
		{
			done = *p;
			p->dbid = InvalidOid;
			found = true;
		}
	}
	LWLockRelease(queue_shared->lock);
	if (!found)
		return;

	for (int k = 0; k < done.nqueues; k++)
	{
		QueuePreparedQueue *q = &done.queues[k];

		apply_counts(q->queue_id, q->c, q->arrived, q->tenants, q->forget,
					 commit ? q->wake_on_commit : q->wake_on_abort, commit,
					 commit ? q->commit_floor : q->abort_floor, true);
	}
	/*
	 * Queues it could not keep apart: every ready bound of the database
	 * goes back to the start, and every waiting receive is woken.
	 */
	if (done.overflow)
	{
		ready_lower_all();
		queue_wake_all();
	}
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
		else if (queue_shared != NULL)
			apply_counts(pending[i].queue_id, pending[i].c, 0, 0, false,
						 pending[i].wake_on_abort, false, pending[i].abort_floor, false);
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
			flush_pending(false);
			break;
		case XACT_EVENT_PREPARE:
			/* Applied or dropped when COMMIT / ROLLBACK PREPARED says. */
			keep_prepared();
			npending = 0;
			break;
		default:
			return;
	}
	prepare_named = false;
}

/* Once per backend, at its first note. */
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

/*
 * The pending entry of a queue in this transaction, which names the queue
 * to its worker at commit.
 */
static PendingQueue *
pending_entry(int64 queue_id)
{
	PendingQueue *p = pending_find(queue_id);

	p->named = true;
	return p;
}

/* ... and the one a ready bound's note alone makes (queue_note_ready). */
static PendingQueue *
pending_find(int64 queue_id)
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
	pending[npending].commit_floor = QUEUE_READY_NONE;
	pending[npending].abort_floor = QUEUE_READY_NONE;
	return &pending[npending++];
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

/*
 * The kinds (QUEUE_TENANTS_*, QUEUE_PRIORIT*) a queue's slot holds, for
 * fair.c and priority.c; -1 without shared memory or a slot.  Read
 * through the backend's cache of the slot (*cache, as queue_ready_from
 * keeps it), under the slot's own spinlock, not the table's lock: the
 * send and receive paths of every queue come here.
 */
int
queue_slot_kinds(int64 queue_id, void **cache)
{
	QueueCounterEntry *e;

	if (queue_shared == NULL)
		return -1;
	e = (QueueCounterEntry *) *cache;
	for (int attempt = 0; attempt < 2; attempt++)
	{
		if (e == NULL)
			e = counter_entry(queue_id, false);
		*cache = e;
		if (e == NULL)
			return -1;
		SpinLockAcquire(&e->ready_lock);
		if (e->dbid == MyDatabaseId && e->queue_id == queue_id)
		{
			int			kinds = (int) pg_atomic_read_u32(&e->tenants);

			SpinLockRelease(&e->ready_lock);
			return kinds;
		}
		SpinLockRelease(&e->ready_lock);
		e = NULL;				/* the slot is another queue's now */
	}
	*cache = NULL;
	return -1;
}

/*
 * The kinds this transaction noted for a queue (queue_note_kinds), which
 * reach its slot at commit: what its own statements can see already.
 */
uint32
queue_pending_kinds(int64 queue_id)
{
	uint32		kinds = 0;

	for (int i = 0; i < npending; i++)
		if (pending[i].queue_id == queue_id)
			kinds |= pending[i].tenants;
	return kinds;
}

/*
 * A send of n messages to a standard queue, group_nulls[i] telling which
 * carry no group id: the kinds (QUEUE_TENANTS_*) are noted in the queue's
 * slot when the send commits, with its counts, for fair.c's choice of
 * receive (a send that rolls back notes nothing).
 */
void
queue_note_tenants(int64 queue_id, int n, const bool *group_nulls)
{
	uint32		kinds = 0;

	for (int i = 0; i < n && kinds != (QUEUE_TENANTS_GROUPED | QUEUE_TENANTS_UNGROUPED); i++)
		kinds |= group_nulls[i] ? QUEUE_TENANTS_UNGROUPED : QUEUE_TENANTS_GROUPED;
	pending_entry(queue_id)->tenants |= kinds;
}

/*
 * Kinds (QUEUE_TENANTS_*, QUEUE_PRIORITIES*) noted in a queue's slot: at
 * commit with its counts (what a send or a move wrote), or at once (what a
 * receive found in the table, which is committed).
 */
void
queue_note_kinds(int64 queue_id, uint32 kinds)
{
	pending_entry(queue_id)->tenants |= kinds;
}

void
queue_set_kinds(int64 queue_id, uint32 kinds)
{
	QueueCounterEntry *e;

	if (queue_shared == NULL)
		return;
	e = counter_entry(queue_id, true);
	if (e != NULL)
		pg_atomic_fetch_or_u32(&e->tenants, kinds);
}

/* A dropped queue frees its counter slot when the drop commits. */
void
queue_forget_counters_at_commit(int64 queue_id)
{
	pending_entry(queue_id)->forget = true;
}

/*
 * n messages were moved into a queue (not sent): noted, at commit, for
 * queue_arrival_count; wakes long-pollers as a send does.
 */
void
queue_note_arrival(int64 queue_id, int64 n)
{
	PendingQueue *p = pending_entry(queue_id);

	p->arrived += n;
	p->wake_on_commit = true;
	/* the moved messages are visible from the move on, after this began */
	p->commit_floor = Min(p->commit_floor, GetCurrentTransactionStartTimestamp());
}

/*
 * A change the counters do not see (a lease made shorter or longer):
 * only named to the worker at commit, whose schedule of the queue's
 * dead letters it may change (note_active).
 */
void
queue_note_change(int64 queue_id)
{
	(void) pending_entry(queue_id);
}

/* Wake long-pollers at commit without counting anything. */
void
queue_note_wakeup(int64 queue_id)
{
	pending_entry(queue_id)->wake_on_commit = true;
}

/*
 * A count that wakes no one at commit: the topics' counters (topic.c), kept
 * in the queues' table under keys no queue has.
 */
void
queue_count_only(int64 key, int counter, int64 n)
{
	pending_entry(key)->c[counter] += n;
}
