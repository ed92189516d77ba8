/*-------------------------------------------------------------------------
 *
 * horizon.c
 *	  Who holds the horizon back, and whether the worker may remove row
 *	  versions beyond it: the rule recycling (vacuum.c) and compaction
 *	  (compact.c) both obey, and the time they may take.
 *
 * Recycling truncates a table and compaction rewrites it with only the
 * versions the latest snapshot sees.  Both remove versions that PostgreSQL's
 * vacuum would keep because the horizon (GetOldestNonRemovableTransactionId)
 * is older than their deleters.  That is safe only if nothing that could
 * read the table later sees those versions.  The horizon is held by two
 * kinds of holders, and only one of them can see a removed version:
 *
 *	  - A transaction id without a snapshot: a READ COMMITTED transaction
 *	    idle after a write, a prepared transaction.  It holds the horizon at
 *	    its xid (its own changes may yet commit) but reads nothing until its
 *	    next statement, which takes a new snapshot; a new snapshot sees every
 *	    transaction that committed before it as committed, whatever its xmin.
 *	  - A snapshot: a backend's xmin (PGPROC.xmin) is set while it holds one,
 *	    registered or active (a REPEATABLE READ or SERIALIZABLE transaction,
 *	    an open cursor, a running statement, an exported snapshot, which an
 *	    importer can take only while the exporter runs), and a replication
 *	    slot's data xmin (effective_xmin) while a standby's feedback or a
 *	    logical slot's initial snapshot (a subscription's table copy, a
 *	    pg_dump --snapshot of a slot) needs it; a physical walsender without
 *	    a slot carries its standby's feedback as its own xmin.
 *
 * The rule (queue_snapshots_unsafe): the worker removes versions only at a
 * moment when, under the table's exclusive lock, no backend of the
 * database other than itself holds a snapshot (PGPROC.xmin, read under
 * ProcArrayLock; lazy vacuum and safe concurrent index builds excepted, as
 * PostgreSQL's own horizons except them: they never read other tables with
 * it), no replication slot of the database or physical slot holds a data
 * xmin, no file is in pg_snapshots (a snapshot exported and not yet
 * dropped), and (setting auto) no physical walsender is connected.  Proof
 * that no snapshot can see a removed version: every deleter of a removed
 * version committed before the lock was granted (its RowExclusiveLock
 * lasted until its commit); a snapshot taken after the lock was granted
 * sees all of them as committed, so it sees none of the versions; a
 * snapshot taken before would have its holder's xmin set at the moment of
 * the check (xmin stays set while any snapshot is registered or active,
 * and an imported snapshot sets the importer's), so none exists; a
 * snapshot imported later comes from an exporter that would have been
 * seen.  A logical walsender's xmin (PROC_IN_LOGICAL_DECODING) guards only
 * catalogs, as PostgreSQL's own horizon says; its initial snapshot shows as
 * the slot's data xmin and the exported file.  Hot standbys: their readers
 * use snapshots of their own, which the primary does not see without
 * feedback, and replaying a truncation or rewrite takes the table's
 * exclusive lock on the standby, which waits for its readers and then
 * stops all replay (max_standby_streaming_delay); so with a standby
 * connected nothing is removed unless queue.storage_maintenance says
 * ignore_standbys (standbys that never read queue tables).  A standby fed
 * by archive only (no walsender) is not seen: such a set-up must say off.
 *
 * When the rule does not hold the worker does what PostgreSQL does (plain
 * vacuum, no truncation), and receives keep their cost through their own
 * bounds; the tables grow as PostgreSQL's own would.  Costs: one pass over
 * the procarray's PGPROCs and the slots (a few microseconds for hundreds
 * of connections) before each try's lock and once again under it; the
 * directory read of pg_snapshots.
 *
 * May call: PostgreSQL only.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <dirent.h>

#include "access/transam.h"
#include "miscadmin.h"
#include "replication/slot.h"
#include "replication/walsender_private.h"
#include "storage/fd.h"
#include "storage/proc.h"
#include "storage/procarray.h"
#include "storage/spin.h"
#include "utils/rel.h"

#include "common/queue_common.h"
#include "worker/queue_worker.h"

int			queue_storage_maintenance = QUEUE_MAINTENANCE_AUTO;

/*
 * Whether the horizon of rel's rows (NULL: of every database's) lags
 * QUEUE_RECYCLE_LAG_XIDS or more behind the next transaction id: vacuum
 * cannot remove what changed since.
 */
bool
queue_horizon_lags(Relation rel)
{
	TransactionId horizon = GetOldestNonRemovableTransactionId(rel);
	TransactionId next = XidFromFullTransactionId(ReadNextFullTransactionId());

	return TransactionIdIsNormal(horizon) &&
		(int32) (next - horizon) >= QUEUE_RECYCLE_LAG_XIDS;
}

