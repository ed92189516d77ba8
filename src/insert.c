/*-------------------------------------------------------------------------
 *
 * insert.c
 *	  Writing a send's messages into the queue's table.
 *
 * A send's rows are written as COPY writes them: built here as tuples, put
 * in with table_multi_insert (one WAL record per heap page, not per row),
 * then entered in the table's indexes.  A statement would cost an executor
 * start-up per call and, for a batch, a text[] built only to be unnested
 * again; for 100 messages the multi-insert also writes a few heap records
 * instead of 100.
 *
 * What the executor would check, this file must guarantee itself: every
 * column of the table is known here by name (a column added by a later
 * upgrade that this file does not fill is an error, never a silent null in
 * a NOT NULL column), the queue tables have no triggers, CHECK constraints
 * or rules (queue--1.0.sql and the upgrades create none), and uniqueness is
 * checked by the indexes as always.  The caller holds the queue's cache
 * entry (catalog.c) and runs as the tables' owner (acl.c).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/tableam.h"
#include "access/table.h"
#include "access/xact.h"
#include "commands/sequence.h"
#include "executor/executor.h"
#include "nodes/execnodes.h"
#include "storage/lmgr.h"
#include "utils/rel.h"

#include "queue.h"

/* The columns a send fills, by name (queue--1.0.sql and later). */
typedef enum MsgColumn
{
	MC_MESSAGE_ID,
	MC_VISIBLE_AT,
	MC_SENT_AT,
	MC_SEQUENCE_NUMBER,
	MC_RECEIVE_COUNT,
	MC_GROUP,
	MC_DEDUP,
	MC_ATTRIBUTES,
	MC_BODY,
	MC_NUM
} MsgColumn;

static const char *const msg_column_names[MC_NUM] = {
	[MC_MESSAGE_ID] = "message_id",
	[MC_VISIBLE_AT] = "visible_at",
	[MC_SENT_AT] = "sent_at",
	[MC_SEQUENCE_NUMBER] = "sequence_number",
	[MC_RECEIVE_COUNT] = "receive_count",
	[MC_GROUP] = "message_group_id",
	[MC_DEDUP] = "deduplication_id",
	[MC_ATTRIBUTES] = "attributes",
	[MC_BODY] = "body",
};

/* Columns a send leaves null: set by receives and dead-letter moves. */
static const char *const msg_null_columns[] = {
	"receipt", "first_received_at", "source_queue_id"
};

/*
 * Where each of the named columns is in rel's tuples (0-based), checked
 * against the whole descriptor: a live column that is neither named nor
 * one of those left null stops the write, as does a named one missing.
 */
static void
map_columns(Relation rel, const char *const *names, int nnames,
			const char *const *null_names, int nnull, int *pos)
{
	TupleDesc	desc = RelationGetDescr(rel);

	for (int c = 0; c < nnames; c++)
		pos[c] = -1;
	for (int i = 0; i < desc->natts; i++)
	{
		Form_pg_attribute att = TupleDescAttr(desc, i);
		const char *name = NameStr(att->attname);
		bool		known = false;

		if (att->attisdropped)
			continue;
		for (int c = 0; c < nnames && !known; c++)
			if (strcmp(name, names[c]) == 0)
			{
				pos[c] = i;
				known = true;
			}
		for (int k = 0; k < nnull && !known; k++)
			known = strcmp(name, null_names[k]) == 0;
		if (!known)
			elog(ERROR, "column \"%s\" of %s is not one a send knows",
				 name, RelationGetRelationName(rel));
	}
	for (int c = 0; c < nnames; c++)
		if (pos[c] < 0)
			elog(ERROR, "relation %s has no column \"%s\"",
				 RelationGetRelationName(rel), names[c]);
}

/* queue_data.message_id_seq, looked up once per call (it may be dropped). */
Oid
queue_message_id_seq(void)
{
	Oid			seq = queue_data_relid("message_id_seq");

	if (!OidIsValid(seq))
		elog(ERROR, "relation queue_data.message_id_seq does not exist");
	return seq;
}

/* A table opened for writing rows and their index entries. */
typedef struct WriteTarget
{
	Relation	rel;
	EState	   *estate;
	ResultRelInfo *rri;
} WriteTarget;

