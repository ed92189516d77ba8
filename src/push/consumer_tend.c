/*-------------------------------------------------------------------------
 *
 * consumer_tend.c
 *	  How the database's queue worker keeps the consumer processes
 *	  (consumer_worker.c) running, and how DROP DATABASE and DROP EXTENSION
 *	  stop them.
 *
 * The queue worker calls queue_consumers_tend on every pass: it re-reads
 * queue._consumers when a relcache invalidation says it changed (the
 * administrative functions send one) or every CONSUMER_LIST_MAX_AGE_MS,
 * starts the processes that are missing (concurrency per consumer, at
 * most queue.max_consumer_processes in the cluster, one slot each in
 * shared memory) and tells those whose consumer was dropped or paused to
 * leave.  Those that overstay (a handler that swallows its
 * statement_timeout, or ignores the stop) it ends with SIGTERM
 * (end_overstayers).  A process that dies is started again by the next
 * pass, at most once per CONSUMER_RESTART_MS per consumer.  The worker
 * runs only on a primary, so consumers pause on a hot standby and start on
 * promotion.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "catalog/namespace.h"
#include "catalog/pg_extension.h"
#include "commands/extension.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "storage/ipc.h"
#include "utils/builtins.h"
#include "utils/hsearch.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"

#include "common/queue_common.h"
#include "storage/queue_storage.h"
#include "push/queue_push.h"

#define CONSUMER_LIST_MAX_AGE_MS	10000
#define CONSUMER_RESTART_MS			1000
#define CONSUMER_START_GRACE_MS		30000	/* a claimed slot's process must run by then */
#define CONSUMER_HOLD_MS			10000	/* after DROP EXTENSION, DROP DATABASE */

/*
 * A handler call that outlives its statement_timeout (the visibility
 * timeout) by CONSUMER_OVERRUN_MARGIN_MS has ignored the cancel: its
 * process is terminated.  A process told to stop because its consumer was
 * dropped or paused has its batch cancelled, and is terminated when it has
 * not left CONSUMER_STOP_GRACE_MS later; one over its consumer's fair
 * share may finish its batch for CONSUMER_SHARE_GRACE_MS; one told to stop
 * outside a handler call gets the long poll of its receive
 * (CONSUMER_POLL_MS) on top.  See end_overstayers.
 */
#define CONSUMER_OVERRUN_MARGIN_MS	2000
#define CONSUMER_STOP_GRACE_MS		2000
#define CONSUMER_SHARE_GRACE_MS		5000
#define CONSUMER_POLL_MS			5000	/* consumer_worker.c's CONSUMER_WAIT */

/*
 * DROP DATABASE and friends (worker.c) stop a database's consumer
 * processes with its worker: they are sessions of that database too.
 * DROP EXTENSION stops them too: a batch holds locks on the extension's
 * tables in its own order, and the drop would wait for it or deadlock
 * with it.  No process of that database starts again for
 * CONSUMER_HOLD_MS (by then the command committed, and the worker left,
 * or it failed, and they come back).
 */
void
queue_consumers_stop_db(Oid dbid)
{
	int			held = 0;
	TimestampTz now = GetCurrentTimestamp();

	if (queue_consumer_shared == NULL)
		return;
	LWLockAcquire(queue_consumer_shared->lock, LW_EXCLUSIVE);
	for (int i = 0; i < QUEUE_CONSUMER_HELD; i++)
	{
		if (queue_consumer_shared->held_db[i] == dbid)
		{
			held = i;
			break;
		}
		if (queue_consumer_shared->held_until[i] < queue_consumer_shared->held_until[held])
			held = i;			/* else the one that ends first */
	}
	queue_consumer_shared->held_db[held] = dbid;
	queue_consumer_shared->held_until[held] = now + CONSUMER_HOLD_MS * 1000;
	for (int i = 0; i < queue_consumer_shared->nslots; i++)
	{
		QueueConsumerSlot *s = &queue_consumer_shared->slots[i];

		if (s->dbid != dbid)
			continue;
		s->stop = true;
		s->stop_why = QUEUE_CONSUMER_STOP_DROPPED;
		s->stop_at = now;
		if (s->pid != 0)
		{
			kill(s->pid, SIGTERM);
			s->terminated = true;
		}
	}
	LWLockRelease(queue_consumer_shared->lock);
}

