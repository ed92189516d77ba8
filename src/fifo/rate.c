/*-------------------------------------------------------------------------
 *
 * rate.c
 *	  Rate limits: how many messages a queue, and each tenant of a standard
 *	  queue, may be handed out in any span of receive_rate_interval
 *	  (DESIGN.md "Rate limits and priorities").
 *
 * The promise is a sliding window, exact: in no span of the interval are
 * more than the limit handed out, counted across every backend, consumer
 * process and SQS endpoint worker.  So what was handed out is kept in
 * shared memory, not in a transaction's rows: a receive that rolls back
 * did hand its messages out, and they count.
 *
 * State.  One entry per key in a fixed shared hash table (the queue's
 * whole, or one tenant: the 64-bit hash of its group id; two tenants
 * whose hashes meet share a limit, which is only stricter).  An entry
 * holds up to RATE_SLOTS slots, each some messages handed out at one
 * time, so an entry is about 300 bytes whatever the limit.  A slot older
 * than the interval no longer counts and is dropped; an entry with no
 * slot left is removed.  When an entry needs a slot and has none free, its
 * two oldest slots become one at the later of their times: the messages
 * then count longer than they need to, never shorter, so the limit is
 * kept (a tenant's rate may come out a little under it, never over).  The
 * table has queue.rate_limit_keys entries (a postmaster setting, 10,000 by
 * default: about 3 MB): that many tenants (and limited queues) can have
 * messages in their windows at once.  The queues of one owner hold an
 * eighth of the table at most (owner_share: 1,250 by default), so one
 * role's tenants cannot take every other role's room.  When an owner's
 * share or the table is full, a tenant that has no entry is handed nothing
 * until some other window passes (counted as held back); the limit is
 * never given up.
 *
 * A slot counts for the interval and a fiftieth of it more (20 ms at
 * most: span_of), so that the times a client notes a moment after the
 * server's (its own clock, on its side of the wire) keep the limit too.
 *
 * Exactness.  A receive takes its share under the table's lock before its
 * lease: it reserves as many as the window allows (a slot marked with its
 * process and a token), leases at most that many, then settles the slot to
 * what it leased, stamped at the time it settles (after the lease, so no
 * message is handed out later than its slot says).  The time of a take is
 * read under the lock (locked_clock), and the lease that follows writes
 * that time as the messages' hand-out time (first_received_at): a receive
 * that stalls between its look and its take (another one may drop slots
 * meanwhile) counts the window at the time it hands out, never at an
 * earlier one whose slots are gone.  Meanwhile the
 * reservation counts in full for every other receive.  An error between
 * the two settles the reservation in full (queue_rate_abandon: the lease
 * may have happened), and so does a process that exits with one open
 * (before_shmem_exit).
 *
 * After a restart the windows start closed: a queue created before the
 * server (re)started hands out nothing in its first interval after the
 * start, because what it handed out just before is not known.  The same
 * holds after a crash, whose restart clears shared memory.
 *
 * Also here: the count of messages held back (queue.stats's rate_limited,
 * since the server started) and the time a limited receive's window
 * opens, which a waiting receive sleeps until (state/wait.c).
 *
 * Calls: common/ (shared memory, interrupts), state/views.c (who may see a
 * queue's count).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "common/hashfn.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "storage/ipc.h"
#include "storage/lwlock.h"
#include "storage/shmem.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/hsearch.h"
#include "utils/syscache.h"
#include "access/htup_details.h"
#include "catalog/pg_class.h"
#include "utils/timestamp.h"

#include "common/queue_common.h"
#include "storage/queue_storage.h"
#include "state/queue_state.h"
#include "fifo/queue_fifo.h"

PG_FUNCTION_INFO_V1(queue_rate_limited_sql);

#define RATE_SLOTS			16

/* The tenant field of a key: the whole queue, its held-back counter, or a tenant (odd). */
#define RATE_WHOLE_QUEUE	UINT64CONST(0)
#define RATE_COUNTER		UINT64CONST(2)

typedef struct RateKey
{
	Oid			dbid;
	int32		pad;
	int64		queue_id;
	uint64		tenant;
} RateKey;

typedef struct RateSlot
{
	TimestampTz at;				/* settled: when handed out; reserved: when taken */
	int32		n;
	int32		pid;			/* 0: settled; else the process that reserved it */
	uint32		token;			/* the reservation's, in that process */
} RateSlot;

