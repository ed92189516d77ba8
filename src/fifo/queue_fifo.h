/*-------------------------------------------------------------------------
 *
 * queue_fifo.h
 *	  The order and sharing rules of messages: FIFO groups (one in flight at
 *	  a time, in order), deduplication ids, fair queues' tenant choice,
 *	  rate limits and priorities.
 *	  Every FIFO and fairness rule lives in this folder.
 *
 * Files of src/fifo/, top to bottom (a file calls only files below it):
 *	  fair.c      fair queues: which tenants a receive takes, caps per tenant
 *	  priority.c  priorities of a standard queue's messages: what a send
 *	              stores, whether receives read level by level, their order
 *	  rate.c      rate limits per queue and per tenant: the sliding windows
 *	              in shared memory, reserved before a lease, settled after
 *	  groups.c    FIFO message groups: sender locks, group hashing, the
 *	              group scheduling rows that sends, deletes and receives keep,
 *	              and the heads bound a receive's walk of them starts at
 *	  dedup.c     content-based deduplication ids (the claims: storage/insert.c)
 *
 * May call: state/, access/, storage/, common/.  Nothing here includes or calls a folder above
 * it (the layers, bottom to top: common, storage, access, state, fifo,
 * lease, api, push, worker; then queue.c).
 *
 * Invariants:
 *	  - A group's messages are received in send order, one batch in flight.
 *	  - A deduplication id is claimed at most once per window and scope.
 *	  - No span of receive_rate_interval hands out more than a rate limit.
 *	  - A standard queue's receive hands out its highest visible priority
 *	    first (a fair queue's, within each tenant it chose).
 *
 *-------------------------------------------------------------------------
 */
#ifndef QUEUE_FIFO_H
#define QUEUE_FIFO_H

#include "storage/queue_storage.h"

/* dedup.c */
extern text *queue_content_dedup_id(text *body);

/* groups.c */
extern void queue_fifo_lock_senders(QueueMeta *q, int ngroups, Datum *groups);
extern void queue_fifo_lock_publishers(int64 topic_id, int ngroups, Datum *groups);
extern void queue_fifo_unlock_senders(int64 queue_id, int ngroups, Datum *groups,
									  const bool *keep);
extern int	queue_fifo_try_lock_senders(int64 queue_id, int ngroups, Datum *groups);
extern void queue_fifo_add_moved_groups(QueueMeta *q, int ngroups, Datum *groups);
extern uint32 queue_group_hash(Datum group);

extern void queue_fifo_lock_groups_of(QueueMeta *q, int n, const int64 *ids);
extern int	queue_fifo_begin_send(QueueMeta *q, int ngroups, Datum *groups,
								  bool *missing);
extern int64 queue_fifo_heads_from(QueueMeta *q, TimestampTz now, QueueReadyRead *r);
extern void queue_fifo_heads_raise(QueueMeta *q, const QueueReadyRead *r, TimestampTz now,
								   SPITupleTable *tt);
extern void queue_fifo_new_groups(QueueMeta *q, int ngroups, Datum *groups,
								  int64 *heads, TimestampTz available_at);
extern void queue_fifo_refresh_groups(QueueMeta *q, int ngroups, Datum *groups);

/* rate.c */
extern int	queue_rate_limit_keys;
extern void queue_rate_init(void);
extern bool queue_rate_limited(const QueueMeta *q);
extern int	queue_rate_take_queue(QueueMeta *q, int want, TimestampTz *now);
extern void queue_rate_take_tenants(QueueMeta *q, int n, const Datum *groups, const int *want,
									int *granted, TimestampTz *now);
extern void queue_rate_peek_tenants(QueueMeta *q, int n, const Datum *groups, int *allow,
									TimestampTz now);
extern void queue_rate_used_queue(int n);
extern void queue_rate_used_rows(SPITupleTable *tt, uint64 nrows);
extern void queue_rate_settle_tenants(void);
extern void queue_rate_settle_queue(void);
extern void queue_rate_abandon(void);
extern void queue_rate_held_back(QueueMeta *q, int64 n);

/* priority.c */
#define QUEUE_PRIORITY_NONE		PG_INT32_MIN	/* a send's entry without one */
extern bool queue_has_priorities(QueueMeta *q);
extern void queue_priority_of_send(QueueMeta *q, SendBatch *b, const int32 *given,
								   const char *argname);
extern int32 *queue_priority_all(int n, int32 p);
extern void queue_priority_moved(int64 dst_id, bool with_priority);
extern QueuePlanKind queue_priority_plan(QueueMeta *q, QueuePlanKind plain, int kinds);
extern void queue_priority_order_rows(SPITupleTable *tt, uint64 nrows);
extern Datum queue_priority_bounds(const QueueReadyRead *r);
extern void queue_priority_raise(const QueueReadyRead *r, QueuePlanKind run,
								 SPITupleTable *tt, uint64 nrows, int want, TimestampTz now);

/* fair.c */
extern bool queue_receive_is_fair(QueueMeta *q);
extern bool queue_fair_args(QueueMeta *q, TimestampTz *now, int want, int ndelivered,
							const int64 *delivered, bool by_priority, Datum *args, char *nulls);

#endif							/* QUEUE_FIFO_H */
