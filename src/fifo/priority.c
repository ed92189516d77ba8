/*-------------------------------------------------------------------------
 *
 * priority.c
 *	  Priorities of a standard queue's messages (DESIGN.md "Rate limits and
 *	  priorities"): 0 to 9, 9 served first, oldest first within one; a
 *	  send without one takes the queue's default_priority.
 *
 * Storage.  A message's priority is its row's priority column (1.12), with
 * one exception that keeps a queue that never uses priorities as fast as
 * before: priority 4 is stored as null until the queue has had a message
 * of another priority.  The rows are in one of two partial indexes: the
 * null ones in the visible_at index (1.13), the others in the priorities'
 * index the levels are read from (plans.c's PRIO_CANDIDATES), so a lease
 * writes two index entries whichever it is.  A queue that never used
 * priorities pays nothing: the plain lease, which reads the visible_at
 * index alone.  Once a message was stored with a priority (sent or moved
 * into the queue), its counter slot says so (QUEUE_PRIORITIES, noted at
 * commit) and every receive reads level by level; sends from then on
 * store 4 as 4.  The slot is saved at a clean shutdown; a slot that does
 * not know (a new one, after a crash) is settled by one look at the
 * partial index (QP_PRIO_EXISTS).
 *
 * The switch.  The plain lease does not see a prioritised row: a receive
 * asks at each step (and after its read of the bounds) whether the queue
 * has priorities, and a transaction sees its own sends' notes before they
 * commit (queue_pending_kinds).  A receive in the moment between a first
 * priority's commit and its note (the commit's callback) may miss that
 * message, as if it had run a moment before; a waiting one is woken by
 * that commit after its note, and reads by priority.
 *
 * A null row sent before the queue's first priority (or by a send that
 * raced it, or moved in) is priority 4 too.  Every send that stores a null
 * notes so in the slot (QUEUE_PRIORITY_NULLS, at commit; assumed after a
 * crash): while it is set, a receive looks for them first at level 4, in
 * the visible_at index from the queue's ready bound (plans.c's _NULLS
 * forms), so a queue that used priorities from its first message never
 * pays that look.  The note is never taken back.
 *
 * The walk.  A receive reads the levels 9 to 0, each from a ready bound of
 * its own (common/counts.c's level_from: no message of that priority is
 * ready below it), and raises the bounds of the levels it walked
 * (queue_priority_raise), so it does not wade through the index entries
 * of messages others just leased or deleted.  It reads only the levels a
 * message was ever stored at: every send and move notes its levels in the
 * slot at commit (QUEUE_PRIORITY_LEVEL; a move, not knowing, all), before
 * the commit lowers the bounds, and the receive reads them after the
 * bounds' generation, so a level it skips but whose message it could see
 * makes its raise void.  Only a slot made with the queue (or after the
 * look) knows all its levels (QUEUE_PRIORITIES_CHECKED); with any other,
 * every level is read, nulls too.
 *
 * FIFO queues refuse priorities (22023): a FIFO queue's order is each
 * message group's send order, which a priority would contradict; a
 * default_priority other than 4 is refused too.  Their messages show a
 * null priority.
 *
 * Delays, visibility timeouts, retries, dead letters and redrive keep a
 * message's priority: it is a column of the row, copied by every move
 * (lease/deadletter.c, the layout move of sql/queue--1.11--1.12.sql).
 *
 * Calls: storage/ (the statements), common/ (the counter slot's kinds).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "utils/array.h"
#include "utils/timestamp.h"

#include "common/queue_common.h"
#include "storage/queue_storage.h"
#include "fifo/queue_fifo.h"

#define PRIORITY_MAX		9
#define PRIORITY_DEFAULT	4

/*
 * Whether a slot's kinds (-1: none) know every priority a message of the
 * queue was stored with: the slot was made with the queue (or by a look at
 * its table), and every send and move since noted its levels.
 */
static inline bool
levels_known(int kinds)
{
	return kinds >= 0 && (kinds & QUEUE_PRIORITIES_CHECKED);
}

/* Whether a lease by priority reads level l (a message may be stored at it). */
static inline bool
level_walked(int kinds, int l)
{
	return !levels_known(kinds) || (kinds & QUEUE_PRIORITY_LEVEL(l));
}

