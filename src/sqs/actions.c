/*-------------------------------------------------------------------------
 *
 * actions.c
 *	  Each SQS action as calls of the SQL API (DESIGN.md "SQS API"), run by
 *	  protocol.c inside its transaction, SPI connected, already as the
 *	  access key's role: the SQL API's own privilege checks apply, and this
 *	  file adds only SQS's wire rules (names, ranges, batches, attribute
 *	  types, digests) and its shapes.
 *
 * The input is the action's input shape as AWS JSON 1.0 sends it (a Query
 * request is folded into the same shape by protocol.c, every scalar a
 * string); the output is the output shape as a JSON object appended to
 * out.  Shapes and member names follow botocore's model of SQS
 * (2012-11-05), and for the message move tasks, which that model predates,
 * the current API reference.
 *
 * Every statement is schema-qualified, takes its input as parameters only,
 * and is prepared once per backend (plan_defs, SPI_keepplan).  Errors the
 * SQL API raises propagate to protocol.c, which maps their SQLSTATEs;
 * where SQS answers differently (receipts, ended leases), the error is
 * caught here: in a subtransaction when the action goes on (batch
 * entries), or turned into the SQS error at once when it does not.
 *
 * Choices where SQS and the SQL API differ (docs/sqs-api.md documents them):
 *	- FifoThroughputLimit is accepted (perQueue | perMessageGroupId) but
 *	  not stored; it reads back perMessageGroupId when the deduplication
 *	  scope is messageGroup, else perQueue.
 *	- CreateQueue of an existing queue compares only the attributes given
 *	  (as SQS and its emulators do; tags are not compared), so a bare
 *	  CreateQueue returns the URL of a queue made with other attributes.
 *	- LastModifiedTimestamp is the creation time (nothing records alters).
 *	- A message's size is checked as SQS counts it (body, attribute names,
 *	  types and values) against 1 MiB here, and by the SQL API against the
 *	  queue's max_message_size as it counts it (body + attributes' text).
 *	- A message move task is recorded here and run by the database's queue
 *	  worker in the background (src/worker/move_task.c), as the caller's role;
 *	  starting, listing and cancelling one need manage on its source queue.
 *	- On the wire as SQS, where SQL is stricter (DESIGN.md "SQS API",
 *	  2026-11-27): MessageIds are UUIDs mapped from message ids
 *	  (kv_message_id; queue.message_uuid in SQL), a stale receipt's
 *	  DeleteMessage succeeds and deletes nothing, a dead letter's
 *	  "queue.dead_letter" attribute is DeadLetterQueueSourceArn instead,
 *	  DeleteQueue drops a dead-letter queue (force), a second PurgeQueue
 *	  within 60 s is PurgeQueueInProgress (shared.c).
 *	- SSE attributes are kept in queue._sqs_attributes and reported as set,
 *	  never enforced; a Policy with statements is refused; AWSTraceHeader
 *	  is kept among the message's attributes (TRACE_HEADER_ATTR).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <locale.h>
#include <wctype.h>

#include "access/xact.h"
#include "catalog/pg_authid.h"
#include "catalog/pg_type.h"
#include "common/base64.h"
#include "common/jsonapi.h"
#include "executor/spi.h"
#include "mb/pg_wchar.h"
#include "miscadmin.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/datetime.h"
#include "utils/json.h"
#include "utils/jsonb.h"
#include "utils/memutils.h"
#include "utils/resowner.h"
#include "utils/timestamp.h"

#include "common/compat.h"
#include "core_api.h"
#include "sqs.h"

#define SQS_NAME_MAX			80
#define SQS_MAX_ATTRS			10		/* message attributes per message */
#define SQS_ATTR_NAME_MAX		256
#define SQS_TOKEN_MAX			128		/* group, dedup, attempt ids */
#define SQS_MESSAGE_MAX			(1024 * 1024)	/* SQS's largest message */
#define SQS_BATCH_MAX_BYTES		(1024 * 1024)	/* a whole send batch */
#define SQS_MAX_VISIBILITY		43200
#define SQS_LIST_MAX			1000
#define SQS_MOVE_TASKS_MAX		10
#define SQS_MAX_TAGS			50

/* where a message's AWSTraceHeader is kept among its attributes */
#define TRACE_HEADER_ATTR		"queue.aws_trace_header"

/* ---------------------------------------------------------------------
 * Statements, prepared once per backend and kept
 * ---------------------------------------------------------------------
 */
typedef enum PlanKind
{
	P_CREATE,
	P_ALTER,
	P_DROP,
	P_PURGE,
	P_QUEUE,
	P_LIST,
	P_DLQ_SOURCES,
	P_STATS,
	P_SEND,
	P_SEND_BATCH,
	P_WAIT_HINT,
	P_RECEIVE,
	P_DELETE,
	P_CHANGE_VIS,
	P_TAG,
	P_UNTAG,
	P_TASK_SOURCE,
	P_TASK_ADD,
	P_TASK_PRUNE,
	P_TASK_LIST,
	P_TASK_CANCEL,
	P_SSE_SET,
	P_SSE_GET,
	P_NUM
} PlanKind;

typedef struct PlanDef
{
	const char *sql;
	int			nargs;
	Oid			types[14];
} PlanDef;

static const PlanDef plan_defs[P_NUM] = {
	[P_CREATE] = {
		"SELECT queue.create(queue_name => $1, fifo => $2, visibility_timeout => $3,"
		" delay => $4, retention => $5, max_message_size => $6, receive_wait => $7,"
		" content_based_deduplication => $8, deduplication_scope => $9,"
		" dead_letter_queue => $10, max_receive_count => $11, redrive_allow => $12,"
		" tags => $13)",
		13, {TEXTOID, BOOLOID, INTERVALOID, INTERVALOID, INTERVALOID, INT4OID,
			INTERVALOID, BOOLOID, TEXTOID, TEXTOID, INT4OID, TEXTARRAYOID, JSONBOID}
	},
	[P_ALTER] = {
		"SELECT queue.alter(queue_name => $1, visibility_timeout => $2, delay => $3,"
		" retention => $4, max_message_size => $5, receive_wait => $6,"
		" content_based_deduplication => $7, deduplication_scope => $8,"
		" dead_letter_queue => $9, max_receive_count => $10, redrive_allow => $11)",
		11, {TEXTOID, INTERVALOID, INTERVALOID, INTERVALOID, INT4OID, INTERVALOID,
			BOOLOID, TEXTOID, TEXTOID, INT4OID, TEXTARRAYOID}
	},
	/* forced: SQS deletes a queue that is another's dead-letter queue */
	[P_DROP] = {"SELECT queue.drop(queue_name => $1, force => true)", 1, {TEXTOID}},
	[P_PURGE] = {"SELECT queue.purge(queue_name => $1)", 1, {TEXTOID}},
	[P_QUEUE] = {
		"SELECT q.queue_name, q.fifo, q.visibility_timeout, q.delay, q.retention,"
		" q.max_message_size, q.receive_wait, q.content_based_deduplication,"
		" q.deduplication_scope, q.dead_letter_queue, q.max_receive_count,"
		" q.redrive_allow, q.tags, q.created_at"
		" FROM queue.queues q WHERE q.queue_name OPERATOR(pg_catalog.=) $1",
		1, {TEXTOID}
	},
	[P_LIST] = {
		"SELECT q.queue_name FROM queue.queues q"
		" WHERE ($1::pg_catalog.text IS NULL OR pg_catalog.starts_with(q.queue_name, $1))"
		" AND ($2::pg_catalog.text IS NULL"
		"  OR q.queue_name COLLATE pg_catalog.\"C\" OPERATOR(pg_catalog.>) $2)"
		" ORDER BY q.queue_name COLLATE pg_catalog.\"C\" LIMIT $3",
		3, {TEXTOID, TEXTOID, INT8OID}
	},
	[P_DLQ_SOURCES] = {
		"SELECT q.queue_name FROM queue.queues q"
		" WHERE q.dead_letter_queue OPERATOR(pg_catalog.=) $1"
		" AND ($2::pg_catalog.text IS NULL"
		"  OR q.queue_name COLLATE pg_catalog.\"C\" OPERATOR(pg_catalog.>) $2)"
		" ORDER BY q.queue_name COLLATE pg_catalog.\"C\" LIMIT $3",
		3, {TEXTOID, TEXTOID, INT8OID}
	},
	[P_STATS] = {
		"SELECT s.visible, s.in_flight, s.delayed FROM queue.stats s"
		" WHERE s.queue_name OPERATOR(pg_catalog.=) $1",
		1, {TEXTOID}
	},
	[P_SEND] = {
		"SELECT s.message_id, s.sequence_number, s.duplicate"
		" FROM queue.send(queue_name => $1, body => $2, delay => $3,"
		" message_group_id => $4, deduplication_id => $5, attributes => $6) s",
		6, {TEXTOID, TEXTOID, INTERVALOID, TEXTOID, TEXTOID, JSONBOID}
	},
	[P_SEND_BATCH] = {
		"SELECT s.ordinal, s.message_id, s.sequence_number, s.duplicate"
		" FROM queue.send_batch(queue_name => $1, bodies => $2, delay => $3,"
		" message_group_ids => $4, deduplication_ids => $5, attributes => $6) s",
		6, {TEXTOID, TEXTARRAYOID, INTERVALOID, TEXTARRAYOID, TEXTARRAYOID, JSONBARRAYOID}
	},
	[P_WAIT_HINT] = {
		"SELECT h.queue_id, h.generation, h.next_visible_at FROM queue._wait_hint($1) h",
		1, {TEXTOID}
	},
	[P_RECEIVE] = {
		"SELECT m.message_id, m.receipt, m.body, m.attributes, m.message_group_id,"
		" m.deduplication_id, m.sequence_number, m.receive_count, m.sent_at,"
		" m.first_received_at"
		" FROM queue.receive(queue_name => $1, max_messages => $2,"
		" visibility_timeout => $3, wait => '0'::pg_catalog.interval,"
		" receive_attempt_id => $4) m",
		4, {TEXTOID, INT4OID, INTERVALOID, TEXTOID}
	},
	[P_DELETE] = {"SELECT queue.delete(queue_name => $1, receipt => $2)", 2, {TEXTOID, TEXTOID}},
	[P_CHANGE_VIS] = {
		"SELECT queue.change_visibility(queue_name => $1, receipt => $2, visibility_timeout => $3)",
		3, {TEXTOID, TEXTOID, INTERVALOID}
	},
	[P_TAG] = {
		"SELECT queue.alter(queue_name => $1, tags => (SELECT q.tags FROM queue.queues q"
		" WHERE q.queue_name OPERATOR(pg_catalog.=) $1) OPERATOR(pg_catalog.||) $2)",
		2, {TEXTOID, JSONBOID}
	},
	[P_UNTAG] = {
		"SELECT queue.alter(queue_name => $1, tags => (SELECT q.tags FROM queue.queues q"
		" WHERE q.queue_name OPERATOR(pg_catalog.=) $1) OPERATOR(pg_catalog.-) $2)",
		2, {TEXTOID, TEXTARRAYOID}
	},
	/* the move tasks' records are the tables' owner's: run_as_owner */
	[P_TASK_SOURCE] = {
		"SELECT q.queue_id, q.fifo, EXISTS (SELECT FROM queue._queues s"
		"  WHERE s.dead_letter_queue OPERATOR(pg_catalog.=) q.queue_id),"
		" queue._may(q, $2, 'manage'), queue._may(q, $2, 'send')"
		" FROM queue._queues q WHERE q.queue_name OPERATOR(pg_catalog.=) $1",
		2, {TEXTOID, OIDOID}
	},
	[P_TASK_ADD] = {
		"INSERT INTO queue._move_tasks (task_handle, source_queue_id, destination_queue_id,"
		" destination_queue, role, status, max_per_second, moved, to_move, upto_id, started_at)"
		" VALUES ($1, $2, $3, $4, $5, 'RUNNING', $6, 0, $7,"
		" COALESCE(pg_catalog.pg_sequence_last_value("
		"  'queue_data.message_id_seq'::pg_catalog.regclass), 0::pg_catalog.int8), $8)"
		" ON CONFLICT (source_queue_id) WHERE status OPERATOR(pg_catalog.=) 'RUNNING' DO NOTHING"
		" RETURNING task_handle",
		8, {TEXTOID, INT8OID, INT8OID, TEXTOID, OIDOID, INT4OID, INT8OID, TIMESTAMPTZOID}
	},
	[P_TASK_PRUNE] = {
		"DELETE FROM queue._move_tasks t WHERE t.source_queue_id OPERATOR(pg_catalog.=) $1"
		" AND t.status OPERATOR(pg_catalog.<>) 'RUNNING'"
		" AND t.task_handle OPERATOR(pg_catalog.<>) ALL (ARRAY(SELECT x.task_handle"
		"  FROM queue._move_tasks x WHERE x.source_queue_id OPERATOR(pg_catalog.=) $1"
		"  ORDER BY x.started_at DESC, x.task_handle LIMIT $2))",
		2, {INT8OID, INT8OID}
	},
	[P_TASK_LIST] = {
		"SELECT t.task_handle, t.destination_queue, t.status, t.moved, t.to_move,"
		" t.started_at, t.failure_reason, t.max_per_second FROM queue._move_tasks t"
		" WHERE t.source_queue_id OPERATOR(pg_catalog.=) $1"
		" ORDER BY t.started_at DESC, t.task_handle LIMIT $2",
		2, {INT8OID, INT8OID}
	},
	[P_TASK_CANCEL] = {
		"UPDATE queue._move_tasks t SET status = 'CANCELLED', ended_at = pg_catalog.now()"
		" FROM queue._queues q WHERE t.task_handle OPERATOR(pg_catalog.=) $1"
		" AND t.status OPERATOR(pg_catalog.=) 'RUNNING'"
		" AND q.queue_id OPERATOR(pg_catalog.=) t.source_queue_id"
		" AND t.source_queue_id OPERATOR(pg_catalog.=) $3"
		" AND queue._may(q, $2, 'manage') RETURNING t.moved",
		3, {TEXTOID, OIDOID, INT8OID}
	},
	/*
	 * SQS's encryption attributes, kept as given (queue._sqs_attributes is
	 * the tables' owner's: run_as_owner, after queue.create or queue.alter
	 * checked the caller's rights in the same transaction)
	 */
	[P_SSE_SET] = {
		"INSERT INTO queue._sqs_attributes AS a (queue_id, attributes)"
		" SELECT q.queue_id, $2 FROM queue._queues q WHERE q.queue_name OPERATOR(pg_catalog.=) $1"
		" ON CONFLICT (queue_id) DO UPDATE"
		" SET attributes = a.attributes OPERATOR(pg_catalog.||) EXCLUDED.attributes",
		2, {TEXTOID, JSONBOID}
	},
	[P_SSE_GET] = {
		"SELECT a.attributes FROM queue._sqs_attributes a JOIN queue._queues q"
		" ON q.queue_id OPERATOR(pg_catalog.=) a.queue_id"
		" WHERE q.queue_name OPERATOR(pg_catalog.=) $1",
		1, {TEXTOID}
	},
};

static SPIPlanPtr plans[P_NUM];

/* Run a statement kind, preparing it the first time. */
static void
run(PlanKind k, Datum *values, const char *nulls)
{
	int			rc;

	if (plans[k] == NULL)
	{
		SPIPlanPtr	p = SPI_prepare(plan_defs[k].sql, plan_defs[k].nargs,
									(Oid *) plan_defs[k].types);

		if (p == NULL)
			elog(ERROR, "SQS endpoint: could not prepare statement %d: %s",
				 (int) k, SPI_result_code_string(SPI_result));
		if (SPI_keepplan(p) != 0)
			elog(ERROR, "SQS endpoint: could not keep statement %d", (int) k);
		plans[k] = p;
	}
	rc = SPI_execute_plan(plans[k], values, nulls, false, 0);
	if (rc < 0)
		elog(ERROR, "SQS endpoint: statement %d failed: %s",
			 (int) k, SPI_result_code_string(rc));
}

/* Run a statement as the bootstrap superuser (the move task records). */
static void
run_as_owner(PlanKind k, Datum *values, const char *nulls)
{
	Oid			saved_uid;
	int			saved_sec;

	GetUserIdAndSecContext(&saved_uid, &saved_sec);
	SetUserIdAndSecContext(BOOTSTRAP_SUPERUSERID,
						   saved_sec | SECURITY_LOCAL_USERID_CHANGE);
	PG_TRY();
	{
		run(k, values, nulls);
	}
	PG_FINALLY();
	{
		SetUserIdAndSecContext(saved_uid, saved_sec);
	}
	PG_END_TRY();
}

/*
 * Run a statement in a subtransaction: NULL when it succeeded (its result
 * in SPI_tuptable), else the error it raised, rolled back.
 */
