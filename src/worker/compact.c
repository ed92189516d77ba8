/*-------------------------------------------------------------------------
 *
 * compact.c
 *	  While an open transaction id holds vacuum back, the worker rewrites a
 *	  queue table that does not empty, keeping only the versions a new
 *	  snapshot sees.
 *
 * While the horizon lags, a table that holds live rows (a queue with a
 * backlog, the deduplication ids of a window, the receive attempts) never
 * empties, so recycling (vacuum.c) never comes; its dead versions pile up.
 * Once a table's dead rows (by the cumulative statistics, since its last
 * vacuum or compaction) reach both QUEUE_COMPACT_MIN_DEAD and half its live
 * rows, the worker takes its exclusive lock without waiting for it and,
 * at a moment when no snapshot could see what goes (horizon.c's rule,
 * checked under the lock), rewrites it as VACUUM FULL does, but keeping
 * only the versions the latest snapshot can see: under the lock no
 * transaction that changed the table is in progress, and no snapshot
 * exists that was taken before their commits, so every version a committed
 * transaction deleted or replaced goes.  The table keeps its OID and its
 * indexes' (they are rebuilt), rows keep their inserting transaction, and
 * the statistics record it as a vacuum.  Invariants:
 *	  - No snapshot, old or new, here or on a standby, ever sees the table
 *	    otherwise than it would without the rewrite (horizon.c): a
 *	    REPEATABLE READ reader, an exported snapshot, a slot's initial copy
 *	    or a connected standby make the worker fall back to plain vacuum.
 *	  - Nothing live is removed; no logical decoding record; Citus's
 *	    tables left alone.
 *	  - User code never runs: a table with any trigger or rule, an index
 *	    whose operator classes, expressions or predicate are not all
 *	    PostgreSQL's own, or not of the heap access method, is never
 *	    compacted (checked again under the lock, which CREATE TRIGGER and
 *	    CREATE INDEX cannot pass); no constraint is checked and no default
 *	    evaluated (rows are copied, not made); the rebuilt indexes are
 *	    built as their table's owner (PostgreSQL's own rule).
 *	  - The lock is held QUEUE_COMPACT_LOCK_MS at most, whatever the
 *	    table: a table whose heap, TOAST and indexes together pass
 *	    QUEUE_COMPACT_MAX_BYTES, or of more than QUEUE_COMPACT_MAX_LIVE live
 *	    rows, is left to vacuum; a rewrite that runs past the bound anyway
 *	    (a slow disk, large bodies) is cancelled by a timer, rolled back
 *	    (the new files go with the transaction) and the table left alone
 *	    for QUEUE_COMPACT_BACKOFF.  The queue's senders and receivers wait
 *	    for the rewrite, so that bound is what they may wait.
 *	  - Its time is taken from a budget of QUEUE_RECYCLE_BUDGET_US a second
 *	    (recycling has one of its own), carried over: one long rewrite
 *	    defers the next ones.  A table is compacted when its dead rows
 *	    reach half its live ones, so it stays within 1.5 times its live rows
 *	    (and QUEUE_COMPACT_MIN_DEAD).  The lock is tried QUEUE_COMPACT_TRIES
 *	    times QUEUE_RECYCLE_NAP_US apart (50 ms at most, from the same
 *	    budget): a table that every send and receive of many queues opens is
 *	    rarely free at one given moment; meanwhile the worker holds the
 *	    table's share lock, which delays a statement that needs its
 *	    exclusive one (a queue's drop) by as much at most.
 *
 * May call: horizon.c, storage/, common/.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/heapam.h"
#include "access/tableam.h"
#include "access/transam.h"
#include "access/xact.h"
#include "catalog/pg_am.h"
#include "catalog/pg_index.h"
#include "commands/tablecmds.h"
#include "miscadmin.h"
#include "nodes/nodeFuncs.h"
#include "pgstat.h"
#include "storage/bufmgr.h"
#include "storage/lmgr.h"
#include "storage/predicate.h"
#include "utils/builtins.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"
#include "utils/syscache.h"
#include "utils/timeout.h"
#include "utils/timestamp.h"

#include "common/queue_common.h"
#include "storage/queue_storage.h"
#include "worker/queue_worker.h"

/* make_new_heap, finish_heap_swap: their header by version (compat.h) */
#include QUEUE_HEAP_REWRITE_H

