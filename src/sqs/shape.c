/*-------------------------------------------------------------------------
 *
 * shape.c
 *	  The SQS actions' shapes: reading the input shape (AWS JSON 1.0's, a
 *	  Query request folded into it by query.c, every scalar then a
 *	  string), queue names, URLs and ARNs, the output shape's members and
 *	  the datums the statements take, and what every batch shares: its
 *	  entries, its Failed entries, its answer.
 *
 * May call: wire.c (sqs_fail), PostgreSQL.  Called by: actions.c and
 * every action room.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "common/base64.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/datetime.h"
#include "utils/json.h"
#include "utils/jsonb.h"
#include "utils/timestamp.h"

#include "common/compat.h"
#include "actions.h"

/* ---------------------------------------------------------------------
 * Reading the input shape
 * ---------------------------------------------------------------------
 */
JsonbValue *
sqs_member(JsonbContainer *c, const char *key)
{
	if (c == NULL || !JsonContainerIsObject(c))
		return NULL;
	return getKeyJsonValueFromContainer(c, key, strlen(key), NULL);
}

/* A scalar as text (string, number or boolean); NULL when absent or null. */
char *
sqs_scalar_text(JsonbValue *v, const char *name)
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

char *
sqs_in_str(JsonbContainer *c, const char *key)
{
	return sqs_scalar_text(sqs_member(c, key), key);
}

char *
sqs_req_str(JsonbContainer *c, const char *key)
{
	char	   *s = sqs_in_str(c, key);

	if (s == NULL)
		sqs_fail(SQS_ERR_MISSING_PARAMETER,
				 "The request must contain the parameter %s.", key);
	return s;
}