static ErrorData *
run_in_subxact(PlanKind k, Datum *values, const char *nulls, bool *result)
{
	MemoryContext oldcxt = CurrentMemoryContext;
	ResourceOwner oldowner = CurrentResourceOwner;
	ErrorData  *volatile edata = NULL;

	BeginInternalSubTransaction(NULL);
	MemoryContextSwitchTo(oldcxt);
	PG_TRY();
	{
		run(k, values, nulls);
		if (result != NULL)
		{
			bool		isnull;
			Datum		d = SPI_processed > 0 ?
				SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull) : (Datum) 0;

			*result = SPI_processed > 0 && !isnull && DatumGetBool(d);
		}
		ReleaseCurrentSubTransaction();
		MemoryContextSwitchTo(oldcxt);
		CurrentResourceOwner = oldowner;
	}
	PG_CATCH();
	{
		MemoryContextSwitchTo(oldcxt);
		edata = CopyErrorData();
		FlushErrorState();
		RollbackAndReleaseCurrentSubTransaction();
		MemoryContextSwitchTo(oldcxt);
		CurrentResourceOwner = oldowner;

		/*
		 * A lock wait or the request's time running out is the request's,
		 * not the entry's: the whole request is retried or refused
		 * (protocol.c's bounds).
		 */
		if (edata->sqlerrcode == ERRCODE_LOCK_NOT_AVAILABLE ||
			edata->sqlerrcode == ERRCODE_QUERY_CANCELED)
			ReThrowError(edata);
	}
	PG_END_TRY();
	return edata;
}

/* ---------------------------------------------------------------------
 * Reading the input shape
 * ---------------------------------------------------------------------
 */
static JsonbValue *
member(JsonbContainer *c, const char *key)
{
	if (c == NULL || !JsonContainerIsObject(c))
		return NULL;
	return getKeyJsonValueFromContainer(c, key, strlen(key), NULL);
}

/* A scalar as text (string, number or boolean); NULL when absent or null. */
static char *
scalar_text(JsonbValue *v, const char *name)
{
	if (v == NULL || v->type == jbvNull)
		return NULL;
	switch (v->type)
	{
		case jbvString:
			return pnstrdup(v->val.string.val, v->val.string.len);
		case jbvNumeric:
			return DatumGetCString(DirectFunctionCall1(numeric_out,
													   NumericGetDatum(v->val.numeric)));
		case jbvBool:
			return pstrdup(v->val.boolean ? "true" : "false");
		default:
			sqs_fail(SQS_ERR_INVALID_PARAMETER_VALUE,
					 "Value for parameter %s is invalid. Reason: must be a scalar.", name);
	}
	return NULL;				/* keep the compiler quiet */
}

static char *
in_str(JsonbContainer *c, const char *key)
{
	return scalar_text(member(c, key), key);
}

static char *
req_str(JsonbContainer *c, const char *key)
{
	char	   *s = in_str(c, key);

	if (s == NULL)
		sqs_fail(SQS_ERR_MISSING_PARAMETER,
				 "The request must contain the parameter %s.", key);
	return s;
}

/* Parse an integer; false when text is not one. */
static bool
wire_int(const char *text, int64 *out)
{
	const char *p = text;
	int64		v = 0;
	bool		neg = false;

	if (*p == '-' || *p == '+')
		neg = (*p++ == '-');
	if (*p == '\0')
		return false;
	for (; *p; p++)
	{
		if (*p < '0' || *p > '9' || v > INT64CONST(100000000000))
			return false;
		v = v * 10 + (*p - '0');
	}
	*out = neg ? -v : v;
	return true;
}

/* An integer member in [min, max]; false when absent. */
static bool
in_int(JsonbContainer *c, const char *key, int64 min, int64 max, int64 *out)
{
	char	   *s = in_str(c, key);

	if (s == NULL)
		return false;
	if (!wire_int(s, out) || *out < min || *out > max)
	{
		/* SQS's own words (REFERENCE.md 1.7; recorded by LocalStack's suite) */
		if (strcmp(key, "WaitTimeSeconds") == 0)
			sqs_fail(SQS_ERR_INVALID_PARAMETER_VALUE,
					 "Value %s for parameter %s is invalid. Reason: Must be >= "
					 INT64_FORMAT " and <= " INT64_FORMAT ", if provided.", s, key, min, max);
		sqs_fail(SQS_ERR_INVALID_PARAMETER_VALUE,
				 "Value %s for parameter %s is invalid. Reason: Must be between "
				 INT64_FORMAT " and " INT64_FORMAT ", if provided.", s, key, min, max);
	}
	return true;
}

static bool
wire_bool(const char *s, bool *out)
{
	if (pg_strcasecmp(s, "true") == 0)
		*out = true;
	else if (pg_strcasecmp(s, "false") == 0)
		*out = false;
	else
		return false;
	return true;
}

/* A container member (object or array); NULL when absent. */
static JsonbContainer *
in_container(JsonbContainer *c, const char *key, bool object)
{
	JsonbValue *v = member(c, key);

	if (v == NULL || v->type == jbvNull)
		return NULL;
	if (v->type != jbvBinary ||
		(object ? !JsonContainerIsObject(v->val.binary.data) :
		 !JsonContainerIsArray(v->val.binary.data)))
		sqs_fail(SQS_ERR_INVALID_PARAMETER_VALUE,
				 "Value for parameter %s is invalid. Reason: must be %s.", key,
				 object ? "a map" : "a list");
	return v->val.binary.data;
}

/* The members of an object, in its (jsonb) order. */
typedef struct Pairs
{
	int			n;
	char	  **keys;
	JsonbValue *vals;
} Pairs;

static void
obj_pairs(JsonbContainer *c, Pairs *p)
{
	JsonbIterator *it;
	JsonbValue	v;
	JsonbIteratorToken tok;
	int			cap;

	p->n = 0;
	if (c == NULL)
		return;
	cap = JsonContainerSize(c);
	p->keys = palloc0(Max(cap, 1) * sizeof(char *));
	p->vals = palloc0(Max(cap, 1) * sizeof(JsonbValue));
	it = JsonbIteratorInit(c);
	while ((tok = JsonbIteratorNext(&it, &v, true)) != WJB_DONE)
	{
		if (tok == WJB_KEY && p->n < cap)
			p->keys[p->n] = pnstrdup(v.val.string.val, v.val.string.len);
		else if (tok == WJB_VALUE && p->n < cap)
			p->vals[p->n++] = v;
	}
}

/* The strings of a list member (each element a scalar); count in *n. */
static char **
in_str_list(JsonbContainer *c, const char *key, int *n)
{
	JsonbContainer *arr = in_container(c, key, false);
	char	  **out;

	*n = 0;
	if (arr == NULL)
		return NULL;
	out = palloc0(Max(JsonContainerSize(arr), 1) * sizeof(char *));
	for (uint32 i = 0; i < JsonContainerSize(arr); i++)
	{
		JsonbValue *e = getIthJsonbValueFromContainer(arr, i);
		char	   *s = scalar_text(e, key);

		if (s != NULL)
			out[(*n)++] = s;
	}
	return out;
}

/* ---------------------------------------------------------------------
 * Names, URLs, ARNs
 * ---------------------------------------------------------------------
 */
char *
sqs_queue_url(const SqsCall *call, const char *queue_name)
{
	/* queue.sqs_public_url: the URL clients reach (a TLS proxy's) */
	if (call->public_url != NULL && call->public_url[0] != '\0')
	{
		size_t		len = strlen(call->public_url);

		while (len > 0 && call->public_url[len - 1] == '/')
			len--;
		return psprintf("%.*s/%s/%s", (int) len, call->public_url,
						call->account_id ? call->account_id : "000000000000",
						queue_name);
	}
	return psprintf("http://%s/%s/%s",
					call->host && call->host[0] ? call->host : "localhost",
					call->account_id ? call->account_id : "000000000000",
					queue_name);
}

char *
sqs_queue_arn(const SqsCall *call, const char *queue_name)
{
	return psprintf("arn:aws:sqs:%s:%s:%s",
					call->auth.region[0] ? call->auth.region : "us-east-1",
					call->account_id ? call->account_id : "000000000000",
					queue_name);
}

/* The queue name of a URL, a "/<account>/<name>" path or a bare name. */
static char *
name_of_url(const char *url)
{
	const char *slash = strrchr(url, '/');
	const char *name = slash ? slash + 1 : url;

	if (*name == '\0')
		sqs_fail(SQS_ERR_INVALID_PARAMETER_VALUE,
				 "Value %s for parameter QueueUrl is invalid. Reason: no queue name.", url);
	return pstrdup(name);
}

/* The queue name of an ARN (its last field) or of a bare name. */
static char *
name_of_arn(const char *arn, const char *param)
{
	const char *colon = strrchr(arn, ':');
	const char *name = colon ? colon + 1 : arn;

	if (*name == '\0')
		sqs_fail(SQS_ERR_INVALID_PARAMETER_VALUE,
				 "Value %s for parameter %s is invalid. Reason: not a queue ARN.", arn, param);
	return pstrdup(name);
}

/*
 * The queue an action addresses: its QueueUrl, or for the Query form sent
 * to the queue URL itself (no QueueUrl) the queue of the request path.
 */
static char *
queue_of(SqsCall *call)
{
	if (call->path_queue != NULL && in_str(&call->input->root, "QueueUrl") == NULL)
		return pstrdup(call->path_queue);
	return name_of_url(req_str(&call->input->root, "QueueUrl"));
}

/* SQS's name rule on the wire: 1-80 of [A-Za-z0-9_-], FIFO with ".fifo". */
static void
check_wire_name(const char *name, bool *fifo_suffix)
{
	size_t		len = strlen(name);
	size_t		stem = len;

	*fifo_suffix = len > 5 && strcmp(name + len - 5, ".fifo") == 0;
	if (*fifo_suffix)
		stem = len - 5;
	if (len == 0 || len > SQS_NAME_MAX || stem == 0)
		sqs_fail(SQS_ERR_INVALID_PARAMETER_VALUE,
				 "Can only include alphanumeric characters, hyphens, or underscores. 1 to 80 in length");
	for (size_t i = 0; i < stem; i++)
		if (!(isalnum((unsigned char) name[i]) || name[i] == '_' || name[i] == '-') ||
			(unsigned char) name[i] >= 0x80)
			sqs_fail(SQS_ERR_INVALID_PARAMETER_VALUE,
					 "Can only include alphanumeric characters, hyphens, or underscores. 1 to 80 in length");
}

/* A batch entry id: 1-80 of [A-Za-z0-9_-]. */
static bool
valid_entry_id(const char *id)
{
	size_t		len = strlen(id);

	if (len == 0 || len > SQS_NAME_MAX)
		return false;
	for (size_t i = 0; i < len; i++)
		if ((unsigned char) id[i] >= 0x80 ||
			!(isalnum((unsigned char) id[i]) || id[i] == '_' || id[i] == '-'))
			return false;
	return true;
}

/* A group, deduplication or attempt id: 1-128 of ASCII 33-126. */
static bool
valid_token(const char *t)
{
	size_t		len = strlen(t);

	if (len == 0 || len > SQS_TOKEN_MAX)
		return false;
	for (size_t i = 0; i < len; i++)
		if ((unsigned char) t[i] < 33 || (unsigned char) t[i] > 126)
			return false;
	return true;
}

/* SQS's allowed characters in a body or a string attribute value. */
static bool
valid_chars(const char *s)
{
	const unsigned char *p = (const unsigned char *) s;

	while (*p)
	{
		int			len = pg_utf_mblen(p);
		pg_wchar	c;

		for (int i = 1; i < len; i++)
			if (p[i] == '\0')
				return false;
		c = utf8_to_unicode(p);
		if (!(c == 0x9 || c == 0xA || c == 0xD ||
			  (c >= 0x20 && c <= 0xD7FF) ||
			  (c >= 0xE000 && c <= 0xFFFD) ||
			  (c >= 0x10000 && c <= 0x10FFFF)))
			return false;
		p += len;
	}
	return true;
}

/* ---------------------------------------------------------------------
 * Output helpers
 * ---------------------------------------------------------------------
 */
static void
key(StringInfo out, bool *first, const char *k)
{
	if (!*first)
		appendStringInfoChar(out, ',');
	*first = false;
	escape_json(out, k);
	appendStringInfoChar(out, ':');
}

static void
kv_str(StringInfo out, bool *first, const char *k, const char *v)
{
	key(out, first, k);
	escape_json(out, v);
}

static void
kv_int(StringInfo out, bool *first, const char *k, int64 v)
{
	key(out, first, k);
	appendStringInfo(out, INT64_FORMAT, v);
}

/* An attribute value on the wire: a string. */
static void
kv_int_str(StringInfo out, bool *first, const char *k, int64 v)
{
	char		buf[32];

	snprintf(buf, sizeof(buf), INT64_FORMAT, v);
	kv_str(out, first, k, buf);
}

/*
 * A message id as SQS's MessageId, a UUID (DESIGN.md "SQS API": one stable
 * mapping, the same from either door): 00000000-HHHH-4000-8000-LLLLLLLLLLLL,
 * HHHH the id's top 16 bits and L its low 48, in hex; a version-4, RFC 4122
 * variant UUID.  queue.message_uuid(bigint) and queue.message_id(uuid) in
 * SQL (queue--1.6--1.7.sql) compute the same mapping both ways.
 */
static void
kv_message_id(StringInfo out, bool *first, const char *k, int64 id)
{
	uint64		u = (uint64) id;
	char		buf[40];

	snprintf(buf, sizeof(buf), "00000000-%04x-4000-8000-%012llx",
			 (unsigned int) (u >> 48),
			 (unsigned long long) (u & UINT64CONST(0xFFFFFFFFFFFF)));
	kv_str(out, first, k, buf);
}

/*
 * A FIFO sequence number in SQS's shape: a decimal string of 20 digits,
 * increasing with ours ("1" and ours zero-padded to 19 digits: every
 * int64 fits).
 */
static void
kv_sequence(StringInfo out, bool *first, const char *k, int64 seq)
{
	char		buf[32];

	snprintf(buf, sizeof(buf), "1%019lld", (long long) seq);
	kv_str(out, first, k, buf);
}

static int64
epoch_ms(TimestampTz ts)
{
	return ts / 1000 +
		(int64) (POSTGRES_EPOCH_JDATE - UNIX_EPOCH_JDATE) * SECS_PER_DAY * 1000;
}

static int64
interval_secs(Datum d)
{
	Interval   *iv = DatumGetIntervalP(d);

	return iv->time / USECS_PER_SEC + (int64) iv->day * SECS_PER_DAY +
		(int64) iv->month * DAYS_PER_MONTH * SECS_PER_DAY;
}

static Datum
secs_interval(int64 s)
{
	Interval   *iv = palloc0(sizeof(Interval));

	iv->day = (int32) (s / SECS_PER_DAY);
	iv->time = (s % SECS_PER_DAY) * USECS_PER_SEC;
	return IntervalPGetDatum(iv);
}

static Datum
cstring_jsonb(const char *s)
{
	return DirectFunctionCall1(jsonb_in, CStringGetDatum(s));
}

static char *
b64_encode(const char *s)
{
	int			len = strlen(s);
	char	   *out = palloc(pg_b64_enc_len(len) + 1);
	int			n = pg_b64_encode((const void *) s, len, out, pg_b64_enc_len(len));

	if (n < 0)
		elog(ERROR, "could not encode a token");
	out[n] = '\0';
	return out;
}

static char *
b64_decode_token(const char *s, const char *param)
{
	int			len = strlen(s);
	char	   *out = palloc(pg_b64_dec_len(len) + 1);
	int			n = pg_b64_decode(s, len, (void *) out, pg_b64_dec_len(len));

	if (n <= 0 || memchr(out, '\0', n) != NULL)
		sqs_fail(SQS_ERR_INVALID_PARAMETER_VALUE,
				 "Value for parameter %s is invalid.", param);
	out[n] = '\0';
	return out;
}

static void
check_result_cols(int n)
{
	if (SPI_tuptable == NULL || SPI_tuptable->tupdesc->natts < n)
		elog(ERROR, "SQS endpoint: unexpected result shape");
}

static Datum
col(uint64 row, int c, bool *isnull)
{
	return SPI_getbinval(SPI_tuptable->vals[row], SPI_tuptable->tupdesc, c, isnull);
}

static char *
col_text(uint64 row, int c)
{
	bool		isnull;
	Datum		d = col(row, c, &isnull);

	return isnull ? NULL : TextDatumGetCString(d);
}

/* ---------------------------------------------------------------------
 * Queues
 * ---------------------------------------------------------------------
 */

/* A queue's row of queue.queues, copied out. */
typedef struct QueueRow
{
	char	   *name;
	bool		fifo;
	int64		visibility;
	int64		delay;
	int64		retention;
	int64		max_message_size;
	int64		receive_wait;
	bool		cbd;
	char	   *scope;
	char	   *dlq;
	int64		max_receive_count;
	bool		allow_null;
	int			nallow;
	char	  **allow;
	Jsonb	   *tags;
	TimestampTz created_at;
} QueueRow;

