/*-------------------------------------------------------------------------
 *
 * groups.c
 *	  FIFO message groups: the locks that order senders, and the group
 *	  scheduling rows that receivers read, with the group bookkeeping of
 *	  sends, deletes and visibility changes.
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
 * Around each FIFO send and delete the group work is mostly reading a few
 * index entries: which of a send's groups have no row yet, which groups a
 * delete's messages are in, a group's first message and the end of its
 * leases after a change.  A statement that reads two index entries costs
 * several times the reading itself (starting and ending a plan of
 * subqueries), so those reads are index scans here, with a snapshot taken
 * after the locks that make it sufficient (above), and a delete locks its
 * groups' rows with table_tuple_lock as FOR UPDATE would.  Every write is a
 * plain statement of plans.c (a group row by key).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/hash.h"
#include "access/stratnum.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "catalog/pg_collation.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "executor/tuptable.h"
#include "miscadmin.h"
#include "storage/lock.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"

#include "common/queue_common.h"
#include "storage/queue_storage.h"
#include "fifo/queue_fifo.h"

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
	/* a head may now be below the heads' bound (counts.c) */
	queue_note_ready(q->id, DT_NOBEGIN, QUEUE_READY_NONE);
}

/*
 * The relations the reads below use: catalog.c looks them up with the
 * rest of a FIFO queue's cache entry (the queue's own, dedicated, or the
 * shared FIFO tables, their columns checked there).
 */
static void
fifo_relations(QueueMeta *q)
{
	if (!OidIsValid(q->group_relid))
		elog(ERROR, "the group tables of FIFO queue \"%s\" do not exist", q->name);
}

/* Where a group stands, read from its messages. */
typedef struct GroupHead
{
	bool		empty;
	int64		head;			/* its first message */
	TimestampTz available_at;	/* when it can deliver next */
} GroupHead;

/* A table and one of its indexes, opened for the reads below. */
typedef struct IndexedRel
{
	Relation	rel;
	Relation	index;
	TupleTableSlot *slot;		/* where a scan's rows land */
} IndexedRel;

static void
open_indexed(IndexedRel *r, Oid relid, Oid indexid, LOCKMODE mode)
{
	r->rel = table_open(relid, mode);
	r->index = index_open(indexid, AccessShareLock);
	r->slot = table_slot_create(r->rel, NULL);
}

/* The locks stay until the transaction ends, as a statement's would. */
static void
close_indexed(IndexedRel *r)
{
	ExecDropSingleTupleTableSlot(r->slot);
	index_close(r->index, NoLock);
	table_close(r->rel, NoLock);
}

/*
 * An index scan of r by its first key column equal to key: a group id
 * (byte order, as the columns' COLLATE "C") or a message id; in the
 * shared tables, after the queue's store id (the index's first column).
 */
static IndexScanDesc
scan_by_key(QueueMeta *q, IndexedRel *r, Snapshot snap, Datum key, bool is_group)
{
	ScanKeyData k[2];
	int			att = 1;
	IndexScanDesc scan;

	if (q->shared)
		ScanKeyInit(&k[att++ - 1], 1, BTEqualStrategyNumber, F_INT8EQ,
					Int64GetDatum(q->store_id));
	if (is_group)
		ScanKeyEntryInitialize(&k[att - 1], 0, att, BTEqualStrategyNumber, InvalidOid,
							   C_COLLATION_OID, F_TEXTEQ, key);
	else
		ScanKeyInit(&k[att - 1], att, BTEqualStrategyNumber, F_INT8EQ, key);
	scan = queue_index_beginscan(r->rel, r->index, snap, att, 0);
	index_rescan(scan, k, att, NULL, 0);
	return scan;
}

/*
 * The row of r by a unique key (a group id in g's primary key, a message
 * id in the messages'), into r->slot; false if there is none.  Read from
 * the key's last index entry back: each version of a row that a held
 * snapshot keeps has an entry of its own, in heap order, and the visible
 * one is nearly always the newest, at the end (issue 38: a group row is
 * written at every receive and delete of its messages).
 */
static bool
fetch_by_key(QueueMeta *q, IndexedRel *r, Snapshot snap, Datum key, bool is_group)
{
	IndexScanDesc scan = scan_by_key(q, r, snap, key, is_group);
	bool		found = index_getnext_slot(scan, BackwardScanDirection, r->slot);

	index_endscan(scan);
	return found;
}

/*
 * The state of each group, read from the messages with a snapshot taken
 * now (so after the caller's locks; it shows this transaction's own
 * changes too).  The head is the first message left; the group can
 * deliver next when its head turns visible, or when the leases it has in
 * flight end.  In-flight messages are those of the group's last receive
 * (a group in flight gives nothing to others), so they lie between the
 * head and the last id that receive leased (leased_upto, on the group's
 * row): only that stretch is read, however long the group.  Read by
 * direct index scans: a statement costs far more than the few index
 * entries it reads here.
 */
