/*-------------------------------------------------------------------------
 *
 * internal.h
 *	  Shared declarations of the queue extension: the per-backend queue
 *	  metadata cache, prepared plans, receipts and argument checks.
 *
 * The declarations every file shares, and no file's own: it is not
 * queue.c's header (queue.c holds _PG_init and the settings only), so
 * including it makes no file depend on queue.c.
 *
 *-------------------------------------------------------------------------
 */
#ifndef QUEUE_INTERNAL_H
#define QUEUE_INTERNAL_H

#include "access/xact.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "nodes/parsenodes.h"
#include "nodes/pg_list.h"
#include "storage/lockdefs.h"
#include "utils/array.h"
#include "utils/jsonb.h"
#include "utils/timestamp.h"

#include "compat.h"

/* Limits of DESIGN.md ("Limits"). */
#define QUEUE_NAME_MAX			80
#define QUEUE_MAX_MESSAGES		1000	/* per receive */
#define QUEUE_MAX_BATCH			1000	/* entries per *_batch call */
#define QUEUE_MAX_VISIBILITY	(INT64CONST(12) * USECS_PER_HOUR)
#define QUEUE_MAX_WAIT			(INT64CONST(20) * USECS_PER_SEC)
#define QUEUE_TOKEN_MAX			128		/* group, dedup and attempt ids */

/*
 * The statements a queue needs on the hot path.  Each is prepared the first
 * time a backend uses it on a queue and kept until the queue is altered or
 * dropped.
 */
typedef enum QueuePlanKind
{
	QP_RECEIVE,
	QP_DELETE,
	QP_DELETE_BATCH,
	QP_CHANGE_VIS,
	QP_CHANGE_VIS_BATCH,
	QP_RECEIPTS_OF,				/* current receipts of some message ids */
	QP_PEEK,
	QP_PEEK_FIFO,
	QP_NEXT_VISIBLE,		/* long poll: when the next message turns visible */
	QP_NEXT_AVAILABLE_FIFO,
	QP_DEDUP_CLAIM,
	QP_DEDUP_CLAIM_ONE,
	QP_DEDUP_ORIGINALS,
	QP_GROUP_NEW,				/* rows of groups a send starts */
	QP_GROUP_NEW_ONE,
	QP_GROUP_ADD_MOVED,
	QP_GROUP_SET,				/* new heads of groups (group_rows.c) */
	QP_GROUP_SET_ONE,
	QP_GROUP_DROP,				/* rows of groups found empty */
	QP_FIFO_RECEIVE,
	QP_ATTEMPT_GET,
	QP_ATTEMPT_MSGS,
	QP_ATTEMPT_PUT,
	QP_RECEIVE_DLQ,				/* receive of a queue with max_receive_count */
	QP_FIFO_RECEIVE_DLQ,
	QP_FIFO_RECEIVE_DLQ_MORE,	/* ... the rest of groups whose head moved */
	QP_MOVE_TO_DLQ,				/* {L}: the dead-letter queue's table */
	QP_FAILED_APPLY,			/* rolled-back receives counted (failed.c) */
	QP_FAILED_LOCK,
	QP_FAILED_LOCK_FIFO,
	QP_RECEIVE_FIXUP,			/* a receive's leases that met rolled-back ones */
	QP_FAILED_EXISTING,
	QP_FAIR_WINDOW,				/* a fair receive's first look (fair.c) */
	QP_FAIR_TENANTS,			/* ... its candidate tenants, all of them */
	QP_FAIR_RECEIVE,			/* ... and its lease */
	QP_GROUP_STATS,				/* per tenant counts (fair.c) */
	QP_GROUP_STATS_FIFO,
	QP_NUM_PLANS
} QueuePlanKind;

/* The privileges of DESIGN.md "Access". */
typedef enum QueuePriv
{
	QPRIV_SEND,
	QPRIV_RECEIVE,
	QPRIV_MANAGE,
	QPRIV_NUM
} QueuePriv;

/*
 * What a backend remembers of one queue.  Keyed by name; valid until a
 * relcache invalidation of the queue's message table (sent by alter, drop,
 * or any DDL on the table) removes it.
 */
