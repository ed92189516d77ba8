/*-------------------------------------------------------------------------
 *
 * role_refs.c
 *	  Roles that own a consumer or a subscription, or hold an access key,
 *	  cannot be dropped.
 *
 * The owner of a consumer (queue._consumers) or a subscription
 * (queue._subscriptions) is a regrole in our registry, which PostgreSQL
 * does not track.  Roles are cluster-wide and DROP ROLE may run in any
 * database, so the refusal has to come from pg_shdepend: every such owner
 * holds SELECT on the empty table queue._consumer_owners (or
 * queue._subscription_owners), a grant PostgreSQL records there like any
 * other.  Triggers on both registries grant it with a role's first
 * consumer (subscription) and revoke it with its last
 * (queue--1.3--1.3.1.sql).
 *
 * What this file adds around those grants:
 *  - the GRANT and REVOKE themselves (queue._owner_ref_acl), never recorded
 *    as initial privileges of the extension even inside an extension script;
 *  - DROP ROLE in a database with the extension: a 2BP01 naming the
 *    consumers and subscriptions, before PostgreSQL's own (which names the
 *    table here and only counts objects in other databases);
 *  - DROP OWNED BY: an event trigger at its start drops the roles'
 *    consumers and subscriptions (and so their privileges on our two
 *    tables) before PostgreSQL takes their other objects and privileges;
 *  - REASSIGN OWNED BY: fires no event trigger, so the utility hook gives
 *    the roles' consumers and subscriptions to the new owner afterwards.
 *
 * Access keys (1.3.2, access_keys.c) work the same way, with
 * queue._access_key_owners, except that REASSIGN OWNED drops the roles'
 * keys instead of moving them (a key is its role's credential), and that
 * the keys themselves are never dumped while the grants are: a restore's
 * GRANT on queue._access_key_owners is taken back at once (the utility
 * hook, below) when the role holds no key there.
 *
 * The utility hook is only there with shared_preload_libraries.  Without
 * it DROP ROLE still fails (with PostgreSQL's message), DROP OWNED still
 * drops, and REASSIGN OWNED leaves consumers and subscriptions to their
 * old owner, who then still cannot be dropped: never a dangling owner.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/namespace.h"
#include "catalog/pg_type.h"
#include "commands/dbcommands.h"
#include "commands/event_trigger.h"
#include "commands/extension.h"
#include "executor/spi.h"
#include "lib/stringinfo.h"
#include "miscadmin.h"
#include "nodes/makefuncs.h"
#include "nodes/parsenodes.h"
#include "parser/parse_func.h"
#include "utils/acl.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/syscache.h"
#include "commands/trigger.h"

#include "common/queue_common.h"
#include "storage/queue_storage.h"
#include "access/queue_access.h"

PG_FUNCTION_INFO_V1(queue_owner_ref_acl_sql);
PG_FUNCTION_INFO_V1(queue_drop_owned_trigger);
PG_FUNCTION_INFO_V1(queue_queue_roles_trigger);

/* How many consumers, subscriptions and keys a refused DROP ROLE lists. */
#define ROLE_REFS_REPORTED 50

/* queue._owner_ref_acl's own GRANT is running: the utility hook leaves it be. */
static bool in_owner_ref_acl = false;

/*
 * queue._owner_ref_acl(role, what, granted): GRANT (or REVOKE) SELECT ON
 * queue._consumer_owners (what = 'consumer'), queue._subscription_owners
 * ('subscription') or queue._access_key_owners ('access_key') TO (FROM)
 * role.  Inside an extension script
 * PostgreSQL would record the grant in pg_init_privs as one the extension
 * made: pg_dump would leave it out, and before 17 nothing removes a dropped
 * role from there.  So the statement runs with creating_extension off; a
 * GRANT creates no object that would need to join the extension.  Only
 * our table names and an existing role's quoted name enter the statement.
 * Not granted to PUBLIC.
 */