static void
read_group_states(QueueMeta *q, int ngroups, Datum *groups, GroupHead *st)
{
	IndexedRel	msgs;
	IndexedRel	grps;
	Snapshot	snap = RegisterSnapshot(GetLatestSnapshot());
	TimestampTz now = GetCurrentTimestamp();

	open_indexed(&msgs, q->relid, q->msg_group_idx, AccessShareLock);
	open_indexed(&grps, q->group_relid, q->group_pkey, AccessShareLock);
	for (int i = 0; i < ngroups; i++)
	{
		IndexScanDesc scan;
		int64		leased_upto = 0;
		TimestampTz lease = DT_NOBEGIN;
		bool		isnull;

		if (fetch_by_key(q, &grps, snap, groups[i], true))
		{
			Datum		d = slot_getattr(grps.slot, GCOL_LEASED_UPTO, &isnull);

			if (!isnull)
				leased_upto = DatumGetInt64(d);
		}

		st[i].empty = true;
		scan = scan_by_key(q, &msgs, snap, groups[i], true);
		while (index_getnext_slot(scan, ForwardScanDirection, msgs.slot))
		{
			int64		id = DatumGetInt64(slot_getattr(msgs.slot, QCOL_MESSAGE_ID, &isnull));
			TimestampTz vis = DatumGetTimestampTz(slot_getattr(msgs.slot, QCOL_VISIBLE_AT, &isnull));

			if (st[i].empty)
			{
				st[i].empty = false;
				st[i].head = id;
				st[i].available_at = vis;
			}
			if (id > leased_upto)
				break;
			if (DatumGetInt32(slot_getattr(msgs.slot, QCOL_RECEIVE_COUNT, &isnull)) > 0 &&
				vis > now && vis > lease)
				lease = vis;
		}
		index_endscan(scan);
		if (!st[i].empty && lease > st[i].available_at)
			st[i].available_at = lease;
	}
	close_indexed(&grps);
	close_indexed(&msgs);
	UnregisterSnapshot(snap);
}

/*
 * Run a statement over rows (group id, head, available_at): the form of
 * one row (scalars) when there is one, else the one of arrays.
 */
static void
group_rows_statement(QueueMeta *q, QueuePlanKind one, QueuePlanKind many, int rc_ok,
					 int n, Datum *groups, int64 *heads, Datum *avail)
{
	Datum		args[3];
	int			rc;

	if (n == 0)
		return;
	if (n == 1)
	{
		args[0] = groups[0];
		args[1] = Int64GetDatum(heads[0]);
		args[2] = avail[0];
	}
	else
	{
		args[0] = queue_text_array(n, groups, NULL);
		args[1] = queue_int8_array(n, heads);
		args[2] = PointerGetDatum(construct_array(avail, n, TIMESTAMPTZOID, 8,
												  FLOAT8PASSBYVAL, TYPALIGN_DOUBLE));
	}
	rc = queue_exec(q, n == 1 ? one : many, args, NULL, false, 0);
	if (rc != rc_ok)
		elog(ERROR, "writing message groups failed: %s", SPI_result_code_string(rc));
}

/* Write what read_group_states found: new heads, and rows that go. */
static void
write_group_states(QueueMeta *q, int ngroups, Datum *groups, GroupHead *st)
{
	Datum	   *set_groups = palloc(ngroups * sizeof(Datum));
	int64	   *heads = palloc(ngroups * sizeof(int64));
	Datum	   *avail = palloc(ngroups * sizeof(Datum));
	Datum	   *drop = palloc(ngroups * sizeof(Datum));
	int			nset = 0;
	int			ndrop = 0;

	for (int i = 0; i < ngroups; i++)
	{
		if (st[i].empty)
			drop[ndrop++] = groups[i];
		else
		{
			set_groups[nset] = groups[i];
			heads[nset] = st[i].head;
			avail[nset] = TimestampTzGetDatum(st[i].available_at);
			nset++;
		}
	}
	group_rows_statement(q, QP_GROUP_SET_ONE, QP_GROUP_SET, SPI_OK_UPDATE,
						 nset, set_groups, heads, avail);
	if (ndrop > 0)
	{
		Datum		arg = queue_text_array(ndrop, drop, NULL);
		int			rc = queue_exec(q, QP_GROUP_DROP, &arg, NULL, false, 0);

		if (rc != SPI_OK_DELETE)
			elog(ERROR, "dropping message groups failed: %s", SPI_result_code_string(rc));
	}
}

