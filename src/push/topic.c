/*-------------------------------------------------------------------------
 *
 * topic.c
 *	  queue.publish and queue.publish_batch: one message to every subscribed
 *	  queue whose filters match (DESIGN.md "Topics").
 *
 * A topic is a row of queue._topics and a table queue_data.t<id> owned by
 * the topic's owner, whose ACL holds the topic's grants (publish = INSERT,
 * manage = TRUNCATE), as a queue's message table holds the queue's; the
 * table's rows are the deduplication ids the topic accepted within
 * QUEUE_TOPIC_DEDUP_WINDOW.  A subscription is a row of queue._subscriptions
 * naming the queue and the role that subscribed (queue.subscribe is
 * PL/pgSQL; the SQL file has it).
 *
 * Delivery is a send to each matching queue in the publisher's transaction
 * (send.c's queue_send_entries): all copies commit or none do, and each
 * copy is an ordinary message of its queue.  A copy carries the published
 * body, attributes and group; its deduplication_id reads
 * "<topic name>:<topic message id>", which names where it came from (the
 * copy is not deduplicated again by the queue: the topic did that).  A
 * delivery needs the subscription's owner to hold send on the queue at
 * the time of the publish: a revoke stops deliveries to that queue (the
 * publish skips it) without touching the subscription.
 *
 * The subscriptions of a topic come from topic_catalog.c's per-backend
 * cache, which takes in every change committed before the publish's
 * statement began, without locking anything a subscriber takes.
 *
 * FIFO topics: every message needs a group; publishers of one group
 * serialise on a lock held to commit (groups.c), so every subscribed FIFO
 * queue gets a group's messages in the topic's commit order; a message
 * whose deduplication id (or, without one, the SHA-256 of its body) the
 * topic accepted within QUEUE_TOPIC_DEDUP_WINDOW is a duplicate: it delivers
 * nothing and returns the original id.  Standard topics deduplicate too
 * when a publish gives a deduplication id.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/toast_compression.h"
#include "access/toast_internals.h"
#include "catalog/namespace.h"
#include "catalog/pg_type.h"
#include "commands/sequence.h"
#include "executor/spi.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/jsonb.h"
#include "utils/lsyscache.h"
#include "utils/tuplestore.h"

#include "common/queue_common.h"
#include "storage/queue_storage.h"
#include "access/queue_access.h"
#include "state/queue_state.h"
#include "fifo/queue_fifo.h"
#include "api/queue_api.h"
#include "push/queue_push.h"

PG_FUNCTION_INFO_V1(queue_publish);
PG_FUNCTION_INFO_V1(queue_publish_batch);

/* 42501 unless caller holds publish on topic t. */
static void
check_publish(TopicMeta *t, Oid caller)
{
	if (queue_role_holds(t->relid, caller, ACL_INSERT))
		return;
	ereport(ERROR,
			(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
			 errmsg("permission denied for topic \"%s\"", t->name),
			 errdetail("This needs the publish privilege on the topic."),
			 errhint("Its owner can run queue.grant_topic('%s', <role>, '{publish}').",
					 t->name)));
}

/* One message of a publish, as given. */
typedef struct TopicMessage
{
	Datum		body;			/* text */
	int			ntags;			/* -1: untagged */
	Datum	   *tags;
	char	   *routing_key;	/* or NULL */
	Datum		attrs;
	bool		attrs_null;
	Datum		group;
	bool		group_null;
	Datum		dedup;			/* the topic-level id, or (Datum) 0 */
	bool		dedup_null;
	int64		message_id;		/* the topic's id of it */
	bool		duplicate;
	int			delivered;
} TopicMessage;

static bool
sub_matches(TopicSub *s, TopicMessage *p)
{
	if (s->ntags >= 0 &&
		(p->ntags <= 0 || !queue_tags_match(s->tags, s->ntags, p->tags, p->ntags)))
		return false;
	if (s->nkeys >= 0)
	{
		bool		any = false;

		if (p->routing_key == NULL)
			return false;
		for (int k = 0; k < s->nkeys && !any; k++)
		{
			CHECK_FOR_INTERRUPTS();
			any = queue_binding_match(s->keys[k], p->routing_key);
		}
		if (!any)
			return false;
	}
	if (s->policy != NULL &&
		!queue_policy_match(s->policy, p->attrs_null ? NULL : DatumGetJsonbP(p->attrs)))
		return false;
	return true;
}

/*
 * Claim the topic-level deduplication ids of the messages that have one:
 * a duplicate gets the original's id.  Others get a new id.
 */
