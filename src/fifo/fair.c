/*-------------------------------------------------------------------------
 *
 * fair.c
 *	  Fair queues: tenants on a standard queue (DESIGN.md "Fair queues").
 *
 * On a standard queue message_group_id names a tenant, and a message
 * without one is a tenant of its own.  A receive of a queue whose messages
 * carry group ids, or that caps a tenant's messages in flight
 * (max_in_flight_per_group), is fair (plans.c's statements): a first look
 * (QP_FAIR_WINDOW) at the oldest visible messages and their tenants'
 * messages in flight settles most receives; when it does not (one
 * tenant's backlog fills the head of the queue) every tenant is read
 * (QP_FAIR_TENANTS).  Here the batch is shared among those candidates
 * (share_batch: each next message to the tenant with the fewest in flight
 * plus what it already got, oldest head among equals), and QP_FAIR_RECEIVE
 * leases each chosen tenant's share, then from spare tenants what the
 * chosen ones did not give.  A queue whose sends never carried a group id
 * receives as before (receive.c's QP_RECEIVE), at the cost of reading one
 * flag in shared memory.
 *
 * Before the lease the receive takes a lock per tenant it takes from (an
 * advisory lock with field4 8, keyed by queue and the group id's hash, not
 * waited for, held to the end of the transaction).  With a cap, a tenant
 * whose lock another receive holds is left out, and the lease counts the
 * tenant's messages in flight again under the lock with a new snapshot:
 * two receives never both take a tenant's last free place, so the cap is
 * exact.  Without one, such a tenant comes after every other (its weight
 * is raised by TENANT_HELD), so concurrent receivers spread over the
 * tenants rather than all taking the same oldest one.
 *
 * Which kinds of message a queue's sends carried (a group id, none) is
 * kept in its counter slot (counts.c): set by the first send of each kind,
 * saved with the counters at shutdown, cleared when the queue's slot is.
 * After a crash, or the update to 1.6, a queue is fair again from its next
 * send with a group id; a cap makes every receive fair regardless.
 *
 * Also here: queue.group_stats, and the groups and noisy_groups of
 * queue.stats.
 *
 * With receive_rate_limit_per_group each tenant is given no more than its
 * window allows (rate.c), and its share is reserved there before the
 * lease; receive.c settles it to what the lease took.
 *
 * Calls: plans.c (statements), catalog.c and acl.c (the queue and the
 * caller's privileges), common/counts.c (the counter slot), groups.c (the group hash),
 * rate.c (the tenants' windows),
 * views.c (read locks of queue.stats).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "storage/lmgr.h"
#include "storage/lock.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/datum.h"
#include "utils/timestamp.h"
#include "utils/tuplestore.h"

#include "common/queue_common.h"
#include "storage/queue_storage.h"
#include "access/queue_access.h"
#include "state/queue_state.h"
#include "fifo/queue_fifo.h"

PG_FUNCTION_INFO_V1(queue_group_stats);
PG_FUNCTION_INFO_V1(queue_group_counts_sql);

/* pg_locks shows a tenant's receive lock as an advisory lock with objsubid 8 */
#define QUEUE_TENANT_LOCKTAG	8

/* A tenant another receive holds comes after all others (no cap). */
#define TENANT_HELD				1000000

/* Tenants a receive examines, and group_stats lists, at most. */
#define MAX_TENANTS_EXAMINED	10000

/* The oldest visible messages a fair receive looks at first. */
#define FAIR_LOOK(want)			(2 * (want) + 8)

/* Tenants a lease may fall back on when its chosen ones gave less (no cap only). */
#define SPARE_TENANTS			8

/* Messages in flight counted per tenant when no cap bounds the count. */
#define IN_FLIGHT_COUNTED		1000

/*
 * Whether a receive of q is fair: a standard queue with a cap, or whose
 * sends carried group ids (or that has no counter slot to tell).
 */
bool
queue_receive_is_fair(QueueMeta *q)
{
	int			kinds;

	if (q->fifo)
		return false;
	if (q->max_in_flight > 0 || q->rate_limit_per_group > 0 ||
		(q->tenant_kinds & QUEUE_TENANTS_GROUPED))
		return true;
	kinds = queue_slot_kinds(q->id, &q->counter_slot);
	if (kinds < 0)
		return true;
	q->tenant_kinds |= (uint32) kinds;
	return (kinds & QUEUE_TENANTS_GROUPED) != 0;
}

