/*-------------------------------------------------------------------------
 *
 * vacuum.c
 *	  The worker vacuums a queue's tables once they have churned more
 *	  than they hold; while a snapshot holds vacuum back, it recycles
 *	  those that empty and compacts those that do not.
 *
 * A queue rewrites its rows all the time (a receive updates a message, a
 * delete removes it, a FIFO group's row changes with its head), and every
 * change leaves a dead tuple and dead index entries.  They pile up at the
 * front of the very indexes receives walk (visible_at order, group head
 * order), so each receive steps over more of them, until autovacuum comes
 * by: by default a minute later, whatever the queue's pace.  The worker
 * knows the pace from the queue's counters, so it vacuums a queue's message
 * table (and a FIFO queue's group table) when the messages received,
 * deleted, expired or moved since its last vacuum reach both
 * QUEUE_VACUUM_MIN_CHURN and the number of messages the queue holds (or
 * QUEUE_VACUUM_MAX_CHURN, for a deep queue: the dead entries at the front
 * of its indexes matter as much there).  A vacuum reads the table's pages
 * that changed and its indexes, so its cost stays a small share of the work
 * that made it necessary.
 *
 * A vacuum cannot remove what a snapshot can still see: while one
 * transaction holds back the horizon (an idle-in-transaction session, a
 * long report, a standby's feedback), every lease and delete leaves a row
 * version that stays, and the tables grow however often they are vacuumed.
 * So the worker also recycles a queue's table (queue_recycle_if_empty,
 * queue_recycle_shared_if_empty): when the horizon lags and the table has
 * grown past QUEUE_RECYCLE_MIN_BLOCKS, it waits (QUEUE_RECYCLE_TRIES short
 * tries a pass, while the counters say it holds at most
 * QUEUE_RECYCLE_NEAR_EMPTY) for a moment when they say it holds no
 * message, takes the table's exclusive lock without waiting for it
 * (ConditionalLockRelationOid: no sender or receiver ever queues behind
 * the worker), proves under the lock that no row is live, and truncates
 * it: the dead versions and their index entries go at once, whatever the
 * snapshot.  Invariants:
 *	  - Nothing live is ever removed.  Under the exclusive lock no other
 *	    transaction has the table open, so no insert, lease or delete is in
 *	    progress (a prepared transaction keeps its lock too); the check
 *	    reads every block with the latest snapshot, and a single visible
 *	    row stops it.  Only versions that no new snapshot can see go.
 *	  - A snapshot older than the truncation sees the table empty if it
 *	    reads it afterwards, as after any TRUNCATE (the PostgreSQL
 *	    documentation's MVCC caveat): the rows it misses were deleted
 *	    before the truncation, by transactions that committed.
 *	  - User code never runs: a table with any trigger (a user's, or the
 *	    foreign keys' that reference it) is never recycled, and the
 *	    truncation is ExecuteTruncateGuts called directly, not a statement
 *	    (no utility hooks, no event triggers).  It writes no logical
 *	    decoding record: the rows' deletes were decoded already, and a
 *	    decoder of sends sees only sends.  Tables Citus manages are left
 *	    alone.
 *	  - The cost is bounded: the tries take at most
 *	    QUEUE_RECYCLE_BUDGET_US of the worker's every second (given in the
 *	    order the worker visits queues: with more than two busy queues
 *	    under a held snapshot, the later ones may wait; left as it is);
 *	    the check reads at most
 *	    QUEUE_RECYCLE_MAX_BLOCKS under the lock (a larger table is left to
 *	    vacuum); a live row found more than QUEUE_RECYCLE_NEAR_BLOCKS from
 *	    the table's end ends the pass's tries, and one more than
 *	    QUEUE_RECYCLE_FAR_BLOCKS from it (a queue that does not drain, or
 *	    counters that lost count after a restart) stops tries on that
 *	    table for QUEUE_RECYCLE_BACKOFF.
 *	  - While the horizon is current nothing is recycled: vacuum keeps the
 *	    tables small then, and a truncation would only cost the plans kept
 *	    on the table (they are made again after its invalidation).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/heapam.h"
#include "access/htup_details.h"
#include "access/tableam.h"
#include "access/transam.h"
#include "access/xact.h"
#include "catalog/pg_am.h"
#include "catalog/pg_index.h"
#include "commands/cluster.h"
#include "commands/tablecmds.h"
#include "commands/vacuum.h"
#include "miscadmin.h"
#include "nodes/nodeFuncs.h"
#include "utils/builtins.h"
#include "pgstat.h"
#include "storage/predicate.h"
#include "storage/bufmgr.h"
#include "storage/lmgr.h"
#include "storage/procarray.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"
#include "nodes/makefuncs.h"
#include "parser/parse_node.h"
#include "catalog/pg_class.h"
#include "utils/memutils.h"
#include "utils/syscache.h"

#include "common/queue_common.h"
#include "storage/queue_storage.h"
#include "state/queue_state.h"
#include "worker/queue_worker.h"

#define QUEUE_VACUUM_MIN_CHURN	1000
#define QUEUE_VACUUM_MAX_CHURN	10000

#define QUEUE_RECYCLE_MIN_BLOCKS	8	/* 64 kB: below, left to vacuum */
#define QUEUE_RECYCLE_MAX_BLOCKS	16384	/* 128 MB: the most read under the lock */
#define QUEUE_RECYCLE_LAG_XIDS		1000	/* the horizon this far behind */
#define QUEUE_RECYCLE_NEAR_EMPTY	100	/* held by the counters: worth waiting for 0 */
#define QUEUE_RECYCLE_TRIES			25	/* tries a pass, ... */
#define QUEUE_RECYCLE_NAP_US		2000	/* ... this far apart */
#define QUEUE_RECYCLE_NEAR_BLOCKS	64	/* a live row further from the end: no
										 * more tries this pass, ... */
