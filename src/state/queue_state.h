/*-------------------------------------------------------------------------
 *
 * queue_state.h
 *	  What is known of a queue beyond its rows, as the views and long polls
 *	  read it: which queues a role may see (queue.stats, the admin views),
 *	  and the long polls' sleep.  The counters themselves, and the wake-ups
 *	  of commits, are kept below (common/counts.c), so every room counts
 *	  without climbing.
 *
 * Files of src/state/, top to bottom (a file calls only files below it):
 *	  views.c     which queues a role may see in the views (and queue.stats'
 *	              counters); read locks of views
 *	  wait.c      long-poll sleeping and wake-ups (condition variables per slot)
 *
 * May call: access/, storage/, common/.  Nothing here includes or calls a folder above
 * it (the layers, bottom to top: common, storage, access, state, fifo,
 * lease, api, push, worker; then queue.c).
 *
 * Invariants:
 *	  - A waiting receive re-checks before it sleeps: a commit between its
 *	    try and its sleep is never lost (the slot's generation).
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

/* wait.c */
extern uint64 queue_wait_generation(QueueMeta *q);
extern bool queue_wait(QueueMeta *q, TimestampTz deadline, uint64 generation);
extern void queue_wait_end(void);

#endif							/* QUEUE_STATE_H */
