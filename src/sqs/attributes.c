/*-------------------------------------------------------------------------
 *
 * attributes.c
 *	  A queue's attributes over the SQS endpoint: the Attributes map of
 *	  CreateQueue and SetQueueAttributes read and checked against SQS's
 *	  rules (ranges, RedrivePolicy, RedriveAllowPolicy, FIFO-only names,
 *	  Policy, the encryption attributes, which are kept in
 *	  queue._sqs_attributes and reported, never enforced), and
 *	  SetQueueAttributes (queue.alter) and GetQueueAttributes.
 *
 * May call: statements.c, shape.c, wire.c (sqs_fail), PostgreSQL.
 * Called by: actions.c (the two actions), queues.c (CreateQueue's
 * attributes: sqs_parse_queue_attrs, sqs_attr_bool, sqs_store_sse).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "common/jsonapi.h"
#include "executor/spi.h"
#include "mb/pg_wchar.h"
#include "utils/builtins.h"
#include "utils/json.h"
#include "utils/jsonb.h"

#include "common/compat.h"
#include "actions.h"

/* ---------------------------------------------------------------------
 * A queue's Attributes map
 * ---------------------------------------------------------------------
 */

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

	if (!sqs_wire_int(value, &v) || v < min || v > max)
		bad_attr_value(name, value);
	return v;
}

bool
sqs_attr_bool(const char *name, const char *value)
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
	jb = DatumGetJsonbP(sqs_cstring_jsonb(text));
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
	arn = sqs_scalar_text(sqs_member(p, "deadLetterTargetArn"), "RedrivePolicy");
	count = sqs_scalar_text(sqs_member(p, "maxReceiveCount"), "RedrivePolicy");
	if (arn == NULL || count == NULL)
		sqs_fail(SQS_ERR_INVALID_PARAMETER_VALUE,
				 "Value %s for parameter RedrivePolicy is invalid. Reason: Redrive policy does not contain mandatory attribute: %s.",
				 value, arn == NULL ? "deadLetterTargetArn" : "maxReceiveCount");
	a->dlq = sqs_name_of_arn(arn, "RedrivePolicy");
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
	perm = sqs_scalar_text(sqs_member(p, "redrivePermission"), "RedriveAllowPolicy");
	arns = sqs_member(p, "sourceQueueArns");
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
				sqs_name_of_arn(pnstrdup(e->val.string.val, e->val.string.len),
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
	st = sqs_member(p, "Statement");
	if (st == NULL || st->type == jbvNull ||
		(st->type == jbvBinary && JsonContainerIsArray(st->val.binary.data) &&
		 JsonContainerSize(st->val.binary.data) == 0))
		return;
	sqs_fail(SQS_ERR_INVALID_ATTRIBUTE_VALUE,
			 "Invalid value for the parameter Policy. Reason: this endpoint enforces access with PostgreSQL "
			 "privileges (the access key's role; GRANT through queue.grant), not queue policies, so a policy "
			 "with statements cannot be enforced and is not stored.");
}

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

/*
 * The Attributes map of CreateQueue or SetQueueAttributes.  fifo is the
 * queue's type (for Create: what FifoQueue says, read first).
 */