#define QUEUE_COMPACT_MIN_DEAD		10000
#define QUEUE_COMPACT_MAX_LIVE		75000	/* some 250 ms of copying at 2-3 ms a thousand */
#define QUEUE_COMPACT_MAX_BYTES		(48 * 1024 * 1024)	/* heap + TOAST + indexes */
#define QUEUE_COMPACT_TRIES			25	/* at the lock, QUEUE_RECYCLE_NAP_US apart */
#define QUEUE_COMPACT_BACKOFF		(300 * USECS_PER_SEC)	/* after a rewrite cut short */
#define QUEUE_COMPACT_BACKOFFS		32	/* tables remembered so */

static QueueBudget compact_budget;

/* Tables whose rewrite was cut short, left alone until then. */
static struct
{
	Oid			relid;
	TimestampTz until;
} backoffs[QUEUE_COMPACT_BACKOFFS];

static bool
backed_off(Oid relid, TimestampTz now)
{
	for (int i = 0; i < QUEUE_COMPACT_BACKOFFS; i++)
		if (backoffs[i].relid == relid && backoffs[i].until > now)
			return true;
	return false;
}

static void
back_off(Oid relid, TimestampTz now)
{
	int			slot = 0;

	for (int i = 0; i < QUEUE_COMPACT_BACKOFFS; i++)
		if (backoffs[i].relid == relid || backoffs[i].until < backoffs[slot].until)
		{
			slot = i;
			if (backoffs[i].relid == relid)
				break;
		}
	backoffs[slot].relid = relid;
	backoffs[slot].until = now + QUEUE_COMPACT_BACKOFF;
}

/* The timer that ends a rewrite past QUEUE_COMPACT_LOCK_MS: a cancel. */
static volatile sig_atomic_t timed_out = false;
static TimeoutId compact_timeout = MAX_TIMEOUTS;

static void
compact_timeout_handler(void)
{
	timed_out = true;
	QueryCancelPending = true;
	InterruptPending = true;
	SetLatch(MyLatch);
}

/* A function of the database's, not PostgreSQL's own. */
static bool
user_function(Oid func_id, void *context)
{
	return func_id >= FirstNormalObjectId;
}

static bool
user_function_walker(Node *node, void *context)
{
	if (node == NULL)
		return false;
	if (check_functions_in_node(node, user_function, context))
		return true;
	return expression_tree_walker(node, user_function_walker, context);
}

/* Whether an index's expressions or predicate (a pg_index column) call one. */
static bool
index_calls_user_code(HeapTuple tup, AttrNumber attnum)
{
	bool		isnull;
	Datum		d = SysCacheGetAttr(INDEXRELID, tup, attnum, &isnull);

	return !isnull && user_function_walker(stringToNode(TextDatumGetCString(d)), NULL);
}

/*
 * Whether rel may be rewritten without running anything but PostgreSQL's
 * own code: a plain heap table without triggers or rules, not Citus's,
 * whose indexes use PostgreSQL's own operator classes and whose
 * expressions and predicates (the fair queues' index has one: IS NOT
 * NULL) call only PostgreSQL's own functions and operators.
 */
static bool
compact_safe(Relation rel)
{
	List	   *indexes;
	ListCell   *lc;
	bool		safe = true;

	if (rel->rd_rel->relkind != RELKIND_RELATION || rel->rd_rel->relam != HEAP_TABLE_AM_OID ||
		rel->rd_rel->relhastriggers || rel->rd_rel->relhasrules || queue_citus_manages(rel))
		return false;
	indexes = RelationGetIndexList(rel);
	foreach(lc, indexes)
	{
		HeapTuple	tup = SearchSysCache1(INDEXRELID, ObjectIdGetDatum(lfirst_oid(lc)));
		bool		isnull;
		oidvector  *classes;

		if (!HeapTupleIsValid(tup))
		{
			safe = false;
			break;
		}
		classes = (oidvector *) DatumGetPointer(SysCacheGetAttr(INDEXRELID, tup,
																 Anum_pg_index_indclass, &isnull));
		for (int k = 0; !isnull && k < classes->dim1; k++)
			if (classes->values[k] >= FirstNormalObjectId)
				safe = false;
		if (isnull || index_calls_user_code(tup, Anum_pg_index_indexprs) ||
			index_calls_user_code(tup, Anum_pg_index_indpred))
			safe = false;
		ReleaseSysCache(tup);
		if (!safe)
			break;
	}
	list_free(indexes);
	return safe;
}

