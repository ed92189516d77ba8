/*-------------------------------------------------------------------------
 *
 * receive.c
 *	  queue.receive and queue.peek.
 *
 * A receive leases up to max_messages visible messages: one UPDATE that
 * takes them with FOR UPDATE SKIP LOCKED (each visible message goes to
 * exactly one caller), pushes their visible_at to the end of the lease,
 * counts the receive and stamps a new receipt nonce.  Before it returns
 * them, lease/ settles what the statement leased (queue_lease_settle):
 * the leases are registered, so that a rollback still counts them;
 * receives of them that rolled back and are not in their rows yet are
 * written now, and a message whose count so reaches max_receive_count,
 * or whose retry delay has not passed, is given up rather than delivered;
 * rows flagged as received too often go to the dead-letter queue.
 *
 * A queue with rate limits (fifo/rate.c): each try reserves what the
 * queue's window allows before it leases and settles that to what it
 * leased; a fair receive reserves each tenant's share (fair.c) and
 * receive_step settles those after its statement.  A waiting receive that
 * got nothing sleeps at most until the window opens (state/wait.c).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "catalog/pg_type.h"
#include "utils/array.h"
#include "executor/spi.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/datum.h"
#include "utils/resowner.h"
#include "utils/timestamp.h"
#include "utils/tuplestore.h"

#include "common/queue_common.h"
#include "storage/queue_storage.h"
#include "access/queue_access.h"
#include "state/queue_state.h"
#include "fifo/queue_fifo.h"
#include "lease/queue_lease.h"
#include "api/queue_api.h"

PG_FUNCTION_INFO_V1(queue_receive);
PG_FUNCTION_INFO_V1(queue_peek);

/* queue_receive_window_opens (core_api.h) */
static TimestampTz queue_rate_next_open = 0;

TimestampTz
queue_receive_window_opens(void)
{
	return queue_rate_next_open;
}

/*
 * Set by a consumer process (consumer.c): a FIFO receive takes messages of
 * one group only, so each batch holds back one group at most.
 */
bool		queue_receive_one_group = false;

/*
 * queue.message has 12 columns: a receive statement's (RCOL_*,
 * queue_storage.h) up to visible_at, with the receipt as the second, then
 * priority (1.12; 11 columns before the update).
 */
#define MESSAGE_NATTS		12

/* A row of a FIFO lease with its sort keys (see order_fifo_rows). */
typedef struct FifoRow
{
	HeapTuple	tup;
	int64		id;
	int64		first;			/* the smallest id of its group in the batch */
	Datum		group;			/* text */
} FifoRow;

static int
fifo_row_by_group(const void *a, const void *b)
{
	const FifoRow *ra = a;
	const FifoRow *rb = b;
	int			c = queue_text_cmp(&ra->group, &rb->group);

	return c != 0 ? c : (ra->id > rb->id) - (ra->id < rb->id);
}

static int
fifo_row_by_delivery(const void *a, const void *b)
{
	const FifoRow *ra = a;
	const FifoRow *rb = b;

	if (ra->first != rb->first)
		return (ra->first > rb->first) - (ra->first < rb->first);
	return (ra->id > rb->id) - (ra->id < rb->id);
}

/*
 * Put the rows of a FIFO lease (QP_FIFO_RECEIVE, which returns them in no
 * order) in delivery order: group by group, oldest group first, each in
 * order.  A group's first message in the batch is its head (a group gives
 * from its head on), so groups sort by their smallest id.
 */
