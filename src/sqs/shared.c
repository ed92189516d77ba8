/*-------------------------------------------------------------------------
 *
 * shared.c
 *	  The little the SQS endpoint's workers share, in shared memory of this
 *	  library's own (requested when the core's _PG_init registers the
 *	  workers, so only when queue.sqs_listen is set): when each queue was
 *	  last purged over HTTP (SQS's PurgeQueueInProgress: one purge a queue
 *	  a minute), and whether a worker's last start died connecting to
 *	  queue.sqs_database (worker.c then waits for the database instead of
 *	  dying again every second).
 *
 * Nothing here outlives the server or needs to: a restart forgets a purge
 * (the next one is allowed) and starts the workers afresh.
 *
 * May call: PostgreSQL only.  Called by: worker.c (attach, database
 * waits) and queues.c (PurgeQueue).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "miscadmin.h"
#include "storage/ipc.h"
#include "storage/lwlock.h"
#include "storage/shmem.h"
#include "storage/spin.h"
#include "utils/timestamp.h"

#include "common/compat.h"
#include "sqs.h"

#define SQS_PURGE_SLOTS		256		/* purges remembered (oldest reused) */
#define SQS_PURGE_WINDOW_MS	(60 * 1000)
#define SQS_MAX_WORKERS		64		/* queue.sqs_workers' maximum */

typedef struct SqsPurgeSlot
{
	char		name[NAMEDATALEN + 32];	/* a wire name is at most 80 */
	TimestampTz at;
} SqsPurgeSlot;

typedef struct SqsShared
{
	slock_t		mutex;
	bool		missing_logged; /* the database's absence was logged */
	bool		connecting[SQS_MAX_WORKERS];	/* started connecting, not
												 * connected yet */
	SqsPurgeSlot purges[SQS_PURGE_SLOTS];
} SqsShared;

static SqsShared *sqs_shared = NULL;
static shmem_request_hook_type prev_shmem_request_hook = NULL;
static shmem_startup_hook_type prev_shmem_startup_hook = NULL;

static void
sqs_shmem_request(void)
{
	if (prev_shmem_request_hook)
		prev_shmem_request_hook();
	RequestAddinShmemSpace(MAXALIGN(sizeof(SqsShared)));
}

static void
sqs_shmem_startup(void)
{
	bool		found;

	if (prev_shmem_startup_hook)
		prev_shmem_startup_hook();
	LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
	sqs_shared = ShmemInitStruct("queue sqs shared", sizeof(SqsShared), &found);
	if (!found)
	{
		memset(sqs_shared, 0, sizeof(SqsShared));
		SpinLockInit(&sqs_shared->mutex);
	}
	LWLockRelease(AddinShmemInitLock);
}

/* In the postmaster's _PG_init (worker.c's queue_sqs_register) */
void
sqs_shared_request(void)
{
	prev_shmem_request_hook = shmem_request_hook;
	shmem_request_hook = sqs_shmem_request;
	prev_shmem_startup_hook = shmem_startup_hook;
	shmem_startup_hook = sqs_shmem_startup;
}

/*
 * A purge of queue_name over HTTP is done (its transaction not yet
 * committed): false when another was done less than a minute ago (the
 * caller answers PurgeQueueInProgress, and its transaction, purge
 * included, rolls back), else true and now is remembered.
 */
bool
sqs_purge_note(const char *queue_name, TimestampTz now)
{
	int			free_slot = -1;
	int			oldest = 0;
	bool		ok = true;

	if (sqs_shared == NULL || strlen(queue_name) >= sizeof(sqs_shared->purges[0].name))
		return true;
	SpinLockAcquire(&sqs_shared->mutex);
	for (int i = 0; i < SQS_PURGE_SLOTS; i++)
	{
		SqsPurgeSlot *s = &sqs_shared->purges[i];
		bool		live = s->name[0] != '\0' &&
			!TimestampDifferenceExceeds(s->at, now, SQS_PURGE_WINDOW_MS);

		if (live && strcmp(s->name, queue_name) == 0)
		{
			ok = false;
			break;
		}
		if (!live && free_slot < 0)
			free_slot = i;
		if (s->at < sqs_shared->purges[oldest].at)
			oldest = i;
	}
	if (ok)
	{
		SqsPurgeSlot *s = &sqs_shared->purges[free_slot >= 0 ? free_slot : oldest];

		strlcpy(s->name, queue_name, sizeof(s->name));
		s->at = now;
	}
	SpinLockRelease(&sqs_shared->mutex);
	return ok;
}

/*
 * Worker index's start: true when its last start began connecting and
 * never got there (it died in the connection: the database is missing, or
 * was); marks this start as connecting.
 */
bool
sqs_connect_begin(int index)
{
	bool		failed;

	if (sqs_shared == NULL || index < 0 || index >= SQS_MAX_WORKERS)
		return false;
	SpinLockAcquire(&sqs_shared->mutex);
	failed = sqs_shared->connecting[index];
	sqs_shared->connecting[index] = true;
	SpinLockRelease(&sqs_shared->mutex);
	return failed;
}

/*
 * Worker index connected (or, waiting, saw its database): its next start
 * connects at once, and a later absence is logged again.
 */
void
sqs_connect_end(int index)
{
	if (sqs_shared == NULL || index < 0 || index >= SQS_MAX_WORKERS)
		return;
	SpinLockAcquire(&sqs_shared->mutex);
	sqs_shared->connecting[index] = false;
	sqs_shared->missing_logged = false;
	SpinLockRelease(&sqs_shared->mutex);
}

/* Whether the database's absence is still to be logged (once, all workers) */
bool
sqs_missing_log_once(void)
{
	bool		first;

	if (sqs_shared == NULL)
		return true;
	SpinLockAcquire(&sqs_shared->mutex);
	first = !sqs_shared->missing_logged;
	sqs_shared->missing_logged = true;
	SpinLockRelease(&sqs_shared->mutex);
	return first;
}