typedef struct QueueMeta
{
	char		name[QUEUE_NAME_MAX + 1];	/* hash key */
	int64		id;
	Oid			relid;			/* queue_data.q<id>, or the shared message table */
	bool		shared;			/* rows in the shared tables (DESIGN.md "Storage") */
	int64		store_id;		/* their key in the shared message and group tables */
	bool		fifo;
	int64		visibility_timeout; /* all times in microseconds */
	int64		delay;
	int64		retention;
	int32		max_message_size;
	int64		receive_wait;
	bool		content_based_dedup;
	int64		dedup_window;
	bool		dedup_by_group;
	int32		max_receive_count;	/* 0: no dead-letter queue */
	int64		dlq_id;
	char		dlq_name[QUEUE_NAME_MAX + 1];
	bool		dlq_shared;		/* the dead-letter queue's layout ... */
	bool		dlq_fifo;		/* ... and kind, for its table */
	int64		retry_delay;	/* after a rolled-back receive (failed.c) */
	int32		max_in_flight;	/* max_in_flight_per_group, 0: none (fair.c) */
	uint32		tenant_kinds;	/* QUEUE_TENANTS_* this backend saw noted */
	/* a shared queue's owner and grantees (a dedicated one's are its table's) */
	Oid			owner;
	int			ngrantees[3];	/* per QueuePriv */
	Oid		   *grantees[3];	/* InvalidOid: PUBLIC; in CacheMemoryContext */
	SPIPlanPtr *plans;			/* QP_NUM_PLANS, made at the first plan kept
								 * here (a shared queue keeps only its
								 * dead-letter move's: plans.c) */
	/* FIFO queues, looked up when first needed (group_rows.c) */
	Oid			group_relid;	/* queue_data.g<id> */
	Oid			group_pkey;		/* its primary key */
	Oid			msg_group_idx;	/* q<id>_group: (message_group_id, message_id) */
	Oid			msg_pkey;		/* q<id>_pkey */
} QueueMeta;

/* acl.c */
typedef struct QueueCall
{
	Oid			caller;			/* who called: checked against the queue */
	Oid			save_userid;
	int			save_sec;
	int			search_path_pin;	/* queue_pin_search_path's (compat.h) */
} QueueCall;

extern void queue_enter(QueueCall *call);
extern void queue_leave(QueueCall *call);
extern bool queue_role_holds(Oid relid, Oid role, AclMode mode);
extern bool queue_role_holds_shared(Oid role, Oid owner, const Oid *grantees, int n);
extern AclMode queue_priv_mode(QueuePriv priv);
extern void queue_check_privilege(QueueMeta *q, Oid caller, QueuePriv priv);
extern bool queue_meta_role_holds(QueueMeta *q, Oid role, QueuePriv priv);
extern QueueMeta *queue_open(QueueCall *call, text *name, QueuePriv priv);
extern void queue_close(QueueCall *call);

extern bool queue_holds_by_id(int64 queue_id, Oid role, QueuePriv priv, bool any);

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

/* catalog.c */
extern void queue_check_name(text *name, const char *argname);
extern QueueMeta *queue_lookup(text *name);
extern QueueMeta *queue_lookup_extended(text *name, bool missing_ok);
extern int	queue_plan_cache_queues;
extern Oid	queue_data_relid(const char *name);
extern Oid	queue_table_relid(int64 queue_id, char kind);
extern Oid	queue_shared_relid(char kind, bool fifo);
extern void queue_lock_queue(int64 queue_id, LOCKMODE mode);
extern void queue_catalog_init(void);

/* plans.c */
extern SPIPlanPtr queue_plan(QueueMeta *q, QueuePlanKind kind);
extern int	queue_exec(QueueMeta *q, QueuePlanKind kind, const Datum *args,
					   const char *nulls, bool read_only, long count);
extern int	queue_exec_snapshot(QueueMeta *q, QueuePlanKind kind, const Datum *args,
								const char *nulls, Snapshot snapshot, bool read_only,
								long count);
extern const char *queue_shared_table(char kind, bool fifo);
extern char *queue_table_name(const QueueMeta *q, char kind);
extern char *queue_key_cond(const QueueMeta *q, char kind, const char *alias);
extern void queue_release_plans(QueueMeta *q);
extern SPIPlanPtr queue_keep_plan(const char *sql, int nargs, Oid *types);
extern void queue_planner_hook_init(void);

/* dedup.c */
extern text *queue_content_dedup_id(text *body);
extern void queue_dedup_claim(QueueMeta *q, int n, Datum *scope_keys,
							  Datum *dedup_ids, TimestampTz now,
							  int64 *message_ids, bool *duplicate);

/* deadletter.c */
extern uint64 queue_dead_letter(QueueMeta *q, int n, const int64 *ids,
								Datum *groups);
extern uint64 queue_dead_letter_sweep(QueueMeta *q, TimestampTz since,
									  TimestampTz now);
extern char *queue_name_of(int64 id);
extern int64 queue_redrive_bounded(text *dlq_name, text *dest_name, int64 limit,
								   int64 upto_id, int64 *selected);

