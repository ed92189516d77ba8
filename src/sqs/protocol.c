/*-------------------------------------------------------------------------
 *
 * protocol.c
 *	  One SQS request from parsed HTTP to its answer (REFERENCE.md 1.7):
 *	  which of SQS's two protocols it speaks, its transaction, its
 *	  authentication, its action as the key's role, and the answer in the
 *	  request's protocol, errors included.
 *
 * AWS JSON 1.0 (X-Amz-Target: AmazonSQS.<Action>) carries the action's
 * input shape as a JSON object and gets the output shape back as JSON.
 * Query (Action=<Action>, form or query string) carries the same input
 * flattened into parameters (Attribute.1.Name, ...); fold_query() folds
 * them back into the JSON input shape, so the actions (actions.c and its
 * rooms, actions.h) see one shape for both, and xml_render() turns the output shape into the XML answer whose
 * element names botocore's Query model (service-2.json) expects.
 *
 * The protocol is the content type's, as SQS picks it: a form body is Query
 * even with an X-Amz-Target header.  A Query request posted to a queue URL
 * (/<account>/<queue>) with no QueueUrl addresses the queue of its path
 * (path_queue_name).  STS GetCallerIdentity, signed with the sts scope, is
 * the one action of another service served (AWS tooling asks it for the
 * account id).
 *
 * Errors: the actions and sigv4.c raise SQS's errors with sqs_fail (an
 * ereport(ERROR) remembered here); every other error comes from the SQL
 * API and is mapped by its SQLSTATE (sql_error()).  Anything unexpected is
 * an InternalError whose real message goes to the server log only.
 *
 * May call: actions.c, sigv4.c, PostgreSQL.  Called by: exchange.c
 * (sqs_handle, sqs_refuse), worker.c (sqs_read_request_bounds).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <stdarg.h>

#include "access/xact.h"
#include "catalog/namespace.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "mb/pg_wchar.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/json.h"
#include "utils/jsonb.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"
#include "utils/timeout.h"

#include "common/compat.h"
#include "core_api.h"
#include "sqs.h"

#define SQS_XMLNS "http://queue.amazonaws.com/doc/2012-11-05/"
#define SQS_API_VERSION "2012-11-05"
#define STS_API_VERSION "2011-06-15"
#define STS_XMLNS "https://sts.amazonaws.com/doc/2011-06-15/"
#define STS_TARGET "AWSSecurityTokenServiceV20110615."
#define JSON_CONTENT_TYPE "application/x-amz-json-1.0"
#define XML_CONTENT_TYPE "text/xml"

/* Bounds on what a request may hold (every loop over input is bounded) */
#define MAX_PARAMS			1000	/* Query parameters */
#define MAX_INDEX			1000	/* N in Attribute.N.Name */
#define MAX_SEGMENTS		8		/* dots in a parameter name, plus one */
#define MAX_PARAM_NAME		256
#define MAX_ACTION_NAME		64
#define MAX_JSON_DEPTH		32		/* SQS's input shapes nest 4 deep */

/*
 * Real SQS actions that actions.c may not serve: an action of this list
 * it does not know is UnsupportedOperation, any other name InvalidAction.
 */
static const char *const sqs_actions[] = {
	"AddPermission", "CancelMessageMoveTask", "ChangeMessageVisibility",
	"ChangeMessageVisibilityBatch", "CreateQueue", "DeleteMessage",
	"DeleteMessageBatch", "DeleteQueue", "GetQueueAttributes", "GetQueueUrl",
	"ListDeadLetterSourceQueues", "ListMessageMoveTasks", "ListQueueTags",
	"ListQueues", "PurgeQueue", "ReceiveMessage", "RemovePermission",
	"SendMessage", "SendMessageBatch", "SetQueueAttributes",
	"StartMessageMoveTask", "TagQueue", "UntagQueue",
};

/* Actions whose output shape is empty: their XML has no <XResult> */
static const char *const no_result_actions[] = {
	"AddPermission", "ChangeMessageVisibility", "DeleteMessage",
	"DeleteQueue", "PurgeQueue", "RemovePermission", "SetQueueAttributes",
	"TagQueue", "UntagQueue",
};

typedef enum SqsProtocol
{
	PROTO_JSON,
	PROTO_QUERY,
} SqsProtocol;

/* True while the JSON body is being parsed: its errors are malformed JSON */
static bool parsing_body = false;

/*
 * A Query request that asked for JSON (Accept: application/json): SQS
 * answers its Query API in JSON then, {"<Action>Response": {"<Action>Result":
 * ..., "ResponseMetadata": ...}}, and its errors as {"Error": ...}.  Set for
 * the request sqs_handle serves, false otherwise.
 */
static bool query_json = false;

static bool
name_in(const char *name, const char *const *list, int n)
{
	for (int i = 0; i < n; i++)
		if (strcmp(name, list[i]) == 0)
			return true;
	return false;
}

/* The first value of a request parameter, or NULL */
static const char *
request_param(const SqsRequest *req, const char *name)
{
	for (int i = 0; i < req->nparams; i++)
		if (strcmp(req->params[i].name, name) == 0)
			return req->params[i].value;
	return NULL;
}

/* Whether the client asked for JSON (Accept: application/json) */
static bool
accepts_json(const SqsRequest *req)
{
	const char *accept = sqs_header(req, "accept");

	for (const char *p = accept; p != NULL && *p; p++)
		if (pg_strncasecmp(p, "application/json", 16) == 0)
			return true;
	return false;
}

/* Whether the request has a parameter besides a presigned URL's X-Amz-* */
static bool
request_has_params(const SqsRequest *req)
{
	for (int i = 0; i < req->nparams; i++)
		if (pg_strncasecmp(req->params[i].name, "X-Amz-", 6) != 0)
			return true;
	return false;
}

/*
 * An error the SQL API raised, as SQS's error: the client's mistakes keep
 * the API's message (written for users: it names the argument); anything
 * else is logged and answered with a message that says nothing inside.
 */
