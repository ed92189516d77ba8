/*-------------------------------------------------------------------------
 *
 * compat.h
 *	  What differs between the PostgreSQL major versions the extension
 *	  builds against (15 to 18, and 19's beta).
 *	  Every PG_VERSION_NUM test of src/ is here.
 *
 * Included by common/queue_common.h, so by every file after postgres.h.
 *
 *-------------------------------------------------------------------------
 */
#ifndef QUEUE_COMPAT_H
#define QUEUE_COMPAT_H

#include "catalog/namespace.h"
#include "utils/acl.h"
#include "utils/guc.h"

/*
 * pg_b64_encode's source and pg_b64_decode's destination: char * until 17,
 * uint8 * from 18.  Cast the byte buffers to this.
 */
#if PG_VERSION_NUM >= 180000
typedef uint8 QueueB64Byte;
#else
typedef char QueueB64Byte;
#endif

/*
 * A function that never returns: from 18 pg_noreturn, written before the
 * declaration (pg_attribute_noreturn(), written after it, is gone).  C11's
 * _Noreturn, which 18's pg_noreturn is, serves 15 and 17 as well.
 */
#if PG_VERSION_NUM < 180000
#define pg_noreturn _Noreturn
#endif

/* The backend's local transaction id: in PGPROC's vxid from 17. */
#if PG_VERSION_NUM >= 170000
#define QueueMyLocalXid()	(MyProc->vxid.lxid)
#else
#define QueueMyLocalXid()	(MyProc->lxid)
#endif

/*
 * index_beginscan takes an IndexScanInstrumentation (none here) from 18,
 * and scan options (ScanOptions: none) from 19.
 */
#if PG_VERSION_NUM >= 190000
#define queue_index_beginscan(heap, index, snap, nkeys, norderbys) \
	index_beginscan((heap), (index), (snap), NULL, (nkeys), (norderbys), SO_NONE)
#elif PG_VERSION_NUM >= 180000
#define queue_index_beginscan(heap, index, snap, nkeys, norderbys) \
	index_beginscan((heap), (index), (snap), NULL, (nkeys), (norderbys))
#else
#define queue_index_beginscan(heap, index, snap, nkeys, norderbys) \
	index_beginscan((heap), (index), (snap), (nkeys), (norderbys))
#endif

/*
 * The cumulative statistics' live and dead rows of a table
 * (PgStat_StatTabEntry): n_live_tuples and n_dead_tuples until 15.
 */
#if PG_VERSION_NUM >= 160000
#define QUEUE_STAT_LIVE(st)	((st)->live_tuples)
#define QUEUE_STAT_DEAD(st)	((st)->dead_tuples)
#else
#define QUEUE_STAT_LIVE(st)	((st)->n_live_tuples)
#define QUEUE_STAT_DEAD(st)	((st)->n_dead_tuples)
#endif

/*
 * pgstat_report_vacuum takes the vacuum's start time from 18, and the
 * relation (not its OID and whether it is shared) from 19: the caller
 * holds its lock.
 */
#if PG_VERSION_NUM >= 190000
#define queue_pgstat_report_vacuum(relid, shared, live, start) \
	do { \
		Relation	queue_vacuumed_ = relation_open((relid), NoLock); \
		pgstat_report_vacuum(queue_vacuumed_, (live), 0, (start)); \
		relation_close(queue_vacuumed_, NoLock); \
	} while (0)
#elif PG_VERSION_NUM >= 180000
#define queue_pgstat_report_vacuum(relid, shared, live, start) \
	pgstat_report_vacuum((relid), (shared), (live), 0, (start))
#else
#define queue_pgstat_report_vacuum(relid, shared, live, start) \
	pgstat_report_vacuum((relid), (shared), (live), 0)
#endif

/* ExecuteTruncateGuts takes run_as_table_owner from 16 (false here). */
#if PG_VERSION_NUM >= 160000
#define queue_truncate_guts(rels, relids) \
	ExecuteTruncateGuts((rels), (relids), NIL, DROP_RESTRICT, false, false)
#else
#define queue_truncate_guts(rels, relids) \
	ExecuteTruncateGuts((rels), (relids), NIL, DROP_RESTRICT, false)
#endif

/* Ownership of a database: object_ownercheck from 16. */
#if PG_VERSION_NUM >= 160000
#define queue_database_ownercheck(dbid, roleid) \
	object_ownercheck(DatabaseRelationId, (dbid), (roleid))