#define QUEUE_RECYCLE_FAR_BLOCKS	1024	/* ... and this far: back off */
#define QUEUE_RECYCLE_BACKOFF		(30 * USECS_PER_SEC)
#define QUEUE_RECYCLE_BUDGET_US		100000	/* of the worker's every second */


/*
 * VACUUM queue_data.<kind><id>, or the shared table of that kind (the
 * tables of every shared queue, vacuumed when they churned together:
 * queue_vacuum_shared_if_churned).
 */
static void
vacuum_table(char kind, int64 queue_id, bool shared, bool fifo)
{
	VacuumStmt *stmt = makeNode(VacuumStmt);
	char	   *relname = shared ?
		pstrdup(queue_shared_table(kind, fifo) + strlen("queue_data.")) :
		psprintf("%c" INT64_FORMAT, kind, queue_id);
	MemoryContext portal;

	/*
	 * Never wait for a lock, and leave the table's length alone: a
	 * truncation would take an exclusive lock on a table that senders and
	 * receivers use all the time, to give back pages they will fill again.
	 * Always clean the indexes: their dead entries are the point, and a
	 * deep queue's few changed pages would otherwise have vacuum skip them.
	 */
	stmt->options = list_make3(makeDefElem("skip_locked", NULL, -1),
							   makeDefElem("truncate", (Node *) makeString("false"), -1),
							   makeDefElem("index_cleanup", (Node *) makeString("on"), -1));
	stmt->rels = list_make1(makeVacuumRelation(makeRangeVar("queue_data", relname, -1),
											   InvalidOid, NIL));
	stmt->is_vacuumcmd = true;

	/* VACUUM keeps its memory under PortalContext, which a worker lacks. */
	portal = AllocSetContextCreate(TopMemoryContext, "queue vacuum",
								   ALLOCSET_DEFAULT_SIZES);
	PortalContext = portal;
	PG_TRY();
	{
		StartTransactionCommand();
		ExecVacuum(make_parsestate(NULL), stmt, true);
		CommitTransactionCommand();
	}
	PG_FINALLY();
	{
		PortalContext = NULL;
		MemoryContextDelete(portal);
	}
	PG_END_TRY();
}

