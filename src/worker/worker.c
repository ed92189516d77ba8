/*-------------------------------------------------------------------------
 *
 * worker.c
 *	  The background workers: a launcher, and one worker per database that
 *	  has the extension, whose loop hands each queue to sweep.c.
 *
 * The launcher (started at server start, after recovery: never on a hot
 * standby) lists the databases every QUEUE_LAUNCHER_NAP_MS and starts a
 * worker in each new one.  A worker that finds no extension says so in its
 * database slot and leaves; the launcher then leaves that database alone
 * until CREATE EXTENSION asks for a worker (queue._register, shmem.c),
 * which also wakes the launcher at once.  A worker that stops for any other reason is
 * started again.  DROP DATABASE (and CREATE DATABASE from a template that
 * has a worker, and ALTER DATABASE RENAME) first asks the database's worker
 * to leave, so it never holds up the command; only when the role may run
 * the command on that database (its owner or a superuser), so nobody else
 * can stop a worker by issuing one that is then refused.
 *
 * The worker is a plain loop: every queue_sweep_interval it lists the
 * queues (when the registry changed) and hands each to sweep.c, which
 * decides what is due and does it in transactions of its own.
 * Long-pollers need no wake-up from it: a waiting receive sleeps no longer
 * than until the next message of its queue turns visible (wait.c).  Between
 * passes it advances the SQS endpoint's message move tasks, a bounded slice
 * at a time (move_task.c), and sleeps no longer than until the next slice.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/htup_details.h"
#include "access/table.h"
#include "access/xact.h"
#include "catalog/pg_database.h"
#include "catalog/pg_type.h"
#include "commands/dbcommands.h"
#include "commands/defrem.h"
#include "commands/extension.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "postmaster/interrupt.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/proc.h"
#include "tcop/utility.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/hsearch.h"
#include "utils/inval.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"

#include "common/queue_common.h"
#include "storage/queue_storage.h"
#include "access/queue_access.h"
#include "state/queue_state.h"
#include "lease/queue_lease.h"
#include "push/queue_push.h"
#include "worker/queue_worker.h"

PGDLLEXPORT void queue_launcher_main(Datum arg);
PGDLLEXPORT void queue_worker_main(Datum arg);


bool		queue_worker_enabled = true;
int			queue_sweep_interval = 1000;	/* ms */

#define QUEUE_LAUNCHER_NAP_MS	2000
#define QUEUE_RESTART_DELAY_MS	1000
#define QUEUE_STOP_GRACE_MS		10000
/*
 * The worker re-reads the registry when a relcache invalidation says
 * something changed (a dedicated queue's create and drop send one for
 * queue._queues, alter one for the queue's table or the shared ones), when
 * it was told of more changed queues than it can be told of one by one,
 * and at least every QUEUE_LIST_MAX_AGE_MS; it reads the rows of new
 * queues it is told of (a shared queue's create sends no invalidation).
 */
#define QUEUE_LIST_MAX_AGE_MS	300000

static ProcessUtility_hook_type prev_utility_hook = NULL;

/* ------------------------------------------------------------------------
 * Launcher
 * ------------------------------------------------------------------------
 */

typedef struct LaunchedDb
{
	Oid			dbid;
	BackgroundWorkerHandle *handle;
	bool		no_extension;
	TimestampTz retry_at;
	bool		seen;			/* still in pg_database this pass */
	bool		start_failed_logged;	/* the log said it has no worker */
} LaunchedDb;

void
queue_worker_register_launcher(void)
{
	BackgroundWorker bgw;

	memset(&bgw, 0, sizeof(bgw));
	bgw.bgw_flags = BGWORKER_SHMEM_ACCESS | BGWORKER_BACKEND_DATABASE_CONNECTION;
	bgw.bgw_start_time = BgWorkerStart_RecoveryFinished;
	bgw.bgw_restart_time = 5;
	snprintf(bgw.bgw_library_name, BGW_MAXLEN, "queue");
	snprintf(bgw.bgw_function_name, BGW_MAXLEN, "queue_launcher_main");
	snprintf(bgw.bgw_name, BGW_MAXLEN, "queue launcher");
	snprintf(bgw.bgw_type, BGW_MAXLEN, "queue launcher");
	RegisterBackgroundWorker(&bgw);
}

