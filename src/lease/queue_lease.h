/*-------------------------------------------------------------------------
 *
 * queue_lease.h
 *	  What happens to a leased message that is not deleted: dead-letter moves
 *	  (by a receive and by the worker), redrive, and receives whose
 *	  transaction rolls back (still counted). Both the API and the worker
 *	  call this folder; it calls neither.
 *
 * Files of src/lease/, top to bottom (a file calls only files below it):
 *	  failed.c    rolled-back receives: counted, retried after retry_delay;
 *	              what a receive statement leased, settled (queue_lease_settle)
 *	  deadletter.c moves to the dead-letter queue, redrive (bounded: move tasks)
 *
 * May call: fifo/, state/, access/, storage/, common/.  Nothing here includes or calls a folder above
 * it (the layers, bottom to top: common, storage, access, state, fifo,
 * lease, api, push, worker; then queue.c).
 *
 * Invariants:
 *	  - A message is in exactly one queue: a move deletes and inserts in one
 *	    transaction.  A receive counts even when its transaction aborts
 *	    (a crash may lose the count, never the message).
 *
 *-------------------------------------------------------------------------
 */
#ifndef QUEUE_LEASE_H
#define QUEUE_LEASE_H

#include "storage/queue_storage.h"

/* deadletter.c */
extern uint64 queue_dead_letter(QueueMeta *q, int n, const int64 *ids,
								Datum *groups);
extern void queue_dead_letter_flagged(QueueMeta *q, SPITupleTable *tt, uint64 nrows);
extern uint64 queue_dead_letter_sweep(QueueMeta *q, TimestampTz since,
									  TimestampTz now);
extern char *queue_name_of(int64 id);
extern int64 queue_redrive_bounded(text *dlq_name, text *dest_name, int64 limit,
								   int64 upto_id, int64 *selected);

/* failed.c: receives whose transaction rolls back still count */
typedef enum QueueRetry
{
	QUEUE_RETRY_QUEUE,			/* back after the queue's retry_delay */
	QUEUE_RETRY_FIXED,			/* ... after the receive's visibility timeout */
	QUEUE_RETRY_EXPONENTIAL		/* ... after 1, 2, 4 ... s, capped at that */
} QueueRetry;

/* What a receive statement leased (api/receive.c), for queue_lease_settle. */
typedef struct QueueLeased
{
	SPITupleTable *tt;			/* the statement's rows (RCOL_*) */
	uint64		nrows;
	int			n;				/* deliveries among them (not flagged to move) */
	const uint64 *rows;			/* the row of each delivery */
	int64	   *ids;			/* each delivery's message id */
	Datum	   *visible_ats;	/* ... and the end of its lease */
	const int32 *counts;		/* ... and its receive_count, with this receive */
	bool	   *skip;			/* set: per row, given up (NULL: none) */
	int32	   *count_of;		/* set: per row, the count to show (NULL: as is) */
} QueueLeased;

extern int	queue_lease_settle(QueueMeta *q, QueueLeased *l, int64 vt, TimestampTz now);
extern void queue_set_retry(QueueRetry how);
extern void queue_failed_uncount(void);
extern int64 queue_retry_delay(QueueRetry how, int32 rc, int64 vt, int64 queue_retry_delay);
extern int	queue_max_failed_receives;
extern TimestampTz queue_failed_apply_all(MemoryContext cxt);
extern void queue_failed_forget_queue(int64 queue_id);
extern void queue_failed_finish_prepared(const char *gid, bool commit);
extern void queue_failed_init(void);

#endif							/* QUEUE_LEASE_H */
