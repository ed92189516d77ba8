/*-------------------------------------------------------------------------
 *
 * acl.c
 *	  Who may do what to a queue, and how a call reaches the queue tables.
 *
 * The tables behind queues belong to the extension's owner and no one else
 * may read or write them.  A call comes in as its caller (the API functions
 * are not SECURITY DEFINER, so GetUserId() is exactly the role that called,
 * even from inside another role's SECURITY DEFINER function), is checked
 * against the queue's owner and grants, and only then switches to the
 * tables' owner for its SPI work (queue_enter), with a search path of
 * pg_catalog alone (pg_catalog, then pg_temp from PostgreSQL 17: compat.h)
 * so no object a user created can stand in for ours.
 *
 * Privileges (DESIGN.md "Access"): send; receive (receive, delete,
 * change_visibility); manage (alter, purge, drop, peek, redrive, grant,
 * revoke).  Superusers and the owner hold all; a grant to PUBLIC is a grant
 * to every role.  Anything else is refused with 42501 before a row is
 * touched.
 *
 * A queue's owner and grants are PostgreSQL's own: the owner of its message
 * table queue_data.q<id> and that table's ACL (send = INSERT, receive =
 * UPDATE, manage = TRUNCATE).  Nobody but the tables' owner has USAGE on
 * queue_data, so those table privileges open nothing by themselves; what
 * they buy is everything PostgreSQL does for roles: pg_dump writes owners
 * and grants by name, DROP ROLE is refused while a role owns a queue or
 * holds a grant, and DROP OWNED / REASSIGN OWNED handle queues as tables
 * (the extension's sql_drop event trigger forgets a queue whose message
 * table was dropped).
 *
 * The administrative functions (create, alter, drop, purge, grant, revoke)
 * are PL/pgSQL, reached through queue_admin_call: it notes the caller,
 * enters as the owner, and calls queue._<name>(<same arguments>, caller).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_authid.h"

#include "catalog/namespace.h"
#include "catalog/pg_class.h"
#include "catalog/pg_namespace.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "lib/stringinfo.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "storage/proc.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/hsearch.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/syscache.h"

#include "common/queue_common.h"
#include "storage/queue_storage.h"
#include "access/queue_access.h"

PG_FUNCTION_INFO_V1(queue_admin_call);
PG_FUNCTION_INFO_V1(queue_holds_sql);
PG_FUNCTION_INFO_V1(queue_caller_search_path_sql);
PG_FUNCTION_INFO_V1(queue_holds_shared_sql);

static const char *const priv_names[] = {"send", "receive", "manage"};

/*
 * The owner of the queue tables: the owner of schema queue_data.  Looked
 * up once and kept until pg_namespace changes (a syscache invalidation).
 */
static Oid	cached_owner = InvalidOid;

static void
owner_inval(Datum arg, int cacheid, uint32 hashvalue)
{
	cached_owner = InvalidOid;
}

static Oid
tables_owner(void)
{
	static bool callback_registered = false;
	Oid			nsp;
	HeapTuple	tup;

	if (OidIsValid(cached_owner))
		return cached_owner;
	if (!callback_registered)
	{
		CacheRegisterSyscacheCallback(NAMESPACEOID, owner_inval, (Datum) 0);
		callback_registered = true;
	}
	nsp = get_namespace_oid("queue_data", false);
	tup = SearchSysCache1(NAMESPACEOID, ObjectIdGetDatum(nsp));
	if (!HeapTupleIsValid(tup))
		elog(ERROR, "cache lookup failed for schema %u", nsp);
	cached_owner = ((Form_pg_namespace) GETSTRUCT(tup))->nspowner;
	ReleaseSysCache(tup);
	return cached_owner;
}

/*
 * Become the tables' owner with a pinned search path (compat.h says how).
 * An error on the way out is fine: transaction abort restores the user and
 * the search path.
 */
void
queue_enter(QueueCall *call)
{
	GetUserIdAndSecContext(&call->save_userid, &call->save_sec);
	call->caller = call->save_userid;
	SetUserIdAndSecContext(tables_owner(),
						   call->save_sec | SECURITY_LOCAL_USERID_CHANGE);
	call->search_path_pin = queue_pin_search_path();
}

void
queue_leave(QueueCall *call)
{
	queue_unpin_search_path(call->search_path_pin);
	SetUserIdAndSecContext(call->save_userid, call->save_sec);
}

/*
 * Whether role holds priv on the queue whose message table is relid.
 * Superusers, the owner and the owner's members hold everything;
 * anyone else holds what the table's ACL gives them or PUBLIC (send is
 * INSERT, receive UPDATE, manage TRUNCATE: see queue_priv_mode).  The
 * owner and ACL are read from the syscache, so a committed grant, revoke
 * or REASSIGN OWNED counts from the next statement in every session,
 * whatever the caller's transaction snapshot.
 */
