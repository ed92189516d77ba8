/*-------------------------------------------------------------------------
 *
 * failed.c
 *	  Receives whose transaction rolls back still count (DESIGN.md
 *	  "Consumers": receives in transactions that roll back).
 *
 * A receive bumps receive_count and pushes visible_at in the message row,
 * inside the caller's transaction: a rollback undoes both, so a consumer
 * that fails on a message (BEGIN; receive; error; ROLLBACK) would get it
 * back at once, with the same count, forever.  SQS counts every receive.
 *
 * So shared memory keeps, per (database, queue, message), an entry:
 *
 *	n			receives that rolled back and are not in the committed row;
 *	not_before	the message is not delivered before this (the latest
 *				rollback's time plus retry_delay, or a consumer's delay);
 *	holder		the (sub)transaction that holds the row now, having written
 *				it: a receive (h_adds 1: its receive counts if it rolls
 *				back, with its delay h_delay) or a writer of the count
 *				(h_adds 0); of n, h_folded receives are in the row it wrote,
 *				so they are done if it commits.
 *
 * A receive registers each message it leased, in the same statement as the
 * lease, before it returns it (queue_failed_leased): the entry exists
 * while the row's lock does.  That matters because PostgreSQL ends a
 * transaction's row locks (it leaves the proc array) before it runs the
 * abort callbacks: an entry made only there would come too late for a
 * receive that locks the row in between.  When the holder ends, its own
 * callback settles the entry: committed, n -= h_folded; rolled back,
 * n += h_adds and not_before moves on.  Anyone who meets an entry whose
 * holder is no longer running (the callback has not run yet) settles it
 * the same way from the commit log first.  So the outcome never depends
 * on who gets there first.
 *
 * A receive that finds an entry for a message it just leased folds the
 * entry's n into the row (the row then shows every receive) and delivers
 * it only when that count is still below max_receive_count and not_before
 * has passed; otherwise it gives the message up in the same statement
 * (queue_failed_withdrawn): back at not_before, or to the dead-letter
 * queue when the count is used up.  Rows with no entry cost one pass over
 * the leased ids under the lock, and one more at the transaction's end.
 * The database's queue worker writes the entries nobody receives
 * (queue_failed_apply_all), in transactions that commit on their own:
 * messages whose every receiver rolls back get their count and move to
 * the dead-letter queue there.  A receive never writes entries of messages
 * it did not lease: a receiver that rolls back undoes what it wrote, which
 * is harmless here (its entries say so) but would keep nothing settled.
 *
 * The invariant: a message is never delivered while its committed
 * receive_count plus the n of its entry (rolled-back receives not written
 * by a committed transaction; a holder's h_folded counts until it commits)
 * reaches max_receive_count, nor before its not_before; and it is moved to
 * the dead-letter queue only by a transaction that holds its row while no
 * committed lease is running (visible_at has passed).  It holds because
 * (1) a delivery needs the row's lock, and whoever has the lock registers
 * itself as the holder before the lock can end, so every rolled-back
 * receive is in n by the time the next locker reads the entry (settled by
 * its callback or by the reader); (2) n leaves only when a holder that
 * wrote it into the row commits, and then the row carries it; (3) the
 * reader decides after its own lease, with the row's latest committed
 * count in hand.  Not covered: a full table (queue.max_failed_receives;
 * a receive that finds no room is not registered, and its rollback is not
 * counted: logged once), a crash or restart (shared memory is lost: a
 * count may be lost, never a message, as DESIGN.md allows), and no
 * preload (no shared memory: a rollback counts nothing, as before).
 * Nested subtransactions receiving one message twice may count a receive
 * too many, never too few.
 *
 * A prepared transaction stays the holder of its entries; COMMIT or
 * ROLLBACK PREPARED settles them from the commit log
 * (queue_failed_finish_prepared), as any reader would.
 *
 * A session that ends with FATAL (pg_terminate_backend, or a consumer
 * process the queue worker terminates: consumer_tend.c) aborts its
 * transaction on the way out (ShutdownPostgres, a before_shmem_exit
 * callback), and that abort's callback settles its entries as any
 * rollback's does: its receives count.  (Were it not to run, the next
 * reader would settle them from the commit log, the holder having ended.)
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/transam.h"
#include "access/xact.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "storage/ipc.h"
#include "storage/lwlock.h"
#include "storage/proc.h"
#include "storage/procarray.h"
#include "storage/shmem.h"
#include "utils/builtins.h"
#include "utils/hsearch.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"

#include "common/queue_common.h"
#include "storage/queue_storage.h"
#include "state/queue_state.h"
#include "fifo/queue_fifo.h"
#include "lease/queue_lease.h"

PG_FUNCTION_INFO_V1(queue_failed_pending);

/* Entries shared memory holds, over all databases (queue.max_failed_receives). */
int			queue_max_failed_receives = 10000;

/* At most this many entries of one queue are written by one statement. */
#define APPLY_BATCH		1000

/* The worker tries again this soon when rows it wanted were held. */
#define WORKER_RETRY	(100 * 1000)	/* microseconds */

/*
 * The worker leaves an entry this long to the queue's receives, which
 * write it when they lease the message: a consumer retrying at once finds
 * its row free, and a receive seldom meets the worker at a row.  (They may
 * meet: then each skips what the other holds, and no count is lost or
 * doubled.)
 */
#define WORKER_GRACE	(100 * 1000)	/* microseconds */

typedef struct FailedKey
{
	Oid			dbid;
	int64		queue_id;
	int64		message_id;
} FailedKey;