/* Look a queue up as the caller sees it; false when it may not see it. */
static bool
fetch_queue(const char *name, QueueRow *q)
{
	Datum		v[1] = {CStringGetTextDatum(name)};
	bool		isnull;
	Datum		d;

	run(P_QUEUE, v, NULL);
	if (SPI_processed == 0)
		return false;
	check_result_cols(14);
	q->name = col_text(0, 1);
	q->fifo = DatumGetBool(col(0, 2, &isnull));
	q->visibility = interval_secs(col(0, 3, &isnull));
	q->delay = interval_secs(col(0, 4, &isnull));
	q->retention = interval_secs(col(0, 5, &isnull));
	q->max_message_size = DatumGetInt32(col(0, 6, &isnull));
	q->receive_wait = interval_secs(col(0, 7, &isnull));
	q->cbd = DatumGetBool(col(0, 8, &isnull));
	q->scope = col_text(0, 9);
	q->dlq = col_text(0, 10);
	d = col(0, 11, &isnull);
	q->max_receive_count = isnull ? 0 : DatumGetInt32(d);
	d = col(0, 12, &isnull);
	q->allow_null = isnull;
	q->nallow = 0;
	if (!isnull)
	{
		Datum	   *elems;
		bool	   *nulls;

		deconstruct_array(DatumGetArrayTypeP(d), TEXTOID, -1, false, TYPALIGN_INT,
						  &elems, &nulls, &q->nallow);
		q->allow = palloc0(Max(q->nallow, 1) * sizeof(char *));
		for (int i = 0; i < q->nallow; i++)
			q->allow[i] = nulls[i] ? "" : TextDatumGetCString(elems[i]);
	}
	d = col(0, 13, &isnull);
	q->tags = isnull ? NULL : DatumGetJsonbPCopy(d);
	q->created_at = DatumGetTimestampTz(col(0, 14, &isnull));
	return true;
}

static void
need_queue(const char *name, QueueRow *q)
{
	if (!fetch_queue(name, q))
		sqs_fail(SQS_ERR_QUEUE_DOES_NOT_EXIST, "The specified queue does not exist.");
}

/* Settable attributes as an action gives them. */
typedef struct QueueAttrs
{
	bool		has_visibility,
				has_delay,
				has_retention,
				has_max_size,
				has_wait,
				has_fifo,
				has_cbd,
				has_scope,
				has_redrive,
				has_allow;
	int64		visibility,
				delay,
				retention,
				max_size,
				wait;
	bool		fifo,
				cbd;
	const char *scope;
	char	   *dlq;			/* "" removes the dead-letter queue */
	int64		max_receive_count;
	bool		allow_all;		/* redrive_allow null */
	int			nallow;
	char	  **allow;
	StringInfoData sse;			/* SQS's encryption attributes given, as
								 * a JSON object's members; len 0: none */
} QueueAttrs;

static void
bad_attr_value(const char *name, const char *value)
{
	sqs_fail(SQS_ERR_INVALID_ATTRIBUTE_VALUE,
			 "Invalid value for the parameter %s: %s", name, value);
}

static int64
attr_int(const char *name, const char *value, int64 min, int64 max)
{
	int64		v;

	if (!wire_int(value, &v) || v < min || v > max)
		bad_attr_value(name, value);
	return v;
}

static bool
attr_bool(const char *name, const char *value)
{
	bool		b;

	if (!wire_bool(value, &b))
		bad_attr_value(name, value);
	return b;
}

/* Parse a JSON policy text; NULL when it is not a JSON object. */
static JsonbContainer *
parse_policy(const char *text)
{
	JsonLexContext *lex;
	Jsonb	   *jb;

	/* PostgreSQL 17 takes the context to fill first (NULL: a new one) */
#if PG_VERSION_NUM >= 170000
	lex = makeJsonLexContextCstringLen(NULL, pstrdup(text), strlen(text),
									   GetDatabaseEncoding(), true);
#else
	lex = makeJsonLexContextCstringLen(pstrdup(text), strlen(text),
									   GetDatabaseEncoding(), true);
#endif
	if (pg_parse_json(lex, &nullSemAction) != JSON_SUCCESS)
		return NULL;
	jb = DatumGetJsonbP(cstring_jsonb(text));
	if (!JB_ROOT_IS_OBJECT(jb))
		return NULL;
	return &jb->root;
}

static void
parse_redrive_policy(const char *value, QueueAttrs *a)
{
	JsonbContainer *p;
	char	   *arn;
	char	   *count;

	a->has_redrive = true;
	if (value[0] == '\0')
	{
		a->dlq = "";
		return;
	}
	p = parse_policy(value);
	if (p == NULL)
		bad_attr_value("RedrivePolicy", value);
	arn = scalar_text(member(p, "deadLetterTargetArn"), "RedrivePolicy");
	count = scalar_text(member(p, "maxReceiveCount"), "RedrivePolicy");
	if (arn == NULL || count == NULL)
		sqs_fail(SQS_ERR_INVALID_PARAMETER_VALUE,
				 "Value %s for parameter RedrivePolicy is invalid. Reason: Redrive policy does not contain mandatory attribute: %s.",
				 value, arn == NULL ? "deadLetterTargetArn" : "maxReceiveCount");
	a->dlq = name_of_arn(arn, "RedrivePolicy");
	a->max_receive_count = attr_int("RedrivePolicy", count, 1, 1000);
}

static void
parse_redrive_allow(const char *value, QueueAttrs *a)
{
	JsonbContainer *p = parse_policy(value);
	char	   *perm;
	JsonbValue *arns;

	if (p == NULL)
		bad_attr_value("RedriveAllowPolicy", value);
	perm = scalar_text(member(p, "redrivePermission"), "RedriveAllowPolicy");
	arns = member(p, "sourceQueueArns");
	a->has_allow = true;
	a->allow_all = false;
	a->nallow = 0;
	if (perm != NULL && strcmp(perm, "allowAll") == 0 && arns == NULL)
		a->allow_all = true;
	else if (perm != NULL && strcmp(perm, "denyAll") == 0 && arns == NULL)
		 /* nallow 0: '{}' */ ;
	else if (perm != NULL && strcmp(perm, "byQueue") == 0 && arns != NULL &&
			 arns->type == jbvBinary && JsonContainerIsArray(arns->val.binary.data) &&
			 JsonContainerSize(arns->val.binary.data) >= 1 &&
			 JsonContainerSize(arns->val.binary.data) <= 10)
	{
		JsonbContainer *c = arns->val.binary.data;

		a->allow = palloc0(JsonContainerSize(c) * sizeof(char *));
		for (uint32 i = 0; i < JsonContainerSize(c); i++)
		{
			JsonbValue *e = getIthJsonbValueFromContainer(c, i);

			if (e->type != jbvString)
				bad_attr_value("RedriveAllowPolicy", value);
			a->allow[a->nallow++] =
				name_of_arn(pnstrdup(e->val.string.val, e->val.string.len),
							"RedriveAllowPolicy");
		}
	}
	else
		bad_attr_value("RedriveAllowPolicy", value);
}

/*
 * A queue's Policy: access here is PostgreSQL's privileges (the key's
 * role, queue.grant), which no SQS policy document can change, so the only
 * policy taken is none (an empty value, or a document without
 * statements); any other is refused, never stored as if it were enforced.
 */
static void
check_policy(const char *value)
{
	JsonbContainer *p;
	JsonbValue *st;

	if (value[0] == '\0')
		return;
	p = parse_policy(value);
	if (p == NULL)
		sqs_fail(SQS_ERR_INVALID_ATTRIBUTE_VALUE,
				 "Invalid value for the parameter Policy. Reason: it is not a JSON policy document.");
	st = member(p, "Statement");
	if (st == NULL || st->type == jbvNull ||
		(st->type == jbvBinary && JsonContainerIsArray(st->val.binary.data) &&
		 JsonContainerSize(st->val.binary.data) == 0))
		return;
	sqs_fail(SQS_ERR_INVALID_ATTRIBUTE_VALUE,
			 "Invalid value for the parameter Policy. Reason: this endpoint enforces access with PostgreSQL "
			 "privileges (the access key's role; GRANT through queue.grant), not queue policies, so a policy "
			 "with statements cannot be enforced and is not stored.");
}

/*
 * The Attributes map of CreateQueue or SetQueueAttributes.  fifo is the
 * queue's type (for Create: what FifoQueue says, read first).
 */
/* One "name":"value" of the encryption attributes kept */
static void
sse_pair(StringInfo sse, const char *name, const char *value)
{
	if (sse->len > 0)
		appendStringInfoChar(sse, ',');
	escape_json(sse, name);
	appendStringInfoChar(sse, ':');
	escape_json(sse, value);
}

static void
parse_queue_attrs(JsonbContainer *map, bool creating, QueueAttrs *a, bool queue_fifo)
{
	Pairs		p;
	const char *kms_key = NULL; /* KmsMasterKeyId given */
	int			managed = -1;	/* SqsManagedSseEnabled given: 0, 1 */

	memset(a, 0, sizeof(*a));
	initStringInfo(&a->sse);
	if (map == NULL)
		return;
	obj_pairs(map, &p);
	for (int i = 0; i < p.n; i++)
	{
		const char *n = p.keys[i];
		char	   *v = scalar_text(&p.vals[i], n);

		if (v == NULL)
			bad_attr_value(n, "null");
		if (strcmp(n, "VisibilityTimeout") == 0)
			a->has_visibility = true, a->visibility = attr_int(n, v, 0, SQS_MAX_VISIBILITY);
		else if (strcmp(n, "DelaySeconds") == 0)
			a->has_delay = true, a->delay = attr_int(n, v, 0, SQS_MAX_DELAY_SECONDS);
		else if (strcmp(n, "MessageRetentionPeriod") == 0)
			a->has_retention = true, a->retention = attr_int(n, v, 60, 1209600);
		else if (strcmp(n, "MaximumMessageSize") == 0)
			a->has_max_size = true, a->max_size = attr_int(n, v, 1024, SQS_MESSAGE_MAX);
		else if (strcmp(n, "ReceiveMessageWaitTimeSeconds") == 0)
			a->has_wait = true, a->wait = attr_int(n, v, 0, SQS_MAX_WAIT_SECONDS);
		else if (strcmp(n, "RedrivePolicy") == 0)
			parse_redrive_policy(v, a);
		else if (strcmp(n, "RedriveAllowPolicy") == 0)
			parse_redrive_allow(v, a);
		else if (strcmp(n, "FifoQueue") == 0)
		{
			/*
			 * As SQS: a standard queue knows no FifoQueue, not even false
			 * (at creation too); a FIFO queue takes true again, and refuses
			 * false as a change of type.
			 */
			bool		b = attr_bool(n, v);

			if (!queue_fifo)
				sqs_fail(SQS_ERR_INVALID_ATTRIBUTE_NAME, "Unknown Attribute FifoQueue.");
			if (!b)
				sqs_fail(SQS_ERR_INVALID_ATTRIBUTE_VALUE,
						 "Invalid value for the parameter FifoQueue. Reason: Modifying queue type is not supported.");
			a->has_fifo = true, a->fifo = b;
		}
		else if (strcmp(n, "ContentBasedDeduplication") == 0 ||
				 strcmp(n, "DeduplicationScope") == 0 ||
				 strcmp(n, "FifoThroughputLimit") == 0)
		{
			if (!queue_fifo && n[0] == 'C')
				sqs_fail(SQS_ERR_INVALID_ATTRIBUTE_NAME, "Unknown Attribute %s.", n);
			if (!queue_fifo)
				sqs_fail(SQS_ERR_INVALID_ATTRIBUTE_NAME,
						 "You can specify the %s only when FifoQueue is set to true.", n);
			if (n[0] == 'C')
				a->has_cbd = true, a->cbd = attr_bool(n, v);
			else if (n[0] == 'D')
			{
				a->has_scope = true;
				if (strcmp(v, "queue") == 0)
					a->scope = "queue";
				else if (strcmp(v, "messageGroup") == 0)
					a->scope = "message_group";
				else
					bad_attr_value(n, v);
			}
			else if (strcmp(v, "perQueue") != 0 && strcmp(v, "perMessageGroupId") != 0)
				bad_attr_value(n, v);
		}
		else if (strcmp(n, "SqsManagedSseEnabled") == 0 ||
				 strcmp(n, "KmsMasterKeyId") == 0 ||
				 strcmp(n, "KmsDataKeyReusePeriodSeconds") == 0)
		{
			/*
			 * Kept and reported as given (CDK and CloudFormation send them),
			 * never acted on: docs/sqs-api.md "What differs from AWS" says
			 * what is encrypted at rest (what PostgreSQL's storage is).
			 */
			const char *text = v;

			if (n[0] == 'S')
			{
				text = attr_bool(n, v) ? "true" : "false";
				managed = text[0] == 't' ? 1 : 0;
			}
			else if (strcmp(n, "KmsDataKeyReusePeriodSeconds") == 0)
				text = psprintf(INT64_FORMAT, attr_int(n, v, 60, 86400));
			else if (strlen(v) > 2048)
				bad_attr_value(n, v);
			else
				kms_key = v;
			sse_pair(&a->sse, n, text);
		}
		else if (strcmp(n, "Policy") == 0)
			check_policy(v);
		else
			sqs_fail(SQS_ERR_INVALID_ATTRIBUTE_NAME, "Unknown Attribute %s.", n);
	}

	/*
	 * SQS's two kinds of encryption exclude each other: a KMS key given
	 * turns SQS-managed encryption off, SQS-managed turned on drops the
	 * key, both at once are refused (AWS's words).
	 */
	if (kms_key != NULL && kms_key[0] != '\0' && managed == 1)
		sqs_fail(SQS_ERR_INVALID_ATTRIBUTE_NAME,
				 "You can use one type of server-side encryption (SSE) at one time. You can either enable KMS SSE or SQS SSE.");
	if (kms_key != NULL && kms_key[0] != '\0' && managed < 0)
		sse_pair(&a->sse, "SqsManagedSseEnabled", "false");
	if (managed == 1 && kms_key == NULL && !creating)
		sse_pair(&a->sse, "KmsMasterKeyId", "");
}

static Datum
names_array(char **names, int n)
{
	Datum	   *elems = palloc(Max(n, 1) * sizeof(Datum));

	for (int i = 0; i < n; i++)
		elems[i] = CStringGetTextDatum(names[i]);
	return PointerGetDatum(construct_array(elems, n, TEXTOID, -1, false, TYPALIGN_INT));
}

/* A tags map (string values) as a jsonb object. */
static Datum
tags_jsonb(JsonbContainer *map, const char *param)
{
	Pairs		p;
	StringInfoData buf;

	obj_pairs(map, &p);
	if (p.n > SQS_MAX_TAGS)
		sqs_fail(SQS_ERR_INVALID_PARAMETER_VALUE,
				 "Value for parameter %s is invalid. Reason: at most %d tags.", param, SQS_MAX_TAGS);
	initStringInfo(&buf);
	appendStringInfoChar(&buf, '{');
	for (int i = 0; i < p.n; i++)
	{
		char	   *v = scalar_text(&p.vals[i], param);

		if (strlen(p.keys[i]) < 1 || strlen(p.keys[i]) > 128 || v == NULL || strlen(v) > 256)
			sqs_fail(SQS_ERR_INVALID_PARAMETER_VALUE,
					 "Value for parameter %s is invalid. Reason: a tag key is 1 to 128 characters, a value at most 256.",
					 param);
		if (i > 0)
			appendStringInfoChar(&buf, ',');
		escape_json(&buf, p.keys[i]);
		appendStringInfoChar(&buf, ':');
		escape_json(&buf, v);
	}
	appendStringInfoChar(&buf, '}');
	return cstring_jsonb(buf.data);
}

/* The encryption attributes given, kept (after the call that checked rights) */
static void
store_sse(const char *name, const QueueAttrs *a)
{
	Datum		v[2];

	if (a->sse.len == 0)
		return;
	v[0] = CStringGetTextDatum(name);
	v[1] = cstring_jsonb(psprintf("{%s}", a->sse.data));
	run_as_owner(P_SSE_SET, v, NULL);
}

/*
 * The first attribute given to CreateQueue that an existing queue has
 * another value of (SQS names one in its QueueAlreadyExists message); NULL
 * when all match.
 */
static const char *
differing_attr(const QueueAttrs *a, bool fifo, const QueueRow *q)
{
	if (fifo != q->fifo)
		return "FifoQueue";
	if (a->has_visibility && a->visibility != q->visibility)
		return "VisibilityTimeout";
	if (a->has_delay && a->delay != q->delay)
		return "DelaySeconds";
	if (a->has_retention && a->retention != q->retention)
		return "MessageRetentionPeriod";
	if (a->has_max_size && a->max_size != q->max_message_size)
		return "MaximumMessageSize";
	if (a->has_wait && a->wait != q->receive_wait)
		return "ReceiveMessageWaitTimeSeconds";
	if (a->has_cbd && a->cbd != q->cbd)
		return "ContentBasedDeduplication";
	if (a->has_scope && strcmp(a->scope, q->scope) != 0)
		return "DeduplicationScope";
	if (a->has_redrive)
	{
		if (a->dlq[0] == '\0' ? q->dlq != NULL :
			(q->dlq == NULL || strcmp(a->dlq, q->dlq) != 0 ||
			 a->max_receive_count != q->max_receive_count))
			return "RedrivePolicy";
	}
	if (a->has_allow)
	{
		if (a->allow_all != q->allow_null)
			return "RedriveAllowPolicy";
		if (!a->allow_all)
		{
			if (a->nallow != q->nallow)
				return "RedriveAllowPolicy";
			for (int i = 0; i < a->nallow; i++)
			{
				bool		found = false;

				for (int j = 0; j < q->nallow && !found; j++)
					found = strcmp(a->allow[i], q->allow[j]) == 0;
				if (!found)
					return "RedriveAllowPolicy";
			}
		}
	}
	return NULL;
}

