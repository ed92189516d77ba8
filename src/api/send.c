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

#include "access/xact.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "funcapi.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/jsonb.h"
#include "utils/lsyscache.h"
#include "utils/timestamp.h"
#include "utils/tuplestore.h"

#include "common/queue_common.h"
#include "storage/queue_storage.h"
#include "access/queue_access.h"
#include "state/queue_state.h"
#include "fifo/queue_fifo.h"
#include "api/queue_api.h"

PG_FUNCTION_INFO_V1(queue_send);
PG_FUNCTION_INFO_V1(queue_send_batch);

/* Body of one message as text, checked against the queue's size limit. */
text *
queue_body_text(Datum d, bool is_jsonb, QueueMeta *q, const char *argname)
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

/*
 * A message's size is its body plus its attributes, as SQS counts both
 * toward the size limit.  Attributes count as the length of their text form
 * (attributes::text, what a receive returns), not their stored jsonb size:
 * the text is what a user sees and can predict, the binary layout is not.
 * The body was checked alone by body_text.
 */
void
queue_check_message_size(QueueMeta *q, Datum body, Datum attrs, bool attrs_null,
				   const char *argname)
{
	Jsonb	   *jb;
	int64		body_len;
	int64		attrs_len;

	/*
	 * Over the SQS endpoint a message's size is SQS's count (body, attribute
	 * names, types and values), which the endpoint checked already.
	 */
	if (attrs_null || queue_sqs_wire)
		return;
	jb = DatumGetJsonbP(attrs);
	body_len = VARSIZE_ANY_EXHDR(DatumGetPointer(body));
	attrs_len = strlen(JsonbToCString(NULL, &jb->root, VARSIZE(jb)));
	if (body_len + attrs_len > q->max_message_size)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("argument \"%s\" makes the message " INT64_FORMAT " bytes, over the queue's max_message_size of %d",
						argname, body_len + attrs_len, q->max_message_size),
				 errdetail("The body is " INT64_FORMAT " bytes and the attributes' text form " INT64_FORMAT "; max_message_size counts both.",
						   body_len, attrs_len)));
}

/* Attributes, when given, are a JSON object of name to value. */
void
queue_check_attributes(Jsonb *attrs, const char *argname)
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

/*
 * FIFO rules, before anything is written: every entry names its group, and
 * has a deduplication id unless the queue derives one from the body.
 */
static void
check_fifo_entries(QueueMeta *q, SendBatch *b, bool batch)
{
	for (int i = 0; i < b->n; i++)
	{
		if (b->group_nulls[i])
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("argument \"%s\" is required on a FIFO queue",
							batch ? "message_group_ids" : "message_group_id")));
		if (b->dedup_nulls[i])
		{
			if (!q->content_based_dedup)
				ereport(ERROR,
						(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						 errmsg("argument \"%s\" is required on a FIFO queue without content_based_deduplication",
								batch ? "deduplication_ids" : "deduplication_id")));
			b->dedups[i] = PointerGetDatum(queue_content_dedup_id(DatumGetTextPP(b->bodies[i])));
			b->dedup_nulls[i] = false;
		}
	}
}

/*
 * Every send, of one message or a batch, top down: take the FIFO groups'
 * senders' locks (so sequence numbers are drawn in the groups' commit
 * order) and see which groups have no row (groups.c), claim the
 * deduplication ids and write what is not a duplicate (insert.c), give the
 * groups that had no row one (groups.c), and note the counts for commit.
 */