typedef struct RateEntry
{
	RateKey		key;
	Oid			owner;			/* the queue's owner, whose share it takes */
	int64		interval;		/* the last one used (the sweep of a full table) */
	int			nslots;
	RateSlot	slots[RATE_SLOTS];
	uint64		held_back;		/* RATE_COUNTER entries only */
} RateEntry;

typedef struct RateShared
{
	LWLock	   *lock;
	TimestampTz started_at;		/* when this shared memory was made */
	TimestampTz clock;			/* the latest time read under the lock */
} RateShared;

/* A reservation of this process, not yet settled. */
typedef struct RateHold
{
	RateKey		key;
	uint32		token;
	int32		reserved;
	int32		used;
	bool		tenant;
} RateHold;

#define MAX_HOLDS			64

int			queue_rate_limit_keys = 10000;

/* How many entries the queues of one owner hold (owner_share at most). */
typedef struct RateOwner
{
	Oid			owner;
	int			n;
} RateOwner;

static RateShared *rate_shared = NULL;
static HTAB *rate_table = NULL;
static HTAB *rate_owners = NULL;
static RateHold holds[MAX_HOLDS];
static int	nholds = 0;
static uint32 next_token = 0;
static bool exit_registered = false;

static shmem_request_hook_type prev_shmem_request_hook = NULL;
static shmem_startup_hook_type prev_shmem_startup_hook = NULL;

static Size
rate_size(void)
{
	return add_size(add_size(MAXALIGN(sizeof(RateShared)),
							 hash_estimate_size(queue_rate_limit_keys, sizeof(RateEntry))),
					hash_estimate_size(queue_rate_limit_keys, sizeof(RateOwner)));
}

static void
rate_shmem_request(void)
{
	if (prev_shmem_request_hook)
		prev_shmem_request_hook();
	RequestAddinShmemSpace(rate_size());
	RequestNamedLWLockTranche("queue rate limits", 1);
}

static void
rate_shmem_startup(void)
{
	bool		found;
	HASHCTL		ctl;

	if (prev_shmem_startup_hook)
		prev_shmem_startup_hook();
	LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
	rate_shared = ShmemInitStruct("queue rate limits", sizeof(RateShared), &found);
	if (!found)
	{
		rate_shared->lock = &(GetNamedLWLockTranche("queue rate limits"))->lock;
		rate_shared->started_at = GetCurrentTimestamp();
	}
	ctl.keysize = sizeof(RateKey);
	ctl.entrysize = sizeof(RateEntry);
	rate_table = queue_shmem_init_hash("queue rate limit windows",
									   queue_rate_limit_keys, queue_rate_limit_keys,
									   &ctl, HASH_ELEM | HASH_BLOBS | HASH_FIXED_SIZE);
	ctl.keysize = sizeof(Oid);
	ctl.entrysize = sizeof(RateOwner);
	rate_owners = queue_shmem_init_hash("queue rate limit owners",
										queue_rate_limit_keys, queue_rate_limit_keys,
										&ctl, HASH_ELEM | HASH_BLOBS | HASH_FIXED_SIZE);
	LWLockRelease(AddinShmemInitLock);
}

/* From _PG_init: the setting, and while preloading the shared memory. */
void
queue_rate_init(void)
{
	DefineCustomIntVariable("queue.rate_limit_keys",
							"Tenants and queues whose rate limit windows shared memory keeps at once.",
							"A tenant with messages handed out in its window holds one entry; beyond this many, a tenant without one is handed nothing until a window passes.",
							&queue_rate_limit_keys,
							10000, 100, 10000000,
							PGC_POSTMASTER, 0,
							NULL, NULL, NULL);
	if (!process_shared_preload_libraries_in_progress)
		return;
	prev_shmem_request_hook = shmem_request_hook;
	shmem_request_hook = rate_shmem_request;
	prev_shmem_startup_hook = shmem_startup_hook;
	shmem_startup_hook = rate_shmem_startup;
}

/* Whether a receive of q has a limit to keep. */
bool
queue_rate_limited(const QueueMeta *q)
{
	return q->rate_limit > 0 || q->rate_limit_per_group > 0;
}