static bool
start_worker(LaunchedDb *d)
{
	BackgroundWorker bgw;

	memset(&bgw, 0, sizeof(bgw));
	bgw.bgw_flags = BGWORKER_SHMEM_ACCESS | BGWORKER_BACKEND_DATABASE_CONNECTION;
	bgw.bgw_start_time = BgWorkerStart_RecoveryFinished;
	bgw.bgw_restart_time = BGW_NEVER_RESTART;
	snprintf(bgw.bgw_library_name, BGW_MAXLEN, "queue");
	snprintf(bgw.bgw_function_name, BGW_MAXLEN, "queue_worker_main");
	snprintf(bgw.bgw_name, BGW_MAXLEN, "queue worker for database %u", d->dbid);
	snprintf(bgw.bgw_type, BGW_MAXLEN, "queue worker");
	bgw.bgw_main_arg = ObjectIdGetDatum(d->dbid);
	bgw.bgw_notify_pid = MyProcPid;

	LWLockAcquire(queue_shared->lock, LW_EXCLUSIVE);
	{
		QueueDbSlot *s = queue_db_slot(d->dbid, true);

		if (s != NULL)
		{
			s->no_extension = false;
			s->wanted = false;
		}
	}
	LWLockRelease(queue_shared->lock);

	if (!RegisterDynamicBackgroundWorker(&bgw, &d->handle))
	{
		d->handle = NULL;
		d->retry_at = GetCurrentTimestamp() + QUEUE_RESTART_DELAY_MS * 1000;
		if (!d->start_failed_logged)
			ereport(LOG,
					(errmsg("queue launcher could not start the queue worker of database %u: no background worker slot free",
							d->dbid),
					 errhint("Raise max_worker_processes (now %d): the queue worker of each database with the extension takes one, and each consumer process one more.",
							 max_worker_processes)));
		d->start_failed_logged = true;
		return false;
	}
	d->start_failed_logged = false;
	d->no_extension = false;
	return true;
}

/* The databases a worker may connect to: allowing connections, no templates. */
static void
scan_databases(HTAB *dbs)
{
	Relation	rel;
	SysScanDesc scan;
	HeapTuple	tup;

	StartTransactionCommand();
	(void) GetTransactionSnapshot();
	rel = table_open(DatabaseRelationId, AccessShareLock);
	scan = systable_beginscan(rel, InvalidOid, false, NULL, 0, NULL);
	while (HeapTupleIsValid(tup = systable_getnext(scan)))
	{
		Form_pg_database db = (Form_pg_database) GETSTRUCT(tup);
		LaunchedDb *d;
		bool		found;

		if (!db->datallowconn || db->datistemplate)
			continue;
		d = hash_search(dbs, &db->oid, HASH_ENTER, &found);
		if (!found)
		{
			d->handle = NULL;
			d->no_extension = false;
			d->retry_at = 0;
			d->start_failed_logged = false;
		}
		d->seen = true;
	}
	systable_endscan(scan);
	table_close(rel, AccessShareLock);
	CommitTransactionCommand();
}

/* One look at every database: start, restart or forget its worker. */
static void
launcher_pass(HTAB *dbs)
{
	HASH_SEQ_STATUS status;
	LaunchedDb *d;
	TimestampTz now = GetCurrentTimestamp();

	hash_seq_init(&status, dbs);
	while ((d = hash_seq_search(&status)) != NULL)
		d->seen = false;
	scan_databases(dbs);

	hash_seq_init(&status, dbs);
	while ((d = hash_seq_search(&status)) != NULL)
	{
		bool		wanted = false;
		TimestampTz stop_requested = 0;
		pid_t		pid;

		LWLockAcquire(queue_shared->lock, LW_SHARED);
		{
			QueueDbSlot *s = queue_db_slot(d->dbid, false);

			if (s != NULL)
			{
				wanted = s->wanted;
				stop_requested = s->stop_requested;
				if (d->handle != NULL && s->no_extension)
					d->no_extension = true;
			}
		}
		LWLockRelease(queue_shared->lock);

		/* A worker that stopped: gone for good if it found no extension. */
		if (d->handle != NULL &&
			GetBackgroundWorkerPid(d->handle, &pid) == BGWH_STOPPED)
		{
			pfree(d->handle);
			d->handle = NULL;
			d->retry_at = now + QUEUE_RESTART_DELAY_MS * 1000;
		}

		if (!d->seen || !queue_worker_enabled)
		{
			if (d->handle != NULL)
				TerminateBackgroundWorker(d->handle);
			if (!d->seen && d->handle == NULL)
			{
				LWLockAcquire(queue_shared->lock, LW_EXCLUSIVE);
				{
					QueueDbSlot *s = queue_db_slot(d->dbid, false);

					if (s != NULL)
						s->dbid = InvalidOid;
				}
				LWLockRelease(queue_shared->lock);
				hash_search(dbs, &d->dbid, HASH_REMOVE, NULL);
			}
			continue;
		}
		if (d->handle != NULL)
			continue;
		if (stop_requested != 0 && now < stop_requested + QUEUE_STOP_GRACE_MS * 1000)
			continue;
		if (d->no_extension && !wanted)
			continue;
		if (now < d->retry_at && !wanted)
			continue;
		(void) start_worker(d);
	}
}