/*
 * DROP EXTENSION (the utility hook, worker.c), before it runs: stop this
 * database's consumers if it drops queue, and the role may drop it (no
 * one else can make them stop by issuing a drop that is then refused).
 */
void
queue_consumers_drop_extension(List *names)
{
	ListCell   *lc;

	foreach(lc, names)
	{
		Oid			extid;

		if (strcmp(strVal(lfirst(lc)), "queue") != 0)
			continue;
		extid = get_extension_oid("queue", true);
		if (OidIsValid(extid) && queue_extension_ownercheck(extid, GetUserId()))
			queue_consumers_stop_db(MyDatabaseId);
	}
}

/* Whether this database's consumers are held back (queue_consumers_stop_db). */
static bool
held_back(TimestampTz now)
{
	for (int i = 0; i < QUEUE_CONSUMER_HELD; i++)
		if (queue_consumer_shared->held_db[i] == MyDatabaseId &&
			now < queue_consumer_shared->held_until[i])
			return true;
	return false;
}

/* ------------------------------------------------------------------------
 * Tending (the database's queue worker)
 * ------------------------------------------------------------------------
 */

typedef struct ConsumerRow
{
	int64		id;
	int64		queue_id;
	int32		concurrency;
	bool		paused;
	int			running;		/* this pass: its live slots not told to stop */
	int			allowed;		/* this pass: its fair share (fair_shares) */
	bool		start_failed;	/* this pass: no background worker slot */
} ConsumerRow;

/* When a consumer's processes were last started: restarts wait. */
typedef struct ConsumerStarted
{
	int64		id;				/* hash key */
	TimestampTz at;
} ConsumerStarted;

static bool consumers_stale = true;
static Oid	consumers_relid = InvalidOid;
static Oid	queues_relid = InvalidOid;
static MemoryContext tend_cxt = NULL;
static ConsumerRow *rows = NULL;
static int	nrows = 0;
static bool have_catalog = false;
static TimestampTz listed_at = 0;
static HTAB *started = NULL;
static BackgroundWorkerHandle **handles = NULL;
static uint64 *handle_gen = NULL;

static void
consumers_inval(Datum arg, Oid relid)
{
	if (!OidIsValid(relid) || relid == consumers_relid || relid == queues_relid)
		consumers_stale = true;
}

/* Read queue._consumers (none before 1.3), in a transaction of its own. */
static void
load_consumers(void)
{
	Oid			nsp;

	MemoryContextReset(tend_cxt);
	rows = NULL;
	nrows = 0;
	consumers_stale = false;
	StartTransactionCommand();
	SPI_connect();
	PushActiveSnapshot(GetTransactionSnapshot());
	nsp = get_namespace_oid("queue", true);
	consumers_relid = OidIsValid(nsp) ? get_relname_relid("_consumers", nsp) : InvalidOid;
	queues_relid = OidIsValid(nsp) ? get_relname_relid("_queues", nsp) : InvalidOid;
	have_catalog = OidIsValid(consumers_relid);
	if (have_catalog)
	{
		if (SPI_execute("SELECT consumer_id, queue_id, concurrency, paused"
						" FROM queue._consumers ORDER BY consumer_id", true, 0) != SPI_OK_SELECT)
			elog(ERROR, "could not list consumers");
		nrows = SPI_processed;
		rows = MemoryContextAllocZero(tend_cxt, Max(nrows, 1) * sizeof(ConsumerRow));
		for (int i = 0; i < nrows; i++)
		{
			HeapTuple	tup = SPI_tuptable->vals[i];
			TupleDesc	desc = SPI_tuptable->tupdesc;
			bool		isnull;

			rows[i].id = DatumGetInt64(SPI_getbinval(tup, desc, 1, &isnull));
			rows[i].queue_id = DatumGetInt64(SPI_getbinval(tup, desc, 2, &isnull));
			rows[i].concurrency = DatumGetInt32(SPI_getbinval(tup, desc, 3, &isnull));
			rows[i].paused = DatumGetBool(SPI_getbinval(tup, desc, 4, &isnull));
		}
	}
	SPI_finish();
	PopActiveSnapshot();
	CommitTransactionCommand();
	listed_at = GetCurrentTimestamp();

	/* Counters: one entry per consumer, none for dropped ones. */
	LWLockAcquire(queue_consumer_shared->lock, LW_EXCLUSIVE);
	for (int i = 0; i < nrows; i++)
		(void) queue_consumer_stat(MyDatabaseId, rows[i].id, rows[i].queue_id);
	for (int i = 0; i < queue_consumer_shared->nstats; i++)
	{
		QueueConsumerStat *st = &queue_consumer_shared->stats[i];
		bool		listed = false;

		if (st->dbid != MyDatabaseId)
			continue;
		for (int r = 0; r < nrows && !listed; r++)
			listed = rows[r].id == st->consumer_id;
		if (!listed)
			st->dbid = InvalidOid;
	}
	LWLockRelease(queue_consumer_shared->lock);
}