static int
sql_error(const ErrorData *edata, const char **message)
{
	*message = edata->message ? edata->message : "";
	switch (edata->sqlerrcode)
	{
		case ERRCODE_UNDEFINED_OBJECT:
			return SQS_ERR_QUEUE_DOES_NOT_EXIST;
		case ERRCODE_DUPLICATE_OBJECT:
			return SQS_ERR_QUEUE_NAME_EXISTS;
		case ERRCODE_INSUFFICIENT_PRIVILEGE:
			return SQS_ERR_ACCESS_DENIED;
		case ERRCODE_INVALID_PARAMETER_VALUE:
		case ERRCODE_NULL_VALUE_NOT_ALLOWED:
		case ERRCODE_INVALID_NAME:
		case ERRCODE_NAME_TOO_LONG:
		case ERRCODE_PROGRAM_LIMIT_EXCEEDED:
		case ERRCODE_INVALID_TEXT_REPRESENTATION:
		case ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE:
		case ERRCODE_INVALID_BINARY_REPRESENTATION:
		case ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE:
		case ERRCODE_STRING_DATA_RIGHT_TRUNCATION:
		case ERRCODE_CHARACTER_NOT_IN_REPERTOIRE:
		case ERRCODE_UNTRANSLATABLE_CHARACTER:
			/* a refusal of the SQL API is the client's, never a 5xx */
		case ERRCODE_DEPENDENT_OBJECTS_STILL_EXIST:
			return SQS_ERR_INVALID_PARAMETER_VALUE;
		case ERRCODE_FEATURE_NOT_SUPPORTED:
			return SQS_ERR_UNSUPPORTED_OPERATION;
		case ERRCODE_READ_ONLY_SQL_TRANSACTION:
		case ERRCODE_T_R_SERIALIZATION_FAILURE:
		case ERRCODE_T_R_DEADLOCK_DETECTED:
		case ERRCODE_LOCK_NOT_AVAILABLE:
		case ERRCODE_QUERY_CANCELED:
		case ERRCODE_TOO_MANY_CONNECTIONS:
		case ERRCODE_OUT_OF_MEMORY:
		case ERRCODE_DISK_FULL:
			elog(LOG, "SQS request failed: %s (SQLSTATE %s)",
				 *message, unpack_sql_state(edata->sqlerrcode));
			*message = "The service is unavailable; try again later.";
			return SQS_PERR_UNAVAILABLE;
		default:
			elog(LOG, "SQS request failed: %s (SQLSTATE %s)",
				 *message, unpack_sql_state(edata->sqlerrcode));
			*message = "We encountered an internal error. Please try again.";
			return SQS_ERR_INTERNAL_ERROR;
	}
}

/* A request id as AWS's: a random UUID */
static void
make_request_id(char *buf)
{
	uint8		b[16];

	if (!pg_strong_random(b, sizeof(b)))
	{
		/* cannot happen on a working system; still unique enough */
		uint64		t = (uint64) GetCurrentTimestamp();

		memset(b, 0, sizeof(b));
		memcpy(b, &t, sizeof(t));
		memcpy(b + 8, &MyProcPid, sizeof(MyProcPid));
	}
	b[6] = (b[6] & 0x0f) | 0x40;
	b[8] = (b[8] & 0x3f) | 0x80;
	snprintf(buf, 37,
			 "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
			 b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7],
			 b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15]);
}

static void
add_header(SqsResponse *resp, const char *name, const char *value)
{
	if (resp->nheaders < (int) lengthof(resp->headers))
	{
		resp->headers[resp->nheaders].name = pstrdup(name);
		resp->headers[resp->nheaders].value = pstrdup(value);
		resp->nheaders++;
	}
}

/*
 * XML text as SQS escapes it: the five XML specials but the apostrophe,
 * and carriage returns (which XML parsers would otherwise fold into line
 * feeds); other control characters as character references.
 */
static void
xml_escape(StringInfo buf, const char *s, size_t len)
{
	for (size_t i = 0; i < len; i++)
	{
		unsigned char c = (unsigned char) s[i];

		switch (c)
		{
			case '&':
				appendStringInfoString(buf, "&amp;");
				break;
			case '<':
				appendStringInfoString(buf, "&lt;");
				break;
			case '>':
				appendStringInfoString(buf, "&gt;");
				break;
			case '"':
				appendStringInfoString(buf, "&quot;");
				break;
			case '\r':
				appendStringInfoString(buf, "&#xD;");
				break;
			default:
				if (c < 0x20 && c != '\t' && c != '\n')
					appendStringInfo(buf, "&#x%X;", c);
				else
					appendStringInfoChar(buf, (char) c);
		}
	}
}

static void
xml_text_element(StringInfo buf, const char *name, const char *s, size_t len)
{
	appendStringInfo(buf, "<%s>", name);
	xml_escape(buf, s, len);
	appendStringInfo(buf, "</%s>", name);
}

/*
 * The error answer, in the request's protocol, into resp (whose body is
 * reset): JSON {"__type", "message"} with x-amzn-query-error, or Query's
 * <ErrorResponse>.
 */
static void
error_answer(SqsResponse *resp, SqsProtocol proto, int err,
			 const char *message, const char *request_id)
{
	const SqsErrorInfo *info = sqs_error_info(err);
	char		qerr[160];

	resp->status = info->status;
	resp->park = false;
	resetStringInfo(&resp->body);
	if (proto == PROTO_JSON)
	{
		resp->content_type = JSON_CONTENT_TYPE;
		appendStringInfoString(&resp->body, "{\"__type\":");
		escape_json(&resp->body, info->json_type);
		appendStringInfoString(&resp->body, ",\"message\":");
		escape_json(&resp->body, message);
		appendStringInfoChar(&resp->body, '}');
		snprintf(qerr, sizeof(qerr), "%s;%s", info->query_code,
				 info->sender ? "Sender" : "Receiver");
		add_header(resp, "x-amzn-query-error", qerr);
	}
	else if (query_json)
	{
		/* SQS's Query words for a missing queue name the API version */
		if (err == SQS_ERR_QUEUE_DOES_NOT_EXIST &&
			strcmp(message, "The specified queue does not exist.") == 0)
			message = "The specified queue does not exist for this wsdl version.";
		resp->content_type = "application/json";
		appendStringInfo(&resp->body, "{\"Error\":{\"Type\":\"%s\",\"Code\":",
						 info->sender ? "Sender" : "Receiver");
		escape_json(&resp->body, info->query_code);
		appendStringInfoString(&resp->body, ",\"Message\":");
		escape_json(&resp->body, message);
		appendStringInfoString(&resp->body, "},\"RequestId\":");
		escape_json(&resp->body, request_id);
		appendStringInfoChar(&resp->body, '}');
	}
	else
	{
		resp->content_type = XML_CONTENT_TYPE;
		appendStringInfoString(&resp->body,
							   "<?xml version=\"1.0\"?><ErrorResponse xmlns=\"" SQS_XMLNS "\"><Error>");
		appendStringInfo(&resp->body, "<Type>%s</Type>",
						 info->sender ? "Sender" : "Receiver");
		xml_text_element(&resp->body, "Code", info->query_code, strlen(info->query_code));
		/* SQS's Query words for a missing queue name the API version */
		if (err == SQS_ERR_QUEUE_DOES_NOT_EXIST &&
			strcmp(message, "The specified queue does not exist.") == 0)
			message = "The specified queue does not exist for this wsdl version.";
		xml_text_element(&resp->body, "Message", message, strlen(message));
		appendStringInfoString(&resp->body, "<Detail/></Error>");
		xml_text_element(&resp->body, "RequestId", request_id, strlen(request_id));
		appendStringInfoString(&resp->body, "</ErrorResponse>");
	}
}