#else
#define queue_database_ownercheck(dbid, roleid) \
	pg_database_ownercheck((dbid), (roleid))
#endif

/* Ownership of an extension: object_ownercheck from 16. */
#if PG_VERSION_NUM >= 160000
#define queue_extension_ownercheck(extid, roleid) \
	object_ownercheck(ExtensionRelationId, (extid), (roleid))
#else
#define queue_extension_ownercheck(extid, roleid) \
	pg_extension_ownercheck((extid), (roleid))
#endif

/* EXECUTE and other checks on a function: object_aclcheck from 16. */
#if PG_VERSION_NUM >= 160000
#define queue_proc_aclcheck(proc, roleid, mode) \
	object_aclcheck(ProcedureRelationId, (proc), (roleid), (mode))
#else
#define queue_proc_aclcheck(proc, roleid, mode) \
	pg_proc_aclcheck((proc), (roleid), (mode))
#endif

/*
 * Index entries for a tuple just inserted (insert.c): ExecInsertIndexTuples
 * takes onlySummarizing from 16; from 19 its booleans are flags
 * (EIIT_*) and the estate comes second.
 */
#if PG_VERSION_NUM >= 190000
#define queue_insert_index_tuples(rri, slot, estate) \
	ExecInsertIndexTuples((rri), (estate), 0, (slot), NIL, NULL)
#elif PG_VERSION_NUM >= 160000
#define queue_insert_index_tuples(rri, slot, estate) \
	ExecInsertIndexTuples((rri), (slot), (estate), false, false, NULL, NIL, false)
#else
#define queue_insert_index_tuples(rri, slot, estate) \
	ExecInsertIndexTuples((rri), (slot), (estate), false, false, NULL, NIL)
#endif

/*
 * The same for a speculative insertion (ON CONFLICT's way, insert.c), and
 * the check before it: ExecCheckIndexConstraints takes the tuple's own id
 * (none here) from 18.
 */
#if PG_VERSION_NUM >= 190000
#define queue_insert_index_tuples_speculative(rri, slot, estate, conflict, arbiters) \
	ExecInsertIndexTuples((rri), (estate), EIIT_NO_DUPE_ERROR, (slot), (arbiters), (conflict))
#elif PG_VERSION_NUM >= 160000
#define queue_insert_index_tuples_speculative(rri, slot, estate, conflict, arbiters) \
	ExecInsertIndexTuples((rri), (slot), (estate), false, true, (conflict), (arbiters), false)
#else
#define queue_insert_index_tuples_speculative(rri, slot, estate, conflict, arbiters) \
	ExecInsertIndexTuples((rri), (slot), (estate), false, true, (conflict), (arbiters))
#endif
#if PG_VERSION_NUM >= 180000
#define queue_check_index_constraints(rri, slot, estate, conflict, arbiters) \
	ExecCheckIndexConstraints((rri), (slot), (estate), (conflict), NULL, (arbiters))
#else
#define queue_check_index_constraints(rri, slot, estate, conflict, arbiters) \
	ExecCheckIndexConstraints((rri), (slot), (estate), (conflict), (arbiters))
#endif

/*
 * The search path every statement of ours is parsed and run under, from
 * queue_enter to queue_leave (acl.c): pg_catalog, and never a schema of the
 * caller's nor its pg_temp.  It stays set while our kept plans run, since
 * the plan cache re-parses a plan whose search path differs from the one it
 * was made under.
 *
 * Until 16: an override search path of pg_catalog alone (addTemp false:
 * pg_temp is not searched at all), pushed and popped.  17 removed override
 * search paths; from 17 the search_path setting itself is saved at a new
 * GUC nest level, set to "pg_catalog, pg_temp", and restored by leaving
 * that level (what PostgreSQL's own maintenance commands do, see
 * RestrictSearchPath).  pg_temp must be named last: left out, it would be
 * searched first.  Named last, it is searched only for relations and types
 * (never for functions or operators), after pg_catalog, and every name our
 * statements leave unqualified is a pg_catalog one, so nothing in pg_temp
 * is ever resolved.  An error between the two ends is fine either way:
 * (sub)transaction abort pops the override or the nest level.
 *
 * The returned value is what queue_unpin_search_path needs back.
 */
#define QUEUE_SEARCH_PATH "pg_catalog, pg_temp"