typedef struct FailedEntry
{
	FailedKey	key;			/* hash key */
	int32		n;				/* rolled-back receives not in the row */
	TimestampTz not_before;		/* not delivered before this */
	TimestampTz noted_at;		/* its latest rollback */
	TransactionId holder;		/* holds the row and wrote it, or invalid */
	int32		h_adds;			/* its receives: count if it rolls back */
	int32		h_folded;		/* of n, in the row it wrote */
	int64		h_delay;		/* retry delay of its receives */
} FailedEntry;

/* How many entries with n > 0 a queue has, so the worker can ask cheaply. */
typedef struct FailedQueueKey
{
	Oid			dbid;
	int64		queue_id;
} FailedQueueKey;

typedef struct FailedQueue
{
	FailedQueueKey key;			/* hash key */
	int32		nentries;
} FailedQueue;

typedef struct FailedShared
{
	LWLock	   *lock;
	pg_atomic_uint32 nentries;	/* entries with n > 0 */
	bool		full_logged;
} FailedShared;

static FailedShared *failed_shared = NULL;
static HTAB *failed_entries = NULL;
static HTAB *failed_queues = NULL;

static shmem_request_hook_type prev_shmem_request_hook = NULL;
static shmem_startup_hook_type prev_shmem_startup_hook = NULL;

/* ------------------------------------------------------------------------
 * The entries this backend's open transaction holds
 * ------------------------------------------------------------------------
 */
typedef struct Held
{
	FailedKey	key;
	TransactionId xid;			/* the holder it registered */
	SubTransactionId subid;
} Held;

static Held *held = NULL;
static int	nheld = 0;
static int	maxheld = 0;

static QueueRetry retry_policy = QUEUE_RETRY_QUEUE;
static TimestampTz worker_next_due = 0; /* when the worker tries again */

static void
due_at(TimestampTz t)
{
	if (worker_next_due == 0 || t < worker_next_due)
		worker_next_due = t;
}

static void
hold(const FailedKey *key, TransactionId xid)
{
	if (nheld == maxheld)
	{
		int			newmax = maxheld == 0 ? 64 : maxheld * 2;

		held = held == NULL ?
			MemoryContextAlloc(TopMemoryContext, newmax * sizeof(Held)) :
			repalloc(held, newmax * sizeof(Held));
		maxheld = newmax;
	}
	held[nheld].key = *key;
	held[nheld].xid = xid;
	held[nheld].subid = GetCurrentSubTransactionId();
	nheld++;
}

/*
 * How long a message received with receive_count rc waits before it comes
 * back, under a retry policy (consumers: fixed or exponential; else the
 * queue's retry_delay), with vt the receive's visibility timeout.
 */
int64
queue_retry_delay(QueueRetry how, int32 rc, int64 vt, int64 queue_retry_delay)
{
	switch (how)
	{
		case QUEUE_RETRY_FIXED:
			return vt;
		case QUEUE_RETRY_EXPONENTIAL:
			{
				/* 1, 2, 4 ... s (CMQ's EXPONENTIAL_DECAY_RETRY), capped at vt */
				int			shift = Min(Max(rc, 1) - 1, 30);

				return Min((INT64CONST(1) << shift) * USECS_PER_SEC, vt);
			}
		case QUEUE_RETRY_QUEUE:
			break;
	}
	return queue_retry_delay;
}

/* How long a message received with receive_count rc waits after a rollback. */
static int64
retry_delay_of(QueueMeta *q, int32 rc, int64 vt)
{
	return queue_retry_delay(retry_policy, rc, vt, q->retry_delay);
}

/*
 * A consumer chooses when the messages of a batch that fails come back
 * (DESIGN.md "Consumers": exponential or fixed).  Backend-local.
 */
void
queue_set_retry(QueueRetry how)
{
	retry_policy = how;
}

/* ------------------------------------------------------------------------
 * Shared memory
 * ------------------------------------------------------------------------
 */

/*
 * Both tables are made whole at start and never grow (HASH_FIXED_SIZE):
 * a full table refuses an entry rather than take the shared memory the
 * lock table grows into.  A queue is counted only while it has an entry,
 * so the queue table, as large as the entry table, is never the one full.
 */
static Size
failed_size(void)
{
	Size		sz = MAXALIGN(sizeof(FailedShared));

	sz = add_size(sz, hash_estimate_size(queue_max_failed_receives, sizeof(FailedEntry)));
	sz = add_size(sz, hash_estimate_size(queue_max_failed_receives, sizeof(FailedQueue)));
	return sz;
}

static void
failed_shmem_request(void)
{
	if (prev_shmem_request_hook)
		prev_shmem_request_hook();
	RequestAddinShmemSpace(failed_size());
	RequestNamedLWLockTranche("queue failed receives", 1);
}

static void
failed_shmem_startup(void)
{
	bool		found;
	HASHCTL		ctl;

	if (prev_shmem_startup_hook)
		prev_shmem_startup_hook();

	LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
	failed_shared = ShmemInitStruct("queue failed receives", sizeof(FailedShared), &found);
	if (!found)
	{
		failed_shared->lock = &(GetNamedLWLockTranche("queue failed receives"))->lock;
		pg_atomic_init_u32(&failed_shared->nentries, 0);
		failed_shared->full_logged = false;
	}
	ctl.keysize = sizeof(FailedKey);
	ctl.entrysize = sizeof(FailedEntry);
	failed_entries = queue_shmem_init_hash("queue failed receive entries",
								   queue_max_failed_receives, queue_max_failed_receives,
								   &ctl, HASH_ELEM | HASH_BLOBS | HASH_FIXED_SIZE);
	ctl.keysize = sizeof(FailedQueueKey);
	ctl.entrysize = sizeof(FailedQueue);
	failed_queues = queue_shmem_init_hash("queue failed receive queues",
								  queue_max_failed_receives, queue_max_failed_receives,
								  &ctl, HASH_ELEM | HASH_BLOBS | HASH_FIXED_SIZE);
	LWLockRelease(AddinShmemInitLock);
}

