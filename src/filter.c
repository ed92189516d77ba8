/*-------------------------------------------------------------------------
 *
 * filter.c
 *	  Which subscriptions of a topic take a published message (DESIGN.md
 *	  "Topics"): CMQ filter tags, routing keys against binding keys, and
 *	  SNS filter policies on the message's attributes.
 *
 * Every filter a subscription sets must match.
 *
 *	- filter_tags (CMQ): at most 5 tags of 1 to 16 characters.  A message
 *	  matches when its tags share at least one; an untagged message matches
 *	  no subscription that sets filter tags.
 *	- binding_keys (CMQ, RabbitMQ topic exchanges): at most 5 keys of 1 to
 *	  64 characters, words split on '.'; '*' matches exactly one word, '#'
 *	  zero or more.  A message without a routing key matches no binding.
 *	- filter_policy (SNS): a JSON object of attribute name to a list of
 *	  conditions (names AND, list entries OR), or to a nested object for an
 *	  attribute that is an object; "$or": [policy, ...] at any level.
 *	  Conditions: a string, number, boolean or null matching equal values
 *	  of the same JSON type (a number never equals a string: "5" is not 5);
 *	  {"prefix": s}, {"suffix": s}, {"equals-ignore-case": s} on strings;
 *	  {"anything-but": value | [values] | {"prefix": s} | {"suffix": s}};
 *	  {"numeric": [op, n]} or [lower op, n, upper op, n] on numbers only;
 *	  {"exists": true | false}.  A missing attribute matches only
 *	  {"exists": false} (not "anything-but": SNS's rule).  An array
 *	  attribute matches a condition when any of its elements does.  SNS's
 *	  bounds: at most 5 attribute names on any path through the "$or"s, at
 *	  most 150 combinations of values, numbers within +-10^9.
 *
 * Policies are checked when a subscription is made (22023 naming the bad
 * part), so matching at publish time never fails.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "lib/stringinfo.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/jsonb.h"
#include "utils/numeric.h"

#include "queue.h"

PG_FUNCTION_INFO_V1(queue_check_filters_sql);

#define FILTER_TAGS_MAX		5
#define FILTER_TAG_LEN		16
#define BINDING_KEYS_MAX	5
#define ROUTING_KEY_LEN		64
#define POLICY_KEYS_MAX		5
#define POLICY_COMBOS_MAX	150

/* ----------------------------------------------------------------
 * Tags and keys
 * ----------------------------------------------------------------
 */

/*
 * The entries of a text[] argument of at most max entries, each 1 to len
 * characters; 22023 otherwise, 22004 for a null entry.
 */
int
queue_text_list(ArrayType *arr, const char *argname, int max, int len,
				Datum **vals)
{
	bool	   *nulls;
	int			n;

	if (ARR_NDIM(arr) > 1)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("argument \"%s\" must be a one-dimensional array", argname)));
	deconstruct_array(arr, TEXTOID, -1, false, TYPALIGN_INT, vals, &nulls, &n);
	if (n > max)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("argument \"%s\" may hold at most %d entries", argname, max)));
	for (int i = 0; i < n; i++)
	{
		int			chars;

		if (nulls[i])
			ereport(ERROR,
					(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
					 errmsg("argument \"%s\" must not contain nulls", argname)));
		chars = DatumGetInt32(DirectFunctionCall1(textlen, (*vals)[i]));
		if (chars < 1 || chars > len)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("argument \"%s\": \"%s\" must have 1 to %d characters",
							argname, TextDatumGetCString((*vals)[i]), len)));
	}
	return n;
}

/* Message tags and filter tags: CMQ's bounds. */
int
queue_tag_list(ArrayType *arr, const char *argname, Datum **vals)
{
	return queue_text_list(arr, argname, FILTER_TAGS_MAX, FILTER_TAG_LEN, vals);
}

/* A routing key or binding key: 1 to 64 characters, no empty word. */
void
queue_check_routing_key(text *key, const char *argname)
{
	char	   *s = text_to_cstring(key);
	int			chars = DatumGetInt32(DirectFunctionCall1(textlen, PointerGetDatum(key)));
	int			len = strlen(s);

	if (chars < 1 || chars > ROUTING_KEY_LEN)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("argument \"%s\" must have 1 to %d characters",
						argname, ROUTING_KEY_LEN)));
	if (s[0] == '.' || s[len - 1] == '.' || strstr(s, "..") != NULL)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("argument \"%s\": \"%s\" has an empty word", argname, s),
				 errdetail("Words are separated by single dots.")));
}

