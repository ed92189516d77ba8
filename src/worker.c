/*-------------------------------------------------------------------------
 *
 * worker.c
 *	  The background workers: a launcher, and one worker per database that
 *	  has the extension, which sweeps what time alone cannot.
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
 * The worker sweeps each queue in short transactions of at most
 * SWEEP_BATCH rows that skip locked rows, so it never waits on senders or
 * receivers: messages past retention (read in laps over the whole queue,
 * see sweep_chunk), deduplication ids past their window, receive attempts
 * past theirs, and (every pass, for queues that have a dead-letter queue)
 * messages whose lease ran out after max_receive_count receives, which go
 * to the dead-letter queue with nobody receiving.  Correctness never waits
 * for it (every read filters by time); it keeps tables small.  A queue is
 * swept again only when something in it can have expired, and an empty
 * one only once something arrives, so idle queues cost nothing.
 * Long-pollers need no wake-up from it: a waiting receive sleeps no longer
 * than until the next message of its queue turns visible (wait.c).
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

#include "queue.h"

PGDLLEXPORT void queue_launcher_main(Datum arg);
PGDLLEXPORT void queue_worker_main(Datum arg);


bool		queue_worker_enabled = true;
int			queue_sweep_interval = 1000;	/* ms */

#define QUEUE_LAUNCHER_NAP_MS	2000
#define QUEUE_RESTART_DELAY_MS	1000
#define QUEUE_STOP_GRACE_MS		10000
#define SWEEP_BATCH				1000
#define SWEEP_ROUNDS			10		/* batches per queue per pass */
#define ATTEMPT_WINDOW			(5 * USECS_PER_MINUTE)

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
		return false;
	}
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
 * PREPARE TRANSACTION and COMMIT / ROLLBACK PREPARED tell stats.c (counts
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
#if PG_VERSION_NUM >= 160000
	return object_ownercheck(DatabaseRelationId, dbid, GetUserId());
#else
	return pg_database_ownercheck(dbid, GetUserId());
#endif
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

		/* Two-phase commit: what a prepared transaction noted (stats.c). */
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
	else if (IsA(stmt, RenameStmt) &&
			 ((RenameStmt *) stmt)->renameType == OBJECT_DATABASE)
		stop_worker_of(((RenameStmt *) stmt)->subname);

	if (prev_utility_hook)
		prev_utility_hook(pstmt, queryString, readOnlyTree, context, params,
						  queryEnv, dest, qc);
	else
		standard_ProcessUtility(pstmt, queryString, readOnlyTree, context,
								params, queryEnv, dest, qc);

	/* Only once PostgreSQL finished it: an error skips this. */
	if (finish_gid[0] != '\0')
	{
		queue_finish_prepared(finish_gid, finish_commit);
		queue_register_finish_prepared(finish_gid, finish_commit);
	}
}

void
queue_utility_hook_init(void)
{
	prev_utility_hook = ProcessUtility_hook;
	ProcessUtility_hook = queue_utility_hook;
}

/* ------------------------------------------------------------------------
 * Worker: sweeps
 * ------------------------------------------------------------------------
 */

typedef struct SweptQueue
{
	int64		queue_id;		/* hash key */
	TimestampTz lap_due;		/* no message can expire before this */
	TimestampTz windows_due;	/* nor a deduplication id or attempt */
	TimestampTz dlq_since;		/* leases ending after this not yet checked */
	int64		empty_arrivals; /* found empty after this many arrivals, or -1 */
	int64		vacuumed_churn; /* its churn at its last vacuum (vacuum.c) */
	int64		vacuumed_g_churn;	/* ... at its group table's last vacuum */
	/* The expiry lap under way: every message, in id order (see below). */
	bool		lap_running;
	int64		lap_cursor;		/* ids up to this one are done */
	TimestampTz lap_start;
	TimestampTz lap_oldest;		/* least sent_at left behind, or DT_NOEND */
	int64		lap_arrivals;	/* arrivals read before the lap began */
	bool		seen;
} SweptQueue;

typedef struct QueueRow
{
	int64		id;
	bool		fifo;
	int64		retention;
	int64		dedup_window;
	bool		has_dlq;
	char	   *name;
	int64		g_blocks;		/* FIFO: its group table's size, as listed */
} QueueRow;