/* Count an entry in or out of its queue's total (lock held exclusive). */
static void
count_entry(const FailedKey *key, int delta)
{
	FailedQueueKey qk;
	FailedQueue *fq;
	bool		found;

	memset(&qk, 0, sizeof(qk));
	qk.dbid = key->dbid;
	qk.queue_id = key->queue_id;
	fq = hash_search(failed_queues, &qk, delta > 0 ? HASH_ENTER_NULL : HASH_FIND, &found);
	if (fq == NULL)
		return;
	if (!found)
		fq->nentries = 0;
	fq->nentries += delta;
	if (delta > 0)
		pg_atomic_add_fetch_u32(&failed_shared->nentries, delta);
	else
		pg_atomic_sub_fetch_u32(&failed_shared->nentries, -delta);
	if (fq->nentries <= 0)
		hash_search(failed_queues, &qk, HASH_REMOVE, NULL);
}

static void
make_key(FailedKey *key, Oid dbid, int64 queue_id, int64 message_id)
{
	memset(key, 0, sizeof(*key));
	key->dbid = dbid;
	key->queue_id = queue_id;
	key->message_id = message_id;
}

/* The entry of key, made empty if new; NULL when the table is full. */
static FailedEntry *
enter_entry(const FailedKey *key)
{
	FailedEntry *e;
	bool		found;

	e = hash_search(failed_entries, key, HASH_ENTER_NULL, &found);
	if (e == NULL)
	{
		if (!failed_shared->full_logged)
		{
			failed_shared->full_logged = true;
			elog(LOG, "queue: %d messages have receives waiting to be counted, the most "
				 "queue.max_failed_receives allows; rollbacks of further ones are not counted",
				 queue_max_failed_receives);
		}
		return NULL;
	}
	if (!found)
	{
		e->n = 0;
		e->not_before = 0;
		e->noted_at = 0;
		e->holder = InvalidTransactionId;
		e->h_adds = 0;
		e->h_folded = 0;
		e->h_delay = 0;
	}
	return e;
}

/* Set an entry's n, keeping the counts of entries with n > 0. */
static void
set_n(FailedEntry *e, int32 n)
{
	bool		was = e->n > 0;

	e->n = Max(n, 0);
	if (was != (e->n > 0))
		count_entry(&e->key, e->n > 0 ? 1 : -1);
}

/* Drop an entry that says nothing any more; true if it went. */
static bool
drop_if_empty(FailedEntry *e)
{
	FailedKey	key;

	if (e->n > 0 || TransactionIdIsValid(e->holder))
		return false;
	key = e->key;
	hash_search(failed_entries, &key, HASH_REMOVE, NULL);
	return true;
}

/*
 * The holder of an entry ended (lock held exclusive): committed, the row
 * has what it folded; rolled back, its receives count from now.  Returns
 * false if the entry went.
 */
static bool
settle(FailedEntry *e, bool committed, TimestampTz now)
{
	int32		n = e->n;

	if (committed)
		n -= e->h_folded;
	else if (e->h_adds > 0)
	{
		n += e->h_adds;
		e->not_before = Max(e->not_before, now + e->h_delay);
		e->noted_at = now;
	}
	e->holder = InvalidTransactionId;
	e->h_adds = 0;
	e->h_folded = 0;
	e->h_delay = 0;
	set_n(e, n);
	return !drop_if_empty(e);
}

/*
 * Settle an entry whose holder is another transaction that is no longer
 * running (its callback has not run yet, or it was prepared), from the
 * commit log.  Returns false if the entry went; *running tells whether
 * the holder still runs (then nothing is done).
 */
static bool
settle_if_ended(FailedEntry *e, TimestampTz now, bool *running)
{
	TransactionId xid = e->holder;

	*running = false;
	if (!TransactionIdIsValid(xid))
		return true;
	if (TransactionIdIsCurrentTransactionId(xid) || TransactionIdIsInProgress(xid))
	{
		*running = true;
		return true;
	}
	return settle(e, TransactionIdDidCommit(xid), now);
}

/* Tell the database's worker there is something to write (worker.c). */
static void
wake_worker(void)
{
	LWLockAcquire(queue_shared->lock, LW_SHARED);
	{
		QueueDbSlot *s = queue_db_slot(MyDatabaseId, false);

		if (s != NULL && s->latch != NULL)
			SetLatch(s->latch);
	}
	LWLockRelease(queue_shared->lock);
}

/* ------------------------------------------------------------------------
 * The receive path
 * ------------------------------------------------------------------------
 */

/*
 * A receive leased n messages of q in the current (sub)transaction (their
 * rows are locked by it; receive_counts are after this receive): register
 * it as their holder.  For each, pending[i] gets the rolled-back receives
 * not yet in the row, which the caller writes into it, and not_before[i]
 * the time before which it must not be delivered.  Returns how many need
 * that (pending > 0 or not_before after now); 0 leaves the arrays unset.
 */