static bool
lock_tenant(QueueMeta *q, Datum group, bool isnull)
{
	LOCKTAG		tag;

	SET_LOCKTAG_ADVISORY(tag, MyDatabaseId, (uint32) q->id,
						 isnull ? 0 : queue_group_hash(group), QUEUE_TENANT_LOCKTAG);
	return LockAcquire(&tag, ExclusiveLock, false, true) != LOCKACQUIRE_NOT_AVAIL;
}

/* A candidate tenant of a fair receive (QP_FAIR_TENANTS's row). */
typedef struct Candidate
{
	Datum		group;			/* text; 0 for the messages without one */
	bool		isnull;
	int64		in_flight;		/* as the candidates' statement saw */
	int64		base;			/* in_flight, plus TENANT_HELD if held */
	TimestampTz head;			/* its oldest visible message */
	int64		head_id;
	TimestampTz bound;			/* the tenant without a group id: see plans.c */
	int			quota;			/* messages this receive takes from it */
	int			allow;			/* what its rate limit allows (rate.c); -1: no limit */
	int			reserved;		/* ... of which this receive reserved */
	int			tried;			/* its lock: 0 not tried, 1 held here, -1 not */
	bool		out;			/* not to lease from */
} Candidate;

/* Oldest head first. */
static int
candidate_head_cmp(const void *a, const void *b)
{
	const Candidate *x = a;
	const Candidate *y = b;

	if (x->head != y->head)
		return x->head < y->head ? -1 : 1;
	return (x->head_id > y->head_id) - (x->head_id < y->head_id);
}

/* x weighing wx before y weighing wy: lighter first, then oldest head. */
static int
weigh(const Candidate *x, int64 wx, const Candidate *y, int64 wy)
{
	if (wx != wy)
		return wx < wy ? -1 : 1;
	return candidate_head_cmp(x, y);
}

/* Lightest first (fewest in flight, not held), then oldest head. */
static int
candidate_lighter_cmp(const void *a, const void *b)
{
	const Candidate *x = a;
	const Candidate *y = b;

	return weigh(x, x->base, y, y->base);
}

/*
 * Share want among the candidates as the batch would: each next message
 * to the tenant whose next one weighs least (its base plus what it has
 * had), oldest head among equals, never past a cap.  The candidates come
 * ordered by (in_flight, head); their later messages are taken to be
 * younger than every head, which the lease's own order makes good enough.
 */
static int
share_batch(Candidate *c, int n, int want, int32 cap, bool limits)
{
	int			total = 0;

	for (int i = 0; i < n; i++)
		c[i].quota = 0;
	for (int k = 0; k < want; k++)
	{
		int			best = -1;

		for (int i = 0; i < n; i++)
		{
			if (c[i].out || (cap > 0 && c[i].in_flight + c[i].quota >= cap))
				continue;
			if (limits && c[i].allow >= 0 && c[i].quota >= c[i].allow)
				continue;
			if (best < 0 ||
				weigh(&c[i], c[i].base + c[i].quota, &c[best], c[best].base + c[best].quota) < 0)
				best = i;
		}
		if (best < 0)
			break;
		c[best].quota++;
		total++;
	}
	return total;
}

/* Group ids with their messages in flight, sorted by group id (window_candidates). */
typedef struct GroupCount
{
	Datum		group;
	int64		n;
} GroupCount;

static int
group_count_cmp(const void *a, const void *b)
{
	return queue_text_cmp(&((const GroupCount *) a)->group, &((const GroupCount *) b)->group);
}

static int
candidate_pos_cmp(const void *a, const void *b)
{
	const Candidate *x = a;
	const Candidate *y = b;

	if (x->isnull != y->isnull)
		return x->isnull ? -1 : 1;
	if (!x->isnull)
	{
		int			c = queue_text_cmp(&x->group, &y->group);

		if (c != 0)
			return c;
	}
	return (x->head_id > y->head_id) - (x->head_id < y->head_id);
}

/*
 * What each candidate's rate limit allows now (rate.c; -1: none): a
 * tenant with nothing left (0) gets no share, is no spare and does not
 * count as idle in the first look, as a capped one.  The tenant without a
 * group id is not limited per tenant.
 */
