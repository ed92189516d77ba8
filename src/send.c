/*-------------------------------------------------------------------------
 *
 * send.c
 *	  queue.send and queue.send_batch.
 *
 * A send is an INSERT in the caller's transaction (the transactional
 * outbox): consumers see the message when, and only if, that transaction
 * commits.  A batch is one INSERT ... SELECT FROM unnest(...), so its cost is
 * shared by its messages, and one bad entry fails the whole batch before
 * anything is written.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "funcapi.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/jsonb.h"
#include "utils/lsyscache.h"
#include "utils/timestamp.h"

#include "queue.h"

PG_FUNCTION_INFO_V1(queue_send);
PG_FUNCTION_INFO_V1(queue_send_batch);

/* Body of one message as text, checked against the queue's size limit. */
static text *
body_text(Datum d, bool is_jsonb, QueueMeta *q, const char *argname)
{
	text	   *t;
	int			len;

	if (is_jsonb)
		t = cstring_to_text(JsonbToCString(NULL, &DatumGetJsonbP(d)->root,
										   VARSIZE(DatumGetJsonbP(d))));
	else
		t = DatumGetTextPP(d);
	len = VARSIZE_ANY_EXHDR(t);
	if (len == 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("argument \"%s\" must not be empty", argname)));
	if (len > q->max_message_size)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("argument \"%s\" is %d bytes, over the queue's max_message_size of %d",
						argname, len, q->max_message_size)));
	return t;
}

/* Attributes, when given, are a JSON object of name to value. */
static void
check_attributes(Jsonb *attrs, const char *argname)
{
	if (!JB_ROOT_IS_OBJECT(attrs))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("argument \"%s\" must be a JSON object", argname)));
}

/*
 * The per-message delay, or the queue's.  FIFO queues take only the queue's
 * delay, as SQS.
 */
static int64
send_delay(FunctionCallInfo fcinfo, QueueMeta *q)
{
	if (PG_ARGISNULL(2))
		return q->delay;
	if (q->fifo)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("argument \"delay\" is not allowed on a FIFO queue"),
				 errhint("Set the queue's delay attribute instead.")));
	return queue_arg_interval(fcinfo, 2, "delay", 0, q->retention, 0);
}

/* Features that later issues bring; refused rather than half-done. */
static void
check_supported(QueueMeta *q, bool has_dedup)
{
	if (q->fifo)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("FIFO queues are not supported yet")));
	if (has_dedup)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("argument \"deduplication_id\" is not supported yet")));
}

/*
 * queue.send(queue_name, body text|jsonb, delay, message_group_id,
 *			  deduplication_id, attributes)
 */
Datum
queue_send(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	bool		is_jsonb = get_fn_expr_argtype(fcinfo->flinfo, 1) == JSONBOID;
	QueueMeta  *q;
	text	   *group;
	text	   *dedup;
	int64		delay;
	TimestampTz now;
	Datum		args[6];
	char		nulls[6] = {' ', ' ', ' ', ' ', ' ', ' '};
	Datum		values[3];
	bool		isnull[3] = {false, true, false};
	bool		isnull_id;
	int			rc;

	queue_arg_notnull(fcinfo, 0, "queue_name");
	queue_arg_notnull(fcinfo, 1, "body");
	group = queue_arg_token(fcinfo, 3, "message_group_id");
	dedup = queue_arg_token(fcinfo, 4, "deduplication_id");
	if (!PG_ARGISNULL(5))
		check_attributes(PG_GETARG_JSONB_P(5), "attributes");
	queue_check_read_write();
	InitMaterializedSRF(fcinfo, 0);

	SPI_connect();
	q = queue_lookup(PG_GETARG_TEXT_PP(0));
	check_supported(q, dedup != NULL);
	delay = send_delay(fcinfo, q);

	now = GetCurrentTimestamp();
	args[0] = TimestampTzGetDatum(now + delay);
	args[1] = TimestampTzGetDatum(now);
	args[2] = group ? PointerGetDatum(group) : (Datum) 0;
	nulls[2] = group ? ' ' : 'n';
	args[3] = dedup ? PointerGetDatum(dedup) : (Datum) 0;
	nulls[3] = dedup ? ' ' : 'n';
	args[4] = PG_ARGISNULL(5) ? (Datum) 0 : PG_GETARG_DATUM(5);
	nulls[4] = PG_ARGISNULL(5) ? 'n' : ' ';
	args[5] = PointerGetDatum(body_text(PG_GETARG_DATUM(1), is_jsonb, q, "body"));

	rc = SPI_execute_plan(queue_plan(q, QP_SEND), args, nulls, false, 0);
	if (rc != SPI_OK_INSERT_RETURNING || SPI_processed != 1)
		elog(ERROR, "queue send failed: %s", SPI_result_code_string(rc));

	values[0] = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull_id);
	values[1] = (Datum) 0;		/* sequence_number: FIFO queues only */
	values[2] = BoolGetDatum(false);
	tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, isnull);
	queue_count(q->id, QC_SENT, 1);
	SPI_finish();
	return (Datum) 0;
}