static void
act_create_queue(SqsCall *call, StringInfo out)
{
	JsonbContainer *in = &call->input->root;
	char	   *name = req_str(in, "QueueName");
	JsonbContainer *attrs = in_container(in, "Attributes", true);
	JsonbContainer *tags = in_container(in, "tags", true);
	QueueAttrs	a;
	QueueRow	existing;
	bool		suffix;
	bool		fifo = false;
	char	   *fifo_text;
	Datum		v[13];
	char		nulls[14] = "             ";
	bool		first = true;

	check_wire_name(name, &suffix);
	fifo_text = attrs ? scalar_text(member(attrs, "FifoQueue"), "FifoQueue") : NULL;
	if (fifo_text != NULL)
		fifo = attr_bool("FifoQueue", fifo_text);
	if (fifo && !suffix)
		sqs_fail(SQS_ERR_INVALID_PARAMETER_VALUE,
				 "The name of a FIFO queue can only include alphanumeric characters, hyphens, or underscores, must end with .fifo suffix and be 1 to 80 in length.");
	if (suffix && !fifo)
		sqs_fail(SQS_ERR_INVALID_PARAMETER_VALUE,
				 "Can only include alphanumeric characters, hyphens, or underscores. 1 to 80 in length: a name ending in .fifo needs FifoQueue=true.");
	parse_queue_attrs(attrs, true, &a, fifo);

	/*
	 * An existing queue: its URL when the attributes given match it (SQS
	 * compares those, not the defaults of the ones left out, nor tags).
	 */
	if (fetch_queue(name, &existing))
	{
		const char *differs = differing_attr(&a, fifo, &existing);

		if (differs != NULL)
			sqs_fail(SQS_ERR_QUEUE_NAME_EXISTS,
					 "A queue already exists with the same name and a different value for attribute %s",
					 differs);
		appendStringInfoChar(out, '{');
		kv_str(out, &first, "QueueUrl", sqs_queue_url(call, existing.name));
		appendStringInfoChar(out, '}');
		return;
	}

	v[0] = CStringGetTextDatum(name);
	v[1] = BoolGetDatum(fifo);
	v[2] = secs_interval(a.has_visibility ? a.visibility : 30);
	v[3] = secs_interval(a.has_delay ? a.delay : 0);
	v[4] = secs_interval(a.has_retention ? a.retention : 345600);
	v[5] = Int32GetDatum(a.has_max_size ? (int32) a.max_size : SQS_MESSAGE_MAX);
	v[6] = secs_interval(a.has_wait ? a.wait : 0);
	v[7] = BoolGetDatum(a.has_cbd ? a.cbd : false);
	v[8] = CStringGetTextDatum(a.has_scope ? a.scope : "queue");
	if (a.has_redrive && a.dlq[0] != '\0')
	{
		v[9] = CStringGetTextDatum(a.dlq);
		v[10] = Int32GetDatum((int32) a.max_receive_count);
	}
	else
		nulls[9] = nulls[10] = 'n';
	if (a.has_allow && !a.allow_all)
		v[11] = names_array(a.allow, a.nallow);
	else
		nulls[11] = 'n';
	v[12] = tags ? tags_jsonb(tags, "tags") : cstring_jsonb("{}");
	run(P_CREATE, v, nulls);
	store_sse(name, &a);

	appendStringInfoChar(out, '{');
	kv_str(out, &first, "QueueUrl", sqs_queue_url(call, name));
	appendStringInfoChar(out, '}');
}

static void
act_set_queue_attributes(SqsCall *call, StringInfo out)
{
	JsonbContainer *in = &call->input->root;
	char	   *name = queue_of(call);
	JsonbContainer *attrs = in_container(in, "Attributes", true);
	QueueRow	q;
	QueueAttrs	a;
	Datum		v[11];
	char		nulls[12] = "nnnnnnnnnnn";

	if (attrs == NULL)
		sqs_fail(SQS_ERR_MISSING_PARAMETER, "The request must contain the parameter Attributes.");
	need_queue(name, &q);
	parse_queue_attrs(attrs, false, &a, q.fifo);

	v[0] = CStringGetTextDatum(name);
	nulls[0] = ' ';
#define SET(i, has, datum) do { if (has) { v[i] = (datum); nulls[i] = ' '; } } while (0)
	SET(1, a.has_visibility, secs_interval(a.visibility));
	SET(2, a.has_delay, secs_interval(a.delay));
	SET(3, a.has_retention, secs_interval(a.retention));
	SET(4, a.has_max_size, Int32GetDatum((int32) a.max_size));
	SET(5, a.has_wait, secs_interval(a.wait));
	SET(6, a.has_cbd, BoolGetDatum(a.cbd));
	SET(7, a.has_scope, CStringGetTextDatum(a.has_scope ? a.scope : ""));
	SET(8, a.has_redrive, CStringGetTextDatum(a.has_redrive ? a.dlq : ""));
	SET(9, a.has_redrive && a.dlq[0] != '\0', Int32GetDatum((int32) a.max_receive_count));
	if (a.has_allow)
	{
		char	   *any[1] = {"*"};

		/* alter: '{*}' sets redrive_allow back to any source (null) */
		SET(10, true, a.allow_all ? names_array(any, 1) : names_array(a.allow, a.nallow));
	}
#undef SET
	run(P_ALTER, v, nulls);
	store_sse(name, &a);
	appendStringInfoString(out, "{}");
}


/*
 * A queue's visible, in-flight and delayed counts from queue.stats
 * (ApproximateNumberOfMessages*, a move task's messages to move).
 */
static void
queue_depth(const char *name, int64 *counts)
{
	Datum		v[1] = {CStringGetTextDatum(name)};

	counts[0] = counts[1] = counts[2] = 0;
	run(P_STATS, v, NULL);
	if (SPI_processed == 0)
		return;
	check_result_cols(3);
	for (int c = 0; c < 3; c++)
	{
		bool		isnull;
		Datum		d = col(0, c + 1, &isnull);

		counts[c] = isnull ? 0 : DatumGetInt64(d);
	}
}

/* Which queue attributes GetQueueAttributes answers. */
enum
{
	QA_VISIBILITY = 1 << 0,
	QA_DELAY = 1 << 1,
	QA_RETENTION = 1 << 2,
	QA_MAX_SIZE = 1 << 3,
	QA_WAIT = 1 << 4,
	QA_REDRIVE = 1 << 5,
	QA_ALLOW = 1 << 6,
	QA_FIFO = 1 << 7,
	QA_CBD = 1 << 8,
	QA_SCOPE = 1 << 9,
	QA_THROUGHPUT = 1 << 10,
	QA_VISIBLE = 1 << 11,
	QA_IN_FLIGHT = 1 << 12,
	QA_DELAYED = 1 << 13,
	QA_CREATED = 1 << 14,
	QA_MODIFIED = 1 << 15,
	QA_ARN = 1 << 16,
	QA_SSE = 1 << 17,
	QA_KMS_KEY = 1 << 18,
	QA_KMS_REUSE = 1 << 19,
	QA_ALL = (1 << 20) - 1
};

/* An attribute's name and its QA_* bit */
typedef struct AttrName
{
	const char *name;
	int			bit;
} AttrName;

static const AttrName queue_attr_names[] = {
	{"VisibilityTimeout", QA_VISIBILITY},
	{"DelaySeconds", QA_DELAY},
	{"MessageRetentionPeriod", QA_RETENTION},
	{"MaximumMessageSize", QA_MAX_SIZE},
	{"ReceiveMessageWaitTimeSeconds", QA_WAIT},
	{"RedrivePolicy", QA_REDRIVE},
	{"RedriveAllowPolicy", QA_ALLOW},
	{"FifoQueue", QA_FIFO},
	{"ContentBasedDeduplication", QA_CBD},
	{"DeduplicationScope", QA_SCOPE},
	{"FifoThroughputLimit", QA_THROUGHPUT},
	{"ApproximateNumberOfMessages", QA_VISIBLE},
	{"ApproximateNumberOfMessagesNotVisible", QA_IN_FLIGHT},
	{"ApproximateNumberOfMessagesDelayed", QA_DELAYED},
	{"CreatedTimestamp", QA_CREATED},
	{"LastModifiedTimestamp", QA_MODIFIED},
	{"SqsManagedSseEnabled", QA_SSE},
	{"KmsMasterKeyId", QA_KMS_KEY},
	{"KmsDataKeyReusePeriodSeconds", QA_KMS_REUSE},
	{"QueueArn", QA_ARN},
	{"All", QA_ALL},
	/* valid SQS names this endpoint has no value for */
	{"Policy", 0},
};

static void
act_get_queue_attributes(SqsCall *call, StringInfo out)
{
	JsonbContainer *in = &call->input->root;
	char	   *name = queue_of(call);
	int			n;
	char	  **names = in_str_list(in, "AttributeNames", &n);
	int			want = 0;
	QueueRow	q;
	bool		first = true;

	for (int i = 0; i < n; i++)
	{
		bool		found = false;

		for (int j = 0; j < lengthof(queue_attr_names); j++)
			if (strcmp(names[i], queue_attr_names[j].name) == 0)
			{
				want |= queue_attr_names[j].bit;
				found = true;
				break;
			}
		if (!found)
			sqs_fail(SQS_ERR_INVALID_ATTRIBUTE_NAME, "Unknown Attribute %s.", names[i]);
	}
	need_queue(name, &q);

	appendStringInfoString(out, "{");
	if (want == 0)
	{
		appendStringInfoChar(out, '}');
		return;
	}
	appendStringInfoString(out, "\"Attributes\":{");
	if (want & QA_ARN)
		kv_str(out, &first, "QueueArn", sqs_queue_arn(call, q.name));
	if (want & (QA_VISIBLE | QA_IN_FLIGHT | QA_DELAYED))
	{
		int64		counts[3];

		queue_depth(q.name, counts);
		if (want & QA_VISIBLE)
			kv_int_str(out, &first, "ApproximateNumberOfMessages", counts[0]);
		if (want & QA_IN_FLIGHT)
			kv_int_str(out, &first, "ApproximateNumberOfMessagesNotVisible", counts[1]);
		if (want & QA_DELAYED)
			kv_int_str(out, &first, "ApproximateNumberOfMessagesDelayed", counts[2]);
	}
	if (want & QA_CREATED)
		kv_int_str(out, &first, "CreatedTimestamp", epoch_ms(q.created_at) / 1000);
	if (want & QA_MODIFIED)
		kv_int_str(out, &first, "LastModifiedTimestamp", epoch_ms(q.created_at) / 1000);
	if (want & QA_VISIBILITY)
		kv_int_str(out, &first, "VisibilityTimeout", q.visibility);
	if (want & QA_DELAY)
		kv_int_str(out, &first, "DelaySeconds", q.delay);
	if (want & QA_RETENTION)
		kv_int_str(out, &first, "MessageRetentionPeriod", q.retention);
	if (want & QA_MAX_SIZE)
		kv_int_str(out, &first, "MaximumMessageSize", q.max_message_size);
	if (want & QA_WAIT)
		kv_int_str(out, &first, "ReceiveMessageWaitTimeSeconds", q.receive_wait);
	if ((want & QA_REDRIVE) && q.dlq != NULL)
	{
		StringInfoData p;

		initStringInfo(&p);
		appendStringInfoString(&p, "{\"deadLetterTargetArn\":");
		escape_json(&p, sqs_queue_arn(call, q.dlq));
		appendStringInfo(&p, ",\"maxReceiveCount\":" INT64_FORMAT "}", q.max_receive_count);
		kv_str(out, &first, "RedrivePolicy", p.data);
	}
	if ((want & QA_ALLOW) && !q.allow_null)
	{
		StringInfoData p;

		initStringInfo(&p);
		if (q.nallow == 0)
			appendStringInfoString(&p, "{\"redrivePermission\":\"denyAll\"}");
		else
		{
			appendStringInfoString(&p, "{\"redrivePermission\":\"byQueue\",\"sourceQueueArns\":[");
			for (int i = 0; i < q.nallow; i++)
			{
				if (i > 0)
					appendStringInfoChar(&p, ',');
				escape_json(&p, sqs_queue_arn(call, q.allow[i]));
			}
			appendStringInfoString(&p, "]}");
		}
		kv_str(out, &first, "RedriveAllowPolicy", p.data);
	}
	if (want & (QA_SSE | QA_KMS_KEY | QA_KMS_REUSE))
	{
		/*
		 * As SQS reports them: SqsManagedSseEnabled true unless turned off
		 * (SQS's default for new queues), the KMS pair only while a key is
		 * set (an empty key is none).
		 */
		Datum		v[1] = {CStringGetTextDatum(q.name)};
		Jsonb	   *sse = NULL;
		bool		has_key = false;
		static const AttrName sse_names[] = {
			{"SqsManagedSseEnabled", QA_SSE},
			{"KmsMasterKeyId", QA_KMS_KEY},
			{"KmsDataKeyReusePeriodSeconds", QA_KMS_REUSE},
		};

		run_as_owner(P_SSE_GET, v, NULL);
		if (SPI_processed > 0)
		{
			bool		isnull;
			Datum		d = col(0, 1, &isnull);

			if (!isnull)
				sse = DatumGetJsonbPCopy(d);
		}
		for (int i = 0; i < lengthof(sse_names); i++)
		{
			JsonbValue *jv = sse ? member(&sse->root, sse_names[i].name) : NULL;
			char	   *text = jv ? scalar_text(jv, sse_names[i].name) : NULL;

			if (sse_names[i].bit == QA_KMS_KEY)
				has_key = text != NULL && text[0] != '\0';
			if (!(want & sse_names[i].bit))
				continue;
			if (sse_names[i].bit == QA_SSE)
				kv_str(out, &first, sse_names[i].name, text != NULL ? text : "true");
			else if (has_key)
				kv_str(out, &first, sse_names[i].name, text != NULL ? text : "300");
		}
	}
	if (q.fifo)
	{
		bool		by_group = strcmp(q.scope, "message_group") == 0;

		if (want & QA_FIFO)
			kv_str(out, &first, "FifoQueue", "true");
		if (want & QA_CBD)
			kv_str(out, &first, "ContentBasedDeduplication", q.cbd ? "true" : "false");
		if (want & QA_SCOPE)
			kv_str(out, &first, "DeduplicationScope", by_group ? "messageGroup" : "queue");
		if (want & QA_THROUGHPUT)
			kv_str(out, &first, "FifoThroughputLimit", by_group ? "perMessageGroupId" : "perQueue");
	}
	appendStringInfoString(out, "}}");
}

static void
act_delete_queue(SqsCall *call, StringInfo out)
{
	Datum		v[1] = {CStringGetTextDatum(queue_of(call))};

	run(P_DROP, v, NULL);
	appendStringInfoString(out, "{}");
}

/*
 * PurgeQueue: one a queue a minute, as SQS (a second within 60 s is
 * PurgeQueueInProgress and purges nothing: its transaction rolls back).
 * Checked after the purge, so that only a purge the caller may do counts.
 */
static void
act_purge_queue(SqsCall *call, StringInfo out)
{
	char	   *name = queue_of(call);
	Datum		v[1] = {CStringGetTextDatum(name)};

	run(P_PURGE, v, NULL);
	if (!sqs_purge_note(name, GetCurrentTimestamp()))
		sqs_fail(SQS_ERR_PURGE_QUEUE_IN_PROGRESS,
				 "Only one PurgeQueue operation on %s is allowed every 60 seconds.", name);
	appendStringInfoString(out, "{}");
}

static void
act_get_queue_url(SqsCall *call, StringInfo out)
{
	char	   *name = req_str(&call->input->root, "QueueName");
	QueueRow	q;
	bool		first = true;

	need_queue(name, &q);
	appendStringInfoChar(out, '{');
	kv_str(out, &first, "QueueUrl", sqs_queue_url(call, q.name));
	appendStringInfoChar(out, '}');
}

/*
 * ListQueues and ListDeadLetterSourceQueues: names in byte order after the
 * NextToken (the last name returned, base64), MaxResults at a time.
 */
static void
list_queues(SqsCall *call, StringInfo out, PlanKind k, const char *filter,
			const char *list_member)
{
	JsonbContainer *in = &call->input->root;
	char	   *token = in_str(in, "NextToken");
	int64		max = SQS_LIST_MAX;
	bool		paged = in_int(in, "MaxResults", 1, SQS_LIST_MAX, &max);
	Datum		v[3];
	char		nulls[4] = "   ";
	uint64		n;
	bool		first = true;

	if (filter != NULL)
		v[0] = CStringGetTextDatum(filter);
	else
		nulls[0] = 'n';
	if (token != NULL && token[0] != '\0')
		v[1] = CStringGetTextDatum(b64_decode_token(token, "NextToken"));
	else
		nulls[1] = 'n';
	v[2] = Int64GetDatum(max + 1);
	run(k, v, nulls);
	n = Min(SPI_processed, (uint64) max);

	appendStringInfoChar(out, '{');
	if (n > 0 || k == P_DLQ_SOURCES)
	{
		key(out, &first, list_member);
		appendStringInfoChar(out, '[');
		for (uint64 i = 0; i < n; i++)
		{
			if (i > 0)
				appendStringInfoChar(out, ',');
			escape_json(out, sqs_queue_url(call, col_text(i, 1)));
		}
		appendStringInfoChar(out, ']');
	}
	if (paged && SPI_processed > (uint64) max)
		kv_str(out, &first, "NextToken", b64_encode(col_text(n - 1, 1)));
	appendStringInfoChar(out, '}');
}

