/*-------------------------------------------------------------------------
 *
 * deadletter.c
 *	  Dead-letter queues: moving messages received too often, and redrive.
 *
 * A queue with dead_letter_queue and max_receive_count never delivers a
 * message whose next receive would exceed the count: the receive that meets
 * it moves it instead, in the receiving transaction (a receive that rolls
 * back moves nothing, but its receive still counts: failed.c), and the
 * worker moves such messages when their lease runs out with nobody
 * receiving.  The message
 * keeps its id, so a FIFO message put back by redrive sorts where it was in
 * its group.  On FIFO queues both ends lock their groups first, as every
 * change to a group's messages does (groups.c).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"

#include "common/queue_common.h"
#include "storage/queue_storage.h"
#include "access/queue_access.h"
#include "state/queue_state.h"
#include "fifo/queue_fifo.h"
#include "lease/queue_lease.h"

PG_FUNCTION_INFO_V1(queue_redrive);

#define REDRIVE_BATCH	1000

/* Copies of the group texts, sorted and unique, for locking. */
static int
unique_groups(int n, Datum *groups, Datum **out)
{
	int			m = 0;

	*out = palloc(Max(n, 1) * sizeof(Datum));
	for (int i = 0; i < n; i++)
		if (groups[i] != (Datum) 0)
			(*out)[m++] = groups[i];
	return queue_sort_unique_texts(*out, m);
}

/* Whether a move's RETURNING (one boolean column) said true of a row. */
static bool
any_true(SPITupleTable *tt, uint64 n)
{
	for (uint64 r = 0; r < n; r++)
	{
		bool		isnull;

		if (DatumGetBool(SPI_getbinval(tt->vals[r], tt->tupdesc, 1, &isnull)) && !isnull)
			return true;
	}
	return false;
}

/*
 * Move n messages of q (locked by the caller; on a FIFO queue, their
 * groups too) to q's dead-letter queue.  groups[i] is the group of ids[i]
 * (0 for none).  Returns how many moved.
 */
uint64
queue_dead_letter(QueueMeta *q, int n, const int64 *ids, Datum *groups)
{
	QueueMeta  *dlq;
	Datum	   *ugroups;
	int			ngroups;
	Datum		args[6];
	int			rc;
	uint64		moved;
	bool		with_priority;

	if (n == 0)
		return 0;
	dlq = queue_lookup(cstring_to_text(q->dlq_name));
	ngroups = unique_groups(n, groups, &ugroups);
	if (dlq->fifo)
		queue_fifo_lock_senders(dlq, ngroups, ugroups);

	args[0] = queue_int8_array(n, ids);
	args[1] = TimestampTzGetDatum(GetCurrentTimestamp());
	args[2] = CStringGetTextDatum(q->name);
	args[3] = BoolGetDatum(dlq->fifo);
	args[4] = Int64GetDatum(q->id);
	args[5] = Int64GetDatum(dlq->store_id);
	rc = queue_exec(q, QP_MOVE_TO_DLQ, args, NULL, false, 0);
	if (rc != SPI_OK_INSERT && rc != SPI_OK_INSERT_RETURNING)
		elog(ERROR, "dead-letter move failed: %s", SPI_result_code_string(rc));
	moved = SPI_processed;
	with_priority = rc == SPI_OK_INSERT_RETURNING && any_true(SPI_tuptable, moved);

	/* A moved message may be the new head of its dead-letter group. */
	if (dlq->fifo)
		queue_fifo_add_moved_groups(dlq, ngroups, ugroups);
	/* And the source groups lost their heads. */
	if (q->fifo)
		queue_fifo_refresh_groups(q, ngroups, ugroups);

	if (moved > 0)
	{
		queue_count(q->id, QC_DEAD_LETTERED, (int64) moved);
		queue_note_arrival(dlq->id, (int64) moved);
		queue_priority_moved(dlq->id, with_priority);	/* they keep their priorities */
	}
	return moved;
}

/*
 * Move the rows a receive statement flagged as received too often
 * (queue_row_is_dead_letter) to the dead-letter queue.
 */