static void
apply_limits(QueueMeta *q, Candidate *c, int n, TimestampTz now)
{
	Datum	   *groups;
	int		   *allow;
	int			k = 0;

	for (int i = 0; i < n; i++)
		c[i].allow = -1;
	if (q->rate_limit_per_group <= 0 || n == 0)
		return;
	groups = palloc(n * sizeof(Datum));
	allow = palloc(n * sizeof(int));
	for (int i = 0; i < n; i++)
		if (!c[i].isnull)
			groups[k++] = c[i].group;
	queue_rate_peek_tenants(q, k, groups, allow, now);
	k = 0;
	for (int i = 0; i < n; i++)
	{
		if (c[i].isnull)
			continue;
		c[i].allow = allow[k++];
	}
	pfree(groups);
	pfree(allow);
}

/*
 * The candidates from a first look at the queue's head (QP_FAIR_WINDOW):
 * the tenants of its oldest visible messages, each with its messages in
 * flight.  A tenant not among them has a newer head, so it could only be
 * preferred for having fewer in flight: when want of them have none (and
 * no cap keeps them out), none can, and they are the candidates.  -1
 * when the look does not settle it (all_candidates then looks at every
 * tenant).  Each tenant's messages in flight are counted up to
 * IN_FLIGHT_COUNTED (with a cap, the lease counts again exactly).
 */
static int
window_candidates(QueueMeta *q, TimestampTz now, int want, bool by_priority,
				  Candidate **out)
{
	Datum		a[4];
	int			rc;
	int			nrows;
	int			nw = 0;
	int			nf = 0;
	int			ncand = 0;
	int			idle = 0;
	int64		null_in_flight = 0;
	Candidate  *c;
	GroupCount *f;
	TimestampTz bound = now;

	a[0] = TimestampTzGetDatum(now);
	a[1] = TimestampTzGetDatum(now - q->retention);
	a[2] = Int32GetDatum(FAIR_LOOK(want));
	a[3] = Int32GetDatum(IN_FLIGHT_COUNTED);
	rc = queue_exec(q, by_priority ? QP_FAIR_WINDOW_PRIO : QP_FAIR_WINDOW, a, NULL, false, 0);
	if (rc != SPI_OK_SELECT)
		elog(ERROR, "queue fair receive failed: %s", SPI_result_code_string(rc));
	nrows = (int) SPI_processed;
	if (nrows == 0)
		return 0;
	c = palloc0(nrows * sizeof(Candidate));
	f = palloc(nrows * sizeof(GroupCount));
	for (int r = 0; r < nrows; r++)
	{
		HeapTuple	tup = SPI_tuptable->vals[r];
		TupleDesc	desc = SPI_tuptable->tupdesc;
		bool		gnull;
		bool		isnull;
		Datum		g = SPI_getbinval(tup, desc, 1, &gnull);
		Datum		count = SPI_getbinval(tup, desc, 4, &isnull);

		if (!isnull)
		{
			if (gnull)
				null_in_flight = DatumGetInt64(count);
			else
			{
				f[nf].group = g;
				f[nf].n = DatumGetInt64(count);
				nf++;
			}
			continue;
		}
		c[nw].isnull = gnull;
		c[nw].group = gnull ? (Datum) 0 : g;
		c[nw].head = DatumGetTimestampTz(SPI_getbinval(tup, desc, 2, &isnull));
		c[nw].head_id = DatumGetInt64(SPI_getbinval(tup, desc, 3, &isnull));
		bound = c[nw].head;
		nw++;
	}
	if (nw == 0)
		return 0;				/* nothing visible */
	if (nw < FAIR_LOOK(want))
		bound = now;			/* the look saw every visible message */

	/* one candidate per tenant: its oldest message of the look */
	qsort(c, nw, sizeof(Candidate), candidate_pos_cmp);
	qsort(f, nf, sizeof(GroupCount), group_count_cmp);
	for (int i = 0; i < nw; i++)
	{
		GroupCount *hit;

		if (ncand > 0 && c[ncand - 1].isnull == c[i].isnull &&
			(c[i].isnull || queue_text_cmp(&c[ncand - 1].group, &c[i].group) == 0))
			continue;
		c[ncand] = c[i];
		if (c[ncand].isnull)
		{
			c[ncand].in_flight = null_in_flight;
			c[ncand].bound = bound;
		}
		else
		{
			GroupCount	key = {c[ncand].group, 0};

			hit = bsearch(&key, f, nf, sizeof(GroupCount), group_count_cmp);
			c[ncand].in_flight = hit ? hit->n : 0;
			c[ncand].group = datumCopy(c[ncand].group, false, -1);
		}
		c[ncand].base = c[ncand].in_flight;
		ncand++;
	}
	apply_limits(q, c, ncand, now);
	for (int i = 0; i < ncand; i++)
	{
		if (q->max_in_flight > 0 && c[i].in_flight >= q->max_in_flight)
			c[i].out = true;
		else if (c[i].in_flight == 0 && c[i].allow != 0)
			idle++;
	}
	if (idle < want && nw == FAIR_LOOK(want))
		return -1;				/* others behind the look may come first */
	qsort(c, ncand, sizeof(Candidate), candidate_head_cmp);
	*out = c;
	return ncand;
}