static void
claim_ids(TopicMeta *t, int n, TopicMessage *pubs, TimestampTz now)
{
	Oid			seq = queue_message_id_seq();
	Interval	window = {.time = QUEUE_TOPIC_DEDUP_WINDOW};

	for (int i = 0; i < n; i++)
	{
		TopicMessage *p = &pubs[i];
		Datum		args[4];
		bool		isnull;
		int			rc;

		p->message_id = nextval_internal(seq, false);
		if (p->dedup_null)
			continue;
		args[0] = p->dedup;
		args[1] = Int64GetDatum(p->message_id);
		args[2] = TimestampTzGetDatum(now);
		args[3] = IntervalPGetDatum(&window);
		rc = SPI_execute_plan(t->claim, args, NULL, false, 0);
		if (rc != SPI_OK_INSERT_RETURNING)
			elog(ERROR, "topic deduplication claim failed: %s", SPI_result_code_string(rc));
		if (SPI_processed == 1)
			continue;
		/* A duplicate (of another entry of this batch too: it is in now). */
		rc = SPI_execute_plan(t->original, args, NULL, false, 1);
		if (rc != SPI_OK_SELECT || SPI_processed != 1)
			elog(ERROR, "topic deduplication lookup failed: %s", SPI_result_code_string(rc));
		p->message_id = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0],
													SPI_tuptable->tupdesc, 1, &isnull));
		p->duplicate = true;
	}
}

/*
 * A body big enough to be compressed when stored, compressed once for all
 * the queues it goes to (the table would compress each copy again).  The
 * queues' size limits were checked on the body as given.  Left as it is
 * when it does not compress or goes to one queue.
 */
#define TOPIC_COMPRESS_MIN	2048	/* about where TOAST starts compressing */

static Datum
shared_body(Datum body, int fanout)
{
	Datum		c;

	if (fanout < 2 || VARSIZE_ANY_EXHDR(DatumGetPointer(body)) < TOPIC_COMPRESS_MIN ||
		VARATT_IS_EXTENDED(DatumGetPointer(body)))
		return body;
	c = toast_compress_datum(body, default_toast_compression);
	return c == (Datum) 0 ? body : c;
}

/* queue.publish's argument delay (queue.publish_batch has none). */
#define PUBLISH_DELAY_ARG	7

/*
 * Deliver the messages that are not duplicates to each subscription whose
 * filters match them: one send per queue, entries in call order.
 *
 * A delay given to the publish (fcinfo's PUBLISH_DELAY_ARG) must obey each
 * delivered queue's bound as a send's does: send.c's very check,
 * queue_arg_interval up to the queue's retention, with the queue named in
 * the message (22023).  A longer delay would deliver a copy that expires
 * before it can be seen.  The error undoes the copies made before it.
 */
static void
deliver(TopicMeta *t, int n, TopicMessage *pubs, FunctionCallInfo fcinfo,
		bool has_delay, int64 delay)
{
	SendBatch	b;
	int		   *which = palloc(n * sizeof(int));
	int64	   *ids = palloc(n * sizeof(int64));
	bool	   *dup = palloc(n * sizeof(bool));
	Datum	   *packed;

	b.bodies = palloc(n * sizeof(Datum));
	b.groups = palloc(n * sizeof(Datum));
	b.group_nulls = palloc(n * sizeof(bool));
	b.dedups = palloc(n * sizeof(Datum));
	b.dedup_nulls = palloc0(n * sizeof(bool));
	b.attrs = palloc(n * sizeof(Datum));
	b.attr_nulls = palloc(n * sizeof(bool));
	b.topic_copy = true;
	packed = palloc0(n * sizeof(Datum));

	for (int s = 0; s < t->nsubs; s++)
	{
		TopicSub   *sub = &t->subs[s];
		QueueMeta  *q;

		CHECK_FOR_INTERRUPTS();
		b.n = 0;
		for (int i = 0; i < n; i++)
			if (!pubs[i].duplicate && sub_matches(sub, &pubs[i]))
				which[b.n++] = i;
		if (b.n == 0)
			continue;
		/* Dropped since we read the subscriptions, or revoked: no delivery. */
		q = queue_lookup_extended(sub->queue_name, true);
		if (q == NULL || q->id != sub->queue_id ||
			!queue_meta_role_holds(q, sub->owner, QPRIV_SEND))
			continue;
		/* reads: argument "delay" for subscribed queue "q" must be ... */
		if (has_delay)
			(void) queue_arg_interval(fcinfo, PUBLISH_DELAY_ARG,
									  psprintf("delay\" for subscribed queue \"%s", q->name),
									  0, q->retention, 0);
		for (int k = 0; k < b.n; k++)
		{
			TopicMessage *p = &pubs[which[k]];

			if (VARSIZE_ANY_EXHDR(DatumGetPointer(p->body)) > q->max_message_size)
				ereport(ERROR,
						(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
						 errmsg("argument \"body\" is over the max_message_size of subscribed queue \"%s\"",
								q->name)));
			queue_check_message_size(q, p->body, p->attrs, p->attrs_null, "attributes");
			if (packed[which[k]] == (Datum) 0)
				packed[which[k]] = shared_body(p->body, t->nsubs);
			b.bodies[k] = packed[which[k]];
			b.groups[k] = p->group;
			b.group_nulls[k] = p->group_null;
			b.dedups[k] = CStringGetTextDatum(psprintf("%s:" INT64_FORMAT, t->name,
													   p->message_id));
			b.attrs[k] = p->attrs;
			b.attr_nulls[k] = p->attrs_null;
		}
		queue_priority_of_send(q, &b, NULL, "priority");	/* the queue's default */
		queue_send_entries(q, &b, has_delay ? delay : q->delay, true, ids, dup);
		for (int k = 0; k < b.n; k++)
			pubs[which[k]].delivered++;
		queue_count_only(QUEUE_DELIVERY_COUNTER_KEY(sub->id), QC_SENT, b.n);
	}
}