/*
 * Lock the scheduling rows of groups (sorted, unique) FOR UPDATE, in
 * group-id byte order, waiting for whoever holds one: as a LockRows node
 * would, READ COMMITTED locking the row's latest version, REPEATABLE READ
 * failing if it changed since the transaction's snapshot.  A row gone
 * (its group emptied meanwhile) is passed over.
 */
static void
lock_group_rows(QueueMeta *q, int ngroups, Datum *groups)
{
	IndexedRel	grps;
	bool		xact_snapshot = IsolationUsesXactSnapshot();

	open_indexed(&grps, q->group_relid, q->group_pkey, RowShareLock);
	for (int i = 0; i < ngroups; i++)
	{
		Snapshot	snap = RegisterSnapshot(xact_snapshot ? GetTransactionSnapshot() :
											GetLatestSnapshot());
		TM_FailureData tmfd;
		TM_Result	res = TM_Deleted;

		if (fetch_by_key(q, &grps, snap, groups[i], true))
		{
			ItemPointerData tid = grps.slot->tts_tid;

			res = table_tuple_lock(grps.rel, &tid, snap, grps.slot,
								   GetCurrentCommandId(true),
								   LockTupleExclusive, LockWaitBlock,
								   xact_snapshot ? 0 : TUPLE_LOCK_FLAG_FIND_LAST_VERSION,
								   &tmfd);
		}
		UnregisterSnapshot(snap);
		if (res == TM_Ok || (res == TM_Deleted && !xact_snapshot))
			continue;
		if (res == TM_Updated || res == TM_Deleted)
			ereport(ERROR,
					(errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
					 errmsg("could not serialize access due to concurrent update")));
		elog(ERROR, "unexpected result %d locking a message group", (int) res);
	}
	close_indexed(&grps);
}

/*
 * Before a delete or visibility change of messages by id: lock the rows
 * of their groups (those of the messages still there), as the top of
 * this file says they must be.  By direct index scans and row locks, not by a
 * statement: this runs before every FIFO delete, and a statement to find
 * a few rows costs several times what reading them does.
 */
void
queue_fifo_lock_groups_of(QueueMeta *q, int n, const int64 *ids)
{
	IndexedRel	msgs;
	Snapshot	snap;
	Datum	   *groups = palloc(Max(n, 1) * sizeof(Datum));
	int			ngroups = 0;

	fifo_relations(q);
	open_indexed(&msgs, q->relid, q->msg_pkey, AccessShareLock);
	snap = RegisterSnapshot(GetLatestSnapshot());
	for (int i = 0; i < n; i++)
	{
		bool		isnull;

		if (fetch_by_key(q, &msgs, snap, Int64GetDatum(ids[i]), false))
		{
			Datum		g = slot_getattr(msgs.slot, QCOL_GROUP, &isnull);

			if (!isnull)
				groups[ngroups++] = PointerGetDatum(PG_DETOAST_DATUM_COPY(g));
		}
	}
	UnregisterSnapshot(snap);
	close_indexed(&msgs);

	ngroups = queue_sort_unique_texts(groups, ngroups);
	lock_group_rows(q, ngroups, groups);
}

/*
 * Before a send to groups (sorted, unique): wait for their other senders
 * to finish (their senders' locks, held to commit), then tell which of the
 * groups have no row (missing[i]); returns how many.  Under those locks
 * no row can go (whoever empties a group takes those locks first) nor
 * come (whoever adds one holds them), and the snapshot, taken after them,
 * shows any row made before.  Groups with rows need nothing more from a
 * send.
 */
int
queue_fifo_begin_send(QueueMeta *q, int ngroups, Datum *groups, bool *missing)
{
	IndexedRel	grps;
	Snapshot	snap;
	int			nmissing = 0;

	queue_fifo_lock_senders(q, ngroups, groups);
	fifo_relations(q);
	open_indexed(&grps, q->group_relid, q->group_pkey, AccessShareLock);
	snap = RegisterSnapshot(GetLatestSnapshot());
	for (int i = 0; i < ngroups; i++)
	{
		missing[i] = !fetch_by_key(q, &grps, snap, groups[i], true);
		if (missing[i])
			nmissing++;
	}
	UnregisterSnapshot(snap);
	close_indexed(&grps);
	return nmissing;
}

/*
 * Where a FIFO receive's walk of the group heads starts at now: the heads
 * bound (common/counts.c), a message id below which no group row of q has
 * its head.  r is for queue_fifo_heads_raise.
 */
int64
queue_fifo_heads_from(QueueMeta *q, TimestampTz now, QueueReadyRead *r)
{
	return queue_ready_from(q->id, q->shared ? -q->store_id : (int64) q->group_relid,
							now, &q->counter_slot, r);
}