void
queue_launcher_main(Datum arg)
{
	HASHCTL		ctl;
	HTAB	   *dbs;

	pqsignal(SIGHUP, SignalHandlerForConfigReload);
	pqsignal(SIGTERM, die);
	BackgroundWorkerUnblockSignals();
	BackgroundWorkerInitializeConnection(NULL, NULL, 0);
	pgstat_report_appname("queue launcher");

	ctl.keysize = sizeof(Oid);
	ctl.entrysize = sizeof(LaunchedDb);
	dbs = hash_create("queue launcher databases", 64, &ctl, HASH_ELEM | HASH_BLOBS);

	LWLockAcquire(queue_shared->lock, LW_EXCLUSIVE);
	queue_shared->launcher_latch = MyLatch;
	LWLockRelease(queue_shared->lock);

	for (;;)
	{
		CHECK_FOR_INTERRUPTS();
		if (ConfigReloadPending)
		{
			ConfigReloadPending = false;
			ProcessConfigFile(PGC_SIGHUP);
		}
		launcher_pass(dbs);
		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 QUEUE_LAUNCHER_NAP_MS, PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
	}
}

/* ------------------------------------------------------------------------
 * Utility hook: DROP DATABASE makes the database's worker leave first;
 * PREPARE TRANSACTION and COMMIT / ROLLBACK PREPARED tell counts.c (counts
 * and wake-ups) and shmem.c (a request for a worker) the GID whose notes
 * to keep, apply or drop
 * ------------------------------------------------------------------------
 */

/*
 * May the current role make a database's worker leave?  Only its owner or
 * a superuser (DESIGN "Access"), who are also the only ones PostgreSQL
 * lets drop, rename or copy a database that is not a template.  Anyone
 * else is refused by the command itself, after this hook: the worker must
 * not have been stopped by then.
 */
static bool
may_stop_worker_of(Oid dbid)
{
	return queue_database_ownercheck(dbid, GetUserId());
}

static void
stop_worker_of(const char *dbname)
{
	Oid			dbid = get_database_oid(dbname, true);
	pid_t		pid = 0;

	if (!OidIsValid(dbid) || queue_shared == NULL)
		return;
	/* Nor our own database: no command drops, renames or copies that. */
	if (dbid == MyDatabaseId || !may_stop_worker_of(dbid))
		return;
	LWLockAcquire(queue_shared->lock, LW_EXCLUSIVE);
	{
		QueueDbSlot *s = queue_db_slot(dbid, false);

		if (s != NULL)
		{
			s->stop_requested = GetCurrentTimestamp();
			pid = s->pid;
		}
	}
	LWLockRelease(queue_shared->lock);

	/*
	 * The command itself then waits (up to 5 s) for the database's other
	 * sessions to go; the worker leaves at once on SIGTERM.
	 */
	if (pid != 0)
		kill(pid, SIGTERM);
	queue_consumers_stop_db(dbid);
}