void
queue_dead_letter_flagged(QueueMeta *q, SPITupleTable *tt, uint64 nrows)
{
	int64	   *ids = palloc(Max(nrows, 1) * sizeof(int64));
	Datum	   *groups = palloc(Max(nrows, 1) * sizeof(Datum));
	int			n = 0;

	for (uint64 r = 0; r < nrows; r++)
	{
		bool		isnull;
		Datum		g;

		if (!queue_row_is_dead_letter(tt, r))
			continue;
		ids[n] = DatumGetInt64(SPI_getbinval(tt->vals[r], tt->tupdesc, RCOL_MESSAGE_ID, &isnull));
		g = SPI_getbinval(tt->vals[r], tt->tupdesc, RCOL_GROUP, &isnull);
		groups[n] = isnull ? (Datum) 0 : g;
		n++;
	}
	if (n > 0)
		(void) queue_dead_letter(q, n, ids, groups);
}

/*
 * The worker's share: messages of q whose lease ran out in (since, now]
 * after max_receive_count receives go to the dead-letter queue even when
 * nobody receives.  Only that time range of the visible_at index is read
 * (on a FIFO queue, the groups whose lease ended in it).
 * Rows or groups someone holds are skipped, never waited for.
 */
uint64
queue_dead_letter_sweep(QueueMeta *q, TimestampTz since, TimestampTz now)
{
	Oid			types[5] = {TIMESTAMPTZOID, TIMESTAMPTZOID, INT4OID, TEXTARRAYOID, TIMESTAMPTZOID};
	Datum		values[5];
	int64	   *ids;
	Datum	   *groups;
	int			n;
	int			rc;

	values[0] = TimestampTzGetDatum(since);
	values[1] = TimestampTzGetDatum(now);
	values[2] = Int32GetDatum(q->max_receive_count);
	values[4] = TimestampTzGetDatum(now - q->retention);	/* expired: not moved */
	/* rows it locks and then cannot move go back (common/counts.c) */
	if (!q->fifo)
		queue_note_ready(q->id, QUEUE_READY_NONE, DT_NOBEGIN);

	if (q->fifo)
	{
		/*
		 * The groups whose lease ran out in (since, now] (a group's
		 * available_at is the end of its last lease) and that hold a
		 * message received max_receive_count times, looked for only in the
		 * stretch that lease covered.  Lock them first (every FIFO change
		 * does), skipping held ones; groups with nothing to move are not
		 * locked, so receives never skip them for the worker's sake.
		 */
		rc = SPI_execute_with_args(psprintf(
			"SELECT g.message_group_id FROM %s g"
			" WHERE %sg.available_at > $1 AND g.available_at <= $2"
			" AND EXISTS (SELECT FROM %s m"
			"  WHERE %sm.message_group_id = g.message_group_id"
			"  AND m.message_id <= g.leased_upto AND m.receive_count >= $3"
			"  AND m.visible_at <= $2 AND m.sent_at > $5)"
			" ORDER BY 1 LIMIT 1000 FOR UPDATE SKIP LOCKED",
			queue_table_name(q, 'g'), queue_key_cond(q, 'g', "g"),
			queue_table_name(q, 'q'), queue_key_cond(q, 'q', "m")),
								   5, types, values, NULL, false, 0);
		if (rc != SPI_OK_SELECT)
			elog(ERROR, "dead-letter sweep failed: %s", SPI_result_code_string(rc));
		if (SPI_processed == 0)
			return 0;
		n = queue_spi_groups(1, &groups);
		/* Nor groups being sent to: a move may empty a group (groups.c). */
		n = queue_fifo_try_lock_senders(q->id, n, groups);
		if (n == 0)
			return 0;
		values[3] = queue_text_array(n, groups, NULL);
		rc = SPI_execute_with_args(psprintf(
			"SELECT message_id, message_group_id FROM %s"
			" WHERE %smessage_group_id = ANY ($4) AND visible_at <= $2"
			" AND receive_count >= $3 AND sent_at > $5 ORDER BY message_id",
			queue_table_name(q, 'q'), queue_key_cond(q, 'q', NULL)),
								   5, types, values, NULL, false, 0);
	}
	else
	{
		Datum		args[4] = {values[0], values[1], values[2], values[4]};

		rc = queue_exec(q, QP_DLQ_SWEEP, args, NULL, false, 0);
	}
	if (rc != SPI_OK_SELECT)
		elog(ERROR, "dead-letter sweep failed: %s", SPI_result_code_string(rc));
	n = (int) SPI_processed;
	if (n == 0)
		return 0;
	ids = palloc(n * sizeof(int64));
	groups = palloc(n * sizeof(Datum));
	for (int r = 0; r < n; r++)
	{
		bool		isnull;
		Datum		g;

		ids[r] = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[r], SPI_tuptable->tupdesc, 1, &isnull));
		g = SPI_getbinval(SPI_tuptable->vals[r], SPI_tuptable->tupdesc, 2, &isnull);
		groups[r] = isnull ? (Datum) 0 : PointerGetDatum(PG_DETOAST_DATUM_COPY(g));
	}
	return queue_dead_letter(q, n, ids, groups);
}

