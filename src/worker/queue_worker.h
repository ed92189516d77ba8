/*-------------------------------------------------------------------------
 *
 * queue_worker.h
 *	  The background work of a database: the launcher and the queue worker's
 *	  loop, the sweeps of each queue, vacuums, and message move tasks.
 *
 * Files of src/worker/, top to bottom (a file calls only files below it):
 *	  worker.c    the launcher and the queue worker's loop
 *	  sweep.c     one queue's sweep: expiry, windows, dead letters, reclaim
 *	  move_task.c the SQS endpoint's message move tasks, in slices
 *	  vacuum.c    vacuums of queues' tables after churn, and their
 *	              recycling (truncation) while a transaction holds vacuum
 *	              back
 *	  compact.c   the rewrite of a queue table that does not empty while
 *	              a transaction holds vacuum back
 *	  horizon.c   who holds the horizon: whether any snapshot (here, on
 *	              a standby, exported) could see what recycling and
 *	              compaction remove (the rule both obey), and their budget
 *
 * May call: push/ (the consumers' tending), lease/, fifo/, state/, access/, storage/,
 *	  common/.  Nothing here includes or calls a folder above
 * it (the layers, bottom to top: common, storage, access, state, fifo,
 * lease, api, push, worker; then queue.c).
 *
 * Invariants:
 *	  - The worker runs as the bootstrap superuser with pinned settings; its
 *	    lock waits end after 100 ms and what waited is tried on a later pass.
 *	  - An idle queue costs one comparison per pass.
 *
 *-------------------------------------------------------------------------
 */
#ifndef QUEUE_WORKER_H
#define QUEUE_WORKER_H

#include "storage/queue_storage.h"
#include "utils/relcache.h"

/* move_task.c */
extern TimestampTz queue_move_tasks_advance(MemoryContext cxt);
extern void queue_move_task_init(void);

/* horizon.c: queue.storage_maintenance's values */
#define QUEUE_MAINTENANCE_AUTO				0
#define QUEUE_MAINTENANCE_IGNORE_STANDBYS	1
#define QUEUE_MAINTENANCE_OFF				2
extern int	queue_storage_maintenance;

#define QUEUE_RECYCLE_MIN_BLOCKS	8	/* 64 kB: below, left to vacuum */
#define QUEUE_RECYCLE_MAX_BLOCKS	16384	/* 128 MB: the most read under the lock */
#define QUEUE_RECYCLE_LAG_XIDS		1000	/* the horizon this far behind */
#define QUEUE_RECYCLE_NAP_US		2000	/* between two tries */
#define QUEUE_RECYCLE_BUDGET_US		100000	/* of the worker's every second */
#define QUEUE_COMPACT_LOCK_MS		250 /* a rewrite's exclusive lock, at most */

/* Time the worker has for recycling or compaction (one each). */
typedef struct QueueBudget
{
	TimestampTz since;
	int64		spent;
} QueueBudget;

extern bool queue_horizon_lags(Relation rel);
extern const char *queue_snapshots_unsafe(bool *transient);
extern bool queue_budget_left(QueueBudget *b, TimestampTz now);

/* compact.c */
extern void queue_compact_if_dead(int64 queue_id, bool fifo);
extern void queue_compact_shared_if_dead(void);

/* vacuum.c */
extern void queue_vacuum_shared_if_churned(void);
extern void queue_vacuum_if_churned(int64 queue_id, bool fifo, bool shared, int64 g_blocks,
									int64 *last, int64 *last_g);
extern void queue_recycle_if_empty(int64 queue_id, bool fifo, TimestampTz *due);
extern void queue_recycle_shared_if_empty(const int64 *ids, int n, bool fifo);
extern void queue_recycle_pending_pass(void);
extern void queue_recycle_forget(int64 queue_id);
/* sweep.c: the worker's work on each queue, pass after pass */
typedef struct SweptQueue
{
	int64		queue_id;		/* hash key */
	TimestampTz lap_due;		/* no message can expire before this */
	TimestampTz windows_due;	/* nor a deduplication id or attempt */
	TimestampTz dlq_since;		/* leases ending after this not yet checked */
	TimestampTz dlq_due;		/* ... and none ends before this */
	bool		windows_empty;	/* no id nor attempt at its last look */
	int64		empty_arrivals; /* found empty after this many arrivals, or -1 */
	int64		vacuumed_churn; /* its churn at its last vacuum (vacuum.c) */
	int64		vacuumed_g_churn;	/* ... at its group table's last vacuum */
	TimestampTz recycle_due;	/* no recycling of its tables before (vacuum.c) */
	/* The expiry lap under way: every message, in id order (see below). */
	bool		lap_running;
	int64		lap_cursor;		/* ids up to this one are done */
	TimestampTz lap_start;
	TimestampTz lap_oldest;		/* least sent_at left behind, or DT_NOEND */
	int64		lap_arrivals;	/* arrivals read before the lap began */
	bool		seen;
	bool		active;			/* a commit changed it since the last pass */
	int			pos;			/* its place in the worker's schedule */
	/* its row as last listed: a change makes everything due */
	int64		listed_retention;
	int64		listed_dedup_window;
	int64		listed_store_id;
	bool		listed_has_dlq;
	bool		listed_shared;
} SweptQueue;

typedef struct QueueRow
{
	int64		id;
	bool		fifo;
	int64		retention;
	int64		dedup_window;
	bool		has_dlq;
	char	   *name;
	int64		g_blocks;		/* FIFO: its group table's size, as listed */
	bool		shared;			/* DESIGN.md "Storage" */
	int64		store_id;		/* shared: the key of its messages */
	SweptQueue *sq;				/* its sweep state (worker.c's hash) */
} QueueRow;

extern bool queue_list_stale;
extern void queue_list_inval(Datum arg, Oid relid);
extern void queue_list_check(void);
extern List *queue_sweep_list(bool *extension_exists, const int64 *ids, int nids);
extern TimestampTz queue_sweep_next_visit(QueueRow *q, SweptQueue *sq);
extern void queue_sweep_new(SweptQueue *sq);
extern void queue_sweep_due_now(SweptQueue *sq);
extern void queue_sweep_empty(SweptQueue *sq);
extern void queue_sweep_pass(QueueRow *q, SweptQueue *sq, MemoryContext cxt);
extern void queue_reclaim_pass(MemoryContext cxt);
extern void queue_vacuum_shared_pass(QueueRow **rows, int n, MemoryContext cxt);

/* worker.c */
extern bool queue_worker_enabled;
extern int	queue_sweep_interval;
extern void queue_worker_register_launcher(void);
extern void queue_utility_hook_init(void);

#endif							/* QUEUE_WORKER_H */
