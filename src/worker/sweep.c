/*-------------------------------------------------------------------------
 *
 * sweep.c
 *	  What the per-database worker does to each queue, pass after pass:
 *	  what time alone cannot (worker.c has the launcher and the loop).
 *
 * The worker sweeps each queue in short transactions of at most
 * SWEEP_BATCH rows that skip locked rows, so it never waits on senders or
 * receivers: messages past retention (read in laps over the whole queue,
 * see sweep_chunk), deduplication ids past their window, receive attempts
 * past theirs, and (every pass, for queues that have a dead-letter queue)
 * messages whose lease ran out after max_receive_count receives, which go
 * to the dead-letter queue with nobody receiving; and it vacuums queues
 * that churned (vacuum.c).  Correctness never waits for it (every read
 * filters by time); it keeps tables small.  A queue is swept again only
 * when something in it can have expired, and an empty one only once
 * something arrives, so idle queues cost nothing.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "catalog/namespace.h"
#include "catalog/pg_type.h"
#include "commands/extension.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"

#include "common/queue_common.h"
#include "storage/queue_storage.h"
#include "state/queue_state.h"
#include "fifo/queue_fifo.h"
#include "lease/queue_lease.h"
#include "worker/queue_worker.h"

#define SWEEP_BATCH				1000
#define SWEEP_ROUNDS			10		/* batches per queue per pass */
#define ATTEMPT_WINDOW			(5 * USECS_PER_MINUTE)
/*
 * The worker moves a poison message only once its lease has been over for
 * this long: a consumer that receives right after the lease ends moves it
 * itself, and the worker's row locks would only make that receive skip it.
 */
#define DLQ_GRACE				(2 * USECS_PER_SEC)

/*
 * One of q's tables in its layout (queue_data.<kind><id>, or the shared
 * one), and the condition on its key ("store_id = <n> AND ", nothing for a
 * dedicated queue's own table).  The sweep's statements are per queue,
 * with numeric ids only in their text.
 */
static const char *
tbl(QueueRow *q, char kind)
{
	if (q->shared)
		return queue_shared_table(kind, q->fifo);
	return psprintf("queue_data.%c" INT64_FORMAT, kind, q->id);
}

static const char *
key(QueueRow *q, char kind)
{
	if (!q->shared)
		return "";
	if (kind == 'd' || kind == 'a')
		return psprintf("queue_id = " INT64_FORMAT " AND ", q->id);
	return psprintf("store_id = " INT64_FORMAT " AND ", q->store_id);
}

/*
 * Whether q was dropped (or moved, or purged: its rows have another key)
 * since the worker listed it, in a transaction just started.  A shared
 * queue is locked first, as an API call locks it (catalog.c), so a move or
 * purge under way is waited for, as long as the worker waits for any lock
 * (queue_bound_lock_waits: then the sweep is tried on a later pass).
 */
static bool
queue_row_gone(QueueRow *q)
{
	Oid			types[2] = {INT8OID, INT8OID};
	Datum		values[2];
	bool		gone;

	if (!q->shared)
		return !OidIsValid(queue_table_relid(q->id, 'q'));
	queue_lock_queue(q->id, AccessShareLock);
	values[0] = Int64GetDatum(q->id);
	values[1] = Int64GetDatum(q->store_id);
	SPI_connect();
	PushActiveSnapshot(GetTransactionSnapshot());
	if (SPI_execute_with_args("SELECT FROM queue._queues r WHERE r.queue_id = $1"
							  " AND NOT r.dedicated AND coalesce(r.store_id, r.queue_id) = $2",
							  2, types, values, NULL, true, 1) != SPI_OK_SELECT)
		elog(ERROR, "queue lookup failed");
	gone = (SPI_processed == 0);
	PopActiveSnapshot();
	SPI_finish();
	return gone;
}

/*
 * After an error in a sweep: report it (elevated.c), abandon the
 * transaction and the sweep's memory; the worker goes on with the next
 * queue.
 */