static void
act_list_queues(SqsCall *call, StringInfo out)
{
	char	   *prefix = in_str(&call->input->root, "QueueNamePrefix");

	list_queues(call, out, P_LIST, prefix && prefix[0] ? prefix : NULL, "QueueUrls");
}

static void
act_list_dead_letter_source_queues(SqsCall *call, StringInfo out)
{
	char	   *name = queue_of(call);
	QueueRow	q;

	need_queue(name, &q);
	list_queues(call, out, P_DLQ_SOURCES, q.name, "queueUrls");
}

static void
act_tag_queue(SqsCall *call, StringInfo out)
{
	char	   *name = queue_of(call);
	JsonbContainer *tags = in_container(&call->input->root, "Tags", true);
	Datum		v[2];

	if (tags == NULL)
		sqs_fail(SQS_ERR_MISSING_PARAMETER, "The request must contain the parameter Tags.");
	v[0] = CStringGetTextDatum(name);
	v[1] = tags_jsonb(tags, "Tags");
	run(P_TAG, v, NULL);
	appendStringInfoString(out, "{}");
}

static void
act_untag_queue(SqsCall *call, StringInfo out)
{
	char	   *name = queue_of(call);
	int			n;
	char	  **keys = in_str_list(&call->input->root, "TagKeys", &n);
	Datum		v[2];

	if (keys == NULL)
		sqs_fail(SQS_ERR_MISSING_PARAMETER, "The request must contain the parameter TagKeys.");
	v[0] = CStringGetTextDatum(name);
	v[1] = names_array(keys, n);
	run(P_UNTAG, v, NULL);
	appendStringInfoString(out, "{}");
}

static void
act_list_queue_tags(SqsCall *call, StringInfo out)
{
	char	   *name = queue_of(call);
	QueueRow	q;
	Pairs		p;
	bool		first = true;

	need_queue(name, &q);
	appendStringInfoChar(out, '{');
	if (q.tags != NULL && JB_ROOT_IS_OBJECT(q.tags) && JB_ROOT_COUNT(q.tags) > 0)
	{
		obj_pairs(&q.tags->root, &p);
		appendStringInfoString(out, "\"Tags\":{");
		for (int i = 0; i < p.n; i++)
		{
			char	   *v;

			/* tags set from SQL may hold any JSON: its text */
			if (p.vals[i].type == jbvBinary)
				v = JsonbToCString(NULL, p.vals[i].val.binary.data, -1);
			else
				v = p.vals[i].type == jbvNull ? pstrdup("null") :
					scalar_text(&p.vals[i], "Tags");
			kv_str(out, &first, p.keys[i], v);
		}
		appendStringInfoChar(out, '}');
	}
	appendStringInfoChar(out, '}');
}

/* ---------------------------------------------------------------------
 * Sending
 * ---------------------------------------------------------------------
 */

/* One message to send, checked. */
typedef struct OutMsg
{
	char	   *id;				/* batch entry id */
	char	   *body;
	bool		has_delay;
	int64		delay;
	char	   *group;
	char	   *dedup;
	char	   *attrs;			/* SQS-shaped JSON text, NULL if none */
	char		md5_body[33];
	char		md5_attrs[33];
	bool		has_md5_attrs;
	char		md5_sys[33];	/* MD5OfMessageSystemAttributes */
	bool		has_md5_sys;
	bool		has_trace;		/* an AWSTraceHeader is kept */
	int64		size;			/* as SQS counts it */
	SqsError	err;			/* SQS_ERR_NONE when it may be sent */
	char	   *errmsg;
	int			ordinal;		/* in its send_batch call */
} OutMsg;

static bool
msg_error(OutMsg *m, SqsError err, const char *fmt,...) pg_attribute_printf(3, 4);

static bool
msg_error(OutMsg *m, SqsError err, const char *fmt,...)
{
	va_list		ap;
	StringInfoData buf;

	initStringInfo(&buf);
	for (;;)
	{
		int			needed;

		va_start(ap, fmt);
		needed = appendStringInfoVA(&buf, fmt, ap);
		va_end(ap);
		if (needed == 0)
			break;
		enlargeStringInfo(&buf, needed);
	}
	m->err = err;
	m->errmsg = buf.data;
	return false;
}

/*
 * A letter or digit of Unicode's, as SQS allows them in attribute names
 * ("attr.1øßä" is a name; "§" is not): glibc's C.UTF-8 classification,
 * whatever the database's locale; without that locale, the code points
 * from U+00C0 on that are not Latin-1's two signs.
 */
static bool
unicode_alnum(pg_wchar c)
{
	static locale_t utf8 = (locale_t) 0;
	static bool tried = false;

	if (!tried)
	{
		utf8 = newlocale(LC_CTYPE_MASK, "C.UTF-8", (locale_t) 0);
		tried = true;
	}
	if (utf8 != (locale_t) 0)
		return iswalnum_l((wint_t) c, utf8) != 0;
	return c >= 0xC0 && c != 0xD7 && c != 0xF7;
}

static bool
valid_attr_name(const char *n)
{
	size_t		len = strlen(n);
	const unsigned char *p = (const unsigned char *) n;

	if (len == 0 || len > SQS_ATTR_NAME_MAX || n[0] == '.' || n[len - 1] == '.' ||
		strstr(n, "..") != NULL ||
		pg_strncasecmp(n, "AWS.", 4) == 0 || pg_strncasecmp(n, "Amazon.", 7) == 0)
		return false;
	while (*p)
	{
		int			clen = pg_utf_mblen(p);

		if (*p < 0x80)
		{
			if (!(isalnum(*p) || *p == '_' || *p == '-' || *p == '.'))
				return false;
		}
		else
		{
			for (int i = 1; i < clen; i++)
				if (p[i] == '\0')
					return false;
			if (!unicode_alnum(utf8_to_unicode(p)))
				return false;
		}
		p += clen;
	}
	return true;
}

/* SQS's Number: a decimal with an optional exponent. */
static bool
valid_number(const char *s)
{
	const char *p = s;
	int			digits = 0;

	if (*p == '-' || *p == '+')
		p++;
	for (; isdigit((unsigned char) *p); p++)
		digits++;
	if (*p == '.')
		for (p++; isdigit((unsigned char) *p); p++)
			digits++;
	if (digits == 0)
		return false;
	if (*p == 'e' || *p == 'E')
	{
		p++;
		if (*p == '-' || *p == '+')
			p++;
		if (!isdigit((unsigned char) *p))
			return false;
		while (isdigit((unsigned char) *p))
			p++;
	}
	return *p == '\0';
}

/*
 * Check the MessageAttributes map of a message and build its stored form
 * (SQS's own shape) and MD5; false with m->err set when it breaks a rule.
 */
static bool
check_msg_attrs(JsonbContainer *map, OutMsg *m)
{
	Pairs		p;
	StringInfoData buf;

	obj_pairs(map, &p);
	if (p.n == 0)
		return true;
	if (p.n > SQS_MAX_ATTRS)
		return msg_error(m, SQS_ERR_INVALID_PARAMETER_VALUE,
						 "Number of message attributes [%d] exceeds the allowed maximum [%d].",
						 p.n, SQS_MAX_ATTRS);
	initStringInfo(&buf);
	appendStringInfoChar(&buf, '{');
	for (int i = 0; i < p.n; i++)
	{
		const char *n = p.keys[i];
		JsonbContainer *val;
		JsonbValue *tv;
		char	   *type;
		char	   *value;
		bool		binary;

		if (!valid_attr_name(n))
			return msg_error(m, SQS_ERR_INVALID_PARAMETER_VALUE,
							 "Message attribute name '%s' is invalid.", n);
		if (p.vals[i].type != jbvBinary || !JsonContainerIsObject(p.vals[i].val.binary.data))
			return msg_error(m, SQS_ERR_INVALID_PARAMETER_VALUE,
							 "The message attribute '%s' must have a value.", n);
		val = p.vals[i].val.binary.data;
		tv = member(val, "DataType");
		if (tv == NULL || tv->type != jbvString)
			return msg_error(m, SQS_ERR_INVALID_PARAMETER_VALUE,
							 "The message attribute '%s' must contain a non-empty message attribute type.", n);
		type = pnstrdup(tv->val.string.val, tv->val.string.len);
		binary = strncmp(type, "Binary", 6) == 0;
		if (!((strncmp(type, "String", 6) == 0 && (type[6] == '\0' || type[6] == '.')) ||
			  (strncmp(type, "Number", 6) == 0 && (type[6] == '\0' || type[6] == '.')) ||
			  (binary && (type[6] == '\0' || type[6] == '.'))) ||
			strlen(type) > SQS_ATTR_NAME_MAX || !valid_chars(type))
			return msg_error(m, SQS_ERR_INVALID_PARAMETER_VALUE,
							 "The type of message (user) attribute '%s' is invalid. You must use only the following supported type prefixes: Binary, Number, String.", n);
		tv = member(val, binary ? "BinaryValue" : "StringValue");
		if (tv == NULL || tv->type != jbvString)
			return msg_error(m, SQS_ERR_INVALID_PARAMETER_VALUE,
							 "The message attribute '%s' with type '%s' must use field '%s'.",
							 n, type, binary ? "Binary" : "String");
		value = pnstrdup(tv->val.string.val, tv->val.string.len);
		if (value[0] == '\0')
			return msg_error(m, SQS_ERR_INVALID_PARAMETER_VALUE,
							 "Message (user) attribute '%s' must contain a non-empty value of type '%s'.",
							 n, binary ? "Binary" : type[0] == 'N' ? "Number" : "String");
		if (binary)
		{
			int			dlen = pg_b64_dec_len(strlen(value));
			char	   *dec = palloc(dlen + 1);
			int			got = pg_b64_decode(value, strlen(value), (void *) dec, dlen);

			if (got < 0)
				return msg_error(m, SQS_ERR_INVALID_PARAMETER_VALUE,
								 "The binary value of message attribute '%s' is not base64.", n);
			m->size += got;
		}
		else
		{
			if (!valid_chars(value))
				return msg_error(m, SQS_ERR_INVALID_PARAMETER_VALUE,
								 "Message attribute '%s' contains invalid characters.", n);
			if (type[0] == 'N' && !valid_number(value))
				return msg_error(m, SQS_ERR_INVALID_PARAMETER_VALUE,
								 "Can't cast the value of message (user) attribute '%s' to a number.", n);
			m->size += strlen(value);
		}
		m->size += strlen(n) + strlen(type);
		if (i > 0)
			appendStringInfoChar(&buf, ',');
		escape_json(&buf, n);
		appendStringInfoString(&buf, ":{\"DataType\":");
		escape_json(&buf, type);
		appendStringInfoString(&buf, binary ? ",\"BinaryValue\":" : ",\"StringValue\":");
		escape_json(&buf, value);
		appendStringInfoChar(&buf, '}');
	}
	appendStringInfoChar(&buf, '}');
	m->attrs = buf.data;
	m->has_md5_attrs = sqs_md5_of_attributes(DatumGetJsonbP(cstring_jsonb(m->attrs)),
											 m->md5_attrs);
	return true;
}

/*
 * A message's MessageSystemAttributes: AWSTraceHeader (X-Ray) is the one a
 * sender may set, a String.  It is kept among the message's attributes
 * under TRACE_HEADER_ATTR (the SQL API sees it there) and goes back out
 * as the AWSTraceHeader system attribute, never as a message attribute.
 */
static void keep_trace_header(OutMsg *m, const char *value);

static bool
check_system_attrs(JsonbContainer *map, OutMsg *m)
{
	Pairs		p;
	JsonbValue *type;
	JsonbValue *sv;
	char	   *value;
	StringInfoData buf;

	obj_pairs(map, &p);
	if (p.n == 0)
		return true;
	if (p.n > 1 || strcmp(p.keys[0], "AWSTraceHeader") != 0)
		return msg_error(m, SQS_ERR_INVALID_PARAMETER_VALUE,
						 "Message system attribute name '%s' is invalid.",
						 strcmp(p.keys[0], "AWSTraceHeader") != 0 ? p.keys[0] : p.keys[1]);
	if (p.vals[0].type != jbvBinary || !JsonContainerIsObject(p.vals[0].val.binary.data) ||
		(type = member(p.vals[0].val.binary.data, "DataType")) == NULL ||
		type->type != jbvString || type->val.string.len != 6 ||
		strncmp(type->val.string.val, "String", 6) != 0 ||
		(sv = member(p.vals[0].val.binary.data, "StringValue")) == NULL ||
		sv->type != jbvString)
		return msg_error(m, SQS_ERR_INVALID_PARAMETER_VALUE,
						 "Value for message system attribute 'AWSTraceHeader' is invalid: it must be a String with a StringValue.");
	value = pnstrdup(sv->val.string.val, sv->val.string.len);
	if (value[0] == '\0' || !valid_chars(value) || strlen(value) > 3500)
		return msg_error(m, SQS_ERR_INVALID_PARAMETER_VALUE,
						 "Value for message system attribute 'AWSTraceHeader' is invalid.");
	m->size += strlen("AWSTraceHeader") + strlen("String") + strlen(value);

	/* its digest, as SQS answers it (MD5OfMessageSystemAttributes) */
	initStringInfo(&buf);
	appendStringInfoString(&buf, "{\"AWSTraceHeader\":{\"DataType\":\"String\",\"StringValue\":");
	escape_json(&buf, value);
	appendStringInfoString(&buf, "}}");
	m->has_md5_sys = sqs_md5_of_attributes(DatumGetJsonbP(cstring_jsonb(buf.data)), m->md5_sys);

	keep_trace_header(m, value);
	return true;
}

/* The trace header kept among the message's attributes (after their digest) */
static void
keep_trace_header(OutMsg *m, const char *value)
{
	StringInfoData buf;

	initStringInfo(&buf);
	escape_json(&buf, TRACE_HEADER_ATTR);
	appendStringInfoChar(&buf, ':');
	escape_json(&buf, value);
	if (m->attrs == NULL || strcmp(m->attrs, "{}") == 0)
		m->attrs = psprintf("{%s}", buf.data);
	else
		m->attrs = psprintf("%.*s,%s}", (int) strlen(m->attrs) - 1, m->attrs, buf.data);
	m->has_trace = true;
}

/*
 * X-Ray's X-Amzn-Trace-Id header of a send becomes its messages'
 * AWSTraceHeader when they name none themselves, as SQS does; a value SQS
 * would refuse as the attribute is not taken.
 */
static void
trace_from_header(SqsCall *call, OutMsg *m)
{
	const char *h = sqs_header(call->req, "X-Amzn-Trace-Id");

	if (h == NULL || m->err != SQS_ERR_NONE || m->has_trace ||
		h[0] == '\0' || strlen(h) > 3500 || !valid_chars(h))
		return;
	keep_trace_header(m, h);
}

/* A FIFO message's two rules, in SQS's words (a batch fails whole on them) */
#define FIFO_NO_GROUP "The request must contain the parameter MessageGroupId."
#define FIFO_NO_DEDUP "The queue should either have ContentBasedDeduplication enabled or MessageDeduplicationId provided explicitly"

/*
 * Read and check one message of SendMessage or a SendMessageBatch entry;
 * false with m->err set when it breaks one of SQS's rules.  q, when known
 * (always, since SendMessage too answers FIFO misuse in SQS's words), adds
 * the queue's rules (FIFO, size).
 */
static bool
read_message(JsonbContainer *e, OutMsg *m, const QueueRow *q)
{
	JsonbContainer *attrs;
	char	   *delay;

	memset(m, 0, sizeof(*m));
	m->body = in_str(e, "MessageBody");
	if (m->body == NULL || m->body[0] == '\0')
		return msg_error(m, SQS_ERR_MISSING_PARAMETER,
						 "The request must contain the parameter MessageBody.");
	if (!valid_chars(m->body))
		return msg_error(m, SQS_ERR_INVALID_MESSAGE_CONTENTS,
						 "Invalid binary character in the message body.");
	m->size = strlen(m->body);
	delay = in_str(e, "DelaySeconds");
	if (delay != NULL)
	{
		m->has_delay = true;
		if (!wire_int(delay, &m->delay) || m->delay < 0 || m->delay > SQS_MAX_DELAY_SECONDS)
			return msg_error(m, SQS_ERR_INVALID_PARAMETER_VALUE,
							 "Value %s for parameter DelaySeconds is invalid. Reason: must be between 0 and %d.",
							 delay, SQS_MAX_DELAY_SECONDS);
	}
	m->group = in_str(e, "MessageGroupId");
	if (m->group != NULL && !valid_token(m->group))
		return msg_error(m, SQS_ERR_INVALID_PARAMETER_VALUE,
						 "Value %s for parameter MessageGroupId is invalid. Reason: MessageGroupId "
						 "can only include alphanumeric and punctuation characters. 1 to 128 in length.",
						 m->group);
	m->dedup = in_str(e, "MessageDeduplicationId");
	if (m->dedup != NULL && !valid_token(m->dedup))
		return msg_error(m, SQS_ERR_INVALID_PARAMETER_VALUE,
						 "Value %s for parameter MessageDeduplicationId is invalid. Reason: MessageDeduplicationId "
						 "can only include alphanumeric and punctuation characters. 1 to 128 in length.",
						 m->dedup);
	attrs = in_container(e, "MessageAttributes", true);
	if (attrs != NULL && !check_msg_attrs(attrs, m))
		return false;
	attrs = in_container(e, "MessageSystemAttributes", true);
	if (attrs != NULL && !check_system_attrs(attrs, m))
		return false;
	if (m->size > SQS_MESSAGE_MAX || (q != NULL && m->size > q->max_message_size))
		return msg_error(m, SQS_ERR_INVALID_PARAMETER_VALUE,
						 "One or more parameters are invalid. Reason: Message must be shorter than "
						 INT64_FORMAT " bytes.",
						 q != NULL ? q->max_message_size : (int64) SQS_MESSAGE_MAX);
	if (q != NULL && q->fifo)
	{
		/*
		 * A FIFO message has no delay of its own (queue.send refuses one);
		 * SQS takes 0, which is none.
		 */
		if (m->has_delay && m->delay != 0)
			return msg_error(m, SQS_ERR_INVALID_PARAMETER_VALUE,
							 "Value %s for parameter DelaySeconds is invalid. Reason: The request include parameter that is not valid for this queue type.",
							 delay);
		m->has_delay = false;
		if (m->group == NULL)
			return msg_error(m, SQS_ERR_MISSING_PARAMETER, FIFO_NO_GROUP);
		if (m->dedup == NULL && !q->cbd)
			return msg_error(m, SQS_ERR_INVALID_PARAMETER_VALUE, FIFO_NO_DEDUP);
	}
	else if (q != NULL && m->dedup != NULL)
		return msg_error(m, SQS_ERR_INVALID_PARAMETER_VALUE,
						 "Value %s for parameter MessageDeduplicationId is invalid. Reason: The request include parameter that is not valid for this queue type.",
						 m->dedup);
	sqs_md5_hex(m->body, strlen(m->body), m->md5_body);
	return true;
}