/*
 * Open relid for writing, its columns named in names[] mapped to pos[]
 * (see map_columns), its indexes opened (with what speculative insertion
 * needs when speculative).
 */
static void
open_target(WriteTarget *t, Oid relid, const char *const *names, int nnames,
			const char *const *null_names, int nnull, int *pos, bool speculative)
{
	t->rel = table_open(relid, RowExclusiveLock);
	map_columns(t->rel, names, nnames, null_names, nnull, pos);
	t->estate = CreateExecutorState();
	t->rri = makeNode(ResultRelInfo);
	InitResultRelInfo(t->rri, t->rel, 1, NULL, 0);
	ExecOpenIndices(t->rri, speculative);
}

/*
 * As a statement ends: its rows are seen by the statements after it; the
 * table's lock stays until the transaction ends.
 */
static void
close_target(WriteTarget *t)
{
	CommandCounterIncrement();
	ExecCloseIndices(t->rri);
	FreeExecutorState(t->estate);
	table_close(t->rel, NoLock);
}

/*
 * Write b's entries but those with skip[i] (duplicates) into q's table,
 * all visible at visible_at and sent at sent_at.  ids[i] is an entry's
 * message id when a deduplication claim drew it, 0 for one to draw here
 * from the sequence (in entry order, so ids follow call order); on return
 * ids[] holds the id of every entry written.  FIFO messages take their id
 * as sequence number.
 */
void
queue_insert_messages(QueueMeta *q, const SendBatch *b, const bool *skip,
					  int64 *ids, TimestampTz visible_at, TimestampTz sent_at)
{
	WriteTarget t;
	TupleTableSlot **slots;
	int			pos[MC_NUM];
	Oid			seq = InvalidOid;
	int			n = 0;

	for (int i = 0; i < b->n; i++)
		if (!skip[i])
			n++;
	if (n == 0)
		return;
	open_target(&t, q->relid, msg_column_names, MC_NUM, msg_null_columns,
				lengthof(msg_null_columns), pos, false);

	slots = palloc(n * sizeof(TupleTableSlot *));
	n = 0;
	for (int i = 0; i < b->n; i++)
	{
		TupleTableSlot *slot;
		Datum	   *v;
		bool	   *isnull;

		if (skip[i])
			continue;
		slot = table_slot_create(t.rel, NULL);
		v = slot->tts_values;
		isnull = slot->tts_isnull;
		if (ids[i] == 0)
		{
			if (!OidIsValid(seq))
				seq = queue_message_id_seq();
			ids[i] = nextval_internal(seq, false);
		}
		ExecClearTuple(slot);
		memset(isnull, true, slot->tts_tupleDescriptor->natts * sizeof(bool));
		v[pos[MC_MESSAGE_ID]] = Int64GetDatum(ids[i]);
		v[pos[MC_VISIBLE_AT]] = TimestampTzGetDatum(visible_at);
		v[pos[MC_SENT_AT]] = TimestampTzGetDatum(sent_at);
		v[pos[MC_RECEIVE_COUNT]] = Int32GetDatum(0);
		v[pos[MC_BODY]] = b->bodies[i];
		isnull[pos[MC_MESSAGE_ID]] = false;
		isnull[pos[MC_VISIBLE_AT]] = false;
		isnull[pos[MC_SENT_AT]] = false;
		isnull[pos[MC_RECEIVE_COUNT]] = false;
		isnull[pos[MC_BODY]] = false;
		if (q->fifo)
		{
			v[pos[MC_SEQUENCE_NUMBER]] = Int64GetDatum(ids[i]);
			isnull[pos[MC_SEQUENCE_NUMBER]] = false;
		}
		if (!b->group_nulls[i])
		{
			v[pos[MC_GROUP]] = b->groups[i];
			isnull[pos[MC_GROUP]] = false;
		}
		if (!b->dedup_nulls[i])
		{
			v[pos[MC_DEDUP]] = b->dedups[i];
			isnull[pos[MC_DEDUP]] = false;
		}
		if (!b->attr_nulls[i])
		{
			v[pos[MC_ATTRIBUTES]] = b->attrs[i];
			isnull[pos[MC_ATTRIBUTES]] = false;
		}
		ExecStoreVirtualTuple(slot);
		slots[n++] = slot;
	}

	table_multi_insert(t.rel, slots, n, GetCurrentCommandId(true), 0, NULL);
	for (int i = 0; i < n; i++)
	{
		List	   *conflicts = queue_insert_index_tuples(t.rri, slots[i], t.estate);

		Assert(conflicts == NIL);
		list_free(conflicts);
		ExecDropSingleTupleTableSlot(slots[i]);
	}
	close_target(&t);
	pfree(slots);
}