static void
queue_utility_hook(PlannedStmt *pstmt, const char *queryString,
				   bool readOnlyTree, ProcessUtilityContext context,
				   ParamListInfo params, QueryEnvironment *queryEnv,
				   DestReceiver *dest, QueryCompletion *qc)
{
	Node	   *stmt = pstmt->utilityStmt;
	char		finish_gid[GIDSIZE] = "";
	bool		finish_commit = false;

	if (IsA(stmt, TransactionStmt))
	{
		TransactionStmt *ts = (TransactionStmt *) stmt;

		/* Two-phase commit: what a prepared transaction noted (counts.c). */
		if (ts->kind == TRANS_STMT_PREPARE)
		{
			queue_prepare_gid(ts->gid);
			queue_register_prepare_gid(ts->gid);
		}
		else if (ts->kind == TRANS_STMT_COMMIT_PREPARED ||
				 ts->kind == TRANS_STMT_ROLLBACK_PREPARED)
		{
			strlcpy(finish_gid, ts->gid, GIDSIZE);
			finish_commit = ts->kind == TRANS_STMT_COMMIT_PREPARED;
		}
	}
	else if (IsA(stmt, DropdbStmt))
		stop_worker_of(((DropdbStmt *) stmt)->dbname);
	else if (IsA(stmt, CreatedbStmt))
	{
		ListCell   *lc;

		foreach(lc, ((CreatedbStmt *) stmt)->options)
		{
			DefElem    *opt = lfirst(lc);

			if (strcmp(opt->defname, "template") == 0 && opt->arg != NULL)
				stop_worker_of(defGetString(opt));
		}
	}
	else if (IsA(stmt, DropStmt) &&
			 ((DropStmt *) stmt)->removeType == OBJECT_EXTENSION)
		queue_consumers_drop_extension(((DropStmt *) stmt)->objects);
	else if (IsA(stmt, RenameStmt) &&
			 ((RenameStmt *) stmt)->renameType == OBJECT_DATABASE)
		stop_worker_of(((RenameStmt *) stmt)->subname);
	queue_role_refs_utility(stmt, false);
	queue_citus_utility(stmt);	/* storage/citus.c: the anchor's shards stay */

	if (prev_utility_hook)
		prev_utility_hook(pstmt, queryString, readOnlyTree, context, params,
						  queryEnv, dest, qc);
	else
		standard_ProcessUtility(pstmt, queryString, readOnlyTree, context,
								params, queryEnv, dest, qc);

	/* Only once PostgreSQL finished it: an error skips this. */
	queue_role_refs_utility(stmt, true);
	if (finish_gid[0] != '\0')
	{
		queue_finish_prepared(finish_gid, finish_commit);
		queue_register_finish_prepared(finish_gid, finish_commit);
		queue_failed_finish_prepared(finish_gid, finish_commit);
	}
}

void
queue_utility_hook_init(void)
{
	prev_utility_hook = ProcessUtility_hook;
	ProcessUtility_hook = queue_utility_hook;
}

/* However a worker leaves, its slot stops naming its pid. */
static void
worker_exit(int code, Datum arg)
{
	Oid			dbid = DatumGetObjectId(arg);

	LWLockAcquire(queue_shared->lock, LW_EXCLUSIVE);
	{
		QueueDbSlot *s = queue_db_slot(dbid, false);

		if (s != NULL && s->pid == MyProcPid)
		{
			s->pid = 0;
			s->latch = NULL;
		}
	}
	LWLockRelease(queue_shared->lock);
}

/*
 * The queues of a pass, in list order, and when each is next due: a pass
 * reads the dense array of times, so an idle queue costs it one
 * comparison and no visit to its row or its sweep state.
 */
typedef struct Schedule
{
	QueueRow  **rows;
	TimestampTz *due;			/* 0: next pass; DT_NOEND: when a commit says */
	int			n;
	int			cap;
} Schedule;

/*
 * Point each listed queue at its sweep state in swept and add it to sch
 * (new queues, and those whose row changed what the sweep goes by, start
 * with everything due); after a whole list (sch emptied first), forget the
 * queues it lacks (dropped).  Entries of a dynahash never move, so the
 * pointers hold until their entry is removed, which only a whole list
 * does.  sch's arrays live in the list's memory context.
 */