static void
sweep_recover(MemoryContext cxt)
{
	queue_recover(cxt);
	MemoryContextReset(cxt);
}

/* Run one sweep statement; returns rows affected (or the first column). */
static uint64
sweep_exec(const char *sql, int nargs, Oid *types, Datum *values)
{
	int			rc = SPI_execute_with_args(sql, nargs, types, values, NULL, false, 0);

	if (rc < 0)
		elog(ERROR, "queue sweep failed: %s", SPI_result_code_string(rc));
	return SPI_processed;
}

/*
 * An optional timestamp from the first column of a one-row query taking an
 * interval of usecs microseconds as $1.
 */
static TimestampTz
sweep_time(const char *sql, int64 usecs)
{
	Oid			type = INTERVALOID;
	Interval	iv = {0};
	Datum		arg = IntervalPGetDatum(&iv);
	bool		isnull;
	Datum		d;

	iv.time = usecs;
	if (SPI_execute_with_args(sql, 1, &type, &arg, NULL, true, 1) != SPI_OK_SELECT ||
		SPI_processed == 0)
		return 0;
	d = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull);
	return isnull ? 0 : DatumGetTimestampTz(d);
}

/*
 * One step of an expiry lap: what a chunk did, applied to the lap once its
 * transaction committed.
 */
typedef struct LapStep
{
	uint64		deleted;
	int64		cursor;			/* the last id looked at */
	TimestampTz oldest;			/* least sent_at left behind, or DT_NOEND */
	bool		last;			/* no ids after these: the lap is done */
} LapStep;

/*
 * Expiry: the worker finds expired messages by reading a queue's messages
 * in id order, SWEEP_BATCH ids a transaction, from where the last chunk
 * stopped (a "lap"), deleting those whose sent_at + retention has passed.
 * Id order says nothing of sent_at (a FIFO redrive puts old ids back with
 * a new sent_at, a dead letter keeps its old sent_at in a new queue), so
 * the lap reads every message once, and notes the least sent_at it leaves
 * behind.  Nothing can expire before that plus the retention: the next lap
 * starts then (anything that arrives meanwhile is sent at or after the
 * lap's start, but a dead letter, which is swept by the next lap at the
 * latest).  So a queue in which nothing can have expired costs nothing,
 * and one whose messages keep expiring is read in full at most once per
 * tenth of its retention (and never more than half the time).
 *
 * One chunk: the SWEEP_BATCH ids after cursor; delete the expired ones,
 * skipping rows (FIFO: groups and their senders) someone holds, which
 * count as left behind.  On a FIFO queue the groups are locked and then
 * refreshed, as any change to a group's messages must.
 */