static void
order_fifo_rows(SPITupleTable *tt, uint64 nrows)
{
	FifoRow    *rows;

	if (nrows < 2)
		return;
	rows = palloc(nrows * sizeof(FifoRow));
	for (uint64 r = 0; r < nrows; r++)
	{
		bool		isnull;

		rows[r].tup = tt->vals[r];
		rows[r].id = DatumGetInt64(SPI_getbinval(tt->vals[r], tt->tupdesc,
												 RCOL_MESSAGE_ID, &isnull));
		rows[r].group = SPI_getbinval(tt->vals[r], tt->tupdesc, RCOL_GROUP, &isnull);
	}
	qsort(rows, nrows, sizeof(FifoRow), fifo_row_by_group);
	for (uint64 r = 0; r < nrows; r++)
		rows[r].first = (r > 0 && queue_text_cmp(&rows[r - 1].group, &rows[r].group) == 0) ?
			rows[r - 1].first : rows[r].id;
	qsort(rows, nrows, sizeof(FifoRow), fifo_row_by_delivery);
	for (uint64 r = 0; r < nrows; r++)
		tt->vals[r] = rows[r].tup;
	pfree(rows);
}

/*
 * Copy rows of an SPI result into the caller's tuplestore as queue.message,
 * with a receipt per row when with_receipt.
 */
static void
emit_messages(ReturnSetInfo *rsinfo, QueueMeta *q, SPITupleTable *tt,
			  uint64 nrows, bool with_receipt, uint64 nonce,
			  const bool *skip, const int32 *count_of)
{
	TupleDesc	src = tt->tupdesc;

	for (uint64 r = 0; r < nrows; r++)
	{
		HeapTuple	tup = tt->vals[r];
		Datum		values[MESSAGE_NATTS];
		bool		nulls[MESSAGE_NATTS];
		int			out = 0;

		if (queue_row_is_dead_letter(tt, r) || (skip != NULL && skip[r]))
			continue;

		for (int col = 1; col <= RCOL_VISIBLE_AT; col++)
		{
			values[out] = SPI_getbinval(tup, src, col, &nulls[out]);
			if (col == RCOL_RECEIVE_COUNT && count_of != NULL)
				values[out] = Int32GetDatum(count_of[r]);
			out++;
			if (col == RCOL_MESSAGE_ID)
			{
				/* the receipt goes right after message_id */
				if (with_receipt)
				{
					values[out] = PointerGetDatum(
						queue_receipt_make(q->id, DatumGetInt64(values[0]), nonce));
					nulls[out] = false;
				}
				else
				{
					values[out] = (Datum) 0;
					nulls[out] = true;
				}
				out++;
			}
		}
		if (rsinfo->setDesc->natts >= MESSAGE_NATTS)
		{
			/* a standard queue's message has one; null in the table is 4 */
			Datum		p = SPI_getbinval(tup, src, RCOL_PRIORITY, &nulls[out]);

			values[out] = Int32GetDatum(nulls[out] ? 4 : (int32) DatumGetInt16(p));
			nulls[out] = q->fifo;
			out++;
		}
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
}

/*
 * A retry of a receive_attempt_id seen within RECEIVE_ATTEMPT_WINDOW: if
 * every message it returned is still leased under that receive (not
 * deleted, received again, changed or expired), emit them again with the
 * same receipts and return true.
 */
#define RECEIVE_ATTEMPT_WINDOW	(5 * USECS_PER_MINUTE)

static bool
replay_attempt(ReturnSetInfo *rsinfo, QueueMeta *q, text *attempt,
			   TimestampTz now)
{
	Datum		args[2];
	bool		isnull;
	uint64		nonce;
	Datum		ids;
	ArrayType  *vis;
	Datum	   *vis_elems;
	int			nvis;
	int			rc;

	args[0] = PointerGetDatum(attempt);
	args[1] = TimestampTzGetDatum(now - RECEIVE_ATTEMPT_WINDOW);
	rc = queue_exec(q, QP_ATTEMPT_GET, args, NULL, false, 1);
	if (rc != SPI_OK_SELECT)
		elog(ERROR, "receive attempt lookup failed: %s", SPI_result_code_string(rc));
	if (SPI_processed == 0)
		return false;
	nonce = (uint64) DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
	ids = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 2, &isnull);
	vis = DatumGetArrayTypeP(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 3, &isnull));
	deconstruct_array(vis, TIMESTAMPTZOID, 8, FLOAT8PASSBYVAL, TYPALIGN_DOUBLE,
					  &vis_elems, NULL, &nvis);

	args[0] = ids;
	args[1] = Int64GetDatum((int64) nonce);
	rc = queue_exec(q, QP_ATTEMPT_MSGS, args, NULL, false, 0);
	if (rc != SPI_OK_SELECT)
		elog(ERROR, "receive attempt replay failed: %s", SPI_result_code_string(rc));
	if (SPI_processed != (uint64) nvis)
		return false;			/* one was deleted or received again */
	for (int i = 0; i < nvis; i++)
	{
		TimestampTz vis_now = DatumGetTimestampTz(SPI_getbinval(SPI_tuptable->vals[i],
																SPI_tuptable->tupdesc,
																RCOL_VISIBLE_AT, &isnull));

		if (vis_now != DatumGetTimestampTz(vis_elems[i]))
			return false;		/* its visibility was changed */
		if (vis_now <= now)
			return false;		/* its lease ran out: others may have it */
	}
	emit_messages(rsinfo, q, SPI_tuptable, SPI_processed, true, nonce, NULL, NULL);
	return true;
}