Datum
queue_owner_ref_acl_sql(PG_FUNCTION_ARGS)
{
	Oid			role = PG_GETARG_OID(0);
	char	   *what = text_to_cstring(PG_GETARG_TEXT_PP(1));
	bool		granted = PG_GETARG_BOOL(2);
	bool		save_creating = creating_extension;
	bool		save_in_acl = in_owner_ref_acl;
	const char *table;
	StringInfoData sql;
	volatile int rc = 0;

	if (strcmp(what, "consumer") == 0)
		table = "queue._consumer_owners";
	else if (strcmp(what, "subscription") == 0)
		table = "queue._subscription_owners";
	else if (strcmp(what, "access_key") == 0)
		table = "queue._access_key_owners";
	else if (strcmp(what, "queue") == 0)
		table = "queue._queue_roles";
	else
		elog(ERROR, "unknown owner reference \"%s\"", what);
	initStringInfo(&sql);
	appendStringInfo(&sql, granted ? "GRANT SELECT ON %s TO %s" : "REVOKE SELECT ON %s FROM %s",
					 table, quote_identifier(GetUserNameFromId(role, false)));

	SPI_connect();
	creating_extension = false;
	in_owner_ref_acl = true;
	PG_TRY();
	{
		rc = SPI_execute(sql.data, false, 0);
	}
	PG_FINALLY();
	{
		creating_extension = save_creating;
		in_owner_ref_acl = save_in_acl;
	}
	PG_END_TRY();
	if (rc != SPI_OK_UTILITY)
		elog(ERROR, "%s failed: %s", sql.data, SPI_result_code_string(rc));
	SPI_finish();
	PG_RETURN_VOID();
}

/* Whether the extension is in this database, with queue._<relname>. */
static bool
has_registry(const char *relname)
{
	Oid			nsp;

	if (!OidIsValid(get_extension_oid("queue", true)))
		return false;
	nsp = get_namespace_oid("queue", true);
	return OidIsValid(nsp) && OidIsValid(get_relname_relid(relname, nsp));
}

/* The OIDs of a statement's roles, as an oid[] (they all exist). */
static Datum
role_array(List *roles)
{
	Datum	   *oids = palloc(Max(list_length(roles), 1) * sizeof(Datum));
	int			n = 0;
	ListCell   *lc;

	foreach(lc, roles)
		oids[n++] = ObjectIdGetDatum(get_rolespec_oid(lfirst(lc), false));
	return PointerGetDatum(construct_array(oids, n, OIDOID, sizeof(Oid), true, TYPALIGN_INT));
}

/*
 * Run "SELECT queue.<fn>($1, ...)" as the tables' owner with a pinned
 * search path, when this database's extension has that function (a
 * database not yet updated to 1.3.1 has neither it nor the grants).
 */
static void
call_registry_function(const char *fn, int nargs, Oid *types, Datum *values)
{
	QueueCall	call;
	StringInfoData sql;
	int			rc;

	/* As the tables' owner first: the caller may lack USAGE on schema queue. */
	queue_enter(&call);
	if (!OidIsValid(LookupFuncName(list_make2(makeString("queue"), makeString(pstrdup(fn))),
								   nargs, types, true)))
	{
		queue_leave(&call);
		return;
	}
	initStringInfo(&sql);
	appendStringInfo(&sql, "SELECT queue.%s(", fn);
	for (int i = 0; i < nargs; i++)
		appendStringInfo(&sql, "%s$%d", i > 0 ? ", " : "", i + 1);
	appendStringInfoChar(&sql, ')');

	SPI_connect();
	rc = SPI_execute_with_args(sql.data, nargs, types, values, NULL, false, 0);
	if (rc != SPI_OK_SELECT)
		elog(ERROR, "%s failed: %s", sql.data, SPI_result_code_string(rc));
	SPI_finish();
	queue_leave(&call);
}

/*
 * queue._drop_owned_trigger(), an event trigger on DROP OWNED, at
 * ddl_command_start: when the caller may drop the roles' objects (has the
 * privileges of each role, what DROP OWNED itself checks next; otherwise
 * it refuses and nothing is done), their consumers and subscriptions go
 * (queue._drop_owned_refs), and with them the roles' privileges on
 * queue._consumer_owners and _subscription_owners, under the locks under
 * which those change.  Should DROP OWNED fail afterwards, its transaction
 * takes all of it back.  Only at the start: a ddl_command_end trigger
 * would make PostgreSQL collect every DDL command of every session.
 */
Datum
queue_drop_owned_trigger(PG_FUNCTION_ARGS)
{
	EventTriggerData *trigdata;
	DropOwnedStmt *stmt;
	Oid			types[1] = {OIDARRAYOID};
	Datum		values[1];
	ListCell   *lc;

	if (!CALLED_AS_EVENT_TRIGGER(fcinfo))
		ereport(ERROR,
				(errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
				 errmsg("queue._drop_owned_trigger() may only be called as an event trigger")));
	trigdata = (EventTriggerData *) fcinfo->context;
	if (!IsA(trigdata->parsetree, DropOwnedStmt) || !has_registry("_consumer_owners"))
		PG_RETURN_VOID();
	stmt = (DropOwnedStmt *) trigdata->parsetree;
	foreach(lc, stmt->roles)
	{
		Oid			role = get_rolespec_oid(lfirst(lc), true);

		if (!OidIsValid(role) || !has_privs_of_role(GetUserId(), role))
			PG_RETURN_VOID();	/* DROP OWNED refuses: leave it to say why */
	}
	values[0] = role_array(stmt->roles);
	call_registry_function("_drop_owned_refs", 1, types, values);
	PG_RETURN_VOID();
}