/* Blocks of a relation by OID (InvalidOid: none), under a share lock. */
static int64
rel_blocks(Oid relid)
{
	Relation	r;
	int64		n;

	if (!OidIsValid(relid) || (r = try_relation_open(relid, AccessShareLock)) == NULL)
		return 0;
	n = RelationGetNumberOfBlocks(r);
	relation_close(r, AccessShareLock);
	return n;
}

/*
 * What a rewrite of rel copies or rebuilds, in bytes: its heap, its TOAST
 * table and that table's index, and its indexes.
 */
static int64
compact_bytes(Relation rel)
{
	int64		blocks = RelationGetNumberOfBlocks(rel);
	List	   *indexes = RelationGetIndexList(rel);
	ListCell   *lc;
	Oid			toast = rel->rd_rel->reltoastrelid;

	if (OidIsValid(toast))
	{
		Relation	t = try_relation_open(toast, AccessShareLock);

		if (t != NULL)
		{
			List	   *tindexes = RelationGetIndexList(t);
			ListCell   *tl;

			blocks += RelationGetNumberOfBlocks(t);
			foreach(tl, tindexes)
				blocks += rel_blocks(lfirst_oid(tl));
			list_free(tindexes);
			relation_close(t, AccessShareLock);
		}
	}
	foreach(lc, indexes)
		blocks += rel_blocks(lfirst_oid(lc));
	list_free(indexes);
	return blocks * BLCKSZ;
}

/*
 * Under relid's exclusive lock (rel closed, the lock kept), no snapshot
 * able to see a removed version: rewrite it with the versions the latest
 * snapshot sees, as cluster.c's VACUUM FULL does with its horizon.
 */
static void
compact_locked(Oid relid)
{
	Relation	rel = table_open(relid, AccessExclusiveLock);
	Oid			tablespace = rel->rd_rel->reltablespace;
	char		persistence = rel->rd_rel->relpersistence;
	TransactionId frozen = rel->rd_rel->relfrozenxid;
	MultiXactId minmulti = rel->rd_rel->relminmxid;
	TransactionId oldest;
	Oid			newrelid;
	Relation	newrel;
	double		kept = 0;
	double		removed = 0;
	double		recent = 0;
	TimestampTz start = GetCurrentTimestamp();

	CheckTableNotInUse(rel, "VACUUM");
	TransferPredicateLocksToHeapRelation(rel);

	/*
	 * A snapshot, as a utility statement has: a parallel index build takes
	 * the transaction's (and may not take the first one in parallel mode).
	 */
	PushActiveSnapshot(GetTransactionSnapshot());
	newrelid = make_new_heap(relid, tablespace, rel->rd_rel->relam, persistence,
							 AccessExclusiveLock);
	newrel = table_open(newrelid, AccessExclusiveLock);
	if (OidIsValid(rel->rd_rel->reltoastrelid))
		LockRelationOid(rel->rd_rel->reltoastrelid, AccessExclusiveLock);

	/*
	 * Every transaction that changed the table has ended (the lock), and no
	 * snapshot taken before they did exists (horizon.c), so the next
	 * transaction id is a horizon that keeps exactly what the latest
	 * snapshot sees.  Freeze nothing: the cut-offs are the table's own, so
	 * rows keep the transaction that inserted them.  Toasted values are
	 * copied into the new table's toast table (it gets no pointer to the
	 * old one's), which goes with the old table.
	 */
	oldest = XidFromFullTransactionId(ReadNextFullTransactionId());
	queue_copy_for_cluster(rel, newrel, oldest, &frozen, &minmulti, &kept, &removed, &recent);
	table_close(newrel, NoLock);
	table_close(rel, NoLock);
	queue_finish_heap_swap(relid, newrelid, frozen, minmulti, persistence);
	PopActiveSnapshot();
	queue_pgstat_report_vacuum(relid, false, (PgStat_Counter) kept, start);
	elog(DEBUG1, "queue worker compacted table %u: %.0f rows kept, %.0f removed, %.1f ms",
		 relid, kept, removed, (GetCurrentTimestamp() - start) / 1000.0);
}