/* What one receive call has leased so far, across its statements. */
typedef struct Received
{
	bool		by_priority;	/* the queue reads level by level (fifo/priority.c) */
	int			n;				/* messages delivered */
	int64	   *ids;
	Datum	   *visible_ats;
	int			ngroups;		/* FIFO groups touched (delivered or moved) */
	int			maxgroups;
	Datum	   *groups;
	int			nmoves;			/* moved to the dead-letter queue this try */
	int			nmoved_groups;	/* FIFO groups of the last step's moves */
	Datum	   *moved_groups;
	bool		fair_raced;		/* the last fair step's tenants gave nothing */
} Received;

/* Remember what a receive with a receive_attempt_id returned. */
static void
record_attempt(QueueMeta *q, text *attempt, TimestampTz now, uint64 nonce,
			   Received *got)
{
	Datum		args[5];
	int			rc;

	args[0] = PointerGetDatum(attempt);
	args[1] = TimestampTzGetDatum(now);
	args[2] = Int64GetDatum((int64) nonce);
	args[3] = queue_int8_array(got->n, got->ids);
	args[4] = PointerGetDatum(construct_array(got->visible_ats, got->n, TIMESTAMPTZOID, 8,
											  FLOAT8PASSBYVAL, TYPALIGN_DOUBLE));
	rc = queue_exec(q, QP_ATTEMPT_PUT, args, NULL, false, 0);
	if (rc != SPI_OK_INSERT)
		elog(ERROR, "recording receive attempt failed: %s", SPI_result_code_string(rc));
}

/*
 * One receive statement: lease up to want messages (on a FIFO queue from
 * at most group_limit groups, 0 for no limit, none of those already
 * touched), move the ones received too often to the dead-letter queue,
 * emit the rest.
 * Returns the number of rows the statement produced (deliveries and
 * moves); *moved tells how many of them were moves.
 */