static void
make_key(RateKey *k, const QueueMeta *q, uint64 tenant)
{
	memset(k, 0, sizeof(*k));
	k->dbid = MyDatabaseId;
	k->queue_id = q->id;
	k->tenant = tenant;
}

/* A tenant's key: the hash of its group id, odd (never a queue's). */
static uint64
tenant_of(Datum group)
{
	text	   *t = DatumGetTextPP(group);

	return hash_bytes_extended((const unsigned char *) VARDATA_ANY(t),
							   VARSIZE_ANY_EXHDR(t), 0x51554555) | 1;
}

/*
 * The queue's owner (a shared queue's is in its row, a dedicated one's is
 * its table's), read before the lock is taken.
 */
static Oid
owner_of(const QueueMeta *q)
{
	HeapTuple	tup;
	Oid			owner = InvalidOid;

	if (OidIsValid(q->owner))
		return q->owner;
	tup = SearchSysCache1(RELOID, ObjectIdGetDatum(q->relid));
	if (HeapTupleIsValid(tup))
	{
		owner = ((Form_pg_class) GETSTRUCT(tup))->relowner;
		ReleaseSysCache(tup);
	}
	return owner;
}

static void
need_shared(void)
{
	if (rate_shared == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("a queue with a rate limit needs queue in shared_preload_libraries"),
				 errdetail("What was handed out is counted in shared memory, across every session."),
				 errhint("Add queue to shared_preload_libraries, or remove the queue's rate limits with queue.alter.")));
}

/*
 * How long a slot counts: the interval and a little more (a fiftieth of
 * it, 20 ms at most), so that times a client takes on its side of the
 * wire, a few milliseconds after the server's, keep the limit too.
 */
static int64
span_of(int64 interval)
{
	return interval + Min(interval / 50, 20000);
}

/*
 * The time now, read under the lock held exclusive, never earlier than a
 * time read under it before (a clock set back does not reopen a window).
 * Every take and every settle reads it so: a slot is dropped only at a
 * time no later than the next take's, which is the hand-out time of what
 * that take leases (the file header).
 */
static TimestampTz
locked_clock(void)
{
	TimestampTz t = GetCurrentTimestamp();

	if (t < rate_shared->clock)
		t = rate_shared->clock;
	rate_shared->clock = t;
	return t;
}

/* Whether a slot still counts now: a reservation, or handed out within the span. */
static bool
slot_counts(const RateSlot *slot, TimestampTz now, int64 interval)
{
	return slot->pid != 0 || slot->at >= now - span_of(interval);
}

/*
 * Whether a new window of q starts closed now: q was made before the
 * server started, and the first interval since has not passed (the file
 * header).
 */
static bool
starts_closed(const QueueMeta *q, int64 interval, TimestampTz now)
{
	return q->created_at < rate_shared->started_at &&
		now <= rate_shared->started_at + span_of(interval);
}

/* Drop e's slots past the window (lock held exclusive); what the rest hold. */
static int64
window_count(RateEntry *e, TimestampTz now, int64 interval)
{
	int64		used = 0;
	int			k = 0;

	for (int i = 0; i < e->nslots; i++)
	{
		if (!slot_counts(&e->slots[i], now, interval))
			continue;
		e->slots[k++] = e->slots[i];
		used += e->slots[i].n;
	}
	e->nslots = k;
	return used;
}

/* When e's oldest settled slot leaves the window; 0 if none would. */
static TimestampTz
opens_at(const RateEntry *e, int64 interval)
{
	TimestampTz first = 0;

	for (int i = 0; i < e->nslots; i++)
		if (e->slots[i].pid == 0 && (first == 0 || e->slots[i].at < first))
			first = e->slots[i].at;
	return first == 0 ? 0 : first + span_of(interval) + 1;
}

/* Make room for one slot: the two oldest settled ones become one, at the later time. */
static bool
merge_oldest(RateEntry *e)
{
	int			a = -1;
	int			b = -1;

	for (int i = 0; i < e->nslots; i++)
	{
		if (e->slots[i].pid != 0)
			continue;
		if (a < 0 || e->slots[i].at < e->slots[a].at)
		{
			b = a;
			a = i;
		}
		else if (b < 0 || e->slots[i].at < e->slots[b].at)
			b = i;
	}
	if (b < 0)
		return false;
	e->slots[b].n += e->slots[a].n;
	e->slots[b].at = Max(e->slots[a].at, e->slots[b].at);
	e->slots[a] = e->slots[--e->nslots];
	return true;
}