/* Why rel is not due (for DEBUG2), or NULL. */
static const char *
compact_not_due(Relation rel, BlockNumber nblocks)
{
	PgStat_StatTabEntry *st = pgstat_fetch_stat_tabentry(RelationGetRelid(rel));
	int64		dead;
	int64		live;

	if (st == NULL)
		return "no statistics";
	dead = QUEUE_STAT_DEAD(st);
	live = QUEUE_STAT_LIVE(st);
	if (nblocks < QUEUE_RECYCLE_MIN_BLOCKS || dead < QUEUE_COMPACT_MIN_DEAD || dead < live / 2)
		return "below the rule";
	if (live > QUEUE_COMPACT_MAX_LIVE || nblocks > QUEUE_RECYCLE_MAX_BLOCKS ||
		compact_bytes(rel) > QUEUE_COMPACT_MAX_BYTES)
		return "too large to rewrite within the lock's bound";
	if (!queue_horizon_lags(rel))
		return "the horizon is current";
	if (!compact_safe(rel))
		return "a trigger, rule or index of user code";
	return NULL;
}

/* One try at relid, in the caller's transaction. */
static void
compact_try(Oid relid)
{
	Relation	rel = try_relation_open(relid, AccessShareLock);
	const char *why;
	bool		transient = false;
	int			t;

	if (rel == NULL)
		return;
	if ((why = compact_not_due(rel, RelationGetNumberOfBlocks(rel))) != NULL)
	{
		elog(DEBUG2, "queue worker left table %s: %s", RelationGetRelationName(rel), why);
		table_close(rel, AccessShareLock);
		return;
	}

	/*
	 * A busy table's lock is free only between its statements (the shared
	 * group table of FIFO queues is opened by every send, receive and
	 * delete of each of them), so try it a few times a little apart; and
	 * a moment when no backend holds a snapshot (its statements' come and
	 * go) may take a few tries too: the rule is read before the lock is
	 * tried (no lock taken, and logged for standbys, while it cannot hold)
	 * and again under it, where what it says is what holds.  A reason that
	 * does not pass in a moment (a standby, a slot, an export) ends the
	 * tries.  Taking the lock reads the invalidations that came meanwhile,
	 * so rel is current when it is checked again.
	 */
	for (t = 0; t < QUEUE_COMPACT_TRIES; t++)
	{
		if (t > 0)
		{
			pg_usleep(QUEUE_RECYCLE_NAP_US);
			CHECK_FOR_INTERRUPTS();
		}
		if ((why = queue_snapshots_unsafe(&transient)) != NULL)
		{
			if (!transient)
				t = QUEUE_COMPACT_TRIES;
			continue;
		}
		if (!ConditionalLockRelationOid(relid, AccessExclusiveLock))
		{
			why = "its lock was taken";
			continue;
		}
		if ((why = queue_snapshots_unsafe(&transient)) == NULL)
			break;
		UnlockRelationOid(relid, AccessExclusiveLock);
		if (!transient)
			t = QUEUE_COMPACT_TRIES;
	}
	if (t >= QUEUE_COMPACT_TRIES)
	{
		elog(DEBUG2, "queue worker left table %s: %s", RelationGetRelationName(rel), why);
		table_close(rel, AccessShareLock);
		return;
	}
	if (!compact_safe(rel) || RelationGetNumberOfBlocks(rel) > QUEUE_RECYCLE_MAX_BLOCKS)
	{
		table_close(rel, AccessShareLock);
		return;
	}
	table_close(rel, NoLock);

	/* The lock's bound: a timer cancels the rewrite past it. */
	timed_out = false;
	if (compact_timeout == MAX_TIMEOUTS)
		compact_timeout = RegisterTimeout(USER_TIMEOUT, compact_timeout_handler);
	enable_timeout_after(compact_timeout, QUEUE_COMPACT_LOCK_MS);
	compact_locked(relid);
	disable_timeout(compact_timeout, false);
	if (timed_out)
	{
		/* it went off after the rewrite was done: nothing to cancel */
		timed_out = false;
		QueryCancelPending = false;
	}
}