static int
queue_failed_leased(QueueMeta *q, int n, const int64 *ids, const int32 *receive_counts,
					int64 vt, TimestampTz now, int32 *pending, TimestampTz *not_before)
{
	TransactionId xid;
	int			nfix = 0;

	if (failed_shared == NULL || n == 0)
		return 0;
	xid = GetCurrentTransactionId();	/* had one for the lease already */
	LWLockAcquire(failed_shared->lock, LW_EXCLUSIVE);
	for (int i = 0; i < n; i++)
	{
		FailedKey	key;
		FailedEntry *e;
		int64		delay;

		pending[i] = 0;
		not_before[i] = 0;
		make_key(&key, MyDatabaseId, q->id, ids[i]);
		e = enter_entry(&key);
		if (e == NULL)
			continue;
		if (TransactionIdIsValid(e->holder) &&
			!TransactionIdIsCurrentTransactionId(e->holder))
		{
			bool		running;

			/*
			 * We hold the row, so its previous holder has ended, as a
			 * rule; settle it.  (Were it running, its receive would count
			 * from its own callback only if it stayed the holder; it gives
			 * way, as it can hold the row no more.)
			 */
			if (!settle_if_ended(e, now, &running) || running)
			{
				if (running)
				{
					e->holder = InvalidTransactionId;
					e->h_adds = e->h_folded = 0;
				}
				e = enter_entry(&key);
				if (e == NULL)
					continue;
			}
		}
		/* the delay of the count the message shows once it is written */
		delay = retry_delay_of(q, receive_counts[i] + e->n - e->h_folded, vt);
		if (TransactionIdIsValid(e->holder))
		{
			/* This transaction received it before: one receive more. */
			e->h_adds++;
			e->h_delay = Max(e->h_delay, delay);
		}
		else
		{
			e->h_adds = 1;
			e->h_folded = 0;
			e->h_delay = delay;
		}
		e->holder = xid;
		pending[i] = e->n - e->h_folded;
		not_before[i] = e->not_before;
		e->h_folded = e->n;
		if (pending[i] > 0 || not_before[i] > now)
			nfix++;
		hold(&key, xid);
	}
	LWLockRelease(failed_shared->lock);
	return nfix;
}

/*
 * Of messages queue_failed_leased registered, these are not delivered
 * after all (the receive gave them up): their receive is no receive.
 */
static void
queue_failed_withdrawn(QueueMeta *q, int n, const int64 *ids)
{
	TransactionId xid = GetCurrentTransactionIdIfAny();

	if (failed_shared == NULL || n == 0)
		return;
	LWLockAcquire(failed_shared->lock, LW_EXCLUSIVE);
	for (int i = 0; i < n; i++)
	{
		FailedKey	key;
		FailedEntry *e;

		make_key(&key, MyDatabaseId, q->id, ids[i]);
		e = hash_search(failed_entries, &key, HASH_FIND, NULL);
		if (e != NULL && e->holder == xid && e->h_adds > 0)
			e->h_adds--;
	}
	LWLockRelease(failed_shared->lock);
}

/*
 * Some messages a receive statement just leased had receives that rolled
 * back and are not in their rows yet (above).  Each such row gets them
 * now; one whose count, so completed, reaches max_receive_count, or whose
 * retry delay has not passed, is given up instead of delivered (it moves
 * to the dead-letter queue, or comes back at the end of the delay), and
 * on a FIFO queue so is the rest of its group in this batch, which must
 * not pass it.  k indexes the statement's deliveries (l->ids[k], row
 * l->rows[k], l->counts[k] after this receive); l->skip and l->count_of
 * (per row) are set.  Returns how many were given up; l keeps the
 * deliveries, in order.
 */
static int
settle_rolled_back(QueueMeta *q, QueueLeased *l, TimestampTz now,
				   const int32 *pending, const TimestampTz *not_before)
{
	SPITupleTable *tt = l->tt;
	int			n = l->n;
	int64	   *fix_ids = palloc(n * sizeof(int64));
	Datum	   *fix_d = palloc(n * sizeof(Datum));
	Datum	   *fix_v = palloc(n * sizeof(Datum));
	bool	   *fix_vnull = palloc(n * sizeof(bool));
	int			nfix = 0;
	int64	   *gone_ids = palloc(n * sizeof(int64));
	int			ngone = 0;
	int64	   *dlq_ids = palloc(n * sizeof(int64));
	Datum	   *dlq_groups = palloc(n * sizeof(Datum));
	int			ndlq = 0;
	Datum	   *held_back = palloc(n * sizeof(Datum));
	int			nheld_back = 0;
	int64		written = 0;
	int			kept = 0;

	for (int k = 0; k < n; k++)
	{
		uint64		r = l->rows[k];
		int64		id = l->ids[k];
		int32		count = l->counts[k] - 1 + pending[k];	/* before this receive */
		bool		isnull;
		Datum		g = SPI_getbinval(tt->vals[r], tt->tupdesc, RCOL_GROUP, &isnull);
		bool		behind = false;
		bool		used_up = q->max_receive_count > 0 && count >= q->max_receive_count;

		if (q->fifo && !isnull)
			for (int i = 0; i < nheld_back && !behind; i++)
				behind = queue_text_cmp(&held_back[i], &g) == 0;
		written += pending[k];
		if (!used_up && !behind && not_before[k] <= now)
		{
			/* Delivered, showing every receive. */
			if (pending[k] > 0)
			{
				fix_ids[nfix] = id;
				fix_d[nfix] = Int32GetDatum(pending[k]);
				fix_vnull[nfix] = true;
				fix_v[nfix] = (Datum) 0;
				nfix++;
				l->count_of[r] = l->counts[k] + pending[k];
			}
			l->ids[kept] = id;
			l->visible_ats[kept] = l->visible_ats[k];
			kept++;
			continue;
		}

		/* Given up: this receive was none. */
		l->skip[r] = true;
		gone_ids[ngone++] = id;
		fix_ids[nfix] = id;
		fix_d[nfix] = Int32GetDatum(pending[k] - 1);
		fix_vnull[nfix] = false;
		fix_v[nfix] = TimestampTzGetDatum(Max(not_before[k], now));
		nfix++;
		if (used_up)
		{
			dlq_ids[ndlq] = id;
			dlq_groups[ndlq] = isnull ? (Datum) 0 : g;
			ndlq++;
		}
		if (q->fifo && !isnull && !behind)
			held_back[nheld_back++] = g;
	}
	l->n = kept;

	{
		Datum		args[3];
		int			rc;

		args[0] = queue_int8_array(nfix, fix_ids);
		args[1] = PointerGetDatum(construct_array(fix_d, nfix, INT4OID, 4, true, TYPALIGN_INT));
		{
			int			dims[1] = {nfix};
			int			lbs[1] = {1};

			args[2] = PointerGetDatum(construct_md_array(fix_v, fix_vnull, 1, dims, lbs,
														 TIMESTAMPTZOID, 8, FLOAT8PASSBYVAL,
														 TYPALIGN_DOUBLE));
		}
		rc = queue_exec(q, QP_RECEIVE_FIXUP, args, NULL, false, 0);
		if (rc != SPI_OK_UPDATE)
			elog(ERROR, "queue receive failed: %s", SPI_result_code_string(rc));
	}
	queue_failed_withdrawn(q, ngone, gone_ids);
	/* those given up are ready again from now on (counts.c) */
	if (ngone > 0 && !q->fifo)
		queue_note_ready(q->id, now, QUEUE_READY_NONE);
	if (written > 0)
		queue_count(q->id, QC_RECEIVED, written);
	if (ndlq > 0)
		(void) queue_dead_letter(q, ndlq, dlq_ids, dlq_groups);
	/* Groups held back may come back later: their rows say when. */
	if (nheld_back > 0)
	{
		nheld_back = queue_sort_unique_texts(held_back, nheld_back);
		queue_fifo_refresh_groups(q, nheld_back, held_back);
	}
	return ngone;
}

