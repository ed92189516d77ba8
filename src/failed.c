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
 * So each backend notes what its receives leased (queue_note_received),
 * per subtransaction.  At commit the notes go.  When the (sub)transaction
 * that leased a message rolls back, its note goes to shared memory: one
 * entry per (database, queue, message) with the receives to add and the
 * time before which the message must not come back (now + retry_delay, or
 * a consumer's retry delay).  The entries are written into the message
 * rows later, in a transaction that commits on its own:
 *
 *  - by the database's queue worker, which the rollback wakes (its latch);
 *  - by the next receive of the queue, first thing, so a message received
 *    right after the rollback already shows the count and obeys the delay.
 *
 * Both go through queue_failed_apply.  It claims entries (no two backends
 * write one entry), updates the rows it can lock without waiting (SKIP
 * LOCKED: a row someone holds is retried later), and the claims end with
 * the applying transaction: at its commit the entries go, at its rollback
 * they are free again.  A message that reached max_receive_count moves to
 * the dead-letter queue there and then.
 *
 * A prepared transaction's notes wait under its GID: ROLLBACK PREPARED
 * turns them into entries, COMMIT PREPARED drops them.  Shared memory does
 * not survive a restart: a crash (or a restart) forgets the counts not yet
 * written, never a message (DESIGN.md allows it).  Without preload there
 * is no shared memory and a rollback counts nothing, as before.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "catalog/pg_type.h"
#include "common/hashfn.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "storage/ipc.h"
#include "storage/lwlock.h"
#include "storage/proc.h"
#include "storage/shmem.h"
#include "utils/builtins.h"
#include "utils/hsearch.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"

#include "queue.h"

PG_FUNCTION_INFO_V1(queue_failed_pending);

/* Entries shared memory holds, over all databases (queue.max_failed_receives). */
int			queue_max_failed_receives = 10000;

/* At most this many entries of one queue are written by one statement. */
#define APPLY_BATCH		1000

/*
 * The worker leaves an entry this long to the queue's receives, which
 * write it first thing: a consumer retrying at once finds its count
 * there, and a receive seldom meets the worker at a row.  (They may meet:
 * then each skips what the other holds, and no count is lost or doubled.)
 */
#define WORKER_GRACE	(100 * 1000)	/* microseconds */

typedef struct FailedKey
{
	Oid			dbid;
	uint32		gid_hash;		/* 0, or the prepared transaction's GID's */
	int64		queue_id;
	int64		message_id;
} FailedKey;

typedef struct FailedEntry
{
	FailedKey	key;			/* hash key */
	int32		n;				/* receives to add */
	int64		delay;			/* for a prepared one: delay at its rollback */
	TimestampTz not_before;		/* visible no sooner than this */
	TimestampTz noted_at;		/* its latest rollback */
	int			claimer;		/* pid writing it now, or 0 */
	bool		by_worker;		/* ... the database's queue worker */
} FailedEntry;

/* How many entries a queue has, so a receive can ask cheaply. */
typedef struct FailedQueueKey
{
	Oid			dbid;
	int64		queue_id;
} FailedQueueKey;

typedef struct FailedQueue
{
	FailedQueueKey key;			/* hash key */
	int32		nentries;		/* not under a GID */
} FailedQueue;

typedef struct FailedShared
{
	LWLock	   *lock;
	pg_atomic_uint32 nentries;	/* all entries not under a GID */
	bool		full_logged;
} FailedShared;

static FailedShared *failed_shared = NULL;
static HTAB *failed_entries = NULL;
static HTAB *failed_queues = NULL;

static shmem_request_hook_type prev_shmem_request_hook = NULL;
static shmem_startup_hook_type prev_shmem_startup_hook = NULL;

/* ------------------------------------------------------------------------
 * What this backend's open transaction received and claimed
 * ------------------------------------------------------------------------
 */
typedef struct Noted
{
	int64		queue_id;
	int64		message_id;
	int64		delay;			/* until it may come back, if rolled back */
	SubTransactionId subid;
} Noted;

/*
 * An entry this transaction writes.  Only rows the claimer holds are
 * claimed (or rows that are gone), so every claim is written: at commit
 * the entry goes, at a rollback it is free again.
 */
typedef struct Claimed
{
	FailedKey	key;
	int32		n;				/* the receives written: a rollback meanwhile adds more */
	SubTransactionId subid;
} Claimed;

static Noted *noted = NULL;
static int	nnoted = 0;
static int	maxnoted = 0;
static Claimed *claimed = NULL;
static int	nclaimed = 0;
static int	maxclaimed = 0;

static QueueRetry retry_policy = QUEUE_RETRY_QUEUE;
static bool applying_as_worker = false;	/* in queue_failed_apply_all */
static TimestampTz worker_next_due = 0; /* ... when a young entry ages */
static char prepare_gid[GIDSIZE];

static void *
grow(void *arr, int *max, Size elem)
{
	int			newmax = *max == 0 ? 64 : *max * 2;

	if (arr == NULL)
		arr = MemoryContextAlloc(TopMemoryContext, newmax * elem);
	else
		arr = repalloc(arr, newmax * elem);
	*max = newmax;
	return arr;
}

/* How long a message received with receive_count rc waits after a rollback. */
static int64
retry_delay_of(QueueMeta *q, int32 rc, int64 vt)
{
	switch (retry_policy)
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
	return q->retry_delay;
}

/*
 * The receive path reports the messages it leased in the current
 * (sub)transaction, with their receive counts after this receive and the
 * lease's visibility timeout.
 */
void
queue_note_received(QueueMeta *q, int n, const int64 *ids,
					const int32 *receive_counts, int64 vt)
{
	SubTransactionId subid;

	if (failed_shared == NULL || n == 0)
		return;
	subid = GetCurrentSubTransactionId();
	for (int i = 0; i < n; i++)
	{
		if (nnoted == maxnoted)
			noted = grow(noted, &maxnoted, sizeof(Noted));
		noted[nnoted].queue_id = q->id;
		noted[nnoted].message_id = ids[i];
		noted[nnoted].delay = retry_delay_of(q, receive_counts[i], vt);
		noted[nnoted].subid = subid;
		nnoted++;
	}
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
	failed_entries = ShmemInitHash("queue failed receive entries",
								   queue_max_failed_receives, queue_max_failed_receives,
								   &ctl, HASH_ELEM | HASH_BLOBS);
	ctl.keysize = sizeof(FailedQueueKey);
	ctl.entrysize = sizeof(FailedQueue);
	failed_queues = ShmemInitHash("queue failed receive queues",
								  queue_max_failed_receives, queue_max_failed_receives,
								  &ctl, HASH_ELEM | HASH_BLOBS);
	LWLockRelease(AddinShmemInitLock);
}

/* Count an entry in or out of its queue's total (lock held exclusive). */
static void
count_entry(const FailedKey *key, int delta)
{
	FailedQueueKey qk;
	FailedQueue *fq;
	bool		found;

	if (key->gid_hash != 0)
		return;
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

/*
 * Add n receives of a message to its entry (lock held exclusive).  Runs in
 * abort callbacks: no error may escape, so a full table only logs.
 */
static void
add_entry(const FailedKey *key, int32 n, int64 delay, TimestampTz not_before)
{
	FailedEntry *e;
	bool		found;

	e = hash_search(failed_entries, key, HASH_ENTER_NULL, &found);
	if (e == NULL)
	{
		if (!failed_shared->full_logged)
		{
			failed_shared->full_logged = true;
			elog(LOG, "queue: %d rolled-back receives wait to be counted, the most "
				 "queue.max_failed_receives allows; further ones are not counted",
				 queue_max_failed_receives);
		}
		return;
	}
	if (!found)
	{
		e->n = 0;
		e->delay = delay;
		e->not_before = not_before;
		e->claimer = 0;
		e->by_worker = false;
		count_entry(key, 1);
	}
	e->n += n;
	e->noted_at = GetCurrentTimestamp();
	e->delay = Max(e->delay, delay);
	e->not_before = Max(e->not_before, not_before);
}

static void
remove_entry(FailedEntry *e)
{
	FailedKey	key = e->key;

	hash_search(failed_entries, &key, HASH_REMOVE, NULL);
	count_entry(&key, -1);
}

static void
make_key(FailedKey *key, Oid dbid, uint32 gid_hash, int64 queue_id, int64 message_id)
{
	memset(key, 0, sizeof(*key));
	key->dbid = dbid;
	key->gid_hash = gid_hash;
	key->queue_id = queue_id;
	key->message_id = message_id;
}

static uint32
gid_hash_of(const char *gid)
{
	uint32		h = hash_bytes((const unsigned char *) gid, strlen(gid));

	return h == 0 ? 1 : h;
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
 * Transaction ends
 * ------------------------------------------------------------------------
 */

/*
 * Notes of the ending (sub)transaction (subid, or all for 0) become
 * entries, under gid_hash for a PREPARE; returns how many.
 */
static int
notes_to_entries(SubTransactionId subid, uint32 gid_hash)
{
	TimestampTz now = GetCurrentTimestamp();
	int			kept = 0;
	int			moved = 0;

	if (nnoted == 0)
		return 0;
	LWLockAcquire(failed_shared->lock, LW_EXCLUSIVE);
	for (int i = 0; i < nnoted; i++)
	{
		Noted	   *nt = &noted[i];

		if (subid != InvalidSubTransactionId && nt->subid != subid)
		{
			noted[kept++] = *nt;
			continue;
		}
		{
			FailedKey	key;

			make_key(&key, MyDatabaseId, gid_hash, nt->queue_id, nt->message_id);
			add_entry(&key, 1, nt->delay, now + nt->delay);
			moved++;
		}
	}
	LWLockRelease(failed_shared->lock);
	nnoted = kept;
	return moved;
}

/*
 * Claims of the ending (sub)transaction (subid, or all for 0): at commit
 * they go, or move under gid_hash (prepare); at a rollback they are free
 * again.
 */
static void
end_claims(SubTransactionId subid, bool committed, uint32 gid_hash)
{
	int			kept = 0;

	if (nclaimed == 0)
		return;
	LWLockAcquire(failed_shared->lock, LW_EXCLUSIVE);
	for (int i = 0; i < nclaimed; i++)
	{
		Claimed    *c = &claimed[i];
		FailedEntry *e;

		if (subid != InvalidSubTransactionId && c->subid != subid)
		{
			claimed[kept++] = *c;
			continue;
		}
		e = hash_search(failed_entries, &c->key, HASH_FIND, NULL);
		if (e == NULL || e->claimer != MyProcPid)
			continue;
		e->claimer = 0;
		if (committed)
		{
			FailedKey	key = e->key;
			int64		delay = e->delay;

			/* What rolled back since the claim stays for a later write. */
			e->n -= c->n;
			if (e->n <= 0)
				remove_entry(e);
			if (gid_hash != 0)
			{
				/* written by a prepared transaction: back if it rolls back */
				key.gid_hash = gid_hash;
				add_entry(&key, c->n, delay, 0);
			}
		}
	}
	LWLockRelease(failed_shared->lock);
	nclaimed = kept;
}

static void
failed_xact_callback(XactEvent event, void *arg)
{
	switch (event)
	{
		case XACT_EVENT_COMMIT:
		case XACT_EVENT_PARALLEL_COMMIT:
			nnoted = 0;
			end_claims(InvalidSubTransactionId, true, 0);
			break;
		case XACT_EVENT_ABORT:
		case XACT_EVENT_PARALLEL_ABORT:
			end_claims(InvalidSubTransactionId, false, 0);
			if (notes_to_entries(InvalidSubTransactionId, 0) > 0)
				wake_worker();
			break;
		case XACT_EVENT_PREPARE:
			{
				uint32		h = gid_hash_of(prepare_gid);

				end_claims(InvalidSubTransactionId, true, h);
				(void) notes_to_entries(InvalidSubTransactionId, h);
				prepare_gid[0] = '\0';
			}
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
			for (int i = 0; i < nnoted; i++)
				if (noted[i].subid == mySubid)
					noted[i].subid = parentSubid;
			for (int i = 0; i < nclaimed; i++)
				if (claimed[i].subid == mySubid)
					claimed[i].subid = parentSubid;
			break;
		case SUBXACT_EVENT_ABORT_SUB:
			end_claims(mySubid, false, 0);
			if (notes_to_entries(mySubid, 0) > 0)
				wake_worker();
			break;
		default:
			break;
	}
}

/* PREPARE TRANSACTION names its GID before the prepare (worker.c's hook). */
void
queue_failed_prepare_gid(const char *gid)
{
	strlcpy(prepare_gid, gid, GIDSIZE);
}

/*
 * COMMIT PREPARED drops what the transaction noted; ROLLBACK PREPARED makes
 * it count, from now.
 */
void
queue_failed_finish_prepared(const char *gid, bool commit)
{
	uint32		h;
	HASH_SEQ_STATUS status;
	FailedEntry *e;
	TimestampTz now = GetCurrentTimestamp();
	int			activated = 0;
	FailedEntry *found = NULL;
	int			nfound = 0;
	int			maxfound = 0;

	if (failed_shared == NULL)
		return;
	h = gid_hash_of(gid);
	LWLockAcquire(failed_shared->lock, LW_EXCLUSIVE);

	/* Collect first: a scan must not insert (dynahash). */
	hash_seq_init(&status, failed_entries);
	while ((e = hash_seq_search(&status)) != NULL)
	{
		if (e->key.dbid != MyDatabaseId || e->key.gid_hash != h)
			continue;
		if (nfound == maxfound)
		{
			maxfound = maxfound == 0 ? 16 : maxfound * 2;
			found = found == NULL ? palloc(maxfound * sizeof(FailedEntry)) :
				repalloc(found, maxfound * sizeof(FailedEntry));
		}
		found[nfound++] = *e;
	}
	for (int i = 0; i < nfound; i++)
	{
		FailedKey	key = found[i].key;

		e = hash_search(failed_entries, &key, HASH_FIND, NULL);
		if (e != NULL)
			remove_entry(e);
		if (!commit)
		{
			key.gid_hash = 0;
			add_entry(&key, found[i].n, found[i].delay, now + found[i].delay);
			activated++;
		}
	}
	LWLockRelease(failed_shared->lock);
	if (activated > 0)
		wake_worker();
}

/* ------------------------------------------------------------------------
 * Writing entries into the message rows
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
 * The entries of q to write: up to APPLY_BATCH free ones (ids), and those
 * the worker is writing now (busy).  Returns how many free ones.
 */
static int
list_entries(int64 queue_id, int64 *ids, int64 *busy, int *nbusy)
{
	HASH_SEQ_STATUS status;
	FailedEntry *e;
	int			n = 0;
	TimestampTz young = GetCurrentTimestamp() - WORKER_GRACE;

	*nbusy = 0;
	LWLockAcquire(failed_shared->lock, LW_SHARED);
	hash_seq_init(&status, failed_entries);
	while ((e = hash_seq_search(&status)) != NULL)
	{
		if (e->key.dbid != MyDatabaseId || e->key.queue_id != queue_id ||
			e->key.gid_hash != 0)
			continue;
		if (e->claimer == 0 && applying_as_worker && e->noted_at > young)
		{
			TimestampTz due = e->noted_at + WORKER_GRACE;

			if (worker_next_due == 0 || due < worker_next_due)
				worker_next_due = due;
		}
		else if (e->claimer == 0 && n < APPLY_BATCH)
			ids[n++] = e->key.message_id;
		else if (e->claimer != 0 && e->by_worker && *nbusy < APPLY_BATCH)
			busy[(*nbusy)++] = e->key.message_id;
	}
	LWLockRelease(failed_shared->lock);
	return n;
}

/*
 * Claim the entries of the given messages (whose rows the caller locked)
 * that are still there and free; their receives and delays go to ns and
 * not_befores, ids keeps the claimed ones.  Returns how many.
 */
static int
claim_entries(int64 queue_id, int64 *ids, int nids, int32 *ns, Datum *not_befores)
{
	int			n = 0;
	SubTransactionId subid = GetCurrentSubTransactionId();

	LWLockAcquire(failed_shared->lock, LW_EXCLUSIVE);
	for (int i = 0; i < nids; i++)
	{
		FailedKey	key;
		FailedEntry *e;

		make_key(&key, MyDatabaseId, 0, queue_id, ids[i]);
		e = hash_search(failed_entries, &key, HASH_FIND, NULL);
		if (e == NULL || e->claimer != 0)
			continue;			/* written meanwhile */
		if (nclaimed == maxclaimed)
			claimed = grow(claimed, &maxclaimed, sizeof(Claimed));
		e->claimer = MyProcPid;
		e->by_worker = applying_as_worker;
		claimed[nclaimed].key = e->key;
		claimed[nclaimed].n = e->n;
		claimed[nclaimed].subid = subid;
		nclaimed++;
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
	int			rc = SPI_execute_plan(queue_plan(q, kind), &arg, NULL, false, 0);

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
 * Entries of messages that are gone (deleted, expired, moved) are claimed:
 * they go when the worker's transaction commits.
 */
static void
drop_gone(QueueMeta *q, int n, const int64 *ids)
{
	bool	   *exists = palloc0(n * sizeof(bool));
	int64	   *gone = palloc(n * sizeof(int64));
	int			ngone = 0;
	int32	   *ns = palloc(n * sizeof(int32));
	Datum	   *nb = palloc(n * sizeof(Datum));
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
	(void) claim_entries(q->id, gone, ngone, ns, nb);
}

/*
 * Write the rolled-back receives of q into its messages, in the current
 * transaction (SPI connected, as the tables' owner).  Returns how many
 * messages were written.
 *
 * Rows are locked before their entries are claimed, so a claimed entry's
 * row is always held by its claimer: a receive that finds a message's
 * entry free and its row held skips the message (SKIP LOCKED), as it
 * would any message someone holds, and never delivers it with a count
 * not yet written.  Rows someone holds are left for a later try.  When the
 * worker is writing some of q's entries, a receive waits for it (a short
 * transaction of its own) and then sees their counts.
 */
int
queue_failed_apply(QueueMeta *q)
{
	int64	   *ids;
	int64	   *busy;
	int			nbusy;
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

	if (!has_entries(q->id))
		return 0;
	ids = palloc(APPLY_BATCH * sizeof(int64));
	busy = palloc(APPLY_BATCH * sizeof(int64));
	ncand = list_entries(q->id, ids, busy, &nbusy);
	if (nbusy > 0 && !applying_as_worker)
	{
		(void) run_over_ids(q, q->fifo ? QP_FAILED_WAIT_FIFO : QP_FAILED_WAIT,
							nbusy, busy);
		ncand = list_entries(q->id, ids, busy, &nbusy);
	}
	if (ncand == 0)
		return 0;

	/* Lock what nobody holds (on a FIFO queue, groups first), then claim. */
	nrows = run_over_ids(q, q->fifo ? QP_FAILED_LOCK_FIFO : QP_FAILED_LOCK, ncand, ids);
	{
		int64	   *locked = palloc(Max(nrows, 1) * sizeof(int64));

		nlocked = (int) nrows;
		for (uint64 r = 0; r < nrows; r++)
			locked[r] = int64_col(r, 1);
		if (applying_as_worker && nlocked < ncand)
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
		}
		ids = locked;
	}
	ns = palloc(Max(nlocked, 1) * sizeof(int32));
	not_befores = palloc(Max(nlocked, 1) * sizeof(Datum));
	n = claim_entries(q->id, ids, nlocked, ns, not_befores);
	if (n == 0)
		return 0;
	for (int i = 0; i < n; i++)
		received += ns[i];

	args[0] = queue_int8_array(n, ids);
	{
		Datum	   *nd = palloc(n * sizeof(Datum));

		for (int i = 0; i < n; i++)
			nd[i] = Int32GetDatum(ns[i]);
		args[1] = PointerGetDatum(construct_array(nd, n, INT4OID, 4, true, TYPALIGN_INT));
	}
	args[2] = PointerGetDatum(construct_array(not_befores, n, TIMESTAMPTZOID, 8,
											  FLOAT8PASSBYVAL, TYPALIGN_DOUBLE));
	args[3] = TimestampTzGetDatum(GetCurrentTimestamp());
	rc = SPI_execute_plan(queue_plan(q, QP_FAILED_APPLY), args, NULL, false, 0);
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

		if (gcopy != (Datum) 0)
			groups[ngroups++] = gcopy;
		if (q->max_receive_count > 0 && count >= q->max_receive_count)
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
	/* Received max_receive_count times: to the dead-letter queue now. */
	if (ndlq > 0)
		(void) queue_dead_letter(q, ndlq, dlq_ids, dlq_groups);
	return (int) nrows;
}

/*
 * The worker's share: write every queue's entries of this database, each
 * queue in a transaction of its own (an error is logged and retried on a
 * later pass).  Entries of queues that are gone are dropped.  Returns when
 * entries left because they were young are due, or 0.
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

	applying_as_worker = true;
	for (int i = 0; i < nqueues; i++)
	{
		PG_TRY();
		{
			char	   *name;

			StartTransactionCommand();
			SPI_connect();
			PushActiveSnapshot(GetTransactionSnapshot());
			name = queue_name_of(queue_ids[i]);
			if (name == NULL || !OidIsValid(queue_table_relid(queue_ids[i], 'q')))
				queue_failed_forget_queue(queue_ids[i]);
			else
				(void) queue_failed_apply(queue_lookup(cstring_to_text(name)));
			PopActiveSnapshot();
			SPI_finish();
			CommitTransactionCommand();
		}
		PG_CATCH();
		{
			MemoryContextSwitchTo(cxt);
			EmitErrorReport();
			FlushErrorState();
			AbortCurrentTransaction();
		}
		PG_END_TRY();
	}
	applying_as_worker = false;
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
			remove_entry(e);
	LWLockRelease(failed_shared->lock);
}

/* queue._failed_pending(queue_id): rolled-back receives not yet written. */
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
		if (e->key.dbid == MyDatabaseId && e->key.queue_id == queue_id)
			total += e->n;
	LWLockRelease(failed_shared->lock);
	PG_RETURN_INT64(total);
}

/* From _PG_init: the setting, and with preload the shared memory. */
void
queue_failed_init(void)
{
	DefineCustomIntVariable("queue.max_failed_receives",
							"Rolled-back receives shared memory keeps until they are counted.",
							"One entry per message; beyond this many a rollback counts nothing.",
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