/* Run one sweep statement; returns rows affected (or the first column). */
static uint64
sweep_exec(const char *sql, int nargs, Oid *types, Datum *values)
{
	int			rc = SPI_execute_with_args(sql, nargs, types, values, NULL, false, 0);

	if (rc < 0)
		elog(ERROR, "queue sweep failed: %s", SPI_result_code_string(rc));
	return SPI_processed;
}

/*
 * An optional timestamp from the first column of a one-row query taking an
 * interval of usecs microseconds as $1.
 */
static TimestampTz
sweep_time(const char *sql, int64 usecs)
{
	Oid			type = INTERVALOID;
	Interval	iv = {0};
	Datum		arg = IntervalPGetDatum(&iv);
	bool		isnull;
	Datum		d;

	iv.time = usecs;
	if (SPI_execute_with_args(sql, 1, &type, &arg, NULL, true, 1) != SPI_OK_SELECT ||
		SPI_processed == 0)
		return 0;
	d = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull);
	return isnull ? 0 : DatumGetTimestampTz(d);
}

/*
 * One step of an expiry lap: what a chunk did, applied to the lap once its
 * transaction committed.
 */
typedef struct LapStep
{
	uint64		deleted;
	int64		cursor;			/* the last id looked at */
	TimestampTz oldest;			/* least sent_at left behind, or DT_NOEND */
	bool		last;			/* no ids after these: the lap is done */
} LapStep;

/*
 * Expiry: the worker finds expired messages by reading a queue's messages
 * in id order, SWEEP_BATCH ids a transaction, from where the last chunk
 * stopped (a "lap"), deleting those whose sent_at + retention has passed.
 * Id order says nothing of sent_at (a FIFO redrive puts old ids back with
 * a new sent_at, a dead letter keeps its old sent_at in a new queue), so
 * the lap reads every message once, and notes the least sent_at it leaves
 * behind.  Nothing can expire before that plus the retention: the next lap
 * starts then (anything that arrives meanwhile is sent at or after the
 * lap's start, but a dead letter, which is swept by the next lap at the
 * latest).  So a queue in which nothing can have expired costs nothing,
 * and one whose messages keep expiring is read in full at most once per
 * tenth of its retention (and never more than half the time).
 *
 * One chunk: the SWEEP_BATCH ids after cursor; delete the expired ones,
 * skipping rows (FIFO: groups and their senders) someone holds, which
 * count as left behind.  On a FIFO queue the groups are locked and then
 * refreshed, as any change to a group's messages must.
 */