/* The most entries the queues of one owner may hold: an eighth of the table. */
static int
owner_share(void)
{
	return Max(100, queue_rate_limit_keys / 8);
}

/* Remove e, and its count from its owner's (lock held exclusive). */
static void
remove_entry(RateEntry *e)
{
	if (e->key.tenant != RATE_COUNTER)
	{
		RateOwner  *o = hash_search(rate_owners, &e->owner, HASH_FIND, NULL);

		if (o != NULL && --o->n <= 0)
			(void) hash_search(rate_owners, &e->owner, HASH_REMOVE, NULL);
	}
	(void) hash_search(rate_table, &e->key, HASH_REMOVE, NULL);
}

/*
 * Remove entries whose windows passed, to make room in a full table (lock
 * held exclusive).  Walks the whole table, so only when it is full.
 */
static void
sweep_table(TimestampTz now)
{
	HASH_SEQ_STATUS seq;
	RateEntry  *e;

	hash_seq_init(&seq, rate_table);
	while ((e = hash_seq_search(&seq)) != NULL)
	{
		if (e->key.tenant == RATE_COUNTER)
			continue;
		if (window_count(e, now, e->interval) == 0 && e->nslots == 0)
			remove_entry(e);
	}
}

/*
 * The entry of key, made if missing (lock held exclusive); NULL when the
 * table is full, or the queues of the queue's owner hold their share of
 * it (so that one owner's tenants cannot take every other owner's room).
 * A new window of a queue made before the server started starts closed
 * (the file header).
 */
static RateEntry *
entry_of(const RateKey *key, const QueueMeta *q, Oid owner, int32 limit, int64 interval,
		 TimestampTz now)
{
	RateEntry  *e;
	RateOwner  *o = NULL;
	bool		found;

	e = hash_search(rate_table, key, HASH_FIND, NULL);
	if (e != NULL)
	{
		e->interval = interval;
		return e;
	}
	if (key->tenant != RATE_COUNTER)
	{
		o = hash_search(rate_owners, &owner, HASH_ENTER_NULL, &found);
		if (o == NULL)
			return NULL;
		if (!found)
			o->n = 0;
		if (o->n >= owner_share())
		{
			sweep_table(now);
			o = hash_search(rate_owners, &owner, HASH_ENTER_NULL, &found);
			if (o == NULL)
				return NULL;
			if (!found)
				o->n = 0;
			if (o->n >= owner_share())
				return NULL;
		}
	}
	e = hash_search(rate_table, key, HASH_ENTER_NULL, &found);
	if (e == NULL)
	{
		sweep_table(now);
		e = hash_search(rate_table, key, HASH_ENTER_NULL, &found);
		if (e == NULL)
		{
			if (o != NULL && o->n == 0)
				(void) hash_search(rate_owners, &owner, HASH_REMOVE, NULL);
			return NULL;
		}
		/* the sweep may have removed the owner's row: count it again */
		if (o != NULL)
		{
			o = hash_search(rate_owners, &owner, HASH_ENTER_NULL, &found);
			if (o != NULL && !found)
				o->n = 0;
		}
	}
	if (!found)
	{
		e->owner = owner;
		if (o != NULL)
			o->n++;
		e->nslots = 0;
		e->held_back = 0;
		if (key->tenant != RATE_COUNTER && starts_closed(q, interval, now))
		{
			e->slots[0].at = rate_shared->started_at;
			e->slots[0].n = limit;
			e->slots[0].pid = 0;
			e->slots[0].token = 0;
			e->nslots = 1;
		}
	}
	e->interval = interval;
	return e;
}

static void
note_opens(QueueMeta *q, TimestampTz at)
{
	if (at != 0 && (q->rate_opens_at == 0 || at < q->rate_opens_at))
		q->rate_opens_at = at;
}

static void
settle_at_exit(int code, Datum arg)
{
	queue_rate_abandon();
}

/*
 * How many of want the window of (q, tenant) allows now, reserved for this
 * process until queue_rate_settle; fewer (0 at least) when the limit
 * binds, and then q->rate_opens_at says when it may allow more.
 */