/* 22023 unless p is 0 to 9 on a standard queue; argname names the argument. */
static void
check_priority(const QueueMeta *q, int32 p, const char *argname)
{
	if (p < 0 || p > PRIORITY_MAX)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("argument \"%s\" must be between 0 and 9", argname)));
	if (q->fifo)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("argument \"%s\" is for standard queues", argname),
				 errdetail("A FIFO queue delivers each message group in the order it was sent.")));
}

/*
 * Whether q's receives read by priority: it is a standard queue that has
 * had a message of a priority other than 4 (the file header).
 */
bool
queue_has_priorities(QueueMeta *q)
{
	int			kinds;
	bool		isnull;
	bool		found;

	if (q->fifo || !q->prio_column)
		return false;
	if (q->tenant_kinds & QUEUE_PRIORITIES)
		return true;			/* never unset while the queue lives */
	kinds = queue_slot_kinds(q->id, &q->counter_slot);
	if (kinds >= 0)
	{
		q->tenant_kinds |= (uint32) kinds & QUEUE_PRIORITIES;
		if (kinds & QUEUE_PRIORITIES)
			return true;		/* (without CHECKED: every level is read) */
		if (kinds & QUEUE_PRIORITIES_CHECKED)	/* ... or this transaction sent one */
			return (queue_pending_kinds(q->id) & QUEUE_PRIORITIES) != 0;
	}

	/*
	 * The slot does not know (none, or one made by a commit after a crash,
	 * or before 1.12's slots knew): look (a send's note, at its commit, may
	 * come meanwhile: both OR).
	 */
	if (queue_exec(q, QP_PRIO_EXISTS, NULL, NULL, true, 1) != SPI_OK_SELECT ||
		SPI_processed != 1)
		elog(ERROR, "queue priority look failed");
	found = DatumGetBool(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
	/* (nobody knows which levels and whether a null one is left: all) */
	queue_set_kinds(q->id, QUEUE_PRIORITIES_CHECKED |
					(found ? QUEUE_PRIORITIES | QUEUE_PRIORITY_NULLS |
					 QUEUE_PRIORITY_LEVELS : 0));
	if (found)
		q->tenant_kinds |= QUEUE_PRIORITIES;
	return found;
}

/*
 * The priorities of a send's n entries as stored (b->priorities, or NULL
 * when every one is null): given[i] is an entry's priority,
 * QUEUE_PRIORITY_NONE for none (the queue's default), checked here
 * (argname names the argument); given NULL: none for all.
 */
void
queue_priority_of_send(QueueMeta *q, SendBatch *b, const int32 *given, const char *argname)
{
	bool		any_other = false;
	bool		any_stored = false;
	bool		any_null = false;
	uint32		levels = 0;
	bool		mode;
	int16	   *stored = palloc(b->n * sizeof(int16));

	/* each entry's priority, checked, the queue's default for none */
	for (int i = 0; i < b->n; i++)
	{
		int32		p = given != NULL ? given[i] : QUEUE_PRIORITY_NONE;

		if (p != QUEUE_PRIORITY_NONE)
			check_priority(q, p, argname);
		else
			p = q->default_priority;
		stored[i] = (int16) p;
		any_other |= p != PRIORITY_DEFAULT;
	}

	/*
	 * 4 is stored as 4 once the queue reads by priority, as its slot says
	 * (no look at the table: a null is found at level 4 too), and by a send
	 * that switches it
	 */
	mode = any_other || (q->tenant_kinds & QUEUE_PRIORITIES) != 0;
	if (!mode && b->n > 0 && !q->fifo && q->prio_column)
	{
		int			kinds = queue_slot_kinds(q->id, &q->counter_slot);

		mode = kinds >= 0 && (kinds & QUEUE_PRIORITIES);
		if (mode)
			q->tenant_kinds |= QUEUE_PRIORITIES;
		else
			mode = (queue_pending_kinds(q->id) & QUEUE_PRIORITIES) != 0;
	}
	for (int i = 0; i < b->n; i++)
	{
		if (stored[i] == PRIORITY_DEFAULT && !mode)
		{
			stored[i] = -1;
			any_null = true;
		}
		else
		{
			any_stored = true;
			levels |= QUEUE_PRIORITY_LEVEL(stored[i]);
		}
	}
	b->priorities = any_stored ? stored : NULL;
	if (any_stored && !q->prio_column)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("queue \"%s\" has no priorities before the extension's update to 1.12",
						q->name),
				 errhint("Run ALTER EXTENSION queue UPDATE.")));
	if (!q->fifo && (any_other || any_null || levels != 0))
		queue_note_kinds(q->id, (any_stored ? QUEUE_PRIORITIES : 0) |
						 (any_null ? QUEUE_PRIORITY_NULLS : 0) | levels);
}