static void
attach_sweep_state(HTAB *swept, List *queues, bool whole, bool since_start, Schedule *sch)
{
	HASH_SEQ_STATUS status;
	SweptQueue *sq;
	ListCell   *lc;

	if (whole)
	{
		hash_seq_init(&status, swept);
		while ((sq = hash_seq_search(&status)) != NULL)
			sq->seen = false;
		sch->n = sch->cap = 0;
		sch->rows = NULL;
		sch->due = NULL;
	}
	if (sch->n + list_length(queues) > sch->cap)
	{
		int			cap = Max(64, (sch->n + list_length(queues)) * 2);

		if (sch->rows == NULL)
		{
			sch->rows = palloc(sizeof(QueueRow *) * cap);
			sch->due = palloc(sizeof(TimestampTz) * cap);
		}
		else
		{
			sch->rows = repalloc(sch->rows, sizeof(QueueRow *) * cap);
			sch->due = repalloc(sch->due, sizeof(TimestampTz) * cap);
		}
		sch->cap = cap;
	}
	foreach(lc, queues)
	{
		QueueRow   *q = lfirst(lc);
		bool		found;

		sq = hash_search(swept, &q->id, HASH_ENTER, &found);
		if (!found)
		{
			queue_sweep_new(sq);
			sq->active = false;

			/*
			 * Created since this worker started, and nothing has arrived
			 * in it (its counters start at its create): empty, nothing to
			 * look at until something arrives.  (Counters of a queue that
			 * existed before are lost in a crash: those are looked at.)
			 */
			if (since_start && queue_arrival_count(q->id) == 0)
				queue_sweep_empty(sq);
		}
		else if (sq->listed_retention != q->retention ||
				 sq->listed_dedup_window != q->dedup_window ||
				 sq->listed_has_dlq != q->has_dlq || sq->listed_store_id != q->store_id ||
				 sq->listed_shared != q->shared)
			queue_sweep_due_now(sq);	/* altered, moved or purged: look again */
		sq->listed_retention = q->retention;
		sq->listed_dedup_window = q->dedup_window;
		sq->listed_has_dlq = q->has_dlq;
		sq->listed_store_id = q->store_id;
		sq->listed_shared = q->shared;
		sq->seen = true;
		sq->pos = sch->n;
		q->sq = sq;
		sch->rows[sch->n] = q;
		sch->due[sch->n] = sq->active ? 0 : queue_sweep_next_visit(q, sq);
		sch->n++;
	}
	if (whole)
	{
		hash_seq_init(&status, swept);
		while ((sq = hash_seq_search(&status)) != NULL)
			if (!sq->seen)
			{
				queue_recycle_forget(sq->queue_id);
				hash_search(swept, &sq->queue_id, HASH_REMOVE, NULL);
			}
	}
}

/* The sleep in ms, cut short to end at due (0: no due time). */
static long
sleep_until(long timeout, TimestampTz due)
{
	long		secs;
	int			usecs;

	if (due == 0)
		return timeout;
	TimestampDifference(GetCurrentTimestamp(), due, &secs, &usecs);
	return Min(timeout, secs * 1000 + usecs / 1000 + 1);
}

