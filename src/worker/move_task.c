/*-------------------------------------------------------------------------
 *
 * move_task.c
 *	  The SQS endpoint's message move tasks (StartMessageMoveTask), run in
 *	  the background by the database's queue worker, in slices.
 *
 * StartMessageMoveTask (src/sqs/move_tasks.c) only checks the request and
 * records a RUNNING row in queue._move_tasks: the source (a dead-letter
 * queue) and destination by queue id, the role that asked, the rate
 * (MaxNumberOfMessagesPerSecond, NULL when not given), and upto_id, the
 * largest message id issued when it started.  At commit it wakes this
 * database's worker (queue_move_task_started), which from then on
 * advances the task in slices between its sweeps:
 *
 *	- A slice is one transaction: it locks the task's row, checks the task
 *	  is still RUNNING (CancelMessageMoveTask sets CANCELLED; a dropped
 *	  source takes its tasks with it), runs the redrive (deadletter.c,
 *	  queue_redrive_bounded) for at most N messages with ids up to upto_id,
 *	  and adds what it moved to the row.  So a crash rolls back a slice
 *	  whole: no message is half moved, and after a restart the worker
 *	  resumes every RUNNING row where its count says.
 *	- The redrive runs as the task's role, in a security-restricted
 *	  operation with search_path pinned (elevated.c's sandbox), so it
 *	  checks that role's rights every slice: manage on the source, send on
 *	  every destination.  An error of the redrive ends the task FAILED with
 *	  the error's message as FailureReason, except the passing ones (lock
 *	  and serialization failures, cancels), which the next slice retries.
 *	- N follows the rate: tokens accrue at the rate (at most a second's
 *	  worth) and slices come at least MOVE_SLICE_MS apart; without a rate a
 *	  slice takes MOVE_SLICE_DEFAULT messages and the next comes
 *	  MOVE_DEFAULT_GAP_MS later.  No slice takes more than MOVE_SLICE_MAX,
 *	  and one loop turn of the worker gives all tasks together at most
 *	  MOVE_TURN_BUDGET_MS before it sweeps again.
 *	- Turns by role: the worker advances at most MOVE_TASKS_RUNNING_MAX
 *	  tasks, each role's oldest first, then each role's second, and so on,
 *	  and of one role at most queue.move_tasks_per_role (default 10); a
 *	  role's newer tasks wait RUNNING until its older ones end.  So one
 *	  role's hundred slow tasks never keep another role's from running.
 *	- It ends COMPLETED when a slice finds fewer messages to move (up to
 *	  upto_id, not held by a receiver) than it may take: new dead letters
 *	  arriving since the start are not its business, as with SQS; those
 *	  that have no source queue to go back to stay, as queue.redrive leaves
 *	  them.  FAILED when its destination is gone, its role
 *	  is gone or lost a right, the oldest dead letters have no source queue
 *	  to go back to, or it ran past SQS's 36 hours.
 *
 * May call: deadletter.c, elevated.c, shmem.c, PostgreSQL.  Called by:
 * worker.c (queue_move_tasks_advance), queue.c (queue_move_task_init) and
 * the SQS library (queue_move_task_started, core_api.h).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "catalog/namespace.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "storage/latch.h"
#include "storage/lock.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"
#include "utils/syscache.h"
#include "utils/timestamp.h"

#include "core_api.h"
#include "common/queue_common.h"
#include "storage/queue_storage.h"
#include "access/queue_access.h"
#include "lease/queue_lease.h"
#include "worker/queue_worker.h"

#define MOVE_TASKS_RUNNING_MAX	100 /* tasks advanced at once (SQS: 100 active) */
#define MOVE_SLICE_MAX			1000	/* messages of one slice, at most */
#define MOVE_SLICE_DEFAULT		500 /* ... of a task without a rate */
#define MOVE_SLICE_MS			100 /* a rated task's slices, at least apart */
#define MOVE_DEFAULT_GAP_MS		10	/* between slices of a task without a rate */
#define MOVE_TURN_BUDGET_MS		200 /* all slices of one worker loop turn */
#define MOVE_RETRY_MS			1000	/* after a slice that failed to run */
#define MOVE_REFRESH_MS			10000	/* the RUNNING rows are read again */
#define MOVE_TASK_MAX_AGE		(36 * USECS_PER_HOUR)	/* SQS's limit */
#define MOVE_HANDLE_MAX			128