/*
 * After a receive statement (api/receive.c): register its leases, so that
 * a rollback still counts them; fold in the receives of them that rolled
 * back before, giving up those so used up or not yet due
 * (settle_rolled_back); and move the rows the statement flagged as
 * received too often to the dead-letter queue.  Returns how many
 * deliveries were given up; l->n, l->ids and l->visible_ats keep the
 * rest, and l->skip and l->count_of say what to leave out and which
 * counts to show (NULL when nothing changed).
 */
int
queue_lease_settle(QueueMeta *q, QueueLeased *l, int64 vt, TimestampTz now)
{
	int32	   *pending = palloc(Max(l->n, 1) * sizeof(int32));
	TimestampTz *not_before = palloc(Max(l->n, 1) * sizeof(TimestampTz));
	int			given_up = 0;

	l->skip = NULL;
	l->count_of = NULL;
	if (queue_failed_leased(q, l->n, l->ids, l->counts, vt, now, pending, not_before) > 0)
	{
		l->skip = palloc0(Max(l->nrows, 1) * sizeof(bool));
		l->count_of = palloc(Max(l->nrows, 1) * sizeof(int32));
		for (uint64 r = 0; r < l->nrows; r++)
		{
			bool		isnull;

			l->count_of[r] = queue_row_is_dead_letter(l->tt, r) ? 0 :
				DatumGetInt32(SPI_getbinval(l->tt->vals[r], l->tt->tupdesc,
											RCOL_RECEIVE_COUNT, &isnull));
		}
		given_up = settle_rolled_back(q, l, now, pending, not_before);
	}
	if (q->max_receive_count > 0)
		queue_dead_letter_flagged(q, l->tt, l->nrows);
	return given_up;
}

/* ------------------------------------------------------------------------
 * Transaction ends
 * ------------------------------------------------------------------------
 */

/*
 * The entries held by the ending (sub)transaction (subid, or all for
 * InvalidSubTransactionId) are settled.  Returns whether a rollback left
 * receives to write.
 */
static bool
end_held(SubTransactionId subid, bool committed)
{
	TimestampTz now;
	int			kept = 0;
	bool		left = false;

	if (nheld == 0)
		return false;
	now = GetCurrentTimestamp();
	LWLockAcquire(failed_shared->lock, LW_EXCLUSIVE);
	for (int i = 0; i < nheld; i++)
	{
		Held	   *h = &held[i];
		FailedEntry *e;

		if (subid != InvalidSubTransactionId && h->subid != subid)
		{
			held[kept++] = *h;
			continue;
		}
		e = hash_search(failed_entries, &h->key, HASH_FIND, NULL);
		if (e == NULL || e->holder != h->xid)
			continue;			/* settled by someone else already */
		if (settle(e, committed, now) && e->n > 0 && !committed)
			left = true;
	}
	LWLockRelease(failed_shared->lock);
	nheld = kept;
	return left;
}

static void
failed_xact_callback(XactEvent event, void *arg)
{
	switch (event)
	{
		case XACT_EVENT_COMMIT:
		case XACT_EVENT_PARALLEL_COMMIT:
			(void) end_held(InvalidSubTransactionId, true);
			break;
		case XACT_EVENT_ABORT:
		case XACT_EVENT_PARALLEL_ABORT:
			if (end_held(InvalidSubTransactionId, false))
				wake_worker();
			break;
		case XACT_EVENT_PREPARE:
			/* The prepared transaction stays the holder of its entries. */
			nheld = 0;
			break;
		default:
			break;
	}
	retry_policy = QUEUE_RETRY_QUEUE;
}

static void
failed_subxact_callback(SubXactEvent event, SubTransactionId mySubid,
						SubTransactionId parentSubid, void *arg)
{
	switch (event)
	{
		case SUBXACT_EVENT_COMMIT_SUB:
			for (int i = 0; i < nheld; i++)
				if (held[i].subid == mySubid)
					held[i].subid = parentSubid;
			break;
		case SUBXACT_EVENT_ABORT_SUB:
			if (end_held(mySubid, false))
				wake_worker();
			break;
		default:
			break;
	}
}


