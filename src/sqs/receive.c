/*-------------------------------------------------------------------------
 *
 * receive.c
 *	  ReceiveMessage: queue.receive as SQS answers it (system attributes
 *	  asked for, message attributes by name or prefix, a dead letter's
 *	  DeadLetterQueueSourceArn, AWSTraceHeader), or, when nothing is
 *	  received and the request may wait, a long poll: resp->park, on the
 *	  queue's wait slot read before the receive (exchange.c parks it).
 *
 * May call: statements.c, shape.c, digest.c, wire.c (sqs_fail),
 * PostgreSQL.  Called by: actions.c.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "executor/spi.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/json.h"
#include "utils/jsonb.h"
#include "utils/timestamp.h"

#include "common/compat.h"
#include "actions.h"
#include "core_api.h"

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
	sqs_obj_pairs(&attrs->root, &p);
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
			sqs_member(v->val.binary.data, "DataType") != NULL)
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
			escape_json(&buf, sqs_scalar_text(v, "attributes"));
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

void
sqs_act_receive_message(SqsCall *call, StringInfo out, SqsResponse *resp)
{
	JsonbContainer *in = &call->input->root;
	char	   *name = sqs_queue_of(call);
	int64		max = 1;
	int64		visibility = -1;
	int64		wait = -1;
	char	   *attempt = sqs_in_str(in, "ReceiveRequestAttemptId");
	int			n_sys,
				n_sys2,
				n_attr;
	char	  **sys = sqs_in_str_list(in, "AttributeNames", &n_sys);
	char	  **sys2 = sqs_in_str_list(in, "MessageSystemAttributeNames", &n_sys2);
	char	  **attr_names = sqs_in_str_list(in, "MessageAttributeNames", &n_attr);
	int			sys_bits = system_attr_bits(sys, n_sys) | system_attr_bits(sys2, n_sys2);
	Datum		v[4];
	char		nulls[5] = "    ";
	int64		queue_id = 0;
	uint64		generation = 0;
	TimestampTz next_visible = 0;
	bool		next_null = true;
	char	   *sender = NULL;

	(void) sqs_in_int(in, "MaxNumberOfMessages", 1, SQS_MAX_BATCH, &max);
	(void) sqs_in_int(in, "VisibilityTimeout", 0, SQS_MAX_VISIBILITY, &visibility);
	(void) sqs_in_int(in, "WaitTimeSeconds", 0, SQS_MAX_WAIT_SECONDS, &wait);
	if (attempt != NULL && !sqs_valid_token(attempt))
		sqs_fail(SQS_ERR_INVALID_PARAMETER_VALUE,
				 "Value %s for parameter ReceiveRequestAttemptId is invalid.", attempt);
	if (wait < 0)
	{
		QueueRow	q;

		sqs_need_queue(name, &q);
		wait = Min(q.receive_wait, SQS_MAX_WAIT_SECONDS);
	}

	/* the wait slot's generation is read before the receive tries */
	v[0] = CStringGetTextDatum(name);
	if (wait > 0)
	{
		sqs_run(P_WAIT_HINT, v, NULL);
		if (SPI_processed > 0)
		{
			bool		isnull;
			Datum		d;

			sqs_check_result_cols(3);
			d = sqs_col(0, 1, &isnull);
			queue_id = isnull ? 0 : DatumGetInt64(d);
			d = sqs_col(0, 2, &isnull);
			generation = isnull ? 0 : (uint64) DatumGetInt64(d);
			d = sqs_col(0, 3, &next_null);
			if (!next_null)
				next_visible = DatumGetTimestampTz(d);
		}
	}

	v[1] = Int32GetDatum((int32) max);
	if (visibility >= 0)
		v[2] = sqs_secs_interval(visibility);
	else
		nulls[2] = 'n';
	if (attempt != NULL)
		v[3] = CStringGetTextDatum(attempt);
	else
		nulls[3] = 'n';
	sqs_run(P_RECEIVE, v, nulls);

	if (SPI_processed == 0)
	{
		TimestampTz now = GetCurrentTimestamp();
		TimestampTz deadline = TimestampTzPlusMilliseconds(call->req->started_at,
														   wait * 1000);

		if (wait > 0 && now < deadline && queue_id != 0)
		{
			TimestampTz until = deadline;
			/* a rate limit's closed window: try again when it opens */
			TimestampTz opens = queue_receive_window_opens();

			if (!next_null)
			{
				/* a hint already past: look again shortly, never spin */
				if (next_visible <= now)
					next_visible = opens > now ? opens :
						TimestampTzPlusMilliseconds(now, 200);
				until = Min(until, next_visible);
			}
			if (opens > now)
				until = Min(until, opens);
			resp->park = true;
			resp->park_queue_id = queue_id;
			resp->park_generation = generation;
			resp->park_until = until;
			return;
		}
		appendStringInfoString(out, "{}");
		return;
	}

	sqs_check_result_cols(10);
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
		int64		id = DatumGetInt64(sqs_col(r, 1, &isnull));
		char	   *receipt = sqs_col_text(r, 2);
		char	   *body = sqs_col_text(r, 3);
		Datum		d;
		Jsonb	   *attrs;
		char	   *group = sqs_col_text(r, 5);
		char	   *dedup = sqs_col_text(r, 6);
		bool		seq_null;
		int64		seq;
		int32		count;
		TimestampTz sent_at;
		TimestampTz first_at;
		bool		first_null;
		char		md5[33];
		char	   *mattrs;

		d = sqs_col(r, 4, &isnull);
		attrs = isnull ? NULL : DatumGetJsonbP(d);
		d = sqs_col(r, 7, &seq_null);
		seq = seq_null ? 0 : DatumGetInt64(d);
		count = DatumGetInt32(sqs_col(r, 8, &isnull));
		sent_at = DatumGetTimestampTz(sqs_col(r, 9, &isnull));
		d = sqs_col(r, 10, &first_null);
		first_at = first_null ? GetCurrentTimestamp() : DatumGetTimestampTz(d);
		if (body == NULL)
			body = "";

		if (r > 0)
			appendStringInfoChar(out, ',');
		appendStringInfoChar(out, '{');
		sqs_kv_message_id(out, &first, "MessageId", id);
		sqs_kv_str(out, &first, "ReceiptHandle", receipt ? receipt : "");
		sqs_md5_hex(body, strlen(body), md5);
		sqs_kv_str(out, &first, "MD5OfBody", md5);
		sqs_kv_str(out, &first, "Body", body);
		if (sys_bits != 0)
		{
			bool		f = true;

			sqs_key(out, &first, "Attributes");
			appendStringInfoChar(out, '{');
			if (sys_bits & SA_SENDER)
				sqs_kv_str(out, &f, "SenderId", sender);
			if (sys_bits & SA_SENT)
				sqs_kv_int_str(out, &f, "SentTimestamp", sqs_epoch_ms(sent_at));
			if (sys_bits & SA_COUNT)
				sqs_kv_int_str(out, &f, "ApproximateReceiveCount", count);
			if (sys_bits & SA_FIRST)
				sqs_kv_int_str(out, &f, "ApproximateFirstReceiveTimestamp", sqs_epoch_ms(first_at));
			if ((sys_bits & SA_SEQ) && !seq_null)
				sqs_kv_sequence(out, &f, "SequenceNumber", seq);
			if ((sys_bits & SA_GROUP) && group != NULL)
				sqs_kv_str(out, &f, "MessageGroupId", group);
			if ((sys_bits & SA_DEDUP) && dedup != NULL)
				sqs_kv_str(out, &f, "MessageDeduplicationId", dedup);
			if ((sys_bits & SA_DLQ_SOURCE) && attrs != NULL && JB_ROOT_IS_OBJECT(attrs))
			{
				JsonbValue *dl = sqs_member(&attrs->root, DEAD_LETTER_ATTR);
				JsonbValue *src = (dl != NULL && dl->type == jbvBinary &&
								   JsonContainerIsObject(dl->val.binary.data))
					? sqs_member(dl->val.binary.data, "source_queue") : NULL;

				if (src != NULL && src->type == jbvString)
					sqs_kv_str(out, &f, "DeadLetterQueueSourceArn",
						   sqs_queue_arn(call, pnstrdup(src->val.string.val,
														src->val.string.len)));
			}
			if ((sys_bits & SA_TRACE) && attrs != NULL && JB_ROOT_IS_OBJECT(attrs))
			{
				JsonbValue *th = sqs_member(&attrs->root, TRACE_HEADER_ATTR);

				if (th != NULL && th->type == jbvString)
					sqs_kv_str(out, &f, "AWSTraceHeader",
						   pnstrdup(th->val.string.val, th->val.string.len));
			}
			appendStringInfoChar(out, '}');
		}
		mattrs = received_attrs(attrs, attr_names, n_attr);
		if (mattrs != NULL)
		{
			if (sqs_md5_of_attributes(DatumGetJsonbP(sqs_cstring_jsonb(mattrs)), md5))
				sqs_kv_str(out, &first, "MD5OfMessageAttributes", md5);
			sqs_key(out, &first, "MessageAttributes");
			appendStringInfoString(out, mattrs);
		}
		appendStringInfoChar(out, '}');
	}
	appendStringInfoString(out, "]}");
}