/* move_task.c */
extern TimestampTz queue_move_tasks_advance(MemoryContext cxt);

/* vacuum.c */
extern void queue_vacuum_shared_if_churned(void);
extern void queue_vacuum_if_churned(int64 queue_id, bool fifo, bool shared, int64 g_blocks,
									int64 *last, int64 *last_g);

/* durability.c */
extern bool queue_durable_receives;
extern void queue_receive_begins(void);
extern void queue_receive_ends(void);

/* fifo.c */
extern void queue_fifo_lock_senders(QueueMeta *q, int ngroups, Datum *groups);
extern void queue_fifo_lock_publishers(int64 topic_id, int ngroups, Datum *groups);
extern void queue_fifo_unlock_senders(int64 queue_id, int ngroups, Datum *groups,
									  const bool *keep);
extern int	queue_fifo_try_lock_senders(int64 queue_id, int ngroups, Datum *groups);
extern void queue_fifo_add_moved_groups(QueueMeta *q, int ngroups, Datum *groups);
extern int	queue_text_cmp(const void *a, const void *b);
extern uint32 queue_group_hash(Datum group);
extern int	queue_sort_unique_texts(Datum *vals, int n);
extern int	queue_spi_groups(int col, Datum **groups);

/* group_rows.c */
extern void queue_fifo_lock_groups_of(QueueMeta *q, int n, const int64 *ids);
extern int	queue_fifo_missing_groups(QueueMeta *q, int ngroups, Datum *groups,
									  bool *missing);
extern void queue_fifo_new_groups(QueueMeta *q, int ngroups, Datum *groups,
								  int64 *heads, TimestampTz available_at);
extern void queue_fifo_refresh_groups(QueueMeta *q, int ngroups, Datum *groups);

/* send.c */
typedef struct SendBatch		/* the entries of a send, as parallel arrays */
{
	int			n;
	Datum	   *bodies;			/* text, checked */
	Datum	   *groups;
	bool	   *group_nulls;
	Datum	   *dedups;
	bool	   *dedup_nulls;
	Datum	   *attrs;
	bool	   *attr_nulls;
	bool		topic_copy;		/* deduplicated at a topic: claim no id */
} SendBatch;

extern text *queue_body_text(Datum d, bool is_jsonb, QueueMeta *q,
							 const char *argname);
extern void queue_check_message_size(QueueMeta *q, Datum body, Datum attrs,
									 bool attrs_null, const char *argname);
extern void queue_check_attributes(Jsonb *attrs, const char *argname);
extern void queue_send_entries(QueueMeta *q, SendBatch *b, int64 delay,
							   bool batch, int64 *ids, bool *dup);
extern void queue_batch_array(FunctionCallInfo fcinfo, int argno,
							  const char *argname, int n, Oid elemtype,
							  Datum **vals, bool **nulls);

/* hmac.c: HMAC-SHA-256 under a kept key (receipts), by OpenSSL */
typedef struct QueueHmacKey
{
	void	   *inner;			/* EVP_MD_CTX after the key's ipad block */
	void	   *outer;			/* ... and after its opad block */
	void	   *work;			/* a copy of either, per message */
} QueueHmacKey;

extern bool queue_hmac_set_key(QueueHmacKey *k, const uint8 *key, int keylen);
extern void queue_hmac_reference(const uint8 *key, int keylen, const uint8 *msg,
								 int len, uint8 *out, const char *what);
extern void queue_hmac(const QueueHmacKey *k, const uint8 *msg, int len,
					   uint8 *out);

/* insert.c */
extern Oid	queue_message_id_seq(void);
extern void queue_insert_messages(QueueMeta *q, const SendBatch *b,
								  const bool *skip, int64 *ids,
								  TimestampTz visible_at, TimestampTz sent_at);
extern void queue_insert_new_dedup_ids(QueueMeta *q, int n,
									   const Datum *scope_keys,
									   const Datum *dedup_ids, const int64 *ids,
									   TimestampTz now, bool *claimed);

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
 * Topic counters live with the queues' (stats.c) under keys no queue has:
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

/* failed.c: receives whose transaction rolls back still count */
typedef enum QueueRetry
{
	QUEUE_RETRY_QUEUE,			/* back after the queue's retry_delay */
	QUEUE_RETRY_FIXED,			/* ... after the receive's visibility timeout */
	QUEUE_RETRY_EXPONENTIAL		/* ... after 1, 2, 4 ... s, capped at that */
} QueueRetry;

extern int	queue_failed_leased(QueueMeta *q, int n, const int64 *ids,
								const int32 *receive_counts, int64 vt, TimestampTz now,
								int32 *pending, TimestampTz *not_before);
