/*-------------------------------------------------------------------------
 *
 * queue_state.h
 *	  What is known of a queue beyond its rows: its counters and depth
 *	  (queue.stats), the wake-up slots long polls sleep on, and the admin
 *	  views' visibility rules.
 *
 * Files of src/state/, top to bottom (a file calls only files below it):
 *	  stats.c     per-queue counters flushed to shared memory at commit, depth,
 *	              the changed queues named to the worker
 *	  views.c     which queues a role may see in the views; read locks of views
 *	  wait.c      long-poll sleeping and wake-ups (condition variables per slot)
 *
 * May call: access/, storage/, common/.  Nothing here includes or calls a folder above
 * it (the layers, bottom to top: common, storage, access, state, fifo,
 * lease, api, push, worker; then queue.c).
 *
 * Invariants:
 *	  - Counters move at commit (a rolled-back send counts nothing); a commit that
 *	    sent wakes its queue's waiters after it is visible.
 *
 *-------------------------------------------------------------------------
 */
#ifndef QUEUE_STATE_H
#define QUEUE_STATE_H

#include "storage/queue_storage.h"

/* views.c */
typedef struct QueueReadLocks	/* read locks a view takes on a dedicated queue */
{
	int			n;
	Oid		   *relids;
	bool	   *held_before;
} QueueReadLocks;
extern void queue_note_read_locks(QueueReadLocks *locks, Oid relid);
extern void queue_release_read_locks(QueueReadLocks *locks);
extern bool queue_may_see(int64 queue_id);
extern void queue_check_may_see(int64 queue_id);

/* stats.c: per-queue counters, flushed to shared memory at commit */
extern void queue_count(int64 queue_id, int counter, int64 n);
extern void queue_count_only(int64 key, int counter, int64 n);
extern void queue_note_wakeup(int64 queue_id);
extern void queue_reset_counters(int64 queue_id);
extern void queue_forget_counters(int64 queue_id);
extern void queue_forget_counters_at_commit(int64 queue_id);
extern int	queue_tenant_kinds(int64 queue_id);
extern uint32 queue_note_tenant_kinds(int64 queue_id, uint32 kinds);
extern bool queue_counters_read(int64 queue_id, int64 *counts);
extern void queue_note_arrival(int64 queue_id, int64 n);
extern int64 queue_arrival_count(int64 queue_id);
extern bool queue_take_active(bool all, int64 *ids, int *nids);
extern void queue_note_change(int64 queue_id);
extern void queue_prepare_gid(const char *gid);
extern void queue_finish_prepared(const char *gid, bool commit);

/* wait.c */
extern void queue_wake(int64 queue_id);
extern void queue_wake_all(void);
extern uint64 queue_wait_generation(QueueMeta *q);
extern bool queue_wait(QueueMeta *q, TimestampTz deadline, uint64 generation);
extern void queue_wait_end(void);

#endif							/* QUEUE_STATE_H */
