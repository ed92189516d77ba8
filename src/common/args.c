/*-------------------------------------------------------------------------
 *
 * args.c
 *	  Argument checks shared by the SQL functions.
 *
 * Every check raises a specific SQLSTATE with a message naming the argument
 * (DESIGN.md "Errors"), and runs before anything is written, so bad input
 * changes nothing.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "catalog/pg_type.h"
#include "access/xlog.h"
#include "datatype/timestamp.h"
#include "miscadmin.h"
#include "tcop/utility.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"

#include "common/queue_common.h"

/* Render a bound in microseconds the way a person would write it. */
static char *
usecs_text(int64 us)
{
	if (us % USECS_PER_DAY == 0 && us >= USECS_PER_DAY)
		return psprintf("%lld days", (long long) (us / USECS_PER_DAY));
	if (us % USECS_PER_HOUR == 0 && us >= USECS_PER_HOUR)
		return psprintf("%lld hours", (long long) (us / USECS_PER_HOUR));
	if (us % USECS_PER_MINUTE == 0 && us >= USECS_PER_MINUTE)
		return psprintf("%lld minutes", (long long) (us / USECS_PER_MINUTE));
	if (us % USECS_PER_SEC == 0)
		return psprintf("%lld seconds", (long long) (us / USECS_PER_SEC));
	return psprintf("%lld microseconds", (long long) us);
}

/* A NULL where a value is needed is 22004, naming the argument. */
void
queue_arg_notnull(FunctionCallInfo fcinfo, int argno, const char *argname)
{
	if (PG_ARGISNULL(argno))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("argument \"%s\" must not be null", argname)));
}

/*
 * An interval argument as microseconds, checked against [lo, hi].  A month
 * counts 30 days, as interval arithmetic does.  NULL gives dflt, or is an
 * error when dflt is negative.
 */
int64
queue_arg_interval(FunctionCallInfo fcinfo, int argno, const char *argname,
				   int64 lo, int64 hi, int64 dflt)
{
	Interval   *iv;
	int64		us;

	if (PG_ARGISNULL(argno))
	{
		if (dflt < 0)
			queue_arg_notnull(fcinfo, argno, argname);
		return dflt;
	}
	iv = PG_GETARG_INTERVAL_P(argno);

	/* Anything beyond a few centuries is out of every range we have. */
	if (iv->month > 12 * 1000 || iv->month < -12 * 1000 ||
		iv->day > 365 * 1000 || iv->day < -365 * 1000 ||
		iv->time > INT64CONST(1000) * 365 * USECS_PER_DAY ||
		iv->time < -INT64CONST(1000) * 365 * USECS_PER_DAY)
		us = (iv->month < 0 || iv->day < 0 || iv->time < 0) ? PG_INT64_MIN : PG_INT64_MAX;
	else
		us = iv->time + (int64) iv->day * USECS_PER_DAY +
			(int64) iv->month * DAYS_PER_MONTH * USECS_PER_DAY;

	if (us < lo || us > hi)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("argument \"%s\" must be between %s and %s",
						argname, usecs_text(lo), usecs_text(hi))));
	return us;
}

/* An integer argument checked against [lo, hi]; NULL gives dflt. */
int32
queue_arg_int(FunctionCallInfo fcinfo, int argno, const char *argname,
			  int32 lo, int32 hi, int32 dflt)
{
	int32		v;

	if (PG_ARGISNULL(argno))
	{
		if (dflt < 0)
			queue_arg_notnull(fcinfo, argno, argname);
		return dflt;
	}
	v = PG_GETARG_INT32(argno);
	if (v < lo || v > hi)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("argument \"%s\" must be between %d and %d",
						argname, lo, hi)));
	return v;
}

/*
 * Group, deduplication and receive-attempt ids: 1 to 128 characters of
 * printable ASCII, as SQS allows.  NULL stays NULL.
 */
static void
check_token(const char *s, int len, const char *argname)
{
	if (len < 1 || len > QUEUE_TOKEN_MAX)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("argument \"%s\" must be 1 to %d characters long",
						argname, QUEUE_TOKEN_MAX)));
	for (int i = 0; i < len; i++)
		if (s[i] < '!' || s[i] > '~')
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("argument \"%s\" may only hold printable ASCII characters other than space",
							argname)));
}

text *
queue_arg_token(FunctionCallInfo fcinfo, int argno, const char *argname)
{
	text	   *t;

	if (PG_ARGISNULL(argno))
		return NULL;
	t = PG_GETARG_TEXT_PP(argno);
	check_token(VARDATA_ANY(t), VARSIZE_ANY_EXHDR(t), argname);
	return t;
}

