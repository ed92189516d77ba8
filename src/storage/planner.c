/*-------------------------------------------------------------------------
 *
 * planner.c
 *	  How the statements of plans.c are planned: generic plans over the
 *	  queue_data tables that never choose a sequential scan, nor a bitmap
 *	  scan or hash join, and that see every queue table as a large one;
 *	  no JIT for them.
 *
 * Calls: nothing of the extension's (PostgreSQL's planner hooks).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/namespace.h"
#include "jit/jit.h"
#include "nodes/nodeFuncs.h"
#include "optimizer/cost.h"
#include "optimizer/pathnode.h"
#include "optimizer/plancat.h"
#include "optimizer/planner.h"
#include "parser/parsetree.h"
#include "utils/lsyscache.h"

#include "common/queue_common.h"
#include "storage/queue_storage.h"

/*
 * Plans that never choose a sequential scan.
 *
 * A queue's tables are new and small when its plans are first made (and
 * not yet analyzed, so the planner guesses their size from a few pages);
 * left to itself the planner picks sequential scans and hash joins that
 * are fine for 100 rows and ruinous for 100,000, and the plan is kept.
 * Every statement here has an index to walk whatever the table's size, so
 * generic plans over queue_data tables are made with enable_seqscan off;
 * and with enable_bitmapscan off, since a bitmap scan reads every match
 * before a LIMIT can stop it (a FIFO group may hold millions).  Hash and
 * merge joins and hash aggregates are off too: our statements join and
 * group a batch (at most 1,000 rows) against index scans, where building
 * a hash table costs more per call than the nested loop or sort it
 * replaces (measured on the FIFO receive and delete).
 * Only plans asked for as generic (CURSOR_OPT_GENERIC_PLAN, which our
 * plans are and ad hoc queries are not) are looked at.
 *
 * And every queue_data table is planned as a large one (at least
 * PLAN_AS_ROWS rows; relation_info): a plan is made once and kept, and
 * made again whenever ANALYZE runs, which under a long-held snapshot
 * counts a table of a few hundred live rows among tens of thousands of
 * dead ones.  Planned as small, a shared table's statements chose to read
 * a store's whole key range (Index Cond: store_id = $n) and filter the
 * message ids, rather than one descent per id: a delete of 10 messages
 * then read 16,000 buffers (auto_explain, issue 38).  As large, every
 * statement keeps the narrow index conditions it was written for.
 */
#define PLAN_AS_ROWS	1000000.0

static planner_hook_type prev_planner_hook = NULL;
static queue_rel_hook_type prev_relation_info_hook = NULL;

/* queue_data's OID while one of our statements is planned, else InvalidOid */
static Oid	planning_nsp = InvalidOid;

static void
relation_info(QUEUE_REL_HOOK_PARAMS)
{
	Oid			table = QUEUE_REL_HOOK_RELID;

	if (prev_relation_info_hook)
		prev_relation_info_hook(QUEUE_REL_HOOK_ARGS);
	if (OidIsValid(planning_nsp) && OidIsValid(table) && rel->tuples < PLAN_AS_ROWS &&
		get_rel_namespace(table) == planning_nsp)
	{
		ListCell   *lc;

		rel->tuples = PLAN_AS_ROWS;
		rel->pages = Max(rel->pages, (BlockNumber) (PLAN_AS_ROWS / 50));
		foreach(lc, rel->indexlist)
		{
			IndexOptInfo *index = (IndexOptInfo *) lfirst(lc);

			index->tuples = PLAN_AS_ROWS;
			index->pages = Max(index->pages, (BlockNumber) (PLAN_AS_ROWS / 200));
		}
	}
}

static bool
rte_in_queue_data(Node *node, Oid *nsp)
{
	if (node == NULL)
		return false;
	if (IsA(node, RangeTblEntry))
	{
		RangeTblEntry *rte = (RangeTblEntry *) node;

		return rte->rtekind == RTE_RELATION &&
			get_rel_namespace(rte->relid) == *nsp;
	}
	if (IsA(node, Query))
		return query_tree_walker((Query *) node, rte_in_queue_data, nsp,
								 QTW_EXAMINE_RTES_BEFORE);
	return expression_tree_walker(node, rte_in_queue_data, nsp);
}

static PlannedStmt *
queue_planner(QUEUE_PLANNER_PARAMS)
{
	bool		ours = false;
	Oid			nsp = InvalidOid;
	Oid			save_nsp = planning_nsp;
	bool		save_seqscan = enable_seqscan;
	bool		save_bitmapscan = enable_bitmapscan;
	bool		save_hashjoin = enable_hashjoin;
	bool		save_hashagg = enable_hashagg;
	bool		save_mergejoin = enable_mergejoin;
	PlannedStmt *result;

	if ((cursor_options & CURSOR_OPT_GENERIC_PLAN) && enable_seqscan)
	{
		nsp = get_namespace_oid("queue_data", true);
		ours = OidIsValid(nsp) && rte_in_queue_data((Node *) parse, &nsp);
	}
	if (ours)
	{
		enable_seqscan = false;
		enable_bitmapscan = false;
		enable_hashjoin = false;
		enable_hashagg = false;
		enable_mergejoin = false;
	}
	PG_TRY();
	{
		/* a planning nested in this one (a function run to fold it) keeps its own */
		planning_nsp = ours ? nsp : InvalidOid;
		if (prev_planner_hook)
			result = prev_planner_hook(QUEUE_PLANNER_ARGS);
		else
			result = standard_planner(QUEUE_PLANNER_ARGS);
	}
	PG_FINALLY();
	{
		planning_nsp = save_nsp;
		enable_seqscan = save_seqscan;
		enable_bitmapscan = save_bitmapscan;
		enable_hashjoin = save_hashjoin;
		enable_hashagg = save_hashagg;
		enable_mergejoin = save_mergejoin;
	}
	PG_END_TRY();

	/*
	 * Nor JIT: a generic plan's estimates over a large table can pass
	 * jit_above_cost, and compiling costs milliseconds at every execution
	 * of a statement that runs in well under one.
	 */
	if (ours)
		result->jitFlags = PGJIT_NONE;
	return result;
}

void
queue_planner_hook_init(void)
{
	prev_planner_hook = planner_hook;
	planner_hook = queue_planner;
	prev_relation_info_hook = queue_rel_hook;
	queue_rel_hook = relation_info;
}