/* The columns of d<id>, the deduplication ids (queue--1.0.sql). */
typedef enum DedupColumn
{
	DC_SCOPE_KEY,
	DC_DEDUP_ID,
	DC_MESSAGE_ID,
	DC_ACCEPTED_AT,
	DC_NUM
} DedupColumn;

static const char *const dedup_column_names[DC_NUM] = {
	[DC_SCOPE_KEY] = "scope_key",
	[DC_DEDUP_ID] = "deduplication_id",
	[DC_MESSAGE_ID] = "message_id",
	[DC_ACCEPTED_AT] = "accepted_at",
};

/*
 * Claim the deduplication ids (scope_keys[i], dedup_ids[i]) that nobody
 * holds, each for message id ids[i]: a row of d<id> each, put in the way
 * INSERT ... ON CONFLICT puts one (speculative insertion: see that the key
 * is free, insert, see again, and take the row back if another sender got
 * there meanwhile).  A key that is held, or was taken meanwhile, is left
 * to dedup.c's statement, which waits for that sender and tells a
 * duplicate from an expired claim.  claimed[i] says which were claimed
 * here.
 */
void
queue_insert_new_dedup_ids(QueueMeta *q, int n, const Datum *scope_keys,
						   const Datum *dedup_ids, const int64 *ids,
						   TimestampTz now, bool *claimed)
{
	WriteTarget t;
	TupleTableSlot *slot;
	List	   *arbiters = NIL;
	int			pos[DC_NUM];
	TransactionId xid;
	CommandId	cid;

	open_target(&t, queue_table_relid(q->id, 'd'), dedup_column_names, DC_NUM,
				NULL, 0, pos, true);
	for (int i = 0; i < t.rri->ri_NumIndices; i++)
		if (t.rri->ri_IndexRelationDescs[i]->rd_index->indisunique)
			arbiters = lappend_oid(arbiters, RelationGetRelid(t.rri->ri_IndexRelationDescs[i]));
	if (list_length(arbiters) != 1)
		elog(ERROR, "relation %s must have one unique index", RelationGetRelationName(t.rel));

	/* A speculative insertion is known to others by its transaction id. */
	xid = GetCurrentTransactionId();
	cid = GetCurrentCommandId(true);
	slot = table_slot_create(t.rel, NULL);
	for (int i = 0; i < n; i++)
	{
		ItemPointerData conflict;
		uint32		token;
		bool		spec_conflict = false;
		List	   *recheck;

		claimed[i] = false;
		ExecClearTuple(slot);
		/* null first: a dropped column, if any, stays null */
		memset(slot->tts_isnull, true, slot->tts_tupleDescriptor->natts * sizeof(bool));
		slot->tts_values[pos[DC_SCOPE_KEY]] = scope_keys[i];
		slot->tts_values[pos[DC_DEDUP_ID]] = dedup_ids[i];
		slot->tts_values[pos[DC_MESSAGE_ID]] = Int64GetDatum(ids[i]);
		slot->tts_values[pos[DC_ACCEPTED_AT]] = TimestampTzGetDatum(now);
		for (int c = 0; c < DC_NUM; c++)
			slot->tts_isnull[pos[c]] = false;
		ExecStoreVirtualTuple(slot);

		/* Held (or being taken, which this waits for): dedup.c's. */
		if (!queue_check_index_constraints(t.rri, slot, t.estate, &conflict, arbiters))
			continue;

		token = SpeculativeInsertionLockAcquire(xid);
		table_tuple_insert_speculative(t.rel, slot, cid, 0, NULL, token);
		recheck = queue_insert_index_tuples_speculative(t.rri, slot, t.estate,
														&spec_conflict, arbiters);
		table_tuple_complete_speculative(t.rel, slot, token, !spec_conflict);
		SpeculativeInsertionLockRelease(xid);
		list_free(recheck);
		claimed[i] = !spec_conflict;
	}
	ExecDropSingleTupleTableSlot(slot);
	close_target(&t);
}