/* A backend of this database (or a physical walsender) holding a snapshot. */
static const char *
procs_unsafe(bool standbys)
{
	const char *why = NULL;

	LWLockAcquire(ProcArrayLock, LW_SHARED);
	for (uint32 i = 0; i < ProcGlobal->allProcCount && why == NULL; i++)
	{
		PGPROC	   *proc = &ProcGlobal->allProcs[i];
		TransactionId xmin = *(volatile TransactionId *) &proc->xmin;

		if (proc == MyProc || !TransactionIdIsValid(xmin) ||
			(proc->statusFlags & (PROC_XMIN_FLAGS | PROC_IN_LOGICAL_DECODING)) != 0)
			continue;
		if (proc->databaseId == MyDatabaseId)
			why = "a backend holds a snapshot";
		else if (!OidIsValid(proc->databaseId) && standbys)
			why = "a standby's feedback holds a snapshot";
	}
	LWLockRelease(ProcArrayLock);
	return why;
}

/* A slot of this database (or a physical one) holding a data xmin. */
static const char *
slots_unsafe(bool standbys)
{
	const char *why = NULL;

	if (ReplicationSlotCtl == NULL)
		return NULL;
	LWLockAcquire(ReplicationSlotControlLock, LW_SHARED);
	for (int i = 0; i < max_replication_slots && why == NULL; i++)
	{
		ReplicationSlot *slot = &ReplicationSlotCtl->replication_slots[i];
		TransactionId xmin;
		Oid			db;

		if (!slot->in_use)
			continue;
		SpinLockAcquire(&slot->mutex);
		xmin = slot->effective_xmin;
		db = slot->data.database;
		SpinLockRelease(&slot->mutex);
		if (!TransactionIdIsValid(xmin))
			continue;
		if (db == MyDatabaseId)
			why = "a logical slot's initial snapshot holds the horizon";
		else if (!OidIsValid(db) && standbys)
			why = "a physical slot holds its standby's snapshot";
	}
	LWLockRelease(ReplicationSlotControlLock);
	return why;
}

/* A physical walsender (a standby or a base backup) connected. */
static bool
standby_connected(void)
{
	bool		found = false;

	if (WalSndCtl == NULL)
		return false;
	for (int i = 0; i < max_wal_senders && !found; i++)
	{
		WalSnd	   *walsnd = &WalSndCtl->walsnds[i];
		pid_t		pid;
		PGPROC	   *proc;

		SpinLockAcquire(&walsnd->mutex);
		pid = walsnd->pid;
		SpinLockRelease(&walsnd->mutex);
		if (pid == 0)
			continue;
		proc = BackendPidGetProc(pid);
		found = proc == NULL || !OidIsValid(proc->databaseId);
	}
	return found;
}

/* A snapshot exported and not yet dropped (pg_export_snapshot, a slot's). */
static bool
snapshot_exported(void)
{
	DIR		   *dir = AllocateDir("pg_snapshots");
	struct dirent *de;
	bool		found = false;

	while (!found && (de = ReadDir(dir, "pg_snapshots")) != NULL)
		found = de->d_name[0] != '.';
	FreeDir(dir);
	return found;
}

/*
 * NULL when the worker may remove versions no new snapshot sees (the rule
 * above), else why not; *transient says whether it may hold a moment later
 * (a backend's snapshot: a running statement's is gone in a moment, and a
 * REPEATABLE READ transaction's is not, which the worker cannot tell
 * apart).  In a transaction (the directory read uses its resources).
 */
const char *
queue_snapshots_unsafe(bool *transient)
{
	bool		standbys = queue_storage_maintenance != QUEUE_MAINTENANCE_IGNORE_STANDBYS;
	const char *why;

	*transient = false;
	if (queue_storage_maintenance == QUEUE_MAINTENANCE_OFF)
		return "queue.storage_maintenance is off";
	if (standbys && standby_connected())
		return "a standby is connected";
	if ((why = slots_unsafe(standbys)) != NULL)
		return why;
	if (snapshot_exported())
		return "a snapshot is exported";
	if ((why = procs_unsafe(standbys)) != NULL)
		*transient = true;
	return why;
}

/*
 * Each second that passed grants QUEUE_RECYCLE_BUDGET_US again: time spent
 * past the budget (a long compaction) is carried over, so it defers what
 * follows.  Whether any is left.
 */
bool
queue_budget_left(QueueBudget *b, TimestampTz now)
{
	if (now - b->since >= USECS_PER_SEC)
	{
		int64		grant = (now - b->since) / USECS_PER_SEC * QUEUE_RECYCLE_BUDGET_US;

		b->since = now;
		b->spent = Max(b->spent - grant, 0);
	}
	return b->spent < QUEUE_RECYCLE_BUDGET_US;
}