/* The same rule for one element of a token array. */
void
queue_check_token_datum(Datum d, const char *argname)
{
	text	   *t = DatumGetTextPP(d);

	check_token(VARDATA_ANY(t), VARSIZE_ANY_EXHDR(t), argname);
}

/*
 * Number of entries of a batch array: one dimension, 1 to QUEUE_MAX_BATCH
 * entries, and no NULL entries unless allowed.
 */
int
queue_array_len(ArrayType *arr, const char *argname, bool allow_nulls)
{
	int			n;

	if (ARR_NDIM(arr) > 1)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("argument \"%s\" must be a one-dimensional array", argname)));
	n = ARR_NDIM(arr) == 0 ? 0 : ARR_DIMS(arr)[0];
	if (n < 1 || n > QUEUE_MAX_BATCH)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("argument \"%s\" must have 1 to %d entries",
						argname, QUEUE_MAX_BATCH)));
	if (!allow_nulls && array_contains_nulls(arr))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("argument \"%s\" must not contain nulls", argname)));
	return n;
}

/*
 * Writes are refused on a hot standby and in a read-only transaction with
 * 25006, before any table is touched.
 */
void
queue_check_read_write(void)
{
	if (RecoveryInProgress())
		ereport(ERROR,
				(errcode(ERRCODE_READ_ONLY_SQL_TRANSACTION),
				 errmsg("cannot change a queue during recovery"),
				 errhint("Queues can be written only on the primary server.")));
	if (XactReadOnly)
		ereport(ERROR,
				(errcode(ERRCODE_READ_ONLY_SQL_TRANSACTION),
				 errmsg("cannot change a queue in a read-only transaction")));
}

/* An int8[] of n values, for a statement parameter. */
Datum
queue_int8_array(int n, const int64 *vals)
{
	Datum	   *d = palloc(Max(n, 1) * sizeof(Datum));

	for (int i = 0; i < n; i++)
		d[i] = Int64GetDatum(vals[i]);
	return PointerGetDatum(construct_array(d, n, INT8OID, 8, FLOAT8PASSBYVAL,
										   TYPALIGN_DOUBLE));
}

/* A text[] of n values (nulls may be NULL: no null entries). */
Datum
queue_text_array(int n, const Datum *vals, const bool *nulls)
{
	int			dims[1] = {n};
	int			lbs[1] = {1};

	return PointerGetDatum(construct_md_array((Datum *) vals, (bool *) nulls,
											  1, dims, lbs, TEXTOID, -1,
											  false, TYPALIGN_INT));
}

/*
 * queue._check_interval(val, argname, lo, hi): 22004 when val is null,
 * 22023 when it lies outside [lo, hi] (a null bound is none), ordered as
 * intervals compare.  1.0's was PL/pgSQL; a create checks six intervals
 * (1.5).
 */
PG_FUNCTION_INFO_V1(queue_check_interval_sql);

Datum
queue_check_interval_sql(PG_FUNCTION_ARGS)
{
	const char *argname = PG_ARGISNULL(1) ? "?" : text_to_cstring(PG_GETARG_TEXT_PP(1));
	Datum		val;

	if (PG_ARGISNULL(0))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("argument \"%s\" must not be null", argname)));
	val = PG_GETARG_DATUM(0);
	if ((!PG_ARGISNULL(2) &&
		 DatumGetInt32(DirectFunctionCall2(interval_cmp, val, PG_GETARG_DATUM(2))) < 0) ||
		(!PG_ARGISNULL(3) &&
		 DatumGetInt32(DirectFunctionCall2(interval_cmp, val, PG_GETARG_DATUM(3))) > 0))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("argument \"%s\" must be between %s and %s", argname,
						PG_ARGISNULL(2) ? "<NULL>" : DatumGetCString(DirectFunctionCall1(interval_out, PG_GETARG_DATUM(2))),
						PG_ARGISNULL(3) ? "<NULL>" : DatumGetCString(DirectFunctionCall1(interval_out, PG_GETARG_DATUM(3)))),
				 errdetail("The value given was %s.",
						   DatumGetCString(DirectFunctionCall1(interval_out, val)))));
	PG_RETURN_VOID();
}

/* queue._check_retry_delay(retry_delay): 0 to 12 hours (1.3's, in C). */
PG_FUNCTION_INFO_V1(queue_check_retry_delay_sql);

