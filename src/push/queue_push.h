/*-------------------------------------------------------------------------
 *
 * queue_push.h
 *	  Messages pushed rather than pulled: topics and their filters, and
 *	  consumers (a handler called by a process of the extension).
 *
 * Files of src/push/, top to bottom (a file calls only files below it):
 *	  topic.c     publish, publish_batch: delivery to the subscribed queues
 *	  topic_catalog.c topics and subscriptions known to a backend, topic ids' sweep
 *	  filter.c    subscription filters: tags, binding keys, SNS filter policies
 *	  consumer.c  queue.consumers' counters
 *	  consumer_tend.c the queue worker's tending of consumer processes: starts,
 *	              fair shares, stops and terminations
 *	  consumer_worker.c consumer processes: one batch, one transaction
 *
 * May call: api/, lease/, fifo/, state/, access/, storage/, common/.  Nothing here includes or calls a folder above
 * it (the layers, bottom to top: common, storage, access, state, fifo,
 * lease, api, push, worker; then queue.c).
 *
 * Invariants:
 *	  - A handler runs as its consumer's role in a security-restricted
 *	    operation at its own GUC nest level; a process that overstays is
 *	    terminated (a cancel can be caught, a termination cannot).
 *
 *-------------------------------------------------------------------------
 */
#ifndef QUEUE_PUSH_H
#define QUEUE_PUSH_H

#include "storage/queue_storage.h"

/* filter.c: which subscriptions take a published message */
extern int	queue_text_list(ArrayType *arr, const char *argname, int max, int len,
							Datum **vals);
extern int	queue_tag_list(ArrayType *arr, const char *argname, Datum **vals);
extern void queue_check_routing_key(text *key, const char *argname);
extern void queue_check_filter_policy(Jsonb *policy);
extern bool queue_tags_match(const Datum *filter, int nfilter, const Datum *tags,
							 int ntags);
extern bool queue_binding_match(const char *binding, const char *routing_key);
extern bool queue_policy_match(Jsonb *policy, Jsonb *attributes);

/* topic_catalog.c: what a backend knows of topics (topic.c publishes) */
#define QUEUE_TOPIC_DEDUP_WINDOW	(INT64CONST(5) * USECS_PER_MINUTE)	/* SNS FIFO's */

/*
 * Topic counters live with the queues' (counts.c) under keys no queue has:
 * queue ids are positive.  QC_SENT counts publishes of a topic and
 * deliveries of a subscription.
 */
#define QUEUE_TOPIC_COUNTER_KEY(topic_id)	(-(topic_id))
#define QUEUE_DELIVERY_COUNTER_KEY(sub_id)	(-(INT64CONST(1) << 40) - (sub_id))

typedef struct TopicSub
{
	int64		id;
	int64		queue_id;
	text	   *queue_name;
	Oid			owner;			/* who subscribed: needs send on the queue */
	int			ntags;			/* filter_tags, -1 when unset */
	Datum	   *tags;
	int			nkeys;			/* binding_keys, -1 when unset */
	char	  **keys;
	Jsonb	   *policy;			/* filter_policy or NULL */
} TopicSub;

typedef struct TopicMeta
{
	char		name[QUEUE_NAME_MAX + 1];	/* hash key */
	bool		valid;
	int64		id;
	Oid			relid;			/* queue_data.t<id> */
	bool		fifo;
	MemoryContext cxt;			/* subs and plans */
	int			nsubs;
	TopicSub   *subs;
	SPIPlanPtr	claim;
	SPIPlanPtr	original;
} TopicMeta;

extern TopicMeta *queue_topic_lookup(text *name);
extern bool queue_topic_role_holds(int64 topic_id, Oid role, AclMode mode);
extern void queue_topic_sweep(void);
extern void queue_topic_sweep_now(void);

