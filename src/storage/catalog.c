/*-------------------------------------------------------------------------
 *
 * catalog.c
 *	  Queue names, and the per-backend cache of queue metadata.
 *
 * Every hot-path call starts by turning a queue name into its id, message
 * table and attributes.  Doing that with a query per call would cost as much
 * as the work itself, so each backend keeps what it looked up in a hash
 * table under CacheMemoryContext.  An entry lives until a relcache
 * invalidation of the queue's message table: alter sends one on purpose
 * (queue._invalidate), and drop sends one by dropping the table.  Owner and
 * grants are not cached here: they are the message table's own, read from
 * the syscache at each call (acl.c).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/namespace.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "storage/proc.h"
#include "storage/lmgr.h"
#include "storage/lock.h"
#include "storage/sinval.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/hsearch.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"

#include "common/queue_common.h"
#include "storage/queue_storage.h"

PG_FUNCTION_INFO_V1(queue_invalidate_sql);
PG_FUNCTION_INFO_V1(queue_lock_queue_sql);

typedef struct CacheEntry
{
	QueueMeta	meta;			/* meta.name is the key */
	bool		valid;
	uint64		used;			/* lookup tick of its last use */
	LocalTransactionId used_lxid;	/* ... and that lookup's transaction */
} CacheEntry;

/*
 * How many queues a backend keeps prepared plans for (queue.plan_cache_queues,
 * 0: all).  A backend that touches more frees the plans of the queue it used
 * longest ago, never one used in the current transaction (its plans may be
 * running); the metadata stays.  Plans take about 66 KB a queue: 1,000
 * queues cost a backend 66 MB of plans without a bound.
 */
int			queue_plan_cache_queues = 0;
static uint64 use_tick = 0;

static HTAB *queue_cache = NULL;
static QueueMeta *lookup_once(text *name, bool missing_ok);
static SPIPlanPtr lookup_plan = NULL;
static Oid	lookup_queues_relid = InvalidOid;	/* queue._queues, for lookup_plan */
static bool lookup_stale = false;

/*
 * Bumped by every invalidation we hear of.  A lookup whose registry read
 * overlapped one (the read takes locks, which processes invalidations) may
 * hold data older than that invalidation, so it is not trusted for the
 * next call.
 */
static uint64 inval_count = 0;

/*
 * A relcache invalidation of a message table marks its entry stale.  The
 * entry is not freed here: a caller may be using it right now (the callback
 * runs whenever a lock is taken); the next lookup rebuilds it.
 */
static void
queue_relcache_callback(Datum arg, Oid relid)
{
	HASH_SEQ_STATUS status;
	CacheEntry *e;

	inval_count++;
	if (relid == InvalidOid || relid == lookup_queues_relid)
		lookup_stale = true;
	if (queue_cache == NULL)
		return;
	hash_seq_init(&status, queue_cache);
	while ((e = hash_seq_search(&status)) != NULL)
		if (relid == InvalidOid || e->meta.relid == relid)
			e->valid = false;
}

void
queue_catalog_init(void)
{
	CacheRegisterRelcacheCallback(queue_relcache_callback, (Datum) 0);
}

/* queue._invalidate(relid): make every backend reload a queue at commit. */
Datum
queue_invalidate_sql(PG_FUNCTION_ARGS)
{
	CacheInvalidateRelcacheByRelid(PG_GETARG_OID(0));
	PG_RETURN_VOID();
}

/* An interval column as microseconds (a month counts 30 days). */
static int64
interval_usecs(Datum d)
{
	Interval   *iv = DatumGetIntervalP(d);

	return iv->time + (int64) iv->day * USECS_PER_DAY +
		(int64) iv->month * DAYS_PER_MONTH * USECS_PER_DAY;
}

/*
 * The OID of relation queue_data.<name>, or InvalidOid.  Looked up by name,
 * never kept as a number (a restored dump has other OIDs), and with no
 * privilege check on the schema.
 */
Oid
queue_data_relid(const char *name)
{
	Oid			nsp = get_namespace_oid("queue_data", true);

	if (!OidIsValid(nsp))
		return InvalidOid;
	return get_relname_relid(name, nsp);
}

/* The OID of a shared table (queue_shared_table), or InvalidOid. */
Oid
queue_shared_relid(char kind, bool fifo)
{
	return queue_data_relid(queue_shared_table(kind, fifo) + strlen("queue_data."));
}

