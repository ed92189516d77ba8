/*-------------------------------------------------------------------------
 *
 * citus.c
 *	  What a queue needs to know of a Citus cluster (docs/citus.md): where a
 *	  queue name is placed, whether this node is that place, and whether a
 *	  table is one Citus manages.
 *
 * Citus is never required: it is looked up at run time, and with it absent
 * every check here is one look at a setting (citus.version, defined when
 * the Citus library is loaded) and returns at once.
 *
 * Placement: queue.citus_setup() (queue--1.7--1.8.sql) distributes an empty
 * anchor table, queue_citus.placements, by a column of type
 * queue.placement_key, and the API functions colocated with it.  Citus
 * then runs a call on the node holding the shard of the call's queue name,
 * hashed by the functions here: the tenant key, the name up to its first
 * '.', so a tenant's queues, dead-letter queues and topics share a node.
 *
 * The wrong-node guard: a call Citus did not delegate (inside a query over
 * rows, a CTE, a name that is not a constant) runs where it was made; on a
 * cluster that is set up, queue_citus_check_local refuses it unless this
 * node holds the name's shard, so no queue is ever made or used on the
 * wrong node.
 *
 * Citus-managed tables: a table Citus distributes (a shell on a node, whose
 * own heap is never read) or a shard of one must be written through a
 * statement, which Citus routes; insert.c asks queue_citus_manages before
 * writing a heap directly.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/xact.h"
#include "access/htup_details.h"
#include "access/table.h"
#include "catalog/index.h"
#include "catalog/namespace.h"
#include "catalog/pg_class.h"
#include "catalog/pg_extension.h"
#include "catalog/pg_namespace.h"
#include "miscadmin.h"
#include "catalog/pg_type.h"
#include "commands/extension.h"
#include "common/hashfn.h"
#include "executor/spi.h"
#include "storage/bufmgr.h"
#include "storage/proc.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/resowner.h"
#include "utils/snapmgr.h"
#include "utils/syscache.h"
#include "funcapi.h"

#include "core_api.h"
#include "common/queue_common.h"
#include "storage/queue_storage.h"

PG_FUNCTION_INFO_V1(queue_placement_key_eq);
PG_FUNCTION_INFO_V1(queue_placement_key_hash);
PG_FUNCTION_INFO_V1(queue_placement_key_cmp);
PG_FUNCTION_INFO_V1(queue_placement_of);
PG_FUNCTION_INFO_V1(queue_citus_manages_sql);

/* The length of a name's tenant key: up to its first '.', or all of it. */
static int
tenant_key_len(const char *s, int len)
{
	const char *dot = memchr(s, '.', len);

	return dot ? (int) (dot - s) : len;
}

/* queue._placement_key_eq: byte-wise equality, as names compare. */
Datum
queue_placement_key_eq(PG_FUNCTION_ARGS)
{
	text	   *a = PG_GETARG_TEXT_PP(0);
	text	   *b = PG_GETARG_TEXT_PP(1);
	int			la = VARSIZE_ANY_EXHDR(a);

	PG_RETURN_BOOL(la == VARSIZE_ANY_EXHDR(b) &&
				   memcmp(VARDATA_ANY(a), VARDATA_ANY(b), la) == 0);
}

/* queue._placement_key_cmp: byte order, shorter first among equal prefixes. */
Datum
queue_placement_key_cmp(PG_FUNCTION_ARGS)
{
	text	   *a = PG_GETARG_TEXT_PP(0);
	text	   *b = PG_GETARG_TEXT_PP(1);
	int			la = VARSIZE_ANY_EXHDR(a);
	int			lb = VARSIZE_ANY_EXHDR(b);
	int			c = memcmp(VARDATA_ANY(a), VARDATA_ANY(b), Min(la, lb));

	PG_RETURN_INT32(c != 0 ? (c < 0 ? -1 : 1) : (la < lb ? -1 : la > lb ? 1 : 0));
}

/*
 * queue._placement_key_hash: the hash Citus places a name by, that of its
 * tenant key.  Equal names have equal tenant keys, so it agrees with
 * equality, as a hash opclass must.
 */