/* ----------------------------------------------------------------
 * Query parameters folded into the JSON input shape
 * ----------------------------------------------------------------
 */

typedef enum FoldKind
{
	FOLD_STRING,
	FOLD_OBJECT,				/* members by name, in order of arrival */
	FOLD_LIST,					/* elements by index */
	FOLD_MAP,					/* entries by index, each {Name|Key, Value} */
} FoldKind;

typedef struct FoldNode FoldNode;

typedef struct FoldMember
{
	const char *key;			/* member name (objects) */
	int			index;			/* element index (lists, maps) */
	FoldNode   *node;
} FoldMember;

struct FoldNode
{
	FoldKind	kind;
	const char *str;			/* FOLD_STRING */
	const char *qname;			/* its name as the request spelt it */
	int			n;
	int			cap;
	FoldMember *members;
};

/*
 * Flattened names and what they fold into: botocore's Query serializer
 * names a flattened list's elements by its member's locationName
 * (AttributeName.1) and sends an empty list under the member's own name
 * (AttributeNames=), so both spellings are here.  Names not listed fold
 * generically (a numeric segment makes a list, any other an object).
 */
static const struct
{
	const char *query;
	const char *json;
	FoldKind	kind;
}			fold_rules[] =
{
	{"Attribute", "Attributes", FOLD_MAP},
	{"Attributes", "Attributes", FOLD_MAP},
	{"AttributeName", "AttributeNames", FOLD_LIST},
	{"AttributeNames", "AttributeNames", FOLD_LIST},
	{"MessageAttributeName", "MessageAttributeNames", FOLD_LIST},
	{"MessageAttributeNames", "MessageAttributeNames", FOLD_LIST},
	{"MessageSystemAttributeName", "MessageSystemAttributeNames", FOLD_LIST},
	{"MessageSystemAttributeNames", "MessageSystemAttributeNames", FOLD_LIST},
	{"MessageAttribute", "MessageAttributes", FOLD_MAP},
	{"MessageAttributes", "MessageAttributes", FOLD_MAP},
	{"MessageSystemAttribute", "MessageSystemAttributes", FOLD_MAP},
	{"MessageSystemAttributes", "MessageSystemAttributes", FOLD_MAP},
	{"Tag", "Tags", FOLD_MAP},
	{"Tags", "Tags", FOLD_MAP},
	{"TagKey", "TagKeys", FOLD_LIST},
	{"TagKeys", "TagKeys", FOLD_LIST},
	{"SendMessageBatchRequestEntry", "Entries", FOLD_LIST},
	{"DeleteMessageBatchRequestEntry", "Entries", FOLD_LIST},
	{"ChangeMessageVisibilityBatchRequestEntry", "Entries", FOLD_LIST},
	{"Entries", "Entries", FOLD_LIST},
	{"StringListValue", "StringListValues", FOLD_LIST},
	{"StringListValues", "StringListValues", FOLD_LIST},
	{"BinaryListValue", "BinaryListValues", FOLD_LIST},
	{"BinaryListValues", "BinaryListValues", FOLD_LIST},
	{"AWSAccountId", "AWSAccountIds", FOLD_LIST},
	{"AWSAccountIds", "AWSAccountIds", FOLD_LIST},
	{"ActionName", "Actions", FOLD_LIST},
};

static FoldNode *
fold_node(FoldKind kind)
{
	FoldNode   *node = palloc0(sizeof(FoldNode));

	node->kind = kind;
	return node;
}

static const char *
kind_name(FoldKind kind)
{
	switch (kind)
	{
		case FOLD_STRING:
			return "a value";
		case FOLD_OBJECT:
			return "a structure";
		case FOLD_LIST:
			return "a list";
		case FOLD_MAP:
			return "a map";
	}
	return "?";
}

/*
 * The child of a container by member name (objects) or index (lists and
 * maps), made with kind when it is new.
 */
static FoldNode *
fold_child(FoldNode *parent, const char *key, int index, FoldKind kind,
		   const char *param)
{
	FoldNode   *child;

	for (int i = 0; i < parent->n; i++)
	{
		FoldMember *m = &parent->members[i];

		if (key ? strcmp(m->key, key) == 0 : m->index == index)
		{
			if (m->node->kind != kind)
				sqs_fail(SQS_ERR_INVALID_PARAMETER_VALUE,
						 "Parameter %s is used both as %s and as %s.",
						 param, kind_name(m->node->kind), kind_name(kind));
			return m->node;
		}
	}
	if (parent->n == parent->cap)
	{
		parent->cap = parent->cap ? parent->cap * 2 : 4;
		parent->members = parent->members
			? repalloc(parent->members, parent->cap * sizeof(FoldMember))
			: palloc(parent->cap * sizeof(FoldMember));
	}
	child = fold_node(kind);
	parent->members[parent->n].key = key;
	parent->members[parent->n].index = index;
	parent->members[parent->n].node = child;
	parent->n++;
	return child;
}

/* N of a list or map segment: 1 .. MAX_INDEX, digits only */
static int
fold_index(const char *seg, const char *param)
{
	int			v = 0;

	if (seg[0] == '\0' || seg[0] == '0' || strlen(seg) > 4)
		sqs_fail(SQS_ERR_INVALID_PARAMETER_VALUE,
				 "Parameter %s has an invalid index.", param);
	for (const char *p = seg; *p; p++)
	{
		if (*p < '0' || *p > '9')
			sqs_fail(SQS_ERR_INVALID_PARAMETER_VALUE,
					 "Parameter %s has an invalid index.", param);
		v = v * 10 + (*p - '0');
	}
	if (v < 1 || v > MAX_INDEX)
		sqs_fail(SQS_ERR_INVALID_PARAMETER_VALUE,
				 "Parameter %s has an invalid index (1 to %d).", param, MAX_INDEX);
	return v;
}

static bool
is_digits(const char *s)
{
	if (*s == '\0')
		return false;
	for (; *s; s++)
		if (*s < '0' || *s > '9')
			return false;
	return true;
}