static int
take_locked(QueueMeta *q, Oid owner, uint64 tenant, int32 limit, int want, TimestampTz now,
			bool is_tenant)
{
	RateKey		key;
	RateEntry  *e;
	int64		used;
	int			granted = 0;
	int64		interval = q->rate_interval;

	if (want <= 0)
		return 0;
	if (nholds >= MAX_HOLDS)
		return 0;				/* a receive holds at most a batch's tenants */
	make_key(&key, q, tenant);
	e = entry_of(&key, q, owner, limit, interval, now);
	if (e == NULL)
	{
		note_opens(q, now + Min(interval, 1000000) + 1);
		return 0;
	}
	used = window_count(e, now, interval);
	if (used < limit)
		granted = (int) Min((int64) want, limit - used);
	if (granted > 0 && e->nslots == RATE_SLOTS && !merge_oldest(e))
		granted = 0;			/* every slot is a reservation under way */
	if (granted > 0)
	{
		RateSlot   *s = &e->slots[e->nslots++];

		s->at = now;
		s->n = granted;
		s->pid = MyProcPid;
		s->token = ++next_token;
		holds[nholds].key = key;
		holds[nholds].token = s->token;
		holds[nholds].reserved = granted;
		holds[nholds].used = 0;
		holds[nholds].tenant = is_tenant;
		nholds++;
	}
	if (granted < want)
	{
		TimestampTz at = opens_at(e, interval);

		/* only reservations under way: they settle within a statement */
		note_opens(q, at != 0 ? at : now + 1000);
	}
	if (e->nslots == 0)
		remove_entry(e);
	return granted;
}

static void
take_begin(void)
{
	need_shared();
	if (!exit_registered)
	{
		before_shmem_exit(settle_at_exit, (Datum) 0);
		exit_registered = true;
	}
	LWLockAcquire(rate_shared->lock, LW_EXCLUSIVE);
}

/*
 * The whole queue's share of want (receive.c), before its try; *now
 * becomes the time it was taken at, the hand-out time of the try's lease.
 */
int
queue_rate_take_queue(QueueMeta *q, int want, TimestampTz *now)
{
	int			granted;
	Oid			owner;

	if (q->rate_limit <= 0)
		return want;
	owner = owner_of(q);
	take_begin();
	*now = locked_clock();
	granted = take_locked(q, owner, RATE_WHOLE_QUEUE, q->rate_limit, want, *now, false);
	LWLockRelease(rate_shared->lock);
	return granted;
}

/*
 * Tenants' shares (fair.c), before the lease, under one hold of the lock:
 * of want[i] for groups[i], granted[i] (a want of 0 takes nothing); *now
 * becomes the time they were taken at, the hand-out time of the lease.
 */
void
queue_rate_take_tenants(QueueMeta *q, int n, const Datum *groups, const int *want,
						int *granted, TimestampTz *now)
{
	Oid			owner = owner_of(q);

	take_begin();
	*now = locked_clock();
	for (int i = 0; i < n; i++)
		granted[i] = want[i] <= 0 ? 0 :
			take_locked(q, owner, tenant_of(groups[i]), q->rate_limit_per_group, want[i], *now, true);
	LWLockRelease(rate_shared->lock);
}

/*
 * How many each tenant's window would allow now, without taking them
 * (fair.c shares the batch by it), under one hold of the lock.
 */
void
queue_rate_peek_tenants(QueueMeta *q, int n, const Datum *groups, int *allow, TimestampTz now)
{
	need_shared();
	LWLockAcquire(rate_shared->lock, LW_SHARED);
	for (int i = 0; i < n; i++)
	{
		RateKey		key;
		RateEntry  *e;
		int64		used = 0;

		make_key(&key, q, tenant_of(groups[i]));
		e = hash_search(rate_table, &key, HASH_FIND, NULL);
		if (e != NULL)
		{
			for (int s = 0; s < e->nslots; s++)
				if (slot_counts(&e->slots[s], now, q->rate_interval))
					used += e->slots[s].n;
		}
		else if (starts_closed(q, q->rate_interval, now))
			used = q->rate_limit_per_group; /* its first window after a start */
		allow[i] = used >= q->rate_limit_per_group ? 0 :
			(int) Min(q->rate_limit_per_group - used, (int64) PG_INT32_MAX);
	}
	LWLockRelease(rate_shared->lock);
}

/* The whole queue's reservation handed out n. */
void
queue_rate_used_queue(int n)
{
	for (int i = 0; i < nholds; i++)
		if (!holds[i].tenant)
			holds[i].used += n;
}