static uint64
receive_step(ReturnSetInfo *rsinfo, QueueMeta *q, QueuePlanKind kind,
			 TimestampTz now, int64 vt, uint64 nonce, int want,
			 int group_limit, Received *got, uint64 *moved)
{
	Datum		args[QUEUE_FAIR_ARGS];
	char		nulls[QUEUE_FAIR_ARGS];
	SPITupleTable *tt;
	uint64		nrows;
	int			rc;
	int32	   *counts;
	int			ncounted = 0;
	uint64	   *rows;
	QueueLeased leased;
	int			given_up;
	bool		isnull;
	bool		bounded = false;
	QueueReadyRead ready;
	QueuePlanKind run;
	TimestampTz abort_floor;	/* the bound the abort lowers to (counts.c) */

	memset(nulls, ' ', sizeof(nulls));
	args[0] = TimestampTzGetDatum(now);
	args[1] = TimestampTzGetDatum(now + vt);
	args[2] = Int64GetDatum((int64) nonce);
	args[3] = TimestampTzGetDatum(now - q->retention);
	args[4] = Int32GetDatum(want);

	/*
	 * Whether the queue reads by priority is asked at each step: the
	 * plain statements read only the messages stored without one (the
	 * visible_at index's), so a receive must switch once the queue's
	 * first priority is seen (a waiting one too).
	 */
	if (!got->by_priority)
		got->by_priority = queue_has_priorities(q);
	if (kind == QP_FAIR_RECEIVE)
	{
		/* the tenants to take from (fair.c); none may have a message */
		if (!queue_fair_args(q, &now, want, got->n, got->ids, got->by_priority, args, nulls))
		{
			queue_rate_settle_tenants();
			*moved = 0;
			got->nmoved_groups = 0;
			got->fair_raced = false;
			return 0;
		}
		/* a rate limit's take moved now: the lease hands out at that time */
		args[0] = TimestampTzGetDatum(now);
		args[1] = TimestampTzGetDatum(now + vt);
	}
	else if (q->fifo)
	{
		args[5] = Int32GetDatum(group_limit);
		nulls[5] = group_limit > 0 ? ' ' : 'n';
		args[6] = kind == QP_FIFO_RECEIVE_DLQ_MORE ?
			queue_text_array(got->nmoved_groups, got->moved_groups, NULL) :
			queue_text_array(got->ngroups, got->groups, NULL);
		if (kind != QP_FIFO_RECEIVE_DLQ_MORE)
		{
			/* the walk of the group heads starts at their bound (groups.c) */
			args[kind == QP_FIFO_RECEIVE ? 7 : 9] =
				Int64GetDatum(queue_fifo_heads_from(q, now, &ready));
			bounded = true;
		}
		if (kind != QP_FIFO_RECEIVE)
		{
			args[7] = Int32GetDatum(q->max_receive_count);
			args[8] = queue_int8_array(got->n, got->ids);
		}
	}
	else
	{
		/* a standard queue's scan starts at its ready bound (counts.c) */
		TimestampTz from = queue_ready_from(q->id, q->shared ? -q->store_id : (int64) q->relid,
											now, &q->counter_slot, &ready);

		/* (a first priority whose commit came since is read now) */
		if (!got->by_priority && ready.kinds >= 0 && (ready.kinds & QUEUE_PRIORITIES))
			got->by_priority = true;

		if (kind == QP_RECEIVE)
			args[5] = TimestampTzGetDatum(from);
		else
		{
			args[5] = Int32GetDatum(q->max_receive_count);
			args[6] = queue_int8_array(got->n, got->ids);
			args[7] = TimestampTzGetDatum(from);
		}
		/* ... and each priority's walk at its own (fifo/priority.c) */
		if (got->by_priority)
			args[kind == QP_RECEIVE ? 6 : 8] = queue_priority_bounds(&ready);
		bounded = true;
	}
	/*
	 * What the statement leases goes back where it was if the transaction
	 * aborts: at or above the bound the scan started from (a fair
	 * receive's anywhere below now), which the abort lowers the bound to;
	 * and the leases are ready again from their end, should that pass
	 * before they commit (counts.c).  Noted when the statement leased
	 * something, or failed (it may have leased some): a waiting receive's
	 * try that found nothing rolls back, and must leave the bound alone.
	 */
	run = got->by_priority ? queue_priority_plan(q, kind, bounded ? ready.kinds : -1) : kind;
	abort_floor = bounded ? queue_ready_floor(&ready, got->by_priority) : DT_NOBEGIN;
	PG_TRY();
	{
		rc = queue_exec(q, run, args, nulls, false, 0);
	}
	PG_CATCH();
	{
		if (!q->fifo)
			queue_note_ready(q->id, QUEUE_READY_NONE, abort_floor);
		PG_RE_THROW();
	}
	PG_END_TRY();
	if (rc != SPI_OK_UPDATE_RETURNING && rc != SPI_OK_SELECT)
		elog(ERROR, "queue receive failed: %s", SPI_result_code_string(rc));
	tt = SPI_tuptable;
	nrows = SPI_processed;
	/* the tenants' reservations become what the lease took (fifo/rate.c) */
	if (kind == QP_FAIR_RECEIVE && q->rate_limit_per_group > 0)
	{
		queue_rate_used_rows(tt, nrows);
		queue_rate_settle_tenants();
	}
	if (!q->fifo && nrows > 0)
		queue_note_ready(q->id, now + vt, abort_floor);
	got->fair_raced = kind == QP_FAIR_RECEIVE && nrows == 0;
	if (bounded && q->fifo)
		queue_fifo_heads_raise(q, &ready, now, tt);
	else if (bounded && got->by_priority)
		queue_priority_raise(&ready, run, tt, nrows, want, now);
	else if (bounded)
	{
		/*
		 * Nothing ready is left below now when the scan came short, else
		 * below the latest sent_at it leased (sent_at <= visible_at).  A
		 * lease by priority raises its levels' bounds instead, never this
		 * one: a full batch may have left older messages of lower levels,
		 * and the null ones of level 4 are looked for among the first
		 * visible only.
		 */
		TimestampTz to = DT_NOBEGIN;

		if (nrows < (uint64) want)
			to = now;
		else
			for (uint64 r = 0; r < nrows; r++)
			{
				Datum		d = SPI_getbinval(tt->vals[r], tt->tupdesc, RCOL_SENT_AT, &isnull);

				if (!isnull && DatumGetTimestampTz(d) > to)
					to = DatumGetTimestampTz(d);
			}
		queue_ready_raise(&ready, to);
	}
	counts = palloc(Max(nrows, 1) * sizeof(int32));
	rows = palloc(Max(nrows, 1) * sizeof(uint64));
	if (kind == QP_FIFO_RECEIVE)
		order_fifo_rows(tt, nrows);
	else if (got->by_priority)
		queue_priority_order_rows(tt, nrows);
	*moved = 0;
	got->nmoved_groups = 0;

	for (uint64 r = 0; r < nrows; r++)
	{
		Datum		g = SPI_getbinval(tt->vals[r], tt->tupdesc, RCOL_GROUP, &isnull);

		if (queue_row_is_dead_letter(tt, r))
		{
			(*moved)++;
			got->nmoves++;
			if (q->fifo && !isnull &&
				(got->nmoved_groups == 0 ||
				 !datumIsEqual(got->moved_groups[got->nmoved_groups - 1], g, false, -1)))
				got->moved_groups[got->nmoved_groups++] =
					PointerGetDatum(PG_DETOAST_DATUM_COPY(g));
		}

		/* A group's rows come together: note each group once. */
		if (q->fifo && !isnull &&
			(got->ngroups == 0 ||
			 !datumIsEqual(got->groups[got->ngroups - 1], g, false, -1)))
		{
			if (got->ngroups == got->maxgroups)
			{
				got->maxgroups *= 2;
				got->groups = repalloc(got->groups, got->maxgroups * sizeof(Datum));
			}
			got->groups[got->ngroups++] = PointerGetDatum(PG_DETOAST_DATUM_COPY(g));
		}
		if (queue_row_is_dead_letter(tt, r))
			continue;
		got->ids[got->n] = DatumGetInt64(SPI_getbinval(tt->vals[r], tt->tupdesc,
													   RCOL_MESSAGE_ID, &isnull));
		got->visible_ats[got->n] = SPI_getbinval(tt->vals[r], tt->tupdesc,
												 RCOL_VISIBLE_AT, &isnull);
		rows[ncounted] = r;
		counts[ncounted++] = DatumGetInt32(SPI_getbinval(tt->vals[r], tt->tupdesc,
														 RCOL_RECEIVE_COUNT, &isnull));
		got->n++;
	}

	/*
	 * If this (sub)transaction rolls back, these receives still count;
	 * receives of them that rolled back before count now, and messages
	 * received too often go to the dead-letter queue instead (lease/).
	 */
	leased.tt = tt;
	leased.nrows = nrows;
	leased.n = ncounted;
	leased.rows = rows;
	leased.ids = got->ids + (got->n - ncounted);
	leased.visible_ats = got->visible_ats + (got->n - ncounted);
	leased.counts = counts;
	given_up = queue_lease_settle(q, &leased, vt, now);
	got->n -= ncounted - leased.n;
	/* Like moves, those given up leave room in the batch for another try. */
	*moved += given_up;
	got->nmoves += given_up;
	emit_messages(rsinfo, q, tt, nrows, true, nonce, leased.skip, leased.count_of);
	return nrows;
}

