/*-------------------------------------------------------------------------
 *
 * consumer_worker.c
 *	  The processes that run consumers (DESIGN.md "Consumers"): one batch
 *	  after another, and the shared memory they report to.
 *
 * A consumer process loops over batches.  Each batch is one transaction:
 * it reads the consumer's registry row (a dropped or paused consumer
 * leaves), becomes the role that created the consumer, checks its EXECUTE
 * privilege on the handler, receives up to batch_size messages with
 * queue.receive(..., wait => '5 s') -- which sleeps on the queue's
 * condition variable and is woken by a committing send, like any long
 * poll -- calls the handler with them under a statement_timeout of the
 * queue's visibility timeout (noted in its slot: the queue worker
 * terminates a process whose handler swallows that cancel,
 * consumer_tend.c), deletes them and commits.  An error rolls
 * all of it back, is recorded in shared memory (queue.consumers), and
 * failed.c brings the messages back after the consumer's retry delay.
 * When the handler fails on a batch of several, that rollback counts none
 * of them, and the next batch calls the handler with each message alone,
 * in subtransactions (handle_one_by_one): a poison message costs only
 * itself, and a batch that succeeds pays for no subtransaction.
 *
 * The process connects as the bootstrap superuser (PostgreSQL 15 refuses
 * to connect a background worker as a role without LOGIN, and a
 * consumer's role need not have it), pins its own settings at once
 * (elevated.c: the database's search_path never reaches its statements),
 * and runs each batch's receive and delete as the consumer's role with
 * SECURITY_LOCAL_USERID_CHANGE, so every privilege check is against that
 * role.  The handler runs in elevated.c's sandbox: the consumer's role in
 * a security-restricted operation, at a GUC nest level of its own with
 * the search_path its creator had at create_consumer; leaving it undoes
 * whatever the handler set, so the process's next statement runs under
 * the pinned settings again.
 *
 * consumer_tend.c starts and stops these processes; shared memory (their
 * slots and counters) is set up here.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "access/xlog.h"
#include "catalog/namespace.h"
#include "catalog/pg_extension.h"
#include "catalog/pg_proc.h"
#include "catalog/pg_type.h"
#include "commands/extension.h"
#include "executor/executor.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "postmaster/interrupt.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/lock.h"
#include "storage/shmem.h"
#include "tcop/tcopprot.h"
#include "utils/acl.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/regproc.h"
#include "utils/guc.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"
#include "utils/syscache.h"
#include "utils/timeout.h"
#include "utils/timestamp.h"

#include "common/queue_common.h"
#include "storage/queue_storage.h"
#include "lease/queue_lease.h"
#include "api/queue_api.h"
#include "push/queue_push.h"

PGDLLEXPORT void queue_consumer_main(Datum arg);

QueueConsumerShared *queue_consumer_shared = NULL;
int			queue_max_consumer_processes = 8;

#define CONSUMER_WAIT				"5 s"	/* each receive's long poll */
#define CONSUMER_RETRY_PAUSE_MS		100 /* after a failed batch with messages */
#define CONSUMER_BACKOFF_MAX_MS		10000	/* after repeated failures without */

/* ------------------------------------------------------------------------
 * Settings and shared memory
 * ------------------------------------------------------------------------
 */

static shmem_request_hook_type prev_shmem_request_hook = NULL;
static shmem_startup_hook_type prev_shmem_startup_hook = NULL;
static void consumer_shmem_request(void);
static void consumer_shmem_startup(void);

/* From _PG_init: the setting, and with preload the shared memory. */
void
queue_consumer_init(void)
{
	DefineCustomIntVariable("queue.max_consumer_processes",
							"Consumer processes the server may run at once, over all databases.",
							"Each is one of max_worker_processes.",
							&queue_max_consumer_processes,
							8, 0, 1024,
							PGC_POSTMASTER, 0,
							NULL, NULL, NULL);
	if (!process_shared_preload_libraries_in_progress)
		return;
	prev_shmem_request_hook = shmem_request_hook;
	shmem_request_hook = consumer_shmem_request;
	prev_shmem_startup_hook = shmem_startup_hook;
	shmem_startup_hook = consumer_shmem_startup;
}

/* Consumers whose counters shared memory keeps: paused ones have some too. */
static int
stat_slots(void)
{
	return Max(256, 8 * queue_max_consumer_processes);
}

static Size
consumer_shmem_size(void)
{
	Size		size = MAXALIGN(sizeof(QueueConsumerShared));

	size = add_size(size, MAXALIGN(mul_size(queue_max_consumer_processes,
											sizeof(QueueConsumerSlot))));
	return add_size(size, mul_size(stat_slots(), sizeof(QueueConsumerStat)));
}