/*
 * The lock of a shared queue: every API call and sweep holds it in
 * AccessShareLock to the end of its transaction; a move, purge or drop of
 * the queue takes it in AccessExclusiveLock, waits for them, and makes
 * later ones wait and then read the registry again (queue_lookup).  A
 * shared queue has no relation to lock, so the tag is a relation lock's
 * (taken by the fast path, as a table's AccessShareLock is) on an OID
 * counted down from the top of the OID space, where no relation's is
 * until the OID counter has gone round nearly once.
 */
void
queue_lock_queue(int64 queue_id, LOCKMODE mode)
{
	LOCKTAG		tag;

	SET_LOCKTAG_RELATION(tag, MyDatabaseId, (Oid) (PG_UINT32_MAX - (uint32) queue_id));
	(void) LockAcquire(&tag, mode, false, false);
}

/* queue._lock_queue(queue_id): for move, purge and drop (PL/pgSQL). */
Datum
queue_lock_queue_sql(PG_FUNCTION_ARGS)
{
	queue_lock_queue(PG_GETARG_INT64(0), AccessExclusiveLock);
	PG_RETURN_VOID();
}

/*
 * The OID of one of a queue's tables, queue_data.<kind><queue_id> (kind q:
 * messages, d: deduplication ids, a: receive attempts, g: FIFO groups), or
 * InvalidOid.
 */
Oid
queue_table_relid(int64 queue_id, char kind)
{
	char		relname[NAMEDATALEN];

	snprintf(relname, sizeof(relname), "%c" INT64_FORMAT, kind, queue_id);
	return queue_data_relid(relname);
}

/* The elements of an oid[] datum, copied into CacheMemoryContext. */
static int
oid_array(Datum d, bool isnull, Oid **out)
{
	ArrayType  *arr;
	Datum	   *elems;
	bool	   *enulls;
	int			n;

	*out = NULL;
	if (isnull)
		return 0;
	arr = DatumGetArrayTypeP(d);
	deconstruct_array(arr, OIDOID, sizeof(Oid), true, TYPALIGN_INT, &elems, &enulls, &n);
	if (n == 0)
		return 0;
	*out = MemoryContextAlloc(CacheMemoryContext, n * sizeof(Oid));
	for (int i = 0; i < n; i++)
		(*out)[i] = enulls[i] ? InvalidOid : DatumGetObjectId(elems[i]);
	return n;
}

/* A shared queue's owner and grants: columns 19-22 of the lookup. */
static void
load_grants(CacheEntry *e, HeapTuple tup, TupleDesc desc)
{
	bool		isnull;

	e->meta.owner = DatumGetObjectId(SPI_getbinval(tup, desc, 19, &isnull));
	if (isnull)
		e->meta.owner = InvalidOid;
	for (int p = 0; p < 3; p++)
	{
		Datum		d = SPI_getbinval(tup, desc, p + 20, &isnull);

		e->meta.ngrantees[p] = oid_array(d, isnull, &e->meta.grantees[p]);
	}
}

/*
 * Free what an entry holds besides itself, before it is rebuilt or removed
 * (its plans released first: queue_release_plans).
 */
static void
free_entry(CacheEntry *e)
{
	if (e->meta.plans != NULL)
		pfree(e->meta.plans);
	e->meta.plans = NULL;
	for (int p = 0; p < 3; p++)
	{
		if (e->meta.grantees[p] != NULL)
			pfree(e->meta.grantees[p]);
		e->meta.grantees[p] = NULL;
		e->meta.ngrantees[p] = 0;
	}
}


static bool
column_is(Oid relid, const char *name, AttrNumber expected)
{
	return OidIsValid(relid) && get_attnum(relid, name) == expected;
}

/*
 * A FIFO queue's group relations, for fifo/groups.c's direct reads:
 * the queue's own (dedicated) or the shared FIFO tables, whose key column
 * comes last so the columns read there have the same numbers in both.
 * Left unset (group_relid invalid, which groups.c refuses) when one is
 * missing or its columns are not where they are read.
 */
static void
fifo_relations(QueueMeta *q)
{
	Oid			group_relid;

	if (q->shared)
	{
		q->msg_pkey = queue_data_relid("fifo_messages_pkey");
		q->msg_group_idx = queue_data_relid("fifo_messages_group");
		q->group_pkey = queue_data_relid("groups_pkey");
		group_relid = queue_data_relid("groups");
	}
	else
	{
		q->msg_pkey = queue_data_relid(psprintf("q" INT64_FORMAT "_pkey", q->id));
		q->msg_group_idx = queue_data_relid(psprintf("q" INT64_FORMAT "_group", q->id));
		q->group_pkey = queue_data_relid(psprintf("g" INT64_FORMAT "_pkey", q->id));
		group_relid = queue_data_relid(psprintf("g" INT64_FORMAT, q->id));
	}
	if (OidIsValid(q->msg_pkey) && OidIsValid(q->msg_group_idx) && OidIsValid(q->group_pkey) &&
		column_is(q->relid, "message_id", QCOL_MESSAGE_ID) &&
		column_is(q->relid, "visible_at", QCOL_VISIBLE_AT) &&
		column_is(q->relid, "receive_count", QCOL_RECEIVE_COUNT) &&
		column_is(q->relid, "message_group_id", QCOL_GROUP) &&
		column_is(group_relid, "leased_upto", GCOL_LEASED_UPTO))
		q->group_relid = group_relid;	/* last: it says the others are set */
}