/*
 * The churn of the shared queues since their tables' last vacuum, by
 * table: messages, fifo_messages, groups (a shared queue's own churn would
 * have the whole table, every queue's rows, vacuumed for it alone: a small
 * busy queue beside a deep one would vacuum the deep one's indexes every
 * second).
 */
static int64 shared_churn[3];

/*
 * Once a pass, outside any transaction: vacuum each shared table whose
 * queues together churned as much as it holds (reltuples, as the last
 * vacuum or analyze left it), at least QUEUE_VACUUM_MIN_CHURN and at most
 * QUEUE_VACUUM_MAX_CHURN, the rule of a dedicated queue's table applied to
 * the table.  Errors are the caller's to catch.
 */
void
queue_vacuum_shared_if_churned(void)
{
	static const char *const names[3] = {"messages", "fifo_messages", "groups"};

	for (int t = 0; t < 3; t++)
	{
		float4		rows = 0;
		Oid			relid;

		if (shared_churn[t] < QUEUE_VACUUM_MIN_CHURN)
			continue;
		StartTransactionCommand();
		relid = queue_data_relid(names[t]);
		if (OidIsValid(relid))
		{
			HeapTuple	tup = SearchSysCache1(RELOID, ObjectIdGetDatum(relid));

			if (HeapTupleIsValid(tup))
			{
				rows = ((Form_pg_class) GETSTRUCT(tup))->reltuples;
				ReleaseSysCache(tup);
			}
		}
		CommitTransactionCommand();
		if (!OidIsValid(relid))
		{
			shared_churn[t] = 0;
			continue;
		}
		if (shared_churn[t] < Min(Max(rows, 0), QUEUE_VACUUM_MAX_CHURN))
			continue;
		shared_churn[t] = 0;
		vacuum_table(t == 2 ? 'g' : 'q', 0, true, t == 1);
	}
}

/*
 * Called by the worker for each queue on each pass, outside any
 * transaction.  last and last_g are the churn at the last vacuum of the
 * message table and of the group table (-1: not known yet, so none now);
 * g_blocks is the group table's size in blocks, as last listed.  Errors
 * are the caller's to catch.
 */
void
queue_vacuum_if_churned(int64 queue_id, bool fifo, bool shared, int64 g_blocks,
						int64 *last, int64 *last_g)
{
	int64		c[QC_NUM];
	int64		churn;
	int64		size;
	bool		vacuum_q;
	bool		vacuum_g;

	if (!queue_counters_read(queue_id, c))
		return;					/* no shared memory */

	/* Messages handled so far, and those the queue holds, near enough. */
	churn = c[QC_RECEIVED] + c[QC_DELETED] + c[QC_EXPIRED] + c[QC_DEAD_LETTERED];
	size = Max(c[QC_SENT] - c[QC_DELETED] - c[QC_EXPIRED] - c[QC_DEAD_LETTERED], 0);
	if (*last < 0 || churn < *last || *last_g < 0 || churn < *last_g)
	{
		*last = *last_g = churn;	/* first sight, or counters reset */
		return;
	}

	/*
	 * A shared queue's churn goes to its tables' account: they are
	 * vacuumed for all their queues at the end of the pass.
	 */
	if (shared)
	{
		shared_churn[fifo ? 1 : 0] += churn - *last;
		if (fifo)
			shared_churn[2] += churn - *last;
		*last = *last_g = churn;
		return;
	}
	vacuum_q = churn - *last >= QUEUE_VACUUM_MIN_CHURN &&
		churn - *last >= Min(size, QUEUE_VACUUM_MAX_CHURN);

	/*
	 * A FIFO queue's group table has a row per non-empty group, often far
	 * fewer than messages, and changes with every receive and delete: it
	 * goes by its own size (some 40 rows a block at its fill factor).
	 */
	vacuum_g = fifo && churn - *last_g >= QUEUE_VACUUM_MIN_CHURN &&
		churn - *last_g >= g_blocks * 40;
	if (!vacuum_q && !vacuum_g)
		return;

	if (vacuum_q)
	{
		*last = churn;
		vacuum_table('q', queue_id, false, fifo);
	}
	if (vacuum_g)
	{
		*last_g = churn;
		vacuum_table('g', queue_id, false, fifo);
	}
}