static void
consumer_shmem_request(void)
{
	if (prev_shmem_request_hook)
		prev_shmem_request_hook();
	RequestAddinShmemSpace(consumer_shmem_size());
	RequestNamedLWLockTranche("queue consumers", 1);
}

static void
consumer_shmem_startup(void)
{
	bool		found;
	char	   *base;

	if (prev_shmem_startup_hook)
		prev_shmem_startup_hook();
	LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
	base = ShmemInitStruct("queue consumers", consumer_shmem_size(), &found);
	queue_consumer_shared = (QueueConsumerShared *) base;
	if (!found)
	{
		memset(base, 0, consumer_shmem_size());
		queue_consumer_shared->lock = &(GetNamedLWLockTranche("queue consumers"))->lock;
		queue_consumer_shared->nslots = queue_max_consumer_processes;
		queue_consumer_shared->nstats = stat_slots();
	}
	base += MAXALIGN(sizeof(QueueConsumerShared));
	queue_consumer_shared->slots = (QueueConsumerSlot *) base;
	base += MAXALIGN(mul_size(queue_max_consumer_processes, sizeof(QueueConsumerSlot)));
	queue_consumer_shared->stats = (QueueConsumerStat *) base;
	LWLockRelease(AddinShmemInitLock);
}

/*
 * The counters of a consumer; created (for queue_id) when missing and
 * queue_id is not 0.  NULL when absent, or when every entry is taken.  The
 * caller holds the lock, exclusive unless queue_id is 0.
 */
QueueConsumerStat *
queue_consumer_stat(Oid dbid, int64 consumer_id, int64 queue_id)
{
	QueueConsumerStat *free_entry = NULL;

	for (int i = 0; i < queue_consumer_shared->nstats; i++)
	{
		QueueConsumerStat *st = &queue_consumer_shared->stats[i];

		if (st->dbid == dbid && st->consumer_id == consumer_id)
			return st;
		if (st->dbid == InvalidOid && free_entry == NULL)
			free_entry = st;
	}
	if (queue_id == 0 || free_entry == NULL)
		return NULL;
	memset(free_entry, 0, sizeof(*free_entry));
	free_entry->dbid = dbid;
	free_entry->consumer_id = consumer_id;
	free_entry->queue_id = queue_id;
	return free_entry;
}

/* ------------------------------------------------------------------------
 * The consumer process
 * ------------------------------------------------------------------------
 */

/* A consumer's registry row, as each batch reads it. */
typedef struct ConsumerConf
{
	char		name[QUEUE_NAME_MAX + 1];
	text	   *queue_name;
	Oid			handler;
	Oid			owner;
	int32		batch_size;
	bool		retry_fixed;
	int64		visibility_ms;
	char	   *search_path;	/* the creator's, for the handler */
	bool		fifo;
} ConsumerConf;

/* The search_path of consumers made before 1.3.1 recorded their creator's. */
#define CONSUMER_DEFAULT_SEARCH_PATH "\"$user\", public"

typedef enum BatchResult
{
	BATCH_GONE,					/* dropped, paused, or the extension is gone */
	BATCH_DONE,					/* committed, with or without messages */
	BATCH_FAILED_HELD,			/* failed with messages: failed.c holds them */
	BATCH_FAILED					/* failed before it had messages */
} BatchResult;

/*
 * The batch's three statements, prepared once per process and kept (the
 * handler's again only if its call changes: a replaced procedure, say).
 */
static SPIPlanPtr receive_plan = NULL;
static SPIPlanPtr delete_plan = NULL;
static SPIPlanPtr give_back_plan = NULL;
static SPIPlanPtr handler_plan = NULL;
static char *handler_sql = NULL;
static Oid	plans_msgs_type = InvalidOid;

/* The kept plans, made (again) when missing or out of date. */
static void
batch_plans(const char *call, Oid msgs_type)
{
	bool		type_changed = msgs_type != plans_msgs_type;

	if (type_changed)
	{
		/* queue.message was made again (the extension, say): start over */
		if (receive_plan != NULL)
			SPI_freeplan(receive_plan);
		if (delete_plan != NULL)
			SPI_freeplan(delete_plan);
		receive_plan = delete_plan = NULL;
		plans_msgs_type = msgs_type;
	}
	if (receive_plan == NULL)
	{
		Oid			rtypes[3] = {TEXTOID, INT4OID, TEXTOID};

		receive_plan = queue_keep_plan("SELECT pg_catalog.array_agg(m), pg_catalog.count(*)"
								 " FROM queue.receive($1, max_messages => $2,"
								 " wait => $3::pg_catalog.interval) m",
								 3, rtypes);
	}
	if (delete_plan == NULL)
	{
		Oid			dtypes[2] = {TEXTOID, msgs_type};

		delete_plan = queue_keep_plan("SELECT pg_catalog.count(*) FROM queue.delete_batch($1,"
								" ARRAY(SELECT m.receipt FROM pg_catalog.unnest($2) m)) d",
								2, dtypes);
	}
	if (give_back_plan == NULL)
	{
		Oid			gtypes[3] = {TEXTOID, TEXTOID, INTERVALOID};

		give_back_plan = queue_keep_plan("SELECT queue.change_visibility($1, $2, $3)",
										 3, gtypes);
	}
	if (handler_plan == NULL || handler_sql == NULL || strcmp(handler_sql, call) != 0 ||
		type_changed)
	{
		if (handler_plan != NULL)
			SPI_freeplan(handler_plan);
		handler_plan = NULL;
		if (handler_sql != NULL)
			pfree(handler_sql);
		handler_sql = NULL;
		handler_plan = queue_keep_plan(call, 1, &msgs_type);
		handler_sql = MemoryContextStrdup(TopMemoryContext, call);
	}
}