Datum
queue_placement_key_hash(PG_FUNCTION_ARGS)
{
	text	   *t = PG_GETARG_TEXT_PP(0);
	const char *s = VARDATA_ANY(t);

	return hash_any((const unsigned char *) s,
					tenant_key_len(s, VARSIZE_ANY_EXHDR(t)));
}

/* queue.placement_of(queue_name): the tenant key a name is placed by. */
Datum
queue_placement_of(PG_FUNCTION_ARGS)
{
	text	   *t;

	if (PG_ARGISNULL(0))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("argument \"%s\" must not be null", "queue_name")));
	t = PG_GETARG_TEXT_PP(0);
	queue_check_name(t, "queue_name");
	PG_RETURN_TEXT_P(cstring_to_text_with_len(VARDATA_ANY(t),
											  tenant_key_len(VARDATA_ANY(t),
															 VARSIZE_ANY_EXHDR(t))));
}

static void check_local(text *name, const char *argname, const char *of);
static Oid	moves_relid(void);

/* Whether queue._citus_moves may hold a row: it exists and has a block. */
static bool
moves_pending(void)
{
	Oid			relid = moves_relid();
	Relation	rel;
	bool		any;

	if (!OidIsValid(relid))
		return false;
	rel = table_open(relid, AccessShareLock);
	any = RelationGetNumberOfBlocks(rel) > 0;
	table_close(rel, AccessShareLock);
	return any;
}

/* queue._citus_moves, the shards being moved to or from this node (1.9 on), or InvalidOid. */
static Oid
moves_relid(void)
{
	Oid			ns = get_namespace_oid("queue", true);

	return OidIsValid(ns) ? get_relname_relid("_citus_moves", ns) : InvalidOid;
}

/* The owner of a namespace (InvalidOid when it is gone). */
static Oid
get_namespace_owner(Oid ns)
{
	HeapTuple	tup = SearchSysCache1(NAMESPACEOID, ObjectIdGetDatum(ns));
	Oid			owner = InvalidOid;

	if (HeapTupleIsValid(tup))
	{
		owner = ((Form_pg_namespace) GETSTRUCT(tup))->nspowner;
		ReleaseSysCache(tup);
	}
	return owner;
}

/*
 * Whether Citus distributes relid (its pg_dist_partition has it): a
 * distributed or reference table.  Read from the catalog directly.
 */
static bool
citus_distributes(Oid relid)
{
	Oid			idx = get_relname_relid("pg_dist_partition_logical_relid_index", PG_CATALOG_NAMESPACE);
	Relation	cat;
	ScanKeyData key;
	SysScanDesc scan;
	bool		found;

	if (!OidIsValid(idx) || !OidIsValid(relid))
		return false;
	cat = table_open(IndexGetRelation(idx, false), AccessShareLock);
	ScanKeyInit(&key, get_attnum(RelationGetRelid(cat), "logicalrelid"),
				BTEqualStrategyNumber, F_OIDEQ, ObjectIdGetDatum(relid));
	scan = systable_beginscan(cat, idx, true, NULL, 1, &key);
	found = HeapTupleIsValid(systable_getnext(scan));
	systable_endscan(scan);
	table_close(cat, AccessShareLock);
	return found;
}

/*
 * The one rule by which a table of schema queue_citus counts: the anchor
 * (placements) for the wrong-node guard and the moves' hook, and the
 * nodes' endpoints (sqs_endpoints) for the SQS endpoint's forwarding.  A
 * superuser owns the schema and the table, the table is a plain table
 * (not a view, whose query could call any function), and Citus
 * distributes it.  Anything else of that name, which a role with CREATE
 * on the database could make before queue.citus_setup() or in a database
 * where it never runs, is ignored: it switches nothing on and is never
 * read.  The relation's oid, or InvalidOid.
 */