/*
 * One try of a receive: statements until the batch is full, the queue has
 * nothing more, or (on a FIFO queue in a transaction block) no further
 * group gives anything.
 */
static void
receive_try(ReturnSetInfo *rsinfo, QueueMeta *q, QueuePlanKind kind,
			TimestampTz now, int64 vt, uint64 nonce, int max_messages,
			bool group_by_group, Received *got)
{
	int			races = 0;

	got->ngroups = 0;
	for (;;)
	{
		uint64		moved;
		uint64		rows;
		int			group_limit;

		/*
		 * Groups one statement may take: one in a transaction block; else
		 * as many as the batch needs, which QP_FIFO_RECEIVE's walk finds
		 * without a limit (it is pulled by the batch's; see plans.c).
		 */
		if (group_by_group)
			group_limit = 1;
		else if (kind == QP_FIFO_RECEIVE)
			group_limit = 0;
		else
			group_limit = max_messages - got->n;
		rows = receive_step(rsinfo, q, kind, now, vt, nonce,
							max_messages - got->n, group_limit, got, &moved);

		/*
		 * Messages moved to the dead-letter queue leave room in the batch:
		 * on a FIFO queue the rest of their groups come first (a moved head
		 * opens its group), then another try.
		 */
		while (moved > 0 && q->fifo && got->nmoved_groups > 0 &&
			   got->n < max_messages)
			rows += receive_step(rsinfo, q, QP_FIFO_RECEIVE_DLQ_MORE, now, vt,
								 nonce, max_messages - got->n, 1, got, &moved);
		/*
		 * The tenants a fair step chose had visible messages when it
		 * looked, and others took them before its lease: look again (a
		 * few times; FOR UPDATE SKIP LOCKED races alike, once).
		 */
		if (rows == 0 && got->fair_raced && ++races < 3)
		{
			CHECK_FOR_INTERRUPTS();
			continue;
		}
		if (rows == 0 || got->n >= max_messages)
			break;
		if (queue_receive_one_group && got->n > 0)
			break;
		/*
		 * A fair receive shares the batch among tenants before it knows
		 * how many messages each has: one that had fewer leaves room, so
		 * it goes on while a statement delivers (at most max_messages).
		 */
		if (!group_by_group && moved == 0 && kind != QP_FAIR_RECEIVE)
			break;
		CHECK_FOR_INTERRUPTS();
	}
}