static int	my_slot = -1;
static ConsumerStart my_start;
static char my_name[QUEUE_NAME_MAX + 1];

/*
 * On a FIFO queue, after a batch with a failed message, batches of one
 * until one succeeds: the group waits behind its failing head, and each
 * try then counts only that head, not the messages queued behind it.
 */
static bool fifo_one_at_a_time = false;

/*
 * The handler failed on the last batch as a whole: this batch calls it
 * with each message alone (handle_one_by_one).  Every process of the
 * consumer does so for CONSUMER_ONE_BY_ONE_MS after any of them failed on
 * a whole batch (QueueConsumerStat.one_by_one_until), so the messages of a
 * batch that was not counted are not taken again, uncounted, by another
 * process's whole batch: each failure of a message alone counts.
 */
#define CONSUMER_ONE_BY_ONE_MS	10000
static bool one_by_one = false;

/* Whether the consumer's processes are in their one-by-one window. */
static bool
one_by_one_window(void)
{
	QueueConsumerStat *st;
	bool		in = false;

	LWLockAcquire(queue_consumer_shared->lock, LW_SHARED);
	st = queue_consumer_stat(my_start.dbid, my_start.consumer_id, 0);
	if (st != NULL && st->one_by_one_until != 0)
		in = GetCurrentTimestamp() < st->one_by_one_until;
	LWLockRelease(queue_consumer_shared->lock);
	return in;
}

/* Open the one-by-one window for every process of the consumer. */
static void
open_one_by_one_window(void)
{
	QueueConsumerStat *st;

	LWLockAcquire(queue_consumer_shared->lock, LW_EXCLUSIVE);
	st = queue_consumer_stat(my_start.dbid, my_start.consumer_id, 0);
	if (st != NULL)
		st->one_by_one_until = GetCurrentTimestamp() + CONSUMER_ONE_BY_ONE_MS * INT64CONST(1000);
	LWLockRelease(queue_consumer_shared->lock);
}


/* However the process leaves, its slot is free again. */
static void
consumer_exit(int code, Datum arg)
{
	QueueConsumerSlot *s = &queue_consumer_shared->slots[my_slot];

	LWLockAcquire(queue_consumer_shared->lock, LW_EXCLUSIVE);
	if (s->dbid == my_start.dbid && s->generation == my_start.generation)
		s->dbid = InvalidOid;
	LWLockRelease(queue_consumer_shared->lock);
}

/*
 * Say in the slot when this handler call began and its statement_timeout
 * (ms), or (since 0) that the batch ended: the tender ends a process whose
 * call outlives that by a margin, or that was told to stop
 * (consumer_tend.c, end_overstayers).
 */
static bool in_batch_noted = false;

static void
note_handler(TimestampTz since, int64 ms)
{
	QueueConsumerSlot *s = &queue_consumer_shared->slots[my_slot];

	if (since == 0 && !in_batch_noted)
		return;
	LWLockAcquire(queue_consumer_shared->lock, LW_EXCLUSIVE);
	if (s->dbid == my_start.dbid && s->generation == my_start.generation)
	{
		s->handler_since = since;
		s->handler_ms = ms;
		if (since == 0)
			s->idle_since = GetCurrentTimestamp();
	}
	LWLockRelease(queue_consumer_shared->lock);
	in_batch_noted = since != 0;
}

static bool
told_to_stop(void)
{
	QueueConsumerSlot *s = &queue_consumer_shared->slots[my_slot];
	bool		stop;

	LWLockAcquire(queue_consumer_shared->lock, LW_SHARED);
	stop = s->dbid != my_start.dbid || s->generation != my_start.generation || s->stop;
	LWLockRelease(queue_consumer_shared->lock);
	return stop;
}

/*
 * Read the consumer's registry row into conf; false when it is gone or
 * paused, or the extension (or its 1.3 catalog) is.  Inside SPI.
 */