extern void queue_failed_withdrawn(QueueMeta *q, int n, const int64 *ids);
extern void queue_set_retry(QueueRetry how);
extern void queue_failed_uncount(void);
extern int64 queue_retry_delay(QueueRetry how, int32 rc, int64 vt, int64 queue_retry_delay);
extern int	queue_max_failed_receives;
extern TimestampTz queue_failed_apply_all(MemoryContext cxt);
extern void queue_failed_forget_queue(int64 queue_id);
extern void queue_failed_finish_prepared(const char *gid, bool commit);
extern void queue_failed_init(void);

/* fair.c */
#define QUEUE_FAIR_ARGS		15	/* QP_FAIR_RECEIVE's parameters */
extern void queue_note_tenants(QueueMeta *q, int n, const bool *group_nulls);
extern bool queue_receive_is_fair(QueueMeta *q);
extern bool queue_fair_args(QueueMeta *q, TimestampTz now, int want, int ndelivered,
							const int64 *delivered, Datum *args, char *nulls);

/* receive.c: a consumer's FIFO receive takes one group (consumer.c) */
extern bool queue_receive_one_group;

/* receipt.c */
#define QUEUE_SECRET_LEN	32	/* queue._secret's key */
extern const uint8 *queue_secret_key(uint64 *generation);
extern uint64 queue_receipt_nonce(void);
extern text *queue_receipt_make(int64 queue_id, int64 message_id, uint64 nonce);
extern void queue_receipt_parse(text *receipt, int64 queue_id,
								const char *argname, int ordinal,
								int64 *message_id, uint64 *nonce);

/* args.c */
extern void queue_arg_notnull(FunctionCallInfo fcinfo, int argno,
							  const char *argname);
extern int64 queue_arg_interval(FunctionCallInfo fcinfo, int argno,
								const char *argname, int64 lo, int64 hi,
								int64 dflt);
extern int32 queue_arg_int(FunctionCallInfo fcinfo, int argno,
						   const char *argname, int32 lo, int32 hi,
						   int32 dflt);
extern text *queue_arg_token(FunctionCallInfo fcinfo, int argno,
							 const char *argname);
extern void queue_check_token_datum(Datum d, const char *argname);
extern int	queue_array_len(ArrayType *arr, const char *argname, bool allow_nulls);
extern Datum queue_int8_array(int n, const int64 *vals);
extern Datum queue_text_array(int n, const Datum *vals, const bool *nulls);
extern void queue_check_read_write(void);

/* queue.c */
extern int	queue_max_message_size_limit;
extern bool queue_preloaded;

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

#define QC_SENT			0
#define QC_RECEIVED		1
#define QC_DELETED		2
#define QC_DEDUPLICATED 3
#define QC_DEAD_LETTERED 4
#define QC_EXPIRED		5
#define QC_WAITS		6		/* receives that slept for messages */
#define QC_WAKEUPS		7		/* ... and were woken with messages */
#define QC_NUM			8

/* shmem.c */
#include "storage/condition_variable.h"
#include "storage/latch.h"
#include "storage/lwlock.h"
#include "port/atomics.h"

#define QUEUE_WAIT_SLOTS	1024	/* long-poll condition variables */
#define QUEUE_MAX_WATCHERS	64		/* SQS endpoint workers (core_api.h) */

typedef struct QueueCounterEntry
{
	Oid			dbid;			/* InvalidOid: free */
	int64		queue_id;		/* 0: a dropped queue's slot, reusable */
	pg_atomic_uint64 c[QC_NUM];
	pg_atomic_uint64 arrived;	/* messages put in by moves, not sends */
	pg_atomic_uint32 active;	/* 1: named to its worker since it last looked */
	pg_atomic_uint32 tenants;	/* QUEUE_TENANTS_*: what its sends carried (fair.c) */
} QueueCounterEntry;

/* What messages a standard queue's sends carried (fair.c), kept per queue. */
#define QUEUE_TENANTS_GROUPED	0x1 /* a message_group_id */
#define QUEUE_TENANTS_UNGROUPED 0x2 /* none */

/*
 * One slot per database that has (or had) a queue worker: what the worker
 * reports to the launcher, and what others ask of it.  Guarded by lock.
 */
#define QUEUE_MAX_DBS		1024
#define QUEUE_ACTIVE_IDS	128