/* What one try to recycle a table found. */
typedef enum RecycleResult
{
	RECYCLE_NOT_DUE,			/* small, the horizon current, or not ours to touch */
	RECYCLE_BUSY,				/* someone has it open, or a row is live near its end */
	RECYCLE_LIVE,				/* a row is live further back: not this pass */
	RECYCLE_LIVE_FAR,			/* ... far back: back off */
	RECYCLE_DONE				/* truncated */
} RecycleResult;

/*
 * Under the table's exclusive lock: truncate it if no row is live.  Reads
 * from the last block back, where a queue's newest rows mostly are, so a
 * queue that is not empty after all costs a few blocks.
 */
static RecycleResult
recycle_locked(Relation rel, BlockNumber nblocks)
{
	Snapshot	snap = RegisterSnapshot(GetLatestSnapshot());
	TableScanDesc scan = table_beginscan_strat(rel, snap, 0, NULL, true, false);
	HeapTuple	tup = heap_getnext(scan, BackwardScanDirection);
	BlockNumber at = tup ? ItemPointerGetBlockNumber(&tup->t_self) : 0;

	table_endscan(scan);
	UnregisterSnapshot(snap);
	if (tup != NULL)
		return nblocks - at > QUEUE_RECYCLE_FAR_BLOCKS ? RECYCLE_LIVE_FAR :
			nblocks - at > QUEUE_RECYCLE_NEAR_BLOCKS ? RECYCLE_LIVE : RECYCLE_BUSY;

	CheckTableNotInUse(rel, "TRUNCATE");
	PushActiveSnapshot(GetTransactionSnapshot());
	ExecuteTruncateGuts(list_make1(rel), list_make1_oid(RelationGetRelid(rel)), NIL,
						DROP_RESTRICT, false);
	PopActiveSnapshot();
	elog(DEBUG1, "queue worker recycled table %s (%u blocks)", RelationGetRelationName(rel),
		 nblocks);
	return RECYCLE_DONE;
}

/*
 * Whether the horizon of rel's rows (NULL: of every database's) lags
 * QUEUE_RECYCLE_LAG_XIDS or more behind the next transaction id: vacuum
 * cannot remove what changed since.
 */
static bool
horizon_lags(Relation rel)
{
	TransactionId horizon = GetOldestNonRemovableTransactionId(rel);
	TransactionId next = XidFromFullTransactionId(ReadNextFullTransactionId());

	return TransactionIdIsNormal(horizon) &&
		(int32) (next - horizon) >= QUEUE_RECYCLE_LAG_XIDS;
}

/*
 * Whether rel may be recycled now: a plain table without triggers that
 * Citus does not manage, of QUEUE_RECYCLE_MIN_BLOCKS to
 * QUEUE_RECYCLE_MAX_BLOCKS, whose dead rows vacuum cannot remove.
 */
static bool
recycle_due(Relation rel, BlockNumber nblocks)
{
	return rel->rd_rel->relkind == RELKIND_RELATION && !rel->rd_rel->relhastriggers &&
		nblocks >= QUEUE_RECYCLE_MIN_BLOCKS && nblocks <= QUEUE_RECYCLE_MAX_BLOCKS &&
		!queue_citus_manages(rel) && horizon_lags(rel);
}

/*
 * One try, a transaction of its own: queue_data.<kind><queue_id>, or the
 * shared table named shared_name.  Without lock, only whether it is due
 * (RECYCLE_BUSY) or not.
 */
