/*-------------------------------------------------------------------------
 *
 * queue_common.h
 *	  What every room below the API and the background processes shares, and
 *	  nothing of queues: the limits, argument checks, receipts and their HMAC,
 *	  the shared memory (counter table, database slots, wait slots), relaxed
 *	  commits of receives, and the settings the background processes pin.
 *
 * Files of src/common/, top to bottom (a file calls only files below it):
 *	  args.c      argument checks (names among them), array helpers, kept SPI plans
 *	  receipt.c   receipts: encoding, signing, checking (uses hmac.c)
 *	  hmac.c      HMAC-SHA-256 under a kept key (OpenSSL)
 *	  counts.c    per-queue counters and wake-ups, handed to shared memory at commit
 *	  shmem.c     shared memory: counters, database slots, wait slots, prepared GIDs
 *	  durability.c which commits may skip the WAL flush (receives only)
 *	  elevated.c  pinned settings of the background processes, the handler sandbox,
 *	              bounded lock waits and error recovery of the queue worker
 *	  compat.h    differences between PostgreSQL versions
 *
 * May call: PostgreSQL only.  Nothing here includes or calls a folder above
 * it (the layers, bottom to top: common, storage, access, state, fifo,
 * lease, api, push, worker; then queue.c).
 *
 * Invariants:
 *	  - Nothing here knows a queue's rows or the registry (the one table read
 *	    here is queue._secret, the database's receipt key).
 *	  - Shared memory is read and written under queue_shared->lock or atomics; a
 *	    counter slot's queue id names it until the queue is dropped.
 *
 *-------------------------------------------------------------------------
 */
#ifndef QUEUE_COMMON_H
#define QUEUE_COMMON_H

#include "access/xact.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "nodes/parsenodes.h"
#include "nodes/pg_list.h"
#include "storage/lockdefs.h"
#include "utils/array.h"
#include "utils/jsonb.h"
#include "utils/timestamp.h"

#include "common/compat.h"

/* Limits of DESIGN.md ("Limits"). */
#define QUEUE_NAME_MAX			80
#define QUEUE_MAX_MESSAGES		1000	/* per receive */
#define QUEUE_MAX_BATCH			1000	/* entries per *_batch call */
#define QUEUE_MAX_VISIBILITY	(INT64CONST(12) * USECS_PER_HOUR)
#define QUEUE_MAX_WAIT			(INT64CONST(20) * USECS_PER_SEC)
#define QUEUE_TOKEN_MAX			128		/* group, dedup and attempt ids */

/* durability.c */
extern bool queue_durable_receives;
extern void queue_receive_begins(void);
extern void queue_receive_ends(void);

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

/* receipt.c */
#define QUEUE_SECRET_LEN	32	/* queue._secret's key */
extern const uint8 *queue_secret_key(uint64 *generation);
extern uint64 queue_receipt_nonce(void);
extern text *queue_receipt_make(int64 queue_id, int64 message_id, uint64 nonce);
extern void queue_receipt_parse(text *receipt, int64 queue_id,
								const char *argname, int ordinal,
								int64 *message_id, uint64 *nonce);

/* args.c */
extern SPIPlanPtr queue_keep_plan(const char *sql, int nargs, Oid *types);
extern void queue_check_name(text *name, const char *argname);
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
extern int	queue_text_cmp(const void *a, const void *b);
extern int	queue_sort_unique_texts(Datum *vals, int n);
extern int	queue_spi_groups(int col, Datum **groups);

/* queue.c */
extern int	queue_max_message_size_limit;
extern bool queue_preloaded;

/* counters of a queue (counts.c counts, shmem.c keeps the table) */
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
#include "storage/spin.h"

#define QUEUE_WAIT_SLOTS	1024	/* long-poll condition variables */
#define QUEUE_MAX_WATCHERS	64		/* SQS endpoint workers (core_api.h) */

#define QUEUE_PRIO_LEVELS	10		/* priorities 0 to 9 (fifo/priority.c) */

typedef struct QueueCounterEntry
{
	Oid			dbid;			/* InvalidOid: free */
	int64		queue_id;		/* 0: a dropped queue's slot, reusable */
	pg_atomic_uint64 c[QC_NUM];
	pg_atomic_uint64 arrived;	/* messages put in by moves, not sends */
	pg_atomic_uint32 active;	/* 1: named to its worker since it last looked */
	pg_atomic_uint32 tenants;	/* QUEUE_TENANTS_*: what its sends carried (fair.c) */
	/* the ready bound (counts.c), under ready_lock */
	slock_t		ready_lock;
	int64		ready_key;		/* the table or store it is of; 0: none yet */
	TimestampTz ready_from;		/* no message is ready below this */
	uint64		ready_gen;		/* bumped by every lowering */
	TimestampTz ready_checked;	/* when a receive last scanned from the start */
	TimestampTz ready_probed;	/* FIFO: when a receive last looked for the first head */
	TimestampTz level_from[QUEUE_PRIO_LEVELS];	/* each priority's own bound */
} QueueCounterEntry;