/* Optional per-entry array argument, checked to match the bodies. */
static ArrayType *
batch_array(FunctionCallInfo fcinfo, int argno, const char *argname, int n)
{
	ArrayType  *arr;

	if (PG_ARGISNULL(argno))
		return NULL;
	arr = PG_GETARG_ARRAYTYPE_P(argno);
	if (queue_array_len(arr, argname, true) != n)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("argument \"%s\" must have as many entries as \"bodies\"",
						argname)));
	return arr;
}

/*
 * queue.send_batch(queue_name, bodies text[]|jsonb[], delay,
 *					message_group_ids, deduplication_ids, attributes)
 */
Datum
queue_send_batch(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	bool		is_jsonb = get_fn_expr_argtype(fcinfo->flinfo, 1) == JSONBARRAYOID;
	ArrayType  *bodies;
	ArrayType  *groups;
	ArrayType  *dedups;
	ArrayType  *attrs;
	Datum	   *body_datums;
	int			n;
	QueueMeta  *q;
	int64		delay;
	TimestampTz now;
	Datum		args[6];
	char		nulls[6] = {' ', ' ', ' ', ' ', ' ', ' '};
	bool		has_dedup = false;
	int			rc;

	queue_arg_notnull(fcinfo, 0, "queue_name");
	queue_arg_notnull(fcinfo, 1, "bodies");
	bodies = PG_GETARG_ARRAYTYPE_P(1);
	n = queue_array_len(bodies, "bodies", false);
	groups = batch_array(fcinfo, 3, "message_group_ids", n);
	dedups = batch_array(fcinfo, 4, "deduplication_ids", n);
	attrs = batch_array(fcinfo, 5, "attributes", n);

	if (groups)
	{
		Datum	   *d;
		bool	   *dn;
		int			m;

		deconstruct_array(groups, TEXTOID, -1, false, TYPALIGN_INT, &d, &dn, &m);
		for (int i = 0; i < m; i++)
			if (!dn[i])
				queue_check_token_datum(d[i], "message_group_ids");
	}
	if (dedups)
	{
		Datum	   *d;
		bool	   *dn;
		int			m;

		deconstruct_array(dedups, TEXTOID, -1, false, TYPALIGN_INT, &d, &dn, &m);
		for (int i = 0; i < m; i++)
			if (!dn[i])
			{
				queue_check_token_datum(d[i], "deduplication_ids");
				has_dedup = true;
			}
	}
	if (attrs)
	{
		Datum	   *d;
		bool	   *dn;
		int			m;

		deconstruct_array(attrs, JSONBOID, -1, false, TYPALIGN_INT, &d, &dn, &m);
		for (int i = 0; i < m; i++)
			if (!dn[i])
				check_attributes(DatumGetJsonbP(d[i]), "attributes");
	}
	queue_check_read_write();
	InitMaterializedSRF(fcinfo, 0);

	SPI_connect();
	q = queue_lookup(PG_GETARG_TEXT_PP(0));
	check_supported(q, has_dedup);
	delay = send_delay(fcinfo, q);

	/* Bodies become text[], each checked against the size limit. */
	deconstruct_array(bodies, is_jsonb ? JSONBOID : TEXTOID, -1, false,
					  TYPALIGN_INT, &body_datums, NULL, &n);
	for (int i = 0; i < n; i++)
		body_datums[i] = PointerGetDatum(body_text(body_datums[i], is_jsonb,
												   q, "bodies"));

	now = GetCurrentTimestamp();
	args[0] = TimestampTzGetDatum(now + delay);
	args[1] = TimestampTzGetDatum(now);
	args[2] = PointerGetDatum(construct_array(body_datums, n, TEXTOID, -1,
											  false, TYPALIGN_INT));
	args[3] = groups ? PointerGetDatum(groups) : (Datum) 0;
	nulls[3] = groups ? ' ' : 'n';
	args[4] = dedups ? PointerGetDatum(dedups) : (Datum) 0;
	nulls[4] = dedups ? ' ' : 'n';
	args[5] = attrs ? PointerGetDatum(attrs) : (Datum) 0;
	nulls[5] = attrs ? ' ' : 'n';

	rc = SPI_execute_plan(queue_plan(q, QP_SEND_BATCH), args, nulls, false, 0);
	if (rc != SPI_OK_INSERT_RETURNING || SPI_processed != (uint64) n)
		elog(ERROR, "queue send_batch failed: %s", SPI_result_code_string(rc));

	for (int i = 0; i < n; i++)
	{
		Datum		values[4];
		bool		isnull[4] = {false, false, true, false};

		values[0] = Int32GetDatum(i + 1);
		values[1] = SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc,
								  1, &isnull[1]);
		values[2] = (Datum) 0;
		values[3] = BoolGetDatum(false);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, isnull);
	}
	queue_count(q->id, QC_SENT, n);
	SPI_finish();
	return (Datum) 0;
}