static void
fold_set_string(FoldNode *node, const char *value, const char *param)
{
	if (node->str != NULL && strcmp(node->str, value) != 0)
		sqs_fail(SQS_ERR_INVALID_PARAMETER_VALUE,
				 "Parameter %s is given twice.", param);
	node->str = value;
}

/*
 * Put one parameter (its name split at the dots: segs[0 .. nseg-1]) into
 * the object obj.
 */
static void
fold_insert(FoldNode *obj, char **segs, int nseg, const char *value,
			const char *param)
{
	const char *key = segs[0];
	FoldKind	kind;
	bool		ruled = false;
	FoldNode   *child;

	if (key[0] == '\0')
		sqs_fail(SQS_ERR_INVALID_PARAMETER_VALUE,
				 "Parameter %s is not a valid parameter name.", param);
	for (int i = 0; i < (int) lengthof(fold_rules); i++)
	{
		if (strcmp(key, fold_rules[i].query) == 0)
		{
			key = fold_rules[i].json;
			kind = fold_rules[i].kind;
			ruled = true;
			break;
		}
	}
	if (!ruled)
	{
		if (nseg == 1)
			kind = FOLD_STRING;
		else if (is_digits(segs[1]))
			kind = FOLD_LIST;
		else
			kind = FOLD_OBJECT;
	}
	child = fold_child(obj, key, 0, kind, param);
	if (child->qname == NULL)
		child->qname = segs[0];

	if (kind == FOLD_STRING)
	{
		if (nseg != 1)
			sqs_fail(SQS_ERR_INVALID_PARAMETER_VALUE,
					 "Parameter %s is not a valid parameter name.", param);
		fold_set_string(child, value, param);
		return;
	}
	if (nseg == 1)
	{
		/* an empty list or map is sent as its name with no value */
		if (value[0] == '\0')
			return;

		/*
		 * A list's one entry without an index is its first: the Query
		 * API's older form, AttributeName=All (boto 2's GetQueueAttributes,
		 * fog-aws's ReceiveMessage), which SQS still takes.
		 */
		if (kind == FOLD_LIST)
		{
			fold_set_string(fold_child(child, NULL, 1, FOLD_STRING, param), value, param);
			return;
		}
		sqs_fail(SQS_ERR_INVALID_PARAMETER_VALUE,
				 "Parameter %s must be %s.", param, kind_name(kind));
	}
	if (kind == FOLD_OBJECT)
	{
		fold_insert(child, segs + 1, nseg - 1, value, param);
		return;
	}

	/*
	 * A map's one entry without an index (Attribute.Name=X,
	 * Attribute.Value=Y: boto 2's and fog-aws's SetQueueAttributes) is its
	 * first, as SQS takes it.
	 */
	if (kind == FOLD_MAP &&
		(strcmp(segs[1], "Name") == 0 || strcmp(segs[1], "Key") == 0 ||
		 strcmp(segs[1], "Value") == 0))
	{
		fold_insert(fold_child(child, NULL, 1, FOLD_OBJECT, param),
					segs + 1, nseg - 1, value, param);
		return;
	}

	/* a list or a map: segs[1] is the index */
	{
		int			index = fold_index(segs[1], param);

		if (kind == FOLD_LIST && nseg == 2)
		{
			fold_set_string(fold_child(child, NULL, index, FOLD_STRING, param),
							value, param);
			return;
		}
		if (nseg == 2)
			sqs_fail(SQS_ERR_INVALID_PARAMETER_VALUE,
					 "Parameter %s needs a .Name and a .Value.", param);
		fold_insert(fold_child(child, NULL, index, FOLD_OBJECT, param),
					segs + 2, nseg - 2, value, param);
	}
}

static int
member_index_cmp(const void *a, const void *b)
{
	int			ia = ((const FoldMember *) a)->index;
	int			ib = ((const FoldMember *) b)->index;

	return (ia > ib) - (ia < ib);
}

static void fold_render(StringInfo buf, FoldNode *node);

/* A map's entries as a JSON object: {Name|Key: Value, ...} */
static void
fold_render_map(StringInfo buf, FoldNode *node)
{
	const char *where = node->qname ? node->qname : "?";

	appendStringInfoChar(buf, '{');
	for (int i = 0; i < node->n; i++)
	{
		FoldNode   *entry = node->members[i].node;
		FoldNode   *k = NULL;
		FoldNode   *v = NULL;

		for (int j = 0; j < entry->n; j++)
		{
			const char *mk = entry->members[j].key;

			if ((strcmp(mk, "Name") == 0 || strcmp(mk, "Key") == 0) && k == NULL)
				k = entry->members[j].node;
			else if (strcmp(mk, "Value") == 0)
				v = entry->members[j].node;
			else
				sqs_fail(SQS_ERR_INVALID_PARAMETER_VALUE,
						 "Parameter %s.%d has an unknown part %s.",
						 where, node->members[i].index, mk);
		}
		if (k == NULL || k->kind != FOLD_STRING)
			sqs_fail(SQS_ERR_MISSING_PARAMETER,
					 "Parameter %s.%d needs a name.", where, node->members[i].index);
		if (v == NULL)
			sqs_fail(SQS_ERR_MISSING_PARAMETER,
					 "Parameter %s.%d needs a value.", where, node->members[i].index);
		if (i > 0)
			appendStringInfoChar(buf, ',');
		escape_json(buf, k->str);
		appendStringInfoChar(buf, ':');
		fold_render(buf, v);
	}
	appendStringInfoChar(buf, '}');
}

/* The folded tree as JSON text, every scalar a string */
static void
fold_render(StringInfo buf, FoldNode *node)
{
	switch (node->kind)
	{
		case FOLD_STRING:
			escape_json(buf, node->str ? node->str : "");
			break;
		case FOLD_OBJECT:
			appendStringInfoChar(buf, '{');
			for (int i = 0; i < node->n; i++)
			{
				if (i > 0)
					appendStringInfoChar(buf, ',');
				escape_json(buf, node->members[i].key);
				appendStringInfoChar(buf, ':');
				fold_render(buf, node->members[i].node);
			}
			appendStringInfoChar(buf, '}');
			break;
		case FOLD_LIST:
			if (node->n > 1)
				qsort(node->members, node->n, sizeof(FoldMember), member_index_cmp);
			appendStringInfoChar(buf, '[');
			for (int i = 0; i < node->n; i++)
			{
				if (i > 0)
					appendStringInfoChar(buf, ',');
				fold_render(buf, node->members[i].node);
			}
			appendStringInfoChar(buf, ']');
			break;
		case FOLD_MAP:
			if (node->n > 1)
				qsort(node->members, node->n, sizeof(FoldMember), member_index_cmp);
			fold_render_map(buf, node);
			break;
	}
}