/*
 * The receives of the current transaction will not count if it rolls
 * back (what it folded into rows stays pending, as for any holder that
 * rolls back).  A consumer whose handler failed on a whole batch calls
 * this before its abort: it then tries the messages one by one, and only
 * those that fail alone count (consumer_worker.c).
 */
void
queue_failed_uncount(void)
{
	if (failed_shared == NULL || nheld == 0)
		return;
	LWLockAcquire(failed_shared->lock, LW_EXCLUSIVE);
	for (int i = 0; i < nheld; i++)
	{
		FailedEntry *e = hash_search(failed_entries, &held[i].key, HASH_FIND, NULL);

		if (e != NULL && e->holder == held[i].xid)
			e->h_adds = 0;
	}
	LWLockRelease(failed_shared->lock);
}

/*
 * COMMIT or ROLLBACK PREPARED finished: settle the entries of holders that
 * ended (this database's), which the prepared transaction's among them.
 */
void
queue_failed_finish_prepared(const char *gid, bool commit)
{
	HASH_SEQ_STATUS status;
	FailedEntry *e;
	TimestampTz now = GetCurrentTimestamp();
	bool		left = false;

	if (failed_shared == NULL)
		return;
	LWLockAcquire(failed_shared->lock, LW_EXCLUSIVE);
	hash_seq_init(&status, failed_entries);
	while ((e = hash_seq_search(&status)) != NULL)
	{
		bool		running;

		if (e->key.dbid != MyDatabaseId || !TransactionIdIsValid(e->holder))
			continue;
		if (settle_if_ended(e, now, &running) && !running && e->n > 0)
			left = true;
	}
	LWLockRelease(failed_shared->lock);
	if (left && !commit)
		wake_worker();
}

/* ------------------------------------------------------------------------
 * The worker writes entries nobody receives into the message rows
 * ------------------------------------------------------------------------
 */

/* Whether queue_id has entries to write in this database. */
static bool
has_entries(int64 queue_id)
{
	FailedQueueKey qk;
	bool		found;

	if (failed_shared == NULL || pg_atomic_read_u32(&failed_shared->nentries) == 0)
		return false;
	memset(&qk, 0, sizeof(qk));
	qk.dbid = MyDatabaseId;
	qk.queue_id = queue_id;
	LWLockAcquire(failed_shared->lock, LW_SHARED);
	(void) hash_search(failed_queues, &qk, HASH_FIND, &found);
	LWLockRelease(failed_shared->lock);
	return found;
}

/*
 * Up to APPLY_BATCH entries of q to write (n > 0, no running holder; those
 * whose holder ended are settled first).  Entries younger than
 * WORKER_GRACE are left for now (worker_next_due says when they age).
 * Entries held by a running transaction are settled when it ends.
 * Returns how many.
 */
static int
list_entries(int64 queue_id, int64 *ids)
{
	HASH_SEQ_STATUS status;
	FailedEntry *e;
	int			n = 0;
	TimestampTz now = GetCurrentTimestamp();

	LWLockAcquire(failed_shared->lock, LW_EXCLUSIVE);
	hash_seq_init(&status, failed_entries);
	while ((e = hash_seq_search(&status)) != NULL)
	{
		bool		running;

		if (e->key.dbid != MyDatabaseId || e->key.queue_id != queue_id)
			continue;
		if (!settle_if_ended(e, now, &running) || running)
			continue;
		if (e->n > 0 && e->noted_at > now - WORKER_GRACE)
			due_at(e->noted_at + WORKER_GRACE);
		else if (e->n > 0 && n < APPLY_BATCH)
			ids[n++] = e->key.message_id;
	}
	LWLockRelease(failed_shared->lock);
	return n;
}

/*
 * Become the holder of the entries of the given messages (whose rows the
 * caller locked, or which are gone) that have receives to write and no
 * holder; their receives and delays go to ns and not_befores, ids keeps
 * those taken.  Returns how many.
 */
static int
take_entries(int64 queue_id, int64 *ids, int nids, int32 *ns, Datum *not_befores)
{
	int			n = 0;
	TransactionId xid = GetCurrentTransactionId();
	TimestampTz now = GetCurrentTimestamp();

	LWLockAcquire(failed_shared->lock, LW_EXCLUSIVE);
	for (int i = 0; i < nids; i++)
	{
		FailedKey	key;
		FailedEntry *e;
		bool		running;

		make_key(&key, MyDatabaseId, queue_id, ids[i]);
		e = hash_search(failed_entries, &key, HASH_FIND, NULL);
		if (e == NULL || !settle_if_ended(e, now, &running) || running || e->n <= 0)
			continue;			/* written meanwhile, or someone has it */
		e->holder = xid;
		e->h_adds = 0;
		e->h_folded = e->n;
		e->h_delay = 0;
		hold(&key, xid);
		ids[n] = ids[i];
		ns[n] = e->n;
		not_befores[n] = TimestampTzGetDatum(e->not_before);
		n++;
	}
	LWLockRelease(failed_shared->lock);
	return n;
}

/* Run a statement of plans.c over message ids; its rows are in SPI_tuptable. */
static uint64
run_over_ids(QueueMeta *q, QueuePlanKind kind, int n, const int64 *ids)
{
	Datum		arg = queue_int8_array(n, ids);
	int			rc = queue_exec(q, kind, &arg, NULL, false, 0);

	if (rc != SPI_OK_SELECT)
		elog(ERROR, "counting rolled-back receives failed: %s", SPI_result_code_string(rc));
	return SPI_processed;
}

static int64
int64_col(uint64 r, int col)
{
	bool		isnull;

	return DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[r], SPI_tuptable->tupdesc, col, &isnull));
}