/* consumer.c, consumer_worker.c: consumers (DESIGN.md "Consumers") */
#define QUEUE_CONSUMER_MAX_BATCH		1000
#define QUEUE_CONSUMER_MAX_CONCURRENCY	64
#define QUEUE_CONSUMER_ERROR_LEN		512
#define QUEUE_CONSUMER_WAIT_LEN			160
#define QUEUE_CONSUMER_HELD				16	/* databases stopped at once */

/*
 * One consumer process.  The database's queue worker claims a free slot,
 * then starts the process, which names its pid; the process frees the slot
 * when it leaves.  stop asks it to leave after its batch.
 */
typedef struct QueueConsumerSlot
{
	Oid			dbid;			/* InvalidOid: free */
	int64		consumer_id;
	uint64		generation;		/* tells a re-claimed slot from the old one */
	pid_t		pid;			/* 0 until the process runs */
	bool		stop;
	TimestampTz claimed_at;
	/* the process says what it does (consumer_worker.c) */
	TimestampTz handler_since;	/* its handler's call began; 0: no batch past its receive */
	int64		handler_ms;		/* that call's statement_timeout (0: none) */
	TimestampTz idle_since;		/* it started, or its last batch ended */
	/* the tender's stop (consumer_tend.c, end_overstayers) */
	TimestampTz stop_at;		/* told to stop (0: not) */
	TimestampTz cancel_at;		/* its batch was cancelled (0: not) */
	char		stop_why;		/* QUEUE_CONSUMER_STOP_* */
	bool		terminated;		/* SIGTERM sent */
} QueueConsumerSlot;

/* Why the tender told a consumer process to stop. */
#define QUEUE_CONSUMER_STOP_DROPPED	'd'		/* or the extension's catalog is gone */
#define QUEUE_CONSUMER_STOP_PAUSED	'p'
#define QUEUE_CONSUMER_STOP_SHARE	's'		/* over its fair share */

/* What queue.consumers shows of a consumer beyond its registry row. */
typedef struct QueueConsumerStat
{
	Oid			dbid;			/* InvalidOid: free */
	int64		consumer_id;
	int64		queue_id;		/* the view shows it to those who may see this */
	int64		processed;		/* messages of committed batches */
	int64		failed;			/* batches that failed */
	bool		failing;		/* the last batch with messages failed */
	TimestampTz last_error_at;
	TimestampTz last_success_at;
	char		last_error[QUEUE_CONSUMER_ERROR_LEN];
	/* fair shares (consumer_tend.c): what its database's worker wants for it */
	int32		wanted;			/* processes: its concurrency, 0 when paused */
	TimestampTz wanted_at;		/* when that worker last said so */
	bool		waiting_logged; /* the log has said why it waits */
	TimestampTz one_by_one_until;	/* its batches call the handler per message */
	char		waiting[QUEUE_CONSUMER_WAIT_LEN];	/* why it has no process, or "" */
} QueueConsumerStat;

typedef struct QueueConsumerShared
{
	LWLock	   *lock;			/* guards everything here */
	int			nslots;			/* queue.max_consumer_processes */
	int			nstats;
	uint64		generation;
	Oid			held_db[QUEUE_CONSUMER_HELD];	/* start no process in these */
	TimestampTz held_until[QUEUE_CONSUMER_HELD];
	QueueConsumerSlot *slots;
	QueueConsumerStat *stats;
} QueueConsumerShared;

extern QueueConsumerShared *queue_consumer_shared;

/* What a consumer process gets in bgw_extra (consumer_tend.c starts it). */
typedef struct ConsumerStart
{
	Oid			dbid;
	int64		consumer_id;
	uint64		generation;
} ConsumerStart;
extern int	queue_max_consumer_processes;
extern void queue_consumer_init(void);
extern QueueConsumerStat *queue_consumer_stat(Oid dbid, int64 consumer_id,
											  int64 queue_id);
extern TimestampTz queue_consumers_tend(void);
extern void queue_consumers_stop_db(Oid dbid);
extern void queue_consumers_drop_extension(List *names);

#endif							/* QUEUE_PUSH_H */