static RecycleResult
recycle_try(char kind, int64 queue_id, const char *shared_name, bool lock)
{
	RecycleResult res = RECYCLE_NOT_DUE;
	Oid			relid;
	Relation	rel;

	StartTransactionCommand();
	relid = shared_name ? queue_data_relid(shared_name) : queue_table_relid(queue_id, kind);
	rel = OidIsValid(relid) ? try_relation_open(relid, AccessShareLock) : NULL;
	if (rel != NULL)
	{
		if (recycle_due(rel, RelationGetNumberOfBlocks(rel)))
		{
			res = RECYCLE_BUSY;

			/*
			 * Taking the lock reads the invalidations that came meanwhile,
			 * so rel is current: a trigger made since is seen.
			 */
			if (lock && ConditionalLockRelationOid(relid, AccessExclusiveLock))
			{
				BlockNumber nblocks = RelationGetNumberOfBlocks(rel);

				res = recycle_due(rel, nblocks) ? recycle_locked(rel, nblocks) : RECYCLE_NOT_DUE;
			}
		}
		table_close(rel, NoLock);
	}
	CommitTransactionCommand();
	return res;
}

/*
 * How many messages the queues of ids hold by their counters (sent and
 * moved in, less deleted, expired and dead-lettered), counted up to limit;
 * limit when one's cannot be told (no shared memory, or no counter slot).
 */
static int64
held_upto(const int64 *ids, int n, int64 limit)
{
	int64		held = 0;

	for (int i = 0; i < n && held < limit; i++)
	{
		int64		c[QC_NUM];
		int64		in = queue_arrival_count(ids[i]);

		if (in < 0 || !queue_counters_read(ids[i], c))
			return limit;
		held += Max(in - c[QC_DELETED] - c[QC_EXPIRED] - c[QC_DEAD_LETTERED], 0);
	}
	return Min(held, limit);
}

/*
 * The worker's time for recycling, QUEUE_RECYCLE_BUDGET_US of every
 * second at most, so that many busy queues under a held snapshot do not
 * delay its other work.
 */
typedef struct Budget
{
	TimestampTz since;
	int64		spent;
} Budget;

static Budget recycle_budget;
static Budget compact_budget;	/* a budget of its own: recycling's tries
								 * use theirs up every second while a
								 * snapshot is held */

/*
 * Each second that passed grants QUEUE_RECYCLE_BUDGET_US again: time spent
 * past the budget (a long compaction) is carried over, so it defers what
 * follows.  Whether any is left.
 */
static bool
budget_left(Budget *b, TimestampTz now)
{
	if (now - b->since >= USECS_PER_SEC)
	{
		int64		grant = (now - b->since) / USECS_PER_SEC * QUEUE_RECYCLE_BUDGET_US;

		b->since = now;
		b->spent = Max(b->spent - grant, 0);
	}
	return b->spent < QUEUE_RECYCLE_BUDGET_US;
}

/*
 * The tries of a pass on the tables of kinds (q: messages, g: groups) of
 * the queues ids: while the counters say they hold a few messages (a queue
 * that keeps up, its consumers' leases in flight), wait for them to say
 * nothing, then try each table still due; a queue holding more is not
 * about to empty, and gets no try this pass.  *due: no try before it (the backoff).  Counting
 * the queues of a shared table costs a look at each one's counters, so
 * with many of them one try is made.
 */