static void
sweep_chunk(QueueRow *q, int64 cursor, TimestampTz cutoff, LapStep *step)
{
	Oid			types[3] = {INT8OID, TIMESTAMPTZOID, TEXTARRAYOID};
	Datum		values[3];
	int64	   *expired;
	Datum	   *groups;
	TimestampTz expired_oldest = DT_NOEND;
	int			n;
	int			nexpired = 0;

	step->deleted = 0;
	step->cursor = cursor;
	step->oldest = DT_NOEND;
	values[0] = Int64GetDatum(cursor);
	n = (int) sweep_exec(psprintf(
		"SELECT message_id, sent_at, message_group_id FROM %s"
		" WHERE %smessage_id > $1 ORDER BY message_id LIMIT %d",
		tbl(q, 'q'), key(q, 'q'), SWEEP_BATCH),
						 1, types, values);
	step->last = n < SWEEP_BATCH;
	expired = palloc(Max(n, 1) * sizeof(int64));
	groups = palloc(Max(n, 1) * sizeof(Datum));
	for (int r = 0; r < n; r++)
	{
		HeapTuple	tup = SPI_tuptable->vals[r];
		TupleDesc	desc = SPI_tuptable->tupdesc;
		bool		isnull;
		int64		id = DatumGetInt64(SPI_getbinval(tup, desc, 1, &isnull));
		TimestampTz sent = DatumGetTimestampTz(SPI_getbinval(tup, desc, 2, &isnull));

		step->cursor = id;
		if (sent > cutoff)
		{
			step->oldest = Min(step->oldest, sent);
			continue;
		}
		expired_oldest = Min(expired_oldest, sent);
		if (q->fifo)
		{
			Datum		g = SPI_getbinval(tup, desc, 3, &isnull);

			if (isnull)
				continue;		/* cannot be: FIFO messages have groups */
			groups[nexpired] = PointerGetDatum(PG_DETOAST_DATUM_COPY(g));
		}
		expired[nexpired++] = id;
	}
	if (nexpired == 0)
		return;

	types[0] = INT8ARRAYOID;
	values[0] = queue_int8_array(nexpired, expired);
	values[1] = TimestampTzGetDatum(cutoff);
	if (!q->fifo)
		step->deleted = sweep_exec(psprintf(
			"DELETE FROM %s WHERE %smessage_id = ANY (ARRAY("
			" SELECT message_id FROM %s"
			" WHERE %smessage_id = ANY ($1) AND sent_at <= $2 FOR UPDATE SKIP LOCKED))",
			tbl(q, 'q'), key(q, 'q'), tbl(q, 'q'), key(q, 'q')), 2, types, values);
	else
	{
		int			ngroups = queue_sort_unique_texts(groups, nexpired);

		/* FIFO: lock the groups of the expired messages, then delete. */
		values[2] = queue_text_array(ngroups, groups, NULL);
		ngroups = (int) sweep_exec(psprintf(
			"SELECT message_group_id FROM %s"
			" WHERE %smessage_group_id = ANY ($3) ORDER BY 1 FOR UPDATE SKIP LOCKED",
			tbl(q, 'g'), key(q, 'g')),
								   3, types, values);
		if (ngroups > 0)
		{
			Datum	   *locked;

			ngroups = queue_spi_groups(1, &locked);
			/* Nor groups being sent to: the sweep may empty a group (groups.c). */
			ngroups = queue_fifo_try_lock_senders(q->id, ngroups, locked);
			if (ngroups > 0)
			{
				values[2] = queue_text_array(ngroups, locked, NULL);
				step->deleted = sweep_exec(psprintf(
					"DELETE FROM %s WHERE %smessage_id = ANY ($1)"
					" AND message_group_id = ANY ($3) AND sent_at <= $2",
					tbl(q, 'q'), key(q, 'q')),
										   3, types, values);
				/* as every change to a group's messages (its senders' locks are ours) */
				queue_fifo_refresh_groups(queue_lookup(cstring_to_text(q->name)),
										  ngroups, locked);
			}
		}
	}
	/* Some were skipped (held, or gone meanwhile): the next lap is due now. */
	if (step->deleted < (uint64) nexpired)
		step->oldest = Min(step->oldest, expired_oldest);
}

/* Forget deduplication ids and receive attempts past their windows. */
static uint64
sweep_windows(QueueRow *q, TimestampTz dedup_cutoff, TimestampTz attempt_cutoff)
{
	Oid			types[1] = {TIMESTAMPTZOID};
	Datum		values[1];
	uint64		n;

	values[0] = TimestampTzGetDatum(dedup_cutoff);
	n = sweep_exec(psprintf(
		"DELETE FROM %s WHERE ctid = ANY (ARRAY("
		" SELECT ctid FROM %s WHERE %saccepted_at <= $1"
		" ORDER BY accepted_at LIMIT %d FOR UPDATE SKIP LOCKED))",
		tbl(q, 'd'), tbl(q, 'd'), key(q, 'd'), SWEEP_BATCH),
				   1, types, values);
	values[0] = TimestampTzGetDatum(attempt_cutoff);
	n += sweep_exec(psprintf(
		"DELETE FROM %s WHERE ctid = ANY (ARRAY("
		" SELECT ctid FROM %s WHERE %sreceived_at <= $1"
		" LIMIT %d FOR UPDATE SKIP LOCKED))", tbl(q, 'a'), tbl(q, 'a'), key(q, 'a'), SWEEP_BATCH),
					1, types, values);
	return n;
}