/* The name of a queue by id, or NULL if it is gone (SPI connected). */
char *
queue_name_of(int64 id)
{
	Oid			type = INT8OID;
	Datum		arg = Int64GetDatum(id);
	bool		isnull;

	if (SPI_execute_with_args("SELECT queue_name FROM queue._queues WHERE queue_id = $1",
							  1, &type, &arg, NULL, false, 1) != SPI_OK_SELECT ||
		SPI_processed == 0)
		return NULL;
	return TextDatumGetCString(SPI_getbinval(SPI_tuptable->vals[0],
											 SPI_tuptable->tupdesc, 1, &isnull));
}

/*
 * Move the given messages (locked, of one destination) from dlq to dest as
 * fresh deliveries: visible now, sent now, receive count 0, the
 * "queue.dead_letter" attribute and source dropped.  On a FIFO queue the id
 * is kept, so each comes back ahead of what it was ahead of; a standard
 * queue gives a new id, as SQS does.  (So on a FIFO queue id order is not
 * sent_at order; nothing relies on it, the expiry sweep included.)
 */
static uint64
redrive_to(QueueMeta *dlq, QueueMeta *dest, int n, int64 *ids, Datum *groups)
{
	Datum	   *ugroups;
	int			ngroups = unique_groups(n, groups, &ugroups);
	Oid			types[3] = {INT8ARRAYOID, TIMESTAMPTZOID, BOOLOID};
	Datum		values[3];
	int			rc;
	uint64		moved;
	bool		prio = dlq->prio_column && dest->prio_column;	/* kept (1.12 on) */
	bool		with_priority;

	if (dest->fifo)
		queue_fifo_lock_senders(dest, ngroups, ugroups);
	values[0] = queue_int8_array(n, ids);
	values[1] = TimestampTzGetDatum(GetCurrentTimestamp());
	values[2] = BoolGetDatum(dest->fifo);
	rc = SPI_execute_with_args(psprintf(
		"WITH mv AS (DELETE FROM %s m"
		"  WHERE %sm.message_id = ANY ($1) RETURNING m.*)"
		" INSERT INTO %s (%smessage_id, visible_at, sent_at,"
		"  sequence_number, message_group_id, deduplication_id, attributes, body%s)"
		" SELECT %s CASE WHEN $3 THEN mv.message_id"
		"  ELSE nextval('queue_data.message_id_seq') END, $2, $2,"
		"  CASE WHEN $3 THEN mv.message_id END,"
		"  mv.message_group_id, mv.deduplication_id,"
		"  nullif(mv.attributes - 'queue.dead_letter', '{}'::jsonb), mv.body%s"
		" FROM mv ORDER BY mv.message_id%s",
		queue_table_name(dlq, 'q'), queue_key_cond(dlq, 'q', "m"),
		queue_table_name(dest, 'q'), dest->shared ? "store_id, " : "",
		prio ? ", priority" : "",
		dest->shared ? psprintf(INT64_FORMAT ",", dest->store_id) : "",
		prio ? ", mv.priority" : "",
		prio ? " RETURNING priority IS NOT NULL" : ""),
							   3, types, values, NULL, false, 0);
	if (rc != SPI_OK_INSERT && rc != SPI_OK_INSERT_RETURNING)
		elog(ERROR, "redrive failed: %s", SPI_result_code_string(rc));
	moved = SPI_processed;
	with_priority = rc == SPI_OK_INSERT_RETURNING && any_true(SPI_tuptable, moved);
	if (dest->fifo)
		queue_fifo_add_moved_groups(dest, ngroups, ugroups);
	queue_note_arrival(dest->id, (int64) moved);
	if (prio)
		queue_priority_moved(dest->id, with_priority);
	return moved;
}