void
queue_worker_main(Datum arg)
{
	Oid			dbid = DatumGetObjectId(arg);
	HASHCTL		ctl;
	HTAB	   *swept;
	MemoryContext pass_cxt;
	MemoryContext sweep_cxt;
	MemoryContext list_cxt;
	Schedule	sch = {0};
	bool		reloaded = false;
	TimestampTz listed_at = 0;

	pqsignal(SIGHUP, SignalHandlerForConfigReload);
	pqsignal(SIGTERM, die);
	BackgroundWorkerUnblockSignals();
	BackgroundWorkerInitializeConnectionByOid(dbid, InvalidOid, 0);
	queue_pin_process_settings();
	queue_bound_lock_waits();
	pgstat_report_appname("queue worker");

	LWLockAcquire(queue_shared->lock, LW_EXCLUSIVE);
	{
		QueueDbSlot *s = queue_db_slot(dbid, true);

		if (s != NULL)
		{
			s->pid = MyProcPid;
			s->latch = MyLatch;
			s->no_extension = false;
		}
	}
	LWLockRelease(queue_shared->lock);
	before_shmem_exit(worker_exit, ObjectIdGetDatum(dbid));

	ctl.keysize = sizeof(int64);
	ctl.entrysize = sizeof(SweptQueue);
	swept = hash_create("queue sweep schedule", 64, &ctl, HASH_ELEM | HASH_BLOBS);
	CacheRegisterRelcacheCallback(queue_list_inval, (Datum) 0);
	pass_cxt = AllocSetContextCreate(TopMemoryContext, "queue worker pass",
									 ALLOCSET_DEFAULT_SIZES);
	sweep_cxt = AllocSetContextCreate(TopMemoryContext, "queue worker sweep",
									  ALLOCSET_DEFAULT_SIZES);
	list_cxt = AllocSetContextCreate(TopMemoryContext, "queue worker queues",
									 ALLOCSET_DEFAULT_SIZES);

	for (;;)
	{
		bool		exists;
		HASH_SEQ_STATUS status;
		SweptQueue *sq;
		TimestampTz failed_due;
		TimestampTz consumers_due = 0;
		TimestampTz move_due;
		TimestampTz now;
		long		timeout;
		int64		active[QUEUE_ACTIVE_IDS];
		int			nactive;
		int64		fresh[QUEUE_ACTIVE_IDS];
		int			nfresh;
		bool		visit_all;
		bool		relist;

		CHECK_FOR_INTERRUPTS();
		if (ConfigReloadPending)
		{
			/* A reload also makes every queue due: an admin's "sweep now". */
			ConfigReloadPending = false;
			ProcessConfigFile(PGC_SIGHUP);
			hash_seq_init(&status, swept);
			while ((sq = hash_seq_search(&status)) != NULL)
				queue_sweep_due_now(sq);
			reloaded = true;
			queue_topic_sweep_now();
		}
		if (!queue_worker_enabled)
			proc_exit(0);

		/*
		 * Take in invalidations (a create or drop since the last pass sets
		 * queue_list_stale, sweep.c): they are read at transaction start,
		 * and a pass over queues that are all idle starts none.
		 */
		StartTransactionCommand();
		queue_list_check();
		CommitTransactionCommand();

		/*
		 * The queues commits changed since the last pass (counts.c), or all
		 * of them.  The list lives in list_cxt between reloads; a pass's
		 * own allocations go in pass_cxt.
		 */
		visit_all = queue_take_active(listed_at == 0, active, &nactive) || reloaded;
		reloaded = false;
		relist = visit_all || queue_list_stale ||
			TimestampDifferenceExceeds(listed_at, GetCurrentTimestamp(), QUEUE_LIST_MAX_AGE_MS);
		exists = true;
		if (relist)
		{
			MemoryContextReset(list_cxt);
			MemoryContextSwitchTo(list_cxt);
			queue_list_stale = false;
			attach_sweep_state(swept, queue_sweep_list(&exists, NULL, 0), true, listed_at != 0,
							   &sch);
			listed_at = GetCurrentTimestamp();
		}

		/*
		 * The queues commits changed are due now, in a list made afresh too
		 * (one made because another queue was created or the list was old
		 * once left a queue it had found empty waiting for the next commit:
		 * a dead letter that came expired stayed unswept).  One the list
		 * does not have was created since it was made (or, made afresh,
		 * is gone).
		 */
		nfresh = 0;
		for (int i = 0; i < nactive; i++)
		{
			sq = hash_search(swept, &active[i], HASH_FIND, NULL);
			if (sq != NULL)
			{
				sq->active = true;
				sch.due[sq->pos] = 0;
			}
			else if (!relist)
				fresh[nfresh++] = active[i];
		}
		if (nfresh > 0)
		{
			MemoryContextSwitchTo(list_cxt);
			attach_sweep_state(swept, queue_sweep_list(&exists, fresh, nfresh), false, true,
							   &sch);
		}
		MemoryContextSwitchTo(pass_cxt);
		if (!exists)
		{
			LWLockAcquire(queue_shared->lock, LW_EXCLUSIVE);
			{
				QueueDbSlot *s = queue_db_slot(dbid, false);

				if (s != NULL)
				{
					s->no_extension = true;
					s->pid = 0;
					s->latch = NULL;
				}
			}
			LWLockRelease(queue_shared->lock);
			proc_exit(0);
		}

		/* Rolled-back receives first: a rollback woke us for them. */
		failed_due = queue_failed_apply_all(pass_cxt);

		/*
		 * Visit the queues a commit changed and those whose time came
		 * (sweep.c, queue_sweep_next_visit); an idle queue costs this test.
		 */
		now = GetCurrentTimestamp();
		for (int i = 0; i < sch.n; i++)
		{
			QueueRow   *q;

			if (!visit_all && sch.due[i] > now)
				continue;
			q = sch.rows[i];
			sq = q->sq;
			queue_sweep_pass(q, sq, sweep_cxt);
			sq->active = false;
			sch.due[i] = queue_sweep_next_visit(q, sq);
		}
		queue_vacuum_shared_pass(sch.rows, sch.n, sweep_cxt);
		queue_reclaim_pass(sweep_cxt);
		queue_topic_sweep();
		consumers_due = queue_consumers_tend();
		move_due = queue_move_tasks_advance(sweep_cxt);
		MemoryContextSwitchTo(TopMemoryContext);
		MemoryContextReset(pass_cxt);
		pgstat_report_stat(true);

		/*
		 * Sleep to the next sweep, or earlier: a move task's next slice
		 * (move_task.c), a rolled-back receive's retry (failed.c), a
		 * consumer process to end in time (consumer_tend.c).
		 */
		timeout = queue_sweep_interval;
		timeout = sleep_until(timeout, move_due);
		timeout = sleep_until(timeout, failed_due);
		timeout = sleep_until(timeout, consumers_due);
		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 timeout, PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
	}
}
