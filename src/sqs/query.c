/*-------------------------------------------------------------------------
 *
 * query.c
 *	  The Query protocol's own parts (REFERENCE.md 1.7): a Query request's
 *	  parameters folded into the action's JSON input shape, the output
 *	  shape rendered as Query's XML answer, and the queue a request's path
 *	  names.
 *
 * Query (Action=<Action>, form or query string) carries the action's input
 * shape flattened into parameters (Attribute.1.Name, ...); sqs_fold_query
 * folds them back into the JSON input shape (fold_rules), so the actions
 * (actions.c and its rooms, actions.h) see one shape for both protocols,
 * and sqs_xml_render turns the output shape into the XML answer whose
 * element names botocore's Query model (service-2.json) expects.  A Query
 * request posted to a queue URL (/<account>/<queue>) with no QueueUrl
 * addresses the queue of its path (sqs_path_queue_name).
 *
 * May call: wire.c (sqs_fail), PostgreSQL.  Called by: protocol.c only
 * (query.h), which chooses the protocol and renders the errors.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "mb/pg_wchar.h"
#include "utils/builtins.h"
#include "utils/json.h"
#include "utils/jsonb.h"

#include "common/compat.h"
#include "sqs.h"
#include "query.h"

#define STS_XMLNS "https://sts.amazonaws.com/doc/2011-06-15/"

/* Bounds on a Query request's parameters (every loop over them is bounded) */
#define MAX_PARAMS			1000	/* Query parameters */
#define MAX_INDEX			1000	/* N in Attribute.N.Name */
#define MAX_SEGMENTS		8		/* dots in a parameter name, plus one */
#define MAX_PARAM_NAME		256

/* Actions whose output shape is empty: their XML has no <XResult> */
static const char *const no_result_actions[] = {
	"AddPermission", "ChangeMessageVisibility", "DeleteMessage",
	"DeleteQueue", "PurgeQueue", "RemovePermission", "SetQueueAttributes",
	"TagQueue", "UntagQueue",
};

/*
 * Whether an action's Query answer has its <XResult> (in JSON, its
 * "<Action>Result"): false for the actions whose output shape is empty.
 */
bool
sqs_query_has_result(const char *action)
{
	for (int i = 0; i < (int) lengthof(no_result_actions); i++)
		if (strcmp(action, no_result_actions[i]) == 0)
			return false;
	return true;
}

/* ----------------------------------------------------------------
 * XML text
 * ----------------------------------------------------------------
 */

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

void
sqs_xml_text_element(StringInfo buf, const char *name, const char *s, size_t len)
{
	appendStringInfo(buf, "<%s>", name);
	xml_escape(buf, s, len);
	appendStringInfo(buf, "</%s>", name);
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
char *
sqs_fold_query(const SqsRequest *req, const char *action)
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
				sqs_xml_text_element(buf, xml_maps[m].key, name, strlen(name));
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
void
sqs_xml_render(StringInfo buf, const char *action, const char *out,
			   const char *request_id)
{
	appendStringInfo(buf, "<?xml version=\"1.0\"?><%sResponse xmlns=\"%s\">",
					 action, strcmp(action, "GetCallerIdentity") == 0 ? STS_XMLNS : SQS_XMLNS);
	if (sqs_query_has_result(action))
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
	sqs_xml_text_element(buf, "RequestId", request_id, strlen(request_id));
	appendStringInfo(buf, "</ResponseMetadata></%sResponse>", action);
}

/* ----------------------------------------------------------------
 * The queue a request's path names
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
const char *
sqs_path_queue_name(const char *raw_path)
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
