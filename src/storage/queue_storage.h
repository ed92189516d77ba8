/*-------------------------------------------------------------------------
 *
 * queue_storage.h
 *	  Where a queue's messages live and how they are reached: the registry
 *	  cache (QueueMeta), the prepared plans of the hot path, and direct inserts
 *	  into the shared or dedicated tables (DESIGN.md "Storage").
 *
 * Files of src/storage/, top to bottom (a file calls only files below it):
 *	  insert.c    what a send writes: its deduplication claims and messages,
 *	              by direct inserts
 *	  catalog.c   the per-backend cache of the registry, table lookups, queue locks
 *	  citus.c     a Citus cluster: placement keys, the wrong-node guard, tables Citus manages
 *	  plans.c     the statements of the hot path, prepared once per queue and kept
 *	  layout.c    a queue's tables in its layout, and its statements' text for it
 *	  planner.c   how those are planned: generic, index scans, no JIT
 *
 * May call: common/.  Nothing here includes or calls a folder above
 * it (the layers, bottom to top: common, storage, access, state, fifo,
 * lease, api, push, worker; then queue.c).
 *
 * Invariants:
 *	  - A QueueMeta is valid until a relcache invalidation of its queue's table;
 *	    plans are kept with it and freed with it.
 *	  - Every statement here is schema-qualified and takes its values as
 *	    parameters; table names are numeric (q<id>, g<id>, ...).
 *	  - Held snapshots (issue 38, docs/design.md): no receive walks from the
 *	    head of an index whose head gathers dead entries.  A standard
 *	    queue's receive scans visible_at from the queue's ready bound, a
 *	    FIFO receive the groups' heads from its heads bound, and a group's
 *	    messages from its head (common/counts.c keeps both bounds and their
 *	    invariants).  Plans stay narrow when made again after an ANALYZE
 *	    that saw mostly dead rows: every queue_data table is planned as a
 *	    large one, and the shared tables' key columns keep n_distinct = 1.
 *	    The rows themselves still take a version per lease and per
 *	    delete; while an open transaction id holds vacuum back and no
 *	    snapshot could see the versions (worker/horizon.c's rule: no
 *	    backend of the database holding a snapshot, no slot's data xmin,
 *	    no export, no standby), the worker truncates a table that holds
 *	    no live row (worker/vacuum.c, "recycling"), which bounds a queue
 *	    that keeps emptying, and rewrites one that does not (a backlog,
 *	    the deduplication ids of a window, the receive attempts) once its
 *	    dead rows reach half its live ones, under an exclusive lock taken
 *	    only when free (worker/compact.c, "compaction"): a table stays
 *	    within 1.5 times its live rows (and 10,000 dead), and its senders
 *	    and receivers wait for the rewrite, 250 ms at most.  Under a
 *	    holder with a snapshot (a REPEATABLE READ report, an exported
 *	    snapshot, a standby) neither runs: the tables grow as PostgreSQL's
 *	    own would, and the bounds above keep receives' cost flat.
 *	    Segments recycled one by one were weighed and not chosen (a
 *	    deduplication claim would have to serialise across two tables).
 *	    Left: lookups of one group row by key walk its versions between
 *	    a recycle or compaction and the next.
 *
 *-------------------------------------------------------------------------
 */
#ifndef QUEUE_STORAGE_H
#define QUEUE_STORAGE_H

#include "common/queue_common.h"

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
	QP_DELETE_LIVE_BATCH,		/* only leases running: the SQS endpoint's FIFO deletes */
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
	QP_GROUP_SET,				/* new heads of groups (groups.c) */
	QP_GROUP_SET_ONE,
	QP_GROUP_DROP,				/* rows of groups found empty */
	QP_GROUP_MIN_HEAD,			/* the first head from the heads' bound (counts.c) */
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
	QP_RECEIVE_PRIO,			/* QP_RECEIVE of a queue with priorities */
	QP_RECEIVE_PRIO_NULLS,		/* ... that may have null ones (fifo/priority.c) */
	QP_RECEIVE_DLQ_PRIO,		/* QP_RECEIVE_DLQ of one */
	QP_RECEIVE_DLQ_PRIO_NULLS,
	QP_FAIR_RECEIVE_PRIO,		/* QP_FAIR_RECEIVE of one */
	QP_PEEK_PRIO,
	QP_PRIO_EXISTS,				/* whether a queue has a message of a priority but 4 */
	QP_FAIR_WINDOW_PRIO,		/* QP_FAIR_WINDOW of a queue with priorities */
	QP_FAIR_TENANTS_PRIO,		/* ... QP_FAIR_TENANTS */
	QP_GROUP_STATS_PRIO,		/* ... QP_GROUP_STATS */
	QP_DLQ_SWEEP,				/* leases ended after max_receive_count receives (deadletter.c) */
	QP_NUM_PLANS
} QueuePlanKind;