static void
sweep_chunk(QueueRow *q, int64 cursor, TimestampTz cutoff, LapStep *step)
{
	Oid			types[3] = {INT8OID, TIMESTAMPTZOID, TEXTARRAYOID};
	Datum		values[3];
	int64	   *expired;
	Datum	   *groups;
	TimestampTz expired_oldest = DT_NOEND;
	int			n;
	int			nexpired = 0;

	step->deleted = 0;
	step->cursor = cursor;
	step->oldest = DT_NOEND;
	values[0] = Int64GetDatum(cursor);
	n = (int) sweep_exec(psprintf(
		"SELECT message_id, sent_at, message_group_id FROM queue_data.q" INT64_FORMAT
		" WHERE message_id > $1 ORDER BY message_id LIMIT %d", q->id, SWEEP_BATCH),
						 1, types, values);
	step->last = n < SWEEP_BATCH;
	expired = palloc(Max(n, 1) * sizeof(int64));
	groups = palloc(Max(n, 1) * sizeof(Datum));
	for (int r = 0; r < n; r++)
	{
		HeapTuple	tup = SPI_tuptable->vals[r];
		TupleDesc	desc = SPI_tuptable->tupdesc;
		bool		isnull;
		int64		id = DatumGetInt64(SPI_getbinval(tup, desc, 1, &isnull));
		TimestampTz sent = DatumGetTimestampTz(SPI_getbinval(tup, desc, 2, &isnull));

		step->cursor = id;
		if (sent > cutoff)
		{
			step->oldest = Min(step->oldest, sent);
			continue;
		}
		expired_oldest = Min(expired_oldest, sent);
		if (q->fifo)
		{
			Datum		g = SPI_getbinval(tup, desc, 3, &isnull);

			if (isnull)
				continue;		/* cannot be: FIFO messages have groups */
			groups[nexpired] = PointerGetDatum(PG_DETOAST_DATUM_COPY(g));
		}
		expired[nexpired++] = id;
	}
	if (nexpired == 0)
		return;

	types[0] = INT8ARRAYOID;
	values[0] = queue_int8_array(nexpired, expired);
	values[1] = TimestampTzGetDatum(cutoff);
	if (!q->fifo)
		step->deleted = sweep_exec(psprintf(
			"DELETE FROM queue_data.q" INT64_FORMAT " WHERE message_id = ANY (ARRAY("
			" SELECT message_id FROM queue_data.q" INT64_FORMAT
			" WHERE message_id = ANY ($1) AND sent_at <= $2 FOR UPDATE SKIP LOCKED))",
			q->id, q->id), 2, types, values);
	else
	{
		int			ngroups = queue_sort_unique_texts(groups, nexpired);

		/* FIFO: lock the groups of the expired messages, then delete. */
		values[2] = queue_text_array(ngroups, groups, NULL);
		ngroups = (int) sweep_exec(psprintf(
			"SELECT message_group_id FROM queue_data.g" INT64_FORMAT
			" WHERE message_group_id = ANY ($3) ORDER BY 1 FOR UPDATE SKIP LOCKED", q->id),
								   3, types, values);
		if (ngroups > 0)
		{
			Datum	   *locked;

			ngroups = queue_spi_groups(1, &locked);
			/* Nor groups being sent to: the sweep may empty a group (fifo.c). */
			ngroups = queue_fifo_try_lock_senders(q->id, ngroups, locked);
			if (ngroups > 0)
			{
				values[2] = queue_text_array(ngroups, locked, NULL);
				step->deleted = sweep_exec(psprintf(
					"DELETE FROM queue_data.q" INT64_FORMAT " WHERE message_id = ANY ($1)"
					" AND message_group_id = ANY ($3) AND sent_at <= $2", q->id),
										   3, types, values);
				/* as every change to a group's messages (its senders' locks are ours) */
				queue_fifo_refresh_groups(queue_lookup(cstring_to_text(q->name)),
										  ngroups, locked);
			}
		}
	}
	/* Some were skipped (held, or gone meanwhile): the next lap is due now. */
	if (step->deleted < (uint64) nexpired)
		step->oldest = Min(step->oldest, expired_oldest);
}

/* Forget deduplication ids and receive attempts past their windows. */
static uint64
sweep_windows(int64 id, TimestampTz dedup_cutoff, TimestampTz attempt_cutoff)
{
	Oid			types[1] = {TIMESTAMPTZOID};
	Datum		values[1];
	uint64		n;

	values[0] = TimestampTzGetDatum(dedup_cutoff);
	n = sweep_exec(psprintf(
		"DELETE FROM queue_data.d" INT64_FORMAT " WHERE ctid = ANY (ARRAY("
		" SELECT ctid FROM queue_data.d" INT64_FORMAT " WHERE accepted_at <= $1"
		" ORDER BY accepted_at LIMIT %d FOR UPDATE SKIP LOCKED))", id, id, SWEEP_BATCH),
				   1, types, values);
	values[0] = TimestampTzGetDatum(attempt_cutoff);
	n += sweep_exec(psprintf(
		"DELETE FROM queue_data.a" INT64_FORMAT " WHERE ctid = ANY (ARRAY("
		" SELECT ctid FROM queue_data.a" INT64_FORMAT " WHERE received_at <= $1"
		" LIMIT %d FOR UPDATE SKIP LOCKED))", id, id, SWEEP_BATCH),
					1, types, values);
	return n;
}

/*
 * When the next deduplication id or receive attempt of a queue reaches its
 * window (with none, anything received or sent from now on expires no
 * sooner than the shorter window from now); *empty when it has none.
 */
static TimestampTz
windows_next_due(QueueRow *q, TimestampTz now, bool *empty)
{
	TimestampTz due = now + Min(q->dedup_window, ATTEMPT_WINDOW);
	TimestampTz t;
	bool		found = false;

	t = sweep_time(psprintf("SELECT min(accepted_at) + $1 FROM queue_data.d" INT64_FORMAT, q->id),
				   q->dedup_window);
	found |= (t != 0);
	if (t != 0 && t < due)
		due = t;
	t = sweep_time(psprintf("SELECT min(received_at) + $1 FROM queue_data.a" INT64_FORMAT, q->id),
				   ATTEMPT_WINDOW);
	found |= (t != 0);
	if (t != 0 && t < due)
		due = t;
	*empty = !found;
	return due;
}