/* Is this parameter the request's envelope rather than the action's input? */
static bool
envelope_param(const char *name)
{
	return strcmp(name, "Action") == 0 ||
		strcmp(name, "Version") == 0 ||
		pg_strncasecmp(name, "X-Amz-", 6) == 0;
}

/*
 * A Query request's parameters as the action's JSON input shape (see
 * fold_rules), as JSON text.
 */
static char *
fold_query(const SqsRequest *req, const char *action)
{
	FoldNode   *root = fold_node(FOLD_OBJECT);
	StringInfoData buf;

	if (req->nparams > MAX_PARAMS)
		sqs_fail(SQS_ERR_INVALID_PARAMETER_VALUE,
				 "The request has more than %d parameters.", MAX_PARAMS);
	for (int i = 0; i < req->nparams; i++)
	{
		const char *name = req->params[i].name;
		const char *value = req->params[i].value ? req->params[i].value : "";
		char	   *copy;
		char	   *segs[MAX_SEGMENTS];
		int			nseg = 0;
		char	   *p;

		if (envelope_param(name))
			continue;
		if (strlen(name) > MAX_PARAM_NAME ||
			!pg_verifymbstr(name, strlen(name), true))
			sqs_fail(SQS_ERR_INVALID_PARAMETER_VALUE,
					 "A parameter name is not valid.");
		if (!pg_verifymbstr(value, strlen(value), true))
			sqs_fail(SQS_ERR_INVALID_PARAMETER_VALUE,
					 "The value of parameter %s is not valid UTF-8.", name);
		copy = pstrdup(name);
		segs[nseg++] = copy;
		for (p = copy; *p; p++)
		{
			if (*p == '.')
			{
				if (nseg == MAX_SEGMENTS)
					sqs_fail(SQS_ERR_INVALID_PARAMETER_VALUE,
							 "Parameter %s is not a valid parameter name.", name);
				*p = '\0';
				segs[nseg++] = p + 1;
			}
		}
		fold_insert(root, segs, nseg, value, name);
	}

	/* CreateQueue's tags are "tags" in its input shape (Tag.N.Key in Query) */
	if (strcmp(action, "CreateQueue") == 0)
	{
		for (int i = 0; i < root->n; i++)
			if (strcmp(root->members[i].key, "Tags") == 0)
				root->members[i].key = "tags";
	}

	initStringInfo(&buf);
	fold_render(&buf, root);
	return buf.data;
}

/*
 * The JSON protocol's body as the input object: valid UTF-8, a JSON
 * object, nesting bounded (a deeper body is not an SQS input and would
 * only cost stack).
 */
static Jsonb *
parse_json_body(const SqsRequest *req)
{
	char	   *text;
	int			depth = 0;
	bool		in_string = false;
	Jsonb	   *jb;

	if (req->body_len == 0)
		return DatumGetJsonbP(DirectFunctionCall1(jsonb_in, CStringGetDatum("{}")));
	if (!pg_verifymbstr(req->body, (int) req->body_len, true))
		sqs_fail((SqsError) SQS_PERR_SERIALIZATION,
				 "The request body is not valid UTF-8.");
	for (size_t i = 0; i < req->body_len; i++)
	{
		char		c = req->body[i];

		if (in_string)
		{
			if (c == '\\')
				i++;
			else if (c == '"')
				in_string = false;
		}
		else if (c == '"')
			in_string = true;
		else if ((c == '{' || c == '[') && ++depth > MAX_JSON_DEPTH)
			sqs_fail((SqsError) SQS_PERR_SERIALIZATION,
					 "The request body nests deeper than %d levels.", MAX_JSON_DEPTH);
		else if (c == '}' || c == ']')
			depth--;
	}
	text = pnstrdup(req->body, req->body_len);
	parsing_body = true;
	jb = DatumGetJsonbP(DirectFunctionCall1(jsonb_in, CStringGetDatum(text)));
	parsing_body = false;
	if (!JB_ROOT_IS_OBJECT(jb) || JB_ROOT_IS_SCALAR(jb))
		sqs_fail((SqsError) SQS_PERR_SERIALIZATION,
				 "The request body is not a JSON object.");
	return jb;
}

/* ----------------------------------------------------------------
 * The output shape as Query's XML
 * ----------------------------------------------------------------
 */

/* What a list's elements are called in XML (flattened lists) */
static const char *
list_item_name(const char *key, const char *action, char *buf, size_t len)
{
	if (strcmp(key, "Messages") == 0)
		return "Message";
	if (strcmp(key, "QueueUrls") == 0 || strcmp(key, "queueUrls") == 0)
		return "QueueUrl";
	if (strcmp(key, "Successful") == 0)
	{
		snprintf(buf, len, "%sResultEntry", action);
		return buf;
	}
	if (strcmp(key, "Failed") == 0)
		return "BatchResultErrorEntry";
	if (strcmp(key, "Results") == 0)
		return "ListMessageMoveTasksResultEntry";
	if (strcmp(key, "StringListValues") == 0)
		return "StringListValue";
	if (strcmp(key, "BinaryListValues") == 0)
		return "BinaryListValue";
	return key;
}

/* Maps in XML: repeated <entry><key-name/><value-name/></entry> */
static const struct
{
	const char *json;
	const char *entry;
	const char *key;
}			xml_maps[] =
{
	{"Attributes", "Attribute", "Name"},
	{"MessageAttributes", "MessageAttribute", "Name"},
	{"MessageSystemAttributes", "MessageSystemAttribute", "Name"},
	{"Tags", "Tag", "Key"},
	{"tags", "Tag", "Key"},
};

static void xml_members(StringInfo buf, JsonbContainer *obj, const char *action);

/* A scalar's text (strings unquoted, numbers as written, booleans) */
static void
xml_scalar(StringInfo buf, JsonbValue *v)
{
	switch (v->type)
	{
		case jbvString:
			xml_escape(buf, v->val.string.val, v->val.string.len);
			break;
		case jbvNumeric:
			appendStringInfoString(buf,
								   DatumGetCString(DirectFunctionCall1(numeric_out,
																	   NumericGetDatum(v->val.numeric))));
			break;
		case jbvBool:
			appendStringInfoString(buf, v->val.boolean ? "true" : "false");
			break;
		default:
			break;
	}
}

