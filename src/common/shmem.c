/*-------------------------------------------------------------------------
 *
 * shmem.c
 *	  The extension's shared memory, when loaded by shared_preload_libraries:
 *	  the long-poll condition variables, the per-queue counters, what
 *	  prepared transactions did to queues until they commit (one slot per
 *	  max_prepared_transactions), and the registry of databases the
 *	  launcher and workers share.
 *
 * The counter table is found by probing (queue_counter_probe); counts.c
 * keeps the counts in it.
 *
 * The registry: one slot per database that has (or had) a worker, where
 * the worker says what it found (and commits name the queues they changed,
 * counts.c) and others ask of it; queue._register()
 * (CREATE EXTENSION) asks the launcher for a worker when its transaction
 * commits (or, prepared, when COMMIT PREPARED commits it), once the worker
 * can see the extension.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/twophase.h"
#include "access/xact.h"
#include "common/hashfn.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "storage/ipc.h"
#include "storage/shmem.h"
#include "pgstat.h"
#include "storage/fd.h"

#include "common/queue_common.h"

PG_FUNCTION_INFO_V1(queue_register_sql);

QueueShared *queue_shared = NULL;
int			queue_max_queues = 16384;

static shmem_request_hook_type prev_shmem_request_hook = NULL;
static void save_counters(int code, Datum arg);
static void load_counters(void);
static shmem_startup_hook_type prev_shmem_startup_hook = NULL;

#define COUNTERS_FILE	PGSTAT_STAT_PERMANENT_DIRECTORY "/queue_counters.stat"
#define COUNTERS_MAGIC	0x51554533	/* "QUE3": 8 counters and the tenant kinds */
#define COUNTERS_MAGIC_2 0x51554532 /* "QUE2" (1.5): 8 counters */

typedef struct SavedCounter
{
	Oid			dbid;
	int64		queue_id;
	uint64		c[QC_NUM];
	uint32		tenants;		/* not in a QUE2 file */
} SavedCounter;

#define SAVED_COUNTER_2_SIZE	offsetof(SavedCounter, tenants)

/* Write the counters in use to COUNTERS_FILE (at postmaster shutdown). */
static void
save_counters(int code, Datum arg)
{
	FILE	   *f;
	uint32		magic = COUNTERS_MAGIC;

	if (code != 0 || queue_shared == NULL)
		return;
	f = AllocateFile(COUNTERS_FILE ".tmp", PG_BINARY_W);
	if (f == NULL)
		goto error;
	if (fwrite(&magic, sizeof(magic), 1, f) != 1)
		goto error;
	for (int i = 0; i < queue_shared->ncounters; i++)
	{
		QueueCounterEntry *e = &queue_shared->counters[i];
		SavedCounter sc;

		if (e->dbid == InvalidOid || e->queue_id == 0)
			continue;
		sc.dbid = e->dbid;
		sc.queue_id = e->queue_id;
		for (int c = 0; c < QC_NUM; c++)
			sc.c[c] = pg_atomic_read_u64(&e->c[c]);
		sc.tenants = pg_atomic_read_u32(&e->tenants);
		if (fwrite(&sc, sizeof(sc), 1, f) != 1)
			goto error;
	}
	if (FreeFile(f) != 0)
	{
		f = NULL;
		goto error;
	}
	(void) durable_rename(COUNTERS_FILE ".tmp", COUNTERS_FILE, LOG);
	return;

error:
	ereport(LOG,
			(errcode_for_file_access(),
			 errmsg("could not write file \"%s\": %m", COUNTERS_FILE ".tmp")));
	if (f)
		FreeFile(f);
	unlink(COUNTERS_FILE ".tmp");
}

/*
 * The counter entry of (dbid, queue_id) by linear probing from its hash,
 * created if asked and there is room: a dropped queue's slot, or a free
 * one while fewer than queue.max_queues are taken.  The table has twice
 * that many slots, so probing ends at a free slot after a few steps, also
 * for the queues that got none (a full table would make every such probe
 * walk all of it: the worker does one per queue per pass).  The caller
 * holds the lock, or is the postmaster at startup.
 */
QueueCounterEntry *
queue_counter_probe(Oid dbid, int64 queue_id, bool create)
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
			{
				if (sh->nused >= queue_max_queues)
					return NULL;	/* all the slots there are to take */
				sh->nused++;
				reuse = e;
			}
			break;
		}
	}
	if (!create || reuse == NULL)
		return NULL;
	for (int c = 0; c < QC_NUM; c++)
		pg_atomic_write_u64(&reuse->c[c], 0);
	pg_atomic_write_u64(&reuse->arrived, 0);
	pg_atomic_write_u32(&reuse->active, 0);
	pg_atomic_write_u32(&reuse->tenants, 0);
	SpinLockAcquire(&reuse->ready_lock);
	reuse->ready_key = 0;		/* counts.c: no bound yet */
	reuse->queue_id = queue_id;
	reuse->dbid = dbid;
	SpinLockRelease(&reuse->ready_lock);
	return reuse;
}

