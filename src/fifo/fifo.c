/*-------------------------------------------------------------------------
 *
 * fifo.c
 *	  FIFO message groups: the locks that order senders, and the group
 *	  scheduling rows that receivers read.
 *
 * Each non-empty group of a FIFO queue has a row in g<id> holding the
 * sequence number of its head message and the time it can next deliver.
 *
 * Senders of one group are serialised by a transaction-level lock on the
 * group (an advisory lock keyed by database, queue and a hash of the group
 * id), held until they commit: so their sequence numbers are drawn in
 * commit order.  A sender does not touch the group's row unless the group
 * has none yet (it inserts one), so receivers and deleters never wait for
 * a sender, however long its transaction.
 *
 * Receivers and deleters work under the group row's lock: a receive takes
 * it FOR UPDATE SKIP LOCKED (a group someone is working on is skipped,
 * never waited for); a delete or visibility change takes it, changes the
 * messages, then recomputes the row.  Row locks are taken in group-id
 * byte order, the senders' locks in hash order, so neither kind deadlocks.
 *
 * The one place both meet is a group becoming empty: its row must go, but
 * a sender may be inserting into it right now, unseen, having found the
 * row there.  So whoever empties a group takes the senders' lock too
 * (waiting for such a sender to finish) and decides with a fresh snapshot:
 * the row goes only if nothing was committed into the group meanwhile.
 * So too, a sender holding a group's senders' lock knows the group's row
 * stays as it finds it: there, or absent until it adds it.
 *
 * This file has the senders' locks; group_rows.c the reads, row locks and
 * refreshes built on them.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/hash.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "storage/lock.h"
#include "utils/builtins.h"
#include "utils/snapmgr.h"

#include "common/queue_common.h"
#include "storage/queue_storage.h"
#include "fifo/queue_fifo.h"

/* qsort/bsearch order of text Datums: byte order, as COLLATE "C" */
int
queue_text_cmp(const void *a, const void *b)
{
	text	   *ta = DatumGetTextPP(*(const Datum *) a);
	text	   *tb = DatumGetTextPP(*(const Datum *) b);
	int			la = VARSIZE_ANY_EXHDR(ta);
	int			lb = VARSIZE_ANY_EXHDR(tb);
	int			c = memcmp(VARDATA_ANY(ta), VARDATA_ANY(tb), Min(la, lb));

	return c != 0 ? c : (la > lb) - (la < lb);
}

/* Sort texts in byte order (COLLATE "C") and drop repeats; the new count. */
int
queue_sort_unique_texts(Datum *vals, int n)
{
	int			m = 0;

	qsort(vals, n, sizeof(Datum), queue_text_cmp);
	for (int i = 0; i < n; i++)
		if (m == 0 || queue_text_cmp(&vals[m - 1], &vals[i]) != 0)
			vals[m++] = vals[i];
	return m;
}

/*
 * The senders' lock of a group.  field4 tells our locks from the advisory
 * locks of pg_advisory_lock (1 and 2); pg_locks shows them as advisory
 * locks with objsubid 7.  Two groups whose ids hash alike share a lock:
 * their senders serialise, which is harmless.
 */
#define QUEUE_GROUP_LOCKTAG 7

/* A group id's hash, the key of its locks (here and fair.c's tenant locks). */
uint32
queue_group_hash(Datum g)
{
	text	   *t = DatumGetTextPP(g);

	return DatumGetUInt32(hash_any((unsigned char *) VARDATA_ANY(t),
								   VARSIZE_ANY_EXHDR(t)));
}

typedef struct GroupKey
{
	uint32		hash;
	int			index;
} GroupKey;

static int
group_key_cmp(const void *a, const void *b)
{
	uint32		ha = ((const GroupKey *) a)->hash;
	uint32		hb = ((const GroupKey *) b)->hash;

	return (ha > hb) - (ha < hb);
}

/* The groups' lock keys in lock order (hash order): groups[keys[i].index]. */
static GroupKey *
sorted_group_keys(int ngroups, Datum *groups)
{
	GroupKey   *keys = palloc(Max(ngroups, 1) * sizeof(GroupKey));

	for (int i = 0; i < ngroups; i++)
	{
		keys[i].hash = queue_group_hash(groups[i]);
		keys[i].index = i;
	}
	qsort(keys, ngroups, sizeof(GroupKey), group_key_cmp);
	return keys;
}

static void
group_locktag(LOCKTAG *tag, int64 queue_id, uint32 hash)
{
	SET_LOCKTAG_ADVISORY(*tag, MyDatabaseId, (uint32) queue_id, hash,
						 QUEUE_GROUP_LOCKTAG);
}

/*
 * Take the senders' locks of groups, in hash order (so two batches never
 * deadlock); with wait false, only those free now.  got[i] tells whether
 * groups[i]'s lock is held.  Returns how many are.
 */