/* A RUNNING task as the worker tracks it between slices. */
typedef struct MoveTaskState
{
	char		handle[MOVE_HANDLE_MAX];
	int32		rate;			/* messages per second; 0: as fast as allowed */
	TimestampTz last;			/* its last slice (tokens accrue since) */
	double		carry;			/* tokens left from the last slice */
	TimestampTz due;			/* its next slice */
	bool		over;			/* ended: forget it */
} MoveTaskState;

static MoveTaskState tasks[MOVE_TASKS_RUNNING_MAX];

/*
 * queue.move_tasks_per_role: of one role's RUNNING tasks, the oldest this
 * many are advanced; its others wait (RUNNING, nothing moved) until those
 * end.  The worker takes the tasks it advances by turns over the roles
 * (each role's oldest first, then each role's second, ...), so one role's
 * many tasks never keep another role's out of the MOVE_TASKS_RUNNING_MAX
 * it advances.
 */
static int	move_tasks_per_role = 10;
static int	ntasks = 0;
static int	next_first = 0;		/* where a turn starts: tasks take turns */
static TimestampTz refreshed_at = 0;

/* The worker's statements, prepared once and kept. */
static SPIPlanPtr plan_running = NULL;
static SPIPlanPtr plan_read = NULL;
static SPIPlanPtr plan_update = NULL;

/* ------------------------------------------------------------------------
 * The wake-up at commit (the endpoint's side)
 * ------------------------------------------------------------------------
 */
static bool started_pending = false;
static bool started_callback = false;

static void
move_task_xact_callback(XactEvent event, void *arg)
{
	if (!started_pending)
		return;
	if (event == XACT_EVENT_COMMIT && queue_shared != NULL)
	{
		LWLockAcquire(queue_shared->lock, LW_EXCLUSIVE);
		{
			QueueDbSlot *s = queue_db_slot(MyDatabaseId, false);

			if (s != NULL)
			{
				s->move_tasks_added = true;
				if (s->latch != NULL)
					SetLatch(s->latch);
			}
		}
		LWLockRelease(queue_shared->lock);
	}
	if (event == XACT_EVENT_COMMIT || event == XACT_EVENT_ABORT ||
		event == XACT_EVENT_PREPARE)
		started_pending = false;
}

/*
 * The current transaction recorded a RUNNING move task: wake the
 * database's worker when it commits (a prepared one is found by the
 * worker's periodic read).
 */
void
queue_move_task_started(void)
{
	if (!started_callback)
	{
		RegisterXactCallback(move_task_xact_callback, NULL);
		started_callback = true;
	}
	started_pending = true;
}

/* The worker takes the flag a commit above set. */
static bool
take_added(void)
{
	QueueDbSlot *s;
	bool		added = false;

	if (queue_shared == NULL)
		return false;
	LWLockAcquire(queue_shared->lock, LW_EXCLUSIVE);
	s = queue_db_slot(MyDatabaseId, false);
	if (s != NULL && s->move_tasks_added)
	{
		added = true;
		s->move_tasks_added = false;
	}
	LWLockRelease(queue_shared->lock);
	return added;
}

/* ------------------------------------------------------------------------
 * The worker's side
 * ------------------------------------------------------------------------
 */

/* Prepare and keep a statement of the worker's. */
static SPIPlanPtr
keep(const char *sql, int nargs, Oid *types)
{
	SPIPlanPtr	p = SPI_prepare(sql, nargs, types);

	if (p == NULL)
		elog(ERROR, "move task: could not prepare a statement: %s",
			 SPI_result_code_string(SPI_result));
	if (SPI_keepplan(p) != 0)
		elog(ERROR, "move task: could not keep a statement");
	return p;
}

/*
 * Whether the extension in this database records move tasks the way this
 * library runs them (1.7 on): before its update it has nothing to run.
 */
static bool
tasks_table_ready(void)
{
	Oid			nsp = get_namespace_oid("queue", true);
	Oid			relid;

	if (!OidIsValid(nsp))
		return false;
	relid = get_relname_relid("_move_tasks", nsp);
	return OidIsValid(relid) && get_attnum(relid, "upto_id") != InvalidAttrNumber;
}

/*
 * Read the RUNNING tasks (at start, so a restart resumes them; when one
 * was started; and now and then): keep the state of those already known,
 * forget those no longer running.
 */