/*
 * A batch's answer: its Successful and Failed entries (JSON text of the
 * array members), each list only when it has an entry, as SQS answers.
 */
static void
batch_result(StringInfo out, StringInfo ok, StringInfo failed)
{
	appendStringInfoChar(out, '{');
	if (ok->len > 0)
		appendStringInfo(out, "\"Successful\":[%s]", ok->data);
	if (failed->len > 0)
		appendStringInfo(out, "%s\"Failed\":[%s]", ok->len > 0 ? "," : "", failed->data);
	appendStringInfoChar(out, '}');
}

/*
 * Run a send whose messages read_message checked against the queue's
 * max_message_size as SQS counts them: queue.send does not count their
 * attributes again its own way (core_api.h).
 */
static void
run_send(PlanKind k, Datum *v, char *nulls)
{
	queue_sqs_sizes_checked(true);
	PG_TRY();
	{
		run(k, v, nulls);
	}
	PG_FINALLY();
	{
		queue_sqs_sizes_checked(false);
	}
	PG_END_TRY();
}

/* The fields of a sent message's result, shared by Send and SendBatch. */
static void
sent_fields(StringInfo out, bool *first, OutMsg *m, int64 id, bool seq_null, int64 seq)
{
	kv_str(out, first, "MD5OfMessageBody", m->md5_body);
	if (m->has_md5_attrs)
		kv_str(out, first, "MD5OfMessageAttributes", m->md5_attrs);
	if (m->has_md5_sys)
		kv_str(out, first, "MD5OfMessageSystemAttributes", m->md5_sys);
	kv_message_id(out, first, "MessageId", id);
	if (!seq_null)
		kv_sequence(out, first, "SequenceNumber", seq);
}

static void
act_send_message(SqsCall *call, StringInfo out)
{
	JsonbContainer *in = &call->input->root;
	char	   *name = queue_of(call);
	OutMsg		m;
	Datum		v[6];
	char		nulls[7] = "      ";
	bool		isnull,
				seq_null;
	int64		id,
				seq;
	bool		first = true;
	QueueRow	q;

	/*
	 * The queue's rules (FIFO, size) answered in SQS's words, not SQL's; a
	 * queue the caller cannot see is left to queue.send, which tells a
	 * missing queue from one the caller may not send to (AccessDenied).
	 */
	if (!read_message(in, &m, fetch_queue(name, &q) ? &q : NULL))
		sqs_fail(m.err, "%s", m.errmsg);
	trace_from_header(call, &m);
	v[0] = CStringGetTextDatum(name);
	v[1] = CStringGetTextDatum(m.body);
	if (m.has_delay)
		v[2] = secs_interval(m.delay);
	else
		nulls[2] = 'n';
	if (m.group)
		v[3] = CStringGetTextDatum(m.group);
	else
		nulls[3] = 'n';
	if (m.dedup)
		v[4] = CStringGetTextDatum(m.dedup);
	else
		nulls[4] = 'n';
	if (m.attrs)
		v[5] = cstring_jsonb(m.attrs);
	else
		nulls[5] = 'n';
	run_send(P_SEND, v, nulls);
	if (SPI_processed != 1)
		elog(ERROR, "SQS endpoint: queue.send returned " UINT64_FORMAT " rows", SPI_processed);
	check_result_cols(3);
	id = DatumGetInt64(col(0, 1, &isnull));
	seq = DatumGetInt64(col(0, 2, &seq_null));
	if (seq_null)
		seq = 0;
	appendStringInfoChar(out, '{');
	sent_fields(out, &first, &m, id, seq_null, seq);
	appendStringInfoChar(out, '}');
}

/* A batch request's entries: 1..10, distinct valid ids. */
static JsonbContainer **
batch_entries(SqsCall *call, int *n, char ***ids)
{
	JsonbContainer *arr = in_container(&call->input->root, "Entries", false);
	JsonbContainer **entries;

	/* SQS names the entry shape of the action: SendMessageBatchRequestEntry */
	if (arr == NULL || JsonContainerSize(arr) == 0)
		sqs_fail(SQS_ERR_EMPTY_BATCH_REQUEST,
				 "There should be at least one %sRequestEntry in the request.",
				 call->action);
	if (JsonContainerSize(arr) > SQS_MAX_BATCH)
		sqs_fail(SQS_ERR_TOO_MANY_ENTRIES_IN_BATCH_REQUEST,
				 "Maximum number of entries per request are %d. You have sent %u.",
				 SQS_MAX_BATCH, JsonContainerSize(arr));
	*n = JsonContainerSize(arr);
	entries = palloc(*n * sizeof(JsonbContainer *));
	*ids = palloc(*n * sizeof(char *));
	for (int i = 0; i < *n; i++)
	{
		JsonbValue *e = getIthJsonbValueFromContainer(arr, i);

		if (e->type != jbvBinary || !JsonContainerIsObject(e->val.binary.data))
			sqs_fail(SQS_ERR_INVALID_PARAMETER_VALUE, "Each batch entry must be a structure.");
		entries[i] = e->val.binary.data;
		(*ids)[i] = req_str(entries[i], "Id");
		if (!valid_entry_id((*ids)[i]))
			sqs_fail(SQS_ERR_INVALID_BATCH_ENTRY_ID,
					 "A batch entry id can only contain alphanumeric characters, hyphens and underscores. It can be at most 80 letters long.");
		for (int j = 0; j < i; j++)
			if (strcmp((*ids)[i], (*ids)[j]) == 0)
				sqs_fail(SQS_ERR_BATCH_ENTRY_IDS_NOT_DISTINCT,
						 "Id %s repeated.", (*ids)[i]);
	}
	return entries;
}

static const char *const error_codes[SQS_ERR_NUM] = {
	[SQS_ERR_INVALID_PARAMETER_VALUE] = "InvalidParameterValue",
	[SQS_ERR_MISSING_PARAMETER] = "MissingParameter",
	[SQS_ERR_INVALID_MESSAGE_CONTENTS] = "InvalidMessageContents",
	[SQS_ERR_RECEIPT_HANDLE_IS_INVALID] = "ReceiptHandleIsInvalid",
	[SQS_ERR_MESSAGE_NOT_INFLIGHT] = "AWS.SimpleQueueService.MessageNotInflight",
};

static void
failed_entry(StringInfo out, bool *first_entry, const char *id, SqsError err, const char *msg)
{
	bool		first = true;

	if (!*first_entry)
		appendStringInfoChar(out, ',');
	*first_entry = false;
	appendStringInfoChar(out, '{');
	kv_str(out, &first, "Id", id);
	key(out, &first, "SenderFault");
	appendStringInfoString(out, "true");
	kv_str(out, &first, "Code", error_codes[err] ? error_codes[err] : "InvalidParameterValue");
	kv_str(out, &first, "Message", msg);
	appendStringInfoChar(out, '}');
}

/* Array datum of n optional texts. */
static Datum
text_array_nulls(char **vals, int n, Oid type)
{
	Datum	   *elems = palloc(Max(n, 1) * sizeof(Datum));
	bool	   *nulls = palloc(Max(n, 1) * sizeof(bool));
	int			dims[1] = {n};
	int			lbs[1] = {1};

	for (int i = 0; i < n; i++)
	{
		nulls[i] = vals[i] == NULL;
		elems[i] = nulls[i] ? (Datum) 0 :
			(type == JSONBOID ? cstring_jsonb(vals[i]) : CStringGetTextDatum(vals[i]));
	}
	return PointerGetDatum(construct_md_array(elems, nulls, 1, dims, lbs, type,
											  type == JSONBOID ? -1 : -1, false, TYPALIGN_INT));
}

static void
act_send_message_batch(SqsCall *call, StringInfo out)
{
	char	   *name = queue_of(call);
	int			n;
	char	  **ids;
	JsonbContainer **entries = batch_entries(call, &n, &ids);
	OutMsg	   *msgs = palloc0(n * sizeof(OutMsg));
	int64	   *msg_ids = palloc0(n * sizeof(int64));
	int64	   *seqs = palloc0(n * sizeof(int64));
	bool	   *seq_nulls = palloc0(n * sizeof(bool));
	bool	   *done = palloc0(n * sizeof(bool));
	int64		total = 0;
	QueueRow	q;
	bool		first_entry = true;
	StringInfoData ok;
	StringInfoData failed;

	need_queue(name, &q);
	for (int i = 0; i < n; i++)
	{
		(void) read_message(entries[i], &msgs[i], &q);
		trace_from_header(call, &msgs[i]);
		msgs[i].id = ids[i];
		total += msgs[i].size;
	}
	/*
	 * A FIFO entry without its group, or without a deduplication id where
	 * the queue does not derive one, fails the whole batch (SQS's answer,
	 * InvalidParameterValue), not just the entry.
	 */
	for (int i = 0; i < n && q.fifo; i++)
		if (msgs[i].err != SQS_ERR_NONE &&
			(strcmp(msgs[i].errmsg, FIFO_NO_GROUP) == 0 || strcmp(msgs[i].errmsg, FIFO_NO_DEDUP) == 0))
			sqs_fail(SQS_ERR_INVALID_PARAMETER_VALUE, "%s", msgs[i].errmsg);
	if (total > SQS_BATCH_MAX_BYTES)
		sqs_fail(SQS_ERR_BATCH_REQUEST_TOO_LONG,
				 "Batch requests cannot be longer than %d bytes. You have sent " INT64_FORMAT " bytes.",
				 SQS_BATCH_MAX_BYTES, total);

	/*
	 * One queue.send_batch call for the entries that passed, or one per
	 * distinct DelaySeconds when the entries differ in it (the SQL call
	 * takes one delay): entries with the same delay keep their order.
	 */
	for (int lead = 0; lead < n; lead++)
	{
		char	  **bodies,
				  **groups,
				  **dedups,
				  **attrs;
		int		   *which;
		int			k = 0;
		bool		any_group = false,
					any_dedup = false,
					any_attrs = false;
		Datum		v[6];
		char		nulls[7] = "      ";

		if (done[lead] || msgs[lead].err != SQS_ERR_NONE)
			continue;
		bodies = palloc(n * sizeof(char *));
		groups = palloc(n * sizeof(char *));
		dedups = palloc(n * sizeof(char *));
		attrs = palloc(n * sizeof(char *));
		which = palloc(n * sizeof(int));
		for (int i = lead; i < n; i++)
		{
			OutMsg	   *m = &msgs[i];

			if (done[i] || m->err != SQS_ERR_NONE ||
				m->has_delay != msgs[lead].has_delay ||
				(m->has_delay && m->delay != msgs[lead].delay))
				continue;
			done[i] = true;
			which[k] = i;
			bodies[k] = m->body;
			groups[k] = m->group;
			dedups[k] = m->dedup;
			attrs[k] = m->attrs;
			any_group |= m->group != NULL;
			any_dedup |= m->dedup != NULL;
			any_attrs |= m->attrs != NULL;
			k++;
		}
		v[0] = CStringGetTextDatum(name);
		v[1] = text_array_nulls(bodies, k, TEXTOID);
		if (msgs[lead].has_delay)
			v[2] = secs_interval(msgs[lead].delay);
		else
			nulls[2] = 'n';
		if (any_group)
			v[3] = text_array_nulls(groups, k, TEXTOID);
		else
			nulls[3] = 'n';
		if (any_dedup)
			v[4] = text_array_nulls(dedups, k, TEXTOID);
		else
			nulls[4] = 'n';
		if (any_attrs)
			v[5] = text_array_nulls(attrs, k, JSONBOID);
		else
			nulls[5] = 'n';
		run_send(P_SEND_BATCH, v, nulls);
		check_result_cols(4);
		for (uint64 r = 0; r < SPI_processed; r++)
		{
			bool		isnull;
			int			ord = DatumGetInt32(col(r, 1, &isnull));

			if (ord < 1 || ord > k)
				elog(ERROR, "SQS endpoint: queue.send_batch returned ordinal %d", ord);
			msg_ids[which[ord - 1]] = DatumGetInt64(col(r, 2, &isnull));
			seqs[which[ord - 1]] = DatumGetInt64(col(r, 3, &seq_nulls[which[ord - 1]]));
			if (seq_nulls[which[ord - 1]])
				seqs[which[ord - 1]] = 0;
		}
	}

	initStringInfo(&ok);
	for (int i = 0; i < n; i++)
	{
		bool		first = true;

		if (msgs[i].err != SQS_ERR_NONE)
			continue;
		if (!first_entry)
			appendStringInfoChar(&ok, ',');
		first_entry = false;
		appendStringInfoChar(&ok, '{');
		kv_str(&ok, &first, "Id", msgs[i].id);
		sent_fields(&ok, &first, &msgs[i], msg_ids[i], seq_nulls[i], seqs[i]);
		appendStringInfoChar(&ok, '}');
	}
	initStringInfo(&failed);
	first_entry = true;
	for (int i = 0; i < n; i++)
		if (msgs[i].err != SQS_ERR_NONE)
			failed_entry(&failed, &first_entry, msgs[i].id, msgs[i].err, msgs[i].errmsg);
	batch_result(out, &ok, &failed);
}

/* ---------------------------------------------------------------------
 * Receiving
 * ---------------------------------------------------------------------
 */
enum
{
	SA_SENDER = 1 << 0,
	SA_SENT = 1 << 1,
	SA_COUNT = 1 << 2,
	SA_FIRST = 1 << 3,
	SA_SEQ = 1 << 4,
	SA_GROUP = 1 << 5,
	SA_DEDUP = 1 << 6,
	SA_DLQ_SOURCE = 1 << 7,
	SA_TRACE = 1 << 8,
	SA_ALL = (1 << 9) - 1
};

/*
 * The attribute the SQL API gives a dead letter (deadletter.c): on the
 * wire a dead letter carries no attribute of ours (SQS's limit of 10 would
 * count it), and its source is the DeadLetterQueueSourceArn system
 * attribute instead.
 */
#define DEAD_LETTER_ATTR "queue.dead_letter"

static int
system_attr_bits(char **names, int n)
{
	static const struct
	{
		const char *name;
		int			bit;
	}			map[] = {
		{"All", SA_ALL},
		{"SenderId", SA_SENDER},
		{"SentTimestamp", SA_SENT},
		{"ApproximateReceiveCount", SA_COUNT},
		{"ApproximateFirstReceiveTimestamp", SA_FIRST},
		{"SequenceNumber", SA_SEQ},
		{"MessageGroupId", SA_GROUP},
		{"MessageDeduplicationId", SA_DEDUP},
		{"DeadLetterQueueSourceArn", SA_DLQ_SOURCE},
		{"AWSTraceHeader", SA_TRACE},
	};
	int			bits = 0;

	/* names SQS knows and we have nothing for (AWSTraceHeader...) ask nothing */
	for (int i = 0; i < n; i++)
		for (int j = 0; j < lengthof(map); j++)
			if (strcmp(names[i], map[j].name) == 0)
				bits |= map[j].bit;
	return bits;
}

/* Whether MessageAttributeNames asks for attribute name. */
static bool
wants_attr(const char *name, char **names, int n)
{
	for (int i = 0; i < n; i++)
	{
		size_t		len = strlen(names[i]);

		/* "All", "*" and ".*" are every one; "Hel.*" is Hello and Help.Me (SQS's) */
		if (strcmp(names[i], "All") == 0 || strcmp(names[i], ".*") == 0 ||
			strcmp(names[i], "*") == 0 || strcmp(names[i], name) == 0)
			return true;
		if (len >= 2 && strcmp(names[i] + len - 2, ".*") == 0 &&
			strncmp(name, names[i], len - 2) == 0)
			return true;
	}
	return false;
}

/*
 * The requested message attributes of a received message as SQS's
 * MessageAttributes object text; NULL when none.  Values already in SQS's
 * shape (sent over HTTP) go out as they are; plain JSON attributes (sent
 * from SQL) become String (strings, and any other JSON as its text) or
 * Number (numbers).
 */