#define QUEUE_FAIR_ARGS		15	/* QP_FAIR_RECEIVE's parameters */

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
	int32		rate_limit;		/* receive_rate_limit, 0: none (fifo/rate.c) */
	int32		rate_limit_per_group;	/* receive_rate_limit_per_group, 0: none */
	int64		rate_interval;	/* receive_rate_interval */
	TimestampTz created_at;		/* a window after a restart starts closed (rate.c) */
	TimestampTz rate_opens_at;	/* set by a limited receive: when its window opens; 0: none */
	uint32		tenant_kinds;	/* QUEUE_TENANTS_* this backend saw noted */
	int32		default_priority;	/* of a message sent without one */
	bool		prio_column;	/* its message table has priority (1.12 on) */
	/* a shared queue's owner and grantees (a dedicated one's are its table's) */
	Oid			owner;
	int			ngrantees[3];	/* per QueuePriv */
	Oid		   *grantees[3];	/* InvalidOid: PUBLIC; in CacheMemoryContext */
	SPIPlanPtr *plans;			/* QP_NUM_PLANS, made at the first plan kept
								 * here (a shared queue keeps only its
								 * dead-letter move's: plans.c) */
	/* FIFO queues, looked up when first needed (groups.c) */
	Oid			group_relid;	/* queue_data.g<id> */
	Oid			group_pkey;		/* its primary key */
	Oid			msg_group_idx;	/* q<id>_group: (message_group_id, message_id) */
	Oid			msg_pkey;		/* q<id>_pkey */
	Oid			dedup_relid;	/* d<id>, or the shared dedup table (insert.c) */
	void	   *counter_slot;	/* its counter slot, as common/counts.c last found it */
} QueueMeta;

/*
 * Columns of q<id> and g<id> (queue--1.0.sql; the shared tables put their
 * key column last, so the numbers hold for both), 1-based: fifo/groups.c
 * reads them directly, catalog.c checks them when it caches a FIFO queue.
 */
#define QCOL_MESSAGE_ID		1
#define QCOL_VISIBLE_AT		2
#define QCOL_RECEIVE_COUNT	7
#define QCOL_GROUP			8
#define GCOL_LEASED_UPTO	4

/*
 * Columns of the rows a receive statement returns (plans.c's MSG_COLUMNS;
 * on a queue with a dead-letter queue a last one says the row is to move
 * there), 1-based: api/receive.c emits them, lease/ settles them.
 */
#define RCOL_MESSAGE_ID		1
#define RCOL_BODY			2
#define RCOL_ATTRIBUTES		3
#define RCOL_GROUP			4
#define RCOL_DEDUP			5
#define RCOL_SEQUENCE		6
#define RCOL_RECEIVE_COUNT	7
#define RCOL_SENT_AT		8
#define RCOL_FIRST_RECEIVED	9
#define RCOL_VISIBLE_AT		10
#define RCOL_PRIORITY		11	/* null: 4 (the column's own null, or none) */
#define RCOL_DEAD_LETTER	12

/* Whether row r of a receive statement's result is to move to the dead-letter queue. */
static inline bool
queue_row_is_dead_letter(SPITupleTable *tt, uint64 r)
{
	bool		isnull;

	return tt->tupdesc->natts >= RCOL_DEAD_LETTER &&
		DatumGetBool(SPI_getbinval(tt->vals[r], tt->tupdesc, RCOL_DEAD_LETTER, &isnull));
}

/* catalog.c */
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
/* layout.c */
#define QUEUE_ALL_LEVELS "'{9,8,7,6,5,4,3,2,1,0}'::pg_catalog.int2[]"	/* the priorities */
extern char *queue_plan_text(const char *sql, int nargs, bool levels_form, bool fair_order,
							 const QueueMeta *q, bool dlq_shared, bool dlq_fifo);
extern const char *queue_shared_table(char kind, bool fifo);
extern char *queue_table_name(const QueueMeta *q, char kind);
extern char *queue_key_cond(const QueueMeta *q, char kind, const char *alias);
extern char *queue_next_visible_text(const char *tbl, const char *key, bool prio_column,
									 const char *after);
extern void queue_release_plans(QueueMeta *q);
extern void queue_planner_hook_init(void);

/* the entries of a send (send.c makes them, insert.c writes them) */
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
	int16	   *priorities;		/* as stored, -1: null; NULL: all null (fifo/priority.c) */
} SendBatch;

/* insert.c */
extern Oid	queue_message_id_seq(void);
extern void queue_insert_messages(QueueMeta *q, const SendBatch *b,
								  const bool *skip, int64 *ids,
								  TimestampTz visible_at, TimestampTz sent_at);
extern void queue_dedup_claim(QueueMeta *q, int n, Datum *scope_keys,
							  Datum *dedup_ids, TimestampTz now,
							  int64 *message_ids, bool *duplicate);

/* citus.c: a Citus cluster (docs/citus.md); nothing without Citus */
extern bool queue_citus_active(void);
extern void queue_citus_check_local(text *name, const char *argname);
extern bool queue_citus_manages(Relation rel);
extern void queue_citus_check_call(FunctionCallInfo fcinfo);
extern void queue_citus_utility(Node *stmt);

#endif							/* QUEUE_STORAGE_H */