static void
refresh(MemoryContext cxt)
{
	MoveTaskState *old = palloc(sizeof(tasks));
	int			nold = ntasks;
	TimestampTz now = GetCurrentTimestamp();

	memcpy(old, tasks, sizeof(tasks));
	ntasks = 0;
	StartTransactionCommand();
	SPI_connect();
	PushActiveSnapshot(GetTransactionSnapshot());
	if (tasks_table_ready())
	{
		Datum		v[2] = {Int32GetDatum(MOVE_TASKS_RUNNING_MAX), Int32GetDatum(move_tasks_per_role)};
		Oid			types[2] = {INT4OID, INT4OID};

		/* by turns over the roles, at most $2 of each (move_tasks_per_role) */
		if (plan_running == NULL)
			plan_running = keep("SELECT t.task_handle, t.max_per_second FROM"
								" (SELECT r.task_handle, r.max_per_second, r.started_at,"
								" pg_catalog.row_number() OVER (PARTITION BY r.role ORDER BY r.started_at) AS turn"
								" FROM queue._move_tasks r WHERE r.status OPERATOR(pg_catalog.=) 'RUNNING') t"
								" WHERE t.turn OPERATOR(pg_catalog.<=) $2"
								" ORDER BY t.turn, t.started_at LIMIT $1", 2, types);
		if (SPI_execute_plan(plan_running, v, NULL, true, 0) != SPI_OK_SELECT)
			elog(ERROR, "move task: could not read the running tasks");
		for (uint64 r = 0; r < SPI_processed && ntasks < MOVE_TASKS_RUNNING_MAX; r++)
		{
			HeapTuple	tup = SPI_tuptable->vals[r];
			TupleDesc	desc = SPI_tuptable->tupdesc;
			char	   *handle = SPI_getvalue(tup, desc, 1);
			bool		isnull;
			Datum		rate = SPI_getbinval(tup, desc, 2, &isnull);
			MoveTaskState *t = &tasks[ntasks];

			if (handle == NULL || strlen(handle) >= MOVE_HANDLE_MAX)
				continue;		/* not one of ours */
			memset(t, 0, sizeof(*t));
			strlcpy(t->handle, handle, MOVE_HANDLE_MAX);
			t->rate = isnull ? 0 : DatumGetInt32(rate);
			t->last = now - MOVE_SLICE_MS * INT64CONST(1000);
			t->due = now;
			for (int i = 0; i < nold; i++)
				if (strcmp(old[i].handle, t->handle) == 0)
				{
					t->last = old[i].last;
					t->carry = old[i].carry;
					t->due = old[i].due;
					break;
				}
			ntasks++;
		}
	}
	PopActiveSnapshot();
	SPI_finish();
	CommitTransactionCommand();
	MemoryContextSwitchTo(cxt);
	refreshed_at = now;
	next_first = 0;
}

/*
 * How many messages t's next slice may move now (0: none yet; then its
 * due time is when one may).  The tokens are taken only when the slice
 * runs (slice_taken).
 */
static int64
slice_size(MoveTaskState *t, TimestampTz now, double *tokens)
{
	double		have;

	if (t->rate <= 0)
		return MOVE_SLICE_DEFAULT;
	have = t->carry + (double) (now - t->last) / USECS_PER_SEC * t->rate;
	if (have > t->rate)
		have = t->rate;			/* a second's worth at most */
	*tokens = have;
	if (have < 1)
	{
		t->due = now + (TimestampTz) ((1 - have) / t->rate * USECS_PER_SEC) + 1;
		return 0;
	}
	return Min((int64) have, MOVE_SLICE_MAX);
}

static void
slice_taken(MoveTaskState *t, TimestampTz now, double tokens, int64 n)
{
	t->last = now;
	if (t->rate <= 0)
	{
		t->due = now + MOVE_DEFAULT_GAP_MS * INT64CONST(1000);
		return;
	}
	t->carry = Min(tokens - (double) n, 1.0);
	t->due = now + MOVE_SLICE_MS * INT64CONST(1000);
}

/* Errors the next slice retries instead of failing the task. */
static bool
passing_error(int sqlerrcode)
{
	return sqlerrcode == ERRCODE_T_R_SERIALIZATION_FAILURE ||
		sqlerrcode == ERRCODE_T_R_DEADLOCK_DETECTED ||
		sqlerrcode == ERRCODE_LOCK_NOT_AVAILABLE ||
		sqlerrcode == ERRCODE_QUERY_CANCELED;
}

/*
 * The redrive of one slice, as role, in a subtransaction: the number
 * moved, or -1 with *reason set (the task fails) or not (retry later).
 */