Datum
queue_check_retry_delay_sql(PG_FUNCTION_ARGS)
{
	Interval	lo = {0};
	Interval	hi = {0};

	queue_arg_notnull(fcinfo, 0, "retry_delay");
	hi.time = 12 * USECS_PER_HOUR;
	return DirectFunctionCall4(queue_check_interval_sql, PG_GETARG_DATUM(0),
							   CStringGetTextDatum("retry_delay"),
							   IntervalPGetDatum(&lo), IntervalPGetDatum(&hi));
}

/* qsort/bsearch order of text Datums: byte order, as COLLATE "C" */
int
queue_text_cmp(const void *a, const void *b)
{
	text	   *ta = DatumGetTextPP(*(const Datum *) a);
	text	   *tb = DatumGetTextPP(*(const Datum *) b);
	int			la = VARSIZE_ANY_EXHDR(ta);
	int			lb = VARSIZE_ANY_EXHDR(tb);
	int			c = memcmp(VARDATA_ANY(ta), VARDATA_ANY(tb), Min(la, lb));

	return c != 0 ? c : (la > lb) - (la < lb);
}

/* Sort texts in byte order (COLLATE "C") and drop repeats; the new count. */
int
queue_sort_unique_texts(Datum *vals, int n)
{
	int			m = 0;

	qsort(vals, n, sizeof(Datum), queue_text_cmp);
	for (int i = 0; i < n; i++)
		if (m == 0 || queue_text_cmp(&vals[m - 1], &vals[i]) != 0)
			vals[m++] = vals[i];
	return m;
}

/*
 * The group ids in column col of the last SPI result (nulls left out),
 * copied out of SPI's memory (they outlive the next statement); returns
 * how many.
 */
int
queue_spi_groups(int col, Datum **groups)
{
	int			n = 0;

	*groups = palloc(Max(SPI_processed, 1) * sizeof(Datum));
	for (uint64 r = 0; r < SPI_processed; r++)
	{
		bool		isnull;
		Datum		g = SPI_getbinval(SPI_tuptable->vals[r], SPI_tuptable->tupdesc,
									  col, &isnull);

		if (!isnull)
			(*groups)[n++] = PointerGetDatum(PG_DETOAST_DATUM_COPY(g));
	}
	return n;
}

PG_FUNCTION_INFO_V1(queue_check_name_sql);

/*
 * Names are 1-80 characters of [A-Za-z0-9_.-] (DESIGN.md): 42602 for an
 * empty name or a character outside the set, 42622 for a long one.
 */
void
queue_check_name(text *name, const char *argname)
{
	const char *s = VARDATA_ANY(name);
	int			len = VARSIZE_ANY_EXHDR(name);

	if (len == 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_NAME),
				 errmsg("argument \"%s\" must not be empty", argname)));

	/* Characters first: the allowed ones are ASCII, so bytes are characters. */
	for (int i = 0; i < len; i++)
	{
		char		c = s[i];

		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
			  (c >= '0' && c <= '9') || c == '_' || c == '.' || c == '-'))
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_NAME),
					 errmsg("argument \"%s\" may only hold letters, digits, \"_\", \".\" and \"-\"",
							argname),
					 errdetail("The queue name given was \"%s\".",
							   text_to_cstring(name))));
	}
	if (len > QUEUE_NAME_MAX)
		ereport(ERROR,
				(errcode(ERRCODE_NAME_TOO_LONG),
				 errmsg("argument \"%s\" is longer than %d characters",
						argname, QUEUE_NAME_MAX)));
}

/* queue._check_name(name, argname), for the administrative functions. */
Datum
queue_check_name_sql(PG_FUNCTION_ARGS)
{
	const char *argname = PG_ARGISNULL(1) ? "queue_name" :
		text_to_cstring(PG_GETARG_TEXT_PP(1));

	if (PG_ARGISNULL(0))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("argument \"%s\" must not be null", argname)));
	queue_check_name(PG_GETARG_TEXT_PP(0), argname);
	PG_RETURN_VOID();
}

/*
 * Prepare a statement and keep it for the life of the backend (or until
 * the caller frees it): statements made once and run many times outside
 * storage/plans.c's per-queue plans (topics, consumer processes, access
 * keys, the Citus guard, receipts of moved queues).
 */
SPIPlanPtr
queue_keep_plan(const char *sql, int nargs, Oid *types)
{
	SPIPlanPtr	plan = SPI_prepare(sql, nargs, types);

	if (plan == NULL)
		elog(ERROR, "SPI_prepare failed for \"%s\": %s", sql, SPI_result_code_string(SPI_result));
	if (SPI_keepplan(plan) != 0)
		elog(ERROR, "SPI_keepplan failed");
	return plan;
}
