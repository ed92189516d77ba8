/*-------------------------------------------------------------------------
 *
 * topic_catalog.c
 *	  What a backend knows of topics: the per-backend cache of a topic and
 *	  its subscriptions, who holds which privilege on a topic, the topic
 *	  counters, and the worker's sweep of topic deduplication ids.
 *
 * The subscriptions of a topic are cached per backend and dropped when the
 * topic's table gets a relcache invalidation (subscribe and unsubscribe
 * send one; drop_topic drops the table) or the queue registry does (a
 * queue was created or dropped): a publish takes in every change committed
 * before its statement began, without locking anything a subscriber takes.
 *
 * A topic's privileges are those of its table queue_data.t<id>, by acl.c's
 * rule (owner, superuser, or the ACL): publish = INSERT, manage = TRUNCATE.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "catalog/namespace.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/hsearch.h"
#include "utils/inval.h"
#include "utils/jsonb.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"

#include "common/queue_common.h"
#include "storage/queue_storage.h"
#include "access/queue_access.h"
#include "state/queue_state.h"
#include "push/queue_push.h"

PG_FUNCTION_INFO_V1(queue_topic_holds_sql);
PG_FUNCTION_INFO_V1(queue_topic_counter_sql);
PG_FUNCTION_INFO_V1(queue_may_see_topic_sql);
PG_FUNCTION_INFO_V1(queue_topic_counter_reset_sql);

static HTAB *topic_cache = NULL;

/* A copy of a varlena in cxt. */
static void *
copy_varlena(MemoryContext cxt, const void *v)
{
	Size		len = VARSIZE_ANY(v);
	void	   *c = MemoryContextAlloc(cxt, len);

	memcpy(c, v, len);
	return c;
}
static uint64 topic_inval_count = 0;
static Oid	registry_relid[2];	/* queue._queues, queue._subscriptions */

static void
topic_inval(Datum arg, Oid relid)
{
	HASH_SEQ_STATUS st;
	TopicMeta  *t;
	bool		all = !OidIsValid(relid) || relid == registry_relid[0] ||
		relid == registry_relid[1];

	topic_inval_count++;
	if (!OidIsValid(relid))
		registry_relid[0] = registry_relid[1] = InvalidOid;
	hash_seq_init(&st, topic_cache);
	while ((t = hash_seq_search(&st)) != NULL)
		if (all || t->relid == relid)
			t->valid = false;
}

/* A text[] datum as a copied array of its elements in cxt; -1 for NULL. */
static int
copy_text_list(Datum d, bool isnull, MemoryContext cxt, Datum **out)
{
	Datum	   *vals;
	int			n;

	if (isnull)
		return -1;
	deconstruct_array(DatumGetArrayTypeP(d), TEXTOID, -1, false, TYPALIGN_INT,
					  &vals, NULL, &n);
	*out = MemoryContextAlloc(cxt, Max(n, 1) * sizeof(Datum));
	for (int i = 0; i < n; i++)
		(*out)[i] = PointerGetDatum(copy_varlena(cxt, DatumGetPointer(vals[i])));
	return n;
}