/*
 * Entries of messages that are gone (deleted, expired, moved) are taken:
 * they go when the worker's transaction commits.
 */
static void
drop_gone(QueueMeta *q, int n, const int64 *ids)
{
	bool	   *exists = palloc0(Max(n, 1) * sizeof(bool));
	int64	   *gone = palloc(Max(n, 1) * sizeof(int64));
	int			ngone = 0;
	int32	   *ns = palloc(Max(n, 1) * sizeof(int32));
	Datum	   *nb = palloc(Max(n, 1) * sizeof(Datum));
	uint64		rows = run_over_ids(q, QP_FAILED_EXISTING, n, ids);

	for (uint64 r = 0; r < rows; r++)
	{
		int64		id = int64_col(r, 1);

		for (int i = 0; i < n; i++)
			if (ids[i] == id)
				exists[i] = true;
	}
	for (int i = 0; i < n; i++)
		if (!exists[i])
			gone[ngone++] = ids[i];
	(void) take_entries(q->id, gone, ngone, ns, nb);
}

/*
 * Write the rolled-back receives of q into its messages, in the worker's
 * transaction (SPI connected).  Rows someone holds are skipped (SKIP
 * LOCKED) and tried on a later pass.  A message whose count is used up
 * moves to the dead-letter queue, unless a lease or a retry delay keeps it
 * invisible: then the receive that meets it, or the dead-letter sweep
 * when that ends, moves it.  Returns how many messages were written.
 */
static int
apply_queue(QueueMeta *q)
{
	int64	   *ids;
	int32	   *ns;
	Datum	   *not_befores;
	int			ncand;
	int			n;
	int			nlocked;
	int			rc;
	Datum		args[4];
	SPITupleTable *tt;
	uint64		nrows;
	int64	   *dlq_ids;
	Datum	   *dlq_groups;
	int			ndlq = 0;
	Datum	   *groups;
	int			ngroups = 0;
	int64		received = 0;
	TimestampTz now;

	if (!has_entries(q->id))
		return 0;
	ids = palloc(APPLY_BATCH * sizeof(int64));
	ncand = list_entries(q->id, ids);
	if (ncand == 0)
		return 0;

	/*
	 * The rows it locks may be ready and keep their visible_at: a standard
	 * queue's ready bound goes back to the start when this ends, however
	 * it ends (common/counts.c).
	 */
	if (!q->fifo)
		queue_note_ready(q->id, DT_NOBEGIN, DT_NOBEGIN);

	/* Lock what nobody holds (on a FIFO queue, groups first), then take. */
	nrows = run_over_ids(q, q->fifo ? QP_FAILED_LOCK_FIFO : QP_FAILED_LOCK, ncand, ids);
	{
		int64	   *locked = palloc(Max(nrows, 1) * sizeof(int64));

		nlocked = (int) nrows;
		for (uint64 r = 0; r < nrows; r++)
			locked[r] = int64_col(r, 1);
		if (nlocked < ncand)
		{
			int64	   *rest = palloc(ncand * sizeof(int64));
			int			nrest = 0;

			for (int i = 0; i < ncand; i++)
			{
				bool		got = false;

				for (int k = 0; k < nlocked && !got; k++)
					got = locked[k] == ids[i];
				if (!got)
					rest[nrest++] = ids[i];
			}
			drop_gone(q, nrest, rest);
			/* what is held by others is tried again soon */
			due_at(GetCurrentTimestamp() + WORKER_RETRY);
		}
		ids = locked;
	}
	ns = palloc(Max(nlocked, 1) * sizeof(int32));
	not_befores = palloc(Max(nlocked, 1) * sizeof(Datum));
	n = take_entries(q->id, ids, nlocked, ns, not_befores);
	if (n == 0)
		return 0;
	for (int i = 0; i < n; i++)
		received += ns[i];

	now = GetCurrentTimestamp();
	args[0] = queue_int8_array(n, ids);
	{
		Datum	   *nd = palloc(n * sizeof(Datum));

		for (int i = 0; i < n; i++)
			nd[i] = Int32GetDatum(ns[i]);
		args[1] = PointerGetDatum(construct_array(nd, n, INT4OID, 4, true, TYPALIGN_INT));
	}
	args[2] = PointerGetDatum(construct_array(not_befores, n, TIMESTAMPTZOID, 8,
											  FLOAT8PASSBYVAL, TYPALIGN_DOUBLE));
	args[3] = TimestampTzGetDatum(now);
	rc = queue_exec(q, QP_FAILED_APPLY, args, NULL, false, 0);
	if (rc != SPI_OK_UPDATE_RETURNING)
		elog(ERROR, "counting rolled-back receives failed: %s", SPI_result_code_string(rc));
	tt = SPI_tuptable;
	nrows = SPI_processed;

	dlq_ids = palloc(Max(nrows, 1) * sizeof(int64));
	dlq_groups = palloc(Max(nrows, 1) * sizeof(Datum));
	groups = palloc(Max(nrows, 1) * sizeof(Datum));
	for (uint64 r = 0; r < nrows; r++)
	{
		bool		isnull;
		int64		id = DatumGetInt64(SPI_getbinval(tt->vals[r], tt->tupdesc, 1, &isnull));
		int32		count = DatumGetInt32(SPI_getbinval(tt->vals[r], tt->tupdesc, 2, &isnull));
		Datum		g = SPI_getbinval(tt->vals[r], tt->tupdesc, 3, &isnull);
		Datum		gcopy = isnull ? (Datum) 0 : PointerGetDatum(PG_DETOAST_DATUM_COPY(g));
		TimestampTz vis = DatumGetTimestampTz(SPI_getbinval(tt->vals[r], tt->tupdesc, 4, &isnull));

		if (gcopy != (Datum) 0)
			groups[ngroups++] = gcopy;
		if (q->max_receive_count > 0 && count >= q->max_receive_count && vis <= now)
		{
			dlq_ids[ndlq] = id;
			dlq_groups[ndlq] = gcopy;
			ndlq++;
		}
	}

	/* A FIFO group's head may now come back later: its row says when. */
	if (q->fifo && ngroups > 0)
	{
		ngroups = queue_sort_unique_texts(groups, ngroups);
		queue_fifo_refresh_groups(q, ngroups, groups);
	}
	if (received > 0)
		queue_count(q->id, QC_RECEIVED, received);
	/* Received max_receive_count times and not leased: to the dead-letter queue. */
	if (ndlq > 0)
		(void) queue_dead_letter(q, ndlq, dlq_ids, dlq_groups);
	return (int) nrows;
}