/*
 * The publish of n messages to topic t: FIFO checks and locks,
 * deduplication, delivery.
 */
static void
publish(TopicMeta *t, int n, TopicMessage *pubs, FunctionCallInfo fcinfo,
		bool has_delay, int64 delay, bool batch)
{
	const char *gname = batch ? "message_group_ids" : "message_group_id";
	int			npublished = 0;

	if (t->fifo)
	{
		Datum	   *groups = palloc(n * sizeof(Datum));
		int			ngroups;

		if (has_delay)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("argument \"delay\" is not allowed on a FIFO topic"),
					 errhint("The subscribed queues' own delay applies.")));
		for (int i = 0; i < n; i++)
		{
			if (pubs[i].group_null)
				ereport(ERROR,
						(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						 errmsg("argument \"%s\" is required on a FIFO topic", gname)));
			if (pubs[i].dedup_null)
			{
				pubs[i].dedup = PointerGetDatum(queue_content_dedup_id(DatumGetTextPP(pubs[i].body)));
				pubs[i].dedup_null = false;
			}
			groups[i] = pubs[i].group;
		}
		ngroups = queue_sort_unique_texts(groups, n);
		queue_fifo_lock_publishers(t->id, ngroups, groups);
	}
	claim_ids(t, n, pubs, GetCurrentTimestamp());
	deliver(t, n, pubs, fcinfo, has_delay, delay);
	for (int i = 0; i < n; i++)
		if (!pubs[i].duplicate)
			npublished++;
	if (npublished > 0)
		queue_count_only(QUEUE_TOPIC_COUNTER_KEY(t->id), QC_SENT, npublished);
}

/* A published body as text: not empty (the queues check their size). */
static Datum
publication_body(Datum d, bool is_jsonb, const char *argname)
{
	text	   *t;

	if (is_jsonb)
		t = cstring_to_text(JsonbToCString(NULL, &DatumGetJsonbP(d)->root,
										   VARSIZE(DatumGetJsonbP(d))));
	else
		t = DatumGetTextPP(d);
	if (VARSIZE_ANY_EXHDR(t) == 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("argument \"%s\" must not be empty", argname)));
	return PointerGetDatum(t);
}

static void
put_result(ReturnSetInfo *rsinfo, TopicMessage *p, int ordinal, bool batch)
{
	Datum		values[4];
	bool		isnull[4] = {false, false, false, false};
	int			off = batch ? 1 : 0;

	values[0] = Int32GetDatum(ordinal);
	values[off] = Int64GetDatum(p->message_id);
	values[off + 1] = Int32GetDatum(p->delivered);
	values[off + 2] = BoolGetDatum(p->duplicate);
	tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, isnull);
}

/* The tags argument (every message's), checked: -1 when null. */
static int
tags_arg(FunctionCallInfo fcinfo, int argno, Datum **tags)
{
	if (PG_ARGISNULL(argno))
		return -1;
	return queue_tag_list(PG_GETARG_ARRAYTYPE_P(argno), "tags", tags);
}

/*
 * queue.publish(topic_name, body text|jsonb, tags, routing_key, attributes,
 *				 message_group_id, deduplication_id, delay)
 */