/* Whether a message's tags share one with a subscription's filter tags. */
bool
queue_tags_match(const Datum *filter, int nfilter, const Datum *tags, int ntags)
{
	for (int i = 0; i < nfilter; i++)
		for (int j = 0; j < ntags; j++)
			if (queue_text_cmp(&filter[i], &tags[j]) == 0)
				return true;
	return false;
}

/* Length of the word at s (up to a '.' or the end). */
static int
word_len(const char *s)
{
	const char *dot = strchr(s, '.');

	return dot ? dot - s : strlen(s);
}

/*
 * Whether binding (words, '*' and '#') matches key (words), both from their
 * current word on; NULL is past the last word.
 */
static bool
binding_match_from(const char *binding, const char *key)
{
	int			blen;

	if (binding == NULL)
		return key == NULL;
	blen = word_len(binding);
	if (blen == 1 && binding[0] == '#')
	{
		const char *rest = binding[1] ? binding + 2 : NULL;

		/* '#' takes zero words, or one word and is tried again. */
		if (binding_match_from(rest, key))
			return true;
		if (key == NULL)
			return false;
		return binding_match_from(binding, key[word_len(key)] ? key + word_len(key) + 1 : NULL);
	}
	if (key == NULL)
		return false;
	if (!(blen == 1 && binding[0] == '*') &&
		(blen != word_len(key) || strncmp(binding, key, blen) != 0))
		return false;
	return binding_match_from(binding[blen] ? binding + blen + 1 : NULL,
							  key[word_len(key)] ? key + word_len(key) + 1 : NULL);
}

bool
queue_binding_match(const char *binding, const char *routing_key)
{
	return binding_match_from(binding, routing_key);
}

/* ----------------------------------------------------------------
 * Filter policies: checks
 * ----------------------------------------------------------------
 */

pg_noreturn static void policy_error(const char *path, const char *what);

pg_noreturn static void
policy_error(const char *path, const char *what)
{
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("argument \"filter_policy\": %s%s%s", path[0] ? "at " : "",
					path, what)));
}

static bool
is_string(JsonbValue *v)
{
	return v->type == jbvString;
}

static double
number_of(JsonbValue *v)
{
	return DatumGetFloat8(DirectFunctionCall1(numeric_float8,
											  NumericGetDatum(v->val.numeric)));
}

static void
check_number(JsonbValue *v, const char *path)
{
	double		d = number_of(v);

	if (d < -1e9 || d > 1e9)
		policy_error(path, ": numbers must lie between -1000000000 and 1000000000");
}

/* The single key and value of a condition object. */
static void
condition_kv(JsonbContainer *obj, char **key, JsonbValue *val, const char *path)
{
	JsonbIterator *it = JsonbIteratorInit(obj);
	JsonbValue	v;
	JsonbIteratorToken tok;
	int			n = 0;

	while ((tok = JsonbIteratorNext(&it, &v, true)) != WJB_DONE)
	{
		if (tok == WJB_KEY)
		{
			*key = pnstrdup(v.val.string.val, v.val.string.len);
			n++;
		}
		else if (tok == WJB_VALUE)
			*val = v;
	}
	if (n != 1)
		policy_error(path, ": a condition object must have exactly one operator");
}

/* The elements of an array container. */
static int
array_elems(JsonbContainer *arr, JsonbValue **elems)
{
	JsonbIterator *it = JsonbIteratorInit(arr);
	JsonbValue	v;
	JsonbIteratorToken tok;
	int			n = 0;
	int			cap = 8;

	*elems = palloc(cap * sizeof(JsonbValue));
	while ((tok = JsonbIteratorNext(&it, &v, true)) != WJB_DONE)
		if (tok == WJB_ELEM)
		{
			if (n == cap)
			{
				cap *= 2;
				*elems = repalloc(*elems, cap * sizeof(JsonbValue));
			}
			(*elems)[n++] = v;
		}
	return n;
}

static bool
is_array(JsonbValue *v)
{
	return v->type == jbvBinary && JsonContainerIsArray(v->val.binary.data);
}

static bool
is_object(JsonbValue *v)
{
	return v->type == jbvBinary && JsonContainerIsObject(v->val.binary.data);
}

static bool
numeric_op_ok(JsonbValue *op, const char *const *allowed)
{
	if (!is_string(op))
		return false;
	for (; *allowed; allowed++)
		if (strlen(*allowed) == (size_t) op->val.string.len &&
			strncmp(*allowed, op->val.string.val, op->val.string.len) == 0)
			return true;
	return false;
}