/*
 * Try each table of relids (InvalidOid: none), each in a transaction of
 * its own, while the budget lasts.  A rewrite cut short by its bound is
 * rolled back and its table left alone for QUEUE_COMPACT_BACKOFF; other
 * errors are the caller's.
 */
static void
compact_tables(const Oid *relids, int n)
{
	MemoryContext cxt = CurrentMemoryContext;

	for (int i = 0; i < n; i++)
	{
		TimestampTz start = GetCurrentTimestamp();

		if (!queue_budget_left(&compact_budget, start))
		{
			elog(DEBUG2, "queue worker compaction budget spent");
			return;
		}
		if (!OidIsValid(relids[i]) || backed_off(relids[i], start))
			continue;
		/* a failed rewrite (say, no disk left) costs its time too */
		PG_TRY();
		{
			StartTransactionCommand();
			compact_try(relids[i]);
			CommitTransactionCommand();
		}
		PG_CATCH();
		{
			compact_budget.spent += GetCurrentTimestamp() - start;
			if (compact_timeout != MAX_TIMEOUTS)
				disable_timeout(compact_timeout, false);
			if (!timed_out)
				PG_RE_THROW();
			timed_out = false;
			QueryCancelPending = false;
			MemoryContextSwitchTo(cxt);
			FlushErrorState();
			AbortCurrentTransaction();
			MemoryContextSwitchTo(cxt);
			back_off(relids[i], GetCurrentTimestamp());
			ereport(LOG,
					(errmsg("queue worker left table %u to vacuum: its rewrite passed %d ms "
							"and was rolled back", relids[i], QUEUE_COMPACT_LOCK_MS)));
			continue;
		}
		PG_END_TRY();
		compact_budget.spent += GetCurrentTimestamp() - start;
		CHECK_FOR_INTERRUPTS();
	}
}

/*
 * Whether the horizon lags at all (the shared one, which no table's is
 * ahead of), looked at once every 100 ms at most, before any table is
 * opened: while it is current, compaction costs a visited queue that.
 */
static bool
any_horizon_lags(void)
{
	static TimestampTz looked_at;
	static bool lags;
	TimestampTz now = GetCurrentTimestamp();

	if (now - looked_at >= 100 * 1000 || now < looked_at)
	{
		lags = queue_storage_maintenance != QUEUE_MAINTENANCE_OFF && queue_horizon_lags(NULL);
		looked_at = now;
	}
	return lags;
}

/*
 * Called by the worker for a dedicated queue it visits, outside any
 * transaction: compact its tables that are due (above).  Errors are the
 * caller's to catch.
 */
void
queue_compact_if_dead(int64 queue_id, bool fifo)
{
	static const char kinds[4] = {'q', 'g', 'd', 'a'};
	Oid			relids[4];
	int			n = 0;

	if (!any_horizon_lags())
		return;
	StartTransactionCommand();
	for (int k = 0; k < 4; k++)
		if (fifo || kinds[k] != 'g')
			relids[n++] = queue_table_relid(queue_id, kinds[k]);
	CommitTransactionCommand();
	compact_tables(relids, n);
}

/*
 * Once a pass, outside any transaction: compact the shared tables that are
 * due.  Errors are the caller's to catch.
 */
void
queue_compact_shared_if_dead(void)
{
	static const char *const names[5] = {"messages", "fifo_messages", "groups", "dedup_ids",
	"receive_attempts"};
	Oid			relids[5];

	if (!any_horizon_lags())
		return;
	StartTransactionCommand();
	for (int t = 0; t < 5; t++)
		relids[t] = queue_data_relid(names[t]);
	CommitTransactionCommand();
	compact_tables(relids, 5);
}