/*
 * receive_try in a subtransaction of its own, rolled back when it
 * delivered nothing (queue_receive says why), or on an error before the
 * error goes up.  Apart from queue_receive so its PG_TRY is not nested in
 * the caller's.
 */
static void
receive_try_subxact(ReturnSetInfo *rsinfo, QueueMeta *q, QueuePlanKind kind,
					TimestampTz now, int64 vt, uint64 nonce, int max_messages,
					bool group_by_group, Received *got)
{
	MemoryContext cxt = CurrentMemoryContext;
	ResourceOwner owner = CurrentResourceOwner;

	BeginInternalSubTransaction(NULL);
	MemoryContextSwitchTo(cxt);
	PG_TRY();
	{
		receive_try(rsinfo, q, kind, now, vt, nonce, max_messages,
					group_by_group, got);
	}
	PG_CATCH();
	{
		MemoryContextSwitchTo(cxt);
		RollbackAndReleaseCurrentSubTransaction();
		MemoryContextSwitchTo(cxt);
		CurrentResourceOwner = owner;
		PG_RE_THROW();
	}
	PG_END_TRY();
	/* Keep a try that delivered, or moved dead letters. */
	if (got->n > 0 || got->nmoves > 0)
		ReleaseCurrentSubTransaction();
	else
		RollbackAndReleaseCurrentSubTransaction();
	MemoryContextSwitchTo(cxt);
	CurrentResourceOwner = owner;
}