/*
 * The candidates from every tenant (QP_FAIR_TENANTS: at most
 * MAX_TENANTS_EXAMINED, fewest in flight first, the first want + 8, or all
 * of them under a rate limit per tenant).
 */
static int
all_candidates(QueueMeta *q, TimestampTz now, int want, bool limited, bool by_priority,
			   Candidate **out)
{
	Datum		a[8];
	char		n[8] = {' ', ' ', ' ', ' ', ' ', ' ', ' ', ' '};
	int			kinds = (int) q->tenant_kinds;
	int32		cap = q->max_in_flight;
	int			count_bound = cap > 0 ? cap : IN_FLIGHT_COUNTED;
	int			rc;
	int			ncand;
	Candidate  *c;

	if (!(kinds & QUEUE_TENANTS_UNGROUPED))
		kinds = queue_slot_kinds(q->id, &q->counter_slot);
	a[0] = TimestampTzGetDatum(now);
	a[1] = TimestampTzGetDatum(now - q->retention);
	/* with rate limits, every tenant: the lightest may have no window left */
	a[2] = Int32GetDatum(limited ? MAX_TENANTS_EXAMINED : want + 8);
	a[3] = Int32GetDatum(count_bound);
	a[4] = Int32GetDatum(MAX_TENANTS_EXAMINED);
	a[5] = Int32GetDatum(cap);
	n[5] = cap > 0 ? ' ' : 'n';
	/* the tenant without a group id, when one may be there */
	a[6] = BoolGetDatum(kinds < 0 || (kinds & QUEUE_TENANTS_UNGROUPED) ||
						!(kinds & QUEUE_TENANTS_GROUPED));
	a[7] = BoolGetDatum(limited);
	rc = queue_exec(q, by_priority ? QP_FAIR_TENANTS_PRIO : QP_FAIR_TENANTS, a, n, false, 0);
	if (rc != SPI_OK_SELECT)
		elog(ERROR, "queue fair receive failed: %s", SPI_result_code_string(rc));
	ncand = (int) SPI_processed;
	if (ncand == 0)
		return 0;

	c = palloc0(ncand * sizeof(Candidate));
	for (int i = 0; i < ncand; i++)
	{
		HeapTuple	tup = SPI_tuptable->vals[i];
		TupleDesc	desc = SPI_tuptable->tupdesc;
		bool		isnull;
		Datum		g = SPI_getbinval(tup, desc, 1, &c[i].isnull);

		c[i].group = c[i].isnull ? (Datum) 0 : datumCopy(g, false, -1);
		c[i].in_flight = DatumGetInt64(SPI_getbinval(tup, desc, 2, &isnull));
		c[i].base = c[i].in_flight;
		c[i].head = DatumGetTimestampTz(SPI_getbinval(tup, desc, 3, &isnull));
		c[i].head_id = DatumGetInt64(SPI_getbinval(tup, desc, 4, &isnull));
		if (c[i].isnull)
			c[i].bound = DatumGetTimestampTz(SPI_getbinval(tup, desc, 5, &isnull));
	}

	*out = c;
	return ncand;
}

/*
 * The parameters of QP_FAIR_RECEIVE after its first five: the tenants to
 * lease from (QP_FAIR_TENANTS's candidates, locked as the file header
 * says) and how many of each, for a batch of want, not taking the
 * ndelivered messages this call delivered already.  False when no tenant
 * has a message to give.  Under a limit per tenant *nowp becomes the time
 * the shares were taken at (rate.c), at which the lease hands them out.
 */