/* What messages a standard queue's sends carried (fair.c), kept per queue. */
#define QUEUE_TENANTS_GROUPED	0x1 /* a message_group_id */
#define QUEUE_TENANTS_UNGROUPED 0x2 /* none */
/* ... and whether a message of a priority but 4 was in it (fifo/priority.c) */
#define QUEUE_PRIORITIES		0x4
#define QUEUE_PRIORITIES_CHECKED 0x8	/* the slot knows all (made with the
										 * queue, or the table was read) */
#define QUEUE_PRIORITY_NULLS	0x10	/* a send stored a null priority (4) */
#define QUEUE_PRIORITY_LEVEL(l)	(1u << (16 + (l)))	/* one stored l (0-9) */
#define QUEUE_PRIORITY_LEVELS	(0x3FFu << 16)

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
	 * The queues a commit changed since the worker last looked (counts.c):
	 * the worker visits those and the ones whose time came, not every
	 * queue.  Overflow (or a change to a queue without a counter slot):
	 * the worker visits them all.
	 */
	int			nactive;
	bool		active_overflow;
	int64		active[QUEUE_ACTIVE_IDS];
} QueueDbSlot;

/*
 * What a prepared transaction did to queues (counts.c), kept under its GID
 * until COMMIT PREPARED or ROLLBACK PREPARED; max_prepared_transactions
 * slots.  Guarded by lock.
 */
#define QUEUE_PREPARED_QUEUES	16	/* queues a slot keeps apart */

typedef struct QueuePreparedQueue
{
	int64		queue_id;
	int64		c[QC_NUM];
	int64		arrived;
	uint32		tenants;		/* QUEUE_TENANTS_* its sends carried */
	TimestampTz commit_floor;	/* the ready bound's lowering (counts.c) */
	TimestampTz abort_floor;
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

/* elevated.c: the background processes' pinned settings, the handler sandbox */
typedef struct QueueSandbox
{
	Oid			save_userid;
	int			save_sec;
	int			nestlevel;
} QueueSandbox;
extern PGDLLEXPORT void queue_pin_process_settings(void);
extern bool queue_sqs_wire;
extern PGDLLEXPORT void queue_sqs_wire_rules(bool on);
extern void queue_bound_lock_waits(void);
extern void queue_recover(MemoryContext cxt);
extern void queue_sandbox_enter(QueueSandbox *sb, Oid role, const char *search_path,
								const char *statement_timeout);
extern void queue_sandbox_leave(QueueSandbox *sb);

/* counts.c: per-queue counters, flushed to shared memory at commit, and wake-ups */
extern void queue_count(int64 queue_id, int counter, int64 n);
extern void queue_count_only(int64 key, int counter, int64 n);
extern void queue_note_wakeup(int64 queue_id);
extern void queue_reset_counters(int64 queue_id);
extern void queue_forget_counters(int64 queue_id);
extern void queue_forget_counters_at_commit(int64 queue_id);
extern void queue_note_tenants(int64 queue_id, int n, const bool *group_nulls);
extern int	queue_slot_kinds(int64 queue_id, void **cache);
extern uint32 queue_pending_kinds(int64 queue_id);
extern void queue_note_kinds(int64 queue_id, uint32 kinds);
extern void queue_set_kinds(int64 queue_id, uint32 kinds);
extern bool queue_counters_read(int64 queue_id, int64 *counts);
extern void queue_note_arrival(int64 queue_id, int64 n);
extern int64 queue_arrival_count(int64 queue_id);
extern bool queue_take_active(bool all, int64 *ids, int *nids);
extern void queue_note_change(int64 queue_id);
extern void queue_prepare_gid(const char *gid);
extern void queue_finish_prepared(const char *gid, bool commit);
typedef struct QueueReadyRead	/* a receive's read of the ready bound */
{
	void	   *slot;
	int64		queue_id;
	uint64		gen;
	TimestampTz from;
	TimestampTz level_from[QUEUE_PRIO_LEVELS];	/* the priorities' bounds */
	int			kinds;			/* the slot's kinds, read after gen; -1: none */
} QueueReadyRead;
#define QUEUE_READY_NONE	DT_NOEND
extern TimestampTz queue_ready_from(int64 queue_id, int64 key, TimestampTz now,
									void **cache, QueueReadyRead *r);
extern void queue_ready_raise(const QueueReadyRead *r, TimestampTz to);
extern void queue_ready_raise_levels(const QueueReadyRead *r, const TimestampTz *to);
extern TimestampTz queue_ready_floor(const QueueReadyRead *r, bool levels);
extern bool queue_ready_probe_due(const QueueReadyRead *r, TimestampTz now);
extern void queue_note_ready(int64 queue_id, TimestampTz at_commit,
							 TimestampTz at_abort);
extern void queue_wake(int64 queue_id);
extern void queue_wake_all(void);
extern PGDLLEXPORT int	queue_wait_slot_of(int64 queue_id);

#endif							/* QUEUE_COMMON_H */