static bool
load_conf(ConsumerConf *conf)
{
	Oid			nsp = get_namespace_oid("queue", true);
	Oid			types[1] = {INT8OID};
	Datum		arg = Int64GetDatum(my_start.consumer_id);
	HeapTuple	tup;
	TupleDesc	desc;
	bool		isnull;
	int			rc;

	Oid			relid;

	if (!OidIsValid(nsp) || !OidIsValid(relid = get_relname_relid("_consumers", nsp)))
		return false;

	/*
	 * Every operator and function qualified (the process's search_path is
	 * pinned too: elevated.c).  The creator's search_path is a column from
	 * 1.3.1 on; a database not yet updated has none.
	 */
	rc = SPI_execute_with_args(get_attnum(relid, "search_path") != InvalidAttrNumber ?
							   "SELECT c.consumer_name, q.queue_name, c.handler::pg_catalog.oid,"
							   " c.owner::pg_catalog.oid, c.batch_size,"
							   " c.retry OPERATOR(pg_catalog.=) 'fixed', c.paused,"
							   " pg_catalog.int8(pg_catalog.date_part('epoch', q.visibility_timeout)"
							   " OPERATOR(pg_catalog.*) 1000), c.search_path, q.fifo"
							   " FROM queue._consumers c JOIN queue._queues q"
							   " ON q.queue_id OPERATOR(pg_catalog.=) c.queue_id"
							   " WHERE c.consumer_id OPERATOR(pg_catalog.=) $1" :
							   "SELECT c.consumer_name, q.queue_name, c.handler::pg_catalog.oid,"
							   " c.owner::pg_catalog.oid, c.batch_size,"
							   " c.retry OPERATOR(pg_catalog.=) 'fixed', c.paused,"
							   " pg_catalog.int8(pg_catalog.date_part('epoch', q.visibility_timeout)"
							   " OPERATOR(pg_catalog.*) 1000), NULL::pg_catalog.text, q.fifo"
							   " FROM queue._consumers c JOIN queue._queues q"
							   " ON q.queue_id OPERATOR(pg_catalog.=) c.queue_id"
							   " WHERE c.consumer_id OPERATOR(pg_catalog.=) $1",
							   1, types, &arg, NULL, true, 1);
	if (rc != SPI_OK_SELECT)
		elog(ERROR, "consumer lookup failed: %s", SPI_result_code_string(rc));
	if (SPI_processed == 0)
		return false;
	tup = SPI_tuptable->vals[0];
	desc = SPI_tuptable->tupdesc;
	if (DatumGetBool(SPI_getbinval(tup, desc, 7, &isnull)))
		return false;			/* paused */
	strlcpy(conf->name, TextDatumGetCString(SPI_getbinval(tup, desc, 1, &isnull)),
			sizeof(conf->name));
	conf->queue_name = DatumGetTextPCopy(SPI_getbinval(tup, desc, 2, &isnull));
	conf->handler = DatumGetObjectId(SPI_getbinval(tup, desc, 3, &isnull));
	conf->owner = DatumGetObjectId(SPI_getbinval(tup, desc, 4, &isnull));
	conf->batch_size = DatumGetInt32(SPI_getbinval(tup, desc, 5, &isnull));
	conf->retry_fixed = DatumGetBool(SPI_getbinval(tup, desc, 6, &isnull));
	conf->visibility_ms = DatumGetInt64(SPI_getbinval(tup, desc, 8, &isnull));
	{
		Datum		sp = SPI_getbinval(tup, desc, 9, &isnull);

		conf->search_path = isnull ? pstrdup(CONSUMER_DEFAULT_SEARCH_PATH) :
			TextDatumGetCString(sp);
	}
	conf->fifo = DatumGetBool(SPI_getbinval(tup, desc, 10, &isnull));
	return true;
}

/*
 * The statement that calls the handler with $1 (queue.message[]), after
 * checking what create_consumer checked: it may have been replaced,
 * dropped, or its EXECUTE revoked since.  As the consumer's role.
 */
static char *
handler_call(ConsumerConf *conf, Oid msgs_type)
{
	HeapTuple	tup;
	Form_pg_proc proc;
	char	   *sql;

	tup = SearchSysCache1(PROCOID, ObjectIdGetDatum(conf->handler));
	if (!HeapTupleIsValid(tup))
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_FUNCTION),
				 errmsg("handler function %u of consumer \"%s\" does not exist",
						conf->handler, conf->name),
				 errhint("Drop the consumer and create it again with an existing handler.")));
	proc = (Form_pg_proc) GETSTRUCT(tup);
	if ((proc->prokind != PROKIND_FUNCTION && proc->prokind != PROKIND_PROCEDURE) ||
		proc->pronargs != 1 || proc->proargtypes.values[0] != msgs_type)
	{
		ReleaseSysCache(tup);
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("argument \"handler\": %s must be a function or procedure taking one argument of type queue.message[]",
						format_procedure(conf->handler))));
	}
	sql = psprintf("%s %s($1)",
				   proc->prokind == PROKIND_PROCEDURE ? "CALL" : "SELECT",
				   quote_qualified_identifier(get_namespace_name(proc->pronamespace),
											  NameStr(proc->proname)));
	ReleaseSysCache(tup);
	if (queue_proc_aclcheck(conf->handler, conf->owner, ACL_EXECUTE) != ACLCHECK_OK)
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("permission denied for function %s", format_procedure(conf->handler)),
				 errdetail("The consumer's role %s needs the EXECUTE privilege on its handler.",
						   GetUserNameFromId(conf->owner, true) ?
						   GetUserNameFromId(conf->owner, true) : "?")));
	return sql;
}