/*
 * The tenants' reservations: each handed out the rows of its group among
 * a lease's rows (not those going to the dead-letter queue).
 */
void
queue_rate_used_rows(SPITupleTable *tt, uint64 nrows)
{
	for (uint64 r = 0; r < nrows; r++)
	{
		bool		isnull;
		Datum		g;
		uint64		tenant;

		if (queue_row_is_dead_letter(tt, r))
			continue;
		g = SPI_getbinval(tt->vals[r], tt->tupdesc, RCOL_GROUP, &isnull);
		if (isnull)
			continue;
		tenant = tenant_of(g);
		/* a tenant may hold several reservations (fair.c took more): fill each */
		for (int i = 0, last = -1; i <= nholds; i++)
		{
			if (i == nholds)
			{
				if (last >= 0)
					holds[last].used++;	/* past every reservation: never lost */
				break;
			}
			if (!holds[i].tenant || holds[i].key.tenant != tenant)
				continue;
			last = i;
			if (holds[i].used < holds[i].reserved)
			{
				holds[i].used++;
				break;
			}
		}
	}
}

/*
 * Settle this process's reservations (the tenants' or the queue's): each
 * slot becomes what was used, stamped now; in full when abandon.
 */
static void
settle(bool tenants, bool abandon)
{
	TimestampTz now;
	int			k = 0;

	if (nholds == 0 || rate_shared == NULL)
		return;
	LWLockAcquire(rate_shared->lock, LW_EXCLUSIVE);
	now = locked_clock();
	for (int i = 0; i < nholds; i++)
	{
		RateHold   *h = &holds[i];
		RateEntry  *e;

		if (!abandon && h->tenant != tenants)
		{
			holds[k++] = *h;
			continue;
		}
		e = hash_search(rate_table, &h->key, HASH_FIND, NULL);
		for (int s = 0; e != NULL && s < e->nslots; s++)
		{
			RateSlot   *slot = &e->slots[s];

			if (slot->pid != MyProcPid || slot->token != h->token)
				continue;
			slot->n = abandon ? Max(h->reserved, h->used) : h->used;
			slot->at = now;
			slot->pid = 0;
			if (slot->n == 0)
				e->slots[s] = e->slots[--e->nslots];
			break;
		}
		if (e != NULL && e->nslots == 0)
			remove_entry(e);
	}
	nholds = k;
	LWLockRelease(rate_shared->lock);
}

void
queue_rate_settle_tenants(void)
{
	settle(true, false);
}

void
queue_rate_settle_queue(void)
{
	settle(false, false);
}

/* An error (or exit) between a reservation and its settling: count it all. */
void
queue_rate_abandon(void)
{
	settle(false, true);
}

/* Count n messages q's limits held back from a receive. */
void
queue_rate_held_back(QueueMeta *q, int64 n)
{
	RateKey		key;
	RateEntry  *e;

	if (n <= 0 || rate_shared == NULL)
		return;
	make_key(&key, q, RATE_COUNTER);
	LWLockAcquire(rate_shared->lock, LW_EXCLUSIVE);
	e = entry_of(&key, q, InvalidOid, 0, 0, 0);
	if (e != NULL)
		e->held_back += (uint64) n;
	LWLockRelease(rate_shared->lock);
}

/*
 * queue._rate_limited(queue_id): messages held back since the server
 * started, of a queue the caller may see (42501 otherwise: the stats view
 * calls it as the reading role, and PUBLIC may call it).
 */
Datum
queue_rate_limited_sql(PG_FUNCTION_ARGS)
{
	RateKey		key;
	RateEntry  *e;
	int64		n = 0;

	queue_check_may_see(PG_GETARG_INT64(0));	/* state/views.c */
	if (rate_shared == NULL)
		PG_RETURN_INT64(0);
	memset(&key, 0, sizeof(key));
	key.dbid = MyDatabaseId;
	key.queue_id = PG_GETARG_INT64(0);
	key.tenant = RATE_COUNTER;
	LWLockAcquire(rate_shared->lock, LW_SHARED);
	e = hash_search(rate_table, &key, HASH_FIND, NULL);
	if (e != NULL)
		n = (int64) e->held_back;
	LWLockRelease(rate_shared->lock);
	PG_RETURN_INT64(n);
}
