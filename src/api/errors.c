/*-------------------------------------------------------------------------
 *
 * errors.c
 *	  What an error of the SQL API shows: its message, detail, hint and
 *	  SQLSTATE, and the context of the caller's own code, never the frames
 *	  of the extension's internals (PL/pgSQL functions queue._*, the SQL
 *	  statements the C entry points run through SPI).  PostgreSQL's own
 *	  built-ins show no context of their insides either.
 *
 * How: every call of a public function of schema queue (C or PL/pgSQL,
 * not the operator support functions placement_key_*) passes through
 * PostgreSQL's function manager hook (needs_fmgr_hook / fmgr_hook, as
 * sepgsql uses them; the call goes through fmgr_security_definer, which
 * switches no user for these functions).  The outermost such call puts a
 * marker on error_context_stack, so an error raised anywhere inside gets,
 * as its context, the inside's lines, then the marker, then the caller's
 * lines.  When the error leaves that call (FHET_ABORT) the lines up to the
 * marker are cut and the error re-thrown: a user's PL/pgSQL function that
 * calls queue.create keeps its "PL/pgSQL function f() line 3 at PERFORM",
 * and GET STACKED DIAGNOSTICS ... PG_EXCEPTION_CONTEXT sees the same.  A
 * notice or warning (SQLSTATE class 00, 01 or 02) raised inside is sent
 * before any call ends, so it gets no mark (psql shows a notice's context
 * only when asked: SHOW_CONTEXT always); none of ours is raised from
 * inside an internal statement.
 * Internal errors (SQLSTATE class XX, a defect of ours) keep their
 * context: it is what a bug report needs.
 *
 * Nothing here reads an object by a name a user chose: the function's
 * own pg_proc row and its schema's name, by OID.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "access/xact.h"
#include "catalog/pg_language.h"
#include "catalog/pg_namespace.h"
#include "catalog/pg_proc.h"
#include "fmgr.h"
#include "utils/builtins.h"
#include "utils/elog.h"
#include "utils/hsearch.h"
#include "utils/inval.h"
#include "utils/syscache.h"

#include "api/queue_api.h"

/* A context line no callback of PostgreSQL's or a user's writes. */
#define API_MARK "\x1fqueue\x1f"

static needs_fmgr_hook_type prev_needs_fmgr_hook = NULL;
static fmgr_hook_type prev_fmgr_hook = NULL;

/*
 * The calls of API functions under way, innermost last (an end or abort
 * is ours when it names the innermost); the outermost holds the mark.  A
 * call deeper than API_MAX_DEPTH is not counted: its inside is cut with
 * its callers'.
 */
#define API_MAX_DEPTH 256
static FmgrInfo *api_frames[API_MAX_DEPTH];
static int	api_depth = 0;
static ErrorContextCallback api_mark;

/* Which function OIDs are API functions; emptied on any pg_proc change. */
typedef struct ApiFn
{
	Oid			oid;
	bool		api;
} ApiFn;
static HTAB *api_fns = NULL;

static void
api_mark_callback(void *arg)
{
	int			category = ERRCODE_TO_CATEGORY(geterrcode());

	if (category == ERRCODE_SUCCESSFUL_COMPLETION || category == ERRCODE_WARNING ||
		category == ERRCODE_NO_DATA)
		return;
	errcontext("%s", API_MARK);
}

/*
 * ctx without its lines up to and including the last mark (NULL when
 * nothing is left); ctx itself when it holds no mark.
 */
static char *
cut_context(char *ctx, bool keep_inside)
{
	char	   *p = ctx;
	char	   *after = NULL;
	size_t		marklen = strlen(API_MARK);

	if (ctx == NULL)
		return NULL;
	while ((p = strstr(p, API_MARK)) != NULL)
	{
		if ((p == ctx || p[-1] == '\n') && (p[marklen] == '\n' || p[marklen] == '\0'))
			after = p;
		p += marklen;
	}
	if (after == NULL)
		return ctx;
	if (keep_inside)
	{
		/* only the mark's own line goes */
		char	   *rest = after + marklen;
		size_t		head = after - ctx;

		if (*rest == '\n')
			rest++;
		else if (head > 0)
			head--;				/* a last-line mark: the newline before it */
		if (head == 0 && *rest == '\0')
			return NULL;
		return psprintf("%.*s%s", (int) head, ctx, rest);
	}
	after += marklen;
	if (*after == '\n')
		after++;
	return *after == '\0' ? NULL : pstrdup(after);
}

static bool
internal_error(int sqlerrcode)
{
	return ERRCODE_TO_CATEGORY(sqlerrcode) == ERRCODE_INTERNAL_ERROR;
}

/*
 * A public function of schema queue: not SQL or internal language (the
 * SQL wrappers stay inlinable), not underscore-named (internals), not an
 * operator class's support function (called per comparison); a C one
 * from this library.
 */