static ConsumerRow *
find_row(int64 id)
{
	for (int i = 0; i < nrows; i++)
		if (rows[i].id == id)
			return &rows[i];
	return NULL;
}

/* Start the process of a claimed slot; false (slot freed) if none could be. */
static bool
start_consumer(int slot, int64 consumer_id, uint64 generation)
{
	BackgroundWorker bgw;
	ConsumerStart cs;
	MemoryContext old;
	bool		ok;

	memset(&bgw, 0, sizeof(bgw));
	bgw.bgw_flags = BGWORKER_SHMEM_ACCESS | BGWORKER_BACKEND_DATABASE_CONNECTION;
	bgw.bgw_start_time = BgWorkerStart_RecoveryFinished;
	bgw.bgw_restart_time = BGW_NEVER_RESTART;
	snprintf(bgw.bgw_library_name, BGW_MAXLEN, "queue");
	snprintf(bgw.bgw_function_name, BGW_MAXLEN, "queue_consumer_main");
	snprintf(bgw.bgw_name, BGW_MAXLEN, "queue consumer " INT64_FORMAT " in database %u",
			 consumer_id, MyDatabaseId);
	snprintf(bgw.bgw_type, BGW_MAXLEN, "queue consumer");
	bgw.bgw_main_arg = Int32GetDatum(slot);
	bgw.bgw_notify_pid = MyProcPid;
	cs.dbid = MyDatabaseId;
	cs.consumer_id = consumer_id;
	cs.generation = generation;
	memcpy(bgw.bgw_extra, &cs, sizeof(cs));

	if (handles[slot] != NULL)
	{
		pfree(handles[slot]);
		handles[slot] = NULL;
	}
	old = MemoryContextSwitchTo(TopMemoryContext);
	ok = RegisterDynamicBackgroundWorker(&bgw, &handles[slot]);
	MemoryContextSwitchTo(old);
	if (ok)
	{
		handle_gen[slot] = generation;
		return true;
	}
	handles[slot] = NULL;
	LWLockAcquire(queue_consumer_shared->lock, LW_EXCLUSIVE);
	if (queue_consumer_shared->slots[slot].generation == generation)
		queue_consumer_shared->slots[slot].dbid = InvalidOid;
	LWLockRelease(queue_consumer_shared->lock);
	return false;				/* the caller says so, once (queue.consumers, log) */
}

/*
 * Fair shares of the cluster's consumer processes (DESIGN.md "Consumers":
 * every consumer with work gets a process before any gets a second,
 * across roles and databases).  Each database's worker says in shared
 * memory how many processes each of its consumers wants (its concurrency,
 * 0 when paused) and refreshes that every pass; entries not refreshed for
 * CONSUMER_FRESH_MS (a database whose worker is gone) count for nothing.
 * Shares are max-min fair: the largest level L with sum(min(wanted, L))
 * <= queue.max_consumer_processes, each consumer gets min(wanted, L), and
 * the processes left over go one each to the consumers wanting more, in
 * (database, consumer id) order, so every worker computes the same
 * shares.  A consumer holding more than its share is told to stop the
 * extra processes after their batch; the newcomer then finds them free.
 * With more consumers than processes, L is 0 and the first ones in that
 * order get one each: the rest wait, and say so.  Lock held exclusive.
 */
#define CONSUMER_FRESH_MS	30000

/* Whether a consumer's counters say it wants processes, said lately. */
static bool
wants_now(const QueueConsumerStat *st, TimestampTz now)
{
	return st->dbid != InvalidOid && st->wanted > 0 &&
		!TimestampDifferenceExceeds(st->wanted_at, now, CONSUMER_FRESH_MS);
}