static int64
redrive_as(Oid role, text *source, text *dest, int64 n, int64 upto, int64 *selected,
		   char **reason)
{
	MemoryContext oldcxt = CurrentMemoryContext;
	ResourceOwner oldowner = CurrentResourceOwner;
	volatile int64 moved = -1;

	*reason = NULL;
	BeginInternalSubTransaction(NULL);
	MemoryContextSwitchTo(oldcxt);
	PG_TRY();
	{
		QueueSandbox sb;

		queue_sandbox_enter(&sb, role, QUEUE_SEARCH_PATH, "0");
		moved = queue_redrive_bounded(source, dest, n, upto, selected);
		queue_sandbox_leave(&sb);
		ReleaseCurrentSubTransaction();
		MemoryContextSwitchTo(oldcxt);
		CurrentResourceOwner = oldowner;
	}
	PG_CATCH();
	{
		ErrorData  *edata;

		MemoryContextSwitchTo(oldcxt);
		edata = CopyErrorData();
		FlushErrorState();
		RollbackAndReleaseCurrentSubTransaction();
		LockReleaseSession(USER_LOCKMETHOD);
		MemoryContextSwitchTo(oldcxt);
		CurrentResourceOwner = oldowner;
		moved = -1;
		if (!passing_error(edata->sqlerrcode))
			*reason = pstrdup(edata->message);
		else
			ereport(edata->sqlerrcode == ERRCODE_LOCK_NOT_AVAILABLE ? DEBUG1 : LOG,
					(errmsg("queue worker: a slice of a message move task is retried: %s",
							edata->message)));
		FreeErrorData(edata);
	}
	PG_END_TRY();
	return moved;
}

/*
 * One slice of t, in a transaction of its own.  Sets t->over when the
 * task is no longer running (or not any more after this slice).
 */
static void
slice(MoveTaskState *t, MemoryContext cxt)
{
	TimestampTz now = GetCurrentTimestamp();
	double		tokens = 0;
	int64		n = slice_size(t, now, &tokens);
	Datum		v[5];
	char		nulls[5] = {' ', ' ', ' ', ' ', ' '};
	const char *status = "RUNNING";
	char	   *reason = NULL;
	int64		moved = 0;

	if (n == 0)
		return;
	slice_taken(t, now, tokens, n);

	StartTransactionCommand();
	SPI_connect();
	PushActiveSnapshot(GetTransactionSnapshot());
	if (plan_read == NULL)
	{
		Oid			types[1] = {TEXTOID};

		plan_read = keep("SELECT t.status, t.role, t.upto_id, t.started_at, t.destination_queue_id,"
						 " s.queue_name, d.queue_name"
						 " FROM queue._move_tasks t"
						 " JOIN queue._queues s ON s.queue_id OPERATOR(pg_catalog.=) t.source_queue_id"
						 " LEFT JOIN queue._queues d"
						 "  ON d.queue_id OPERATOR(pg_catalog.=) t.destination_queue_id"
						 " WHERE t.task_handle OPERATOR(pg_catalog.=) $1 FOR UPDATE OF t",
						 1, types);
	}
	v[0] = CStringGetTextDatum(t->handle);
	if (SPI_execute_plan(plan_read, v, NULL, false, 0) != SPI_OK_SELECT)
		elog(ERROR, "move task: could not read task %s", t->handle);
	if (SPI_processed == 0)
		t->over = true;			/* its source was dropped, and it with it */
	else
	{
		HeapTuple	tup = SPI_tuptable->vals[0];
		TupleDesc	desc = SPI_tuptable->tupdesc;
		bool		isnull;
		char	   *cur = SPI_getvalue(tup, desc, 1);
		Oid			role = DatumGetObjectId(SPI_getbinval(tup, desc, 2, &isnull));
		Datum		upto_d = SPI_getbinval(tup, desc, 3, &isnull);
		int64		upto = isnull ? 0 : DatumGetInt64(upto_d);
		TimestampTz started = DatumGetTimestampTz(SPI_getbinval(tup, desc, 4, &isnull));
		bool		has_dest;
		char	   *source = SPI_getvalue(tup, desc, 6);
		char	   *dest = SPI_getvalue(tup, desc, 7);
		int64		selected = 0;

		(void) SPI_getbinval(tup, desc, 5, &has_dest);
		has_dest = !has_dest;
		if (cur == NULL || strcmp(cur, "RUNNING") != 0)
			t->over = true;		/* cancelled, or ended by another worker */
		else if (now - started > MOVE_TASK_MAX_AGE)
			reason = "The task ran past 36 hours.";
		else if (has_dest && dest == NULL)
			reason = "AWS.SimpleQueueService.NonExistentQueue";	/* SQS's FailureReason */
		else if (!OidIsValid(role) || !SearchSysCacheExists1(AUTHOID, ObjectIdGetDatum(role)))
			reason = "The role that started the task no longer exists.";
		else if (!queue_role_may_log_in(role, now))
			reason = "The role that started the task may no longer log in.";
		else
		{
			moved = redrive_as(role, cstring_to_text(source),
							   has_dest ? cstring_to_text(dest) : NULL,
							   n, upto, &selected, &reason);
			if (moved < 0)
				moved = 0;
			else if (selected < n)
				status = "COMPLETED";	/* (what it left has nowhere to go) */
			else if (moved == 0)
				reason = "The oldest messages of the dead-letter queue have no source queue to go back to; give a DestinationArn.";
		}
		if (!t->over)
		{
			if (reason != NULL)
				status = "FAILED";
			if (plan_update == NULL)
			{
				Oid			types[5] = {TEXTOID, INT8OID, TEXTOID, TEXTOID, TIMESTAMPTZOID};

				plan_update = keep("UPDATE queue._move_tasks SET"
								   " moved = moved OPERATOR(pg_catalog.+) $2, status = $3,"
								   " failure_reason = $4, ended_at = $5"
								   " WHERE task_handle OPERATOR(pg_catalog.=) $1",
								   5, types);
			}
			v[1] = Int64GetDatum(moved);
			v[2] = CStringGetTextDatum(status);
			if (reason != NULL)
				v[3] = CStringGetTextDatum(reason);
			else
				nulls[3] = 'n';
			if (strcmp(status, "RUNNING") != 0)
			{
				v[4] = TimestampTzGetDatum(GetCurrentTimestamp());
				t->over = true;
			}
			else
				nulls[4] = 'n';
			if (SPI_execute_plan(plan_update, v, nulls, false, 0) != SPI_OK_UPDATE)
				elog(ERROR, "move task: could not update task %s", t->handle);
		}
	}
	PopActiveSnapshot();
	SPI_finish();
	CommitTransactionCommand();
	MemoryContextSwitchTo(cxt);
}