static char *
received_attrs(Jsonb *attrs, char **names, int n)
{
	Pairs		p;
	StringInfoData buf;
	int			k = 0;

	if (attrs == NULL || n == 0 || !JB_ROOT_IS_OBJECT(attrs))
		return NULL;
	obj_pairs(&attrs->root, &p);
	initStringInfo(&buf);
	appendStringInfoChar(&buf, '{');
	for (int i = 0; i < p.n; i++)
	{
		JsonbValue *v = &p.vals[i];

		if (strcmp(p.keys[i], DEAD_LETTER_ATTR) == 0 ||
			strcmp(p.keys[i], TRACE_HEADER_ATTR) == 0 ||
			!wants_attr(p.keys[i], names, n))
			continue;
		if (k++ > 0)
			appendStringInfoChar(&buf, ',');
		escape_json(&buf, p.keys[i]);
		appendStringInfoChar(&buf, ':');
		if (v->type == jbvBinary && JsonContainerIsObject(v->val.binary.data) &&
			member(v->val.binary.data, "DataType") != NULL)
			(void) JsonbToCString(&buf, v->val.binary.data, -1);
		else if (v->type == jbvString)
		{
			appendStringInfoString(&buf, "{\"DataType\":\"String\",\"StringValue\":");
			escape_json(&buf, pnstrdup(v->val.string.val, v->val.string.len));
			appendStringInfoChar(&buf, '}');
		}
		else if (v->type == jbvNumeric)
		{
			appendStringInfoString(&buf, "{\"DataType\":\"Number\",\"StringValue\":");
			escape_json(&buf, scalar_text(v, "attributes"));
			appendStringInfoChar(&buf, '}');
		}
		else
		{
			char	   *text;

			if (v->type == jbvBinary)
				text = JsonbToCString(NULL, v->val.binary.data, -1);
			else if (v->type == jbvBool)
				text = v->val.boolean ? "true" : "false";
			else
				text = "null";
			appendStringInfoString(&buf, "{\"DataType\":\"String\",\"StringValue\":");
			escape_json(&buf, text);
			appendStringInfoChar(&buf, '}');
		}
	}
	appendStringInfoChar(&buf, '}');
	return k > 0 ? buf.data : NULL;
}

static void
act_receive_message(SqsCall *call, StringInfo out, SqsResponse *resp)
{
	JsonbContainer *in = &call->input->root;
	char	   *name = queue_of(call);
	int64		max = 1;
	int64		visibility = -1;
	int64		wait = -1;
	char	   *attempt = in_str(in, "ReceiveRequestAttemptId");
	int			n_sys,
				n_sys2,
				n_attr;
	char	  **sys = in_str_list(in, "AttributeNames", &n_sys);
	char	  **sys2 = in_str_list(in, "MessageSystemAttributeNames", &n_sys2);
	char	  **attr_names = in_str_list(in, "MessageAttributeNames", &n_attr);
	int			sys_bits = system_attr_bits(sys, n_sys) | system_attr_bits(sys2, n_sys2);
	Datum		v[4];
	char		nulls[5] = "    ";
	int64		queue_id = 0;
	uint64		generation = 0;
	TimestampTz next_visible = 0;
	bool		next_null = true;
	char	   *sender = NULL;

	(void) in_int(in, "MaxNumberOfMessages", 1, SQS_MAX_BATCH, &max);
	(void) in_int(in, "VisibilityTimeout", 0, SQS_MAX_VISIBILITY, &visibility);
	(void) in_int(in, "WaitTimeSeconds", 0, SQS_MAX_WAIT_SECONDS, &wait);
	if (attempt != NULL && !valid_token(attempt))
		sqs_fail(SQS_ERR_INVALID_PARAMETER_VALUE,
				 "Value %s for parameter ReceiveRequestAttemptId is invalid.", attempt);
	if (wait < 0)
	{
		QueueRow	q;

		need_queue(name, &q);
		wait = Min(q.receive_wait, SQS_MAX_WAIT_SECONDS);
	}

	/* the wait slot's generation is read before the receive tries */
	v[0] = CStringGetTextDatum(name);
	if (wait > 0)
	{
		run(P_WAIT_HINT, v, NULL);
		if (SPI_processed > 0)
		{
			bool		isnull;
			Datum		d;

			check_result_cols(3);
			d = col(0, 1, &isnull);
			queue_id = isnull ? 0 : DatumGetInt64(d);
			d = col(0, 2, &isnull);
			generation = isnull ? 0 : (uint64) DatumGetInt64(d);
			d = col(0, 3, &next_null);
			if (!next_null)
				next_visible = DatumGetTimestampTz(d);
		}
	}

	v[1] = Int32GetDatum((int32) max);
	if (visibility >= 0)
		v[2] = secs_interval(visibility);
	else
		nulls[2] = 'n';
	if (attempt != NULL)
		v[3] = CStringGetTextDatum(attempt);
	else
		nulls[3] = 'n';
	run(P_RECEIVE, v, nulls);

	if (SPI_processed == 0)
	{
		TimestampTz now = GetCurrentTimestamp();
		TimestampTz deadline = TimestampTzPlusMilliseconds(call->req->started_at,
														   wait * 1000);

		if (wait > 0 && now < deadline && queue_id != 0)
		{
			TimestampTz until = deadline;

			if (!next_null)
			{
				/* a hint already past: look again shortly, never spin */
				if (next_visible <= now)
					next_visible = TimestampTzPlusMilliseconds(now, 200);
				until = Min(until, next_visible);
			}
			resp->park = true;
			resp->park_queue_id = queue_id;
			resp->park_generation = generation;
			resp->park_until = until;
			return;
		}
		appendStringInfoString(out, "{}");
		return;
	}

	check_result_cols(10);
	if (sys_bits & SA_SENDER)
	{
		sender = GetUserNameFromId(call->auth.role, true);
		if (sender == NULL)
			sender = call->auth.access_key_id;
	}
	appendStringInfoString(out, "{\"Messages\":[");
	for (uint64 r = 0; r < SPI_processed; r++)
	{
		bool		isnull;
		bool		first = true;
		int64		id = DatumGetInt64(col(r, 1, &isnull));
		char	   *receipt = col_text(r, 2);
		char	   *body = col_text(r, 3);
		Datum		d;
		Jsonb	   *attrs;
		char	   *group = col_text(r, 5);
		char	   *dedup = col_text(r, 6);
		bool		seq_null;
		int64		seq;
		int32		count;
		TimestampTz sent_at;
		TimestampTz first_at;
		bool		first_null;
		char		md5[33];
		char	   *mattrs;

		d = col(r, 4, &isnull);
		attrs = isnull ? NULL : DatumGetJsonbP(d);
		d = col(r, 7, &seq_null);
		seq = seq_null ? 0 : DatumGetInt64(d);
		count = DatumGetInt32(col(r, 8, &isnull));
		sent_at = DatumGetTimestampTz(col(r, 9, &isnull));
		d = col(r, 10, &first_null);
		first_at = first_null ? GetCurrentTimestamp() : DatumGetTimestampTz(d);
		if (body == NULL)
			body = "";

		if (r > 0)
			appendStringInfoChar(out, ',');
		appendStringInfoChar(out, '{');
		kv_message_id(out, &first, "MessageId", id);
		kv_str(out, &first, "ReceiptHandle", receipt ? receipt : "");
		sqs_md5_hex(body, strlen(body), md5);
		kv_str(out, &first, "MD5OfBody", md5);
		kv_str(out, &first, "Body", body);
		if (sys_bits != 0)
		{
			bool		f = true;

			key(out, &first, "Attributes");
			appendStringInfoChar(out, '{');
			if (sys_bits & SA_SENDER)
				kv_str(out, &f, "SenderId", sender);
			if (sys_bits & SA_SENT)
				kv_int_str(out, &f, "SentTimestamp", epoch_ms(sent_at));
			if (sys_bits & SA_COUNT)
				kv_int_str(out, &f, "ApproximateReceiveCount", count);
			if (sys_bits & SA_FIRST)
				kv_int_str(out, &f, "ApproximateFirstReceiveTimestamp", epoch_ms(first_at));
			if ((sys_bits & SA_SEQ) && !seq_null)
				kv_sequence(out, &f, "SequenceNumber", seq);
			if ((sys_bits & SA_GROUP) && group != NULL)
				kv_str(out, &f, "MessageGroupId", group);
			if ((sys_bits & SA_DEDUP) && dedup != NULL)
				kv_str(out, &f, "MessageDeduplicationId", dedup);
			if ((sys_bits & SA_DLQ_SOURCE) && attrs != NULL && JB_ROOT_IS_OBJECT(attrs))
			{
				JsonbValue *dl = member(&attrs->root, DEAD_LETTER_ATTR);
				JsonbValue *src = (dl != NULL && dl->type == jbvBinary &&
								   JsonContainerIsObject(dl->val.binary.data))
					? member(dl->val.binary.data, "source_queue") : NULL;

				if (src != NULL && src->type == jbvString)
					kv_str(out, &f, "DeadLetterQueueSourceArn",
						   sqs_queue_arn(call, pnstrdup(src->val.string.val,
														src->val.string.len)));
			}
			if ((sys_bits & SA_TRACE) && attrs != NULL && JB_ROOT_IS_OBJECT(attrs))
			{
				JsonbValue *th = member(&attrs->root, TRACE_HEADER_ATTR);

				if (th != NULL && th->type == jbvString)
					kv_str(out, &f, "AWSTraceHeader",
						   pnstrdup(th->val.string.val, th->val.string.len));
			}
			appendStringInfoChar(out, '}');
		}
		mattrs = received_attrs(attrs, attr_names, n_attr);
		if (mattrs != NULL)
		{
			if (sqs_md5_of_attributes(DatumGetJsonbP(cstring_jsonb(mattrs)), md5))
				kv_str(out, &first, "MD5OfMessageAttributes", md5);
			key(out, &first, "MessageAttributes");
			appendStringInfoString(out, mattrs);
		}
		appendStringInfoChar(out, '}');
	}
	appendStringInfoString(out, "]}");
}

/* ---------------------------------------------------------------------
 * Settling: delete and change visibility
 * ---------------------------------------------------------------------
 */

/*
 * The SQS answer of a failed queue.delete / queue.change_visibility: the
 * SQS error, SQS_ERR_NONE with *ok set when SQS answers success, or
 * SQS_ERR_NONE with *ok unset when the SQL error is not one of a receipt's
 * (it is then raised as it is).  A forged receipt is 22P02; a stale one,
 * or one whose message is gone, or a visibility change after a FIFO
 * message's lease ended, is 55000 (a standard message's latest receipt
 * leases it again here, as SQS: queue_sqs_relet_ended, around the
 * endpoint's changes).  On the wire the endpoint answers as SQS does (DESIGN.md
 * "SQS API"), though the SQL API refuses: a stale receipt's DeleteMessage
 * succeeds and deletes nothing ("the request succeeds, but the message
 * will not be deleted"); its ChangeMessageVisibility is
 * InvalidParameterValue, in SQS's words.
 */
static SqsError
settle_error(ErrorData *edata, bool change, const char *receipt,
			 const char **msg, bool *ok)
{
	/* SQS quotes the receipt in its messages; a receipt longer is no SQS's */
	int			rlen = (int) Min(strlen(receipt), 1024);

	*ok = false;
	if (edata->sqlerrcode == ERRCODE_INVALID_TEXT_REPRESENTATION)
	{
		*msg = psprintf("The input receipt handle \"%.*s\" is not a valid receipt handle.",
						rlen, receipt);
		return SQS_ERR_RECEIPT_HANDLE_IS_INVALID;
	}
	if (edata->sqlerrcode == ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE)
	{
		/* a FIFO delete after the lease ended (queue_sqs_fifo_delete_live) */
		if (!change && edata->message != NULL &&
			strstr(edata->message, "for a lease that has ended") != NULL)
		{
			*msg = psprintf("Value %.*s for parameter ReceiptHandle is invalid. Reason: The receipt handle has expired.",
							rlen, receipt);
			return SQS_ERR_INVALID_PARAMETER_VALUE;
		}
		if (change)
		{
			*msg = psprintf("Value %.*s for parameter ReceiptHandle is invalid. Reason: Message does not exist or is not available for visibility timeout change.",
							rlen, receipt);
			return SQS_ERR_INVALID_PARAMETER_VALUE;
		}
		*ok = true;
		return SQS_ERR_NONE;
	}
	if (edata->sqlerrcode == ERRCODE_INVALID_PARAMETER_VALUE && change)
	{
		*msg = edata->message ? edata->message : "invalid visibility timeout";
		return SQS_ERR_INVALID_PARAMETER_VALUE;
	}
	return SQS_ERR_NONE;
}

/*
 * One delete or visibility change that ends the action, in a
 * subtransaction: a stale receipt's DeleteMessage must still commit (and
 * succeed), so its error cannot take the transaction with it.
 */
static void
settle_one(PlanKind k, Datum *v, bool change, const char *receipt)
{
	ErrorData  *edata;
	SqsError	err;
	const char *msg;
	bool		ok;

	queue_sqs_relet_ended(change);
	queue_sqs_fifo_delete_live(!change);
	edata = run_in_subxact(k, v, NULL, NULL);
	queue_sqs_relet_ended(false);
	queue_sqs_fifo_delete_live(false);
	if (edata == NULL)
		return;
	err = settle_error(edata, change, receipt, &msg, &ok);
	if (ok)
		return;
	if (err == SQS_ERR_NONE)
		ReThrowError(edata);
	sqs_fail(err, "%s", msg);
}

static void
act_delete_message(SqsCall *call, StringInfo out)
{
	char	   *name = queue_of(call);
	char	   *receipt = req_str(&call->input->root, "ReceiptHandle");
	Datum		v[2] = {CStringGetTextDatum(name), CStringGetTextDatum(receipt)};

	/* false (already deleted, its latest receipt): success, as SQS */
	settle_one(P_DELETE, v, false, receipt);
	appendStringInfoString(out, "{}");
}

static void
act_change_message_visibility(SqsCall *call, StringInfo out)
{
	JsonbContainer *in = &call->input->root;
	char	   *name = queue_of(call);
	char	   *receipt = req_str(in, "ReceiptHandle");
	int64		timeout;
	Datum		v[3];

	if (!in_int(in, "VisibilityTimeout", 0, SQS_MAX_VISIBILITY, &timeout))
		sqs_fail(SQS_ERR_MISSING_PARAMETER,
				 "The request must contain the parameter VisibilityTimeout.");
	v[0] = CStringGetTextDatum(name);
	v[1] = CStringGetTextDatum(receipt);
	v[2] = secs_interval(timeout);
	settle_one(P_CHANGE_VIS, v, true, receipt);
	appendStringInfoString(out, "{}");
}

/*
 * DeleteMessageBatch and ChangeMessageVisibilityBatch: each entry in a
 * subtransaction of its own, so one bad receipt fails only its entry.
 */
static void
settle_batch(SqsCall *call, StringInfo out, bool change)
{
	char	   *name = queue_of(call);
	int			n;
	char	  **ids;
	JsonbContainer **entries = batch_entries(call, &n, &ids);
	SqsError   *errs = palloc0(n * sizeof(SqsError));
	const char **msgs = palloc0(n * sizeof(char *));
	bool		first_entry = true;
	StringInfoData ok;
	StringInfoData failed;

	for (int i = 0; i < n; i++)
	{
		char	   *receipt = in_str(entries[i], "ReceiptHandle");
		char	   *timeout_text = change ? in_str(entries[i], "VisibilityTimeout") : NULL;
		int64		timeout = 0;
		Datum		v[3];
		ErrorData  *edata;

		if (receipt == NULL)
		{
			errs[i] = SQS_ERR_MISSING_PARAMETER;
			msgs[i] = "The request must contain the parameter ReceiptHandle.";
			continue;
		}
		if (change && (timeout_text == NULL || !wire_int(timeout_text, &timeout) ||
					   timeout < 0 || timeout > SQS_MAX_VISIBILITY))
		{
			errs[i] = timeout_text == NULL ? SQS_ERR_MISSING_PARAMETER :
				SQS_ERR_INVALID_PARAMETER_VALUE;
			msgs[i] = timeout_text == NULL ?
				"The request must contain the parameter VisibilityTimeout." :
				"Value for parameter VisibilityTimeout is invalid. Reason: must be between 0 and 43200.";
			continue;
		}
		v[0] = CStringGetTextDatum(name);
		v[1] = CStringGetTextDatum(receipt);
		v[2] = secs_interval(timeout);
		queue_sqs_relet_ended(change);
		queue_sqs_fifo_delete_live(!change);
		edata = run_in_subxact(change ? P_CHANGE_VIS : P_DELETE, v, NULL, NULL);
		queue_sqs_relet_ended(false);
		queue_sqs_fifo_delete_live(false);
		if (edata != NULL)
		{
			bool		ok;

			errs[i] = settle_error(edata, change, receipt, &msgs[i], &ok);
			if (errs[i] == SQS_ERR_NONE && !ok)
				ReThrowError(edata);
		}
	}

	initStringInfo(&ok);
	for (int i = 0; i < n; i++)
		if (errs[i] == SQS_ERR_NONE)
		{
			bool		first = true;

			if (!first_entry)
				appendStringInfoChar(&ok, ',');
			first_entry = false;
			appendStringInfoChar(&ok, '{');
			kv_str(&ok, &first, "Id", ids[i]);
			appendStringInfoChar(&ok, '}');
		}
	initStringInfo(&failed);
	first_entry = true;
	for (int i = 0; i < n; i++)
		if (errs[i] != SQS_ERR_NONE)
			failed_entry(&failed, &first_entry, ids[i], errs[i], msgs[i]);
	batch_result(out, &ok, &failed);
}

