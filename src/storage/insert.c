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
 * What the executor would do, this file must do itself or not write
 * directly at all.  Every column of the table is known here by name (a
 * column added by a later upgrade that this file does not fill is an
 * error, never a silent null in a NOT NULL column), and uniqueness and
 * exclusion are checked by the indexes as always.  The rest the executor
 * applies on INSERT is read from the open relation on every write (no
 * catalog access: the relcache holds it all): triggers (foreign keys and
 * deferred unique checks among them), CHECK constraints, rules, row level
 * security, a partition's constraint, NOT NULL on a column a send may
 * leave null, a default on a column it leaves out, identity and generated
 * columns, and a column type other than the one written here (a domain's
 * constraint, a typmod's coercion).  queue--1.0.sql and the upgrades create
 * none of these; when a superuser has added one to a queue's table, its
 * writes go through an INSERT statement instead, which does what SQL does.
 * The caller holds the queue's cache entry (catalog.c) and runs as the
 * tables' owner (acl.c), inside SPI.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/tableam.h"
#include "access/table.h"
#include "access/xact.h"
#include "catalog/pg_class.h"
#include "catalog/pg_type.h"
#include "commands/sequence.h"
#include "executor/executor.h"
#include "executor/spi.h"
#include "lib/stringinfo.h"
#include "nodes/execnodes.h"
#include "storage/lmgr.h"
#include "utils/array.h"
#include "utils/hsearch.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"

#include "common/queue_common.h"
#include "storage/queue_storage.h"

/*
 * A column a write knows: its name, the type of the datums written to it,
 * and whether a write may leave it null.
 */
typedef struct ColumnSpec
{
	const char *name;
	Oid			type;
	bool		nullable;
} ColumnSpec;

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
	MC_STORE_ID,				/* the shared table's only (DESIGN.md "Storage") */
	MC_NUM
} MsgColumn;

static const ColumnSpec msg_columns[MC_NUM] = {
	[MC_MESSAGE_ID] = {"message_id", INT8OID, false},
	[MC_VISIBLE_AT] = {"visible_at", TIMESTAMPTZOID, false},
	[MC_SENT_AT] = {"sent_at", TIMESTAMPTZOID, false},
	[MC_SEQUENCE_NUMBER] = {"sequence_number", INT8OID, true},
	[MC_RECEIVE_COUNT] = {"receive_count", INT4OID, false},
	[MC_GROUP] = {"message_group_id", TEXTOID, true},
	[MC_DEDUP] = {"deduplication_id", TEXTOID, true},
	[MC_ATTRIBUTES] = {"attributes", JSONBOID, true},
	[MC_BODY] = {"body", TEXTOID, false},
	[MC_STORE_ID] = {"store_id", INT8OID, false},
};

/*
 * Columns a send leaves out (null): set by receives and dead-letter
 * moves.  An INSERT naming the columns above gives these their defaults.
 */
static const ColumnSpec msg_null_columns[] = {
	{"receipt", INT8OID, true},
	{"first_received_at", TIMESTAMPTZOID, true},
	{"source_queue_id", INT8OID, true},
	{"priority", INT2OID, true},	/* 1.12 on; set when a send gives one */
};

/*
 * Whether the executor would store exactly what is written here in column
 * att, known as c, named by the write (listed) or left out of it: the
 * datum's own type with no typmod to apply nor domain to check, no
 * identity or generated value, no NOT NULL a null would break, and, when
 * left out, no default an INSERT would give it.
 */
static bool
column_is_direct(Form_pg_attribute att, const ColumnSpec *c, bool listed)
{
	if (att->atttypid != c->type || att->atttypmod != -1)
		return false;
	if (att->attidentity != '\0' || att->attgenerated != '\0')
		return false;
	if (c->nullable && att->attnotnull)
		return false;
	if (!listed && att->atthasdef)
		return false;
	return true;
}

/*
 * Whether an INSERT into rel would do anything on the way in besides
 * storing the row and entering it in the indexes, from what the relcache
 * holds: triggers (a foreign key's and a deferred unique check's among
 * them), CHECK constraints, rules, row level security, a partition's
 * constraint.  trigdesc and rd_rules are built from the catalogs (null
 * when there are none), unlike relhastriggers and relhasrules, which may
 * stay set after the last is dropped.
 */