static Oid
trusted_table(Oid ns, const char *relname)
{
	Oid			relid;
	HeapTuple	tup;
	bool		ok = false;

	if (!OidIsValid(ns) || !superuser_arg(get_namespace_owner(ns)) ||
		!OidIsValid(relid = get_relname_relid(relname, ns)))
		return InvalidOid;
	tup = SearchSysCache1(RELOID, ObjectIdGetDatum(relid));
	if (HeapTupleIsValid(tup))
	{
		Form_pg_class c = (Form_pg_class) GETSTRUCT(tup);

		ok = c->relkind == RELKIND_RELATION && superuser_arg(c->relowner);
		ReleaseSysCache(tup);
	}
	return ok && citus_distributes(relid) ? relid : InvalidOid;
}

/*
 * A lookup of this file that runs elevated (the endpoint's forwarding
 * decision, the moves' hook): as role, in a security-restricted operation
 * (no SET ROLE, no temporary objects, nothing that outlives it), with the
 * search path pinned to pg_catalog (compat.h).  An error in between is
 * undone by the (sub)transaction's abort.
 */
typedef struct Lookup
{
	Oid			save_uid;
	int			save_sec;
	int			path;
} Lookup;

static void
lookup_enter(Lookup *lk, Oid role)
{
	GetUserIdAndSecContext(&lk->save_uid, &lk->save_sec);
	SetUserIdAndSecContext(role, lk->save_sec | SECURITY_LOCAL_USERID_CHANGE |
						   SECURITY_RESTRICTED_OPERATION);
	lk->path = queue_pin_search_path();
}

static void
lookup_leave(Lookup *lk)
{
	queue_unpin_search_path(lk->path);
	SetUserIdAndSecContext(lk->save_uid, lk->save_sec);
}

/* The owner of the queue extension (who may read its tables); InvalidOid without it. */
static Oid
extension_owner(void)
{
	Oid			extid = get_extension_oid("queue", true);
	Relation	rel;
	ScanKeyData key;
	SysScanDesc scan;
	HeapTuple	tup;
	Oid			owner = InvalidOid;

	if (!OidIsValid(extid))
		return InvalidOid;
	rel = table_open(ExtensionRelationId, AccessShareLock);
	ScanKeyInit(&key, Anum_pg_extension_oid, BTEqualStrategyNumber, F_OIDEQ,
				ObjectIdGetDatum(extid));
	scan = systable_beginscan(rel, ExtensionOidIndexId, true, NULL, 1, &key);
	if (HeapTupleIsValid(tup = systable_getnext(scan)))
		owner = ((Form_pg_extension) GETSTRUCT(tup))->extowner;
	systable_endscan(scan);
	table_close(rel, AccessShareLock);
	return owner;
}

/* Whether the Citus library is loaded in this process (it defines citus.version). */
static bool
citus_loaded(void)
{
	return GetConfigOption("citus.version", true, false) != NULL;
}

/*
 * What this transaction knows of Citus in this database: whether the
 * extension is created, and the anchor of queue.citus_setup() (InvalidOid
 * before it ran).  Looked up once per transaction.
 */
static LocalTransactionId known_lxid = InvalidLocalTransactionId;
static bool known_citus = false;
static Oid	known_ns = InvalidOid;
static Oid	known_anchor = InvalidOid;

static void
know_citus(void)
{
	LocalTransactionId lxid = QueueMyLocalXid();

	if (known_lxid == lxid)
		return;
	known_citus = citus_loaded() && OidIsValid(get_extension_oid("citus", true));
	known_ns = known_citus ? get_namespace_oid("queue_citus", true) : InvalidOid;

	/*
	 * Only the anchor queue.citus_setup() made counts (trusted_table): a
	 * schema or table of that name that another role made (before or
	 * instead) would otherwise switch the guard on, or let its owner swap
	 * the anchor.
	 */
	known_anchor = trusted_table(known_ns, "placements");
	known_lxid = lxid;
}

/* Whether this is a node of a Citus cluster queue.citus_setup() set up. */
bool
queue_citus_active(void)
{
	if (!citus_loaded())
		return false;
	know_citus();
	return OidIsValid(known_anchor);
}

/*
 * Refuse a call on queue (or topic) name unless this node holds the name's
 * shard, on a cluster queue.citus_setup() has set up; nothing otherwise.
 * The caller is connected to SPI.
 */
void
queue_citus_check_local(text *name, const char *argname)
{
	check_local(name, argname, NULL);
}