/*
 * The worker re-reads the registry when a relcache invalidation says
 * something changed (create and drop send one for queue._queues, alter one
 * for the queue's table) and at least every QUEUE_LIST_MAX_AGE_MS.
 */
#define QUEUE_LIST_MAX_AGE_MS	10000

static bool queue_list_stale = true;

static void
queue_list_inval(Datum arg, Oid relid)
{
	queue_list_stale = true;
}

/* The queues of this database (empty if the extension is gone). */
static List *
list_queues(bool *extension_exists)
{
	List	   *queues = NIL;
	MemoryContext outer = CurrentMemoryContext;

	StartTransactionCommand();
	*extension_exists = OidIsValid(get_extension_oid("queue", true));
	if (*extension_exists)
	{
		SPI_connect();
		PushActiveSnapshot(GetTransactionSnapshot());
		if (SPI_execute("SELECT queue_id, fifo,"
						" (extract(epoch FROM retention) * 1000000)::int8,"
						" (extract(epoch FROM deduplication_window) * 1000000)::int8,"
						" dead_letter_queue IS NOT NULL, queue_name,"
						" CASE WHEN fifo THEN pg_catalog.pg_relation_size(pg_catalog.to_regclass("
						"  'queue_data.g' || queue_id)) END"
						" FROM queue._queues ORDER BY queue_id", true, 0) != SPI_OK_SELECT)
			elog(ERROR, "could not list queues");
		for (uint64 r = 0; r < SPI_processed; r++)
		{
			HeapTuple	tup = SPI_tuptable->vals[r];
			TupleDesc	desc = SPI_tuptable->tupdesc;
			bool		isnull;
			MemoryContext old = MemoryContextSwitchTo(outer);
			QueueRow   *q = palloc(sizeof(QueueRow));

			q->id = DatumGetInt64(SPI_getbinval(tup, desc, 1, &isnull));
			q->fifo = DatumGetBool(SPI_getbinval(tup, desc, 2, &isnull));
			q->retention = DatumGetInt64(SPI_getbinval(tup, desc, 3, &isnull));
			q->dedup_window = DatumGetInt64(SPI_getbinval(tup, desc, 4, &isnull));
			q->has_dlq = DatumGetBool(SPI_getbinval(tup, desc, 5, &isnull));
			q->name = TextDatumGetCString(SPI_getbinval(tup, desc, 6, &isnull));
			q->g_blocks = DatumGetInt64(SPI_getbinval(tup, desc, 7, &isnull)) / BLCKSZ;
			if (isnull)
				q->g_blocks = 0;
			queues = lappend(queues, q);
			MemoryContextSwitchTo(old);
		}
		PopActiveSnapshot();
		SPI_finish();
	}
	CommitTransactionCommand();
	return queues;
}

/*
 * After an error in a sweep: report it, abandon the transaction and the
 * sweep's memory; the worker goes on with the next queue.
 */
static void
sweep_recover(MemoryContext cxt)
{
	MemoryContextSwitchTo(cxt);
	EmitErrorReport();
	FlushErrorState();
	AbortCurrentTransaction();
	MemoryContextReset(cxt);
}

/*
 * Move messages whose last lease ran out since the previous pass after
 * max_receive_count receives to the dead-letter queue (deadletter.c).  Runs
 * every pass for queues that have a dead-letter queue: it reads only the
 * leases that ended since.
 */
static void
sweep_dead_letters(QueueRow *q, SweptQueue *sq, MemoryContext cxt)
{
	PG_TRY();
	{
		TimestampTz now;
		uint64		moved;

		do
		{
			QueueMeta  *meta;

			StartTransactionCommand();
			SPI_connect();
			PushActiveSnapshot(GetTransactionSnapshot());
			now = GetCurrentTimestamp();
			meta = queue_lookup(cstring_to_text(q->name));
			moved = meta->max_receive_count > 0 ?
				queue_dead_letter_sweep(meta, sq->dlq_since, now) : 0;
			PopActiveSnapshot();
			SPI_finish();
			CommitTransactionCommand();
			MemoryContextReset(cxt);
			CHECK_FOR_INTERRUPTS();
		} while (moved >= SWEEP_BATCH);
		/* A little overlap: a lease ending now may commit a moment later. */
		sq->dlq_since = now - USECS_PER_SEC;
	}
	PG_CATCH();
	{
		sweep_recover(cxt);
	}
	PG_END_TRY();
}