bool
queue_role_holds(Oid relid, Oid role, AclMode mode)
{
	HeapTuple	tup;
	Oid			owner;

	if (superuser_arg(role))
		return true;
	tup = SearchSysCache1(RELOID, ObjectIdGetDatum(relid));
	if (!HeapTupleIsValid(tup))
		return false;			/* dropped under us: holds nothing */
	owner = ((Form_pg_class) GETSTRUCT(tup))->relowner;
	ReleaseSysCache(tup);
	if (role == owner || has_privs_of_role(role, owner))
		return true;
	return pg_class_aclmask(relid, role, mode, ACLMASK_ANY) != 0;
}

/*
 * The same rule for a shared queue, whose owner and grantees (InvalidOid:
 * PUBLIC) for one privilege are its registry row's (DESIGN.md "Storage").
 */
bool
queue_role_holds_shared(Oid role, Oid owner, const Oid *grantees, int n)
{
	if (superuser_arg(role))
		return true;
	if (OidIsValid(owner) && (role == owner || has_privs_of_role(role, owner)))
		return true;
	for (int i = 0; i < n; i++)
		if (!OidIsValid(grantees[i]) || role == grantees[i] ||
			has_privs_of_role(role, grantees[i]))
			return true;
	return false;
}

/*
 * Whether role holds priv (any privilege, if any) on the shared queue
 * queue_id, from its registry row, read as the tables' owner.  False for a
 * queue that is not there or not shared.
 */
bool
queue_holds_by_id(int64 queue_id, Oid role, QueuePriv priv, bool any)
{
	static SPIPlanPtr plan = NULL;
	QueueCall	call;
	Datum		arg = Int64GetDatum(queue_id);
	bool		holds = false;
	int			rc;

	if (superuser_arg(role))
		return true;
	queue_enter(&call);
	SPI_connect();
	if (plan == NULL)
	{
		Oid			types[1] = {INT8OID};

		plan = queue_keep_plan("SELECT owner::pg_catalog.oid, send_roles::pg_catalog.oid[],"
						       " receive_roles::pg_catalog.oid[], manage_roles::pg_catalog.oid[]"
						       " FROM queue._queues WHERE queue_id = $1 AND NOT dedicated",
						       1, types);
	}
	rc = SPI_execute_plan(plan, &arg, NULL, true, 1);
	if (rc != SPI_OK_SELECT)
		elog(ERROR, "queue grants lookup failed: %s", SPI_result_code_string(rc));
	if (SPI_processed == 1)
	{
		HeapTuple	tup = SPI_tuptable->vals[0];
		TupleDesc	desc = SPI_tuptable->tupdesc;
		bool		isnull;
		Oid			owner = DatumGetObjectId(SPI_getbinval(tup, desc, 1, &isnull));

		if (isnull)
			owner = InvalidOid;
		for (int p = 0; p < QPRIV_NUM && !holds; p++)
		{
			Datum		d;
			Datum	   *elems = NULL;
			bool	   *enulls = NULL;
			int			n = 0;
			Oid		   *grantees;

			if (!any && p != (int) priv)
				continue;
			d = SPI_getbinval(tup, desc, p + 2, &isnull);
			if (!isnull)
				deconstruct_array(DatumGetArrayTypeP(d), OIDOID, sizeof(Oid), true,
								  TYPALIGN_INT, &elems, &enulls, &n);
			grantees = palloc(Max(n, 1) * sizeof(Oid));
			for (int i = 0; i < n; i++)
				grantees[i] = enulls[i] ? InvalidOid : DatumGetObjectId(elems[i]);
			holds = queue_role_holds_shared(role, owner, grantees, n);
		}
	}
	SPI_finish();
	queue_leave(&call);
	return holds;
}

/*
 * queue._holds_shared(role, owner, grantees): the rule above, for
 * queue._may (PL/pgSQL).  Not granted to PUBLIC.
 */
Datum
queue_holds_shared_sql(PG_FUNCTION_ARGS)
{
	Oid			role = PG_ARGISNULL(0) ? InvalidOid : PG_GETARG_OID(0);
	Oid			owner = PG_ARGISNULL(1) ? InvalidOid : PG_GETARG_OID(1);
	Datum	   *elems = NULL;
	bool	   *enulls = NULL;
	Oid		   *grantees;
	int			n = 0;

	if (!OidIsValid(role))
		PG_RETURN_BOOL(false);
	if (!PG_ARGISNULL(2))
		deconstruct_array(PG_GETARG_ARRAYTYPE_P(2), REGROLEOID, sizeof(Oid), true,
						  TYPALIGN_INT, &elems, &enulls, &n);
	grantees = palloc(Max(n, 1) * sizeof(Oid));
	for (int i = 0; i < n; i++)
		grantees[i] = enulls[i] ? InvalidOid : DatumGetObjectId(elems[i]);
	PG_RETURN_BOOL(queue_role_holds_shared(role, owner, grantees, n));
}