/*
 * check_local: the guard.  With of set, name is not the call's placement
 * argument but a queue that must share the node of queue (or topic) "of":
 * a dead-letter queue, a redrive destination, a subscribed queue.
 */
static void
check_local(text *name, const char *argname, const char *of)
{
	static SPIPlanPtr plans[2] = {NULL, NULL};
	SPIPlanPtr	plan;
	bool		moves;
	Datum		args[2];
	int			rc;
	bool		isnull;

	if (!citus_loaded())
		return;
	know_citus();
	if (!OidIsValid(known_anchor) || name == NULL)
		return;

	/*
	 * queue._citus_moves (1.9 on): the shards whose queues are moving.  A
	 * table of no blocks has no row, committed or not (an insert extends it
	 * first): then the statement without it, the common case.
	 */
	moves = moves_pending();
	plan = plans[moves];
	if (plan == NULL)
	{
		Oid			types[2] = {TEXTOID, OIDOID};

		/* the same statement, with or without the moves' column */
#define PLACEMENT_SELECT(moving) \
		"SELECT n.groupid OPERATOR(pg_catalog.=) " \
		"(SELECT groupid FROM pg_catalog.pg_dist_local_group), " \
		"n.nodename, n.nodeport, " moving " " \
		"FROM pg_catalog.pg_dist_placement p " \
		"JOIN pg_catalog.pg_dist_node n " \
		"ON n.groupid OPERATOR(pg_catalog.=) p.groupid " \
		"AND n.noderole OPERATOR(pg_catalog.=) 'primary' " \
		"WHERE p.shardid OPERATOR(pg_catalog.=) " \
		"pg_catalog.get_shard_id_for_distribution_column(" \
		"$2::pg_catalog.regclass, $1::queue.placement_key)"

		plan = plans[moves] =
			queue_keep_plan(moves ?
							PLACEMENT_SELECT("EXISTS (SELECT FROM queue._citus_moves m "
											 "WHERE m.shard_id OPERATOR(pg_catalog.=) p.shardid)") :
							PLACEMENT_SELECT("false"),
							2, types);
#undef PLACEMENT_SELECT
	}
	args[0] = PointerGetDatum(name);
	args[1] = ObjectIdGetDatum(known_anchor);

	/*
	 * Read with a fresh snapshot, not the transaction's: a move committed
	 * after a REPEATABLE READ transaction began must still be seen.
	 */
	rc = SPI_execute_snapshot(plan, args, NULL, GetLatestSnapshot(), InvalidSnapshot, true, false, 1);
	if (rc != SPI_OK_SELECT)
		elog(ERROR, "placement lookup failed: %s", SPI_result_code_string(rc));
	if (SPI_processed == 0)
		return;					/* no placement known here: nothing to compare */
	if (DatumGetBool(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 4, &isnull)))
	{
		char	   *qname = text_to_cstring(name);

		/*
		 * queue.citus_move_shard is moving the queues of this shard from
		 * this node (a call routed here before the shard moved may come
		 * after) or to it (they are being unpacked): nothing of them may
		 * change until it is done.
		 */
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_IN_USE),
				 errmsg("%s \"%s\" is being moved to another node of the Citus cluster",
						strcmp(argname, "topic_name") == 0 ? "topic" :
						strcmp(argname, "consumer_name") == 0 ? "consumer" : "queue",
						qname),
				 errdetail("queue.citus_move_shard is moving the queues of its shard of "
						   "queue_citus.placements; calls on them are refused until it ends."),
				 errhint("Retry the call in a moment: after the move it runs on the new node.")));
	}
	if (!DatumGetBool(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull)))
	{
		char	   *node = SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 2);
		char	   *port = SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 3);
		char	   *qname = text_to_cstring(name);

		if (of != NULL)
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("%s \"%s\" (argument \"%s\") is placed on another node of the Citus cluster (%s:%s) than \"%s\"",
							strcmp(argname, "consumer_name") == 0 ? "consumer" : "queue",
							qname, argname, node, port, of),
					 errdetail("A queue's dead-letter queue, redrive destination, topic "
							   "subscriptions and consumers (placed by their names) must be on its node."),
					 errhint("Give them the same tenant key, the part of the name before its "
							 "first \".\" (queue.placement_of), e.g. \"%s.%s\".",
							 text_to_cstring(DatumGetTextPP(DirectFunctionCall1(queue_placement_of,
																				 CStringGetTextDatum(of)))),
							 qname)));
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("%s \"%s\" is placed on another node of the Citus cluster (%s:%s)",
						strcmp(argname, "topic_name") == 0 ? "topic" :
						strcmp(argname, "consumer_name") == 0 ? "consumer" : "queue",
						qname, node, port),
				 errdetail("This call ran on this node because Citus did not delegate it "
						   "to the node of \"%s\": a call inside a query over rows or a CTE, "
						   "or with a name that is not a constant, is run where it is made.",
						   qname),
				 errhint("Call the function as a statement of its own with the name as a "
						 "constant, e.g. SELECT queue.send('%s', ...), or connect to %s:%s.",
						 qname, node, port)));
	}
}