/*
 * Sweep one queue: up to SWEEP_ROUNDS short transactions, each one chunk
 * of the expiry lap (when a lap is due or under way) and the windows (when
 * due), then note when it is next due.  The lap's state changes only once
 * its chunk committed.  An error (say, the queue was dropped meanwhile) is
 * logged and the queue retried on a later pass.
 */
static void
sweep_queue(QueueRow *q, SweptQueue *sq, MemoryContext cxt)
{
	PG_TRY();
	{
		for (int round = 0; round < SWEEP_ROUNDS; round++)
		{
			TimestampTz now;
			int64		arrivals = queue_arrival_count(q->id);
			LapStep		step = {0};
			bool		chunked = false;
			bool		windows_busy = false;
			bool		windows_checked = false;
			bool		windows_empty = false;

			StartTransactionCommand();
			SPI_connect();
			PushActiveSnapshot(GetTransactionSnapshot());
			now = GetCurrentTimestamp();
			if (!sq->lap_running && now >= sq->lap_due)
			{
				sq->lap_running = true;
				sq->lap_cursor = 0;
				sq->lap_start = now;
				sq->lap_oldest = DT_NOEND;
				/* read before this transaction's snapshot: see below */
				sq->lap_arrivals = arrivals;
			}
			if (sq->lap_running)
			{
				sweep_chunk(q, sq->lap_cursor, now - q->retention, &step);
				chunked = true;
				if (step.deleted > 0)
					queue_count(q->id, QC_EXPIRED, (int64) step.deleted);
			}
			/* The lap's last chunk also looks at the windows. */
			if (now >= sq->windows_due || (chunked && step.last))
			{
				uint64		forgotten = sweep_windows(q->id, now - q->dedup_window,
													  now - ATTEMPT_WINDOW);

				windows_busy = forgotten >= SWEEP_BATCH;
				if (!windows_busy)
				{
					sq->windows_due = windows_next_due(q, now, &windows_empty);
					windows_checked = true;
				}
			}
			PopActiveSnapshot();
			SPI_finish();
			CommitTransactionCommand();
			MemoryContextReset(cxt);

			if (chunked)
			{
				sq->lap_cursor = step.cursor;
				sq->lap_oldest = Min(sq->lap_oldest, step.oldest);
				if (step.last)
				{
					TimestampTz took = now - sq->lap_start;

					sq->lap_running = false;
					sq->lap_due = Max(Min(sq->lap_oldest, sq->lap_start) + q->retention,
									  now + Max(took, q->retention / 10));

					/*
					 * Nothing left at all: nothing can expire until
					 * something arrives (ids and attempts only come with
					 * messages).  Note the arrivals read before the lap's
					 * first snapshot, so one it did not see shows as a
					 * change.  (A queue whose arrivals cannot be counted
					 * is looked at when its windows are due instead.)
					 */
					sq->empty_arrivals =
						(sq->lap_oldest == DT_NOEND && windows_checked && windows_empty &&
						 sq->lap_arrivals >= 0) ? sq->lap_arrivals : -1;
				}
			}
			if (!sq->lap_running && !windows_busy)
				break;
			CHECK_FOR_INTERRUPTS();
		}
	}
	PG_CATCH();
	{
		sweep_recover(cxt);
		sq->lap_due = sq->windows_due = GetCurrentTimestamp() + 10 * USECS_PER_SEC;
		sq->lap_running = false;
	}
	PG_END_TRY();
}