static void
fair_shares(TimestampTz now)
{
	int			nslots = queue_consumer_shared->nslots;
	int			level = 0;
	int			maxw = 0;
	int			extra;

	/* What this database's consumers want, refreshed. */
	for (int r = 0; r < nrows; r++)
	{
		QueueConsumerStat *st = queue_consumer_stat(MyDatabaseId, rows[r].id, 0);

		if (st == NULL)
			continue;
		st->wanted = rows[r].paused ? 0 : rows[r].concurrency;
		st->wanted_at = now;
	}

	/* The level: raise it while the sum of min(wanted, level) fits. */
	for (int i = 0; i < queue_consumer_shared->nstats; i++)
	{
		QueueConsumerStat *st = &queue_consumer_shared->stats[i];

		if (wants_now(st, now))
			maxw = Max(maxw, st->wanted);
	}
	for (;;)
	{
		int			sum = 0;

		if (level >= maxw)
			break;
		for (int i = 0; i < queue_consumer_shared->nstats; i++)
		{
			QueueConsumerStat *st = &queue_consumer_shared->stats[i];

			if (wants_now(st, now))
				sum += Min(st->wanted, level + 1);
		}
		if (sum > nslots)
			break;
		level++;
	}
	extra = nslots;
	for (int i = 0; i < queue_consumer_shared->nstats; i++)
	{
		QueueConsumerStat *st = &queue_consumer_shared->stats[i];

		if (wants_now(st, now))
			extra -= Min(st->wanted, level);
	}

	/* Each of ours: min(wanted, level), plus one of the extra by rank. */
	for (int r = 0; r < nrows; r++)
	{
		ConsumerRow *row = &rows[r];
		QueueConsumerStat *mine = queue_consumer_stat(MyDatabaseId, row->id, 0);
		int			rank = 0;

		row->allowed = 0;
		if (mine == NULL || mine->wanted == 0)
			continue;			/* paused, or no counters: no process */
		row->allowed = Min(mine->wanted, level);
		if (mine->wanted <= level)
			continue;
		for (int i = 0; i < queue_consumer_shared->nstats; i++)
		{
			QueueConsumerStat *st = &queue_consumer_shared->stats[i];

			if (wants_now(st, now) && st->wanted > level &&
				(st->dbid < MyDatabaseId ||
				 (st->dbid == MyDatabaseId && st->consumer_id < row->id)))
				rank++;
		}
		if (rank < extra)
			row->allowed++;
	}
}

/*
 * Say in the counters why a consumer has no process ("" once it has
 * one); returns whether the log should say so too (once per wait, and
 * only for the lasting reasons).  Lock held exclusive.
 */
static bool
set_waiting(ConsumerRow *row, const char *why, bool lasting)
{
	QueueConsumerStat *st = queue_consumer_stat(MyDatabaseId, row->id, 0);

	if (st == NULL)
		return false;
	strlcpy(st->waiting, why, QUEUE_CONSUMER_WAIT_LEN);
	if (why[0] == '\0')
	{
		st->waiting_logged = false;
		return false;
	}
	if (!lasting || st->waiting_logged)
		return false;
	st->waiting_logged = true;
	return true;
}

/*
 * Tell a slot's process to leave at its batch's end, and note when and
 * why (the first time; a dropped or paused consumer's reason replaces the
 * fair share's, and its grace starts then).  Lock held exclusive.
 */
static void
tell_to_stop(QueueConsumerSlot *s, char why, TimestampTz now)
{
	if (s->stop && (s->stop_why == why || why == QUEUE_CONSUMER_STOP_SHARE ||
					s->stop_why == QUEUE_CONSUMER_STOP_DROPPED))
		return;
	s->stop = true;
	s->stop_why = why;
	s->stop_at = now;
}

/* Why a process was told to stop, in queue.consumers' words. */
static const char *
stop_words(char why)
{
	switch (why)
	{
		case QUEUE_CONSUMER_STOP_PAUSED:
			return "paused";
		case QUEUE_CONSUMER_STOP_SHARE:
			return "over its fair share";
		default:
			return "dropped";
	}
}