/*
 * The worker's turn (worker.c, every loop): advance the move tasks whose
 * slice is due, within MOVE_TURN_BUDGET_MS; returns when the next slice is
 * due (0: no task runs).  Errors are logged and the task retried later.
 */
TimestampTz
queue_move_tasks_advance(MemoryContext cxt)
{
	TimestampTz start = GetCurrentTimestamp();
	TimestampTz next = 0;
	int			k;

	PG_TRY();
	{
		if (take_added() || refreshed_at == 0 ||
			TimestampDifferenceExceeds(refreshed_at, start, MOVE_REFRESH_MS))
			refresh(cxt);
	}
	PG_CATCH();
	{
		queue_recover(cxt);
		refreshed_at = start;
	}
	PG_END_TRY();
	MemoryContextReset(cxt);

	for (k = 0; k < ntasks; k++)
	{
		MoveTaskState *t = &tasks[(next_first + k) % ntasks];

		if (t->over || t->due > GetCurrentTimestamp())
			continue;
		if (TimestampDifferenceExceeds(start, GetCurrentTimestamp(), MOVE_TURN_BUDGET_MS))
			break;				/* the next turn goes on from here */
		PG_TRY();
		{
			slice(t, cxt);
		}
		PG_CATCH();
		{
			queue_recover(cxt);
			t->due = GetCurrentTimestamp() + MOVE_RETRY_MS * INT64CONST(1000);
		}
		PG_END_TRY();
		MemoryContextReset(cxt);
		CHECK_FOR_INTERRUPTS();
	}
	if (ntasks > 0)
		next_first = (next_first + k) % ntasks;

	/* forget the tasks that ended */
	k = 0;
	for (int i = 0; i < ntasks; i++)
		if (!tasks[i].over)
			tasks[k++] = tasks[i];
	if (k != ntasks)
		next_first = 0;
	ntasks = k;
	for (int i = 0; i < ntasks; i++)
		if (next == 0 || tasks[i].due < next)
			next = tasks[i].due;
	return next;
}

/* From _PG_init: queue.move_tasks_per_role. */
void
queue_move_task_init(void)
{
	DefineCustomIntVariable("queue.move_tasks_per_role",
							"Message move tasks of one role the queue worker advances at once.",
							"A role's RUNNING tasks beyond this many (the newest) wait until its older ones end.",
							&move_tasks_per_role,
							10, 1, MOVE_TASKS_RUNNING_MAX,
							PGC_SIGHUP, 0,
							NULL, NULL, NULL);
}