/*
 * Whether rel is a table Citus manages: one it distributes (its shell, in
 * pg_dist_partition) or a shard of one (named <table>_<shard id>, in
 * pg_dist_shard).  Read from the catalogs directly, not by SPI: insert.c
 * asks in the middle of a send.  Remembered for the last table asked
 * within a transaction.
 */
bool
queue_citus_manages(Relation rel)
{
	static LocalTransactionId last_lxid = InvalidLocalTransactionId;
	static Oid	last_relid = InvalidOid;
	static bool last_answer = false;
	Oid			relid = RelationGetRelid(rel);
	const char *relname = RelationGetRelationName(rel);
	bool		managed = false;
	Oid			idx;
	Relation	cat;
	ScanKeyData key;
	SysScanDesc scan;
	const char *us;

	if (!citus_loaded())
		return false;
	know_citus();
	if (!known_citus)
		return false;
	if (last_lxid == QueueMyLocalXid() && last_relid == relid)
		return last_answer;

	/* a distributed table's shell */
	managed = citus_distributes(relid);

	/* a shard: <table>_<digits>, whose shard id pg_dist_shard knows for <table> */
	us = strrchr(relname, '_');
	if (!managed && us != NULL && us[1] != '\0' && strspn(us + 1, "0123456789") == strlen(us + 1) &&
		strlen(us + 1) < 19 &&
		OidIsValid(idx = get_relname_relid("pg_dist_shard_shardid_index", PG_CATALOG_NAMESPACE)))
	{
		int64		shardid = strtoll(us + 1, NULL, 10);
		HeapTuple	tup;

		cat = table_open(IndexGetRelation(idx, false), AccessShareLock);
		ScanKeyInit(&key, get_attnum(RelationGetRelid(cat), "shardid"),
					BTEqualStrategyNumber, F_INT8EQ, Int64GetDatum(shardid));
		scan = systable_beginscan(cat, idx, true, NULL, 1, &key);
		if (HeapTupleIsValid(tup = systable_getnext(scan)))
		{
			bool		isnull;
			Oid			logical = DatumGetObjectId(heap_getattr(tup,
																get_attnum(RelationGetRelid(cat), "logicalrelid"),
																RelationGetDescr(cat), &isnull));
			char	   *lname = isnull ? NULL : get_rel_name(logical);

			managed = lname != NULL &&
				get_rel_namespace(logical) == RelationGetNamespace(rel) &&
				strlen(lname) == (size_t) (us - relname) &&
				strncmp(lname, relname, us - relname) == 0;
		}
		systable_endscan(scan);
		table_close(cat, AccessShareLock);
	}

	last_lxid = QueueMyLocalXid();
	last_relid = relid;
	last_answer = managed;
	return managed;
}

/*
 * The wrong-node guard of an administrative call (acl.c queue_admin_call):
 * the argument its placement goes by, as queue.citus_setup() distributes
 * it (queue_name, topic_name or source_queue; create_consumer's queue_name),
 * must name a queue or topic of this node.
 */