/*
 * Counters loaded from disk sit in slots 0..n-1; move each to where probing
 * finds it (dropped queues' slots are not saved).  Runs in the postmaster
 * before anyone else looks.
 */
static void
rehome_counters(int n)
{
	QueueCounterEntry *saved = palloc(Max(n, 1) * sizeof(QueueCounterEntry));

	memcpy(saved, queue_shared->counters, n * sizeof(QueueCounterEntry));
	for (int i = 0; i < n; i++)
		queue_shared->counters[i].dbid = InvalidOid;
	queue_shared->nused = 0;
	for (int i = 0; i < n; i++)
	{
		QueueCounterEntry *e = queue_counter_probe(saved[i].dbid, saved[i].queue_id, true);

		if (e != NULL)
		{
			for (int c = 0; c < QC_NUM; c++)
				pg_atomic_write_u64(&e->c[c], pg_atomic_read_u64(&saved[i].c[c]));
			pg_atomic_write_u32(&e->tenants, pg_atomic_read_u32(&saved[i].tenants));
		}
	}
	pfree(saved);
}

/* Read the counters saved at the last clean shutdown, then forget them. */
static void
load_counters(void)
{
	FILE	   *f = AllocateFile(COUNTERS_FILE, PG_BINARY_R);
	uint32		magic;
	SavedCounter sc;
	int			n = 0;

	if (f == NULL)
		return;
	if (fread(&magic, sizeof(magic), 1, f) == 1 &&
		(magic == COUNTERS_MAGIC || magic == COUNTERS_MAGIC_2))
	{
		size_t		size = magic == COUNTERS_MAGIC ? sizeof(sc) : SAVED_COUNTER_2_SIZE;

		sc.tenants = 0;
		while (n < queue_max_queues && fread(&sc, size, 1, f) == 1)
		{
			QueueCounterEntry *e = &queue_shared->counters[n++];

			/* Slots are found by probing from a hash: re-home below. */
			e->dbid = sc.dbid;
			e->queue_id = sc.queue_id;
			for (int c = 0; c < QC_NUM; c++)
				pg_atomic_write_u64(&e->c[c], sc.c[c]);
			pg_atomic_write_u32(&e->tenants, sc.tenants);
		}
	}
	FreeFile(f);
	unlink(COUNTERS_FILE);
	rehome_counters(n);
}

static Size
shared_size(void)
{
	return add_size(offsetof(QueueShared, counters),
					mul_size(mul_size(queue_max_queues, 2), sizeof(QueueCounterEntry)));
}

static Size
prepared_size(void)
{
	return mul_size(Max(max_prepared_xacts, 0), sizeof(QueuePrepared));
}

static void
queue_shmem_request(void)
{
	if (prev_shmem_request_hook)
		prev_shmem_request_hook();
	RequestAddinShmemSpace(shared_size());
	RequestAddinShmemSpace(prepared_size());
	RequestNamedLWLockTranche("queue", 1);
}

static void
queue_shmem_startup(void)
{
	bool		found;

	if (prev_shmem_startup_hook)
		prev_shmem_startup_hook();

	LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
	queue_shared = ShmemInitStruct("queue", shared_size(), &found);
	if (!found)
	{
		queue_shared->lock = &(GetNamedLWLockTranche("queue"))->lock;
		queue_shared->ncounters = queue_max_queues * 2;
		queue_shared->nused = 0;
		queue_shared->launcher_latch = NULL;
		memset(queue_shared->dbs, 0, sizeof(queue_shared->dbs));
		memset(queue_shared->watcher_latch, 0, sizeof(queue_shared->watcher_latch));
		queue_shared->nprepared = Max(max_prepared_xacts, 0);
		queue_shared->prepared_seq = 0;
		queue_shared->prepared = NULL;
		if (queue_shared->nprepared > 0)
		{
			bool		found_prepared;

			queue_shared->prepared = ShmemInitStruct("queue prepared", prepared_size(),
													 &found_prepared);
			memset(queue_shared->prepared, 0, prepared_size());
		}
		for (int i = 0; i < QUEUE_WAIT_SLOTS; i++)
		{
			ConditionVariableInit(&queue_shared->wait_cv[i]);
			pg_atomic_init_u64(&queue_shared->wait_gen[i], 0);
			pg_atomic_init_u64(&queue_shared->watch_mask[i], 0);
		}
		for (int i = 0; i < queue_shared->ncounters; i++)
		{
			queue_shared->counters[i].dbid = InvalidOid;
			queue_shared->counters[i].queue_id = 0;
			for (int c = 0; c < QC_NUM; c++)
				pg_atomic_init_u64(&queue_shared->counters[i].c[c], 0);
			pg_atomic_init_u64(&queue_shared->counters[i].arrived, 0);
			pg_atomic_init_u32(&queue_shared->counters[i].active, 0);
			pg_atomic_init_u32(&queue_shared->counters[i].tenants, 0);
			SpinLockInit(&queue_shared->counters[i].ready_lock);
			queue_shared->counters[i].ready_key = 0;
		}
	}
	LWLockRelease(AddinShmemInitLock);

	/*
	 * The postmaster keeps the counters across a clean restart: it loads
	 * them now and saves them when it shuts down.
	 */
	if (!IsUnderPostmaster)
	{
		if (!found)
			load_counters();
		on_shmem_exit(save_counters, (Datum) 0);
	}
}