/*
 * The worker's share: write every queue's entries of this database, each
 * queue in a transaction of its own (an error is logged and retried on a
 * later pass).  Entries of queues that are gone are dropped.  Returns when
 * to try again for rows that were held, or 0.
 */
TimestampTz
queue_failed_apply_all(MemoryContext cxt)
{
	HASH_SEQ_STATUS status;
	FailedQueue *fq;
	int64	   *queue_ids;
	int			nqueues = 0;
	int			maxqueues = 16;

	if (failed_shared == NULL || pg_atomic_read_u32(&failed_shared->nentries) == 0)
		return 0;
	worker_next_due = 0;
	queue_ids = MemoryContextAlloc(cxt, maxqueues * sizeof(int64));
	LWLockAcquire(failed_shared->lock, LW_SHARED);
	hash_seq_init(&status, failed_queues);
	while ((fq = hash_seq_search(&status)) != NULL)
	{
		if (fq->key.dbid != MyDatabaseId)
			continue;
		if (nqueues == maxqueues)
		{
			maxqueues *= 2;
			queue_ids = repalloc(queue_ids, maxqueues * sizeof(int64));
		}
		queue_ids[nqueues++] = fq->key.queue_id;
	}
	LWLockRelease(failed_shared->lock);

	for (int i = 0; i < nqueues; i++)
	{
		PG_TRY();
		{
			char	   *name;

			StartTransactionCommand();
			SPI_connect();
			PushActiveSnapshot(GetTransactionSnapshot());
			name = queue_name_of(queue_ids[i]);
			if (name == NULL)
				queue_failed_forget_queue(queue_ids[i]);
			else
			{
				QueueMeta  *q = queue_lookup_extended(cstring_to_text(name), true);

				if (q == NULL || q->id != queue_ids[i])
					queue_failed_forget_queue(queue_ids[i]);
				else
					(void) apply_queue(q);
			}
			PopActiveSnapshot();
			SPI_finish();
			CommitTransactionCommand();
		}
		PG_CATCH();
		{
			queue_recover(cxt);
		}
		PG_END_TRY();
	}
	return worker_next_due;
}

/* Drop the entries of a queue that is gone. */
void
queue_failed_forget_queue(int64 queue_id)
{
	HASH_SEQ_STATUS status;
	FailedEntry *e;

	if (failed_shared == NULL)
		return;
	LWLockAcquire(failed_shared->lock, LW_EXCLUSIVE);
	hash_seq_init(&status, failed_entries);
	while ((e = hash_seq_search(&status)) != NULL)
		if (e->key.dbid == MyDatabaseId && e->key.queue_id == queue_id)
		{
			FailedKey	key = e->key;

			set_n(e, 0);
			hash_search(failed_entries, &key, HASH_REMOVE, NULL);
		}
	LWLockRelease(failed_shared->lock);
}

/*
 * queue._failed_pending(queue_id): receives that count and are not written
 * yet: rolled back, or of a transaction that has not ended (prepared ones
 * too), as if it rolled back.
 */
Datum
queue_failed_pending(PG_FUNCTION_ARGS)
{
	int64		queue_id = PG_GETARG_INT64(0);
	HASH_SEQ_STATUS status;
	FailedEntry *e;
	int64		total = 0;

	if (failed_shared == NULL)
		PG_RETURN_INT64(0);
	LWLockAcquire(failed_shared->lock, LW_SHARED);
	hash_seq_init(&status, failed_entries);
	while ((e = hash_seq_search(&status)) != NULL)
	{
		if (e->key.dbid != MyDatabaseId || e->key.queue_id != queue_id)
			continue;
		if (!TransactionIdIsValid(e->holder))
			total += e->n;
		else if (TransactionIdIsCurrentTransactionId(e->holder) ||
				 TransactionIdIsInProgress(e->holder) ||
				 !TransactionIdDidCommit(e->holder))
			total += e->n + e->h_adds;
		else
			total += e->n - e->h_folded;
	}
	LWLockRelease(failed_shared->lock);
	PG_RETURN_INT64(total);
}

/* From _PG_init: the setting, and with preload the shared memory. */
void
queue_failed_init(void)
{
	DefineCustomIntVariable("queue.max_failed_receives",
							"Messages whose receives shared memory keeps until they are counted.",
							"One entry per message received in a transaction not yet ended or rolled back; beyond this many a rollback counts nothing.",
							&queue_max_failed_receives,
							10000, 100, 10000000,
							PGC_POSTMASTER, 0,
							NULL, NULL, NULL);
	if (!process_shared_preload_libraries_in_progress)
		return;
	prev_shmem_request_hook = shmem_request_hook;
	shmem_request_hook = failed_shmem_request;
	prev_shmem_startup_hook = shmem_startup_hook;
	shmem_startup_hook = failed_shmem_startup;
	RegisterXactCallback(failed_xact_callback, NULL);
	RegisterSubXactCallback(failed_subxact_callback, NULL);
}