typedef struct QueueDbSlot
{
	Oid			dbid;			/* InvalidOid: free */
	pid_t		pid;			/* its worker, 0 when none runs */
	bool		no_extension;	/* the worker found no extension and left */
	bool		wanted;			/* CREATE EXTENSION asked for a worker */
	TimestampTz stop_requested; /* DROP DATABASE asked it to leave, or 0 */
	char		prepared_gid[GIDSIZE];	/* wanted once this GID commits */
	Latch	   *latch;			/* its worker's, to wake it (failed.c) */
	bool		move_tasks_added;	/* a move task was started (move_task.c) */
	/*
	 * The queues a commit changed since the worker last looked (stats.c):
	 * the worker visits those and the ones whose time came, not every
	 * queue.  Overflow (or a change to a queue without a counter slot):
	 * the worker visits them all.
	 */
	int			nactive;
	bool		active_overflow;
	int64		active[QUEUE_ACTIVE_IDS];
} QueueDbSlot;

/*
 * What a prepared transaction did to queues (stats.c), kept under its GID
 * until COMMIT PREPARED or ROLLBACK PREPARED; max_prepared_transactions
 * slots.  Guarded by lock.
 */
#define QUEUE_PREPARED_QUEUES	16	/* queues a slot keeps apart */

typedef struct QueuePreparedQueue
{
	int64		queue_id;
	int64		c[QC_NUM];
	int64		arrived;
	bool		forget;
	bool		wake_on_commit;
	bool		wake_on_abort;
} QueuePreparedQueue;

typedef struct QueuePrepared
{
	Oid			dbid;			/* InvalidOid: free */
	uint64		seq;			/* the oldest slot is reused when none is free */
	char		gid[GIDSIZE];
	bool		overflow;		/* more queues than kept: wake everyone */
	int			nqueues;
	QueuePreparedQueue queues[QUEUE_PREPARED_QUEUES];
} QueuePrepared;

typedef struct QueueShared
{
	LWLock	   *lock;			/* guards counter inserts and db slots */
	int			ncounters;		/* size of counters[]: 2 x queue.max_queues */
	int			nused;			/* slots taken, live or reusable: at most
								 * queue.max_queues, so the table stays half
								 * empty and a probe for a queue without a
								 * slot ends at a free slot soon */
	Latch	   *launcher_latch; /* set to make the launcher look now */
	QueueDbSlot dbs[QUEUE_MAX_DBS];
	ConditionVariable wait_cv[QUEUE_WAIT_SLOTS];
	pg_atomic_uint64 wait_gen[QUEUE_WAIT_SLOTS];	/* bumped before each wake */
	/* the SQS endpoint's workers (core_api.h): who waits on which slot */
	pg_atomic_uint64 watch_mask[QUEUE_WAIT_SLOTS];	/* bit i: watcher i */
	Latch	   *watcher_latch[QUEUE_MAX_WATCHERS];
	int			nprepared;		/* size of prepared[] */
	uint64		prepared_seq;
	QueuePrepared *prepared;	/* max_prepared_transactions slots */
	QueueCounterEntry counters[FLEXIBLE_ARRAY_MEMBER];
} QueueShared;

extern QueueShared *queue_shared;
extern QueueCounterEntry *queue_counter_probe(Oid dbid, int64 queue_id, bool create);
extern int	queue_max_queues;
extern void queue_shmem_init(void);
extern QueueDbSlot *queue_db_slot(Oid dbid, bool create);
extern void queue_register_at_commit(void);
extern void queue_register_database(void);
extern void queue_register_prepare_gid(const char *gid);
extern void queue_register_finish_prepared(const char *gid, bool commit);

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
extern void queue_vacuum_shared_pass(MemoryContext cxt);

/* role_refs.c */
extern void queue_role_refs_utility(Node *stmt, bool done);

/* worker.c */
extern bool queue_worker_enabled;
extern int	queue_sweep_interval;
extern void queue_worker_register_launcher(void);
extern void queue_utility_hook_init(void);

/* elevated.c: the background processes' pinned settings, the handler sandbox */
typedef struct QueueSandbox
{
	Oid			save_userid;
	int			save_sec;
	int			nestlevel;
} QueueSandbox;
extern void queue_pin_process_settings(void);
extern void queue_bound_lock_waits(void);
extern void queue_recover(MemoryContext cxt);
extern void queue_sandbox_enter(QueueSandbox *sb, Oid role, const char *search_path,
								const char *statement_timeout);
extern void queue_sandbox_leave(QueueSandbox *sb);

/* wait.c */
extern void queue_wake(int64 queue_id);
extern void queue_wake_all(void);
extern uint64 queue_wait_generation(QueueMeta *q);
extern bool queue_wait(QueueMeta *q, TimestampTz deadline, uint64 generation);
extern void queue_wait_end(void);

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

#endif							/* QUEUE_INTERNAL_H */
