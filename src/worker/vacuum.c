/*-------------------------------------------------------------------------
 *
 * vacuum.c
 *	  The worker vacuums a queue's tables once they have churned more
 *	  than they hold.
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
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "commands/vacuum.h"
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