/* One value as <name>...</name>: scalars as text, objects as members */
static void
xml_value(StringInfo buf, const char *name, JsonbValue *v, const char *action)
{
	if (v->type == jbvNull)
		return;
	appendStringInfo(buf, "<%s>", name);
	if (v->type == jbvBinary)
	{
		if (JsonContainerIsObject(v->val.binary.data))
			xml_members(buf, v->val.binary.data, action);
	}
	else
		xml_scalar(buf, v);
	appendStringInfo(buf, "</%s>", name);
}

/* One member of an object: lists flattened, maps as entries, the rest nested */
static void
xml_member(StringInfo buf, const char *key, JsonbValue *v, const char *action)
{
	JsonbIterator *it;
	JsonbValue	e;
	JsonbIteratorToken tok;

	if (v->type != jbvBinary)
	{
		xml_value(buf, key, v, action);
		return;
	}
	if (JsonContainerIsArray(v->val.binary.data))
	{
		char		namebuf[128];
		const char *item = list_item_name(key, action, namebuf, sizeof(namebuf));

		it = JsonbIteratorInit(v->val.binary.data);
		while ((tok = JsonbIteratorNext(&it, &e, true)) != WJB_DONE)
			if (tok == WJB_ELEM)
				xml_value(buf, item, &e, action);
		return;
	}
	for (int m = 0; m < (int) lengthof(xml_maps); m++)
	{
		char	   *name = NULL;

		if (strcmp(key, xml_maps[m].json) != 0)
			continue;
		it = JsonbIteratorInit(v->val.binary.data);
		while ((tok = JsonbIteratorNext(&it, &e, true)) != WJB_DONE)
		{
			if (tok == WJB_KEY)
				name = pnstrdup(e.val.string.val, e.val.string.len);
			else if (tok == WJB_VALUE)
			{
				appendStringInfo(buf, "<%s>", xml_maps[m].entry);
				xml_text_element(buf, xml_maps[m].key, name, strlen(name));
				xml_value(buf, "Value", &e, action);
				appendStringInfo(buf, "</%s>", xml_maps[m].entry);
			}
		}
		return;
	}
	xml_value(buf, key, v, action);
}

static void
xml_members(StringInfo buf, JsonbContainer *obj, const char *action)
{
	JsonbIterator *it = JsonbIteratorInit(obj);
	JsonbValue	v;
	JsonbIteratorToken tok;
	char	   *key = NULL;

	while ((tok = JsonbIteratorNext(&it, &v, true)) != WJB_DONE)
	{
		if (tok == WJB_KEY)
			key = pnstrdup(v.val.string.val, v.val.string.len);
		else if (tok == WJB_VALUE)
			xml_member(buf, key, &v, action);
	}
}

/*
 * The Query answer of an action whose output shape (JSON text) is out:
 * <XResponse><XResult>...</XResult><ResponseMetadata/></XResponse>, the
 * result element left out for actions whose output is empty.
 */
static void
xml_render(StringInfo buf, const char *action, const char *out,
		   const char *request_id)
{
	appendStringInfo(buf, "<?xml version=\"1.0\"?><%sResponse xmlns=\"%s\">",
					 action, strcmp(action, "GetCallerIdentity") == 0 ? STS_XMLNS : SQS_XMLNS);
	if (!name_in(action, no_result_actions, lengthof(no_result_actions)))
	{
		Jsonb	   *jb = DatumGetJsonbP(DirectFunctionCall1(jsonb_in,
															CStringGetDatum(out[0] ? out : "{}")));

		if (!JB_ROOT_IS_OBJECT(jb) || JB_ROOT_IS_SCALAR(jb))
			elog(ERROR, "SQS action %s answered with no JSON object", action);
		/* an empty result is one empty element, as SQS writes it */
		if (JB_ROOT_COUNT(jb) == 0)
			appendStringInfo(buf, "<%sResult/>", action);
		else
		{
			appendStringInfo(buf, "<%sResult>", action);
			xml_members(buf, &jb->root, action);
			appendStringInfo(buf, "</%sResult>", action);
		}
	}
	appendStringInfoString(buf, "<ResponseMetadata>");
	xml_text_element(buf, "RequestId", request_id, strlen(request_id));
	appendStringInfo(buf, "</ResponseMetadata></%sResponse>", action);
}

/* ----------------------------------------------------------------
 * One request
 * ----------------------------------------------------------------
 */

/*
 * The queue a Query request addresses as its path, SQS's documented form
 * (POST /<account>/<queue>, no QueueUrl: kombu, Amazon::SQS::Simple, older
 * SDKs): the path's last segment when there are at least two, else NULL.
 * Bounded: a queue name is at most 80 characters of [A-Za-z0-9_-.], so
 * anything longer or otherwise spelt is no queue name and left to the
 * action's own QueueUrl rules.
 */
static const char *
path_queue_name(const char *raw_path)
{
	const char *end;
	const char *last;
	int			segments = 0;

	if (raw_path == NULL || raw_path[0] != '/')
		return NULL;
	end = raw_path + strcspn(raw_path, "?#");
	while (end > raw_path + 1 && end[-1] == '/')
		end--;
	for (const char *p = raw_path; p < end; p++)
		if (*p == '/')
			segments++;
	if (segments < 2)
		return NULL;
	last = end;
	while (last > raw_path && last[-1] != '/')
		last--;
	if (end - last < 1 || end - last > 80)
		return NULL;
	for (const char *p = last; p < end; p++)
		if (!(isalnum((unsigned char) *p) || *p == '_' || *p == '-' || *p == '.'))
			return NULL;
	return pnstrdup(last, end - last);
}

/* An action name: letters only, bounded */
static bool
valid_action_name(const char *s)
{
	size_t		len = strlen(s);

	if (len == 0 || len > MAX_ACTION_NAME)
		return false;
	for (; *s; s++)
		if (!((*s >= 'A' && *s <= 'Z') || (*s >= 'a' && *s <= 'z')))
			return false;
	return true;
}

/*
 * The bounds of one request's transaction (DESIGN.md "SQS API": no request
 * of one role delays another's beyond a bound).  The workers serve every
 * connection from one loop, so a statement that waits holds them all:
 * a lock wait ends after queue.sqs_lock_timeout (the request is then tried
 * again later by exchange.c, or answered ServiceUnavailable), and the whole
 * transaction after queue.sqs_statement_timeout (ServiceUnavailable).
 * Both are set here, at the transaction's own level, above the worker's
 * pinned settings (elevated.c) and beyond the reach of any role's or the
 * database's: the request runs none of their settings.
 */
static char request_lock_timeout[32] = "10";
static int	request_statement_timeout = 5000;