void
queue_send_entries(QueueMeta *q, SendBatch *b, int64 delay, bool batch,
				   int64 *ids, bool *dup)
{
	int			n = b->n;
	Datum	   *groups = NULL;
	int			ngroups = 0;
	bool	   *missing = NULL;
	int			nmissing = 0;
	int			ndedup = 0;
	int			nins = 0;
	int			ndup = 0;
	TimestampTz now;

	if (q->fifo)
	{
		check_fifo_entries(q, b, batch);
		groups = palloc(n * sizeof(Datum));
		for (int i = 0; i < n; i++)
			groups[i] = b->groups[i];
		ngroups = queue_sort_unique_texts(groups, n);
		missing = palloc(ngroups * sizeof(bool));
		nmissing = queue_fifo_begin_send(q, ngroups, groups, missing);
	}

	/* The clock is read after the locks: a send is stamped when it can go. */
	now = GetCurrentTimestamp();

	memset(ids, 0, n * sizeof(int64));
	memset(dup, 0, n * sizeof(bool));
	for (int i = 0; i < n; i++)
		if (!b->dedup_nulls[i])
			ndedup++;
	/* A topic's copy was deduplicated at the topic: its id only names it. */
	if (ndedup > 0 && !b->topic_copy)
	{
		Datum	   *keys = palloc(ndedup * sizeof(Datum));
		Datum	   *dids = palloc(ndedup * sizeof(Datum));
		int64	   *dmsg = palloc(ndedup * sizeof(int64));
		bool	   *ddup = palloc(ndedup * sizeof(bool));
		int			k = 0;

		for (int i = 0; i < n; i++)
			if (!b->dedup_nulls[i])
			{
				keys[k] = (q->dedup_by_group && !b->group_nulls[i]) ?
					b->groups[i] : PointerGetDatum(cstring_to_text(""));
				dids[k] = b->dedups[i];
				k++;
			}
		queue_dedup_claim(q, ndedup, keys, dids, now, dmsg, ddup);
		k = 0;
		for (int i = 0; i < n; i++)
			if (!b->dedup_nulls[i])
			{
				ids[i] = dmsg[k];
				dup[i] = ddup[k];
				k++;
			}
	}

	/* Write the entries that are not duplicates, all at once. */
	queue_insert_messages(q, b, dup, ids, now + delay, now);
	for (int i = 0; i < n; i++)
	{
		if (dup[i])
			ndup++;
		else
			nins++;
	}

	/*
	 * Groups that had no row get one now that their messages are in,
	 * headed by the first of them (ids follow call order).
	 */
	if (nmissing > 0 && nins > 0)
	{
		Datum	   *new_groups = palloc(nmissing * sizeof(Datum));
		int64	   *heads = palloc0(ngroups * sizeof(int64));
		int			nnew = 0;

		for (int i = 0; i < n; i++)
		{
			Datum	   *g;
			int			k;

			if (dup[i])
				continue;
			g = bsearch(&b->groups[i], groups, ngroups, sizeof(Datum), queue_text_cmp);
			k = g - groups;
			if (missing[k] && (heads[k] == 0 || ids[i] < heads[k]))
				heads[k] = ids[i];
		}
		for (int k = 0; k < ngroups; k++)
			if (missing[k] && heads[k] != 0)
			{
				new_groups[nnew] = groups[k];
				heads[nnew] = heads[k];
				nnew++;
			}
		queue_fifo_new_groups(q, nnew, new_groups, heads, now + delay);
	}

	/* Counted, and a standard queue's kinds of tenant noted, at commit. */
	if (!q->fifo)
	{
		queue_note_tenants(q->id, n, b->group_nulls);
		/* ready from now + delay on: the receives' bound (counts.c) */
		if (nins > 0)
			queue_note_ready(q->id, now + delay, QUEUE_READY_NONE);
	}
	if (nins > 0)
		queue_count(q->id, QC_SENT, nins);
	if (ndup > 0)
		queue_count(q->id, QC_DEDUPLICATED, ndup);
}

/* queue_send_entries, with one result row per entry (send: one row). */
static void
send_general(ReturnSetInfo *rsinfo, QueueMeta *q, SendBatch *b, int64 delay,
			 bool batch)
{
	int64	   *ids = palloc(b->n * sizeof(int64));
	bool	   *dup = palloc(b->n * sizeof(bool));

	queue_send_entries(q, b, delay, batch, ids, dup);
	for (int i = 0; i < b->n; i++)
	{
		Datum		values[4];
		bool		isnull[4] = {false, false, !q->fifo, false};
		int			off = batch ? 1 : 0;

		values[0] = Int32GetDatum(i + 1);
		values[off] = Int64GetDatum(ids[i]);
		values[off + 1] = Int64GetDatum(ids[i]);
		values[off + 2] = BoolGetDatum(dup[i]);
		isnull[off + 1] = !q->fifo;
		isnull[off] = false;
		isnull[off + 2] = false;
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, isnull);
	}
}