/* Parse an integer; false when text is not one. */
bool
sqs_wire_int(const char *text, int64 *out)
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
bool
sqs_in_int(JsonbContainer *c, const char *key, int64 min, int64 max, int64 *out)
{
	char	   *s = sqs_in_str(c, key);

	if (s == NULL)
		return false;
	if (!sqs_wire_int(s, out) || *out < min || *out > max)
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

/* A container member (object or array); NULL when absent. */
JsonbContainer *
sqs_in_container(JsonbContainer *c, const char *key, bool object)
{
	JsonbValue *v = sqs_member(c, key);

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

void
sqs_obj_pairs(JsonbContainer *c, Pairs *p)
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
char **
sqs_in_str_list(JsonbContainer *c, const char *key, int *n)
{
	JsonbContainer *arr = sqs_in_container(c, key, false);
	char	  **out;

	*n = 0;
	if (arr == NULL)
		return NULL;
	out = palloc0(Max(JsonContainerSize(arr), 1) * sizeof(char *));
	for (uint32 i = 0; i < JsonContainerSize(arr); i++)
	{
		JsonbValue *e = getIthJsonbValueFromContainer(arr, i);
		char	   *s = sqs_scalar_text(e, key);

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
char *
sqs_name_of_arn(const char *arn, const char *param)
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
char *
sqs_queue_of(SqsCall *call)
{
	if (call->path_queue != NULL && sqs_in_str(&call->input->root, "QueueUrl") == NULL)
		return pstrdup(call->path_queue);
	return name_of_url(sqs_req_str(&call->input->root, "QueueUrl"));
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
bool
sqs_valid_token(const char *t)
{
	size_t		len = strlen(t);

	if (len == 0 || len > SQS_TOKEN_MAX)
		return false;
	for (size_t i = 0; i < len; i++)
		if ((unsigned char) t[i] < 33 || (unsigned char) t[i] > 126)
			return false;
	return true;
}

/* ---------------------------------------------------------------------
 * Output helpers
 * ---------------------------------------------------------------------
 */
void
sqs_key(StringInfo out, bool *first, const char *k)
{
	if (!*first)
		appendStringInfoChar(out, ',');
	*first = false;
	escape_json(out, k);
	appendStringInfoChar(out, ':');
}

void
sqs_kv_str(StringInfo out, bool *first, const char *k, const char *v)
{
	sqs_key(out, first, k);
	escape_json(out, v);
}

void
sqs_kv_int(StringInfo out, bool *first, const char *k, int64 v)
{
	sqs_key(out, first, k);
	appendStringInfo(out, INT64_FORMAT, v);
}

/* An attribute value on the wire: a string. */
void
sqs_kv_int_str(StringInfo out, bool *first, const char *k, int64 v)
{
	char		buf[32];

	snprintf(buf, sizeof(buf), INT64_FORMAT, v);
	sqs_kv_str(out, first, k, buf);
}

/*
 * A message id as SQS's MessageId, a UUID (DESIGN.md "SQS API": one stable
 * mapping, the same from either door): 00000000-HHHH-4000-8000-LLLLLLLLLLLL,
 * HHHH the id's top 16 bits and L its low 48, in hex; a version-4, RFC 4122
 * variant UUID.  queue.message_uuid(bigint) and queue.message_id(uuid) in
 * SQL (queue--1.6--1.7.sql) compute the same mapping both ways.
 */
void
sqs_kv_message_id(StringInfo out, bool *first, const char *k, int64 id)
{
	uint64		u = (uint64) id;
	char		buf[40];

	snprintf(buf, sizeof(buf), "00000000-%04x-4000-8000-%012llx",
			 (unsigned int) (u >> 48),
			 (unsigned long long) (u & UINT64CONST(0xFFFFFFFFFFFF)));
	sqs_kv_str(out, first, k, buf);
}

/*
 * A FIFO sequence number in SQS's shape: a decimal string of 20 digits,
 * increasing with ours ("1" and ours zero-padded to 19 digits: every
 * int64 fits).
 */
void
sqs_kv_sequence(StringInfo out, bool *first, const char *k, int64 seq)
{
	char		buf[32];

	snprintf(buf, sizeof(buf), "1%019lld", (long long) seq);
	sqs_kv_str(out, first, k, buf);
}

int64
sqs_epoch_ms(TimestampTz ts)
{
	return ts / 1000 +
		(int64) (POSTGRES_EPOCH_JDATE - UNIX_EPOCH_JDATE) * SECS_PER_DAY * 1000;
}

Datum
sqs_secs_interval(int64 s)
{
	Interval   *iv = palloc0(sizeof(Interval));

	iv->day = (int32) (s / SECS_PER_DAY);
	iv->time = (s % SECS_PER_DAY) * USECS_PER_SEC;
	return IntervalPGetDatum(iv);
}

Datum
sqs_cstring_jsonb(const char *s)
{
	return DirectFunctionCall1(jsonb_in, CStringGetDatum(s));
}

char *
sqs_b64_encode(const char *s)
{
	int			len = strlen(s);
	char	   *out = palloc(pg_b64_enc_len(len) + 1);
	int			n = pg_b64_encode((const void *) s, len, out, pg_b64_enc_len(len));

	if (n < 0)
		elog(ERROR, "could not encode a token");
	out[n] = '\0';
	return out;
}

char *
sqs_b64_decode_token(const char *s, const char *param)
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

Datum
sqs_names_array(char **names, int n)
{
	Datum	   *elems = palloc(Max(n, 1) * sizeof(Datum));

	for (int i = 0; i < n; i++)
		elems[i] = CStringGetTextDatum(names[i]);
	return PointerGetDatum(construct_array(elems, n, TEXTOID, -1, false, TYPALIGN_INT));
}

/* ---------------------------------------------------------------------
 * Batches: their entries in, their answer out
 * ---------------------------------------------------------------------
 */

/*
 * A batch's answer: its Successful and Failed entries (JSON text of the
 * array members), each list only when it has an entry, as SQS answers.
 */
void
sqs_batch_result(StringInfo out, StringInfo ok, StringInfo failed)
{
	appendStringInfoChar(out, '{');
	if (ok->len > 0)
		appendStringInfo(out, "\"Successful\":[%s]", ok->data);
	if (failed->len > 0)
		appendStringInfo(out, "%s\"Failed\":[%s]", ok->len > 0 ? "," : "", failed->data);
	appendStringInfoChar(out, '}');
}

/* A batch request's entries: 1..10, distinct valid ids. */
JsonbContainer **
sqs_batch_entries(SqsCall *call, int *n, char ***ids)
{
	JsonbContainer *arr = sqs_in_container(&call->input->root, "Entries", false);
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
		(*ids)[i] = sqs_req_str(entries[i], "Id");
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

void
sqs_failed_entry(StringInfo out, bool *first_entry, const char *id, SqsError err, const char *msg)
{
	bool		first = true;

	if (!*first_entry)
		appendStringInfoChar(out, ',');
	*first_entry = false;
	appendStringInfoChar(out, '{');
	sqs_kv_str(out, &first, "Id", id);
	sqs_key(out, &first, "SenderFault");
	appendStringInfoString(out, "true");
	sqs_kv_str(out, &first, "Code", error_codes[err] ? error_codes[err] : "InvalidParameterValue");
	sqs_kv_str(out, &first, "Message", msg);
	appendStringInfoChar(out, '}');
}