/*
 * When the next deduplication id or receive attempt of a queue reaches its
 * window (with none, anything received or sent from now on expires no
 * sooner than the shorter window from now); *empty when it has none.
 */
static TimestampTz
windows_next_due(QueueRow *q, TimestampTz now, bool *empty)
{
	TimestampTz due = now + Min(q->dedup_window, ATTEMPT_WINDOW);
	TimestampTz t;
	bool		found = false;

	t = sweep_time(psprintf("SELECT min(accepted_at) + $1 FROM %s WHERE %strue",
							tbl(q, 'd'), key(q, 'd')),
				   q->dedup_window);
	found |= (t != 0);
	if (t != 0 && t < due)
		due = t;
	t = sweep_time(psprintf("SELECT min(received_at) + $1 FROM %s WHERE %strue",
							tbl(q, 'a'), key(q, 'a')),
				   ATTEMPT_WINDOW);
	found |= (t != 0);
	if (t != 0 && t < due)
		due = t;
	*empty = !found;
	return due;
}

/*
 * The worker's cue to list the queues again (worker.c): set when a relcache
 * invalidation names a relation of the extension's schemas (create and
 * drop of a dedicated queue send one for queue._queues, alter one for the
 * queue's table or the shared ones), or names none (a reset).  The
 * callback may not read catalogs: it notes the relations, and
 * queue_list_check, in a transaction, looks at them.  Other relations'
 * invalidations (the application's tables, autovacuum) cost no list.
 */
bool		queue_list_stale = true;

#define INVAL_NOTED		8
static Oid	inval_noted[INVAL_NOTED];
static int	inval_nnoted = 0;

void
queue_list_inval(Datum arg, Oid relid)
{
	if (!OidIsValid(relid) || inval_nnoted >= INVAL_NOTED)
		queue_list_stale = true;
	else
		inval_noted[inval_nnoted++] = relid;
}

void
queue_list_check(void)
{
	Oid			nsp = get_namespace_oid("queue", true);
	Oid			data_nsp = get_namespace_oid("queue_data", true);

	for (int i = 0; i < inval_nnoted; i++)
	{
		Oid			rel_nsp = get_rel_namespace(inval_noted[i]);

		if (!OidIsValid(rel_nsp) || rel_nsp == nsp || rel_nsp == data_nsp)
			queue_list_stale = true;
	}
	inval_nnoted = 0;
}

/*
 * The queues of this database (empty if the extension is gone); only those
 * of the nids ids when ids is given (new queues the worker was told of).
 */