/*
 * queue.send(queue_name, body text|jsonb, delay, message_group_id,
 *			  deduplication_id, attributes)
 */
Datum
queue_send(PG_FUNCTION_ARGS)
{
	QueueCall	call;
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	bool		is_jsonb = get_fn_expr_argtype(fcinfo->flinfo, 1) == JSONBOID;
	QueueMeta  *q;
	text	   *group;
	text	   *dedup;
	int64		delay;
	SendBatch	b;
	Datum		body;
	Datum		attrs;
	Datum		g;
	Datum		d;
	bool		gnull;
	bool		dnull;
	bool		anull;

	queue_arg_notnull(fcinfo, 0, "queue_name");
	queue_arg_notnull(fcinfo, 1, "body");
	group = queue_arg_token(fcinfo, 3, "message_group_id");
	dedup = queue_arg_token(fcinfo, 4, "deduplication_id");
	if (!PG_ARGISNULL(5))
		queue_check_attributes(PG_GETARG_JSONB_P(5), "attributes");
	queue_check_read_write();
	InitMaterializedSRF(fcinfo, 0);

	q = queue_open(&call, PG_GETARG_TEXT_PP(0), QPRIV_SEND);
	delay = send_delay(fcinfo, q);

	/* A batch of one. */
	body = PointerGetDatum(queue_body_text(PG_GETARG_DATUM(1), is_jsonb, q, "body"));
	anull = PG_ARGISNULL(5);
	attrs = anull ? (Datum) 0 : PG_GETARG_DATUM(5);
	queue_check_message_size(q, body, attrs, anull, "attributes");
	g = PointerGetDatum(group);
	gnull = (group == NULL);
	d = PointerGetDatum(dedup);
	dnull = (dedup == NULL);
	b.n = 1;
	b.bodies = &body;
	b.groups = &g;
	b.group_nulls = &gnull;
	b.dedups = &d;
	b.dedup_nulls = &dnull;
	b.attrs = &attrs;
	b.attr_nulls = &anull;
	b.topic_copy = false;
	/* priority (1.12 on): fifo/priority.c */
	if (PG_NARGS() > 6 && !PG_ARGISNULL(6))
		queue_priority_of_send(q, &b, queue_priority_all(1, PG_GETARG_INT32(6)), "priority");
	else
		queue_priority_of_send(q, &b, NULL, "priority");
	send_general(rsinfo, q, &b, delay, false);
	queue_close(&call);
	return (Datum) 0;
}

/*
 * An optional per-entry array argument, checked to match the bodies, as
 * datums and null flags (all null when the argument is).
 */
void
queue_batch_array(FunctionCallInfo fcinfo, int argno, const char *argname, int n,
			Oid elemtype, Datum **vals, bool **nulls)
{
	ArrayType  *arr;
	int			m;

	if (PG_ARGISNULL(argno))
	{
		*vals = palloc0(n * sizeof(Datum));
		*nulls = palloc(n * sizeof(bool));
		memset(*nulls, true, n * sizeof(bool));
		return;
	}
	arr = PG_GETARG_ARRAYTYPE_P(argno);
	if (queue_array_len(arr, argname, true) != n)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("argument \"%s\" must have as many entries as \"bodies\"",
						argname)));
	deconstruct_array(arr, elemtype, -1, false, TYPALIGN_INT, vals, nulls, &m);
}

/*
 * A batch's priorities (1.12 on): priority for every entry, or priorities
 * one per entry (a null entry: the queue's default), not both.
 */