static inline int
queue_pin_search_path(void)
{
#if PG_VERSION_NUM >= 170000
	int			nestlevel = NewGUCNestLevel();

	(void) set_config_option("search_path", QUEUE_SEARCH_PATH,
							 PGC_USERSET, PGC_S_SESSION,
							 GUC_ACTION_SAVE, true, 0, false);
	return nestlevel;
#else
	OverrideSearchPath path;

	path.schemas = NIL;
	path.addCatalog = true;
	path.addTemp = false;
	PushOverrideSearchPath(&path);	/* which copies it */
	return 0;
#endif
}

static inline void
queue_unpin_search_path(int pin)
{
#if PG_VERSION_NUM >= 170000
	AtEOXact_GUC(true, pin);
#else
	PopOverrideSearchPath();
#endif
}

/* ShmemInitHash takes one size (the most entries) from 19, not two. */
#if PG_VERSION_NUM >= 190000
#define queue_shmem_init_hash(name, init_size, max_size, info, flags) \
	ShmemInitHash((name), (max_size), (info), (flags))
#else
#define queue_shmem_init_hash(name, init_size, max_size, info, flags) \
	ShmemInitHash((name), (init_size), (max_size), (info), (flags))
#endif

/*
 * The planner's hooks (plans.c).  The planner hook takes the EXPLAIN's
 * state from 19; get_relation_info_hook is gone in 19, where
 * build_simple_rel_hook gives the relation's range table entry instead.
 */
#if PG_VERSION_NUM >= 190000
#define QUEUE_PLANNER_PARAMS \
	Query *parse, const char *query_string, int cursor_options, \
	ParamListInfo bound_params, ExplainState *es
#define QUEUE_PLANNER_ARGS parse, query_string, cursor_options, bound_params, es
#define QUEUE_REL_HOOK_PARAMS PlannerInfo *root, RelOptInfo *rel, RangeTblEntry *rte
#define QUEUE_REL_HOOK_ARGS root, rel, rte
#define QUEUE_REL_HOOK_RELID (rte->rtekind == RTE_RELATION ? rte->relid : InvalidOid)
#define queue_rel_hook_type build_simple_rel_hook_type
#define queue_rel_hook build_simple_rel_hook
#else
#define QUEUE_PLANNER_PARAMS \
	Query *parse, const char *query_string, int cursor_options, \
	ParamListInfo bound_params
#define QUEUE_PLANNER_ARGS parse, query_string, cursor_options, bound_params
#define QUEUE_REL_HOOK_PARAMS PlannerInfo *root, Oid relid, bool inhparent, RelOptInfo *rel
#define QUEUE_REL_HOOK_ARGS root, relid, inhparent, rel
#define QUEUE_REL_HOOK_RELID relid
#define queue_rel_hook_type get_relation_info_hook_type
#define queue_rel_hook get_relation_info_hook
#endif

/*
 * A table's rewrite (compact.c): make_new_heap and finish_heap_swap moved
 * from commands/cluster.h to commands/repack.h in 19, where
 * finish_heap_swap takes whether to rebuild the indexes (yes) and
 * table_relation_copy_for_cluster a snapshot (none: every change the
 * horizon keeps).
 */
#if PG_VERSION_NUM >= 190000
#define QUEUE_HEAP_REWRITE_H "commands/repack.h"
#define queue_finish_heap_swap(old, new, frozen, minmulti, persistence) \
	finish_heap_swap((old), (new), false, false, false, true, true, (frozen), (minmulti), (persistence))
#define queue_copy_for_cluster(old, new, oldest, frozen, minmulti, kept, removed, recent) \
	table_relation_copy_for_cluster((old), (new), NULL, false, (oldest), NULL, (frozen), (minmulti), \
									(kept), (removed), (recent))
#else
#define QUEUE_HEAP_REWRITE_H "commands/cluster.h"
#define queue_finish_heap_swap(old, new, frozen, minmulti, persistence) \
	finish_heap_swap((old), (new), false, false, false, true, (frozen), (minmulti), (persistence))
#define queue_copy_for_cluster(old, new, oldest, frozen, minmulti, kept, removed, recent) \
	table_relation_copy_for_cluster((old), (new), NULL, false, (oldest), (frozen), (minmulti), \
									(kept), (removed), (recent))
#endif

#endif							/* QUEUE_COMPAT_H */