/*
 * The statement of a receive of kind plain (QP_RECEIVE, QP_RECEIVE_DLQ,
 * QP_FAIR_RECEIVE) on q, which reads by priority (queue_has_priorities):
 * the form that also looks for null priorities while q may have some.
 * kinds: the slot's, as the receive's read of its ready bound saw them.
 */
QueuePlanKind
queue_priority_plan(QueueMeta *q, QueuePlanKind plain, int kinds)
{
	bool		nulls = (q->tenant_kinds & QUEUE_PRIORITY_NULLS) != 0;

	if (plain == QP_FAIR_RECEIVE)
		return QP_FAIR_RECEIVE_PRIO;	/* sorts each tenant's by coalesce() */
	if (!nulls)
	{
		nulls = !levels_known(kinds) || (kinds & QUEUE_PRIORITY_NULLS);
		if (nulls)
			q->tenant_kinds |= QUEUE_PRIORITY_NULLS;	/* never unset */
	}
	if (plain == QP_RECEIVE_DLQ)
		return nulls ? QP_RECEIVE_DLQ_PRIO_NULLS : QP_RECEIVE_DLQ_PRIO;
	return nulls ? QP_RECEIVE_PRIO_NULLS : QP_RECEIVE_PRIO;
}

/*
 * The priorities' ready bounds a lease by priority walks each level from
 * (plans.c's PRIO_LEVEL): a timestamptz[] indexed by priority + 1.
 */
Datum
queue_priority_bounds(const QueueReadyRead *r)
{
	Datum		d[QUEUE_PRIO_LEVELS];

	/* a level no message was ever stored at is not read (+infinity) */
	for (int l = 0; l < QUEUE_PRIO_LEVELS; l++)
		d[l] = TimestampTzGetDatum(level_walked(r->kinds, l) ? r->level_from[l] : DT_NOEND);
	return PointerGetDatum(construct_array(d, QUEUE_PRIO_LEVELS, TIMESTAMPTZOID, 8,
										   FLOAT8PASSBYVAL, TYPALIGN_DOUBLE));
}

/*
 * After a lease by priority (run, queue_priority_plan's) at now that asked
 * for want and leased nrows (tt): raise the bound of each level it walked (common/counts.c).  The
 * walk reads the levels 9 to 0 (in the nulls form the null ones between
 * 5 and 4), each in visible_at order and under SKIP LOCKED, and moves to
 * the next only when a level has no more: so every level before the one
 * it stopped in has nothing ready left below now, and the level it
 * stopped in nothing below the latest sent_at it leased there (sent_at <=
 * visible_at), as for a plain lease.  A walk that came short went through
 * every level.  A row the lease moved to the dead-letter queue (its
 * columns null) says nothing of its level: then nothing is raised.
 */