/* Read one queue's registry row into e; false if there is none. */
static bool
load_entry(CacheEntry *e, text *name)
{
	Datum		arg = PointerGetDatum(name);
	HeapTuple	tup;
	TupleDesc	desc;
	bool		isnull;
	int			rc;

	if (lookup_plan != NULL && lookup_stale)
	{
		SPI_freeplan(lookup_plan);
		lookup_plan = NULL;
	}
	if (lookup_plan == NULL)
	{
		Oid			argtypes[1] = {TEXTOID};
		Oid			nsp = get_namespace_oid("queue", false);
		SPIPlanPtr	plan;
		const char *layout;

		/*
		 * The registry's columns as this database's version has them: 1.3
		 * added retry_delay, 1.4 the layout and a shared queue's owner and
		 * grants (before it, every queue is dedicated), 1.6 the cap of a
		 * tenant's messages in flight, 1.11 the rate limits, 1.12 the default
		 * priority.  Made again after
		 * a change to the registry table (an ALTER EXTENSION UPDATE).
		 */
		lookup_queues_relid = get_relname_relid("_queues", nsp);
		lookup_stale = false;
		if (get_attnum(lookup_queues_relid, "dedicated") != InvalidAttrNumber)
			layout = " NOT r.dedicated, coalesce(r.store_id, r.queue_id),"
				" NOT d.dedicated, d.fifo, r.owner::pg_catalog.oid,"
				" r.send_roles::pg_catalog.oid[], r.receive_roles::pg_catalog.oid[],"
				" r.manage_roles::pg_catalog.oid[]";
		else
			layout = " false, r.queue_id, false, d.fifo, NULL::pg_catalog.oid,"
				" NULL::pg_catalog.oid[], NULL::pg_catalog.oid[], NULL::pg_catalog.oid[]";
		plan = SPI_prepare(psprintf("SELECT r.queue_id, r.fifo, r.visibility_timeout,"
									" r.delay, r.retention, r.max_message_size, r.receive_wait,"
									" r.content_based_deduplication, r.deduplication_window,"
									" r.deduplication_scope = 'message_group',"
									" coalesce(r.max_receive_count, 0), r.dead_letter_queue,"
									" d.queue_name, %s, %s, %s, %s, %s"
									" FROM queue._queues r"
									" LEFT JOIN queue._queues d ON d.queue_id = r.dead_letter_queue"
									" WHERE r.queue_name = $1",
									get_attnum(lookup_queues_relid, "retry_delay") != InvalidAttrNumber ?
									"r.retry_delay" : "'0'::pg_catalog.interval",
									layout,
									get_attnum(lookup_queues_relid, "max_in_flight_per_group") != InvalidAttrNumber ?
									"coalesce(r.max_in_flight_per_group, 0)" : "0",
									get_attnum(lookup_queues_relid, "receive_rate_interval") != InvalidAttrNumber ?
									"coalesce(r.receive_rate_limit, 0), coalesce(r.receive_rate_limit_per_group, 0),"
									" r.receive_rate_interval, r.created_at" :
									"0, 0, '1 second'::pg_catalog.interval, r.created_at",
									get_attnum(lookup_queues_relid, "default_priority") != InvalidAttrNumber ?
									"r.default_priority::pg_catalog.int4" : "4"),
						   1, argtypes);
		if (plan == NULL)
			elog(ERROR, "SPI_prepare failed: %s", SPI_result_code_string(SPI_result));
		SPI_keepplan(plan);
		lookup_plan = plan;
	}
	/*
	 * Read with the latest snapshot, not the caller's: a REPEATABLE READ
	 * transaction that began before an alter committed must not cache the
	 * old attributes for later transactions to use.
	 */
	rc = SPI_execute_snapshot(lookup_plan, &arg, NULL, GetLatestSnapshot(),
							  InvalidSnapshot, true, false, 1);
	if (rc != SPI_OK_SELECT)
		elog(ERROR, "queue lookup failed: %s", SPI_result_code_string(rc));
	if (SPI_processed == 0)
		return false;

	tup = SPI_tuptable->vals[0];
	desc = SPI_tuptable->tupdesc;
	e->meta.id = DatumGetInt64(SPI_getbinval(tup, desc, 1, &isnull));
	e->meta.fifo = DatumGetBool(SPI_getbinval(tup, desc, 2, &isnull));
	e->meta.shared = DatumGetBool(SPI_getbinval(tup, desc, 15, &isnull));
	e->meta.store_id = DatumGetInt64(SPI_getbinval(tup, desc, 16, &isnull));
	/* By name, never a stored OID: a restored dump has other OIDs. */
	if (e->meta.shared)
		e->meta.relid = queue_data_relid(queue_shared_table('q', e->meta.fifo) +
										 strlen("queue_data."));
	else
		e->meta.relid = queue_table_relid(e->meta.id, 'q');
	if (!OidIsValid(e->meta.relid))
		return false;
	e->meta.visibility_timeout = interval_usecs(SPI_getbinval(tup, desc, 3, &isnull));
	e->meta.delay = interval_usecs(SPI_getbinval(tup, desc, 4, &isnull));
	e->meta.retention = interval_usecs(SPI_getbinval(tup, desc, 5, &isnull));
	e->meta.max_message_size = DatumGetInt32(SPI_getbinval(tup, desc, 6, &isnull));
	e->meta.receive_wait = interval_usecs(SPI_getbinval(tup, desc, 7, &isnull));
	e->meta.content_based_dedup = DatumGetBool(SPI_getbinval(tup, desc, 8, &isnull));
	e->meta.dedup_window = interval_usecs(SPI_getbinval(tup, desc, 9, &isnull));
	e->meta.dedup_by_group = DatumGetBool(SPI_getbinval(tup, desc, 10, &isnull));
	e->meta.max_receive_count = DatumGetInt32(SPI_getbinval(tup, desc, 11, &isnull));
	e->meta.dlq_id = DatumGetInt64(SPI_getbinval(tup, desc, 12, &isnull));
	if (isnull)
	{
		e->meta.dlq_id = 0;
		e->meta.max_receive_count = 0;
	}
	memset(e->meta.dlq_name, 0, sizeof(e->meta.dlq_name));
	if (e->meta.dlq_id != 0)
	{
		char	   *n = TextDatumGetCString(SPI_getbinval(tup, desc, 13, &isnull));

		strlcpy(e->meta.dlq_name, n, sizeof(e->meta.dlq_name));
	}
	e->meta.retry_delay = interval_usecs(SPI_getbinval(tup, desc, 14, &isnull));
	e->meta.max_in_flight = DatumGetInt32(SPI_getbinval(tup, desc, 23, &isnull));
	e->meta.tenant_kinds = 0;
	e->meta.rate_limit = DatumGetInt32(SPI_getbinval(tup, desc, 24, &isnull));
	e->meta.rate_limit_per_group = DatumGetInt32(SPI_getbinval(tup, desc, 25, &isnull));
	e->meta.rate_interval = interval_usecs(SPI_getbinval(tup, desc, 26, &isnull));
	e->meta.created_at = DatumGetTimestampTz(SPI_getbinval(tup, desc, 27, &isnull));
	if (isnull)
		e->meta.created_at = 0;
	e->meta.rate_opens_at = 0;
	e->meta.default_priority = DatumGetInt32(SPI_getbinval(tup, desc, 28, &isnull));
	/* 1.12 on; a FIFO queue's table has none */
	e->meta.prio_column = !e->meta.fifo &&
		get_attnum(e->meta.relid, "priority") != InvalidAttrNumber;
	e->meta.dlq_shared = DatumGetBool(SPI_getbinval(tup, desc, 17, &isnull)) && !isnull;
	e->meta.dlq_fifo = DatumGetBool(SPI_getbinval(tup, desc, 18, &isnull)) && !isnull;
	if (e->meta.shared)
		load_grants(e, tup, desc);
	e->meta.group_relid = InvalidOid;
	e->meta.group_pkey = InvalidOid;
	e->meta.msg_group_idx = InvalidOid;
	e->meta.msg_pkey = InvalidOid;
	e->meta.counter_slot = NULL;
	e->meta.dedup_relid = e->meta.shared ? queue_shared_relid('d', false) :
		queue_table_relid(e->meta.id, 'd');
	if (e->meta.fifo)
		fifo_relations(&e->meta);
	return true;
}