static void
batch_priorities(FunctionCallInfo fcinfo, QueueMeta *q, SendBatch *b)
{
	bool		one = PG_NARGS() > 6 && !PG_ARGISNULL(6);
	bool		many = PG_NARGS() > 7 && !PG_ARGISNULL(7);
	int32	   *given;
	Datum	   *vals;
	bool	   *nulls;
	int			m;

	if (one && many)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("argument \"priorities\" cannot be given with \"priority\""),
				 errhint("Give one priority for the batch, or one per message.")));
	if (one)
	{
		queue_priority_of_send(q, b, queue_priority_all(b->n, PG_GETARG_INT32(6)), "priority");
		return;
	}
	if (!many)
	{
		queue_priority_of_send(q, b, NULL, "priority");
		return;
	}
	if (queue_array_len(PG_GETARG_ARRAYTYPE_P(7), "priorities", true) != b->n)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("argument \"priorities\" must have as many entries as \"bodies\"")));
	deconstruct_array(PG_GETARG_ARRAYTYPE_P(7), INT4OID, 4, true, TYPALIGN_INT,
					  &vals, &nulls, &m);
	given = palloc(b->n * sizeof(int32));
	for (int i = 0; i < b->n; i++)
		given[i] = nulls[i] ? QUEUE_PRIORITY_NONE : DatumGetInt32(vals[i]);
	queue_priority_of_send(q, b, given, "priorities");
}

/*
 * queue.send_batch(queue_name, bodies text[]|jsonb[], delay,
 *					message_group_ids, deduplication_ids, attributes,
 *					priority, priorities)
 */
Datum
queue_send_batch(PG_FUNCTION_ARGS)
{
	QueueCall	call;
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	bool		is_jsonb = get_fn_expr_argtype(fcinfo->flinfo, 1) == JSONBARRAYOID;
	ArrayType  *bodies;
	SendBatch	b;
	QueueMeta  *q;
	int64		delay;

	queue_arg_notnull(fcinfo, 0, "queue_name");
	queue_arg_notnull(fcinfo, 1, "bodies");
	bodies = PG_GETARG_ARRAYTYPE_P(1);
	b.topic_copy = false;
	b.n = queue_array_len(bodies, "bodies", false);
	queue_batch_array(fcinfo, 3, "message_group_ids", b.n, TEXTOID, &b.groups, &b.group_nulls);
	queue_batch_array(fcinfo, 4, "deduplication_ids", b.n, TEXTOID, &b.dedups, &b.dedup_nulls);
	queue_batch_array(fcinfo, 5, "attributes", b.n, JSONBOID, &b.attrs, &b.attr_nulls);
	for (int i = 0; i < b.n; i++)
	{
		if (!b.group_nulls[i])
			queue_check_token_datum(b.groups[i], "message_group_ids");
		if (!b.dedup_nulls[i])
			queue_check_token_datum(b.dedups[i], "deduplication_ids");
		if (!b.attr_nulls[i])
			queue_check_attributes(DatumGetJsonbP(b.attrs[i]), "attributes");
	}
	queue_check_read_write();
	InitMaterializedSRF(fcinfo, 0);

	q = queue_open(&call, PG_GETARG_TEXT_PP(0), QPRIV_SEND);
	delay = send_delay(fcinfo, q);

	/* Bodies become text, each checked with its attributes against the size limit. */
	deconstruct_array(bodies, is_jsonb ? JSONBOID : TEXTOID, -1, false,
					  TYPALIGN_INT, &b.bodies, NULL, &b.n);
	for (int i = 0; i < b.n; i++)
	{
		b.bodies[i] = PointerGetDatum(queue_body_text(b.bodies[i], is_jsonb, q, "bodies"));
		queue_check_message_size(q, b.bodies[i], b.attrs[i], b.attr_nulls[i], "attributes");
	}
	batch_priorities(fcinfo, q, &b);

	send_general(rsinfo, q, &b, delay, true);
	queue_close(&call);
	return (Datum) 0;
}