void
queue_priority_raise(const QueueReadyRead *r, QueuePlanKind run, SPITupleTable *tt,
					 uint64 nrows, int want, TimestampTz now)
{
	bool		nulls_form = run == QP_RECEIVE_PRIO_NULLS || run == QP_RECEIVE_DLQ_PRIO_NULLS;
	TimestampTz to[QUEUE_PRIO_LEVELS];
	TimestampTz latest[QUEUE_PRIO_LEVELS];
	int			lowest = QUEUE_PRIO_LEVELS;	/* the lowest level leased from */
	bool		any_null = false;

	for (int l = 0; l < QUEUE_PRIO_LEVELS; l++)
		to[l] = latest[l] = DT_NOBEGIN;
	for (uint64 i = 0; i < nrows; i++)
	{
		bool		isnull;
		Datum		sent = SPI_getbinval(tt->vals[i], tt->tupdesc, RCOL_SENT_AT, &isnull);
		Datum		p;

		if (isnull)
			return;				/* a dead letter's row */
		p = SPI_getbinval(tt->vals[i], tt->tupdesc, RCOL_PRIORITY, &isnull);
		if (isnull)
			any_null = true;
		else
		{
			int			l = DatumGetInt16(p);

			if (l < 0 || l >= QUEUE_PRIO_LEVELS)
				return;
			latest[l] = Max(latest[l], DatumGetTimestampTz(sent));
			lowest = Min(lowest, l);
		}
	}
	if (nrows < (uint64) want)
	{
		for (int l = 0; l < QUEUE_PRIO_LEVELS; l++)
			to[l] = now;		/* every level walked to its end */
	}
	else if (any_null && nulls_form && lowest > PRIORITY_DEFAULT)
	{
		/* stopped among the nulls: the levels above them are walked */
		for (int l = PRIORITY_DEFAULT + 1; l < QUEUE_PRIO_LEVELS; l++)
			to[l] = now;
	}
	else if (lowest < QUEUE_PRIO_LEVELS)
	{
		for (int l = lowest + 1; l < QUEUE_PRIO_LEVELS; l++)
			to[l] = now;
		to[lowest] = latest[lowest];
	}
	/* a level the walk skipped (none stored, as the slot said) stays */
	for (int l = 0; l < QUEUE_PRIO_LEVELS; l++)
		if (!level_walked(r->kinds, l))
			to[l] = DT_NOBEGIN;
	queue_ready_raise_levels(r, to);
}

/* One of the sends' argument forms: a single priority for every entry. */
int32 *
queue_priority_all(int n, int32 p)
{
	int32	   *given = palloc(n * sizeof(int32));

	for (int i = 0; i < n; i++)
		given[i] = p;
	return given;
}

/*
 * Messages were moved into the queue dst_id (a dead-letter move, a
 * redrive), with_priority when one of them has a priority of its own: they
 * keep it, so dst reads by priority from then on; a null one (4) may be
 * among them, so dst looks for those too.  Nothing is read here: a move
 * runs inside receives, the worker's sweeps and transaction ends.
 */
void
queue_priority_moved(int64 dst_id, bool with_priority)
{
	queue_note_kinds(dst_id, QUEUE_PRIORITY_NULLS |
					 (with_priority ? QUEUE_PRIORITIES | QUEUE_PRIORITY_LEVELS : 0));
}

/* Sort key of a leased row: priority (null: 4) down, then message id up. */
typedef struct PrioRow
{
	HeapTuple	tup;
	int32		prio;
	int64		id;
} PrioRow;

static int
prio_row_cmp(const void *a, const void *b)
{
	const PrioRow *x = a;
	const PrioRow *y = b;

	if (x->prio != y->prio)
		return x->prio > y->prio ? -1 : 1;
	return x->id < y->id ? -1 : (x->id > y->id ? 1 : 0);
}

/*
 * A lease by priority returns its rows in no order: put them in the order
 * they were chosen in, highest priority first, oldest (lowest id) first
 * within one.
 */
void
queue_priority_order_rows(SPITupleTable *tt, uint64 nrows)
{
	PrioRow    *rows;

	if (nrows < 2)
		return;
	rows = palloc(nrows * sizeof(PrioRow));
	for (uint64 r = 0; r < nrows; r++)
	{
		bool		isnull;
		Datum		d;

		rows[r].tup = tt->vals[r];
		d = SPI_getbinval(tt->vals[r], tt->tupdesc, RCOL_PRIORITY, &isnull);
		rows[r].prio = isnull ? PRIORITY_DEFAULT : DatumGetInt16(d);
		d = SPI_getbinval(tt->vals[r], tt->tupdesc, RCOL_MESSAGE_ID, &isnull);
		rows[r].id = DatumGetInt64(d);
	}
	qsort(rows, nrows, sizeof(PrioRow), prio_row_cmp);
	for (uint64 r = 0; r < nrows; r++)
		tt->vals[r] = rows[r].tup;
	pfree(rows);
}