static bool
has_plans(QueueMeta *q)
{
	if (q->plans == NULL)
		return false;
	for (int i = 0; i < QP_NUM_PLANS; i++)
		if (q->plans[i] != NULL)
			return true;
	return false;
}

/*
 * Mark e used now; when it has no plans yet (it is about to get some) and
 * the bound is reached, free the plans of the queues used longest ago.
 * The search walks every cached queue: only a dedicated queue about to get
 * plans pays it.
 */
static void
note_use(CacheEntry *e)
{
	e->used = ++use_tick;
	e->used_lxid = QueueMyLocalXid();
	/* (a shared queue keeps no plans of its own: those are per kind) */
	if (queue_plan_cache_queues <= 0 || e->meta.shared || has_plans(&e->meta))
		return;
	for (;;)
	{
		HASH_SEQ_STATUS status;
		CacheEntry *c;
		CacheEntry *oldest = NULL;
		int			nplanned = 0;

		hash_seq_init(&status, queue_cache);
		while ((c = hash_seq_search(&status)) != NULL)
		{
			if (c == e || !has_plans(&c->meta))
				continue;
			nplanned++;
			if (c->used_lxid != QueueMyLocalXid() &&
				(oldest == NULL || c->used < oldest->used))
				oldest = c;
		}
		if (nplanned < queue_plan_cache_queues || oldest == NULL)
			return;
		queue_release_plans(&oldest->meta);
	}
}