/*
 * Record a batch's end in the consumer's counters: the messages it
 * handled, and its error if a message (or the batch) failed.
 */
static void
record_batch(int64 processed, ErrorData *edata)
{
	QueueConsumerStat *st;

	LWLockAcquire(queue_consumer_shared->lock, LW_EXCLUSIVE);
	st = queue_consumer_stat(my_start.dbid, my_start.consumer_id, 0);
	if (st != NULL)
	{
		if (processed > 0)
		{
			st->processed += processed;
			st->last_success_at = GetCurrentTimestamp();
		}
		if (edata == NULL)
			st->failing = false;
		else
		{
			st->failed++;
			st->failing = true;
			st->last_error_at = GetCurrentTimestamp();
			snprintf(st->last_error, QUEUE_CONSUMER_ERROR_LEN, "%s: %s",
					 unpack_sql_state(edata->sqlerrcode),
					 edata->message ? edata->message : "");
		}
	}
	LWLockRelease(queue_consumer_shared->lock);
}

/*
 * Run fn(arg) in a subtransaction of the batch.  NULL when it returned;
 * else its error, copied into cxt, and everything it did is undone.
 */
static ErrorData *
in_subtransaction(void (*fn) (void *), void *arg, MemoryContext cxt)
{
	MemoryContext oldcxt = CurrentMemoryContext;
	ResourceOwner oldowner = CurrentResourceOwner;
	ErrorData  *volatile edata = NULL;

	BeginInternalSubTransaction(NULL);
	MemoryContextSwitchTo(oldcxt);
	PG_TRY();
	{
		fn(arg);
		ReleaseCurrentSubTransaction();
	}
	PG_CATCH();
	{
		MemoryContextSwitchTo(cxt);
		edata = CopyErrorData();
		FlushErrorState();
		RollbackAndReleaseCurrentSubTransaction();
	}
	PG_END_TRY();
	MemoryContextSwitchTo(oldcxt);
	CurrentResourceOwner = oldowner;
	return edata;
}

typedef struct HandlerCall
{
	ConsumerConf *conf;
	Datum		msgs;
} HandlerCall;

/* The handler with hc->msgs, in its sandbox, under the visibility timeout. */
static void
handler_in_sandbox(void *arg)
{
	HandlerCall *hc = (HandlerCall *) arg;
	QueueSandbox sb;
	int			rc;

	queue_sandbox_enter(&sb, hc->conf->owner, hc->conf->search_path,
						psprintf(INT64_FORMAT, hc->conf->visibility_ms));
	note_handler(GetCurrentTimestamp(), hc->conf->visibility_ms);
	if (hc->conf->visibility_ms > 0)
		enable_timeout_after(STATEMENT_TIMEOUT, (int) Min(hc->conf->visibility_ms, INT_MAX));
	rc = SPI_execute_plan(handler_plan, &hc->msgs, NULL, false, 0);
	if (rc < 0)
		elog(ERROR, "consumer handler call failed: %s", SPI_result_code_string(rc));
	disable_timeout(STATEMENT_TIMEOUT, false);
	queue_sandbox_leave(&sb);
}

/*
 * Call the handler with msgs (one message, handle_one_by_one) in a
 * subtransaction of the batch, in its sandbox (elevated.c) under its
 * creator's search_path and the visibility timeout (0: none).  NULL when
 * it returned; else its error, copied into cxt, and everything it did is
 * undone (the subtransaction, the sandbox's settings, and session
 * advisory locks it took, which no abort releases).
 */
static ErrorData *
call_handler(ConsumerConf *conf, Datum msgs, MemoryContext cxt)
{
	HandlerCall hc = {conf, msgs};
	ErrorData  *edata = in_subtransaction(handler_in_sandbox, &hc, cxt);

	if (edata != NULL)
	{
		disable_timeout(STATEMENT_TIMEOUT, false);
		LockReleaseSession(USER_LOCKMETHOD);
	}
	return edata;
}