static bool
recycle_tables(const int64 *ids, int n, const char *kinds, const char *const *shared_names,
			   TimestampTz *due)
{
	bool		done[2] = {false, false};
	int			ntables = (int) strlen(kinds);
	int			tries = n > 1000 ? 1 : QUEUE_RECYCLE_TRIES;
	TimestampTz start = GetCurrentTimestamp();

	if (n == 0 || *due > start)
		return true;
	if (held_upto(ids, n, QUEUE_RECYCLE_NEAR_EMPTY + 1) > QUEUE_RECYCLE_NEAR_EMPTY)
		return false;
	for (int k = 0; k < ntables; k++)
		done[k] = recycle_try(kinds[k], ids[0], shared_names ? shared_names[k] : NULL,
							  false) == RECYCLE_NOT_DUE;
	if (done[0] && (ntables == 1 || done[1]))
		return true;
	for (int t = 0; t < tries && budget_left(&recycle_budget, start); t++)
	{
		bool		left = false;
		int64		held;
		TimestampTz now;

		if (t > 0)
			pg_usleep(QUEUE_RECYCLE_NAP_US);
		CHECK_FOR_INTERRUPTS();
		held = held_upto(ids, n, QUEUE_RECYCLE_NEAR_EMPTY + 1);
		if (held > QUEUE_RECYCLE_NEAR_EMPTY)
			break;				/* not about to empty: not this pass */
		if (held == 0)
		{
			for (int k = 0; k < ntables; k++)
			{
				RecycleResult r;

				if (done[k])
					continue;
				r = recycle_try(kinds[k], ids[0], shared_names ? shared_names[k] : NULL, true);
				if (r == RECYCLE_LIVE_FAR)
					*due = GetCurrentTimestamp() + QUEUE_RECYCLE_BACKOFF;
				if (r == RECYCLE_LIVE_FAR || r == RECYCLE_LIVE)
					return true;
				if (r == RECYCLE_BUSY)
					left = true;
				else
					done[k] = true;
			}
			if (!left)
				t = tries;		/* all done, or not this pass */
		}
		now = GetCurrentTimestamp();
		recycle_budget.spent += now - start;
		start = now;
	}
	return done[0] && (ntables == 1 || done[1]);
}

/*
 * Dedicated queues visited lately whose tables may yet be recycled: the
 * worker visits a queue when a commit changed it, so the visit that came
 * with its last commits may have found it not quite empty (a consumer's
 * last deletes still running); these get a try on each of the next
 * QUEUE_RECYCLE_PENDING_PASSES passes (queue_recycle_pending_pass).
 */
#define QUEUE_RECYCLE_PENDING		64
#define QUEUE_RECYCLE_PENDING_PASSES 20

typedef struct RecyclePending
{
	int64		queue_id;
	bool		fifo;
	int			passes;			/* passes since its last visit */
	TimestampTz *due;			/* its SweptQueue's recycle_due */
} RecyclePending;

static RecyclePending pending[QUEUE_RECYCLE_PENDING];
static int	npending;

static void
pending_set(int64 queue_id, bool fifo, TimestampTz *due, bool keep)
{
	int			i;

	for (i = 0; i < npending && pending[i].queue_id != queue_id; i++)
		;
	if (!keep)
	{
		if (i < npending)
			pending[i] = pending[--npending];
		return;
	}
	if (i == npending)
	{
		if (npending == QUEUE_RECYCLE_PENDING)
			return;				/* full: its next visit tries again */
		npending++;
	}
	pending[i].queue_id = queue_id;
	pending[i].fifo = fifo;
	pending[i].passes = 0;
	pending[i].due = due;
}

/*
 * Called by the worker for a dedicated queue it visits, outside any
 * transaction: recycle its message table (and a FIFO queue's group table)
 * when they are due.  due points into the queue's sweep state, which lives
 * as long as the queue is listed.  Errors are the caller's to catch.
 */
void
queue_recycle_if_empty(int64 queue_id, bool fifo, TimestampTz *due)
{
	pending_set(queue_id, fifo, due,
				!recycle_tables(&queue_id, 1, fifo ? "qg" : "q", NULL, due));
}

/*
 * Once a pass, outside any transaction: the pending queues' tries, those
 * the pass did not visit (a visit set passes to 0).  Errors are the
 * caller's to catch.
 */
void
queue_recycle_pending_pass(void)
{
	for (int i = npending - 1; i >= 0; i--)
	{
		RecyclePending *p = &pending[i];

		if (p->passes++ == 0)
			continue;			/* visited this pass */
		if (p->passes > QUEUE_RECYCLE_PENDING_PASSES ||
			recycle_tables(&p->queue_id, 1, p->fifo ? "qg" : "q", NULL, p->due))
			pending[i] = pending[--npending];
	}
}

/* A queue the worker forgets (dropped): no more tries. */
void
queue_recycle_forget(int64 queue_id)
{
	pending_set(queue_id, false, NULL, false);
}

/*
 * Once a pass, outside any transaction: recycle the shared tables of one
 * kind (standard: messages; FIFO: fifo_messages and groups) when every
 * shared queue of that kind (ids) holds nothing.  Errors are the caller's
 * to catch.
 */