/* The table privilege that stands for a queue privilege. */
AclMode
queue_priv_mode(QueuePriv priv)
{
	switch (priv)
	{
		case QPRIV_SEND:
			return ACL_INSERT;
		case QPRIV_RECEIVE:
			return ACL_UPDATE;
		case QPRIV_MANAGE:
			return ACL_TRUNCATE;
		default:
			elog(ERROR, "unknown queue privilege %d", (int) priv);
	}
	return 0;					/* keep the compiler quiet */
}

/* Whether role holds priv on q, in either layout. */
bool
queue_meta_role_holds(QueueMeta *q, Oid role, QueuePriv priv)
{
	if (q->shared)
		return queue_role_holds_shared(role, q->owner, q->grantees[priv], q->ngrantees[priv]);
	return queue_role_holds(q->relid, role, queue_priv_mode(priv));
}

/* 42501 unless caller holds priv on q. */
void
queue_check_privilege(QueueMeta *q, Oid caller, QueuePriv priv)
{
	if (queue_meta_role_holds(q, caller, priv))
		return;
	ereport(ERROR,
			(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
			 errmsg("permission denied for queue \"%s\"", q->name),
			 errdetail("This needs the %s privilege on the queue.", priv_names[priv]),
			 errhint("Its owner can run queue.grant('%s', <role>, '{%s}').",
					 q->name, priv_names[priv])));
}

/*
 * queue._holds(queue_id, role, privilege): the same rule for the
 * administrative functions (PL/pgSQL).  Not granted to PUBLIC.
 */
Datum
queue_holds_sql(PG_FUNCTION_ARGS)
{
	Oid			relid = queue_table_relid(PG_GETARG_INT64(0), 'q');
	char	   *p = text_to_cstring(PG_GETARG_TEXT_PP(2));

	for (int i = 0; i < QPRIV_NUM; i++)
		if (strcmp(p, priv_names[i]) == 0)
		{
			if (!OidIsValid(relid))
				PG_RETURN_BOOL(queue_holds_by_id(PG_GETARG_INT64(0), PG_GETARG_OID(1),
												 (QueuePriv) i, false));
			PG_RETURN_BOOL(queue_role_holds(relid, PG_GETARG_OID(1),
											queue_priv_mode((QueuePriv) i)));
		}
	elog(ERROR, "unknown queue privilege \"%s\"", p);
	PG_RETURN_BOOL(false);
}

/*
 * The SQL entry of the administrative functions: queue.<name>(args) calls
 * queue._<name>(args, caller) as the tables' owner.  The statement text is
 * built once per call site (fn_extra) from the function's own name and
 * argument count; only those and "$n" ever enter it.
 */
typedef struct AdminCall
{
	SPIPlanPtr	plan;
	int			nargs;
} AdminCall;

/* The search_path of the administrative call running now (this transaction). */
static char *caller_search_path = NULL;
static LocalTransactionId caller_search_path_lxid = InvalidLocalTransactionId;

/*
 * queue._caller_search_path(): the search_path the session had when it
 * called the administrative function now running (null outside one).
 * create_consumer keeps it: the handler runs under it (DESIGN.md
 * "Consumers").  Not granted to PUBLIC.
 */
Datum
queue_caller_search_path_sql(PG_FUNCTION_ARGS)
{
	if (caller_search_path == NULL ||
		caller_search_path_lxid != QueueMyLocalXid())
		PG_RETURN_NULL();
	PG_RETURN_TEXT_P(cstring_to_text(caller_search_path));
}

/*
 * The prepared statements of the administrative calls, by the calling
 * function's OID, for the life of the backend: one statement per call site
 * (fn_extra) would prepare again at every statement of a session that
 * creates queues one statement at a time.  The plan cache re-plans a
 * statement when the function it calls is replaced.
 */
typedef struct AdminPlan
{
	Oid			fn;				/* hash key */
	AdminCall	call;
} AdminPlan;

static HTAB *admin_plans = NULL;