/*
 * The metadata of a queue by name, for a caller inside SPI_connect.  Checks
 * the name first; 42704 when there is no such queue.
 */
QueueMeta *
queue_lookup(text *name)
{
	return queue_lookup_extended(name, false);
}

/*
 * queue_lookup, or NULL for a queue that does not exist if missing_ok.
 * A shared queue is locked (queue_lock_queue) before it is returned, and
 * looked up again when an invalidation came in meanwhile: a move, purge
 * or drop that held the lock has committed, and the entry may be stale.
 * On a Citus cluster a dedicated queue's table is locked so too.
 */
QueueMeta *
queue_lookup_extended(text *name, bool missing_ok)
{
	for (int tries = 0;; tries++)
	{
		QueueMeta  *q = lookup_once(name, missing_ok);
		uint64		before;

		if (q == NULL)
			return q;
		before = inval_count;
		if (!q->shared)
		{
			/*
			 * A dedicated queue is locked by its statements; on a Citus
			 * cluster, where queue.citus_move_shard may drop its tables
			 * while we wait, its table is locked here first.
			 */
			if (!queue_citus_active())
				return q;
			LockRelationOid(q->relid, AccessShareLock);
		}
		else
			queue_lock_queue(q->id, AccessShareLock);
		AcceptInvalidationMessages();
		if (inval_count == before || tries >= 10)
			return q;
		/* what held the lock may have been a move of the queue to another Citus node */
		queue_citus_check_local(name, "queue_name");
	}
}

static QueueMeta *
lookup_once(text *name, bool missing_ok)
{
	char		key[QUEUE_NAME_MAX + 1];
	int			len;
	CacheEntry *e;
	bool		found;
	uint64		count_before;

	queue_check_name(name, "queue_name");
	len = VARSIZE_ANY_EXHDR(name);
	memset(key, 0, sizeof(key));
	memcpy(key, VARDATA_ANY(name), len);

	if (queue_cache == NULL)
	{
		HASHCTL		ctl;

		ctl.keysize = sizeof(key);
		ctl.entrysize = sizeof(CacheEntry);
		ctl.hcxt = CacheMemoryContext;
		queue_cache = hash_create("queue metadata", 64, &ctl,
								  HASH_ELEM | HASH_STRINGS | HASH_CONTEXT);
	}

	/* Hear about alters and drops committed since our last statement. */
	AcceptInvalidationMessages();

	e = hash_search(queue_cache, key, HASH_ENTER, &found);
	if (found && e->valid)
	{
		note_use(e);
		return &e->meta;
	}
	if (found)
	{
		queue_release_plans(&e->meta);
		free_entry(e);
	}
	if (!found)
		e->meta.plans = NULL;
	memset(&e->meta.grantees, 0, sizeof(e->meta.grantees));
	memset(&e->meta.ngrantees, 0, sizeof(e->meta.ngrantees));
	e->meta.owner = InvalidOid;
	e->valid = false;

	count_before = inval_count;
	if (!load_entry(e, name))
	{
		free_entry(e);
		hash_search(queue_cache, key, HASH_REMOVE, NULL);
		if (missing_ok)
			return NULL;
		/* on a Citus node, a queue gone because it is moving says so (citus.c) */
		queue_citus_check_local(name, "queue_name");
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("queue \"%s\" does not exist", key)));
	}
	e->valid = (inval_count == count_before);
	note_use(e);
	return &e->meta;
}