List *
queue_sweep_list(bool *extension_exists, const int64 *ids, int nids)
{
	List	   *queues = NIL;
	MemoryContext outer = CurrentMemoryContext;

	StartTransactionCommand();
	*extension_exists = OidIsValid(get_extension_oid("queue", true));
	if (*extension_exists)
	{
		/* 1.4's layout (DESIGN.md "Storage"); before it, all dedicated */
		Oid			nsp = get_namespace_oid("queue", false);
		bool		has_layout = get_attnum(get_relname_relid("_queues", nsp),
											"dedicated") != InvalidAttrNumber;
		Oid			types[1] = {INT8ARRAYOID};
		Datum		values[1] = {0};

		SPI_connect();
		PushActiveSnapshot(GetTransactionSnapshot());
		if (ids != NULL)
			values[0] = queue_int8_array(nids, ids);

		/* (no order: each queue's sweep is its own, kept by id in a hash) */
		if (SPI_execute_with_args(psprintf("SELECT queue_id, fifo,"
										   " (extract(epoch FROM retention) * 1000000)::int8,"
										   " (extract(epoch FROM deduplication_window) * 1000000)::int8,"
										   " dead_letter_queue IS NOT NULL, queue_name,"
										   " CASE WHEN fifo AND %s THEN (SELECT c.relpages::pg_catalog.int8"
										   "  FROM pg_catalog.pg_class c WHERE c.oid OPERATOR(pg_catalog.=)"
										   "  pg_catalog.to_regclass('queue_data.g' OPERATOR(pg_catalog.||) queue_id)) END,"
										   " %s FROM queue._queues r%s",
										   has_layout ? "r.dedicated" : "true",
										   has_layout ? "NOT r.dedicated, coalesce(r.store_id, r.queue_id)" :
										   "false, r.queue_id",
										   ids != NULL ? " WHERE r.queue_id OPERATOR(pg_catalog.=) ANY ($1)" : ""),
								  ids != NULL ? 1 : 0, types, values, NULL, true, 0) != SPI_OK_SELECT)
			elog(ERROR, "could not list queues");
		for (uint64 r = 0; r < SPI_processed; r++)
		{
			HeapTuple	tup = SPI_tuptable->vals[r];
			TupleDesc	desc = SPI_tuptable->tupdesc;
			bool		isnull;
			MemoryContext old = MemoryContextSwitchTo(outer);
			QueueRow   *q = palloc(sizeof(QueueRow));

			q->id = DatumGetInt64(SPI_getbinval(tup, desc, 1, &isnull));
			q->fifo = DatumGetBool(SPI_getbinval(tup, desc, 2, &isnull));
			q->retention = DatumGetInt64(SPI_getbinval(tup, desc, 3, &isnull));
			q->dedup_window = DatumGetInt64(SPI_getbinval(tup, desc, 4, &isnull));
			q->has_dlq = DatumGetBool(SPI_getbinval(tup, desc, 5, &isnull));
			q->name = TextDatumGetCString(SPI_getbinval(tup, desc, 6, &isnull));
			/* pg_class's count, not the file's: no lock to wait for */
			q->g_blocks = DatumGetInt64(SPI_getbinval(tup, desc, 7, &isnull));
			if (isnull)
				q->g_blocks = 0;
			q->shared = DatumGetBool(SPI_getbinval(tup, desc, 8, &isnull));
			q->store_id = DatumGetInt64(SPI_getbinval(tup, desc, 9, &isnull));
			q->sq = NULL;
			queues = lappend(queues, q);
			MemoryContextSwitchTo(old);
		}
		PopActiveSnapshot();
		SPI_finish();
	}
	CommitTransactionCommand();
	return queues;
}

/*
 * Move messages whose last lease ran out since the previous pass (and at
 * least DLQ_GRACE ago) after max_receive_count receives to the dead-letter
 * queue (deadletter.c).  Runs every pass for queues that have a dead-letter
 * queue: it reads only the leases that ended since.
 */
static void
sweep_dead_letters(QueueRow *q, SweptQueue *sq, MemoryContext cxt)
{
	PG_TRY();
	{
		TimestampTz now = 0;
		uint64		moved;
		bool		prio_column = false;

		do
		{
			QueueMeta  *meta;

			StartTransactionCommand();
			if (queue_row_gone(q))
			{
				/* dropped since the worker listed it */
				CommitTransactionCommand();
				queue_list_stale = true;
				break;			/* (never return from inside PG_TRY) */
			}
			SPI_connect();
			PushActiveSnapshot(GetTransactionSnapshot());
			now = GetCurrentTimestamp();
			meta = queue_lookup(cstring_to_text(q->name));
			prio_column = meta->prio_column;
			moved = meta->max_receive_count > 0 ?
				queue_dead_letter_sweep(meta, sq->dlq_since, now - DLQ_GRACE) : 0;
			PopActiveSnapshot();
			SPI_finish();
			CommitTransactionCommand();
			MemoryContextReset(cxt);
			CHECK_FOR_INTERRUPTS();
		} while (moved >= SWEEP_BATCH);
		/* A little overlap: a lease ending now may commit a moment later. */
		if (now != 0)
		{
			sq->dlq_since = now - DLQ_GRACE - USECS_PER_SEC;

			/*
			 * No lease can end before the first message not visible yet
			 * turns visible (none: until a commit makes the queue active).
			 */
			StartTransactionCommand();
			SPI_connect();
			PushActiveSnapshot(GetTransactionSnapshot());
			sq->dlq_due = sweep_time(queue_next_visible_text(tbl(q, 'q'), key(q, 'q'),
															 prio_column, "now() + $1"), 0);
			if (sq->dlq_due == 0)
				sq->dlq_due = DT_NOEND;
			else
				sq->dlq_due += DLQ_GRACE;
			PopActiveSnapshot();
			SPI_finish();
			CommitTransactionCommand();
			MemoryContextReset(cxt);
		}
	}
	PG_CATCH();
	{
		sweep_recover(cxt);
	}
	PG_END_TRY();
}