static void
load_subscriptions(TopicMeta *t)
{
	static SPIPlanPtr plan = NULL;
	Oid			types[1] = {INT8OID};
	Datum		arg = Int64GetDatum(t->id);
	int			rc;

	if (plan == NULL)
		plan = queue_keep_plan("SELECT s.subscription_id, s.queue_id, q.queue_name, s.owner::oid,"
						 " s.filter_tags, s.binding_keys, s.filter_policy"
						 " FROM queue._subscriptions s"
						 " JOIN queue._queues q ON q.queue_id = s.queue_id"
						 " WHERE s.topic_id = $1 ORDER BY s.subscription_id", 1, types);
	rc = SPI_execute_snapshot(plan, &arg, NULL, GetLatestSnapshot(),
							  InvalidSnapshot, true, false, 0);
	if (rc != SPI_OK_SELECT)
		elog(ERROR, "topic subscriptions lookup failed: %s", SPI_result_code_string(rc));
	t->nsubs = SPI_processed;
	t->subs = MemoryContextAllocZero(t->cxt, Max(t->nsubs, 1) * sizeof(TopicSub));
	for (int i = 0; i < t->nsubs; i++)
	{
		HeapTuple	tup = SPI_tuptable->vals[i];
		TupleDesc	desc = SPI_tuptable->tupdesc;
		TopicSub   *s = &t->subs[i];
		bool		isnull;
		Datum		d;

		s->id = DatumGetInt64(SPI_getbinval(tup, desc, 1, &isnull));
		s->queue_id = DatumGetInt64(SPI_getbinval(tup, desc, 2, &isnull));
		d = SPI_getbinval(tup, desc, 3, &isnull);
		s->queue_name = copy_varlena(t->cxt, DatumGetPointer(d));
		s->owner = DatumGetObjectId(SPI_getbinval(tup, desc, 4, &isnull));
		d = SPI_getbinval(tup, desc, 5, &isnull);
		s->ntags = copy_text_list(d, isnull, t->cxt, &s->tags);
		d = SPI_getbinval(tup, desc, 6, &isnull);
		{
			Datum	   *keys;

			s->nkeys = copy_text_list(d, isnull, t->cxt, &keys);
			if (s->nkeys >= 0)
			{
				s->keys = MemoryContextAlloc(t->cxt, Max(s->nkeys, 1) * sizeof(char *));
				for (int k = 0; k < s->nkeys; k++)
					s->keys[k] = MemoryContextStrdup(t->cxt, TextDatumGetCString(keys[k]));
			}
		}
		d = SPI_getbinval(tup, desc, 7, &isnull);
		if (!isnull)
		{
			Jsonb	   *jb = DatumGetJsonbP(d);

			s->policy = copy_varlena(t->cxt, jb);
		}
	}
}

/* Read one topic's registry row and subscriptions; false if none. */
static bool
load_topic(TopicMeta *t, text *name)
{
	static SPIPlanPtr plan = NULL;
	Oid			types[2] = {TEXTOID, INT8OID};
	Datum		arg = PointerGetDatum(name);
	char		relname[NAMEDATALEN];
	bool		isnull;
	int			rc;

	if (plan == NULL)
		plan = queue_keep_plan("SELECT topic_id, fifo FROM queue._topics WHERE topic_name = $1",
						 1, types);
	/* The latest snapshot, not the caller's: see catalog.c's load_entry. */
	rc = SPI_execute_snapshot(plan, &arg, NULL, GetLatestSnapshot(),
							  InvalidSnapshot, true, false, 1);
	if (rc != SPI_OK_SELECT)
		elog(ERROR, "topic lookup failed: %s", SPI_result_code_string(rc));
	if (SPI_processed == 0)
		return false;
	t->id = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
	t->fifo = DatumGetBool(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 2, &isnull));
	snprintf(relname, sizeof(relname), "t" INT64_FORMAT, t->id);
	t->relid = queue_data_relid(relname);
	if (!OidIsValid(t->relid))
		return false;

	if (t->cxt == NULL)
		t->cxt = AllocSetContextCreate(CacheMemoryContext, "queue topic",
									   ALLOCSET_SMALL_SIZES);
	else
		MemoryContextReset(t->cxt);
	load_subscriptions(t);

	/*
	 * Claim a deduplication id: a row accepted within the window stays
	 * (nothing is returned: a duplicate); an expired one is taken over.  A
	 * concurrent claim of the same id waits for the first to finish.
	 */
	snprintf(relname, sizeof(relname), "queue_data.t" INT64_FORMAT, t->id);
	{
		Oid			ctypes[4] = {TEXTOID, INT8OID, TIMESTAMPTZOID, INTERVALOID};

		/* Kept plans live outside t->cxt: free those of the last load. */
		if (t->claim != NULL)
			SPI_freeplan(t->claim);
		if (t->original != NULL)
			SPI_freeplan(t->original);
		t->claim = t->original = NULL;
		t->claim = queue_keep_plan(psprintf("INSERT INTO %s AS d (deduplication_id, message_id, accepted_at)"
									  " VALUES ($1, $2, $3)"
									  " ON CONFLICT (deduplication_id) DO UPDATE"
									  " SET message_id = excluded.message_id, accepted_at = excluded.accepted_at"
									  " WHERE d.accepted_at <= $3 - $4"
									  " RETURNING message_id", relname), 4, ctypes);
		t->original = queue_keep_plan(psprintf("SELECT message_id FROM %s WHERE deduplication_id = $1",
										 relname), 1, ctypes);
	}
	return true;
}