/* ---------------------------------------------------------------------
 * Message move tasks: recorded in queue._move_tasks, run by the queue
 * worker (src/worker/move_task.c); the endpoint never moves a message itself
 * ---------------------------------------------------------------------
 */

/*
 * A task's TaskHandle as SQS makes it: base64 of
 * {"taskId":"<id>","sourceArn":"<the source's ARN>"} (LocalStack's tests,
 * checked against AWS, decode it so).
 */
static char *
task_handle(SqsCall *call, const char *task_id, const char *source)
{
	StringInfoData doc;

	initStringInfo(&doc);
	appendStringInfoString(&doc, "{\"taskId\":");
	escape_json(&doc, task_id);
	appendStringInfoString(&doc, ",\"sourceArn\":");
	escape_json(&doc, sqs_queue_arn(call, source));
	appendStringInfoChar(&doc, '}');
	return b64_encode(doc.data);
}

/* A queue as a move task sees it: its id, type and the caller's rights. */
typedef struct TaskQueue
{
	int64		id;
	bool		fifo;
	bool		is_dlq;			/* some queue names it as its dead-letter queue */
	bool		manage;
	bool		send;
} TaskQueue;

/* Look a queue up for a move task: false when the caller may not see it. */
static bool
task_queue(SqsCall *call, const char *name, TaskQueue *tq)
{
	QueueRow	q;
	Datum		v[2];
	bool		isnull;

	if (!fetch_queue(name, &q))
		return false;
	v[0] = CStringGetTextDatum(q.name);
	v[1] = ObjectIdGetDatum(call->auth.role);
	run_as_owner(P_TASK_SOURCE, v, NULL);
	if (SPI_processed == 0)
		return false;
	check_result_cols(5);
	tq->id = DatumGetInt64(col(0, 1, &isnull));
	tq->fifo = DatumGetBool(col(0, 2, &isnull));
	tq->is_dlq = DatumGetBool(col(0, 3, &isnull));
	tq->manage = DatumGetBool(col(0, 4, &isnull)) && !isnull;
	tq->send = DatumGetBool(col(0, 5, &isnull)) && !isnull;
	return true;
}

/*
 * StartMessageMoveTask: SQS's checks, then a RUNNING task recorded and
 * answered at once; its commit wakes the queue worker, which moves the
 * messages as the caller's role, at MaxNumberOfMessagesPerSecond.
 */
static void
act_start_message_move_task(SqsCall *call, StringInfo out)
{
	JsonbContainer *in = &call->input->root;
	char	   *source = name_of_arn(req_str(in, "SourceArn"), "SourceArn");
	char	   *dest_arn = in_str(in, "DestinationArn");
	char	   *dest = dest_arn ? name_of_arn(dest_arn, "DestinationArn") : NULL;
	int64		rate = 0;
	bool		has_rate;
	TaskQueue	sq;
	TaskQueue	dq = {0};
	int64		to_move = 0;
	Datum		v[8];
	char		nulls[8] = {' ', ' ', ' ', ' ', ' ', ' ', ' ', ' '};
	unsigned char rnd[16];
	char		task_id[37];
	bool		first = true;

	has_rate = in_int(in, "MaxNumberOfMessagesPerSecond", 1, 500, &rate);
	if (!task_queue(call, source, &sq))
		sqs_fail(SQS_ERR_RESOURCE_NOT_FOUND, "The resource that you specified for the SourceArn parameter doesn't exist.");
	if (!sq.manage)
		sqs_fail(SQS_ERR_ACCESS_DENIED, "Access to the resource %s is denied.",
				 sqs_queue_arn(call, source));
	if (!sq.is_dlq)
		sqs_fail(SQS_ERR_INVALID_PARAMETER_VALUE, "Source queue must be configured as a Dead Letter Queue.");
	if (dest != NULL)
	{
		if (!task_queue(call, dest, &dq))
			sqs_fail(SQS_ERR_RESOURCE_NOT_FOUND, "The resource that you specified for the DestinationArn parameter doesn't exist.");
		if (dq.id == sq.id)
			sqs_fail(SQS_ERR_INVALID_PARAMETER_VALUE, "Source queue arn and destination queue arn cannot be the same.");
		if (dq.fifo != sq.fifo)
			sqs_fail(SQS_ERR_INVALID_PARAMETER_VALUE, "The destination queue must be a %s queue like the source queue.",
					 sq.fifo ? "FIFO" : "standard");
		if (!dq.send)
			sqs_fail(SQS_ERR_ACCESS_DENIED, "Access to the resource %s is denied.",
					 sqs_queue_arn(call, dest));
	}

	/* ApproximateNumberOfMessagesToMove: the dead-letter queue's depth now */
	{
		int64		counts[3];

		queue_depth(source, counts);
		to_move = counts[0] + counts[1] + counts[2];
	}

	/* the task's id, a random (version 4) UUID as SQS's */
	if (!pg_strong_random(rnd, sizeof(rnd)))
		elog(ERROR, "could not generate a task id");
	rnd[6] = (rnd[6] & 0x0f) | 0x40;
	rnd[8] = (rnd[8] & 0x3f) | 0x80;
	snprintf(task_id, sizeof(task_id),
			 "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
			 rnd[0], rnd[1], rnd[2], rnd[3], rnd[4], rnd[5], rnd[6], rnd[7],
			 rnd[8], rnd[9], rnd[10], rnd[11], rnd[12], rnd[13], rnd[14], rnd[15]);
	v[0] = CStringGetTextDatum(task_id);
	v[1] = Int64GetDatum(sq.id);
	if (dest != NULL)
	{
		v[2] = Int64GetDatum(dq.id);
		v[3] = CStringGetTextDatum(dest);
	}
	else
		nulls[2] = nulls[3] = 'n';
	v[4] = ObjectIdGetDatum(call->auth.role);
	if (has_rate)
		v[5] = Int32GetDatum((int32) rate);
	else
		nulls[5] = 'n';
	v[6] = Int64GetDatum(to_move);
	v[7] = TimestampTzGetDatum(GetCurrentTimestamp());
	run_as_owner(P_TASK_ADD, v, nulls);
	if (SPI_processed == 0)
		sqs_fail(SQS_ERR_INVALID_PARAMETER_VALUE,
				 "There is already a task running. Only one active task is allowed for a source queue arn at a given time.");
	/* the newest SQS_MOVE_TASKS_MAX records of the source are kept */
	v[0] = Int64GetDatum(sq.id);
	v[1] = Int64GetDatum(SQS_MOVE_TASKS_MAX);
	run_as_owner(P_TASK_PRUNE, v, NULL);
	queue_move_task_started();

	appendStringInfoChar(out, '{');
	kv_str(out, &first, "TaskHandle", task_handle(call, task_id, source));
	appendStringInfoChar(out, '}');
}

/*
 * ListMessageMoveTasks: the source's newest tasks first, as SQS lists
 * them (TaskHandle only while RUNNING).  Needs manage on the source, as
 * starting and cancelling do.
 */
static void
act_list_message_move_tasks(SqsCall *call, StringInfo out)
{
	JsonbContainer *in = &call->input->root;
	char	   *source = name_of_arn(req_str(in, "SourceArn"), "SourceArn");
	int64		max = 1;
	TaskQueue	sq;
	Datum		v[2];

	(void) in_int(in, "MaxResults", 1, SQS_MOVE_TASKS_MAX, &max);
	if (!task_queue(call, source, &sq))
		sqs_fail(SQS_ERR_RESOURCE_NOT_FOUND, "The resource that you specified for the SourceArn parameter doesn't exist.");
	if (!sq.manage)
		sqs_fail(SQS_ERR_ACCESS_DENIED, "Access to the resource %s is denied.",
				 sqs_queue_arn(call, source));
	v[0] = Int64GetDatum(sq.id);
	v[1] = Int64GetDatum(max);
	run_as_owner(P_TASK_LIST, v, NULL);
	check_result_cols(8);

	appendStringInfoString(out, "{\"Results\":[");
	for (uint64 r = 0; r < SPI_processed; r++)
	{
		bool		first = true;
		bool		isnull;
		char	   *status = col_text(r, 3);
		char	   *dest = col_text(r, 2);
		char	   *reason = col_text(r, 7);
		Datum		d;

		if (r > 0)
			appendStringInfoChar(out, ',');
		appendStringInfoChar(out, '{');
		if (status != NULL && strcmp(status, "RUNNING") == 0)
			kv_str(out, &first, "TaskHandle", task_handle(call, col_text(r, 1), source));
		kv_str(out, &first, "Status", status ? status : "COMPLETED");
		kv_str(out, &first, "SourceArn", sqs_queue_arn(call, source));
		if (dest != NULL)
			kv_str(out, &first, "DestinationArn", sqs_queue_arn(call, dest));
		d = col(r, 8, &isnull);
		if (!isnull)
			kv_int(out, &first, "MaxNumberOfMessagesPerSecond", DatumGetInt32(d));
		d = col(r, 4, &isnull);
		kv_int(out, &first, "ApproximateNumberOfMessagesMoved", isnull ? 0 : DatumGetInt64(d));
		d = col(r, 5, &isnull);
		if (!isnull)
			kv_int(out, &first, "ApproximateNumberOfMessagesToMove", DatumGetInt64(d));
		if (reason != NULL)
			kv_str(out, &first, "FailureReason", reason);
		d = col(r, 6, &isnull);
		if (!isnull)
			kv_int(out, &first, "StartedTimestamp", epoch_ms(DatumGetTimestampTz(d)));
		appendStringInfoChar(out, '}');
	}
	appendStringInfoString(out, "]}");
}

/*
 * CancelMessageMoveTask: a RUNNING task of a source the caller manages
 * becomes CANCELLED (the worker's slice under way finishes first: it
 * holds the row); answers how many it moved.
 */
static void
act_cancel_message_move_task(SqsCall *call, StringInfo out)
{
	char	   *handle = req_str(&call->input->root, "TaskHandle");
	char	   *doc = b64_decode_token(handle, "TaskHandle");
	size_t		len = strlen(doc);
	Jsonb	   *jb;
	char	   *task_id;
	char	   *source_arn;
	TaskQueue	sq;
	Datum		v[3];
	bool		isnull;
	bool		first = true;
	int64		moved;

	/* SQS's handle: base64 of {"taskId": ..., "sourceArn": ...} */
	if (len < 2 || doc[0] != '{' || doc[len - 1] != '}' ||
		!pg_verify_mbstr(PG_UTF8, doc, (int) len, true))
		sqs_fail(SQS_ERR_INVALID_PARAMETER_VALUE, "Value for parameter TaskHandle is invalid.");
	jb = DatumGetJsonbP(cstring_jsonb(doc));
	task_id = JB_ROOT_IS_OBJECT(jb) ? in_str(&jb->root, "taskId") : NULL;
	source_arn = JB_ROOT_IS_OBJECT(jb) ? in_str(&jb->root, "sourceArn") : NULL;
	if (task_id == NULL || source_arn == NULL)
		sqs_fail(SQS_ERR_INVALID_PARAMETER_VALUE, "Value for parameter TaskHandle is invalid.");
	if (!task_queue(call, name_of_arn(source_arn, "SourceArn"), &sq))
		sqs_fail(SQS_ERR_RESOURCE_NOT_FOUND,
				 "The resource that you specified for the SourceArn parameter doesn't exist.");

	v[0] = CStringGetTextDatum(task_id);
	v[1] = ObjectIdGetDatum(call->auth.role);
	v[2] = Int64GetDatum(sq.id);
	run_as_owner(P_TASK_CANCEL, v, NULL);
	if (SPI_processed == 0)
		sqs_fail(SQS_ERR_RESOURCE_NOT_FOUND, "Task does not exist.");
	check_result_cols(1);
	moved = DatumGetInt64(col(0, 1, &isnull));
	appendStringInfoChar(out, '{');
	kv_int(out, &first, "ApproximateNumberOfMessagesMoved", moved);
	appendStringInfoChar(out, '}');
}

/*
 * STS GetCallerIdentity (signed with the sts scope; protocol.c admits it
 * for nothing else): the account id, an ARN naming the key's role, and
 * the key as UserId.
 */
static void
act_get_caller_identity(SqsCall *call, StringInfo out)
{
	char	   *role = GetUserNameFromId(call->auth.role, true);
	bool		first = true;

	appendStringInfoChar(out, '{');
	kv_str(out, &first, "UserId", call->auth.access_key_id);
	kv_str(out, &first, "Account", call->account_id ? call->account_id : "000000000000");
	kv_str(out, &first, "Arn", psprintf("arn:aws:iam::%s:role/%s",
										call->account_id ? call->account_id : "000000000000",
										role ? role : call->auth.access_key_id));
	appendStringInfoChar(out, '}');
}

static void
act_unsupported(SqsCall *call, StringInfo out)
{
	sqs_fail(SQS_ERR_UNSUPPORTED_OPERATION,
			 "%s is not supported by this endpoint: access is granted with queue.grant in SQL.",
			 call->action);
}

/* ---------------------------------------------------------------------
 * Dispatch
 * ---------------------------------------------------------------------
 */
static void
act_delete_message_batch(SqsCall *call, StringInfo out)
{
	settle_batch(call, out, false);
}

static void
act_change_message_visibility_batch(SqsCall *call, StringInfo out)
{
	settle_batch(call, out, true);
}

typedef void (*ActionFn) (SqsCall *call, StringInfo out);

static const struct
{
	const char *name;
	ActionFn	fn;
}			actions[] = {
	{"CreateQueue", act_create_queue},
	{"DeleteQueue", act_delete_queue},
	{"GetQueueUrl", act_get_queue_url},
	{"GetCallerIdentity", act_get_caller_identity},
	{"ListQueues", act_list_queues},
	{"GetQueueAttributes", act_get_queue_attributes},
	{"SetQueueAttributes", act_set_queue_attributes},
	{"PurgeQueue", act_purge_queue},
	{"TagQueue", act_tag_queue},
	{"UntagQueue", act_untag_queue},
	{"ListQueueTags", act_list_queue_tags},
	{"SendMessage", act_send_message},
	{"SendMessageBatch", act_send_message_batch},
	{"DeleteMessage", act_delete_message},
	{"DeleteMessageBatch", act_delete_message_batch},
	{"ChangeMessageVisibility", act_change_message_visibility},
	{"ChangeMessageVisibilityBatch", act_change_message_visibility_batch},
	{"ListDeadLetterSourceQueues", act_list_dead_letter_source_queues},
	{"StartMessageMoveTask", act_start_message_move_task},
	{"ListMessageMoveTasks", act_list_message_move_tasks},
	{"CancelMessageMoveTask", act_cancel_message_move_task},
	{"AddPermission", act_unsupported},
	{"RemovePermission", act_unsupported},
};

bool
sqs_run_action(SqsCall *call, StringInfo out, SqsResponse *resp)
{
	Jsonb	   *empty = NULL;

	if (call->input == NULL)
	{
		empty = DatumGetJsonbP(cstring_jsonb("{}"));
		call->input = empty;
	}
	if (!JB_ROOT_IS_OBJECT(call->input))
		sqs_fail(SQS_ERR_INVALID_PARAMETER_VALUE, "The request body must be a JSON object.");

	if (strcmp(call->action, "ReceiveMessage") == 0)
	{
		act_receive_message(call, out, resp);
		return true;
	}
	for (int i = 0; i < lengthof(actions); i++)
		if (strcmp(call->action, actions[i].name) == 0)
		{
			actions[i].fn(call, out);
			return true;
		}
	return false;
}

/*
 * The queue an action addresses, as its name (NULL for the actions that
 * address none: ListQueues, GetCallerIdentity, CancelMessageMoveTask's
 * handle), for routing the request to the queue's node of a Citus cluster
 * (protocol.c).  A malformed parameter fails as the action would.
 */
char *
sqs_addressed_queue(SqsCall *call)
{
	JsonbContainer *in;
	const char *a = call->action;
	char	   *s;

	if (call->input == NULL || !JB_ROOT_IS_OBJECT(call->input))
		return NULL;
	in = &call->input->root;
	if (strcmp(a, "CreateQueue") == 0 || strcmp(a, "GetQueueUrl") == 0)
		return (s = in_str(in, "QueueName")) != NULL && s[0] != '\0' ? s : NULL;
	if (strcmp(a, "StartMessageMoveTask") == 0 || strcmp(a, "ListMessageMoveTasks") == 0)
	{
		const char *colon;

		if ((s = in_str(in, "SourceArn")) == NULL)
			return NULL;
		colon = strrchr(s, ':');
		return colon && colon[1] != '\0' ? pstrdup(colon + 1) : NULL;
	}
	if (strcmp(a, "ListQueues") == 0 || strcmp(a, "GetCallerIdentity") == 0 ||
		strcmp(a, "CancelMessageMoveTask") == 0)
		return NULL;
	if (call->path_queue == NULL && in_str(in, "QueueUrl") == NULL)
		return NULL;
	return queue_of(call);
}