/*
 * Sweep one queue: up to SWEEP_ROUNDS short transactions, each one chunk
 * of the expiry lap (when a lap is due or under way) and the windows (when
 * due), then note when it is next due.  The lap's state changes only once
 * its chunk committed.  An error (say, the queue was dropped meanwhile) is
 * logged and the queue retried on a later pass.
 */
static void
sweep_queue(QueueRow *q, SweptQueue *sq, MemoryContext cxt)
{
	PG_TRY();
	{
		for (int round = 0; round < SWEEP_ROUNDS; round++)
		{
			TimestampTz now;
			int64		arrivals = queue_arrival_count(q->id);
			LapStep		step = {0};
			bool		chunked = false;
			bool		windows_busy = false;
			bool		windows_checked = false;
			bool		windows_empty = false;

			StartTransactionCommand();
			/* Dropped since the worker listed it: the next list forgets it. */
			if (queue_row_gone(q))
			{
				CommitTransactionCommand();
				queue_list_stale = true;
				break;
			}
			SPI_connect();
			PushActiveSnapshot(GetTransactionSnapshot());
			now = GetCurrentTimestamp();
			if (!sq->lap_running && now >= sq->lap_due)
			{
				sq->lap_running = true;
				sq->lap_cursor = 0;
				sq->lap_start = now;
				sq->lap_oldest = DT_NOEND;
				/* read before this transaction's snapshot: see below */
				sq->lap_arrivals = arrivals;
			}
			if (sq->lap_running)
			{
				sweep_chunk(q, sq->lap_cursor, now - q->retention, &step);
				chunked = true;
				if (step.deleted > 0)
					queue_count(q->id, QC_EXPIRED, (int64) step.deleted);
			}
			/* The lap's last chunk also looks at the windows. */
			if (now >= sq->windows_due || (chunked && step.last))
			{
				uint64		forgotten = sweep_windows(q, now - q->dedup_window,
													  now - ATTEMPT_WINDOW);

				windows_busy = forgotten >= SWEEP_BATCH;
				if (!windows_busy)
				{
					sq->windows_due = windows_next_due(q, now, &windows_empty);
					windows_checked = true;

					/*
					 * None: only a commit (a send with an id, a receive
					 * with an attempt) can add one, and it makes the
					 * queue active (queue_sweep_pass).
					 */
					sq->windows_empty = windows_empty;
					if (windows_empty)
						sq->windows_due = DT_NOEND;
				}
			}
			PopActiveSnapshot();
			SPI_finish();
			CommitTransactionCommand();
			MemoryContextReset(cxt);

			if (chunked)
			{
				sq->lap_cursor = step.cursor;
				sq->lap_oldest = Min(sq->lap_oldest, step.oldest);
				if (step.last)
				{
					TimestampTz took = now - sq->lap_start;

					sq->lap_running = false;
					sq->lap_due = Max(Min(sq->lap_oldest, sq->lap_start) + q->retention,
									  now + Max(took, q->retention / 10));

					/*
					 * Nothing left at all: nothing can expire until
					 * something arrives (ids and attempts only come with
					 * messages).  Note the arrivals read before the lap's
					 * first snapshot, so one it did not see shows as a
					 * change.  (A queue whose arrivals cannot be counted
					 * is looked at when its windows are due instead.)
					 */
					sq->empty_arrivals =
						(sq->lap_oldest == DT_NOEND && windows_checked && windows_empty &&
						 sq->lap_arrivals >= 0) ? sq->lap_arrivals : -1;
				}
			}
			if (!sq->lap_running && !windows_busy)
				break;
			CHECK_FOR_INTERRUPTS();
		}
	}
	PG_CATCH();
	{
		sweep_recover(cxt);
		sq->lap_due = sq->windows_due = GetCurrentTimestamp() + 10 * USECS_PER_SEC;
		sq->lap_running = false;
	}
	PG_END_TRY();
}