/* The topic by name, for a caller inside SPI_connect; 42704 if none. */
TopicMeta *
queue_topic_lookup(text *name)
{
	char		key[QUEUE_NAME_MAX + 1];
	TopicMeta  *t;
	bool		found;
	uint64		before;

	queue_check_name(name, "topic_name");
	memset(key, 0, sizeof(key));
	memcpy(key, VARDATA_ANY(name), VARSIZE_ANY_EXHDR(name));
	if (topic_cache == NULL)
	{
		HASHCTL		ctl;

		ctl.keysize = sizeof(key);
		ctl.entrysize = sizeof(TopicMeta);
		ctl.hcxt = CacheMemoryContext;
		topic_cache = hash_create("queue topics", 16, &ctl,
								  HASH_ELEM | HASH_STRINGS | HASH_CONTEXT);
		CacheRegisterRelcacheCallback(topic_inval, (Datum) 0);
	}
	if (!OidIsValid(registry_relid[0]))
	{
		registry_relid[0] = get_relname_relid("_queues", get_namespace_oid("queue", false));
		registry_relid[1] = get_relname_relid("_subscriptions", get_namespace_oid("queue", false));
	}
	/* Hear about subscriptions and drops committed before this statement. */
	AcceptInvalidationMessages();

	t = hash_search(topic_cache, key, HASH_ENTER, &found);
	if (!found)
	{
		t->cxt = NULL;
		t->claim = t->original = NULL;
		t->valid = false;
	}
	if (t->valid)
		return t;
	before = topic_inval_count;
	if (!load_topic(t, name))
	{
		t->valid = false;
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("topic \"%s\" does not exist", key)));
	}
	t->valid = (topic_inval_count == before);
	return t;
}

/* Whether role holds any of mode on the topic of this id. */
bool
queue_topic_role_holds(int64 topic_id, Oid role, AclMode mode)
{
	char		relname[NAMEDATALEN];
	Oid			relid;

	snprintf(relname, sizeof(relname), "t" INT64_FORMAT, topic_id);
	relid = queue_data_relid(relname);
	return OidIsValid(relid) && queue_role_holds(relid, role, mode);
}

/*
 * queue._topic_holds(topic_id, role, privilege): whether role holds
 * 'publish', 'manage' or 'any' on the topic, for the PL/pgSQL side.  Not
 * granted to PUBLIC.
 */
Datum
queue_topic_holds_sql(PG_FUNCTION_ARGS)
{
	Oid			role = PG_GETARG_OID(1);
	char	   *p = text_to_cstring(PG_GETARG_TEXT_PP(2));
	AclMode		mode;

	if (strcmp(p, "publish") == 0)
		mode = ACL_INSERT;
	else if (strcmp(p, "manage") == 0)
		mode = ACL_TRUNCATE;
	else if (strcmp(p, "any") == 0)
		mode = ACL_INSERT | ACL_TRUNCATE;
	else
		elog(ERROR, "unknown topic privilege \"%s\"", p);
	PG_RETURN_BOOL(queue_topic_role_holds(PG_GETARG_INT64(0), role, mode));
}

/*
 * queue._may_see_topic(topic_id): whether the current role holds a
 * privilege on the topic, the topic views' row filter.  Callable by every
 * role: it answers only for the role that calls.
 */
Datum
queue_may_see_topic_sql(PG_FUNCTION_ARGS)
{
	if (PG_ARGISNULL(0))
		PG_RETURN_BOOL(false);
	PG_RETURN_BOOL(queue_topic_role_holds(PG_GETARG_INT64(0), GetUserId(),
									ACL_INSERT | ACL_TRUNCATE));
}

/*
 * queue._topic_counter(topic_id, subscription_id, queue_id): publishes of a
 * topic (subscription_id null) or deliveries of a subscription (to queue
 * queue_id); null without shared memory.  42501 unless the current role
 * holds a privilege on the topic, or on the queue of the subscription (the
 * views' rule).
 */
