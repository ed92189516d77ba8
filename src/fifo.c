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
#include "catalog/namespace.h"
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

#include "queue.h"

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

static uint32
group_hash(Datum g)
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
		keys[i].hash = group_hash(groups[i]);
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
 * Give back the senders' locks sender_locks took on groups (all held),
 * except those of groups with keep[i] set (and of any group sharing such a
 * group's lock).
 */
static void
release_sender_locks(int64 queue_id, int ngroups, Datum *groups, const bool *keep)
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
	rc = SPI_execute_snapshot(queue_plan(q, QP_GROUP_ADD_MOVED),
							  &arg, NULL, GetLatestSnapshot(), InvalidSnapshot,
							  false, false, 0);
	if (rc != SPI_OK_INSERT)
		elog(ERROR, "adding message groups failed: %s", SPI_result_code_string(rc));
}

/*
 * A relation of queue_data by name, for the direct reads below.
 */
static Oid
data_relid(const char *name)
{
	Oid			relid = get_relname_relid(name, get_namespace_oid("queue_data", false));

	if (!OidIsValid(relid))
		elog(ERROR, "relation queue_data.%s does not exist", name);
	return relid;
}

static void
fifo_relations(QueueMeta *q)
{
	if (OidIsValid(q->group_relid))
		return;
	q->msg_pkey = data_relid(psprintf("q" INT64_FORMAT "_pkey", q->id));
	q->msg_group_idx = data_relid(psprintf("q" INT64_FORMAT "_group", q->id));
	q->group_pkey = data_relid(psprintf("g" INT64_FORMAT "_pkey", q->id));
	q->group_relid = data_relid(psprintf("g" INT64_FORMAT, q->id));
}

/* Columns of q<id> and g<id> (queue--1.0.sql), 1-based. */
#define QCOL_MESSAGE_ID		1
#define QCOL_VISIBLE_AT		2
#define QCOL_RECEIVE_COUNT	7
#define QCOL_GROUP			8
#define GCOL_LEASED_UPTO	4

/* Where a group stands, read from its messages. */
typedef struct GroupHead
{
	bool		empty;
	int64		head;			/* its first message */
	TimestampTz available_at;	/* when it can deliver next */
} GroupHead;

/* An index scan of rel by its first key column equal to a group id. */
static IndexScanDesc
group_scan(Relation rel, Relation index, Snapshot snap, Datum gid)
{
	ScanKeyData key;
	IndexScanDesc scan;

	ScanKeyEntryInitialize(&key, 0, 1, BTEqualStrategyNumber, InvalidOid,
						   C_COLLATION_OID, F_TEXTEQ, gid);
	scan = index_beginscan(rel, index, snap, 1, 0);
	index_rescan(scan, &key, 1, NULL, 0);
	return scan;
}

/*
 * The state of each group, read from the messages with a snapshot taken
 * now (so after the caller's locks; it shows this transaction's own
 * changes too).  The head is the first message left; the group can
 * deliver next when its head turns visible, or when the leases it has in
 * flight end.  In-flight messages are those of the group's last receive
 * (a group in flight gives nothing to others), so they lie between the
 * head and the last id that receive leased (leased_upto, on the group's
 * row): only that stretch is read, however long the group.  This is the
 * work of QP_GROUP_SETTLE's rc, done by direct index scans: a statement
 * costs far more than the few index entries it reads here.
 */