/*
 * queue.redrive(source_queue, destination_queue, max_messages): move the
 * dead letters of source_queue (not those someone is holding, nor those
 * past its retention) back to the queue each came from, or all to
 * destination_queue; oldest first, in batches of REDRIVE_BATCH, all in the
 * caller's transaction.  The caller needs manage on source_queue and send
 * on every queue the call writes into.  Returns the number moved.
 */
Datum
queue_redrive(PG_FUNCTION_ARGS)
{
	int64		limit = PG_INT64_MAX;
	int64		selected;

	queue_arg_notnull(fcinfo, 0, "source_queue");
	if (!PG_ARGISNULL(2))
	{
		limit = PG_GETARG_INT64(2);
		if (limit < 1)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("argument \"max_messages\" must be at least 1")));
	}
	PG_RETURN_INT64(queue_redrive_bounded(PG_GETARG_TEXT_PP(0),
										  PG_ARGISNULL(1) ? NULL : PG_GETARG_TEXT_PP(1),
										  limit, PG_INT64_MAX, &selected));
}

/*
 * The redrive, as the current user: at most limit messages whose ids are
 * at most upto_id (a move task's bound: the ids issued before it started,
 * move_task.c).  *selected gets how many dead letters it found to move
 * (those that have no source queue to go back to included, which stay);
 * fewer than limit means none is left within the bounds.
 */