/*
 * queue.sqs_lock_timeout and queue.sqs_statement_timeout, read by worker.c
 * when the worker starts and at each reload, not per request.
 */
void
sqs_read_request_bounds(void)
{
	const char *v;

	/* GetConfigOption's answer lives in a buffer the next call reuses */
	v = GetConfigOption("queue.sqs_lock_timeout", true, false);
	strlcpy(request_lock_timeout, v ? v : "10", sizeof(request_lock_timeout));
	v = GetConfigOption("queue.sqs_statement_timeout", true, false);
	request_statement_timeout = v ? atoi(v) : 5000;
}

static void
request_bounds(void)
{
	(void) set_config_option("lock_timeout", request_lock_timeout,
							 PGC_SUSET, PGC_S_SESSION, GUC_ACTION_LOCAL,
							 true, 0, false);
	if (request_statement_timeout > 0)
		enable_timeout_after(STATEMENT_TIMEOUT, request_statement_timeout);
}

/*
 * After the transaction: the timer goes, and a cancel it raised too late
 * to be seen inside the transaction must not be seen by the worker's loop.
 */
static void
request_bounds_end(void)
{
	disable_timeout(STATEMENT_TIMEOUT, false);
	QueryCancelPending = false;
}

/*
 * An SQS error answered without a transaction (exchange.c: the worker's
 * own, before or around sqs_handle): in AWS JSON 1.0 when json, else
 * Query's XML, from wire.c's table as every other error.
 */
void
sqs_refuse(SqsResponse *resp, bool json, int err, const char *message,
		   const char *request_id)
{
	resp->nheaders = 0;
	query_json = false;			/* (refusals before sqs_handle: XML) */
	add_header(resp, "x-amzn-RequestId", request_id);
	error_answer(resp, json ? PROTO_JSON : PROTO_QUERY, err, message, request_id);
}

/*
 * Serve one request completely: never throws, never leaves a transaction
 * open; resp's body and headers are allocated in the caller's memory
 * context.
 */
