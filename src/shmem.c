/*-------------------------------------------------------------------------
 *
 * shmem.c
 *	  The extension's shared memory, when loaded by shared_preload_libraries:
 *	  the long-poll condition variables and the per-queue counters.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "miscadmin.h"
#include "storage/ipc.h"
#include "storage/shmem.h"

#include "queue.h"

QueueShared *queue_shared = NULL;
int			queue_max_queues = 8192;

static shmem_request_hook_type prev_shmem_request_hook = NULL;
static shmem_startup_hook_type prev_shmem_startup_hook = NULL;

static Size
shared_size(void)
{
	return add_size(offsetof(QueueShared, counters),
					mul_size(queue_max_queues, sizeof(QueueCounterEntry)));
}

static void
queue_shmem_request(void)
{
	if (prev_shmem_request_hook)
		prev_shmem_request_hook();
	RequestAddinShmemSpace(shared_size());
	RequestNamedLWLockTranche("queue", 1);
}

static void
queue_shmem_startup(void)
{
	bool		found;

	if (prev_shmem_startup_hook)
		prev_shmem_startup_hook();

	LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
	queue_shared = ShmemInitStruct("queue", shared_size(), &found);
	if (!found)
	{
		queue_shared->lock = &(GetNamedLWLockTranche("queue"))->lock;
		queue_shared->ncounters = queue_max_queues;
		for (int i = 0; i < QUEUE_WAIT_SLOTS; i++)
			ConditionVariableInit(&queue_shared->wait_cv[i]);
		for (int i = 0; i < queue_max_queues; i++)
		{
			queue_shared->counters[i].dbid = InvalidOid;
			queue_shared->counters[i].queue_id = 0;
			for (int c = 0; c < QC_NUM; c++)
				pg_atomic_init_u64(&queue_shared->counters[i].c[c], 0);
		}
	}
	LWLockRelease(AddinShmemInitLock);
}

/* Called from _PG_init while preloading. */
void
queue_shmem_init(void)
{
	prev_shmem_request_hook = shmem_request_hook;
	shmem_request_hook = queue_shmem_request;
	prev_shmem_startup_hook = shmem_startup_hook;
	shmem_startup_hook = queue_shmem_startup;
}