/* ms as seconds, for a person: "30 s", "2.5 s". */
static char *
seconds(int64 ms)
{
	if (ms % 1000 == 0)
		return psprintf(INT64_FORMAT " s", ms / 1000);
	return psprintf("%.1f s", (double) ms / 1000.0);
}

/*
 * A consumer process that overstays is ended with SIGTERM, which a handler
 * cannot catch (die(): FATAL at its next interrupt check, where a cancel
 * is an ERROR that PL/pgSQL's EXCEPTION WHEN query_canceled swallows).
 * Its batch rolls back like any other: each message's receive counts
 * (failed.c: the abort at the process's exit settles its entries), and
 * the next pass starts a clean process if one is wanted.  It overstays
 * when:
 *
 *	- its handler call ran CONSUMER_OVERRUN_MARGIN_MS past its
 *	  statement_timeout (the visibility timeout: the batch's lease), which
 *	  it must have swallowed;
 *	- its consumer was dropped or paused: a batch past its receive is
 *	  cancelled at once (a handler that lets the cancel through rolls back
 *	  and the process leaves), and the process terminated
 *	  CONSUMER_STOP_GRACE_MS after that cancel, or at the first rule's
 *	  time if that comes first (the reason given is then the stop's);
 *	- it is over its consumer's fair share: its batch may run for
 *	  CONSUMER_SHARE_GRACE_MS after the stop (a newcomer waits no
 *	  longer, whatever the visibility timeout), or to the first rule's
 *	  time if that comes first;
 *	- told to stop for any reason, it is still there CONSUMER_POLL_MS +
 *	  CONSUMER_STOP_GRACE_MS after the later of the stop and its last
 *	  batch's end, outside a handler (a receive waits at most
 *	  CONSUMER_POLL_MS).
 *
 * The counters say why (last_error); a terminated batch counts as failed.
 * kill() never waits for the process.  Returns when this slot next needs a
 * look (0: only when something changes).  Lock held exclusive.
 */
static TimestampTz
end_overstayers(QueueConsumerSlot *s, TimestampTz now)
{
	char		why[QUEUE_CONSUMER_ERROR_LEN];
	bool		in_handler = s->handler_since != 0;
	bool		dropped_or_paused = s->stop && s->stop_why != QUEUE_CONSUMER_STOP_SHARE;
	TimestampTz overrun_at = 0;
	TimestampTz due = 0;
	QueueConsumerStat *st;

	if (s->pid == 0 || s->terminated)
		return 0;

#define AT(t, ms)	((t) + (int64) (ms) * 1000)
#define DUE(t)		do { if (due == 0 || (t) < due) due = (t); } while (0)
	if (in_handler && s->handler_ms > 0)
		overrun_at = AT(s->handler_since, s->handler_ms + CONSUMER_OVERRUN_MARGIN_MS);

	if (overrun_at != 0 && now >= overrun_at && dropped_or_paused)
		snprintf(why, sizeof(why), "%s: process terminated", stop_words(s->stop_why));
	else if (overrun_at != 0 && now >= overrun_at)
		snprintf(why, sizeof(why),
				 "batch ran past its visibility timeout of %s by %s: process terminated",
				 seconds(s->handler_ms),
				 seconds((now - s->handler_since) / 1000 - s->handler_ms));
	else if (in_handler && dropped_or_paused && s->cancel_at == 0)
	{
		kill(s->pid, SIGINT);	/* polite: the batch rolls back, it leaves */
		s->cancel_at = now;
		due = AT(now, CONSUMER_STOP_GRACE_MS);
		if (overrun_at != 0)
			DUE(overrun_at);
		return due;
	}
	else if ((in_handler && dropped_or_paused && now >= AT(s->cancel_at, CONSUMER_STOP_GRACE_MS)) ||
			 (in_handler && s->stop && !dropped_or_paused &&
			  now >= AT(s->stop_at, CONSUMER_SHARE_GRACE_MS)) ||
			 (!in_handler && s->stop &&
			  now >= AT(Max(s->stop_at, s->idle_since), CONSUMER_POLL_MS + CONSUMER_STOP_GRACE_MS)))
		snprintf(why, sizeof(why), "%s: process terminated", stop_words(s->stop_why));
	else
	{
		/* Not yet: when to look again. */
		if (overrun_at != 0)
			DUE(overrun_at);
		if (in_handler && dropped_or_paused)
			DUE(AT(s->cancel_at, CONSUMER_STOP_GRACE_MS));
		else if (in_handler && s->stop)
			DUE(AT(s->stop_at, CONSUMER_SHARE_GRACE_MS));
		else if (!in_handler && s->stop)
			DUE(AT(Max(s->stop_at, s->idle_since), CONSUMER_POLL_MS + CONSUMER_STOP_GRACE_MS));
		return due;
	}
#undef AT
#undef DUE

	kill(s->pid, SIGTERM);
	s->terminated = true;
	st = queue_consumer_stat(s->dbid, s->consumer_id, 0);
	if (st != NULL)
	{
		if (in_handler)
		{
			st->failed++;
			st->failing = true;
		}
		st->last_error_at = now;
		strlcpy(st->last_error, why, QUEUE_CONSUMER_ERROR_LEN);
	}
	return 0;
}

