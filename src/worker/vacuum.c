/*-------------------------------------------------------------------------
 *
 * vacuum.c
 *	  The worker vacuums a queue's tables once they have churned more
 *	  than they hold; while a transaction holds vacuum back, it recycles
 *	  those that empty (compact.c rewrites those that do not).
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
 * the worker), proves under the lock that no row is live and that no
 * snapshot could see the rows that go (horizon.c's rule, read before the
 * lock is tried and again under it), and truncates it: the dead versions
 * and their index entries go at once.  Invariants:
 *	  - Nothing live is ever removed.  Under the exclusive lock no other
 *	    transaction has the table open, so no insert, lease or delete is in
 *	    progress (a prepared transaction keeps its lock too); the check
 *	    reads every block with the latest snapshot, and a single visible
 *	    row stops it.  Only versions that no new snapshot can see go.
 *	  - No snapshot older than the truncation exists, here, exported or on
 *	    a standby (horizon.c): a REPEATABLE READ reader, a pg_dump
 *	    --snapshot, a slot's initial copy or a connected standby leave the
 *	    table to plain vacuum, so none ever sees it emptied.
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
#include "commands/tablecmds.h"
#include "commands/vacuum.h"
#include "miscadmin.h"
#include "storage/bufmgr.h"
#include "storage/lmgr.h"
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

#define QUEUE_RECYCLE_NEAR_EMPTY	100	/* held by the counters: worth waiting for 0 */
#define QUEUE_RECYCLE_TRIES			25	/* tries a pass, QUEUE_RECYCLE_NAP_US apart */
#define QUEUE_RECYCLE_NEAR_BLOCKS	64	/* a live row further from the end: no
										 * more tries this pass, ... */
#define QUEUE_RECYCLE_FAR_BLOCKS	1024	/* ... and this far: back off */
#define QUEUE_RECYCLE_BACKOFF		(30 * USECS_PER_SEC)


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
	queue_truncate_guts(list_make1(rel), list_make1_oid(RelationGetRelid(rel)));
	PopActiveSnapshot();
	elog(DEBUG1, "queue worker recycled table %s (%u blocks)", RelationGetRelationName(rel),
		 nblocks);
	return RECYCLE_DONE;
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
		!queue_citus_manages(rel) && queue_horizon_lags(rel);
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
		bool		transient;
		const char *why;

		if (recycle_due(rel, RelationGetNumberOfBlocks(rel)))
		{
			/*
			 * Only while no snapshot could see the rows that go (horizon.c);
			 * a backend's may be a statement's, gone in a moment: busy.
			 */
			why = queue_snapshots_unsafe(&transient);
			res = why == NULL || transient ? RECYCLE_BUSY : RECYCLE_NOT_DUE;

			/*
			 * Taking the lock reads the invalidations that came meanwhile,
			 * so rel is current: a trigger made since is seen.  The rule is
			 * read again under it: what it says then is what holds.
			 */
			if (lock && why == NULL && ConditionalLockRelationOid(relid, AccessExclusiveLock))
			{
				BlockNumber nblocks = RelationGetNumberOfBlocks(rel);

				if ((why = queue_snapshots_unsafe(&transient)) != NULL)
				{
					UnlockRelationOid(relid, AccessExclusiveLock);
					res = transient ? RECYCLE_BUSY : RECYCLE_NOT_DUE;
				}
				else
					res = recycle_due(rel, nblocks) ? recycle_locked(rel, nblocks) : RECYCLE_NOT_DUE;
			}
			if (why != NULL)
				elog(DEBUG2, "queue worker left table %s: %s", RelationGetRelationName(rel), why);
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

/* The worker's time for recycling (horizon.c's budget). */
static QueueBudget recycle_budget;

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
	for (int t = 0; t < tries && queue_budget_left(&recycle_budget, start); t++)
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