/* queue.change_visibility(queue, receipt, delay): args are its three. */
static void
change_visibility(void *args)
{
	int			rc = SPI_execute_plan(give_back_plan, (Datum *) args, NULL, false, 0);

	if (rc != SPI_OK_SELECT)
		elog(ERROR, "consumer give-back failed: %s", SPI_result_code_string(rc));
}

/*
 * A message the handler failed on goes back to the queue: its receive
 * stands (so it counts, and past max_receive_count the next receive moves
 * it to the dead-letter queue), and it comes back after the consumer's
 * retry delay for its receive count.
 */
static void
give_back(ConsumerConf *conf, Datum msg, MemoryContext cxt)
{
	HeapTupleHeader th = DatumGetHeapTupleHeader(msg);
	bool		isnull;
	int32		count = DatumGetInt32(GetAttributeByName(th, "receive_count", &isnull));
	Interval   *delay = palloc0(sizeof(Interval));
	Datum		args[3];
	ErrorData  *edata;

	delay->time = queue_retry_delay(conf->retry_fixed ? QUEUE_RETRY_FIXED : QUEUE_RETRY_EXPONENTIAL,
									count, conf->visibility_ms * 1000, 0);
	args[0] = PointerGetDatum(conf->queue_name);
	args[1] = GetAttributeByName(th, "receipt", &isnull);
	args[2] = IntervalPGetDatum(delay);

	/*
	 * A handler that ran out its time (statement_timeout is the visibility
	 * timeout) outlived its lease: change_visibility refuses the receipt
	 * (55000), and the message is visible again already, its retry delay
	 * counted from its receive.  In a subtransaction, so that refusal
	 * fails nothing else; any other error fails the batch.
	 */
	edata = in_subtransaction(change_visibility, args, cxt);
	if (edata != NULL && edata->sqlerrcode != ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE)
		ReThrowError(edata);
}

/*
 * The batch after one whose handler failed on the whole batch (that one
 * rolled back without counting: queue_failed_uncount): each message alone,
 * in a subtransaction of its own, so only the messages that fail alone are
 * counted and come back (give_back), and the healthy ones are handled and
 * deleted once (AWS Lambda's partial batch responses, Service Bus's
 * per-message settlement).  On a FIFO queue the batch is one group in
 * order: the messages before the first failure are handled, and that one
 * and all after it go back (their receive counted once, as SQS does for
 * the rest of a group behind a failed message; the next batches then take
 * one message, fifo_one_at_a_time, so they are not counted again while
 * the head keeps failing).  Returns the messages to delete; sets handled
 * and err (the first failure's, or NULL).
 */
static Datum
handle_one_by_one(ConsumerConf *conf, Datum msgs, MemoryContext cxt, int64 *handled,
				  ErrorData **err)
{
	ArrayType  *arr = DatumGetArrayTypeP(msgs);
	Oid			elemtype = ARR_ELEMTYPE(arr);
	int16		typlen;
	bool		typbyval;
	char		typalign;
	Datum	   *elems;
	bool	   *nulls;
	int			n;
	Datum	   *ok;
	int			nok = 0;
	ErrorData  *first = NULL;
	bool		stopped = false;

	get_typlenbyvalalign(elemtype, &typlen, &typbyval, &typalign);
	deconstruct_array(arr, elemtype, typlen, typbyval, typalign, &elems, &nulls, &n);
	ok = palloc(Max(n, 1) * sizeof(Datum));
	for (int i = 0; i < n; i++)
	{
		ErrorData  *e = NULL;

		CHECK_FOR_INTERRUPTS();
		if (!stopped)
			e = call_handler(conf, PointerGetDatum(construct_array(&elems[i], 1, elemtype, typlen,
																  typbyval, typalign)), cxt);
		if (e == NULL && !stopped)
		{
			ok[nok++] = elems[i];
			continue;
		}
		if (e != NULL && e->sqlerrcode == ERRCODE_QUERY_CANCELED && told_to_stop())
			ReThrowError(e);	/* dropped or paused: the whole batch goes */
		if (first == NULL)
			first = e;
		if (conf->fifo)
			stopped = true;
		give_back(conf, elems[i], cxt);
	}
	*handled = nok;
	*err = first;
	return PointerGetDatum(construct_array(ok, nok, elemtype, typlen, typbyval, typalign));
}

/*
 * One batch: one transaction.  Never returns from inside PG_TRY; an error
 * rolls everything back and is recorded, a FATAL (SIGTERM) ends the
 * process as for any backend.
 */