bool
queue_fair_args(QueueMeta *q, TimestampTz *nowp, int want, int ndelivered,
				const int64 *delivered, bool by_priority, Datum *args, char *nulls)
{
	TimestampTz now = *nowp;	/* the look's; a take moves *nowp (rate.c) */
	int32		cap = q->max_in_flight;
	int			count_bound = cap > 0 ? cap : IN_FLIGHT_COUNTED;
	int			ncand;
	Candidate  *c = NULL;
	bool		settled = false;
	bool		limited = q->rate_limit_per_group > 0;
	int			ideal = 0;
	int			total = 0;
	Datum	   *tgroups = NULL;
	int		   *twant = NULL;
	int		   *tgot = NULL;
	int		   *tidx = NULL;
	int			nchosen;
	Datum	   *groups;
	Datum	   *quotas;
	int			ngroups = 0;
	bool		with_null = false;
	bool		null_spare = false;
	int32		null_quota = 0;
	TimestampTz null_bound = now;

	/*
	 * Under a limit per tenant, a tenant with no window left is out of the
	 * first look (as a capped one is), so the look settles the receive
	 * only when enough others are there; else every tenant is read, and
	 * the messages without a group id wherever they are.
	 */
	ncand = window_candidates(q, now, want, by_priority, &c);
	if (ncand < 0)
	{
		ncand = all_candidates(q, now, want, limited, by_priority, &c);
		apply_limits(q, c, ncand, now);
	}
	if (ncand == 0)
		return false;

	/*
	 * With a rate limit per tenant, each is given at most what its window
	 * allows (apply_limits), and each chosen one's share is reserved below
	 * (rate.c).  What the limits kept from the batch counts as held back:
	 * the batch shared as if no window were closed.
	 */
	if (limited)
	{
		tgroups = palloc(ncand * sizeof(Datum));
		twant = palloc(ncand * sizeof(int));
		tgot = palloc(ncand * sizeof(int));
		tidx = palloc(ncand * sizeof(int));
		ideal = share_batch(c, ncand, want, cap, false);
	}

	/*
	 * Lock the tenants the batch would take from; one held by another
	 * receive is left out (with a cap) or weighs TENANT_HELD more (without),
	 * and the batch is shared again, until every tenant it takes from was
	 * tried.  Each tenant is tried once, so this ends.
	 */
	while (!settled)
	{
		CHECK_FOR_INTERRUPTS();
		total = share_batch(c, ncand, want, cap, limited);
		settled = true;
		if (limited)
		{
			/* reserve what the shares need beyond what is reserved, at once */
			int			k = 0;

			for (int i = 0; i < ncand; i++)
			{
				if (c[i].allow < 0 || c[i].quota <= c[i].reserved)
					continue;
				tgroups[k] = c[i].group;
				twant[k] = c[i].quota - c[i].reserved;
				tidx[k++] = i;
			}
			if (k > 0)
				queue_rate_take_tenants(q, k, tgroups, twant, tgot, nowp);
			for (int j = 0; j < k; j++)
			{
				Candidate  *t = &c[tidx[j]];

				t->reserved += tgot[j];
				if (t->reserved < t->quota)
				{
					/* another receive took part of its window meanwhile */
					t->allow = t->reserved;
					settled = false;
				}
			}
		}
		if (!settled)
			continue;
		for (int i = 0; i < ncand; i++)
		{
			if (c[i].quota == 0 || c[i].tried != 0)
				continue;
			c[i].tried = lock_tenant(q, c[i].group, c[i].isnull) ? 1 : -1;
			if (c[i].tried < 0)
			{
				if (cap > 0)
					c[i].out = true;	/* another receive is taking its places */
				else
					c[i].base += TENANT_HELD;
				settled = false;
			}
		}
	}

	if (limited && ideal > total)
		queue_rate_held_back(q, ideal - total);

	groups = palloc(ncand * sizeof(Datum));
	quotas = palloc(ncand * sizeof(Datum));
	for (int i = 0; i < ncand; i++)
	{
		if (c[i].quota == 0)
			continue;
		if (c[i].isnull)
		{
			with_null = true;
			null_quota = c[i].quota;
			null_bound = c[i].bound;
			continue;
		}
		groups[ngroups] = c[i].group;
		quotas[ngroups] = Int32GetDatum(c[i].quota);
		ngroups++;
	}
	if (ngroups == 0 && !with_null)
		return false;

	/*
	 * Spares, after them, lightest first: another receive may lease a
	 * chosen tenant's messages between the look and the lease (it held the
	 * tenant's lock until it committed, and this receive took the lock
	 * after).  The lease takes from the spares only what the chosen ones
	 * did not give (it reads the tenants in this order and stops at the
	 * batch).  With a cap a spare would have to be locked, and a receive
	 * in a transaction block would hold it to the end: none then (the
	 * receive looks again instead, receive.c).  The tenant without a group
	 * id is read first when chosen, last when a spare.
	 */
	qsort(c, ncand, sizeof(Candidate), candidate_lighter_cmp);
	nchosen = ngroups;
	for (int i = 0, nspare = 0; cap == 0 && i < ncand && nspare < SPARE_TENANTS; i++)
	{
		if (c[i].quota > 0 || c[i].out || c[i].allow == 0 || (c[i].isnull && with_null))
			continue;
		nspare++;
		if (c[i].isnull)
		{
			null_spare = true;
			null_quota = want;
			null_bound = c[i].bound;
			continue;
		}
		groups[ngroups] = c[i].group;
		quotas[ngroups] = Int32GetDatum(c[i].allow >= 0 ? Min(want, c[i].allow) : want);
		ngroups++;
	}

	/*
	 * Under a limit per tenant a spare's share is reserved too (what its
	 * window allows, up to the batch), and settled after the lease to what
	 * it gave, as the chosen ones' are.
	 */
	if (limited && ngroups > nchosen)
	{
		for (int i = nchosen; i < ngroups; i++)
			twant[i - nchosen] = DatumGetInt32(quotas[i]);
		queue_rate_take_tenants(q, ngroups - nchosen, groups + nchosen, twant, tgot, nowp);
		for (int i = nchosen; i < ngroups; i++)
			quotas[i] = Int32GetDatum(tgot[i - nchosen]);
	}

	args[5] = Int32GetDatum(cap);
	nulls[5] = cap > 0 ? ' ' : 'n';
	args[6] = queue_text_array(ngroups, groups, NULL);
	args[7] = PointerGetDatum(construct_array(quotas, ngroups, INT4OID, 4, true, TYPALIGN_INT));
	args[8] = BoolGetDatum(with_null);
	args[9] = Int32GetDatum(null_quota);
	args[10] = Int32GetDatum(q->max_receive_count);
	args[11] = queue_int8_array(ndelivered, delivered);
	args[12] = Int32GetDatum(count_bound);
	args[13] = TimestampTzGetDatum(null_bound);
	args[14] = BoolGetDatum(null_spare);
	for (int i = 6; i < QUEUE_FAIR_ARGS; i++)
		nulls[i] = ' ';
	return true;
}