void
queue_recycle_shared_if_empty(const int64 *ids, int n, bool fifo)
{
	static const char *const std_names[1] = {"messages"};
	static const char *const fifo_names[2] = {"fifo_messages", "groups"};
	static TimestampTz due[2];

	recycle_tables(ids, n, fifo ? "qg" : "q", fifo ? fifo_names : std_names, &due[fifo ? 1 : 0]);
}


/*
 * Compaction: while the horizon lags, a table that holds live rows (a
 * queue with a backlog, the deduplication ids of a window, the receive
 * attempts) never empties, so recycling never comes; its dead versions
 * pile up as they do without it.  Once a table's dead rows (by the
 * cumulative statistics, since its last vacuum or compaction) reach both
 * QUEUE_COMPACT_MIN_DEAD and half its live rows, the worker takes its
 * exclusive lock without waiting for it and rewrites it as VACUUM FULL
 * does, but keeping only the versions the latest snapshot can see: under
 * the lock no transaction that changed the table is in progress, so every
 * version a committed transaction deleted or replaced goes, whatever the
 * held snapshot.  The table keeps its OID and its indexes' (they are
 * rebuilt), rows keep their inserting transaction, and the statistics
 * record it as a vacuum.  Invariants, besides recycling's (nothing live
 * removed; an older snapshot that reads the table afterwards misses the
 * versions deleted before, as after a table rewrite: the PostgreSQL
 * documentation's MVCC caveat; no logical decoding record; Citus's
 * tables left alone):
 *	  - User code never runs: a table with any trigger or rule, an index
 *	    whose operator classes, expressions or predicate are not all
 *	    PostgreSQL's own, or not of the heap access method, is never
 *	    compacted (checked again under the lock, which CREATE TRIGGER and
 *	    CREATE INDEX cannot pass); no constraint is checked
 *	    and no default evaluated (rows are copied, not made); the rebuilt
 *	    indexes are built as their table's owner (PostgreSQL's own rule).
 *	  - The cost is bounded: a table of more than QUEUE_RECYCLE_MAX_BLOCKS
 *	    or QUEUE_COMPACT_MAX_LIVE live rows is left to vacuum; the queue's
 *	    senders and receivers wait for the rewrite (2 to 3 ms per
 *	    thousand live rows here: 151,000 deduplication ids took 435 ms);
 *	    its time is taken from
 *	    a budget of QUEUE_RECYCLE_BUDGET_US a second (recycling has one of
 *	    its own), carried over: one long rewrite defers the next ones.  A
 *	    table is compacted when its dead rows reach half its live ones, so
 *	    it stays within 1.5 times its live rows (and
 *	    QUEUE_COMPACT_MIN_DEAD), and the work is one copy of each live row
 *	    per half a live row's worth of changes.  The lock is tried
 *	    QUEUE_COMPACT_TRIES times QUEUE_RECYCLE_NAP_US apart (50 ms at
 *	    most, from the same budget): a table that every send and receive
 *	    of many queues opens is rarely free at one given moment (the
 *	    10-minute bench's shared group table, tried once a pass, was never
 *	    compacted and grew to 17.7 MB for 510 rows); meanwhile the worker
 *	    holds the table's share lock, which delays a statement that needs
 *	    its exclusive one (a queue's drop) by as much at most.
 */
#define QUEUE_COMPACT_MIN_DEAD		10000
#define QUEUE_COMPACT_MAX_LIVE		300000
#define QUEUE_COMPACT_TRIES			25	/* at the lock, QUEUE_RECYCLE_NAP_US apart */

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

