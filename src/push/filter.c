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

#include <math.h>

#include "catalog/pg_type.h"
#include "lib/stringinfo.h"
#include "miscadmin.h"
#include "utils/memutils.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/jsonb.h"
#include "utils/numeric.h"

#include "common/queue_common.h"
#include "storage/queue_storage.h"
#include "fifo/queue_fifo.h"
#include "push/queue_push.h"

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

/* One word of a dotted key: where it starts and how long it is. */
typedef struct KeyWord
{
	const char *s;
	int			len;
} KeyWord;

/* The words of a dotted key (a key without dots is one word). */
static int
split_words(const char *key, KeyWord **words)
{
	int			n = 1;
	const char *s = key;

	for (const char *c = key; *c; c++)
	{
		CHECK_FOR_INTERRUPTS();
		if (*c == '.')
			n++;
	}
	*words = palloc(n * sizeof(KeyWord));
	for (int i = 0; i < n; i++)
	{
		const char *dot = strchr(s, '.');

		CHECK_FOR_INTERRUPTS();
		(*words)[i].s = s;
		(*words)[i].len = dot ? dot - s : strlen(s);
		s = dot ? dot + 1 : s + strlen(s);
	}
	return n;
}

static bool
word_is(const KeyWord *w, char c)
{
	return w->len == 1 && w->s[0] == c;
}

/*
 * Add to the set of binding positions those a '#' reaches without taking
 * a word: position i+1 whenever i is in and word i is '#'.  One pass in
 * order suffices, as '#' only ever moves forward.
 */
static void
skip_hashes(const KeyWord *pat, int m, bool *in)
{
	for (int i = 0; i < m; i++)
		if (in[i] && word_is(&pat[i], '#'))
			in[i + 1] = true;
}

/*
 * Whether a binding (words, '*' and '#') matches a routing key (words).
 *
 * The binding is run as a nondeterministic automaton over the key's words,
 * never by backtracking: the set of binding positions (0 to m, m: all of
 * the binding taken) that the key's words so far can reach is advanced one
 * key word at a time.  From position i, a key word leads to i+1 when word
 * i of the binding is '*' or the same word, and back to i when it is '#'
 * ('#' takes one more word); then every '#' may also take no word.  The
 * key matches when position m is reached with its last word.  Time is
 * O(key words x binding words) whatever the binding, with no recursion.
 */