void
sqs_parse_queue_attrs(JsonbContainer *map, bool creating, QueueAttrs *a, bool queue_fifo)
{
	Pairs		p;
	const char *kms_key = NULL; /* KmsMasterKeyId given */
	int			managed = -1;	/* SqsManagedSseEnabled given: 0, 1 */

	memset(a, 0, sizeof(*a));
	initStringInfo(&a->sse);
	if (map == NULL)
		return;
	sqs_obj_pairs(map, &p);
	for (int i = 0; i < p.n; i++)
	{
		const char *n = p.keys[i];
		char	   *v = sqs_scalar_text(&p.vals[i], n);

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
			bool		b = sqs_attr_bool(n, v);

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
				a->has_cbd = true, a->cbd = sqs_attr_bool(n, v);
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
				text = sqs_attr_bool(n, v) ? "true" : "false";
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

/* The encryption attributes given, kept (after the call that checked rights) */
void
sqs_store_sse(const char *name, const QueueAttrs *a)
{
	Datum		v[2];

	if (a->sse.len == 0)
		return;
	v[0] = CStringGetTextDatum(name);
	v[1] = sqs_cstring_jsonb(psprintf("{%s}", a->sse.data));
	sqs_run_as_owner(P_SSE_SET, v, NULL);
}

void
sqs_act_set_queue_attributes(SqsCall *call, StringInfo out)
{
	JsonbContainer *in = &call->input->root;
	char	   *name = sqs_queue_of(call);
	JsonbContainer *attrs = sqs_in_container(in, "Attributes", true);
	QueueRow	q;
	QueueAttrs	a;
	Datum		v[11];
	char		nulls[12] = "nnnnnnnnnnn";

	if (attrs == NULL)
		sqs_fail(SQS_ERR_MISSING_PARAMETER, "The request must contain the parameter Attributes.");
	sqs_need_queue(name, &q);
	sqs_parse_queue_attrs(attrs, false, &a, q.fifo);

	v[0] = CStringGetTextDatum(name);
	nulls[0] = ' ';
#define SET(i, has, datum) do { if (has) { v[i] = (datum); nulls[i] = ' '; } } while (0)
	SET(1, a.has_visibility, sqs_secs_interval(a.visibility));
	SET(2, a.has_delay, sqs_secs_interval(a.delay));
	SET(3, a.has_retention, sqs_secs_interval(a.retention));
	SET(4, a.has_max_size, Int32GetDatum((int32) a.max_size));
	SET(5, a.has_wait, sqs_secs_interval(a.wait));
	SET(6, a.has_cbd, BoolGetDatum(a.cbd));
	SET(7, a.has_scope, CStringGetTextDatum(a.has_scope ? a.scope : ""));
	SET(8, a.has_redrive, CStringGetTextDatum(a.has_redrive ? a.dlq : ""));
	SET(9, a.has_redrive && a.dlq[0] != '\0', Int32GetDatum((int32) a.max_receive_count));
	if (a.has_allow)
	{
		char	   *any[1] = {"*"};

		/* alter: '{*}' sets redrive_allow back to any source (null) */
		SET(10, true, a.allow_all ? sqs_names_array(any, 1) : sqs_names_array(a.allow, a.nallow));
	}
#undef SET
	sqs_run(P_ALTER, v, nulls);
	sqs_store_sse(name, &a);
	appendStringInfoString(out, "{}");
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

void
sqs_act_get_queue_attributes(SqsCall *call, StringInfo out)
{
	JsonbContainer *in = &call->input->root;
	char	   *name = sqs_queue_of(call);
	int			n;
	char	  **names = sqs_in_str_list(in, "AttributeNames", &n);
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
	sqs_need_queue(name, &q);

	appendStringInfoString(out, "{");
	if (want == 0)
	{
		appendStringInfoChar(out, '}');
		return;
	}
	appendStringInfoString(out, "\"Attributes\":{");
	if (want & QA_ARN)
		sqs_kv_str(out, &first, "QueueArn", sqs_queue_arn(call, q.name));
	if (want & (QA_VISIBLE | QA_IN_FLIGHT | QA_DELAYED))
	{
		int64		counts[3];

		sqs_queue_depth(q.name, counts);
		if (want & QA_VISIBLE)
			sqs_kv_int_str(out, &first, "ApproximateNumberOfMessages", counts[0]);
		if (want & QA_IN_FLIGHT)
			sqs_kv_int_str(out, &first, "ApproximateNumberOfMessagesNotVisible", counts[1]);
		if (want & QA_DELAYED)
			sqs_kv_int_str(out, &first, "ApproximateNumberOfMessagesDelayed", counts[2]);
	}
	if (want & QA_CREATED)
		sqs_kv_int_str(out, &first, "CreatedTimestamp", sqs_epoch_ms(q.created_at) / 1000);
	if (want & QA_MODIFIED)
		sqs_kv_int_str(out, &first, "LastModifiedTimestamp", sqs_epoch_ms(q.created_at) / 1000);
	if (want & QA_VISIBILITY)
		sqs_kv_int_str(out, &first, "VisibilityTimeout", q.visibility);
	if (want & QA_DELAY)
		sqs_kv_int_str(out, &first, "DelaySeconds", q.delay);
	if (want & QA_RETENTION)
		sqs_kv_int_str(out, &first, "MessageRetentionPeriod", q.retention);
	if (want & QA_MAX_SIZE)
		sqs_kv_int_str(out, &first, "MaximumMessageSize", q.max_message_size);
	if (want & QA_WAIT)
		sqs_kv_int_str(out, &first, "ReceiveMessageWaitTimeSeconds", q.receive_wait);
	if ((want & QA_REDRIVE) && q.dlq != NULL)
	{
		StringInfoData p;

		initStringInfo(&p);
		appendStringInfoString(&p, "{\"deadLetterTargetArn\":");
		escape_json(&p, sqs_queue_arn(call, q.dlq));
		appendStringInfo(&p, ",\"maxReceiveCount\":" INT64_FORMAT "}", q.max_receive_count);
		sqs_kv_str(out, &first, "RedrivePolicy", p.data);
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
		sqs_kv_str(out, &first, "RedriveAllowPolicy", p.data);
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

		sqs_run_as_owner(P_SSE_GET, v, NULL);
		if (SPI_processed > 0)
		{
			bool		isnull;
			Datum		d = sqs_col(0, 1, &isnull);

			if (!isnull)
				sse = DatumGetJsonbPCopy(d);
		}
		for (int i = 0; i < lengthof(sse_names); i++)
		{
			JsonbValue *jv = sse ? sqs_member(&sse->root, sse_names[i].name) : NULL;
			char	   *text = jv ? sqs_scalar_text(jv, sse_names[i].name) : NULL;

			if (sse_names[i].bit == QA_KMS_KEY)
				has_key = text != NULL && text[0] != '\0';
			if (!(want & sse_names[i].bit))
				continue;
			if (sse_names[i].bit == QA_SSE)
				sqs_kv_str(out, &first, sse_names[i].name, text != NULL ? text : "true");
			else if (has_key)
				sqs_kv_str(out, &first, sse_names[i].name, text != NULL ? text : "300");
		}
	}
	if (q.fifo)
	{
		bool		by_group = strcmp(q.scope, "message_group") == 0;

		if (want & QA_FIFO)
			sqs_kv_str(out, &first, "FifoQueue", "true");
		if (want & QA_CBD)
			sqs_kv_str(out, &first, "ContentBasedDeduplication", q.cbd ? "true" : "false");
		if (want & QA_SCOPE)
			sqs_kv_str(out, &first, "DeduplicationScope", by_group ? "messageGroup" : "queue");
		if (want & QA_THROUGHPUT)
			sqs_kv_str(out, &first, "FifoThroughputLimit", by_group ? "perMessageGroupId" : "perQueue");
	}
	appendStringInfoString(out, "}}");
}