static void
read_group_states(QueueMeta *q, int ngroups, Datum *groups, GroupHead *st)
{
	Relation	msgs = table_open(q->relid, AccessShareLock);
	Relation	msg_idx = index_open(q->msg_group_idx, AccessShareLock);
	Relation	grel = table_open(q->group_relid, AccessShareLock);
	Relation	gidx = index_open(q->group_pkey, AccessShareLock);
	TupleTableSlot *mslot = table_slot_create(msgs, NULL);
	TupleTableSlot *gslot = table_slot_create(grel, NULL);
	Snapshot	snap = RegisterSnapshot(GetLatestSnapshot());
	TimestampTz now = GetCurrentTimestamp();

	for (int i = 0; i < ngroups; i++)
	{
		IndexScanDesc scan;
		int64		leased_upto = 0;
		TimestampTz lease = DT_NOBEGIN;
		bool		isnull;

		scan = group_scan(grel, gidx, snap, groups[i]);
		if (index_getnext_slot(scan, ForwardScanDirection, gslot))
		{
			Datum		d = slot_getattr(gslot, GCOL_LEASED_UPTO, &isnull);

			if (!isnull)
				leased_upto = DatumGetInt64(d);
		}
		index_endscan(scan);

		st[i].empty = true;
		scan = group_scan(msgs, msg_idx, snap, groups[i]);
		while (index_getnext_slot(scan, ForwardScanDirection, mslot))
		{
			int64		id = DatumGetInt64(slot_getattr(mslot, QCOL_MESSAGE_ID, &isnull));
			TimestampTz vis = DatumGetTimestampTz(slot_getattr(mslot, QCOL_VISIBLE_AT, &isnull));

			if (st[i].empty)
			{
				st[i].empty = false;
				st[i].head = id;
				st[i].available_at = vis;
			}
			if (id > leased_upto)
				break;
			if (DatumGetInt32(slot_getattr(mslot, QCOL_RECEIVE_COUNT, &isnull)) > 0 &&
				vis > now && vis > lease)
				lease = vis;
		}
		index_endscan(scan);
		if (!st[i].empty && lease > st[i].available_at)
			st[i].available_at = lease;
	}

	UnregisterSnapshot(snap);
	ExecDropSingleTupleTableSlot(gslot);
	ExecDropSingleTupleTableSlot(mslot);
	index_close(gidx, AccessShareLock);
	table_close(grel, AccessShareLock);
	index_close(msg_idx, AccessShareLock);
	table_close(msgs, AccessShareLock);
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
	Datum		args[3];
	int			rc;

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
	if (nset == 1)
	{
		/* the usual refresh, of one group: no arrays */
		args[0] = set_groups[0];
		args[1] = Int64GetDatum(heads[0]);
		args[2] = avail[0];
		rc = SPI_execute_plan(queue_plan(q, QP_GROUP_SET_ONE), args, NULL, false, 0);
		if (rc != SPI_OK_UPDATE)
			elog(ERROR, "refreshing message groups failed: %s", SPI_result_code_string(rc));
	}
	else if (nset > 0)
	{
		args[0] = queue_text_array(nset, set_groups, NULL);
		args[1] = queue_int8_array(nset, heads);
		args[2] = PointerGetDatum(construct_array(avail, nset, TIMESTAMPTZOID, 8,
												  FLOAT8PASSBYVAL, TYPALIGN_DOUBLE));
		rc = SPI_execute_plan(queue_plan(q, QP_GROUP_SET), args, NULL, false, 0);
		if (rc != SPI_OK_UPDATE)
			elog(ERROR, "refreshing message groups failed: %s", SPI_result_code_string(rc));
	}
	if (ndrop > 0)
	{
		args[0] = queue_text_array(ndrop, drop, NULL);
		rc = SPI_execute_plan(queue_plan(q, QP_GROUP_DROP), args, NULL, false, 0);
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
	Relation	grel = table_open(q->group_relid, RowShareLock);
	Relation	gidx = index_open(q->group_pkey, AccessShareLock);
	TupleTableSlot *slot = table_slot_create(grel, NULL);
	bool		xact_snapshot = IsolationUsesXactSnapshot();

	for (int i = 0; i < ngroups; i++)
	{
		Snapshot	snap = RegisterSnapshot(xact_snapshot ? GetTransactionSnapshot() :
											GetLatestSnapshot());
		IndexScanDesc scan = group_scan(grel, gidx, snap, groups[i]);
		bool		found = index_getnext_slot(scan, ForwardScanDirection, slot);
		ItemPointerData tid = slot->tts_tid;
		TM_FailureData tmfd;
		TM_Result	res = TM_Deleted;

		index_endscan(scan);
		if (found)
			res = table_tuple_lock(grel, &tid, snap, slot, GetCurrentCommandId(true),
								   LockTupleExclusive, LockWaitBlock,
								   xact_snapshot ? 0 : TUPLE_LOCK_FLAG_FIND_LAST_VERSION,
								   &tmfd);
		UnregisterSnapshot(snap);
		if (res == TM_Ok || (res == TM_Deleted && !xact_snapshot))
			continue;
		if (res == TM_Updated || res == TM_Deleted)
			ereport(ERROR,
					(errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
					 errmsg("could not serialize access due to concurrent update")));
		elog(ERROR, "unexpected result %d locking a message group", (int) res);
	}
	ExecDropSingleTupleTableSlot(slot);
	index_close(gidx, AccessShareLock);
	table_close(grel, NoLock);
}

/*
 * Before a delete or visibility change of messages by id: lock the rows
 * of their groups (those of the messages still there), as the top of this
 * file says they must be.  By direct index scans and row locks, not by a
 * statement: this runs before every FIFO delete, and a statement to find
 * a few rows costs several times what reading them does.
 */
void
queue_fifo_lock_groups_of(QueueMeta *q, int n, const int64 *ids)
{
	Relation	msgs;
	Relation	pkey;
	TupleTableSlot *slot;
	Snapshot	snap;
	Datum	   *groups = palloc(Max(n, 1) * sizeof(Datum));
	int			ngroups = 0;

	fifo_relations(q);
	msgs = table_open(q->relid, AccessShareLock);
	pkey = index_open(q->msg_pkey, AccessShareLock);
	slot = table_slot_create(msgs, NULL);
	snap = RegisterSnapshot(GetLatestSnapshot());
	for (int i = 0; i < n; i++)
	{
		ScanKeyData key;
		IndexScanDesc scan;
		bool		isnull;

		ScanKeyInit(&key, 1, BTEqualStrategyNumber, F_INT8EQ, Int64GetDatum(ids[i]));
		scan = index_beginscan(msgs, pkey, snap, 1, 0);
		index_rescan(scan, &key, 1, NULL, 0);
		if (index_getnext_slot(scan, ForwardScanDirection, slot))
		{
			Datum		g = slot_getattr(slot, QCOL_GROUP, &isnull);

			if (!isnull)
				groups[ngroups++] = PointerGetDatum(PG_DETOAST_DATUM_COPY(g));
		}
		index_endscan(scan);
	}
	UnregisterSnapshot(snap);
	ExecDropSingleTupleTableSlot(slot);
	index_close(pkey, AccessShareLock);
	table_close(msgs, AccessShareLock);

	ngroups = queue_sort_unique_texts(groups, ngroups);
	lock_group_rows(q, ngroups, groups);
}

/*
 * Which of the groups have no row (missing[i]); returns how many.  A
 * sender asks, holding the groups' senders' locks: then no row can go
 * (whoever empties a group takes those locks first) nor come (whoever
 * adds one holds them), and the snapshot, taken after them, shows any row
 * made before.  Groups with rows need nothing more from a send.
 */
int
queue_fifo_missing_groups(QueueMeta *q, int ngroups, Datum *groups, bool *missing)
{
	Relation	grel;
	Relation	gidx;
	TupleTableSlot *slot;
	Snapshot	snap;
	int			nmissing = 0;

	fifo_relations(q);
	grel = table_open(q->group_relid, AccessShareLock);
	gidx = index_open(q->group_pkey, AccessShareLock);
	slot = table_slot_create(grel, NULL);
	snap = RegisterSnapshot(GetLatestSnapshot());
	for (int i = 0; i < ngroups; i++)
	{
		IndexScanDesc scan = group_scan(grel, gidx, snap, groups[i]);

		missing[i] = !index_getnext_slot(scan, ForwardScanDirection, slot);
		if (missing[i])
			nmissing++;
		index_endscan(scan);
	}
	UnregisterSnapshot(snap);
	ExecDropSingleTupleTableSlot(slot);
	index_close(gidx, AccessShareLock);
	table_close(grel, AccessShareLock);
	return nmissing;
}

/*
 * Give rows to groups a send found without one (queue_fifo_missing_groups,
 * under the same locks): each headed by heads[i], the first message the
 * send put there, deliverable from available_at.
 */
void
queue_fifo_new_groups(QueueMeta *q, int ngroups, Datum *groups,
					  const int64 *heads, TimestampTz available_at)
{
	Datum		args[3];
	int			rc;

	if (ngroups == 0)
		return;
	if (ngroups == 1)
	{
		args[0] = groups[0];
		args[1] = Int64GetDatum(heads[0]);
		args[2] = TimestampTzGetDatum(available_at);
		rc = SPI_execute_plan(queue_plan(q, QP_GROUP_NEW_ONE), args, NULL, false, 0);
	}
	else
	{
		Datum	   *avail = palloc(ngroups * sizeof(Datum));

		for (int i = 0; i < ngroups; i++)
			avail[i] = TimestampTzGetDatum(available_at);
		args[0] = queue_text_array(ngroups, groups, NULL);
		args[1] = queue_int8_array(ngroups, heads);
		args[2] = PointerGetDatum(construct_array(avail, ngroups, TIMESTAMPTZOID, 8,
												  FLOAT8PASSBYVAL, TYPALIGN_DOUBLE));
		rc = SPI_execute_plan(queue_plan(q, QP_GROUP_NEW), args, NULL, false, 0);
	}
	if (rc != SPI_OK_INSERT)
		elog(ERROR, "adding message groups failed: %s", SPI_result_code_string(rc));
}

/*
 * Recompute the scheduling rows of groups (sorted, unique) whose messages
 * changed; the caller holds the rows' locks.  Rows of groups left empty
 * go, under the senders' locks and seen with a snapshot taken after them
 * (see the top of this file): the locks of the groups that did empty are
 * kept until commit, the others' given back at once.
 */
void
queue_fifo_refresh_groups(QueueMeta *q, int ngroups, Datum *groups)
{
	GroupHead *st;
	Datum	   *empty;
	int			nempty = 0;

	if (ngroups == 0)
		return;
	fifo_relations(q);
	st = palloc(ngroups * sizeof(GroupHead));
	read_group_states(q, ngroups, groups, st);

	empty = palloc(ngroups * sizeof(Datum));
	for (int i = 0; i < ngroups; i++)
		if (st[i].empty)
			empty[nempty++] = groups[i];
	if (nempty > 0)
	{
		GroupHead *again = palloc(nempty * sizeof(GroupHead));
		bool	   *keep = palloc(nempty * sizeof(bool));

		queue_fifo_lock_senders(q, nempty, empty);
		read_group_states(q, nempty, empty, again);
		for (int k = 0; k < nempty; k++)
			keep[k] = again[k].empty;
		release_sender_locks(q->id, nempty, empty, keep);
		for (int i = 0, k = 0; i < ngroups; i++)
			if (st[i].empty)
				st[i] = again[k++];
	}
	write_group_states(q, ngroups, groups, st);
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