static BatchResult
run_batch(MemoryContext cxt)
{
	volatile BatchResult result = BATCH_DONE;
	volatile int64 received = 0;
	volatile bool in_handler = false;
	int64		handled = 0;
	ErrorData  *batch_error = NULL;

	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	PG_TRY();
	{
		ConsumerConf conf;
		Oid			save_user;
		int			save_sec;

		SPI_connect();
		PushActiveSnapshot(GetTransactionSnapshot());
		if (!load_conf(&conf))
			result = BATCH_GONE;
		else
		{
			Datum		rargs[3];
			Oid			msgs_type;
			Datum		msgs;
			bool		isnull;
			char	   *call;
			int			rc;

			if (strcmp(my_name, conf.name) != 0)
			{
				strlcpy(my_name, conf.name, sizeof(my_name));
				pgstat_report_appname(my_name);
			}
			pgstat_report_activity(STATE_RUNNING, "queue consumer batch");
			queue_set_retry(conf.retry_fixed ? QUEUE_RETRY_FIXED : QUEUE_RETRY_EXPONENTIAL);

			/* The consumer's role, for the rest of the transaction. */
			if (!SearchSysCacheExists1(AUTHOID, ObjectIdGetDatum(conf.owner)))
				ereport(ERROR,
						(errcode(ERRCODE_UNDEFINED_OBJECT),
						 errmsg("role with OID %u of consumer \"%s\" does not exist",
								conf.owner, conf.name)));
			GetUserIdAndSecContext(&save_user, &save_sec);
			SetUserIdAndSecContext(conf.owner, save_sec | SECURITY_LOCAL_USERID_CHANGE);

			msgs_type = get_array_type(GetSysCacheOid2(TYPENAMENSP, Anum_pg_type_oid,
													   CStringGetDatum("message"),
													   ObjectIdGetDatum(get_namespace_oid("queue", false))));
			call = handler_call(&conf, msgs_type);
			batch_plans(call, msgs_type);

			/* Long poll: sleeps until a send commits, or 5 s. */
			rargs[0] = PointerGetDatum(conf.queue_name);
			rargs[1] = Int32GetDatum(conf.fifo && fifo_one_at_a_time ? 1 : conf.batch_size);
			rargs[2] = CStringGetTextDatum(CONSUMER_WAIT);
			rc = SPI_execute_plan(receive_plan, rargs, NULL, false, 1);
			if (rc != SPI_OK_SELECT || SPI_processed != 1)
				elog(ERROR, "consumer receive failed: %s", SPI_result_code_string(rc));
			received = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0],
												   SPI_tuptable->tupdesc, 2, &isnull));
			msgs = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull);

			if (received > 0)
			{
				Datum		dargs[2];
				Datum		done = msgs;

				handled = received;
				if (received > 1 && (one_by_one || one_by_one_window()))
					done = handle_one_by_one(&conf, msgs, cxt, &handled, &batch_error);
				else
				{
					HandlerCall hc = {&conf, msgs};

					/*
					 * The whole batch, with no subtransaction: an error
					 * aborts the batch (PG_CATCH below), and the next batch
					 * goes one by one.
					 */
					in_handler = true;
					handler_in_sandbox(&hc);
					in_handler = false;
				}

				/*
				 * Messages the handler deleted itself (with their receipts)
				 * answer false here; nothing else can have them: the
				 * receive's row locks hold until this transaction ends.
				 */
				if (handled > 0)
				{
					dargs[0] = PointerGetDatum(conf.queue_name);
					dargs[1] = done;
					rc = SPI_execute_plan(delete_plan, dargs, NULL, false, 0);
					if (rc != SPI_OK_SELECT)
						elog(ERROR, "consumer delete failed: %s", SPI_result_code_string(rc));
				}
			}
			SetUserIdAndSecContext(save_user, save_sec);
		}
		SPI_finish();
		PopActiveSnapshot();
		CommitTransactionCommand();
		note_handler(0, 0);
		pgstat_report_activity(STATE_IDLE, NULL);
		if (batch_error != NULL)
		{
			ereport(LOG,
					(errmsg("queue consumer \"%s\": " INT64_FORMAT " of " INT64_FORMAT " messages went back: %s: %s",
							my_name, (int64) (received - handled), (int64) received,
							unpack_sql_state(batch_error->sqlerrcode),
							batch_error->message ? batch_error->message : "")));
			result = BATCH_FAILED_HELD;
		}
		if (received > 0)
		{
			record_batch(handled, batch_error);
			fifo_one_at_a_time = batch_error != NULL;
			one_by_one = false;
		}
	}
	PG_CATCH();
	{
		ErrorData  *edata;
		bool		stopped;

		if (in_handler)
			disable_timeout(STATEMENT_TIMEOUT, false);
		MemoryContextSwitchTo(cxt);
		edata = CopyErrorData();
		FlushErrorState();

		/*
		 * Cancelled because the consumer was dropped or paused (the
		 * tender's polite stop, end_overstayers): the batch rolls back and
		 * counts as a receive of each message, as any rolled-back receive
		 * does, is no failure of the consumer's, and the process leaves.
		 */
		stopped = edata->sqlerrcode == ERRCODE_QUERY_CANCELED && told_to_stop();
		if (stopped)
		{
			AbortCurrentTransaction();
			LockReleaseSession(USER_LOCKMETHOD);	/* the handler's, if any */
			note_handler(0, 0);
			pgstat_report_activity(STATE_IDLE, NULL);
			ereport(LOG,
					(errmsg("queue consumer \"%s\": batch of " INT64_FORMAT " messages cancelled: the consumer was dropped or paused",
							my_name, (int64) received)));
			return BATCH_GONE;
		}

		/*
		 * The handler failed on a batch of several: this rollback counts
		 * none of them, and the next batch tries each message alone (only
		 * those that fail alone count).  A batch of one, or an error
		 * outside the handler, counts each message as any rollback does.
		 */
		if (in_handler && received > 1)
		{
			LWLockReleaseAll(); /* as the abort does first */
			queue_failed_uncount();
			one_by_one = true;
		}
		AbortCurrentTransaction();
		if (in_handler)
			LockReleaseSession(USER_LOCKMETHOD);	/* the handler's, if any */
		note_handler(0, 0);
		if (one_by_one)
			open_one_by_one_window();
		pgstat_report_activity(STATE_IDLE, NULL);
		ereport(LOG,
				(errmsg("queue consumer \"%s\": batch of " INT64_FORMAT " messages failed: %s: %s",
						my_name, (int64) received, unpack_sql_state(edata->sqlerrcode),
						edata->message ? edata->message : "")));
		record_batch(0, edata);
		if (received > 0)
			fifo_one_at_a_time = true;
		result = received > 0 ? BATCH_FAILED_HELD : BATCH_FAILED;
	}
	PG_END_TRY();
	return result;
}