Datum
queue_admin_call(PG_FUNCTION_ARGS)
{
	AdminCall  *ac = (AdminCall *) fcinfo->flinfo->fn_extra;
	QueueCall	call;
	Datum	   *values;
	char	   *nulls;
	Datum		result;
	bool		isnull;
	int			rc;

	/*
	 * The caller's search_path, before queue_enter pins ours: create_consumer
	 * keeps it for the handler (queue._caller_search_path).
	 */
	caller_search_path = MemoryContextStrdup(TopTransactionContext,
											 namespace_search_path ? namespace_search_path : "");
	caller_search_path_lxid = QueueMyLocalXid();
	queue_enter(&call);
	SPI_connect();
	queue_citus_check_call(fcinfo); /* storage/citus.c */
	if (ac == NULL && admin_plans != NULL)
	{
		AdminPlan  *ap = hash_search(admin_plans, &fcinfo->flinfo->fn_oid, HASH_FIND, NULL);

		if (ap != NULL)
			ac = fcinfo->flinfo->fn_extra = &ap->call;
	}
	if (ac == NULL)
	{
		Oid			fn = fcinfo->flinfo->fn_oid;
		AdminPlan  *ap;
		bool		found;
		Oid		   *declared;
		int			nargs;
		Oid		   *types;
		SPIPlanPtr	plan;
		StringInfoData sql;

		(void) get_func_signature(fn, &declared, &nargs);
		types = palloc((nargs + 1) * sizeof(Oid));
		initStringInfo(&sql);
		appendStringInfo(&sql, "SELECT queue.%s(",
						 quote_identifier(psprintf("_%s", get_func_name(fn))));
		for (int i = 0; i < nargs; i++)
		{
			types[i] = declared[i];
			appendStringInfo(&sql, "$%d, ", i + 1);
		}
		types[nargs] = OIDOID;
		appendStringInfo(&sql, "$%d)", nargs + 1);

		if (admin_plans == NULL)
		{
			HASHCTL		ctl;

			ctl.keysize = sizeof(Oid);
			ctl.entrysize = sizeof(AdminPlan);
			ctl.hcxt = TopMemoryContext;
			admin_plans = hash_create("queue administrative calls", 32, &ctl,
									  HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
		}
		plan = queue_keep_plan(sql.data, nargs + 1, types);
		ap = hash_search(admin_plans, &fn, HASH_ENTER, &found);
		ap->call.nargs = nargs;
		ap->call.plan = plan;
		ac = &ap->call;
		fcinfo->flinfo->fn_extra = ac;
	}

	values = palloc((ac->nargs + 1) * sizeof(Datum));
	nulls = palloc((ac->nargs + 1) * sizeof(char));
	for (int i = 0; i < ac->nargs; i++)
	{
		values[i] = PG_ARGISNULL(i) ? (Datum) 0 : PG_GETARG_DATUM(i);
		nulls[i] = PG_ARGISNULL(i) ? 'n' : ' ';
	}
	values[ac->nargs] = ObjectIdGetDatum(call.caller);
	nulls[ac->nargs] = ' ';

	rc = SPI_execute_plan(ac->plan, values, nulls, false, 1);
	if (rc != SPI_OK_SELECT || SPI_processed != 1)
		elog(ERROR, "queue administrative call failed: %s", SPI_result_code_string(rc));
	result = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull);
	if (!isnull)
		result = SPI_datumTransfer(result,
								   TupleDescAttr(SPI_tuptable->tupdesc, 0)->attbyval,
								   TupleDescAttr(SPI_tuptable->tupdesc, 0)->attlen);
	SPI_finish();
	queue_leave(&call);
	if (isnull)
		PG_RETURN_NULL();
	return result;
}

/*
 * The start of every API call on a queue: enter as the tables' owner,
 * connect SPI, find the queue and check the caller's privilege on it.
 */
QueueMeta *
queue_open(QueueCall *call, text *name, QueuePriv priv)
{
	QueueMeta  *q;

	queue_enter(call);
	SPI_connect();
	queue_citus_check_local(name, "queue_name");	/* storage/citus.c */
	q = queue_lookup(name);
	queue_check_privilege(q, call->caller, priv);
	return q;
}

/* The end of an API call: the other half of queue_open. */
void
queue_close(QueueCall *call)
{
	SPI_finish();
	queue_leave(call);
}

/*
 * Whether a role may log in now, as a login would decide: LOGIN, and its
 * VALID UNTIL (when set) not past.  A key of the SQS endpoint works only
 * while its role may (sigv4.c), and a message move task stops when the
 * role that started it may not any more (move_task.c).
 */
bool
queue_role_may_log_in(Oid role, TimestampTz now)
{
	HeapTuple	tup;
	bool		isnull;
	bool		may = false;

	tup = SearchSysCache1(AUTHOID, ObjectIdGetDatum(role));
	if (HeapTupleIsValid(tup))
	{
		Form_pg_authid form = (Form_pg_authid) GETSTRUCT(tup);
		Datum		until = SysCacheGetAttr(AUTHOID, tup, Anum_pg_authid_rolvaliduntil,
											&isnull);

		may = form->rolcanlogin && (isnull || DatumGetTimestampTz(until) >= now);
		ReleaseSysCache(tup);
	}
	return may;
}