void
queue_citus_check_call(FunctionCallInfo fcinfo)
{
	HeapTuple	tup;
	char	  **names;
	Oid		   *types;
	char	   *modes;
	int			nargs;
	int			arg = -1;

	if (!citus_loaded())
		return;
	know_citus();
	if (!OidIsValid(known_anchor))
		return;
	tup = SearchSysCache1(PROCOID, ObjectIdGetDatum(fcinfo->flinfo->fn_oid));
	if (!HeapTupleIsValid(tup))
		return;
	nargs = get_func_arg_info(tup, &types, &names, &modes);
	ReleaseSysCache(tup);
	for (int i = 0; names != NULL && i < nargs && arg < 0; i++)
		if (types[i] == TEXTOID && names[i] != NULL &&
			(strcmp(names[i], "queue_name") == 0 || strcmp(names[i], "topic_name") == 0 ||
			 strcmp(names[i], "source_queue") == 0))
			arg = i;
	/* drop_consumer, pause_consumer, resume_consumer: by the consumer's name */
	for (int i = 0; names != NULL && i < nargs && arg < 0; i++)
		if (types[i] == TEXTOID && names[i] != NULL && strcmp(names[i], "consumer_name") == 0)
			arg = i;
	if (arg < 0 || arg >= fcinfo->nargs || PG_ARGISNULL(arg))
		return;
	check_local(PG_GETARG_TEXT_PP(arg), names[arg], NULL);

	/*
	 * The queues that must share its node, and a new consumer's name (its
	 * later calls are placed by it)
	 */
	for (int i = 0; i < nargs && i < fcinfo->nargs; i++)
		if (i != arg && types[i] == TEXTOID && names[i] != NULL && !PG_ARGISNULL(i) &&
			(strcmp(names[i], "queue_name") == 0 ||
			 strcmp(names[i], "dead_letter_queue") == 0 ||
			 strcmp(names[i], "destination_queue") == 0 ||
			 strcmp(names[i], "consumer_name") == 0))
			check_local(PG_GETARG_TEXT_PP(i), names[i],
						text_to_cstring(PG_GETARG_TEXT_PP(arg)));
}

/* queue._citus_manages(regclass): queue_citus_manages, for the tests (037_citus). */
Datum
queue_citus_manages_sql(PG_FUNCTION_ARGS)
{
	Relation	rel;
	bool		managed;

	if (PG_ARGISNULL(0))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("argument \"%s\" must not be null", "rel")));
	rel = table_open(PG_GETARG_OID(0), AccessShareLock);
	managed = queue_citus_manages(rel);
	table_close(rel, AccessShareLock);
	PG_RETURN_BOOL(managed);
}

/*
 * From the utility hook (worker.c), before a statement runs: refuse to
 * create a shard of the anchor (queue_citus.placements_<shard id>) on a
 * node that the shard is not placed on, once the anchor is distributed:
 * that is what moving, copying, rebalancing or splitting a shard does
 * first (a split's new shards are placed nowhere yet).  The queues of a
 * shard are this node's own tables and do not travel with it: moving the
 * shard would strand them (every call would route to a node without the
 * queue).  When the anchor is distributed, its shards are made before this
 * node knows of it, which is allowed.
 */