static bool
relation_is_direct(Relation rel)
{
	TupleConstr *constr = RelationGetDescr(rel)->constr;

	return rel->rd_rel->relkind == RELKIND_RELATION &&
		!rel->rd_rel->relispartition &&
		!rel->rd_rel->relrowsecurity &&
		rel->trigdesc == NULL &&
		rel->rd_rules == NULL &&
		(constr == NULL || constr->num_check == 0) &&
		!queue_citus_manages(rel);	/* Citus routes a statement (citus.c) */
}

/*
 * Where each of the named columns is in rel's tuples (0-based), checked
 * against the whole descriptor: a live column that is neither named nor
 * one of those left null stops the write, as does a named one missing.
 * Returns whether rows can be written into rel directly, as an INSERT
 * naming cols would write them (relation_is_direct, column_is_direct).
 */
static bool
map_columns(Relation rel, const ColumnSpec *cols, int ncols,
			const ColumnSpec *null_cols, int nnull, int *pos)
{
	TupleDesc	desc = RelationGetDescr(rel);
	bool		direct = relation_is_direct(rel);

	for (int c = 0; c < ncols; c++)
		pos[c] = -1;
	for (int i = 0; i < desc->natts; i++)
	{
		Form_pg_attribute att = TupleDescAttr(desc, i);
		const char *name = NameStr(att->attname);
		const ColumnSpec *spec = NULL;
		bool		listed = false;

		if (att->attisdropped)
			continue;
		/* (first letters first: this runs for every column of every send) */
		for (int c = 0; c < ncols && spec == NULL; c++)
			if (name[0] == cols[c].name[0] && strcmp(name, cols[c].name) == 0)
			{
				pos[c] = i;
				spec = &cols[c];
				listed = true;
			}
		for (int k = 0; k < nnull && spec == NULL; k++)
			if (name[0] == null_cols[k].name[0] &&
				strcmp(name, null_cols[k].name) == 0)
				spec = &null_cols[k];
		if (spec == NULL)
			elog(ERROR, "column \"%s\" of %s is not one a send knows",
				 name, RelationGetRelationName(rel));
		if (direct && !column_is_direct(att, spec, listed))
			direct = false;
	}
	for (int c = 0; c < ncols; c++)
		if (pos[c] < 0)
			elog(ERROR, "relation %s has no column \"%s\"",
				 RelationGetRelationName(rel), cols[c].name);
	return direct;
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
 * Open relid for writing, its columns named in cols[] mapped to pos[]
 * (see map_columns).  When it can be written directly, its indexes are
 * opened too (with what speculative insertion needs when speculative) and
 * true returned; otherwise it is closed again (its lock kept) and the
 * caller writes through a statement.
 */
static bool
open_target(WriteTarget *t, Oid relid, const ColumnSpec *cols, int ncols,
			const ColumnSpec *null_cols, int nnull, int *pos, bool speculative)
{
	t->rel = table_open(relid, RowExclusiveLock);
	if (!map_columns(t->rel, cols, ncols, null_cols, nnull, pos))
	{
		table_close(t->rel, NoLock);
		t->rel = NULL;
		return false;
	}
	t->estate = CreateExecutorState();
	t->rri = makeNode(ResultRelInfo);
	InitResultRelInfo(t->rri, t->rel, 1, NULL, 0);
	ExecOpenIndices(t->rri, speculative);
	return true;
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
 * The write of queue_insert_messages as a statement, for a table that
 * cannot be written directly: the n entries of b not skipped, with their
 * ids, as one INSERT ... SELECT FROM unnest(...) in entry order, so the
 * executor fires the table's triggers, checks its constraints and does
 * whatever else an INSERT does there.  The statement is prepared once per
 * queue and backend (the plan cache re-plans it when the table changes);
 * this is the write of tables a superuser has changed, not the usual one,
 * so its plans are few and stay until the backend ends.
 */
typedef struct SqlSendPlan
{
	int64		queue_id;		/* hash key */
	SPIPlanPtr	plan;
} SqlSendPlan;

static HTAB *sql_send_plans = NULL;

static void
insert_messages_sql(QueueMeta *q, const SendBatch *b, const bool *skip,
					const int64 *ids, int n, TimestampTz visible_at,
					TimestampTz sent_at)
{
	/* $9 and $10: the shared table's store id, the priorities, if any */
	Oid			argtypes[10] = {TIMESTAMPTZOID, TIMESTAMPTZOID, BOOLOID,
		INT8ARRAYOID, TEXTARRAYOID, TEXTARRAYOID, JSONBARRAYOID, TEXTARRAYOID};
	int			nargs = 8;
	bool		prio = b->priorities != NULL;
	Datum	   *prios = prio ? palloc(n * sizeof(Datum)) : NULL;
	bool	   *pnulls = prio ? palloc(n * sizeof(bool)) : NULL;
	int64	   *mids = palloc(n * sizeof(int64));
	Datum	   *groups = palloc(n * sizeof(Datum));
	bool	   *gnulls = palloc(n * sizeof(bool));
	Datum	   *dedups = palloc(n * sizeof(Datum));
	bool	   *dnulls = palloc(n * sizeof(bool));
	Datum	   *attrs = palloc(n * sizeof(Datum));
	bool	   *anulls = palloc(n * sizeof(bool));
	Datum	   *bodies = palloc(n * sizeof(Datum));
	int			dims[1] = {n};
	int			lbs[1] = {1};
	Datum		args[10];
	SqlSendPlan *entry;
	bool		found;
	int			k = 0;
	int			rc;

	for (int i = 0; i < b->n; i++)
	{
		if (skip[i])
			continue;
		mids[k] = ids[i];
		groups[k] = b->groups[i];
		gnulls[k] = b->group_nulls[i];
		dedups[k] = b->dedups[i];
		dnulls[k] = b->dedup_nulls[i];
		attrs[k] = b->attrs[i];
		anulls[k] = b->attr_nulls[i];
		bodies[k] = b->bodies[i];
		if (prio)
		{
			pnulls[k] = b->priorities[i] < 0;
			prios[k] = Int16GetDatum(pnulls[k] ? 0 : b->priorities[i]);
		}
		k++;
	}
	Assert(k == n);
	args[0] = TimestampTzGetDatum(visible_at);
	args[1] = TimestampTzGetDatum(sent_at);
	args[2] = BoolGetDatum(q->fifo);
	args[3] = queue_int8_array(n, mids);
	args[4] = queue_text_array(n, groups, gnulls);
	args[5] = queue_text_array(n, dedups, dnulls);
	args[6] = PointerGetDatum(construct_md_array(attrs, anulls, 1, dims, lbs,
												 JSONBOID, -1, false,
												 TYPALIGN_INT));
	args[7] = queue_text_array(n, bodies, NULL);
	if (q->shared)
	{
		args[nargs] = Int64GetDatum(q->store_id);
		argtypes[nargs++] = INT8OID;
	}
	if (prio)
	{
		args[nargs] = PointerGetDatum(construct_md_array(prios, pnulls, 1, dims, lbs,
														 INT2OID, 2, true, TYPALIGN_SHORT));
		argtypes[nargs++] = INT2ARRAYOID;
	}

	if (sql_send_plans == NULL)
	{
		HASHCTL		ctl;

		ctl.keysize = sizeof(int64);
		ctl.entrysize = sizeof(SqlSendPlan);
		sql_send_plans = hash_create("queue sends through SQL", 16, &ctl,
									 HASH_ELEM | HASH_BLOBS);
	}
	/*
	 * (one plan for all shared queues of a kind: -1 and -2, and -3 with
	 * priorities; a dedicated queue's: its id, negated below -3 with them)
	 */
	entry = hash_search(sql_send_plans,
						q->shared ? (q->fifo ? &(int64){-2} : prio ? &(int64){-3} : &(int64){-1}) :
						prio ? &(int64){-3 - q->id} : &q->id,
						HASH_ENTER, &found);
	if (!found)
		entry->plan = NULL;
	if (entry->plan == NULL)
	{
		StringInfoData sql;

		initStringInfo(&sql);
		if (q->shared)
			appendStringInfoString(&sql, queue_shared_table('q', q->fifo));
		else
			appendStringInfo(&sql, "queue_data.q" INT64_FORMAT, q->id);
		appendStringInfo(&sql,
						 " (message_id, visible_at, sent_at, sequence_number,"
						 " receive_count, message_group_id, deduplication_id,"
						 " attributes, body%s%s)"
						 " SELECT u.id, $1, $2, CASE WHEN $3 THEN u.id END, 0,"
						 " u.g, u.d, u.a, u.b%s%s"
						 " FROM unnest($4, $5, $6, $7, $8%s)"
						 " AS u(id, g, d, a, b%s)",
						 q->shared ? ", store_id" : "", prio ? ", priority" : "",
						 q->shared ? ", $9" : "", prio ? ", u.p" : "",
						 prio ? psprintf(", $%d", nargs) : "", prio ? ", p" : "");
		entry->plan = queue_keep_plan(psprintf("INSERT INTO %s", sql.data), nargs, argtypes);
		pfree(sql.data);
	}
	rc = SPI_execute_plan(entry->plan, args, NULL, false, 0);
	if (rc < 0)
		elog(ERROR, "send through SQL into queue id " INT64_FORMAT " failed: %s",
			 q->id, SPI_result_code_string(rc));
	CommandCounterIncrement();
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
	int			ppos = -1;
	Oid			seq = InvalidOid;
	int			n = 0;
	bool		direct;

	for (int i = 0; i < b->n; i++)
		if (!skip[i])
			n++;
	if (n == 0)
		return;
	direct = open_target(&t, q->relid, msg_columns, q->shared ? MC_NUM : MC_STORE_ID,
						 msg_null_columns, lengthof(msg_null_columns), pos, false);

	/* Ids first, in entry order, whichever way the rows go in. */
	for (int i = 0; i < b->n; i++)
		if (!skip[i] && ids[i] == 0)
		{
			if (!OidIsValid(seq))
				seq = queue_message_id_seq();
			ids[i] = nextval_internal(seq, false);
		}
	if (!direct)
	{
		insert_messages_sql(q, b, skip, ids, n, visible_at, sent_at);
		return;
	}

	/* priorities (fifo/priority.c): their column, checked there to exist */
	if (b->priorities != NULL &&
		(ppos = get_attnum(RelationGetRelid(t.rel), "priority") - 1) < 0)
		elog(ERROR, "queue id " INT64_FORMAT " has no priority column", q->id);
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
		if (q->shared)
		{
			v[pos[MC_STORE_ID]] = Int64GetDatum(q->store_id);
			isnull[pos[MC_STORE_ID]] = false;
		}
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
		if (ppos >= 0 && b->priorities[i] >= 0)
		{
			v[ppos] = Int16GetDatum(b->priorities[i]);
			isnull[ppos] = false;
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
	DC_QUEUE_ID,				/* the shared table's only */
	DC_NUM
} DedupColumn;

static const ColumnSpec dedup_columns[DC_NUM] = {
	[DC_SCOPE_KEY] = {"scope_key", TEXTOID, false},
	[DC_DEDUP_ID] = {"deduplication_id", TEXTOID, false},
	[DC_MESSAGE_ID] = {"message_id", INT8OID, false},
	[DC_ACCEPTED_AT] = {"accepted_at", TIMESTAMPTZOID, false},
	[DC_QUEUE_ID] = {"queue_id", INT8OID, false},
};

/*
 * The one unique index of a d<id> opened for writing, when it is the one
 * ON CONFLICT (scope_key, deduplication_id) takes as its only arbiter: on
 * exactly those two columns (and queue_id, in the shared table), no
 * expression, no predicate, checked at once.  InvalidOid otherwise (then
 * the statement claims every id).
 */
static Oid
dedup_arbiter(const WriteTarget *t, const int *pos, bool shared)
{
	Oid			arbiter = InvalidOid;
	int			nkeys = shared ? 3 : 2;

	for (int i = 0; i < t->rri->ri_NumIndices; i++)
	{
		Relation	irel = t->rri->ri_IndexRelationDescs[i];
		IndexInfo  *ii = t->rri->ri_IndexRelationInfo[i];
		bool		seen[3] = {false, false, false};

		if (!irel->rd_index->indisunique)
			continue;
		if (OidIsValid(arbiter) || !irel->rd_index->indimmediate ||
			ii->ii_NumIndexKeyAttrs != nkeys || ii->ii_Expressions != NIL ||
			ii->ii_Predicate != NIL)
			return InvalidOid;
		for (int k = 0; k < nkeys; k++)
		{
			AttrNumber	a = ii->ii_IndexAttrNumbers[k] - 1;

			if (a == pos[DC_SCOPE_KEY])
				seen[0] = true;
			else if (a == pos[DC_DEDUP_ID])
				seen[1] = true;
			else if (shared && a == pos[DC_QUEUE_ID])
				seen[2] = true;
		}
		if (!seen[0] || !seen[1] || (shared && !seen[2]))
			return InvalidOid;
		arbiter = RelationGetRelid(irel);
	}
	return arbiter;
}

/*
 * Claim the deduplication ids (scope_keys[i], dedup_ids[i]) that nobody
 * holds, each for message id ids[i]: a row of d<id> each, put in the way
 * INSERT ... ON CONFLICT puts one (speculative insertion: see that the key
 * is free, insert, see again, and take the row back if another sender got
 * there meanwhile).  A key that is held, or was taken meanwhile, is left
 * to queue_dedup_claim's statement, which waits for that sender and tells a
 * duplicate from an expired claim.  claimed[i] says which were claimed
 * here.
 */
static void
insert_new_dedup_ids(QueueMeta *q, int n, const Datum *scope_keys,
					 const Datum *dedup_ids, const int64 *ids,
					 TimestampTz now, bool *claimed)
{
	WriteTarget t;
	TupleTableSlot *slot;
	List	   *arbiters;
	Oid			arbiter;
	int			pos[DC_NUM];
	TransactionId xid;
	CommandId	cid;

	if (n <= 0)
		return;
	/* Not to be written directly: every id is left to the statement. */
	memset(claimed, 0, n * sizeof(bool));
	if (!open_target(&t, q->dedup_relid,
					 dedup_columns, q->shared ? DC_NUM : DC_QUEUE_ID, NULL, 0, pos, true))
		return;
	arbiter = dedup_arbiter(&t, pos, q->shared);
	if (!OidIsValid(arbiter))
	{
		close_target(&t);
		return;
	}
	arbiters = list_make1_oid(arbiter);

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

		ExecClearTuple(slot);
		/* null first: a dropped column, if any, stays null */
		memset(slot->tts_isnull, true, slot->tts_tupleDescriptor->natts * sizeof(bool));
		slot->tts_values[pos[DC_SCOPE_KEY]] = scope_keys[i];
		slot->tts_values[pos[DC_DEDUP_ID]] = dedup_ids[i];
		slot->tts_values[pos[DC_MESSAGE_ID]] = Int64GetDatum(ids[i]);
		slot->tts_values[pos[DC_ACCEPTED_AT]] = TimestampTzGetDatum(now);
		if (q->shared)
			slot->tts_values[pos[DC_QUEUE_ID]] = Int64GetDatum(q->id);
		for (int c = 0; c < (q->shared ? DC_NUM : DC_QUEUE_ID); c++)
			slot->tts_isnull[pos[c]] = false;
		ExecStoreVirtualTuple(slot);

		/* Held (or being taken, which the statement waits for): not here. */
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

/*
 * Deduplication claims.  Accepted ids live in the queue's d<id> table (or
 * the shared one) under a unique key (scope key, id) for the queue's
 * deduplication window, counted from the first accepted send and
 * outliving the message.  Claiming is an INSERT ... ON CONFLICT, direct
 * (above) where the key is free: the unique index makes concurrent sends
 * of one id wait for each other, so exactly one is enqueued and a
 * rolled-back send frees its id.  An id whose window has passed is
 * claimed afresh, swept or not.
 */
static bool
text_eq(Datum a, Datum b)
{
	text	   *ta = DatumGetTextPP(a);
	text	   *tb = DatumGetTextPP(b);

	return VARSIZE_ANY_EXHDR(ta) == VARSIZE_ANY_EXHDR(tb) &&
		memcmp(VARDATA_ANY(ta), VARDATA_ANY(tb), VARSIZE_ANY_EXHDR(ta)) == 0;
}

/*
 * From the last SPI result's (scope_key, deduplication_id, message_id)
 * rows, fill in the message id of each first entry of a key still without.
 */
static void
take_ids(int n, const int *first, Datum *scope_keys, Datum *dedup_ids,
		 int64 *message_ids)
{
	for (uint64 r = 0; r < SPI_processed; r++)
	{
		HeapTuple	tup = SPI_tuptable->vals[r];
		TupleDesc	desc = SPI_tuptable->tupdesc;
		bool		isnull;
		Datum		k = SPI_getbinval(tup, desc, 1, &isnull);
		Datum		d = SPI_getbinval(tup, desc, 2, &isnull);
		int64		id = DatumGetInt64(SPI_getbinval(tup, desc, 3, &isnull));

		for (int i = 0; i < n; i++)
			if (first[i] == i && message_ids[i] == 0 &&
				text_eq(k, scope_keys[i]) && text_eq(d, dedup_ids[i]))
				message_ids[i] = id;
	}
}

/*
 * Claim the ids of n entries (all with an id).  For each entry, returns the
 * message id to use and whether it is a duplicate (then the message id is
 * the original's and nothing is to be enqueued).  An id repeated within
 * the batch is a duplicate of its first entry.
 */
void
queue_dedup_claim(QueueMeta *q, int n, Datum *scope_keys, Datum *dedup_ids,
				  TimestampTz now, int64 *message_ids, bool *duplicate)
{
	int		   *first = palloc(n * sizeof(int));
	Datum	   *ck = palloc(n * sizeof(Datum));
	Datum	   *cd = palloc(n * sizeof(Datum));
	int			nclaim = 0;
	int64	   *ids;			/* the message id drawn for each key */
	bool	   *claimed;
	Datum		args[5];
	int			rc;
	bool		missing = false;

	/* Entries repeating an earlier entry's key take its outcome. */
	for (int i = 0; i < n; i++)
	{
		first[i] = i;
		for (int j = 0; j < i; j++)
			if (text_eq(scope_keys[i], scope_keys[j]) &&
				text_eq(dedup_ids[i], dedup_ids[j]))
			{
				first[i] = first[j];
				break;
			}
		if (first[i] == i)
		{
			ck[nclaim] = scope_keys[i];
			cd[nclaim] = dedup_ids[i];
			nclaim++;
		}
		message_ids[i] = 0;
		duplicate[i] = (first[i] != i);
	}

	/*
	 * Each key's message id is drawn now, in entry order (a FIFO batch's
	 * sequence numbers follow its entries), whichever way it is claimed.
	 * Keys nobody holds are claimed directly (above); the rest by the
	 * statement, which also tells an expired claim from a live one.
	 */
	{
		Oid			seq = queue_message_id_seq();
		int			k = 0;
		int			rest = 0;

		ids = palloc(Max(nclaim, 1) * sizeof(int64));
		claimed = palloc(Max(nclaim, 1) * sizeof(bool));
		for (int c = 0; c < nclaim; c++)
			ids[c] = nextval_internal(seq, false);
		insert_new_dedup_ids(q, nclaim, ck, cd, ids, now, claimed);
		for (int i = 0; i < n; i++)
			if (first[i] == i)
			{
				if (claimed[k])
					message_ids[i] = ids[k];
				k++;
			}
		for (int c = 0; c < nclaim; c++)
			if (!claimed[c])
			{
				ck[rest] = ck[c];
				cd[rest] = cd[c];
				ids[rest] = ids[c];
				rest++;
			}
		nclaim = rest;
	}
	if (nclaim > 0)
	{
		args[0] = TimestampTzGetDatum(now);
		args[1] = TimestampTzGetDatum(now - q->dedup_window);
		if (nclaim == 1)
		{
			/* the usual send of one message: no arrays */
			args[2] = ck[0];
			args[3] = cd[0];
			args[4] = Int64GetDatum(ids[0]);
			rc = queue_exec(q, QP_DEDUP_CLAIM_ONE, args, NULL, false, 0);
		}
		else
		{
			args[2] = queue_text_array(nclaim, ck, NULL);
			args[3] = queue_text_array(nclaim, cd, NULL);
			args[4] = queue_int8_array(nclaim, ids);
			rc = queue_exec(q, QP_DEDUP_CLAIM, args, NULL, false, 0);
		}
		if (rc != SPI_OK_INSERT_RETURNING)
			elog(ERROR, "deduplication claim failed: %s", SPI_result_code_string(rc));
		take_ids(n, first, scope_keys, dedup_ids, message_ids);
	}

	/* Keys not claimed are held by a live earlier send: fetch its id. */
	nclaim = 0;
	for (int i = 0; i < n; i++)
		if (first[i] == i && message_ids[i] == 0)
		{
			duplicate[i] = true;
			ck[nclaim] = scope_keys[i];
			cd[nclaim] = dedup_ids[i];
			nclaim++;
		}
	if (nclaim > 0)
	{
		args[0] = queue_text_array(nclaim, ck, NULL);
		args[1] = queue_text_array(nclaim, cd, NULL);
		rc = queue_exec(q, QP_DEDUP_ORIGINALS, args, NULL, false, 0);
		if (rc != SPI_OK_SELECT)
			elog(ERROR, "deduplication lookup failed: %s", SPI_result_code_string(rc));
		take_ids(n, first, scope_keys, dedup_ids, message_ids);
	}

	for (int i = 0; i < n; i++)
	{
		if (first[i] != i)
			message_ids[i] = message_ids[first[i]];
		if (message_ids[i] == 0)
			missing = true;
	}
	if (missing)
		elog(ERROR, "deduplication id neither claimed nor found");
}