/*
 * One pass of the database's worker: start the consumer processes that
 * are missing, tell the unwanted ones to leave, end those that overstay.
 * The worker's transaction of each pass has taken in invalidations
 * already.  Returns when the next pass should come at the latest to end
 * a process in time (0: no such time).
 */
TimestampTz
queue_consumers_tend(void)
{
	int			nslots;
	TimestampTz now;
	TimestampTz due = 0;
	TimestampTz next;
	int		   *claimed;
	int64	   *claimed_ids;
	uint64	   *claimed_gen;
	int			nclaimed = 0;

	if (queue_consumer_shared == NULL || queue_consumer_shared->nslots == 0)
		return 0;
	nslots = queue_consumer_shared->nslots;
	if (tend_cxt == NULL)
	{
		HASHCTL		ctl;

		tend_cxt = AllocSetContextCreate(TopMemoryContext, "queue consumers",
										 ALLOCSET_SMALL_SIZES);
		handles = MemoryContextAllocZero(TopMemoryContext,
										 nslots * sizeof(BackgroundWorkerHandle *));
		handle_gen = MemoryContextAllocZero(TopMemoryContext, nslots * sizeof(uint64));
		ctl.keysize = sizeof(int64);
		ctl.entrysize = sizeof(ConsumerStarted);
		started = hash_create("queue consumers started", 64, &ctl, HASH_ELEM | HASH_BLOBS);
		CacheRegisterRelcacheCallback(consumers_inval, (Datum) 0);
	}
	now = GetCurrentTimestamp();
	if (consumers_stale || TimestampDifferenceExceeds(listed_at, now, CONSUMER_LIST_MAX_AGE_MS))
		load_consumers();

	claimed = palloc(nslots * sizeof(int));
	claimed_ids = palloc(nslots * sizeof(int64));
	claimed_gen = palloc(nslots * sizeof(uint64));
	for (int r = 0; r < nrows; r++)
	{
		rows[r].running = 0;
		rows[r].start_failed = false;
	}

	LWLockAcquire(queue_consumer_shared->lock, LW_EXCLUSIVE);
	fair_shares(now);
	for (int i = 0; i < nslots; i++)
	{
		QueueConsumerSlot *s = &queue_consumer_shared->slots[i];
		ConsumerRow *row;
		pid_t		pid;

		if (s->dbid != MyDatabaseId)
			continue;
		/* A process that never came up, or died before its exit hook ran. */
		if (handles[i] != NULL && handle_gen[i] == s->generation &&
			GetBackgroundWorkerPid(handles[i], &pid) == BGWH_STOPPED)
		{
			s->dbid = InvalidOid;
			continue;
		}
		if ((handles[i] == NULL || handle_gen[i] != s->generation) && s->pid == 0 &&
			TimestampDifferenceExceeds(s->claimed_at, now, CONSUMER_START_GRACE_MS))
		{
			s->dbid = InvalidOid;	/* claimed by an earlier worker of ours */
			continue;
		}
		row = find_row(s->consumer_id);
		if (row == NULL || !have_catalog)
			tell_to_stop(s, QUEUE_CONSUMER_STOP_DROPPED, now);
		else if (row->paused)
			tell_to_stop(s, QUEUE_CONSUMER_STOP_PAUSED, now);
		else if (!s->stop)
		{
			/* beyond its fair share (or its concurrency): after this batch */
			if (row->running >= row->allowed)
				tell_to_stop(s, QUEUE_CONSUMER_STOP_SHARE, now);
			else
				row->running++;
		}
		next = end_overstayers(s, now);
		if (next != 0 && (due == 0 || next < due))
			due = next;
	}
	for (int r = 0; r < nrows; r++)
	{
		ConsumerRow *row = &rows[r];
		ConsumerStarted *st;
		bool		found;

		if (row->paused || row->running >= row->allowed || held_back(now))
			continue;
		st = hash_search(started, &row->id, HASH_ENTER, &found);
		if (found && !TimestampDifferenceExceeds(st->at, now, CONSUMER_RESTART_MS))
			continue;
		st->at = now;
		for (int i = 0; i < nslots && row->running < row->concurrency; i++)
		{
			QueueConsumerSlot *s = &queue_consumer_shared->slots[i];

			if (s->dbid != InvalidOid)
				continue;
			s->dbid = MyDatabaseId;
			s->consumer_id = row->id;
			s->generation = ++queue_consumer_shared->generation;
			s->pid = 0;
			s->stop = false;
			s->claimed_at = now;
			s->handler_since = 0;
			s->handler_ms = 0;
			s->idle_since = now;
			s->stop_at = 0;
			s->cancel_at = 0;
			s->stop_why = '\0';
			s->terminated = false;
			claimed[nclaimed] = i;
			claimed_ids[nclaimed] = row->id;
			claimed_gen[nclaimed] = s->generation;
			nclaimed++;
			row->running++;
		}
	}
	LWLockRelease(queue_consumer_shared->lock);

	for (int c = 0; c < nclaimed; c++)
		if (!start_consumer(claimed[c], claimed_ids[c], claimed_gen[c]))
			break;				/* no bgworker slot left: the rest too */
	for (int c = 0; c < nclaimed; c++)
	{
		/* Those after a failure were never started: free them. */
		if (handles[claimed[c]] == NULL || handle_gen[claimed[c]] != claimed_gen[c])
		{
			ConsumerRow *row = find_row(claimed_ids[c]);

			LWLockAcquire(queue_consumer_shared->lock, LW_EXCLUSIVE);
			if (queue_consumer_shared->slots[claimed[c]].generation == claimed_gen[c])
				queue_consumer_shared->slots[claimed[c]].dbid = InvalidOid;
			LWLockRelease(queue_consumer_shared->lock);
			if (row != NULL)
			{
				row->running--;
				row->start_failed = true;
			}
		}
	}

	/*
	 * A consumer without a process says why, in queue.consumers, and once
	 * in the log when the reason lasts (a process being freed for it is
	 * not worth a log line).
	 */
	{
		char	  **logs = palloc(Max(nrows, 1) * sizeof(char *));
		int			nlogs = 0;

		LWLockAcquire(queue_consumer_shared->lock, LW_EXCLUSIVE);
		for (int r = 0; r < nrows; r++)
		{
			ConsumerRow *row = &rows[r];
			char		why[QUEUE_CONSUMER_WAIT_LEN];
			bool		lasting = true;

			if (row->paused || held_back(now) || row->running > 0)
				why[0] = '\0';
			else if (row->start_failed)
				snprintf(why, sizeof(why),
						 "no background worker slot free: raise max_worker_processes (now %d)",
						 max_worker_processes);
			else if (row->allowed == 0)
				snprintf(why, sizeof(why),
						 "all %d consumer processes (queue.max_consumer_processes) serve other consumers",
						 nslots);
			else
			{
				snprintf(why, sizeof(why),
						 "waiting for a consumer process another consumer is giving back");
				lasting = false;
			}
			if (set_waiting(row, why, lasting))
				logs[nlogs++] = psprintf("queue consumer " INT64_FORMAT " in database %u has no process: %s",
										 row->id, MyDatabaseId, why);
		}
		LWLockRelease(queue_consumer_shared->lock);
		for (int i = 0; i < nlogs; i++)
			ereport(LOG, (errmsg_internal("%s", logs[i])));
	}

	/* Forget the start times of dropped consumers. */
	{
		HASH_SEQ_STATUS status;
		ConsumerStarted *st;

		hash_seq_init(&status, started);
		while ((st = hash_seq_search(&status)) != NULL)
			if (find_row(st->id) == NULL)
				hash_search(started, &st->id, HASH_REMOVE, NULL);
	}
	return due;
}