/* Called from _PG_init while preloading. */
void
queue_shmem_init(void)
{
	prev_shmem_request_hook = shmem_request_hook;
	shmem_request_hook = queue_shmem_request;
	prev_shmem_startup_hook = shmem_startup_hook;
	shmem_startup_hook = queue_shmem_startup;
}

/*
 * The slot of a database, created if asked; NULL when full or absent.
 * The caller holds queue_shared->lock (exclusive to create).
 */
QueueDbSlot *
queue_db_slot(Oid dbid, bool create)
{
	QueueDbSlot *free_slot = NULL;

	for (int i = 0; i < QUEUE_MAX_DBS; i++)
	{
		QueueDbSlot *s = &queue_shared->dbs[i];

		if (s->dbid == dbid)
			return s;
		if (s->dbid == InvalidOid && free_slot == NULL)
			free_slot = s;
	}
	if (create && free_slot != NULL)
	{
		memset(free_slot, 0, sizeof(*free_slot));
		free_slot->dbid = dbid;
		return free_slot;
	}
	return NULL;
}

/* ------------------------------------------------------------------------
 * Database registration: CREATE EXTENSION asks for a worker
 * ------------------------------------------------------------------------
 */

static bool register_pending = false;	/* queue._register() at commit */
static bool register_callback = false;

/* The GID of the PREPARE TRANSACTION this transaction is running, if any. */
static char register_gid[GIDSIZE];
static bool register_gid_named = false;

/* Tell the launcher this database wants a worker (at commit). */
void
queue_register_database(void)
{
	if (queue_shared == NULL)
		return;
	LWLockAcquire(queue_shared->lock, LW_EXCLUSIVE);
	{
		QueueDbSlot *s = queue_db_slot(MyDatabaseId, true);

		if (s != NULL)
			s->wanted = true;
	}
	if (queue_shared->launcher_latch != NULL)
		SetLatch(queue_shared->launcher_latch);
	LWLockRelease(queue_shared->lock);
}

/*
 * A prepared transaction that asked for a worker: its database's slot
 * remembers the GID until COMMIT PREPARED (queue_register_finish_prepared).
 * One per database is enough: a second CREATE EXTENSION waits for the
 * first to be resolved.
 */
static void
register_prepared(void)
{
	if (queue_shared == NULL || !register_gid_named)
		return;
	LWLockAcquire(queue_shared->lock, LW_EXCLUSIVE);
	{
		QueueDbSlot *s = queue_db_slot(MyDatabaseId, true);

		if (s != NULL)
			strlcpy(s->prepared_gid, register_gid, GIDSIZE);
	}
	LWLockRelease(queue_shared->lock);
}

static void
register_xact_callback(XactEvent event, void *arg)
{
	switch (event)
	{
		case XACT_EVENT_COMMIT:
		case XACT_EVENT_PARALLEL_COMMIT:
			if (register_pending)
				queue_register_database();
			break;
		case XACT_EVENT_PREPARE:
			if (register_pending)
				register_prepared();
			break;
		case XACT_EVENT_ABORT:
		case XACT_EVENT_PARALLEL_ABORT:
			break;
		default:
			return;
	}
	register_pending = false;
	register_gid_named = false;
}

static void
register_callbacks(void)
{
	if (!register_callback)
	{
		RegisterXactCallback(register_xact_callback, NULL);
		register_callback = true;
	}
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

/* PREPARE TRANSACTION gid: named by the utility hook (worker.c). */
void
queue_register_prepare_gid(const char *gid)
{
	register_callbacks();
	strlcpy(register_gid, gid, GIDSIZE);
	register_gid_named = true;
}

/*
 * COMMIT or ROLLBACK PREPARED gid succeeded (the utility hook calls this
 * after PostgreSQL did it): a prepared request for a worker takes effect
 * or goes.
 */
void
queue_register_finish_prepared(const char *gid, bool commit)
{
	bool		wanted = false;

	if (queue_shared == NULL)
		return;
	LWLockAcquire(queue_shared->lock, LW_EXCLUSIVE);
	{
		QueueDbSlot *s = queue_db_slot(MyDatabaseId, false);

		if (s != NULL && s->prepared_gid[0] != '\0' &&
			strcmp(s->prepared_gid, gid) == 0)
		{
			s->prepared_gid[0] = '\0';
			wanted = commit;
		}
	}
	LWLockRelease(queue_shared->lock);
	if (wanted)
		queue_register_database();
}

/* queue._register(): CREATE EXTENSION asks for a worker, at commit. */
Datum
queue_register_sql(PG_FUNCTION_ARGS)
{
	if (queue_shared != NULL)
		queue_register_at_commit();
	PG_RETURN_VOID();
}