Datum
queue_topic_counter_sql(PG_FUNCTION_ARGS)
{
	int64		counts[QC_NUM];
	int64		key = PG_ARGISNULL(1) ? QUEUE_TOPIC_COUNTER_KEY(PG_GETARG_INT64(0)) :
		QUEUE_DELIVERY_COUNTER_KEY(PG_GETARG_INT64(1));

	if (PG_ARGISNULL(0))
		PG_RETURN_NULL();
	if (!queue_topic_role_holds(PG_GETARG_INT64(0), GetUserId(), ACL_INSERT | ACL_TRUNCATE) &&
		(PG_ARGISNULL(1) || PG_ARGISNULL(2) || !queue_may_see(PG_GETARG_INT64(2))))
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("permission denied for topic id " INT64_FORMAT, PG_GETARG_INT64(0)),
				 errdetail("This needs a privilege on the topic, or on the subscribed queue.")));
	if (!queue_counters_read(key, counts))
		PG_RETURN_NULL();
	PG_RETURN_INT64(counts[QC_SENT]);
}

/*
 * queue._topic_counter_reset(topic_id, subscription_id, dropped): a new
 * topic or subscription starts from zero (ids restart when the extension
 * is created again); a dropped one gives its slot back at commit.
 */
Datum
queue_topic_counter_reset_sql(PG_FUNCTION_ARGS)
{
	int64		key = PG_ARGISNULL(1) ? QUEUE_TOPIC_COUNTER_KEY(PG_GETARG_INT64(0)) :
		QUEUE_DELIVERY_COUNTER_KEY(PG_GETARG_INT64(1));

	if (PG_GETARG_BOOL(2))
		queue_forget_counters_at_commit(key);
	else
		queue_reset_counters(key);
	PG_RETURN_VOID();
}

/*
 * The worker's sweep of the topics' deduplication ids whose window has
 * passed (a claim takes over an expired id by itself; this keeps ids that
 * are never sent again from piling up).  At most once a minute; runs its
 * own transaction.  A database whose extension is older than topics has
 * nothing to sweep.  A reload makes it due at once (queue_topic_sweep_now),
 * as it does the queues' sweeps.
 */
static TimestampTz topic_swept_at = 0;

void
queue_topic_sweep(void)
{
	TimestampTz now = GetCurrentTimestamp();
	MemoryContext cxt = CurrentMemoryContext;

	if (!TimestampDifferenceExceeds(topic_swept_at, now, 60 * 1000))
		return;
	topic_swept_at = now;
	PG_TRY();
	{
		int			rc;
		uint64		ntopics;
		int64	   *ids;

		StartTransactionCommand();
		SPI_connect();
		PushActiveSnapshot(GetTransactionSnapshot());
		if (!OidIsValid(get_relname_relid("_topics", get_namespace_oid("queue", true))))
			rc = 0;				/* no topics before 1.2 */
		else
			rc = SPI_execute("SELECT topic_id FROM queue._topics", true, 0);
		if (rc == SPI_OK_SELECT)
		{
			ntopics = SPI_processed;
			ids = palloc(Max(ntopics, 1) * sizeof(int64));
			for (uint64 i = 0; i < ntopics; i++)
			{
				bool		isnull;

				ids[i] = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[i],
													 SPI_tuptable->tupdesc, 1, &isnull));
			}
			for (uint64 i = 0; i < ntopics; i++)
			{
				char		relname[NAMEDATALEN];

				snprintf(relname, sizeof(relname), "t" INT64_FORMAT, ids[i]);
				if (!OidIsValid(queue_data_relid(relname)))
					continue;	/* dropped since */

				/*
				 * Ids an open publish holds are skipped, not waited for
				 * (the worker's lock waits are bounded, elevated.c)
				 */
				(void) SPI_execute(psprintf("DELETE FROM queue_data.t" INT64_FORMAT
											" WHERE ctid OPERATOR(pg_catalog.=) ANY (ARRAY("
											"SELECT ctid FROM queue_data.t" INT64_FORMAT
											" WHERE accepted_at OPERATOR(pg_catalog.<=) (now()"
											" OPERATOR(pg_catalog.-) interval '" INT64_FORMAT " microseconds')"
											" FOR UPDATE SKIP LOCKED))",
											ids[i], ids[i], QUEUE_TOPIC_DEDUP_WINDOW), false, 0);
			}
		}
		SPI_finish();
		PopActiveSnapshot();
		CommitTransactionCommand();
	}
	PG_CATCH();
	{
		/* a topic dropped in an open transaction, say: next time */
		queue_recover(cxt);
	}
	PG_END_TRY();
	MemoryContextSwitchTo(cxt);
}

void
queue_topic_sweep_now(void)
{
	topic_swept_at = 0;
}