/*
 * Under relid's exclusive lock (rel closed, the lock kept): rewrite it
 * with the versions the latest snapshot sees, as cluster.c's VACUUM FULL
 * does with its horizon.
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
	 * Every transaction that changed the table has ended (the lock), so
	 * the next transaction id is a horizon that keeps exactly what the
	 * latest snapshot sees.  Freeze nothing: the cut-offs are the table's
	 * own, so rows keep the transaction that inserted them and a snapshot
	 * older than that still does not see them.  Toasted values are copied
	 * into the new table's toast table (it gets no pointer to the old
	 * one's), which goes with the old table.
	 */
	oldest = XidFromFullTransactionId(ReadNextFullTransactionId());
	table_relation_copy_for_cluster(rel, newrel, NULL, false, oldest, &frozen, &minmulti,
									&kept, &removed, &recent);
	table_close(newrel, NoLock);
	table_close(rel, NoLock);
	finish_heap_swap(relid, newrelid, false, false, false, true, frozen, minmulti, persistence);
	PopActiveSnapshot();
	pgstat_report_vacuum(relid, false, (PgStat_Counter) kept, 0);
	elog(DEBUG1, "queue worker compacted table %u: %.0f rows kept, %.0f removed, %.1f ms",
		 relid, kept, removed, (GetCurrentTimestamp() - start) / 1000.0);
}

/* One try at relid, in the caller's transaction. */
static void
compact_try(Oid relid)
{
	Relation	rel = try_relation_open(relid, AccessShareLock);
	PgStat_StatTabEntry *st;
	BlockNumber nblocks;

	if (rel == NULL)
		return;
	nblocks = RelationGetNumberOfBlocks(rel);
	st = pgstat_fetch_stat_tabentry(relid);
	if (st == NULL || nblocks < QUEUE_RECYCLE_MIN_BLOCKS || nblocks > QUEUE_RECYCLE_MAX_BLOCKS ||
		st->n_dead_tuples < QUEUE_COMPACT_MIN_DEAD || st->n_dead_tuples < st->n_live_tuples / 2 ||
		st->n_live_tuples > QUEUE_COMPACT_MAX_LIVE || !horizon_lags(rel) || !compact_safe(rel))
	{
		elog(DEBUG2, "queue worker left table %s: %u blocks, dead %lld, live %lld",
			 RelationGetRelationName(rel), nblocks,
			 st ? (long long) st->n_dead_tuples : -1LL, st ? (long long) st->n_live_tuples : -1LL);
		table_close(rel, AccessShareLock);
		return;
	}

	/*
	 * A busy table's lock is free only between its statements (the shared
	 * group table of FIFO queues is opened by every send, receive and
	 * delete of each of them), so try it a few times a little apart.
	 * Taking the lock reads the invalidations that came meanwhile, so rel
	 * is current when it is checked again.
	 */
	for (int t = 0; !ConditionalLockRelationOid(relid, AccessExclusiveLock); t++)
	{
		if (t + 1 >= QUEUE_COMPACT_TRIES)
		{
			elog(DEBUG2, "queue worker left table %s: its lock was taken",
				 RelationGetRelationName(rel));
			table_close(rel, AccessShareLock);
			return;
		}
		pg_usleep(QUEUE_RECYCLE_NAP_US);
		CHECK_FOR_INTERRUPTS();
	}
	if (!compact_safe(rel) || RelationGetNumberOfBlocks(rel) > QUEUE_RECYCLE_MAX_BLOCKS)
	{
		table_close(rel, AccessShareLock);
		return;
	}
	table_close(rel, NoLock);
	compact_locked(relid);
}

/*
 * Try each table of relids (InvalidOid: none), each in a transaction of
 * its own, while the budget lasts.
 */
static void
compact_tables(const Oid *relids, int n)
{
	for (int i = 0; i < n; i++)
	{
		TimestampTz start = GetCurrentTimestamp();

		if (!budget_left(&compact_budget, start))
		{
			elog(DEBUG2, "queue worker compaction budget spent");
			return;
		}
		if (!OidIsValid(relids[i]))
			continue;
		/* a failed rewrite (say, no disk left) costs its time too */
		PG_TRY();
		{
			StartTransactionCommand();
			compact_try(relids[i]);
			CommitTransactionCommand();
		}
		PG_FINALLY();
		{
			compact_budget.spent += GetCurrentTimestamp() - start;
		}
		PG_END_TRY();
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
		lags = horizon_lags(NULL);
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
