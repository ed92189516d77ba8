/*-------------------------------------------------------------------------
 *
 * send.c
 *	  SendMessage and SendMessageBatch: a message read and checked as SQS
 *	  checks it (body characters, DelaySeconds, group and deduplication
 *	  ids, FIFO rules, its size as SQS counts it), its MessageAttributes
 *	  (names, types, values; their stored form and MD5) and
 *	  MessageSystemAttributes (AWSTraceHeader, kept among its attributes
 *	  under TRACE_HEADER_ATTR, or taken from X-Amzn-Trace-Id), then
 *	  queue.send or queue.send_batch (one call per distinct DelaySeconds).
 *
 * May call: statements.c, shape.c, digest.c, wire.c (sqs_fail,
 * sqs_header), PostgreSQL.  Called by: actions.c.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <locale.h>
#include <wctype.h>

#include "catalog/pg_type.h"
#include "common/base64.h"
#include "executor/spi.h"
#include "mb/pg_wchar.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/json.h"
#include "utils/jsonb.h"

#include "common/compat.h"
#include "core_api.h"
#include "actions.h"

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

	sqs_obj_pairs(map, &p);
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
		tv = sqs_member(val, "DataType");
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
		tv = sqs_member(val, binary ? "BinaryValue" : "StringValue");
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
	m->has_md5_attrs = sqs_md5_of_attributes(DatumGetJsonbP(sqs_cstring_jsonb(m->attrs)),
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

	sqs_obj_pairs(map, &p);
	if (p.n == 0)
		return true;
	if (p.n > 1 || strcmp(p.keys[0], "AWSTraceHeader") != 0)
		return msg_error(m, SQS_ERR_INVALID_PARAMETER_VALUE,
						 "Message system attribute name '%s' is invalid.",
						 strcmp(p.keys[0], "AWSTraceHeader") != 0 ? p.keys[0] : p.keys[1]);
	if (p.vals[0].type != jbvBinary || !JsonContainerIsObject(p.vals[0].val.binary.data) ||
		(type = sqs_member(p.vals[0].val.binary.data, "DataType")) == NULL ||
		type->type != jbvString || type->val.string.len != 6 ||
		strncmp(type->val.string.val, "String", 6) != 0 ||
		(sv = sqs_member(p.vals[0].val.binary.data, "StringValue")) == NULL ||
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
	m->has_md5_sys = sqs_md5_of_attributes(DatumGetJsonbP(sqs_cstring_jsonb(buf.data)), m->md5_sys);

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
	m->body = sqs_in_str(e, "MessageBody");
	if (m->body == NULL || m->body[0] == '\0')
		return msg_error(m, SQS_ERR_MISSING_PARAMETER,
						 "The request must contain the parameter MessageBody.");
	if (!valid_chars(m->body))
		return msg_error(m, SQS_ERR_INVALID_MESSAGE_CONTENTS,
						 "Invalid binary character in the message body.");
	m->size = strlen(m->body);
	delay = sqs_in_str(e, "DelaySeconds");
	if (delay != NULL)
	{
		m->has_delay = true;
		if (!sqs_wire_int(delay, &m->delay) || m->delay < 0 || m->delay > SQS_MAX_DELAY_SECONDS)
			return msg_error(m, SQS_ERR_INVALID_PARAMETER_VALUE,
							 "Value %s for parameter DelaySeconds is invalid. Reason: must be between 0 and %d.",
							 delay, SQS_MAX_DELAY_SECONDS);
	}
	m->group = sqs_in_str(e, "MessageGroupId");
	if (m->group != NULL && !sqs_valid_token(m->group))
		return msg_error(m, SQS_ERR_INVALID_PARAMETER_VALUE,
						 "Value %s for parameter MessageGroupId is invalid. Reason: MessageGroupId "
						 "can only include alphanumeric and punctuation characters. 1 to 128 in length.",
						 m->group);
	m->dedup = sqs_in_str(e, "MessageDeduplicationId");
	if (m->dedup != NULL && !sqs_valid_token(m->dedup))
		return msg_error(m, SQS_ERR_INVALID_PARAMETER_VALUE,
						 "Value %s for parameter MessageDeduplicationId is invalid. Reason: MessageDeduplicationId "
						 "can only include alphanumeric and punctuation characters. 1 to 128 in length.",
						 m->dedup);
	attrs = sqs_in_container(e, "MessageAttributes", true);
	if (attrs != NULL && !check_msg_attrs(attrs, m))
		return false;
	attrs = sqs_in_container(e, "MessageSystemAttributes", true);
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

/* The fields of a sent message's result, shared by Send and SendBatch. */
static void
sent_fields(StringInfo out, bool *first, OutMsg *m, int64 id, bool seq_null, int64 seq)
{
	sqs_kv_str(out, first, "MD5OfMessageBody", m->md5_body);
	if (m->has_md5_attrs)
		sqs_kv_str(out, first, "MD5OfMessageAttributes", m->md5_attrs);
	if (m->has_md5_sys)
		sqs_kv_str(out, first, "MD5OfMessageSystemAttributes", m->md5_sys);
	sqs_kv_message_id(out, first, "MessageId", id);
	if (!seq_null)
		sqs_kv_sequence(out, first, "SequenceNumber", seq);
}