/* Vacuum a queue that churned (vacuum.c); an error waits for a later pass. */
static void
vacuum_queue(QueueRow *q, SweptQueue *sq, MemoryContext cxt)
{
	PG_TRY();
	{
		queue_vacuum_if_churned(q->id, q->fifo, q->g_blocks, &sq->vacuumed_churn,
								&sq->vacuumed_g_churn);
	}
	PG_CATCH();
	{
		sweep_recover(cxt);
	}
	PG_END_TRY();
	MemoryContextReset(cxt);
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
			s->pid = 0;
	}
	LWLockRelease(queue_shared->lock);
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
	List	   *queues = NIL;
	TimestampTz listed_at = 0;

	pqsignal(SIGHUP, SignalHandlerForConfigReload);
	pqsignal(SIGTERM, die);
	BackgroundWorkerUnblockSignals();
	BackgroundWorkerInitializeConnectionByOid(dbid, InvalidOid, 0);
	pgstat_report_appname("queue worker");

	LWLockAcquire(queue_shared->lock, LW_EXCLUSIVE);
	{
		QueueDbSlot *s = queue_db_slot(dbid, true);

		if (s != NULL)
		{
			s->pid = MyProcPid;
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
		ListCell   *lc;
		HASH_SEQ_STATUS status;
		SweptQueue *sq;

		CHECK_FOR_INTERRUPTS();
		if (ConfigReloadPending)
		{
			/* A reload also makes every queue due: an admin's "sweep now". */
			ConfigReloadPending = false;
			ProcessConfigFile(PGC_SIGHUP);
			hash_seq_init(&status, swept);
			while ((sq = hash_seq_search(&status)) != NULL)
			{
				sq->lap_due = sq->windows_due = 0;
				sq->empty_arrivals = -1;
			}
		}
		if (!queue_worker_enabled)
			proc_exit(0);

		/*
		 * Take in invalidations (a create or drop since the last pass sets
		 * queue_list_stale): they are read at transaction start, and a pass
		 * over queues that are all idle starts none.
		 */
		StartTransactionCommand();
		CommitTransactionCommand();

		/*
		 * The list lives in list_cxt between reloads; a pass's own
		 * allocations go in pass_cxt.
		 */
		if (queue_list_stale ||
			TimestampDifferenceExceeds(listed_at, GetCurrentTimestamp(),
									   QUEUE_LIST_MAX_AGE_MS))
		{
			MemoryContextReset(list_cxt);
			MemoryContextSwitchTo(list_cxt);
			queue_list_stale = false;
			queues = list_queues(&exists);
			listed_at = GetCurrentTimestamp();
		}
		else
			exists = true;
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
				}
			}
			LWLockRelease(queue_shared->lock);
			proc_exit(0);
		}

		hash_seq_init(&status, swept);
		while ((sq = hash_seq_search(&status)) != NULL)
			sq->seen = false;
		foreach(lc, queues)
		{
			QueueRow   *q = lfirst(lc);
			bool		found;

			sq = hash_search(swept, &q->id, HASH_ENTER, &found);
			if (!found)
			{
				sq->lap_due = sq->windows_due = 0;
				sq->dlq_since = DT_NOBEGIN;
				sq->empty_arrivals = -1;
				sq->vacuumed_churn = -1;
				sq->vacuumed_g_churn = -1;
				sq->lap_running = false;
			}
			sq->seen = true;
			MemoryContextSwitchTo(sweep_cxt);
			vacuum_queue(q, sq, sweep_cxt);
			MemoryContextSwitchTo(pass_cxt);
			if (q->has_dlq)
			{
				MemoryContextSwitchTo(sweep_cxt);
				sweep_dead_letters(q, sq, sweep_cxt);
				MemoryContextSwitchTo(pass_cxt);
			}
			/*
			 * An empty queue waits for something to arrive; then it is
			 * due at once (a dead letter may come already expired).
			 */
			if (sq->empty_arrivals >= 0)
			{
				if (queue_arrival_count(q->id) == sq->empty_arrivals)
					continue;
				sq->empty_arrivals = -1;
				sq->lap_due = sq->windows_due = 0;
			}
			if (sq->lap_running ||
				GetCurrentTimestamp() >= Min(sq->lap_due, sq->windows_due))
			{
				MemoryContextSwitchTo(sweep_cxt);
				sweep_queue(q, sq, sweep_cxt);
				MemoryContextSwitchTo(pass_cxt);
			}
		}
		/* Forget dropped queues. */
		hash_seq_init(&status, swept);
		while ((sq = hash_seq_search(&status)) != NULL)
			if (!sq->seen)
				hash_search(swept, &sq->queue_id, HASH_REMOVE, NULL);
		MemoryContextSwitchTo(TopMemoryContext);
		MemoryContextReset(pass_cxt);
		pgstat_report_stat(true);

		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 queue_sweep_interval, PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
	}
}