void
queue_consumer_main(Datum arg)
{
	MemoryContext batch_cxt;
	int			backoff_ms = 0;

	my_slot = DatumGetInt32(arg);
	memcpy(&my_start, MyBgworkerEntry->bgw_extra, sizeof(my_start));
	snprintf(my_name, sizeof(my_name), "consumer " INT64_FORMAT, my_start.consumer_id);

	pqsignal(SIGHUP, SignalHandlerForConfigReload);
	pqsignal(SIGTERM, die);
	BackgroundWorkerUnblockSignals();
	BackgroundWorkerInitializeConnectionByOid(my_start.dbid, InvalidOid, 0);
	queue_pin_process_settings();

	LWLockAcquire(queue_consumer_shared->lock, LW_EXCLUSIVE);
	{
		QueueConsumerSlot *s = &queue_consumer_shared->slots[my_slot];

		if (s->dbid != my_start.dbid || s->generation != my_start.generation || s->stop)
		{
			LWLockRelease(queue_consumer_shared->lock);
			proc_exit(0);
		}
		s->pid = MyProcPid;
		s->idle_since = GetCurrentTimestamp();
	}
	LWLockRelease(queue_consumer_shared->lock);
	before_shmem_exit(consumer_exit, (Datum) 0);

	/* A FIFO receive takes one group per batch (receive.c). */
	queue_receive_one_group = true;
	batch_cxt = AllocSetContextCreate(TopMemoryContext, "queue consumer batch",
									  ALLOCSET_DEFAULT_SIZES);

	for (;;)
	{
		BatchResult r;

		/*
		 * Told to stop first: a cancel the tender sent it (a dropped or
		 * paused consumer's) may land after its batch ended, and is no
		 * error then.
		 */
		if (told_to_stop() || RecoveryInProgress())
			proc_exit(0);
		CHECK_FOR_INTERRUPTS();
		if (ConfigReloadPending)
		{
			ConfigReloadPending = false;
			ProcessConfigFile(PGC_SIGHUP);
		}

		r = run_batch(batch_cxt);
		MemoryContextReset(batch_cxt);
		pgstat_report_stat(false);
		if (r == BATCH_GONE)
			proc_exit(0);
		if (r == BATCH_DONE)
		{
			backoff_ms = 0;
			continue;
		}

		/*
		 * A failure with messages: failed.c keeps them back for the retry
		 * delay, and the next receive takes others (a short pause only
		 * keeps a handler that fails at once from spinning).  A failure
		 * before any message (a revoked privilege, say) would fail again
		 * at once: back off, up to CONSUMER_BACKOFF_MAX_MS.
		 */
		if (r == BATCH_FAILED_HELD)
			backoff_ms = CONSUMER_RETRY_PAUSE_MS;
		else
			backoff_ms = Min(Max(backoff_ms * 2, 1000), CONSUMER_BACKOFF_MAX_MS);
		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 backoff_ms, PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
		if (r == BATCH_FAILED_HELD)
			backoff_ms = 0;
	}
}