Datum
queue_publish(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	bool		is_jsonb = get_fn_expr_argtype(fcinfo->flinfo, 1) == JSONBOID;
	QueueCall	call;
	TopicMeta  *t;
	TopicMessage p = {0};
	text	   *g;
	text	   *d;
	int64		delay = 0;

	queue_arg_notnull(fcinfo, 0, "topic_name");
	queue_arg_notnull(fcinfo, 1, "body");
	p.body = publication_body(PG_GETARG_DATUM(1), is_jsonb, "body");
	p.ntags = tags_arg(fcinfo, 2, &p.tags);
	if (!PG_ARGISNULL(3))
	{
		queue_check_routing_key(PG_GETARG_TEXT_PP(3), "routing_key");
		p.routing_key = text_to_cstring(PG_GETARG_TEXT_PP(3));
	}
	p.attrs_null = PG_ARGISNULL(4);
	if (!p.attrs_null)
	{
		queue_check_attributes(PG_GETARG_JSONB_P(4), "attributes");
		p.attrs = PG_GETARG_DATUM(4);
	}
	g = queue_arg_token(fcinfo, 5, "message_group_id");
	d = queue_arg_token(fcinfo, 6, "deduplication_id");
	p.group = PointerGetDatum(g);
	p.group_null = (g == NULL);
	p.dedup = PointerGetDatum(d);
	p.dedup_null = (d == NULL);
	if (!PG_ARGISNULL(PUBLISH_DELAY_ARG))
		delay = queue_arg_interval(fcinfo, PUBLISH_DELAY_ARG, "delay", 0,
								   INT64CONST(14) * USECS_PER_DAY, 0);
	queue_check_read_write();
	InitMaterializedSRF(fcinfo, 0);

	queue_enter(&call);
	SPI_connect();
	queue_citus_check_call(fcinfo); /* storage/citus.c */
	t = queue_topic_lookup(PG_GETARG_TEXT_PP(0));
	check_publish(t, call.caller);
	publish(t, 1, &p, fcinfo, !PG_ARGISNULL(PUBLISH_DELAY_ARG), delay, false);
	put_result(rsinfo, &p, 1, false);
	SPI_finish();
	queue_leave(&call);
	return (Datum) 0;
}

/*
 * queue.publish_batch(topic_name, bodies text[]|jsonb[], tags, routing_keys,
 *					   attributes, message_group_ids, deduplication_ids)
 */
Datum
queue_publish_batch(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	bool		is_jsonb = get_fn_expr_argtype(fcinfo->flinfo, 1) == JSONBARRAYOID;
	QueueCall	call;
	TopicMeta  *t;
	TopicMessage *pubs;
	ArrayType  *bodies;
	Datum	   *bvals;
	Datum	   *tags;
	int			ntags;
	Datum	   *keys,
			   *attrs,
			   *groups,
			   *dedups;
	bool	   *keys_n,
			   *attrs_n,
			   *groups_n,
			   *dedups_n;
	int			n;

	queue_arg_notnull(fcinfo, 0, "topic_name");
	queue_arg_notnull(fcinfo, 1, "bodies");
	bodies = PG_GETARG_ARRAYTYPE_P(1);
	n = queue_array_len(bodies, "bodies", false);
	ntags = tags_arg(fcinfo, 2, &tags);
	queue_batch_array(fcinfo, 3, "routing_keys", n, TEXTOID, &keys, &keys_n);
	queue_batch_array(fcinfo, 4, "attributes", n, JSONBOID, &attrs, &attrs_n);
	queue_batch_array(fcinfo, 5, "message_group_ids", n, TEXTOID, &groups, &groups_n);
	queue_batch_array(fcinfo, 6, "deduplication_ids", n, TEXTOID, &dedups, &dedups_n);
	deconstruct_array(bodies, is_jsonb ? JSONBOID : TEXTOID, -1, false,
					  TYPALIGN_INT, &bvals, NULL, &n);
	pubs = palloc0(n * sizeof(TopicMessage));
	for (int i = 0; i < n; i++)
	{
		TopicMessage *p = &pubs[i];

		p->body = publication_body(bvals[i], is_jsonb, "bodies");
		p->ntags = ntags;
		p->tags = tags;
		if (!keys_n[i])
		{
			queue_check_routing_key(DatumGetTextPP(keys[i]), "routing_keys");
			p->routing_key = TextDatumGetCString(keys[i]);
		}
		p->attrs = attrs[i];
		p->attrs_null = attrs_n[i];
		if (!p->attrs_null)
			queue_check_attributes(DatumGetJsonbP(attrs[i]), "attributes");
		p->group = groups[i];
		p->group_null = groups_n[i];
		if (!p->group_null)
			queue_check_token_datum(groups[i], "message_group_ids");
		p->dedup = dedups[i];
		p->dedup_null = dedups_n[i];
		if (!p->dedup_null)
			queue_check_token_datum(dedups[i], "deduplication_ids");
	}
	queue_check_read_write();
	InitMaterializedSRF(fcinfo, 0);

	queue_enter(&call);
	SPI_connect();
	queue_citus_check_call(fcinfo); /* storage/citus.c */
	t = queue_topic_lookup(PG_GETARG_TEXT_PP(0));
	check_publish(t, call.caller);
	publish(t, n, pubs, fcinfo, false, 0, true);
	for (int i = 0; i < n; i++)
		put_result(rsinfo, &pubs[i], i + 1, true);
	SPI_finish();
	queue_leave(&call);
	return (Datum) 0;
}