static int
sender_locks(int64 queue_id, int ngroups, Datum *groups, bool wait, bool *got)
{
	GroupKey   *keys = sorted_group_keys(ngroups, groups);
	int			nheld = 0;

	for (int i = 0; i < ngroups; i++)
	{
		LOCKTAG		tag;
		bool		held;

		if (i > 0 && keys[i].hash == keys[i - 1].hash)
			held = got[keys[i - 1].index];
		else
		{
			group_locktag(&tag, queue_id, keys[i].hash);
			held = LockAcquire(&tag, ExclusiveLock, false, !wait) != LOCKACQUIRE_NOT_AVAIL;
		}
		got[keys[i].index] = held;
		if (held)
			nheld++;
	}
	pfree(keys);
	return nheld;
}

/*
 * Give back the senders' locks taken on groups (all held), except those of
 * groups with keep[i] set (and of any group sharing such a group's lock).
 */
void
queue_fifo_unlock_senders(int64 queue_id, int ngroups, Datum *groups, const bool *keep)
{
	GroupKey   *keys = sorted_group_keys(ngroups, groups);

	for (int i = 0; i < ngroups;)
	{
		int			j = i;
		bool		kept = false;
		LOCKTAG		tag;

		for (; j < ngroups && keys[j].hash == keys[i].hash; j++)
			kept |= keep[keys[j].index];
		if (!kept)
		{
			group_locktag(&tag, queue_id, keys[i].hash);
			LockRelease(&tag, ExclusiveLock, false);
		}
		i = j;
	}
	pfree(keys);
}

/*
 * A FIFO topic's publishers of one group serialise the same way, on locks
 * of their own (field4 8), held to commit: so every subscribed queue gets
 * the group's messages in the topic's commit order.  Groups sorted, unique.
 */
#define QUEUE_TOPIC_GROUP_LOCKTAG 8

void
queue_fifo_lock_publishers(int64 topic_id, int ngroups, Datum *groups)
{
	GroupKey   *keys = sorted_group_keys(ngroups, groups);

	for (int i = 0; i < ngroups; i++)
	{
		LOCKTAG		tag;

		if (i > 0 && keys[i].hash == keys[i - 1].hash)
			continue;
		SET_LOCKTAG_ADVISORY(tag, MyDatabaseId, (uint32) topic_id, keys[i].hash,
							 QUEUE_TOPIC_GROUP_LOCKTAG);
		(void) LockAcquire(&tag, ExclusiveLock, false, false);
	}
	pfree(keys);
}

/*
 * Before sending to groups (sorted, unique): wait for their other senders
 * to finish.
 */
void
queue_fifo_lock_senders(QueueMeta *q, int ngroups, Datum *groups)
{
	bool	   *got = palloc(Max(ngroups, 1) * sizeof(bool));

	(void) sender_locks(q->id, ngroups, groups, true, got);
	pfree(got);
}

/*
 * The worker's form: lock those of the groups nobody is sending to now,
 * and keep only them in groups (order kept); returns how many.
 */
int
queue_fifo_try_lock_senders(int64 queue_id, int ngroups, Datum *groups)
{
	bool	   *got = palloc(Max(ngroups, 1) * sizeof(bool));
	int			m = 0;

	(void) sender_locks(queue_id, ngroups, groups, false, got);
	for (int i = 0; i < ngroups; i++)
		if (got[i])
			groups[m++] = groups[i];
	pfree(got);
	return m;
}

/*
 * After messages were moved into groups (a dead-letter move or a redrive,
 * under the groups' senders' locks): give the groups that had no row one,
 * and move the head of those whose head a moved message now precedes
 * (moved messages keep their ids).
 */
void
queue_fifo_add_moved_groups(QueueMeta *q, int ngroups, Datum *groups)
{
	Datum		arg;
	int			rc;

	if (ngroups == 0)
		return;
	/*
	 * The latest snapshot: a REPEATABLE READ mover's own would miss a row
	 * made since it began, and its insert would then fail to serialise.
	 */
	arg = queue_text_array(ngroups, groups, NULL);
	rc = queue_exec_snapshot(q, QP_GROUP_ADD_MOVED, &arg, NULL, GetLatestSnapshot(), false, 0);
	if (rc != SPI_OK_INSERT)
		elog(ERROR, "adding message groups failed: %s", SPI_result_code_string(rc));
}

/*
 * The group ids in column col of the last SPI result (nulls left out),
 * copied out of SPI's memory (they outlive the next statement); returns
 * how many.
 */
int
queue_spi_groups(int col, Datum **groups)
{
	int			n = 0;

	*groups = palloc(Max(SPI_processed, 1) * sizeof(Datum));
	for (uint64 r = 0; r < SPI_processed; r++)
	{
		bool		isnull;
		Datum		g = SPI_getbinval(SPI_tuptable->vals[r], SPI_tuptable->tupdesc,
									  col, &isnull);

		if (!isnull)
			(*groups)[n++] = PointerGetDatum(PG_DETOAST_DATUM_COPY(g));
	}
	return n;
}