static void
check_numeric(JsonbValue *val, const char *path)
{
	static const char *const any_op[] = {"=", "<", "<=", ">", ">=", NULL};
	static const char *const lower_op[] = {">", ">=", NULL};
	static const char *const upper_op[] = {"<", "<=", NULL};
	JsonbValue *e;
	int			n;

	if (!is_array(val))
		policy_error(path, ": \"numeric\" takes [operator, number] or [lower operator, number, upper operator, number]");
	n = array_elems(val->val.binary.data, &e);
	if (n == 2 && numeric_op_ok(&e[0], any_op) && e[1].type == jbvNumeric)
		check_number(&e[1], path);
	else if (n == 4 && numeric_op_ok(&e[0], lower_op) && e[1].type == jbvNumeric &&
			 numeric_op_ok(&e[2], upper_op) && e[3].type == jbvNumeric)
	{
		check_number(&e[1], path);
		check_number(&e[3], path);
		if (number_of(&e[1]) > number_of(&e[3]))
			policy_error(path, ": a \"numeric\" range's lower bound is above its upper bound");
	}
	else
		policy_error(path, ": \"numeric\" takes [operator, number] or [lower operator, number, upper operator, number] (operators =, <, <=, >, >=; a range is > or >= then < or <=)");
}

static void
check_condition(JsonbValue *c, const char *path)
{
	char	   *op;
	JsonbValue	val;

	if (c->type == jbvNumeric)
	{
		check_number(c, path);
		return;
	}
	if (c->type == jbvString || c->type == jbvNull || c->type == jbvBool)
		return;
	if (!is_object(c))
		policy_error(path, ": a condition must be a string, number, boolean, null or operator object");
	condition_kv(c->val.binary.data, &op, &val, path);
	if (strcmp(op, "prefix") == 0 || strcmp(op, "suffix") == 0 ||
		strcmp(op, "equals-ignore-case") == 0)
	{
		if (!is_string(&val))
			policy_error(path, psprintf(": \"%s\" takes a string", op));
	}
	else if (strcmp(op, "exists") == 0)
	{
		if (val.type != jbvBool)
			policy_error(path, ": \"exists\" takes true or false");
	}
	else if (strcmp(op, "numeric") == 0)
		check_numeric(&val, path);
	else if (strcmp(op, "anything-but") == 0)
	{
		if (val.type == jbvString)
			return;
		if (val.type == jbvNumeric)
			check_number(&val, path);
		else if (is_array(&val))
		{
			JsonbValue *e;
			int			n = array_elems(val.val.binary.data, &e);

			if (n == 0)
				policy_error(path, ": \"anything-but\" takes a non-empty list");
			for (int i = 0; i < n; i++)
			{
				if (e[i].type == jbvNumeric)
					check_number(&e[i], path);
				else if (e[i].type != jbvString)
					policy_error(path, ": \"anything-but\" lists strings and numbers");
			}
		}
		else if (is_object(&val))
		{
			char	   *inner;
			JsonbValue	iv;

			condition_kv(val.val.binary.data, &inner, &iv, path);
			if ((strcmp(inner, "prefix") != 0 && strcmp(inner, "suffix") != 0) ||
				!is_string(&iv))
				policy_error(path, ": \"anything-but\" takes a value, a list, or {\"prefix\": string} or {\"suffix\": string}");
		}
		else
			policy_error(path, ": \"anything-but\" takes a value, a list, or {\"prefix\": string} or {\"suffix\": string}");
	}
	else
		policy_error(path, psprintf(": unknown operator \"%s\"", op));
}

/*
 * Check a policy object; report how many attribute names a message must
 * carry on its longest path (keys) and how many value combinations it
 * spans (combos), SNS's two bounds.
 */
static void
check_policy_object(JsonbContainer *obj, const char *path, int *keys, double *combos)
{
	JsonbIterator *it = JsonbIteratorInit(obj);
	JsonbValue	v;
	JsonbIteratorToken tok;
	char	   *key = NULL;

	*keys = 0;
	*combos = 1;
	while ((tok = JsonbIteratorNext(&it, &v, true)) != WJB_DONE)
	{
		char	   *sub;

		if (tok == WJB_KEY)
		{
			key = pnstrdup(v.val.string.val, v.val.string.len);
			continue;
		}
		if (tok != WJB_VALUE)
			continue;
		sub = psprintf("%s%s\"%s\"", path, path[0] ? "." : "", key);
		if (strcmp(key, "$or") == 0)
		{
			JsonbValue *e;
			int			n;
			int			most = 0;
			double		sum = 0;

			if (!is_array(&v) || (n = array_elems(v.val.binary.data, &e)) < 2)
				policy_error(sub, ": \"$or\" takes a list of at least two policy objects");
			for (int i = 0; i < n; i++)
			{
				int			k;
				double		c;

				if (!is_object(&e[i]))
					policy_error(sub, ": \"$or\" takes a list of policy objects");
				check_policy_object(e[i].val.binary.data, sub, &k, &c);
				most = Max(most, k);
				sum += c;
			}
			*keys += most;
			*combos *= sum;
		}
		else if (is_array(&v))
		{
			JsonbValue *e;
			int			n = array_elems(v.val.binary.data, &e);

			if (n == 0)
				policy_error(sub, ": the list of conditions is empty");
			for (int i = 0; i < n; i++)
				check_condition(&e[i], sub);
			*keys += 1;
			*combos *= n;
		}
		else if (is_object(&v))
		{
			int			k;
			double		c;

			check_policy_object(v.val.binary.data, sub, &k, &c);
			if (k == 0)
				policy_error(sub, ": a nested policy must not be empty");
			*keys += k;
			*combos *= c;
		}
		else
			policy_error(sub, ": an attribute takes a list of conditions (or a nested policy object)");
	}
}