/*
 * DROP ROLE of a role that owns a consumer or a subscription, or holds an
 * access key here: refused with 2BP01 and their names, as PostgreSQL
 * refuses the owner of a table.  Read as the tables' owner (the registries
 * are not readable by others), from the catalogs the database's version of
 * the extension has.
 */
static void
check_drop_role(DropRoleStmt *stmt)
{
	bool		consumers = has_registry("_consumers");
	bool		subscriptions = has_registry("_subscriptions");
	bool		keys = has_registry("_access_keys");
	bool		shared = has_registry("_queue_roles");
	ListCell   *lc;

	if (!consumers && !subscriptions && !keys && !shared)
		return;
	foreach(lc, stmt->roles)
	{
		RoleSpec   *spec = lfirst(lc);
		Oid			role;
		Oid			types[1] = {OIDOID};
		Datum		values[1];
		QueueCall	call;
		StringInfoData sql;
		StringInfoData detail;
		const char *sep = "";
		uint64		n;
		int			rc;

		/* DROP ROLE says what it says of special names and missing roles. */
		if (spec->roletype != ROLESPEC_CSTRING)
			continue;
		role = get_rolespec_oid(spec, true);
		if (!OidIsValid(role))
			continue;
		values[0] = ObjectIdGetDatum(role);
		initStringInfo(&sql);
		if (consumers)
		{
			appendStringInfoString(&sql,
								   "SELECT pg_catalog.format('owner of consumer \"%s\"', c.consumer_name)"
								   " FROM queue._consumers c WHERE c.owner::pg_catalog.oid = $1");
			sep = " UNION ALL ";
		}
		if (subscriptions)
		{
			appendStringInfo(&sql, "%s%s", sep,
							 "SELECT pg_catalog.format('owner of subscription of queue \"%s\" to topic \"%s\"',"
							 " q.queue_name, t.topic_name)"
							 " FROM queue._subscriptions s"
							 " JOIN queue._queues q ON q.queue_id = s.queue_id"
							 " JOIN queue._topics t ON t.topic_id = s.topic_id"
							 " WHERE s.owner::pg_catalog.oid = $1");
			sep = " UNION ALL ";
		}
		if (keys)
		{
			appendStringInfo(&sql, "%s%s", sep,
							 "SELECT pg_catalog.format('holder of access key \"%s\"', k.access_key_id)"
							 " FROM queue._access_keys k WHERE k.role::pg_catalog.oid = $1");
			sep = " UNION ALL ";
		}
		/* Shared queues (1.4): the owner and grants are the registry row's. */
		if (shared)
			appendStringInfo(&sql, "%s%s", sep,
							 "SELECT pg_catalog.format('owner of queue \"%s\"', q.queue_name)"
							 " FROM queue._queues q WHERE NOT q.dedicated"
							 " AND q.owner::pg_catalog.oid = $1"
							 " UNION ALL SELECT pg_catalog.format('privileges for queue \"%s\"', q.queue_name)"
							 " FROM queue._queues q WHERE NOT q.dedicated"
							 " AND q.owner::pg_catalog.oid <> $1"
							 " AND $1 = ANY (coalesce(q.send_roles, '{}')::pg_catalog.oid[]"
							 "  OPERATOR(pg_catalog.||) coalesce(q.receive_roles, '{}')::pg_catalog.oid[]"
							 "  OPERATOR(pg_catalog.||) coalesce(q.manage_roles, '{}')::pg_catalog.oid[])");
		appendStringInfoString(&sql, " ORDER BY 1");

		queue_enter(&call);
		SPI_connect();
		rc = SPI_execute_with_args(sql.data, 1, types, values, NULL, true, 0);
		if (rc != SPI_OK_SELECT)
			elog(ERROR, "consumer, subscription and access key lookup failed: %s",
				 SPI_result_code_string(rc));
		n = SPI_processed;
		initStringInfo(&detail);
		for (uint64 i = 0; i < n && i < ROLE_REFS_REPORTED; i++)
		{
			bool		isnull;
			Datum		d = SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 1, &isnull);

			appendStringInfo(&detail, "%s%s", i > 0 ? "\n" : "", TextDatumGetCString(d));
		}
		if (n > ROLE_REFS_REPORTED)
			appendStringInfo(&detail, "\nand " UINT64_FORMAT " other objects",
							 n - ROLE_REFS_REPORTED);
		SPI_finish();
		queue_leave(&call);

		if (n > 0)
			ereport(ERROR,
					(errcode(ERRCODE_DEPENDENT_OBJECTS_STILL_EXIST),
					 errmsg("role \"%s\" cannot be dropped because some objects depend on it",
							GetUserNameFromId(role, false)),
					 errdetail_internal("%s", detail.data),
					 errhint("Drop them with queue.drop_consumer, queue.unsubscribe or "
							 "queue.drop_access_key, or use DROP OWNED BY or REASSIGN OWNED BY "
							 "in database \"%s\".",
							 get_database_name(MyDatabaseId))));
	}
}