int64
queue_redrive_bounded(text *dlq_name, text *dest_name, int64 limit, int64 upto_id,
					  int64 *selected)
{
	QueueCall	call;
	QueueMeta  *dlq;
	QueueMeta  *dest = NULL;
	uint64		total = 0;

	*selected = 0;
	queue_check_read_write();

	dlq = queue_open(&call, dlq_name, QPRIV_MANAGE);
	/* the dead letters it locks go back if it aborts (common/counts.c) */
	if (!dlq->fifo)
		queue_note_ready(dlq->id, QUEUE_READY_NONE, DT_NOBEGIN);
	if (dest_name != NULL)
	{
		dest = queue_lookup(dest_name);
		queue_check_privilege(dest, call.caller, QPRIV_SEND);
		if (dest->id == dlq->id)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("argument \"destination_queue\" names the source queue itself")));
		if (dest->fifo != dlq->fifo)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("argument \"destination_queue\" must be a %s queue like \"source_queue\"",
							dlq->fifo ? "FIFO" : "standard")));
	}

	while ((int64) total < limit)
	{
		int			batch = (int) Min(limit - (int64) total, REDRIVE_BATCH);
		Oid			types[4] = {TIMESTAMPTZOID, INT4OID, TIMESTAMPTZOID, INT8OID};
		Datum		values[4];
		TimestampTz now = GetCurrentTimestamp();
		int			n;
		int64	   *ids;
		int64	   *srcs;
		Datum	   *groups;
		QueueMeta **tos;
		bool	   *done;
		int			rc;
		uint64		moved_now = 0;

		/*
		 * The oldest dead letters nobody holds and whose retention in the
		 * dead-letter queue has not passed (those are expired, left for
		 * the sweep).  On a FIFO dead-letter queue their groups are locked
		 * first; a group someone is receiving from is left for a later
		 * redrive.
		 */
		values[0] = TimestampTzGetDatum(now);
		values[1] = Int32GetDatum(batch);
		values[2] = TimestampTzGetDatum(now - dlq->retention);
		values[3] = Int64GetDatum(upto_id);
		if (dlq->fifo)
			rc = SPI_execute_with_args(psprintf(
				"WITH g AS (SELECT x.message_group_id FROM %s x"
				"  WHERE %sx.available_at <= $1 ORDER BY 1 FOR UPDATE SKIP LOCKED)"
				" SELECT m.message_id, m.source_queue_id, m.message_group_id"
				" FROM %s m JOIN g USING (message_group_id)"
				" WHERE %sm.visible_at <= $1 AND m.sent_at > $3 AND m.message_id <= $4"
				" ORDER BY m.message_id LIMIT $2",
				queue_table_name(dlq, 'g'), queue_key_cond(dlq, 'g', "x"),
				queue_table_name(dlq, 'q'), queue_key_cond(dlq, 'q', "m")),
									   4, types, values, NULL, false, 0);
		else
			rc = SPI_execute_with_args(psprintf(
				"SELECT message_id, source_queue_id, message_group_id"
				" FROM %s WHERE %svisible_at <= $1 AND sent_at > $3 AND message_id <= $4"
				" ORDER BY message_id LIMIT $2 FOR UPDATE SKIP LOCKED",
				queue_table_name(dlq, 'q'), queue_key_cond(dlq, 'q', NULL)),
									   4, types, values, NULL, false, 0);
		if (rc != SPI_OK_SELECT)
			elog(ERROR, "redrive failed: %s", SPI_result_code_string(rc));
		n = (int) SPI_processed;
		*selected += n;
		if (n == 0)
			break;
		ids = palloc(n * sizeof(int64));
		srcs = palloc(n * sizeof(int64));
		groups = palloc(n * sizeof(Datum));
		tos = palloc(n * sizeof(QueueMeta *));
		done = palloc0(n * sizeof(bool));
		for (int r = 0; r < n; r++)
		{
			HeapTuple	tup = SPI_tuptable->vals[r];
			TupleDesc	desc = SPI_tuptable->tupdesc;
			bool		isnull;
			Datum		g;

			ids[r] = DatumGetInt64(SPI_getbinval(tup, desc, 1, &isnull));
			srcs[r] = DatumGetInt64(SPI_getbinval(tup, desc, 2, &isnull));
			if (isnull)
				srcs[r] = 0;
			g = SPI_getbinval(tup, desc, 3, &isnull);
			groups[r] = isnull ? (Datum) 0 : PointerGetDatum(PG_DETOAST_DATUM_COPY(g));
		}

		/*
		 * Where each goes (messages with no source stay), and the right to
		 * send there, checked for every destination before any row moves.
		 */
		for (int r = 0; r < n; r++)
		{
			char	   *name;

			tos[r] = dest;
			if (dest != NULL)
				continue;
			for (int k = 0; k < r && tos[r] == NULL; k++)
				if (srcs[k] == srcs[r])
					tos[r] = tos[k];
			if (tos[r] != NULL)
				continue;
			name = srcs[r] != 0 ? queue_name_of(srcs[r]) : NULL;
			if (name == NULL)
			{
				ereport(NOTICE,
						(errmsg("message " INT64_FORMAT " has no source queue to go back to; it stays",
								ids[r])));
				continue;
			}
			tos[r] = queue_lookup(cstring_to_text(name));
			queue_check_privilege(tos[r], call.caller, QPRIV_SEND);
		}

		/* One move per destination. */
		for (int r = 0; r < n; r++)
		{
			int64	   *bids;
			Datum	   *bgroups;
			int			m = 0;

			if (done[r] || tos[r] == NULL)
				continue;
			bids = palloc(n * sizeof(int64));
			bgroups = palloc(n * sizeof(Datum));
			for (int k = r; k < n; k++)
				if (!done[k] && tos[k] != NULL && tos[k]->id == tos[r]->id)
				{
					bids[m] = ids[k];
					bgroups[m] = groups[k];
					m++;
					done[k] = true;
				}
			moved_now += redrive_to(dlq, tos[r], m, bids, bgroups);
		}
		if (dlq->fifo)
		{
			Datum	   *ugroups;
			int			ngroups = unique_groups(n, groups, &ugroups);

			queue_fifo_refresh_groups(dlq, ngroups, ugroups);
		}
		total += moved_now;
		if (moved_now == 0 || n < batch)
			break;
		CHECK_FOR_INTERRUPTS();
	}
	queue_close(&call);
	return (int64) total;
}