void
queue_citus_utility(Node *stmt)
{
	CreateStmt *cs;
	const char *rel;
	int64		shardid;
	static SPIPlanPtr plan = NULL;
	static SPIPlanPtr announced = NULL;
	Oid			owner;
	Lookup		lk;
	Datum		args[2];
	char	   *from = NULL;

	if (!IsA(stmt, CreateStmt) || !citus_loaded())
		return;
	cs = (CreateStmt *) stmt;
	rel = cs->relation->relname;
	if (cs->relation->schemaname == NULL || strcmp(cs->relation->schemaname, "queue_citus") != 0 ||
		strncmp(rel, "placements_", strlen("placements_")) != 0 ||
		strspn(rel + strlen("placements_"), "0123456789") != strlen(rel + strlen("placements_")))
		return;
	know_citus();

	/*
	 * No anchor known here (before queue.citus_setup(), or while this node
	 * does not know it yet): nothing to compare with.
	 */
	if (!OidIsValid(known_anchor) || !OidIsValid(owner = extension_owner()))
		return;
	shardid = strtoll(rel + strlen("placements_"), NULL, 10);
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");

	/*
	 * The statement comes from whichever role made the shard (Citus's move
	 * connects as its caller): the lookups are the extension's, as its
	 * owner.
	 */
	lookup_enter(&lk, owner);
	if (plan == NULL)
	{
		Oid			types[2] = {INT8OID, OIDOID};

		plan = queue_keep_plan("SELECT coalesce((SELECT pg_catalog.string_agg(n.nodename OPERATOR(pg_catalog.||) ':' "
							   "OPERATOR(pg_catalog.||) n.nodeport, ', ') "
							   "FROM pg_catalog.pg_dist_placement p "
							   "JOIN pg_catalog.pg_dist_node n ON n.groupid OPERATOR(pg_catalog.=) p.groupid "
							   "WHERE p.shardid OPERATOR(pg_catalog.=) $1), 'no node yet') "
							   "FROM pg_catalog.pg_dist_partition d "
							   "WHERE d.logicalrelid OPERATOR(pg_catalog.=) $2 "
							   "AND NOT EXISTS (SELECT FROM pg_catalog.pg_dist_placement p "
							   "WHERE p.shardid OPERATOR(pg_catalog.=) $1 AND p.groupid OPERATOR(pg_catalog.=) "
							   "(SELECT groupid FROM pg_catalog.pg_dist_local_group))",
							   2, types);
	}
	args[0] = Int64GetDatum(shardid);
	args[1] = ObjectIdGetDatum(known_anchor);

	/*
	 * queue.citus_move_shard is moving this shard here (queue._citus_moves,
	 * direction 'in'; or back here, 'out', when unpacking on the target
	 * failed): its queues are packed into queue_citus.moving, which travels
	 * with it, and are unpacked here after the move.
	 */
	if (OidIsValid(moves_relid()))
	{
		if (announced == NULL)
		{
			Oid			types[1] = {INT8OID};

			announced = queue_keep_plan("SELECT FROM queue._citus_moves m "
										"WHERE m.shard_id OPERATOR(pg_catalog.=) $1",
										1, types);
		}
		if (SPI_execute_plan(announced, args, NULL, true, 1) != SPI_OK_SELECT)
			elog(ERROR, "move lookup failed");
		if (SPI_processed > 0)
		{
			lookup_leave(&lk);
			SPI_finish();
			return;
		}
	}
	if (SPI_execute_plan(plan, args, NULL, true, 1) != SPI_OK_SELECT)
		elog(ERROR, "placement lookup failed");
	if (SPI_processed > 0)
		from = SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1);
	lookup_leave(&lk);
	if (from != NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("the shards of queue_citus.placements hold queues and cannot be moved, copied or split"),
				 errdetail("Shard " INT64_FORMAT " was to be created on a node it is not placed on "
						   "(it is placed on: %s).  Queues are tables of the node they live on and do "
						   "not move with Citus's shards: moving the shard would strand them.",
						   shardid, from),
				 errhint("Move them with queue.citus_move_shard(shard_id, target_node, target_port), "
						 "which moves the shard's queues with it; rebalance other tables by name "
						 "(rebalance_table_shards('table')).")));
	SPI_finish();
}

/*
 * For the SQS endpoint (core_api.h; src/sqs/protocol.c): on a Citus
 * cluster that queue.citus_setup() set up and whose coordinator named the
 * nodes' endpoints (queue.citus_set_sqs_endpoint: the reference table
 * queue_citus.sqs_endpoints), the endpoint URL of the node holding
 * queue_name's shard of the anchor when that is another node, palloc'd in
 * the caller's memory context; NULL otherwise: the request is served here.
 *
 * It runs before the request's role is set, as the worker's superuser, so
 * it reads only what trusted_table allows (the anchor and the endpoints'
 * table a superuser made, plain and distributed: never a schema, view or
 * function of a role's), in a security-restricted operation with the
 * search path pinned, every operator and function qualified.  It never
 * throws for the lookup's own failure: one that fails (a catalog Citus
 * changed, a table being remade) is undone in a subtransaction of its own,
 * the request is served here, and the failure is logged once per process
 * (then at DEBUG1), so that it never fails every tenant's request; the
 * request's timeouts and cancels pass through as they would anywhere.
 * The caller is connected to SPI.
 */
