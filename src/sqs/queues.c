/*-------------------------------------------------------------------------
 *
 * queues.c
 *	  The SQS actions on queues as a whole: CreateQueue (SQS's name rule;
 *	  an existing queue's URL when the attributes given match it),
 *	  DeleteQueue, PurgeQueue (one a minute, shared.c), GetQueueUrl,
 *	  ListQueues, ListDeadLetterSourceQueues, TagQueue, UntagQueue,
 *	  ListQueueTags.  A queue's attributes are attributes.c's.
 *
 * May call: attributes.c, statements.c, shape.c, shared.c
 * (sqs_purge_note), wire.c (sqs_fail), PostgreSQL.  Called by: actions.c.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "executor/spi.h"
#include "utils/builtins.h"
#include "utils/json.h"
#include "utils/jsonb.h"
#include "utils/timestamp.h"

#include "common/compat.h"
#include "actions.h"

/* ---------------------------------------------------------------------
 * Queues
 * ---------------------------------------------------------------------
 */

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

/* A tags map (string values) as a jsonb object. */
static Datum
tags_jsonb(JsonbContainer *map, const char *param)
{
	Pairs		p;
	StringInfoData buf;

	sqs_obj_pairs(map, &p);
	if (p.n > SQS_MAX_TAGS)
		sqs_fail(SQS_ERR_INVALID_PARAMETER_VALUE,
				 "Value for parameter %s is invalid. Reason: at most %d tags.", param, SQS_MAX_TAGS);
	initStringInfo(&buf);
	appendStringInfoChar(&buf, '{');
	for (int i = 0; i < p.n; i++)
	{
		char	   *v = sqs_scalar_text(&p.vals[i], param);

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
	return sqs_cstring_jsonb(buf.data);
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

void
sqs_act_create_queue(SqsCall *call, StringInfo out)
{
	JsonbContainer *in = &call->input->root;
	char	   *name = sqs_req_str(in, "QueueName");
	JsonbContainer *attrs = sqs_in_container(in, "Attributes", true);
	JsonbContainer *tags = sqs_in_container(in, "tags", true);
	QueueAttrs	a;
	QueueRow	existing;
	bool		suffix;
	bool		fifo = false;
	char	   *fifo_text;
	Datum		v[13];
	char		nulls[14] = "             ";
	bool		first = true;

	check_wire_name(name, &suffix);
	fifo_text = attrs ? sqs_scalar_text(sqs_member(attrs, "FifoQueue"), "FifoQueue") : NULL;
	if (fifo_text != NULL)
		fifo = sqs_attr_bool("FifoQueue", fifo_text);
	if (fifo && !suffix)
		sqs_fail(SQS_ERR_INVALID_PARAMETER_VALUE,
				 "The name of a FIFO queue can only include alphanumeric characters, hyphens, or underscores, must end with .fifo suffix and be 1 to 80 in length.");
	if (suffix && !fifo)
		sqs_fail(SQS_ERR_INVALID_PARAMETER_VALUE,
				 "Can only include alphanumeric characters, hyphens, or underscores. 1 to 80 in length: a name ending in .fifo needs FifoQueue=true.");
	sqs_parse_queue_attrs(attrs, true, &a, fifo);

	/*
	 * An existing queue: its URL when the attributes given match it (SQS
	 * compares those, not the defaults of the ones left out, nor tags).
	 */
	if (sqs_fetch_queue(name, &existing))
	{
		const char *differs = differing_attr(&a, fifo, &existing);

		if (differs != NULL)
			sqs_fail(SQS_ERR_QUEUE_NAME_EXISTS,
					 "A queue already exists with the same name and a different value for attribute %s",
					 differs);
		appendStringInfoChar(out, '{');
		sqs_kv_str(out, &first, "QueueUrl", sqs_queue_url(call, existing.name));
		appendStringInfoChar(out, '}');
		return;
	}

	v[0] = CStringGetTextDatum(name);
	v[1] = BoolGetDatum(fifo);
	v[2] = sqs_secs_interval(a.has_visibility ? a.visibility : 30);
	v[3] = sqs_secs_interval(a.has_delay ? a.delay : 0);
	v[4] = sqs_secs_interval(a.has_retention ? a.retention : 345600);
	v[5] = Int32GetDatum(a.has_max_size ? (int32) a.max_size : SQS_MESSAGE_MAX);
	v[6] = sqs_secs_interval(a.has_wait ? a.wait : 0);
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
		v[11] = sqs_names_array(a.allow, a.nallow);
	else
		nulls[11] = 'n';
	v[12] = tags ? tags_jsonb(tags, "tags") : sqs_cstring_jsonb("{}");
	sqs_run(P_CREATE, v, nulls);
	sqs_store_sse(name, &a);

	appendStringInfoChar(out, '{');
	sqs_kv_str(out, &first, "QueueUrl", sqs_queue_url(call, name));
	appendStringInfoChar(out, '}');
}

void
sqs_act_delete_queue(SqsCall *call, StringInfo out)
{
	Datum		v[1] = {CStringGetTextDatum(sqs_queue_of(call))};

	sqs_run(P_DROP, v, NULL);
	appendStringInfoString(out, "{}");
}

/*
 * PurgeQueue: one a queue a minute, as SQS (a second within 60 s is
 * PurgeQueueInProgress and purges nothing: its transaction rolls back).
 * Checked after the purge, so that only a purge the caller may do counts.
 */
void
sqs_act_purge_queue(SqsCall *call, StringInfo out)
{
	char	   *name = sqs_queue_of(call);
	Datum		v[1] = {CStringGetTextDatum(name)};

	sqs_run(P_PURGE, v, NULL);
	if (!sqs_purge_note(name, GetCurrentTimestamp()))
		sqs_fail(SQS_ERR_PURGE_QUEUE_IN_PROGRESS,
				 "Only one PurgeQueue operation on %s is allowed every 60 seconds.", name);
	appendStringInfoString(out, "{}");
}

void
sqs_act_get_queue_url(SqsCall *call, StringInfo out)
{
	char	   *name = sqs_req_str(&call->input->root, "QueueName");
	QueueRow	q;
	bool		first = true;

	sqs_need_queue(name, &q);
	appendStringInfoChar(out, '{');
	sqs_kv_str(out, &first, "QueueUrl", sqs_queue_url(call, q.name));
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
	char	   *token = sqs_in_str(in, "NextToken");
	int64		max = SQS_LIST_MAX;
	bool		paged = sqs_in_int(in, "MaxResults", 1, SQS_LIST_MAX, &max);
	Datum		v[3];
	char		nulls[4] = "   ";
	uint64		n;
	bool		first = true;

	if (filter != NULL)
		v[0] = CStringGetTextDatum(filter);
	else
		nulls[0] = 'n';
	if (token != NULL && token[0] != '\0')
		v[1] = CStringGetTextDatum(sqs_b64_decode_token(token, "NextToken"));
	else
		nulls[1] = 'n';
	v[2] = Int64GetDatum(max + 1);
	sqs_run(k, v, nulls);
	n = Min(SPI_processed, (uint64) max);

	appendStringInfoChar(out, '{');
	if (n > 0 || k == P_DLQ_SOURCES)
	{
		sqs_key(out, &first, list_member);
		appendStringInfoChar(out, '[');
		for (uint64 i = 0; i < n; i++)
		{
			if (i > 0)
				appendStringInfoChar(out, ',');
			escape_json(out, sqs_queue_url(call, sqs_col_text(i, 1)));
		}
		appendStringInfoChar(out, ']');
	}
	if (paged && SPI_processed > (uint64) max)
		sqs_kv_str(out, &first, "NextToken", sqs_b64_encode(sqs_col_text(n - 1, 1)));
	appendStringInfoChar(out, '}');
}

void
sqs_act_list_queues(SqsCall *call, StringInfo out)
{
	char	   *prefix = sqs_in_str(&call->input->root, "QueueNamePrefix");

	list_queues(call, out, P_LIST, prefix && prefix[0] ? prefix : NULL, "QueueUrls");
}

void
sqs_act_list_dead_letter_source_queues(SqsCall *call, StringInfo out)
{
	char	   *name = sqs_queue_of(call);
	QueueRow	q;

	sqs_need_queue(name, &q);
	list_queues(call, out, P_DLQ_SOURCES, q.name, "queueUrls");
}

void
sqs_act_tag_queue(SqsCall *call, StringInfo out)
{
	char	   *name = sqs_queue_of(call);
	JsonbContainer *tags = sqs_in_container(&call->input->root, "Tags", true);
	Datum		v[2];

	if (tags == NULL)
		sqs_fail(SQS_ERR_MISSING_PARAMETER, "The request must contain the parameter Tags.");
	v[0] = CStringGetTextDatum(name);
	v[1] = tags_jsonb(tags, "Tags");
	sqs_run(P_TAG, v, NULL);
	appendStringInfoString(out, "{}");
}

void
sqs_act_untag_queue(SqsCall *call, StringInfo out)
{
	char	   *name = sqs_queue_of(call);
	int			n;
	char	  **keys = sqs_in_str_list(&call->input->root, "TagKeys", &n);
	Datum		v[2];

	if (keys == NULL)
		sqs_fail(SQS_ERR_MISSING_PARAMETER, "The request must contain the parameter TagKeys.");
	v[0] = CStringGetTextDatum(name);
	v[1] = sqs_names_array(keys, n);
	sqs_run(P_UNTAG, v, NULL);
	appendStringInfoString(out, "{}");
}

void
sqs_act_list_queue_tags(SqsCall *call, StringInfo out)
{
	char	   *name = sqs_queue_of(call);
	QueueRow	q;
	Pairs		p;
	bool		first = true;

	sqs_need_queue(name, &q);
	appendStringInfoChar(out, '{');
	if (q.tags != NULL && JB_ROOT_IS_OBJECT(q.tags) && JB_ROOT_COUNT(q.tags) > 0)
	{
		sqs_obj_pairs(&q.tags->root, &p);
		appendStringInfoString(out, "\"Tags\":{");
		for (int i = 0; i < p.n; i++)
		{
			char	   *v;

			/* tags set from SQL may hold any JSON: its text */
			if (p.vals[i].type == jbvBinary)
				v = JsonbToCString(NULL, p.vals[i].val.binary.data, -1);
			else
				v = p.vals[i].type == jbvNull ? pstrdup("null") :
					sqs_scalar_text(&p.vals[i], "Tags");
			sqs_kv_str(out, &first, p.keys[i], v);
		}
		appendStringInfoChar(out, '}');
	}
	appendStringInfoChar(out, '}');
}