/* Vacuum a queue that churned (vacuum.c); an error waits for a later pass. */
static void
vacuum_queue(QueueRow *q, SweptQueue *sq, MemoryContext cxt)
{
	PG_TRY();
	{
		queue_vacuum_if_churned(q->id, q->fifo, q->shared, q->g_blocks, &sq->vacuumed_churn,
								&sq->vacuumed_g_churn);
		if (!q->shared)
		{
			queue_recycle_if_empty(q->id, q->fifo, &sq->recycle_due);
			queue_compact_if_dead(q->id, q->fifo);
		}
	}
	PG_CATCH();
	{
		sweep_recover(cxt);
	}
	PG_END_TRY();
	MemoryContextReset(cxt);
}

/*
 * The rows of dropped and purged shared queues (queue._reclaim), deleted
 * RECLAIM_BATCH at a time, each batch a transaction of its own, at most
 * RECLAIM_ROUNDS per pass, so a drop of a million messages holds no lock
 * on anything else for long and the worker's other work goes on.
 */
#define RECLAIM_BATCH			10000
#define RECLAIM_ROUNDS			50

void
queue_reclaim_pass(MemoryContext cxt)
{
	MemoryContext outer = MemoryContextSwitchTo(cxt);

	for (int round = 0; round < RECLAIM_ROUNDS; round++)
	{
		uint64		n = 0;

		PG_TRY();
		{
			Oid			types[1] = {INT4OID};
			Datum		values[1] = {Int32GetDatum(RECLAIM_BATCH)};

			StartTransactionCommand();
			SPI_connect();
			PushActiveSnapshot(GetTransactionSnapshot());
			if (OidIsValid(queue_data_relid("fifo_messages")))
			{
				bool		isnull;

				if (SPI_execute_with_args("SELECT queue._reclaim_step($1)", 1, types, values,
										  NULL, false, 1) != SPI_OK_SELECT)
					elog(ERROR, "queue reclaim failed");
				n = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0],
												SPI_tuptable->tupdesc, 1, &isnull));
			}
			PopActiveSnapshot();
			SPI_finish();
			CommitTransactionCommand();
		}
		PG_CATCH();
		{
			sweep_recover(cxt);
			n = 0;
		}
		PG_END_TRY();
		MemoryContextReset(cxt);
		if (n == 0)
			break;
		CHECK_FOR_INTERRUPTS();
	}
	MemoryContextSwitchTo(outer);
}

/*
 * Vacuum the shared tables that churned; try the dedicated queues whose
 * recycling is pending, and recycle the shared tables of a kind whose
 * queues (of the n rows) hold nothing (vacuum.c); an error waits for a
 * later pass.
 */