bool
queue_binding_match(const char *binding, const char *routing_key)
{
	KeyWord    *pat;
	KeyWord    *key;
	int			m = split_words(binding, &pat);
	int			n = split_words(routing_key, &key);
	bool	   *cur = palloc0((m + 1) * sizeof(bool));
	bool	   *next = palloc((m + 1) * sizeof(bool));
	bool		matched;

	cur[0] = true;
	skip_hashes(pat, m, cur);
	for (int k = 0; k < n; k++)
	{
		bool		live = false;
		bool	   *swap;

		CHECK_FOR_INTERRUPTS();
		memset(next, 0, (m + 1) * sizeof(bool));
		for (int i = 0; i < m; i++)
		{
			if (!cur[i])
				continue;
			if (word_is(&pat[i], '#'))
				next[i] = true;
			else if (word_is(&pat[i], '*') ||
					 (pat[i].len == key[k].len &&
					  memcmp(pat[i].s, key[k].s, key[k].len) == 0))
				next[i + 1] = true;
		}
		skip_hashes(pat, m, next);
		swap = cur;
		cur = next;
		next = swap;
		for (int i = 0; i <= m && !live; i++)
			live = cur[i];
		if (!live)
			break;				/* no position left: cur[m] is false */
	}
	matched = cur[m];
	pfree(cur);
	pfree(next);
	pfree(pat);
	pfree(key);
	return matched;
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

/* A numeric constant of this backend's life, from its text. */
static Numeric
numeric_constant(const char *text)
{
	Numeric		n = DatumGetNumeric(DirectFunctionCall3(numeric_in,
														CStringGetDatum(text),
														ObjectIdGetDatum(InvalidOid),
														Int32GetDatum(-1)));
	Numeric		copy = MemoryContextAlloc(TopMemoryContext, VARSIZE(n));

	memcpy(copy, n, VARSIZE(n));
	pfree(n);
	return copy;
}

static int
numeric_compare(Numeric a, Numeric b)
{
	return DatumGetInt32(DirectFunctionCall2(numeric_cmp, NumericGetDatum(a),
											 NumericGetDatum(b)));
}

/*
 * A JSON number as a double, or false when it has none: it lies beyond
 * double precision, where float8in would fail (overflow, or a non-zero
 * number that rounds to zero).  Numbers far out (beyond +-1.8e308, or
 * non-zero within +-1e-330) are told by comparing numerics, so no long
 * text is made of them; only those near the edges are decided by strtod.
 * Never fails.
 */
static bool
number_to_double(Numeric num, double *d)
{
	static Numeric zero = NULL;
	static Numeric huge = NULL;
	static Numeric tiny = NULL;
	Numeric		abs;
	bool		far;
	char	   *s;

	if (zero == NULL)
	{
		zero = numeric_constant("0");
		huge = numeric_constant("1.8e308");
		tiny = numeric_constant("1e-330");
	}
	abs = DatumGetNumeric(DirectFunctionCall1(numeric_abs, NumericGetDatum(num)));
	far = numeric_compare(abs, huge) > 0 ||
		(numeric_compare(abs, zero) != 0 && numeric_compare(abs, tiny) < 0);
	pfree(abs);
	if (far)
		return false;
	s = DatumGetCString(DirectFunctionCall1(numeric_out, NumericGetDatum(num)));
	errno = 0;
	*d = strtod(s, NULL);
	far = errno == ERANGE && (*d == 0 || isinf(*d));
	pfree(s);
	return !far;
}

static void
check_number(JsonbValue *v, const char *path)
{
	double		d;

	if (!number_to_double(v->val.numeric, &d) || d < -1e9 || d > 1e9)
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
			CHECK_FOR_INTERRUPTS();
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
		double		lower;
		double		upper;

		check_number(&e[1], path);
		check_number(&e[3], path);
		(void) number_to_double(e[1].val.numeric, &lower);
		(void) number_to_double(e[3].val.numeric, &upper);
		if (lower > upper)
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
				CHECK_FOR_INTERRUPTS();
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

	check_stack_depth();		/* policies nest objects and "$or"s */
	*keys = 0;
	*combos = 1;
	while ((tok = JsonbIteratorNext(&it, &v, true)) != WJB_DONE)
	{
		char	   *sub;

		CHECK_FOR_INTERRUPTS();

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
			{
				CHECK_FOR_INTERRUPTS();
				check_condition(&e[i], sub);
			}
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
 *
 * A match never fails and is linear in the size of the policy and the
 * attributes: each condition is taken apart once (compile_condition), then
 * tried on the attribute's value or on each element of an array value.
 * An attribute list holds at most POLICY_COMBOS_MAX conditions (the
 * subscribe check), and every comparison of two values costs at most the
 * shorter one, so an array attribute costs its size times that bound.  The
 * one list of unbounded length, "anything-but"'s, is sorted once for an
 * array attribute and searched by halves.  Every loop over the policy or
 * the attributes checks for interrupts; the recursion follows the
 * policy's nesting (subscribe bounds it) and checks the stack.
 * ----------------------------------------------------------------
 */

static bool
string_eq(JsonbValue *a, JsonbValue *b)
{
	return a->val.string.len == b->val.string.len &&
		memcmp(a->val.string.val, b->val.string.val, a->val.string.len) == 0;
}

/*
 * Equal JSON scalars of the same type; numbers by exact value (numeric
 * equality, which every number can be compared by: "5" is not 5, 5.0 is).
 */
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
			return numeric_compare(a->val.numeric, b->val.numeric) == 0;
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

/* What a (checked) condition does. */
typedef enum PolicyCondKind
{
	COND_NONE,					/* matches nothing (cannot happen once checked) */
	COND_EQUALS,				/* a string, number, boolean or null */
	COND_PREFIX,
	COND_SUFFIX,
	COND_IGNORE_CASE,
	COND_NUMERIC,
	COND_EXISTS,
	COND_BUT_VALUES,			/* "anything-but" a value or a list of them */
	COND_BUT_PREFIX,
	COND_BUT_SUFFIX
} PolicyCondKind;

/* A condition taken apart, to be tried on many values. */
typedef struct PolicyCond
{
	PolicyCondKind kind;
	JsonbValue	arg;			/* the value, string or boolean it takes */
	JsonbValue *values;			/* COND_BUT_VALUES: the values, */
	int			nvalues;		/* how many, */
	bool		sorted;			/* and whether sorted by value_order */
	int			nbounds;		/* COND_NUMERIC: 1 or 2 (operator, bound) */
	JsonbValue	ops[2];
	double		bounds[2];
} PolicyCond;

static void
compile_condition(JsonbValue *c, PolicyCond *pc)
{
	char	   *op;
	JsonbValue	val;

	memset(pc, 0, sizeof(PolicyCond));
	if (!is_object(c))
	{
		pc->kind = COND_EQUALS;
		pc->arg = *c;
		return;
	}
	condition_kv(c->val.binary.data, &op, &val, "");
	pc->arg = val;
	if (strcmp(op, "prefix") == 0)
		pc->kind = COND_PREFIX;
	else if (strcmp(op, "suffix") == 0)
		pc->kind = COND_SUFFIX;
	else if (strcmp(op, "equals-ignore-case") == 0)
		pc->kind = COND_IGNORE_CASE;
	else if (strcmp(op, "exists") == 0)
		pc->kind = COND_EXISTS;
	else if (strcmp(op, "numeric") == 0)
	{
		JsonbValue *e;
		int			n = array_elems(val.val.binary.data, &e);

		pc->kind = COND_NUMERIC;
		pc->nbounds = n / 2;
		for (int j = 0; j < pc->nbounds; j++)
		{
			pc->ops[j] = e[2 * j];
			if (!number_to_double(e[2 * j + 1].val.numeric, &pc->bounds[j]))
				pc->kind = COND_NONE;
		}
	}
	else if (strcmp(op, "anything-but") == 0)
	{
		if (is_object(&val))
		{
			char	   *inner;

			condition_kv(val.val.binary.data, &inner, &pc->arg, "");
			pc->kind = strcmp(inner, "prefix") == 0 ? COND_BUT_PREFIX : COND_BUT_SUFFIX;
		}
		else
		{
			pc->kind = COND_BUT_VALUES;
			if (is_array(&val))
				pc->nvalues = array_elems(val.val.binary.data, &pc->values);
			else
			{
				pc->values = &pc->arg;
				pc->nvalues = 1;
			}
		}
	}
	else
		pc->kind = COND_NONE;
}

/*
 * A total order on JSON scalars for "anything-but" lists: by type, then
 * strings by length and bytes, numbers by value, booleans false first.
 * Values equal by scalar_eq compare equal.
 */
static int
value_order(const void *pa, const void *pb)
{
	const JsonbValue *a = pa;
	const JsonbValue *b = pb;

	if (a->type != b->type)
		return a->type < b->type ? -1 : 1;
	switch (a->type)
	{
		case jbvString:
			if (a->val.string.len != b->val.string.len)
				return a->val.string.len < b->val.string.len ? -1 : 1;
			return memcmp(a->val.string.val, b->val.string.val, a->val.string.len);
		case jbvNumeric:
			return numeric_compare(a->val.numeric, b->val.numeric);
		case jbvBool:
			return (int) a->val.boolean - (int) b->val.boolean;
		default:
			return 0;
	}
}

/* Whether a scalar equals one of an "anything-but" condition's values. */
static bool
in_values(PolicyCond *pc, JsonbValue *a)
{
	if (pc->sorted)
		return bsearch(a, pc->values, pc->nvalues, sizeof(JsonbValue),
					   value_order) != NULL;
	for (int i = 0; i < pc->nvalues; i++)
	{
		CHECK_FOR_INTERRUPTS();
		if (scalar_eq(&pc->values[i], a))
			return true;
	}
	return false;
}

/*
 * One scalar attribute value against a condition.  A value the condition
 * cannot compare does not match it: a string for "numeric", a number for
 * "prefix", and a number beyond double precision for "numeric" (the ranges
 * are compared in double precision, as SNS does).  "anything-but" decides
 * by exact equality, which every value can be compared by: a number beyond
 * double precision equals none of the policy's (they lie within +-1e9), so
 * it is anything but them and matches, as a string does.
 */
static bool
scalar_matches(PolicyCond *pc, JsonbValue *a)
{
	double		x;

	switch (pc->kind)
	{
		case COND_EQUALS:
			return scalar_eq(&pc->arg, a);
		case COND_PREFIX:
			return has_prefix(a, &pc->arg);
		case COND_SUFFIX:
			return has_suffix(a, &pc->arg);
		case COND_IGNORE_CASE:
			return a->type == jbvString && a->val.string.len == pc->arg.val.string.len &&
				pg_strncasecmp(a->val.string.val, pc->arg.val.string.val,
							   a->val.string.len) == 0;
		case COND_NUMERIC:
			if (a->type != jbvNumeric || !number_to_double(a->val.numeric, &x))
				return false;
			for (int j = 0; j < pc->nbounds; j++)
				if (!numeric_holds(&pc->ops[j], x, pc->bounds[j]))
					return false;
			return true;
		case COND_BUT_VALUES:
			return !in_values(pc, a);
		case COND_BUT_PREFIX:
			return !has_prefix(a, &pc->arg);
		case COND_BUT_SUFFIX:
			return !has_suffix(a, &pc->arg);
		case COND_EXISTS:
		case COND_NONE:
			break;
	}
	return false;
}

/*
 * An attribute value (NULL when the message lacks it) against a
 * condition: "exists" looks at presence, everything else needs a value;
 * an array value matches when one of its scalar elements does.
 */
static bool
condition_matches(PolicyCond *pc, JsonbValue *a)
{
	JsonbIterator *it;
	JsonbValue	e;
	JsonbIteratorToken tok;

	if (pc->kind == COND_EXISTS)
		return pc->arg.val.boolean == (a != NULL);
	if (a == NULL || is_object(a))
		return false;
	if (!is_array(a))
		return scalar_matches(pc, a);

	/* Many lookups in a long "anything-but" list: sort it once. */
	if (pc->kind == COND_BUT_VALUES && pc->nvalues > 8 && !pc->sorted)
	{
		qsort(pc->values, pc->nvalues, sizeof(JsonbValue), value_order);
		pc->sorted = true;
	}
	it = JsonbIteratorInit(a->val.binary.data);
	while ((tok = JsonbIteratorNext(&it, &e, true)) != WJB_DONE)
	{
		CHECK_FOR_INTERRUPTS();
		if (tok == WJB_ELEM && e.type != jbvBinary && scalar_matches(pc, &e))
			return true;
	}
	return false;
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

	check_stack_depth();
	while ((tok = JsonbIteratorNext(&it, &v, true)) != WJB_DONE)
	{
		bool		ok = false;

		CHECK_FOR_INTERRUPTS();
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
				{
					PolicyCond	pc;

					compile_condition(&e[i], &pc);
					ok = condition_matches(&pc, a);
				}
			}
		}
		if (!ok)
			return false;
	}
	return true;
}

/*
 * Whether a message's attributes (NULL: none) satisfy a checked policy.
 * What the match allocates goes with its own context.
 */
bool
queue_policy_match(Jsonb *policy, Jsonb *attributes)
{
	MemoryContext cxt = AllocSetContextCreate(CurrentMemoryContext,
											  "queue policy match",
											  ALLOCSET_SMALL_SIZES);
	MemoryContext old = MemoryContextSwitchTo(cxt);
	bool		matched;

	matched = policy_object_matches(&policy->root,
									attributes ? &attributes->root : NULL);
	MemoryContextSwitchTo(old);
	MemoryContextDelete(cxt);
	return matched;
}