void
queue_check_filter_policy(Jsonb *policy)
{
	int			keys;
	double		combos;

	if (!JB_ROOT_IS_OBJECT(policy))
		policy_error("", "must be a JSON object");
	check_policy_object(&policy->root, "", &keys, &combos);
	if (keys == 0)
		policy_error("", "must name at least one attribute");
	if (keys > POLICY_KEYS_MAX)
		policy_error("", psprintf("names %d attributes on one path; at most %d may be named",
								  keys, POLICY_KEYS_MAX));
	if (combos > POLICY_COMBOS_MAX)
		policy_error("", psprintf("spans %.0f combinations of values; at most %d are allowed",
								  combos, POLICY_COMBOS_MAX));
}

/*
 * queue._check_filters(filter_tags, binding_keys, filter_policy): the
 * checks of queue.subscribe, for its PL/pgSQL side.
 */
Datum
queue_check_filters_sql(PG_FUNCTION_ARGS)
{
	Datum	   *vals;

	if (!PG_ARGISNULL(0))
		(void) queue_tag_list(PG_GETARG_ARRAYTYPE_P(0), "filter_tags", &vals);
	if (!PG_ARGISNULL(1))
	{
		int			n = queue_text_list(PG_GETARG_ARRAYTYPE_P(1), "binding_keys",
										BINDING_KEYS_MAX, ROUTING_KEY_LEN, &vals);

		for (int i = 0; i < n; i++)
			queue_check_routing_key(DatumGetTextPP(vals[i]), "binding_keys");
	}
	if (!PG_ARGISNULL(2))
		queue_check_filter_policy(PG_GETARG_JSONB_P(2));
	PG_RETURN_VOID();
}

/* ----------------------------------------------------------------
 * Filter policies: matching
 * ----------------------------------------------------------------
 */

static bool
string_eq(JsonbValue *a, JsonbValue *b)
{
	return a->val.string.len == b->val.string.len &&
		memcmp(a->val.string.val, b->val.string.val, a->val.string.len) == 0;
}

/* Equal JSON scalars of the same type (numbers by value). */
static bool
scalar_eq(JsonbValue *a, JsonbValue *b)
{
	if (a->type != b->type)
		return false;
	switch (a->type)
	{
		case jbvString:
			return string_eq(a, b);
		case jbvNumeric:
			return DatumGetBool(DirectFunctionCall2(numeric_eq,
													NumericGetDatum(a->val.numeric),
													NumericGetDatum(b->val.numeric)));
		case jbvBool:
			return a->val.boolean == b->val.boolean;
		case jbvNull:
			return true;
		default:
			return false;
	}
}

static bool
has_prefix(JsonbValue *s, JsonbValue *p)
{
	return s->type == jbvString && s->val.string.len >= p->val.string.len &&
		memcmp(s->val.string.val, p->val.string.val, p->val.string.len) == 0;
}

static bool
has_suffix(JsonbValue *s, JsonbValue *p)
{
	return s->type == jbvString && s->val.string.len >= p->val.string.len &&
		memcmp(s->val.string.val + s->val.string.len - p->val.string.len,
			   p->val.string.val, p->val.string.len) == 0;
}

static bool
numeric_holds(JsonbValue *op, double a, double b)
{
	const char *o = op->val.string.val;
	int			len = op->val.string.len;

	if (len == 1 && o[0] == '=')
		return a == b;
	if (len == 1 && o[0] == '<')
		return a < b;
	if (len == 1 && o[0] == '>')
		return a > b;
	if (o[0] == '<')
		return a <= b;
	return a >= b;
}