void
queue_vacuum_shared_pass(QueueRow **rows, int n, MemoryContext cxt)
{
	MemoryContext outer = MemoryContextSwitchTo(cxt);

	PG_TRY();
	{
		queue_vacuum_shared_if_churned();
		queue_recycle_pending_pass();
		queue_compact_shared_if_dead();
		for (int fifo = 0; fifo <= 1; fifo++)
		{
			int64	   *ids = palloc(sizeof(int64) * Max(n, 1));
			int			nids = 0;

			for (int i = 0; i < n; i++)
				if (rows[i]->shared && rows[i]->fifo == (fifo == 1))
					ids[nids++] = rows[i]->id;
			queue_recycle_shared_if_empty(ids, nids, fifo == 1);
		}
	}
	PG_CATCH();
	{
		sweep_recover(cxt);
	}
	PG_END_TRY();
	MemoryContextReset(cxt);
	MemoryContextSwitchTo(outer);
}

/* A queue the worker has not swept yet: everything is due. */
void
queue_sweep_new(SweptQueue *sq)
{
	sq->lap_due = sq->windows_due = sq->dlq_due = 0;
	sq->windows_empty = false;
	sq->dlq_since = DT_NOBEGIN;
	sq->empty_arrivals = -1;
	sq->vacuumed_churn = -1;
	sq->vacuumed_g_churn = -1;
	sq->recycle_due = 0;
	sq->lap_running = false;
}

/* A queue known to be empty, with no arrival yet: nothing is due. */
void
queue_sweep_empty(SweptQueue *sq)
{
	sq->empty_arrivals = 0;
	sq->windows_empty = true;
	sq->lap_due = sq->windows_due = sq->dlq_due = DT_NOEND;
}

/* A reload makes every queue due at once: an admin's "sweep now". */
void
queue_sweep_due_now(SweptQueue *sq)
{
	sq->lap_due = sq->windows_due = sq->dlq_due = 0;
	sq->empty_arrivals = -1;
}

/*
 * When a pass must next visit q unless a commit changes it first
 * (SweptQueue.active; DT_NOEND: only then): a queue found empty, only
 * after an arrival, a commit; else when something in it can expire, or,
 * for a queue with a dead-letter queue, a lease end (ids and attempts in
 * windows found empty, and leases, come only with commits); a lap under
 * way, at once.  Vacuum goes by counters only commits move.
 */
TimestampTz
queue_sweep_next_visit(QueueRow *q, SweptQueue *sq)
{
	TimestampTz due = Min(sq->lap_due, sq->windows_due);

	if (sq->empty_arrivals >= 0)
		return DT_NOEND;
	if (sq->lap_running)
		return 0;
	if (q->has_dlq)
		due = Min(due, sq->dlq_due);
	return due;
}

/*
 * One pass's work on one queue: vacuum it if it churned, move its poison
 * messages to its dead-letter queue, and sweep it if something can have
 * expired.  Each step runs in transactions of its own and logs its error,
 * if any, without stopping the others.
 */
void
queue_sweep_pass(QueueRow *q, SweptQueue *sq, MemoryContext cxt)
{
	MemoryContext outer = MemoryContextSwitchTo(cxt);

	/*
	 * A commit changed it: a deduplication id or receive attempt may have
	 * come into windows found empty; it expires no sooner than this.
	 */
	if (sq->active && sq->windows_empty)
	{
		sq->windows_due = GetCurrentTimestamp() + Min(q->dedup_window, ATTEMPT_WINDOW);
		sq->windows_empty = false;
	}
	vacuum_queue(q, sq, cxt);
	if (q->has_dlq)
		sweep_dead_letters(q, sq, cxt);

	/*
	 * An empty queue waits for something to arrive; then it is due at once
	 * (a dead letter may come already expired).
	 */
	if (sq->empty_arrivals >= 0)
	{
		if (queue_arrival_count(q->id) == sq->empty_arrivals)
		{
			MemoryContextSwitchTo(outer);
			return;
		}
		sq->empty_arrivals = -1;
		sq->lap_due = sq->windows_due = 0;
	}
	if (sq->lap_running ||
		GetCurrentTimestamp() >= Min(sq->lap_due, sq->windows_due))
		sweep_queue(q, sq, cxt);
	MemoryContextSwitchTo(outer);
}