static bool
api_function_lookup(Oid fn_oid)
{
	HeapTuple	tup;
	Form_pg_proc p;
	bool		result = false;

	tup = SearchSysCache1(PROCOID, ObjectIdGetDatum(fn_oid));
	if (!HeapTupleIsValid(tup))
		return false;
	p = (Form_pg_proc) GETSTRUCT(tup);
	if (p->prolang != SQLlanguageId && p->prolang != INTERNALlanguageId &&
		NameStr(p->proname)[0] != '_' &&
		strncmp(NameStr(p->proname), "placement_key_", 14) != 0)
	{
		HeapTuple	nsp = SearchSysCache1(NAMESPACEOID, ObjectIdGetDatum(p->pronamespace));

		if (HeapTupleIsValid(nsp))
		{
			result = strcmp(NameStr(((Form_pg_namespace) GETSTRUCT(nsp))->nspname), "queue") == 0;
			ReleaseSysCache(nsp);
		}
		if (result && p->prolang == ClanguageId)
		{
			bool		isnull;
			Datum		bin = SysCacheGetAttr(PROCOID, tup, Anum_pg_proc_probin, &isnull);

			result = !isnull && strcmp(TextDatumGetCString(bin), "$libdir/queue") == 0;
		}
	}
	ReleaseSysCache(tup);
	return result;
}

static void
api_fns_inval(Datum arg, int cacheid, uint32 hashvalue)
{
	if (api_fns != NULL)
	{
		hash_destroy(api_fns);
		api_fns = NULL;
	}
}

static bool
api_function(Oid fn_oid)
{
	ApiFn	   *e;
	bool		found;

	if (fn_oid < FirstNormalObjectId)
		return false;
	if (api_fns == NULL)
	{
		HASHCTL		ctl;

		ctl.keysize = sizeof(Oid);
		ctl.entrysize = sizeof(ApiFn);
		api_fns = hash_create("queue API functions", 64, &ctl, HASH_ELEM | HASH_BLOBS);
	}
	e = hash_search(api_fns, &fn_oid, HASH_FIND, NULL);
	if (e != NULL)
		return e->api;
	found = api_function_lookup(fn_oid);
	/* (the lookup may have taken in an invalidation that emptied the cache) */
	if (api_fns != NULL)
	{
		e = hash_search(api_fns, &fn_oid, HASH_ENTER, NULL);
		e->api = found;
	}
	return found;
}

/* Take the mark off error_context_stack, wherever it is. */
static void
api_unmark(void)
{
	ErrorContextCallback **link = &error_context_stack;

	while (*link != NULL && *link != &api_mark)
		link = &(*link)->previous;
	if (*link == &api_mark)
		*link = api_mark.previous;
}

static bool
api_needs_fmgr_hook(Oid fn_oid)
{
	if (prev_needs_fmgr_hook && (*prev_needs_fmgr_hook) (fn_oid))
		return true;
	return api_function(fn_oid);
}

static void
api_fmgr_hook(FmgrHookEventType event, FmgrInfo *flinfo, Datum *private)
{
	if (prev_fmgr_hook)
		(*prev_fmgr_hook) (event, flinfo, private);

	/* Other functions come here too (SECURITY DEFINER, SET, other hooks'). */
	if (event == FHET_START)
	{
		if (api_depth >= API_MAX_DEPTH || !api_function(flinfo->fn_oid))
			return;
		if (api_depth == 0)
		{
			api_mark.callback = api_mark_callback;
			api_mark.arg = NULL;
			api_mark.previous = error_context_stack;
			error_context_stack = &api_mark;
		}
		api_frames[api_depth++] = flinfo;
		return;
	}
	if (api_depth == 0 || api_frames[api_depth - 1] != flinfo)
		return;
	if (--api_depth > 0)
		return;
	api_unmark();
	if (event == FHET_ABORT)
	{
		/* fmgr_security_definer's PG_CATCH: the error is ours to edit */
		MemoryContext cxt = MemoryContextSwitchTo(flinfo->fn_mcxt);
		ErrorData  *edata = CopyErrorData();

		FlushErrorState();
		edata->context = cut_context(edata->context, internal_error(edata->sqlerrcode));
		MemoryContextSwitchTo(cxt);
		ReThrowError(edata);
	}
}

/* However a transaction ends, no call of ours is under way. */
static void
api_xact_callback(XactEvent event, void *arg)
{
	if (api_depth > 0)
	{
		api_depth = 0;
		api_unmark();
	}
}

void
queue_api_errors_init(void)
{
	prev_needs_fmgr_hook = needs_fmgr_hook;
	needs_fmgr_hook = api_needs_fmgr_hook;
	prev_fmgr_hook = fmgr_hook;
	fmgr_hook = api_fmgr_hook;
	CacheRegisterSyscacheCallback(PROCOID, api_fns_inval, (Datum) 0);
	RegisterXactCallback(api_xact_callback, NULL);
}