char *
queue_citus_endpoint_of(const char *queue_name)
{
	static SPIPlanPtr owner_plan = NULL;
	static SPIPlanPtr url_plan = NULL;
	static bool logged = false;
	MemoryContext caller = CurrentMemoryContext;
	ResourceOwner owner = CurrentResourceOwner;
	char	   *volatile url = NULL;

	if (!citus_loaded())
		return NULL;
	know_citus();
	if (!OidIsValid(known_anchor) || !OidIsValid(trusted_table(known_ns, "sqs_endpoints")))
		return NULL;

	BeginInternalSubTransaction(NULL);
	MemoryContextSwitchTo(caller);
	PG_TRY();
	{
		Lookup		lk;
		Datum		args[2];
		bool		isnull;
		int32		group;

		lookup_enter(&lk, GetUserId());
		if (owner_plan == NULL)
		{
			Oid			types[2] = {TEXTOID, OIDOID};

			owner_plan = queue_keep_plan("SELECT p.groupid FROM pg_catalog.pg_dist_placement p "
										 "WHERE p.shardid OPERATOR(pg_catalog.=) "
										 "pg_catalog.get_shard_id_for_distribution_column("
										 "$2::pg_catalog.regclass, $1::queue.placement_key) "
										 "AND p.groupid OPERATOR(pg_catalog.<>) "
										 "(SELECT l.groupid FROM pg_catalog.pg_dist_local_group l)",
										 2, types);
		}
		if (url_plan == NULL)
		{
			Oid			types[1] = {INT4OID};

			/* by name: trusted_table said a superuser made it, in a schema of a superuser */
			url_plan = queue_keep_plan("SELECT e.endpoint FROM queue_citus.sqs_endpoints e "
									   "WHERE e.node_group OPERATOR(pg_catalog.=) $1",
									   1, types);
		}
		args[0] = CStringGetTextDatum(queue_name);
		args[1] = ObjectIdGetDatum(known_anchor);
		if (SPI_execute_plan(owner_plan, args, NULL, true, 1) != SPI_OK_SELECT)
			elog(ERROR, "placement lookup failed");
		if (SPI_processed > 0)
		{
			group = DatumGetInt32(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
			args[0] = Int32GetDatum(group);
			if (SPI_execute_plan(url_plan, args, NULL, true, 1) != SPI_OK_SELECT)
				elog(ERROR, "endpoint lookup failed");
			if (SPI_processed > 0 &&
				!heap_attisnull(SPI_tuptable->vals[0], 1, SPI_tuptable->tupdesc))
				url = MemoryContextStrdup(caller, SPI_getvalue(SPI_tuptable->vals[0],
															   SPI_tuptable->tupdesc, 1));
		}
		lookup_leave(&lk);
		ReleaseCurrentSubTransaction();
		MemoryContextSwitchTo(caller);
		CurrentResourceOwner = owner;
	}
	PG_CATCH();
	{
		ErrorData  *edata;

		MemoryContextSwitchTo(caller);
		edata = CopyErrorData();
		FlushErrorState();
		RollbackAndReleaseCurrentSubTransaction();
		MemoryContextSwitchTo(caller);
		CurrentResourceOwner = owner;

		/*
		 * The request's own bounds (its statement timeout, a cancel, its
		 * lock timeout, which exchange.c answers by trying again later) stay
		 * the request's: only a failure of the lookup itself is absorbed.
		 */
		if (edata->sqlerrcode == ERRCODE_QUERY_CANCELED ||
			edata->sqlerrcode == ERRCODE_LOCK_NOT_AVAILABLE ||
			edata->sqlerrcode == ERRCODE_ADMIN_SHUTDOWN)
			ReThrowError(edata);
		ereport(logged ? DEBUG1 : LOG,
				(errmsg("the SQS endpoint could not look up the node of queue \"%s\"; "
						"its requests are served on this node", queue_name),
				 errdetail("%s", edata->message)));
		logged = true;
		FreeErrorData(edata);
		url = NULL;
	}
	PG_END_TRY();
	return url;
}