void
sqs_act_send_message(SqsCall *call, StringInfo out)
{
	JsonbContainer *in = &call->input->root;
	char	   *name = sqs_queue_of(call);
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
	if (!read_message(in, &m, sqs_fetch_queue(name, &q) ? &q : NULL))
		sqs_fail(m.err, "%s", m.errmsg);
	trace_from_header(call, &m);
	v[0] = CStringGetTextDatum(name);
	v[1] = CStringGetTextDatum(m.body);
	if (m.has_delay)
		v[2] = sqs_secs_interval(m.delay);
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
		v[5] = sqs_cstring_jsonb(m.attrs);
	else
		nulls[5] = 'n';
	/* read_message checked the size as SQS counts it (queue_sqs_wire_rules) */
	sqs_run(P_SEND, v, nulls);
	if (SPI_processed != 1)
		elog(ERROR, "SQS endpoint: queue.send returned " UINT64_FORMAT " rows", SPI_processed);
	sqs_check_result_cols(3);
	id = DatumGetInt64(sqs_col(0, 1, &isnull));
	seq = DatumGetInt64(sqs_col(0, 2, &seq_null));
	if (seq_null)
		seq = 0;
	appendStringInfoChar(out, '{');
	sent_fields(out, &first, &m, id, seq_null, seq);
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
			(type == JSONBOID ? sqs_cstring_jsonb(vals[i]) : CStringGetTextDatum(vals[i]));
	}
	return PointerGetDatum(construct_md_array(elems, nulls, 1, dims, lbs, type,
											  type == JSONBOID ? -1 : -1, false, TYPALIGN_INT));
}

void
sqs_act_send_message_batch(SqsCall *call, StringInfo out)
{
	char	   *name = sqs_queue_of(call);
	int			n;
	char	  **ids;
	JsonbContainer **entries = sqs_batch_entries(call, &n, &ids);
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

	sqs_need_queue(name, &q);
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
			v[2] = sqs_secs_interval(msgs[lead].delay);
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
		sqs_run(P_SEND_BATCH, v, nulls);
		sqs_check_result_cols(4);
		for (uint64 r = 0; r < SPI_processed; r++)
		{
			bool		isnull;
			int			ord = DatumGetInt32(sqs_col(r, 1, &isnull));

			if (ord < 1 || ord > k)
				elog(ERROR, "SQS endpoint: queue.send_batch returned ordinal %d", ord);
			msg_ids[which[ord - 1]] = DatumGetInt64(sqs_col(r, 2, &isnull));
			seqs[which[ord - 1]] = DatumGetInt64(sqs_col(r, 3, &seq_nulls[which[ord - 1]]));
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
		sqs_kv_str(&ok, &first, "Id", msgs[i].id);
		sent_fields(&ok, &first, &msgs[i], msg_ids[i], seq_nulls[i], seqs[i]);
		appendStringInfoChar(&ok, '}');
	}
	initStringInfo(&failed);
	first_entry = true;
	for (int i = 0; i < n; i++)
		if (msgs[i].err != SQS_ERR_NONE)
			sqs_failed_entry(&failed, &first_entry, msgs[i].id, msgs[i].err, msgs[i].errmsg);
	sqs_batch_result(out, &ok, &failed);
}