/*
 * queue.receive(queue_name, max_messages, visibility_timeout, wait,
 *				 receive_attempt_id)
 */
Datum
queue_receive(PG_FUNCTION_ARGS)
{
	QueueCall	call;
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	QueueMeta  *q;
	int32		max_messages;
	int64		vt;
	int64		wait;
	text	   *attempt;
	uint64		nonce;
	TimestampTz deadline = 0;
	TimestampTz now;
	QueuePlanKind kind;
	Received	got;
	bool		group_by_group;
	bool		slept = false;
	bool		limited;
	int			held = 0;

	queue_arg_notnull(fcinfo, 0, "queue_name");
	max_messages = queue_arg_int(fcinfo, 1, "max_messages", 1,
								 QUEUE_MAX_MESSAGES, -1);
	attempt = queue_arg_token(fcinfo, 4, "receive_attempt_id");
	queue_check_read_write();
	InitMaterializedSRF(fcinfo, MAT_SRF_USE_EXPECTED_DESC);

	q = queue_open(&call, PG_GETARG_TEXT_PP(0), QPRIV_RECEIVE);
	vt = queue_arg_interval(fcinfo, 2, "visibility_timeout", 0,
							QUEUE_MAX_VISIBILITY, q->visibility_timeout);
	wait = queue_arg_interval(fcinfo, 3, "wait", 0, QUEUE_MAX_WAIT,
							  q->receive_wait);

	/*
	 * A wait re-runs the receive; only a fresh snapshot per try can see
	 * messages committed meanwhile, which REPEATABLE READ and SERIALIZABLE
	 * do not give.
	 */
	if (wait > 0 && IsolationUsesXactSnapshot())
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_TRANSACTION_STATE),
				 errmsg("argument \"wait\" needs READ COMMITTED isolation"),
				 errdetail("A waiting receive must see messages committed after it began."),
				 errhint("Receive with wait => '0', or in a READ COMMITTED transaction.")));

	queue_receive_begins();

	now = GetCurrentTimestamp();
	if (attempt != NULL && replay_attempt(rsinfo, q, attempt, now))
	{
		queue_receive_ends();
		queue_close(&call);
		return (Datum) 0;
	}

	if (queue_receive_is_fair(q))
		kind = QP_FAIR_RECEIVE;	/* a fair queue's (fair.c) */
	else if (q->max_receive_count > 0)
		kind = q->fifo ? QP_FIFO_RECEIVE_DLQ : QP_RECEIVE_DLQ;
	else
		kind = q->fifo ? QP_FIFO_RECEIVE : QP_RECEIVE;
	memset(&got, 0, sizeof(got));
	got.ids = palloc(max_messages * sizeof(int64));
	got.visible_ats = palloc(max_messages * sizeof(Datum));
	got.maxgroups = max_messages;
	got.groups = palloc(got.maxgroups * sizeof(Datum));
	got.moved_groups = palloc(max_messages * sizeof(Datum));

	/*
	 * A FIFO receive locks each group it considers until its transaction
	 * ends.  In autocommit that is the statement, so one statement may
	 * consider as many groups as it could need; inside a transaction block
	 * a receive takes one group per statement, so it never holds groups it
	 * delivered nothing from while the caller works.
	 */
	group_by_group = q->fifo && (IsTransactionBlock() || queue_receive_one_group);

	nonce = queue_receipt_nonce();
	limited = queue_rate_limited(q);
	PG_TRY();
	{
	for (;;)
	{
		uint64		generation = queue_wait_generation(q);
		int			allowed = max_messages;

		/*
		 * A queue-wide rate limit: the try takes at most what the window
		 * allows, reserved now and settled to what it took (fifo/rate.c).
		 */
		q->rate_opens_at = 0;
		if (limited)
		{
			allowed = queue_rate_take_queue(q, max_messages, &now);
			if (allowed < max_messages)
				held = Max(held, max_messages - allowed);
		}

		/*
		 * A try that finds nothing may still have locked rows: FOR UPDATE
		 * keeps its lock on a row whose newer version (leased by someone
		 * else a moment ago) no longer qualifies.  A waiting receive must
		 * not sleep on such locks (the other receiver's delete would wait
		 * for our wait), so each of its tries runs in a subtransaction
		 * that is rolled back when it delivered nothing.  An error in a
		 * try (statement_timeout, a cancel, a lock timeout) takes the
		 * subtransaction down before it goes up, as PL/pgSQL's exception
		 * blocks do, so a caller that catches it is back in its own
		 * transaction.
		 */
		got.nmoves = 0;
		if (allowed == 0)
			;					/* the window is closed: wait for it below */
		else if (wait > 0)
			receive_try_subxact(rsinfo, q, kind, now, vt, nonce, allowed,
								group_by_group, &got);
		else
			receive_try(rsinfo, q, kind, now, vt, nonce, allowed,
						group_by_group, &got);
		if (limited)
		{
			queue_rate_used_queue(got.n);
			queue_rate_settle_queue();
			/* the limit held back only what the queue had to give */
			if (allowed > 0 && got.n < allowed)
				held = 0;
		}
		if (got.n > 0 || wait == 0)
			break;
		if (deadline == 0)
			deadline = now + wait;
		if (!queue_wait(q, deadline, generation))
			break;
		slept = true;
		now = GetCurrentTimestamp();
	}
	}
	PG_CATCH();
	{
		/* a reservation not settled counts in full (fifo/rate.c) */
		queue_rate_abandon();
		PG_RE_THROW();
	}
	PG_END_TRY();
	if (held > 0)
		queue_rate_held_back(q, held);
	/* the SQS endpoint parks a long poll until then (core_api.h) */
	queue_rate_next_open = got.n == 0 ? q->rate_opens_at : 0;
	if (wait > 0)
		queue_wait_end();
	if (slept)
	{
		queue_count(q->id, QC_WAITS, 1);
		if (got.n > 0)
			queue_count(q->id, QC_WAKEUPS, 1);
	}

	if (got.n > 0)
	{
		queue_count(q->id, QC_RECEIVED, got.n);
		if (attempt != NULL)
			record_attempt(q, attempt, now, nonce, &got);
	}
	queue_receive_ends();
	queue_close(&call);
	return (Datum) 0;
}