/* One tenant of group_stats. */
typedef struct TenantRow
{
	Datum		group;			/* text, or 0 for the messages without one */
	bool		isnull;
	int64		visible;
	int64		in_flight;
	int64		delayed;
	TimestampTz oldest;
	bool		oldest_null;
} TenantRow;

/* Busiest first: most in flight, then most visible, then by group id. */
static int
tenant_busier(const void *a, const void *b)
{
	const TenantRow *x = a;
	const TenantRow *y = b;

	if (x->in_flight != y->in_flight)
		return x->in_flight > y->in_flight ? -1 : 1;
	if (x->visible != y->visible)
		return x->visible > y->visible ? -1 : 1;
	if (x->isnull != y->isnull)
		return x->isnull ? 1 : -1;
	return x->isnull ? 0 : queue_text_cmp(&x->group, &y->group);
}

/*
 * The tenants of a queue the caller may see (any privilege: 42501
 * otherwise), busiest first; *n of them.  Runs as the tables' owner.
 */
static TenantRow *
read_tenants(text *name, int *n, MemoryContext outcxt)
{
	QueueCall	call;
	QueueMeta  *q;
	Datum		args[3];
	int			rc;
	bool		may = false;
	TimestampTz now = GetCurrentTimestamp();
	TenantRow  *rows;

	QueueReadLocks locks;

	queue_enter(&call);
	SPI_connect();
	q = queue_lookup(name);
	for (int p = 0; p < QPRIV_NUM && !may; p++)
		may = queue_meta_role_holds(q, call.caller, (QueuePriv) p);
	if (!may)
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("permission denied for queue \"%s\"", q->name),
				 errdetail("This needs a privilege on the queue.")));
	/* as queue._depth_checked: queue.stats reads every queue in one statement */
	if (q->shared)
		memset(&locks, 0, sizeof(locks));
	else
		queue_note_read_locks(&locks, q->relid);
	args[0] = TimestampTzGetDatum(now);
	args[1] = Int32GetDatum(MAX_TENANTS_EXAMINED);
	args[2] = TimestampTzGetDatum(now - q->retention);
	rc = queue_exec(q, q->fifo ? QP_GROUP_STATS_FIFO :
					queue_has_priorities(q) ? QP_GROUP_STATS_PRIO : QP_GROUP_STATS,
					args, NULL, true, 0);
	if (rc != SPI_OK_SELECT)
		elog(ERROR, "queue group stats failed: %s", SPI_result_code_string(rc));
	*n = (int) SPI_processed;
	rows = MemoryContextAlloc(outcxt, Max(*n, 1) * sizeof(TenantRow));
	for (int r = 0; r < *n; r++)
	{
		HeapTuple	tup = SPI_tuptable->vals[r];
		TupleDesc	desc = SPI_tuptable->tupdesc;
		bool		isnull;
		Datum		g = SPI_getbinval(tup, desc, 1, &rows[r].isnull);

		rows[r].group = rows[r].isnull ? (Datum) 0 :
			PointerGetDatum(MemoryContextAlloc(outcxt, VARSIZE_ANY(DatumGetPointer(g))));
		if (!rows[r].isnull)
			memcpy(DatumGetPointer(rows[r].group), DatumGetPointer(g),
				   VARSIZE_ANY(DatumGetPointer(g)));
		rows[r].visible = DatumGetInt64(SPI_getbinval(tup, desc, 2, &isnull));
		rows[r].in_flight = DatumGetInt64(SPI_getbinval(tup, desc, 3, &isnull));
		rows[r].delayed = DatumGetInt64(SPI_getbinval(tup, desc, 4, &isnull));
		rows[r].oldest = DatumGetTimestampTz(SPI_getbinval(tup, desc, 5, &rows[r].oldest_null));
	}
	SPI_finish();
	queue_leave(&call);
	queue_release_read_locks(&locks);
	qsort(rows, *n, sizeof(TenantRow), tenant_busier);
	return rows;
}