/*
 * After the receive statement (whose result, tt, stays SPI's): now and
 * then raise the heads bound to the first head there is from it, read
 * with a snapshot taken after r (so a group row it misses was made by a
 * transaction that lowers the bound when it ends; counts.c).
 */
void
queue_fifo_heads_raise(QueueMeta *q, const QueueReadyRead *r, TimestampTz now,
					   SPITupleTable *tt)
{
	Datum		arg = Int64GetDatum(r->from);
	bool		isnull;
	int			rc;

	if (!queue_ready_probe_due(r, now))
		return;
	rc = queue_exec(q, QP_GROUP_MIN_HEAD, &arg, NULL, false, 1);
	if (rc != SPI_OK_SELECT)
		elog(ERROR, "reading the first group head failed: %s", SPI_result_code_string(rc));
	if (SPI_processed == 1)
		queue_ready_raise(r, DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0],
														 SPI_tuptable->tupdesc, 1, &isnull)));
	SPI_freetuptable(SPI_tuptable);
	SPI_tuptable = tt;
}

/*
 * Give rows to groups a send found without one (queue_fifo_begin_send,
 * under the same locks): each headed by heads[i], the first message the
 * send put there, deliverable from available_at.
 */
void
queue_fifo_new_groups(QueueMeta *q, int ngroups, Datum *groups,
					  int64 *heads, TimestampTz available_at)
{
	Datum	   *avail = palloc(Max(ngroups, 1) * sizeof(Datum));

	int64		first = PG_INT64_MAX;

	for (int i = 0; i < ngroups; i++)
	{
		avail[i] = TimestampTzGetDatum(available_at);
		first = Min(first, heads[i]);
	}
	group_rows_statement(q, QP_GROUP_NEW_ONE, QP_GROUP_NEW, SPI_OK_INSERT,
						 ngroups, groups, heads, avail);
	/* heads the heads' bound may have passed, when this commits (counts.c) */
	if (ngroups > 0)
		queue_note_ready(q->id, first, QUEUE_READY_NONE);
}

/*
 * Recompute the scheduling rows of groups (sorted, unique) whose messages
 * changed; the caller holds the rows' locks.  Rows of groups left empty
 * go, under the senders' locks and seen with a snapshot taken after them
 * (see the top of this file): the locks of the groups that did empty are
 * kept until commit, the others' given back at once.
 *
 * Mostly nobody is sending to these groups right now, so the senders'
 * locks of all of them are tried first, without waiting: when every one
 * is had, one read after them is final for every group.  When one is not
 * (a sender is at work there), those had are given back at once, never
 * held while waiting for another (the locks must be waited for in hash
 * order, above), and the groups found empty are locked in that order and
 * read again.
 */
void
queue_fifo_refresh_groups(QueueMeta *q, int ngroups, Datum *groups)
{
	GroupHead *st;
	Datum	   *tried;
	bool	   *keep;
	int			nheld;

	if (ngroups == 0)
		return;
	fifo_relations(q);
	st = palloc(ngroups * sizeof(GroupHead));
	keep = palloc(ngroups * sizeof(bool));
	tried = palloc(ngroups * sizeof(Datum));
	memcpy(tried, groups, ngroups * sizeof(Datum));
	nheld = queue_fifo_try_lock_senders(q->id, ngroups, tried);
	read_group_states(q, ngroups, groups, st);
	if (nheld == ngroups)
	{
		for (int i = 0; i < ngroups; i++)
			keep[i] = st[i].empty;
		queue_fifo_unlock_senders(q->id, ngroups, groups, keep);
	}
	else
	{
		Datum	   *empty = palloc(ngroups * sizeof(Datum));
		int			nempty = 0;

		memset(keep, false, ngroups * sizeof(bool));
		queue_fifo_unlock_senders(q->id, nheld, tried, keep);
		for (int i = 0; i < ngroups; i++)
			if (st[i].empty)
				empty[nempty++] = groups[i];
		if (nempty > 0)
		{
			GroupHead  *again = palloc(nempty * sizeof(GroupHead));

			queue_fifo_lock_senders(q, nempty, empty);
			read_group_states(q, nempty, empty, again);
			for (int k = 0; k < nempty; k++)
				keep[k] = again[k].empty;
			queue_fifo_unlock_senders(q->id, nempty, empty, keep);
			for (int i = 0, k = 0; i < ngroups; i++)
				if (st[i].empty)
					st[i] = again[k++];
		}
	}
	/* Written last, once: what the reads found, under the locks kept. */
	write_group_states(q, ngroups, groups, st);
}