/* queue.peek(queue_name, max_messages): look, change nothing. */
Datum
queue_peek(PG_FUNCTION_ARGS)
{
	QueueCall	call;
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	QueueMeta  *q;
	int32		max_messages;
	Datum		args[2];
	int			rc;

	queue_arg_notnull(fcinfo, 0, "queue_name");
	max_messages = queue_arg_int(fcinfo, 1, "max_messages", 1, PG_INT32_MAX, -1);
	InitMaterializedSRF(fcinfo, MAT_SRF_USE_EXPECTED_DESC);

	q = queue_open(&call, PG_GETARG_TEXT_PP(0), QPRIV_MANAGE);
	args[0] = TimestampTzGetDatum(GetCurrentTimestamp() - q->retention);
	args[1] = Int32GetDatum(max_messages);
	rc = queue_exec(q, q->fifo ? QP_PEEK_FIFO :
					queue_has_priorities(q) ? QP_PEEK_PRIO : QP_PEEK, args, NULL, true, 0);
	if (rc != SPI_OK_SELECT)
		elog(ERROR, "queue peek failed: %s", SPI_result_code_string(rc));
	emit_messages(rsinfo, q, SPI_tuptable, SPI_processed, false, 0, NULL, NULL);
	queue_close(&call);
	return (Datum) 0;
}