/* queue.group_stats(queue_name, max_groups) */
Datum
queue_group_stats(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	int32		max_groups;
	TenantRow  *rows;
	int			n;

	queue_arg_notnull(fcinfo, 0, "queue_name");
	max_groups = queue_arg_int(fcinfo, 1, "max_groups", 1, MAX_TENANTS_EXAMINED, -1);
	InitMaterializedSRF(fcinfo, MAT_SRF_USE_EXPECTED_DESC);
	rows = read_tenants(PG_GETARG_TEXT_PP(0), &n, CurrentMemoryContext);
	for (int r = 0; r < n && r < max_groups; r++)
	{
		Datum		values[5];
		bool		nulls[5] = {rows[r].isnull, false, false, false, rows[r].oldest_null};

		values[0] = rows[r].group;
		values[1] = Int64GetDatum(rows[r].visible);
		values[2] = Int64GetDatum(rows[r].in_flight);
		values[3] = Int64GetDatum(rows[r].delayed);
		values[4] = TimestampTzGetDatum(rows[r].oldest);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	return (Datum) 0;
}

/*
 * queue._group_counts(queue_name): queue.stats's groups (tenants with
 * messages) and noisy_groups (SQS's: holding more than 10% of the queue's
 * messages in flight, and at least 30).
 */
Datum
queue_group_counts_sql(PG_FUNCTION_ARGS)
{
	TupleDesc	desc;
	TenantRow  *rows;
	int			n;
	int64		in_flight = 0;
	int64		noisy = 0;
	Datum		values[2];
	bool		nulls[2] = {false, false};

	if (get_call_result_type(fcinfo, NULL, &desc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "return type must be a row type");
	queue_arg_notnull(fcinfo, 0, "queue_name");
	rows = read_tenants(PG_GETARG_TEXT_PP(0), &n, CurrentMemoryContext);
	for (int r = 0; r < n; r++)
		in_flight += rows[r].in_flight;
	for (int r = 0; r < n; r++)
		if (rows[r].in_flight >= 30 && rows[r].in_flight * 10 > in_flight)
			noisy++;
	values[0] = Int64GetDatum(n);
	values[1] = Int64GetDatum(noisy);
	PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(desc, values, nulls)));
}