void
sqs_handle(const SqsRequest *req, SqsResponse *resp)
{
	MemoryContext cxt = CurrentMemoryContext;
	char		request_id[37];
	const char *target = sqs_header(req, "x-amz-target");
	const char *ctype = sqs_header(req, "content-type");
	SqsProtocol proto;
	const char *action = NULL;
	StringInfo	out;
	StringInfo	answer;
	volatile bool ok = false;
	ErrorData  *edata = NULL;

	make_request_id(request_id);
	resp->status = 200;
	resp->content_type = NULL;
	initStringInfo(&resp->body);
	resp->nheaders = 0;
	resp->park = false;
	resp->park_queue_id = 0;
	resp->park_generation = 0;
	resp->park_until = 0;
	resp->lock_retry = false;
	resp->forward_url = NULL;
	resp->forward_receive = false;
	resp->role = InvalidOid;
	add_header(resp, "x-amzn-RequestId", request_id);

	/*
	 * Which protocol, which action: nothing here can throw.  An X-Amz-Target
	 * header means AWS JSON 1.0, except on a form-encoded body, or on a
	 * request with no content type whose query string names an Action: those
	 * are Query (Amazon::SQS::Simple sends "AmazonSQSv20121105.<Action>"
	 * with a Query body).  A JSON request with another content type is
	 * still answered in JSON, as its client expects.
	 */
	if (target != NULL &&
		(ctype != NULL ? pg_strncasecmp(ctype, "application/x-www-form-urlencoded", 33) != 0
		 : request_param(req, "Action") == NULL))
	{
		proto = PROTO_JSON;
		if (strcmp(target, STS_TARGET "GetCallerIdentity") == 0)
			action = "GetCallerIdentity";
		else if (strncmp(target, "AmazonSQS.", 10) != 0 || !valid_action_name(target + 10))
		{
			error_answer(resp, proto, SQS_ERR_INVALID_ACTION,
						 "The X-Amz-Target header names no operation of AmazonSQS.",
						 request_id);
			return;
		}
		else
			action = target + 10;
	}
	else
	{
		const char *version = request_param(req, "Version");

		action = request_param(req, "Action");
		proto = (action == NULL && ctype != NULL &&
				 pg_strncasecmp(ctype, "application/x-amz-json", 22) == 0)
			? PROTO_JSON : PROTO_QUERY;
		if (action == NULL && proto == PROTO_QUERY && !request_has_params(req) &&
			path_queue_name(req->raw_path) != NULL)
		{
			/*
			 * A queue's URL asked for with nothing at all (a browser, curl):
			 * SQS answers 404 with an UnknownOperationException document,
			 * whatever the Accept header asks for.
			 */
			resp->status = 404;
			resp->park = false;
			resp->content_type = XML_CONTENT_TYPE;
			resetStringInfo(&resp->body);
			appendStringInfoString(&resp->body,
								   "<?xml version=\"1.0\"?><UnknownOperationException/>");
			return;
		}
		query_json = proto == PROTO_QUERY && accepts_json(req);
		if (action == NULL)
		{
			error_answer(resp, proto, SQS_PERR_MISSING_ACTION,
						 proto == PROTO_JSON
						 ? "The request has no X-Amz-Target header."
						 : "The request must contain the parameter Action.",
						 request_id);
			return;
		}
		if (!valid_action_name(action))
		{
			error_answer(resp, proto, SQS_ERR_INVALID_ACTION,
						 "The action is not valid for this endpoint.", request_id);
			return;
		}
		if (version != NULL && strcmp(version, SQS_API_VERSION) != 0 &&
			!(strcmp(action, "GetCallerIdentity") == 0 &&
			  strcmp(version, STS_API_VERSION) == 0))
		{
			error_answer(resp, proto, SQS_ERR_INVALID_PARAMETER_VALUE,
						 "Version " SQS_API_VERSION " is the only version served.",
						 request_id);
			return;
		}
	}

	/* the action's output and the answer outlive the transaction */
	out = makeStringInfo();
	answer = makeStringInfo();
	sqs_fail_forget();
	parsing_body = false;

	PG_TRY();
	{
		SqsCall		call;
		Oid			save_uid;
		int			save_sec;
		char	   *input_text;

		SetCurrentStatementStartTimestamp();
		StartTransactionCommand();
		request_bounds();
		PushActiveSnapshot(GetTransactionSnapshot());
		pgstat_report_activity(STATE_RUNNING, action);
		if (SPI_connect() != SPI_OK_CONNECT)
			elog(ERROR, "SPI_connect failed");

		memset(&call, 0, sizeof(call));
		sqs_verify(req, req->started_at ? req->started_at : GetCurrentTimestamp(),
				   &call.auth);
		if (!OidIsValid(call.auth.role))
			elog(ERROR, "SQS request verified with no role");
		resp->role = call.auth.role;

		call.req = req;
		call.action = action;
		call.query_protocol = (proto == PROTO_QUERY);
		if (proto == PROTO_QUERY)
			call.path_queue = path_queue_name(req->raw_path);

		/*
		 * A queue's URL serves the actions on a queue (and GetQueueUrl, as
		 * SQS's does), not those on the account: SQS answers them there
		 * with InvalidAction.
		 */
		if (call.path_queue != NULL &&
			(strcmp(action, "CreateQueue") == 0 || strcmp(action, "ListQueues") == 0))
			sqs_fail(SQS_ERR_INVALID_ACTION,
					 "The action %s is not valid for this endpoint.", action);
		if (proto == PROTO_JSON)
			call.input = parse_json_body(req);
		else
		{
			input_text = fold_query(req, action);
			call.input = DatumGetJsonbP(DirectFunctionCall1(jsonb_in,
															CStringGetDatum(input_text)));
		}

		/*
		 * On a Citus cluster, a queue of another node: the request goes
		 * there as received (exchange.c), verified here first and again
		 * there; one that was forwarded already is served here.
		 */
		if (sqs_header(req, SQS_FORWARDED_HEADER) == NULL)
		{
			char	   *qname = sqs_addressed_queue(&call);

			/*
			 * storage/citus.c decides, by the wrong-node guard's own rule:
			 * only tables a superuser made count, read in a restricted
			 * operation; a lookup that fails serves the request here.
			 */
			if (qname != NULL)
			{
				char	   *url = queue_citus_endpoint_of(qname);

				if (url != NULL)
				{
					resp->forward_url = MemoryContextStrdup(cxt, url);
					resp->forward_receive = strcmp(action, "ReceiveMessage") == 0;
				}
			}
		}

		GetUserIdAndSecContext(&save_uid, &save_sec);
		SetUserIdAndSecContext(call.auth.role,
							   save_sec | SECURITY_LOCAL_USERID_CHANGE |
							   SECURITY_RESTRICTED_OPERATION);

		/*
		 * A signature scoped to STS is good for GetCallerIdentity only, and
		 * GetCallerIdentity only with one (AWS tooling learns the account
		 * this way before it builds queue ARNs).
		 */
		if ((strcmp(call.auth.service, "sts") == 0) !=
			(strcmp(action, "GetCallerIdentity") == 0))
			sqs_fail(SQS_ERR_INVALID_ACTION,
					 "The action %s is not valid for this endpoint.", action);

		call.host = sqs_header(req, "host");
		if (call.host == NULL)
			call.host = "localhost";
		call.account_id = GetConfigOption("queue.sqs_account_id", true, false);
		if (call.account_id == NULL)
			call.account_id = "000000000000";
		/* a string setting's value is the setting's own: no copy needed */
		call.public_url = GetConfigOption("queue.sqs_public_url", true, false);

		if (resp->forward_url != NULL)
			;					/* served by the queue's node */
		else if (!sqs_run_action(&call, out, resp))
		{
			if (name_in(action, sqs_actions, lengthof(sqs_actions)))
				sqs_fail(SQS_ERR_UNSUPPORTED_OPERATION,
						 "The action %s is not supported by this endpoint.", action);
			sqs_fail(SQS_ERR_INVALID_ACTION,
					 "The action %s is not valid for this endpoint.", action);
		}
		SetUserIdAndSecContext(save_uid, save_sec);

		/* answer grows in cxt, where it was made */
		if (resp->park)
			;
		else if (proto == PROTO_JSON)
			appendStringInfoString(answer, out->len > 0 ? out->data : "{}");
		else if (query_json)
		{
			appendStringInfo(answer, "{\"%sResponse\":{", action);
			if (!name_in(action, no_result_actions, lengthof(no_result_actions)))
				appendStringInfo(answer, "\"%sResult\":%s,", action,
								 out->len > 0 ? out->data : "{}");
			appendStringInfoString(answer, "\"ResponseMetadata\":{\"RequestId\":");
			escape_json(answer, request_id);
			appendStringInfoString(answer, "}}}");
		}
		else
			xml_render(answer, action, out->data, request_id);

		SPI_finish();
		PopActiveSnapshot();
		CommitTransactionCommand();
		ok = true;
	}
	PG_CATCH();
	{
		MemoryContextSwitchTo(cxt);
		edata = CopyErrorData();
		FlushErrorState();
		AbortCurrentTransaction();
	}
	PG_END_TRY();
	request_bounds_end();

	MemoryContextSwitchTo(cxt);
	pgstat_report_activity(STATE_IDLE, NULL);

	if (ok && resp->forward_url != NULL)
		;						/* exchange.c forwards it */
	else if (ok)
	{
		resp->status = 200;
		resp->content_type = (proto == PROTO_JSON) ? JSON_CONTENT_TYPE :
			query_json ? "application/json" : XML_CONTENT_TYPE;
		resetStringInfo(&resp->body);
		if (!resp->park)
			appendBinaryStringInfo(&resp->body, answer->data, answer->len);
	}
	else
	{
		int			err;
		const char *message;

		if (parsing_body && edata->sqlerrcode == ERRCODE_UNTRANSLATABLE_CHARACTER &&
			action != NULL && strncmp(action, "SendMessage", 11) == 0)
		{
			/* a \u0000 in a message: SQS's answer to a character it refuses */
			err = SQS_ERR_INVALID_MESSAGE_CONTENTS;
			message = SQS_NUL_IN_MESSAGE;
		}
		else if (parsing_body)
		{
			err = SQS_PERR_SERIALIZATION;
			message = edata->detail
				? psprintf("The request body is not valid JSON: %s", edata->detail)
				: "The request body is not valid JSON.";
		}
		else if ((err = sqs_fail_raised(edata)) != SQS_ERR_NONE)
			message = edata->message;
		else if (edata->sqlerrcode == ERRCODE_LOCK_NOT_AVAILABLE)
		{
			/* a lock held elsewhere: exchange.c may try again later */
			err = SQS_PERR_UNAVAILABLE;
			message = "The queue is busy; try again later.";
			resp->lock_retry = true;
		}
		else
			err = sql_error(edata, &message);
		error_answer(resp, proto, err, message, request_id);
		FreeErrorData(edata);
	}
	sqs_fail_forget();
	parsing_body = false;
	query_json = false;
	pfree(out->data);
	pfree(out);
	pfree(answer->data);
	pfree(answer);
}