/*
 * GRANT ... ON queue._access_key_owners TO roles, not made by
 * queue._owner_ref_acl: a restore's, since pg_dump writes the grants of
 * key holders but not their keys.  Once it is done, each grantee is synced
 * (queue._sync_owner_ref): one that holds no key here loses the privilege
 * again, so a restored database does not keep a role from being dropped
 * for keys it no longer has.
 */
static void
sync_granted_key_holders(GrantStmt *stmt)
{
	Oid			nsp;
	Oid			table;
	bool		ours = false;
	ListCell   *lc;

	if (in_owner_ref_acl || !stmt->is_grant || stmt->objtype != OBJECT_TABLE ||
		stmt->targtype != ACL_TARGET_OBJECT || !has_registry("_access_key_owners"))
		return;
	nsp = get_namespace_oid("queue", false);
	table = get_relname_relid("_access_key_owners", nsp);
	foreach(lc, stmt->objects)
	{
		RangeVar   *rv = lfirst(lc);

		if (RangeVarGetRelid(rv, NoLock, true) == table)
			ours = true;
	}
	if (!ours)
		return;
	foreach(lc, stmt->grantees)
	{
		RoleSpec   *spec = lfirst(lc);
		Oid			types[2] = {OIDOID, TEXTOID};
		Datum		values[2];

		if (spec->roletype == ROLESPEC_PUBLIC)
			continue;
		values[0] = ObjectIdGetDatum(get_rolespec_oid(spec, false));
		values[1] = CStringGetTextDatum("access_key");
		call_registry_function("_sync_owner_ref", 2, types, values);
	}
}

/*
 * From the utility hook (worker.c), before the statement runs (done =
 * false) and after it succeeded (done = true).
 */
void
queue_role_refs_utility(Node *stmt, bool done)
{
	if (!done && IsA(stmt, DropRoleStmt))
		check_drop_role((DropRoleStmt *) stmt);
	else if (done && IsA(stmt, GrantStmt))
		sync_granted_key_holders((GrantStmt *) stmt);
	else if (done && IsA(stmt, ReassignOwnedStmt) && has_registry("_consumer_owners"))
	{
		ReassignOwnedStmt *r = (ReassignOwnedStmt *) stmt;
		Oid			types[2] = {OIDARRAYOID, OIDOID};
		Datum		values[2];

		values[0] = role_array(r->roles);
		values[1] = ObjectIdGetDatum(get_rolespec_oid(r->newrole, false));
		call_registry_function("_reassign_owned_refs", 2, types, values);
	}
}

/* ------------------------------------------------------------------------
 * Shared queues' owners and grantees (DESIGN.md "Storage", 1.4)
 * ------------------------------------------------------------------------
 */

/*
 * The roles a shared queue's registry row names (owner, send_roles,
 * receive_roles, manage_roles; not PUBLIC), each once; none for a
 * dedicated queue's row, whose table's grants PostgreSQL tracks.
 */