/* One scalar attribute value against one (checked) condition. */
static bool
scalar_matches(JsonbValue *c, JsonbValue *a)
{
	char	   *op;
	JsonbValue	val;

	if (!is_object(c))
		return scalar_eq(c, a);
	condition_kv(c->val.binary.data, &op, &val, "");
	if (strcmp(op, "prefix") == 0)
		return has_prefix(a, &val);
	if (strcmp(op, "suffix") == 0)
		return has_suffix(a, &val);
	if (strcmp(op, "equals-ignore-case") == 0)
		return a->type == jbvString && a->val.string.len == val.val.string.len &&
			pg_strncasecmp(a->val.string.val, val.val.string.val, a->val.string.len) == 0;
	if (strcmp(op, "numeric") == 0)
	{
		JsonbValue *e;
		int			n = array_elems(val.val.binary.data, &e);
		double		x;

		if (a->type != jbvNumeric)
			return false;		/* "5" is a string, not a number */
		x = number_of(a);
		return numeric_holds(&e[0], x, number_of(&e[1])) &&
			(n < 4 || numeric_holds(&e[2], x, number_of(&e[3])));
	}
	if (strcmp(op, "anything-but") == 0)
	{
		if (is_array(&val))
		{
			JsonbValue *e;
			int			n = array_elems(val.val.binary.data, &e);

			for (int i = 0; i < n; i++)
				if (scalar_eq(&e[i], a))
					return false;
			return true;
		}
		if (is_object(&val))
		{
			char	   *inner;
			JsonbValue	iv;

			condition_kv(val.val.binary.data, &inner, &iv, "");
			return strcmp(inner, "prefix") == 0 ? !has_prefix(a, &iv) : !has_suffix(a, &iv);
		}
		return !scalar_eq(&val, a);
	}
	return false;
}

/*
 * An attribute value (NULL when the message lacks it) against a
 * condition: "exists" looks at presence, everything else needs a value;
 * an array value matches when an element does.
 */
static bool
condition_matches(JsonbValue *c, JsonbValue *a)
{
	if (is_object(c))
	{
		char	   *op;
		JsonbValue	val;

		condition_kv(c->val.binary.data, &op, &val, "");
		if (strcmp(op, "exists") == 0)
			return val.val.boolean == (a != NULL);
	}
	if (a == NULL)
		return false;
	if (is_array(a))
	{
		JsonbValue *e;
		int			n = array_elems(a->val.binary.data, &e);

		for (int i = 0; i < n; i++)
			if (!is_object(&e[i]) && !is_array(&e[i]) && scalar_matches(c, &e[i]))
				return true;
		return false;
	}
	if (is_object(a))
		return false;
	return scalar_matches(c, a);
}

/* The value of key in an object container, or NULL. */
static JsonbValue *
member(JsonbContainer *obj, const char *key, int keylen)
{
	JsonbValue	k;

	if (obj == NULL)
		return NULL;
	k.type = jbvString;
	k.val.string.val = (char *) key;
	k.val.string.len = keylen;
	return findJsonbValueFromContainer(obj, JB_FOBJECT, &k);
}

static bool
policy_object_matches(JsonbContainer *policy, JsonbContainer *attrs)
{
	JsonbIterator *it = JsonbIteratorInit(policy);
	JsonbValue	v;
	JsonbValue	key = {0};
	JsonbIteratorToken tok;

	while ((tok = JsonbIteratorNext(&it, &v, true)) != WJB_DONE)
	{
		bool		ok = false;

		if (tok == WJB_KEY)
		{
			key = v;
			continue;
		}
		if (tok != WJB_VALUE)
			continue;
		if (key.val.string.len == 3 && memcmp(key.val.string.val, "$or", 3) == 0)
		{
			JsonbValue *e;
			int			n = array_elems(v.val.binary.data, &e);

			for (int i = 0; i < n && !ok; i++)
				ok = policy_object_matches(e[i].val.binary.data, attrs);
		}
		else
		{
			JsonbValue *a = member(attrs, key.val.string.val, key.val.string.len);

			if (is_object(&v))
				ok = a != NULL && is_object(a) &&
					policy_object_matches(v.val.binary.data, a->val.binary.data);
			else
			{
				JsonbValue *e;
				int			n = array_elems(v.val.binary.data, &e);

				for (int i = 0; i < n && !ok; i++)
					ok = condition_matches(&e[i], a);
			}
		}
		if (!ok)
			return false;
	}
	return true;
}

/* Whether a message's attributes (NULL: none) satisfy a checked policy. */
bool
queue_policy_match(Jsonb *policy, Jsonb *attributes)
{
	return policy_object_matches(&policy->root,
								 attributes ? &attributes->root : NULL);
}