static List *
row_roles(HeapTuple tup, TupleDesc desc)
{
	static const char *const cols[] = {"owner", "send_roles", "receive_roles", "manage_roles"};
	bool		isnull;
	Datum		d;
	List	   *roles = NIL;

	if (tup == NULL)
		return NIL;
	d = heap_getattr(tup, SPI_fnumber(desc, "dedicated"), desc, &isnull);
	if (isnull || DatumGetBool(d))
		return NIL;
	for (int c = 0; c < lengthof(cols); c++)
	{
		Datum	   *elems;
		bool	   *nulls;
		int			nelems;

		d = heap_getattr(tup, SPI_fnumber(desc, cols[c]), desc, &isnull);
		if (isnull)
			continue;
		if (c == 0)
		{
			elems = &d;
			nulls = &isnull;
			nelems = 1;
		}
		else
			deconstruct_array(DatumGetArrayTypeP(d), REGROLEOID, sizeof(Oid), true,
							  TYPALIGN_INT, &elems, &nulls, &nelems);
		for (int i = 0; i < nelems; i++)
			if (!nulls[i] && OidIsValid(DatumGetObjectId(elems[i])))
				roles = list_append_unique_oid(roles, DatumGetObjectId(elems[i]));
	}
	return roles;
}

/* Whether role holds SELECT on relid by a grant of its own (not by membership). */
static bool
granted_select(Oid relid, Oid role)
{
	HeapTuple	t = SearchSysCache1(RELOID, ObjectIdGetDatum(relid));
	bool		found = false;

	if (HeapTupleIsValid(t))
	{
		bool		isnull;
		Datum		d = SysCacheGetAttr(RELOID, t, Anum_pg_class_relacl, &isnull);

		if (!isnull)
		{
			Acl		   *acl = DatumGetAclP(d);
			AclItem    *items = ACL_DAT(acl);

			for (int i = 0; i < ACL_NUM(acl) && !found; i++)
				found = items[i].ai_grantee == role &&
					(ACLITEM_GET_PRIVS(items[i]) & ACL_SELECT) != 0;
		}
		ReleaseSysCache(t);
	}
	return found;
}

/* queue._sync_owner_ref(role, 'queue'), in the trigger's schema. */
static void
sync_queue_role(Oid nsp, Oid role)
{
	Oid			types[1] = {OIDOID};
	Datum		values[1] = {ObjectIdGetDatum(role)};
	int			rc;

	rc = SPI_execute_with_args(psprintf("SELECT %s._sync_owner_ref($1, 'queue')",
										quote_identifier(get_namespace_name(nsp))),
							   1, types, values, NULL, false, 0);
	if (rc != SPI_OK_SELECT)
		elog(ERROR, "queue role sync failed: %s", SPI_result_code_string(rc));
}

/*
 * queue._queue_roles_trigger(), AFTER INSERT OR DELETE OR UPDATE of the
 * layout, owner and grantees on queue._queues, for each row: a role a
 * shared queue's row names holds SELECT on queue._queue_roles (granted with
 * its first such queue, queue._sync_owner_ref), and a role no row names
 * any more gives it up.  A role that already holds it costs a look at the
 * table's ACL: every create but a role's first.  1.4's was PL/pgSQL (1.5).
 */
Datum
queue_queue_roles_trigger(PG_FUNCTION_ARGS)
{
	TriggerData *td = (TriggerData *) fcinfo->context;
	TupleDesc	desc;
	Oid			nsp;
	Oid			relid;
	List	   *new_roles;
	List	   *old_roles;
	List	   *sync = NIL;
	ListCell   *lc;

	if (!CALLED_AS_TRIGGER(fcinfo) || !TRIGGER_FIRED_FOR_ROW(td->tg_event))
		elog(ERROR, "queue._queue_roles_trigger() must be called as a row trigger");
	desc = RelationGetDescr(td->tg_relation);
	nsp = RelationGetNamespace(td->tg_relation);
	relid = get_relname_relid("_queue_roles", nsp);
	if (!OidIsValid(relid))
		elog(ERROR, "relation queue._queue_roles is missing");
	new_roles = row_roles(TRIGGER_FIRED_BY_UPDATE(td->tg_event) ? td->tg_newtuple :
						  TRIGGER_FIRED_BY_INSERT(td->tg_event) ? td->tg_trigtuple : NULL,
						  desc);
	old_roles = row_roles(TRIGGER_FIRED_BY_INSERT(td->tg_event) ? NULL : td->tg_trigtuple,
						  desc);

	foreach(lc, new_roles)
		if (!granted_select(relid, lfirst_oid(lc)))
			sync = lappend_oid(sync, lfirst_oid(lc));
	/* a role the row names no more (its last queue: the grant goes) */
	sync = list_concat(sync, list_difference_oid(old_roles, new_roles));
	if (sync != NIL)
	{
		SPI_connect();
		foreach(lc, sync)
			sync_queue_role(nsp, lfirst_oid(lc));
		SPI_finish();
	}
	return PointerGetDatum(NULL);
}
