/*-------------------------------------------------------------------------
 *
 * durability.c
 *	  Transactions that only received commit without waiting for the WAL
 *	  flush.
 *
 * A receive writes only a lease (visible_at, receipt, receive count).  If
 * the server crashes before that commit reaches disk, the lease is gone
 * and the message is visible again: exactly what an expired visibility
 * timeout does, which at-least-once delivery (and SQS's FIFO queues) allow;
 * the consumer's delete then fails as stale.  So a transaction whose only
 * writes were receives commits as with synchronous_commit = off, and a
 * waiting receive answers without a disk flush in its path.
 *
 * Anything else written in the transaction, before, between or after the
 * receives (a delete, a send, the caller's own rows), keeps the commit
 * synchronous: the transaction must have had no transaction id before its
 * first receive, and the end of its WAL must be where the last receive
 * left it.  queue.durable_receives = on turns this off.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "access/xlog.h"
#include "utils/guc.h"

#include "common/queue_common.h"

/* queue.durable_receives */
bool		queue_durable_receives = false;

static bool receive_seen = false;	/* a receive ran in this transaction */
static bool receive_only = false;	/* and nothing else wrote */
static XLogRecPtr receive_end = InvalidXLogRecPtr;	/* WAL end after it */
static bool callback_registered = false;

static void
durability_xact_callback(XactEvent event, void *arg)
{
	switch (event)
	{
		case XACT_EVENT_PRE_COMMIT:
			if (receive_seen && receive_only && XactLastRecEnd == receive_end &&
				TransactionIdIsValid(GetTopTransactionIdIfAny()) &&
				!queue_durable_receives &&
				synchronous_commit > SYNCHRONOUS_COMMIT_OFF)
			{
				(void) set_config_option("synchronous_commit", "off",
										 PGC_USERSET, PGC_S_SESSION,
										 GUC_ACTION_LOCAL, true, 0, false);
				elog(DEBUG1, "queue: this transaction only received; its commit does not wait for the WAL flush");
			}
			break;
		case XACT_EVENT_COMMIT:
		case XACT_EVENT_PARALLEL_COMMIT:
		case XACT_EVENT_ABORT:
		case XACT_EVENT_PARALLEL_ABORT:
		case XACT_EVENT_PREPARE:
			receive_seen = false;
			break;
		default:
			break;
	}
}

/* Before a receive writes anything. */
void
queue_receive_begins(void)
{
	if (!callback_registered)
	{
		RegisterXactCallback(durability_xact_callback, NULL);
		callback_registered = true;
	}
	if (!receive_seen)
	{
		receive_seen = true;
		receive_only = !TransactionIdIsValid(GetTopTransactionIdIfAny());
	}
	else if (XactLastRecEnd != receive_end)
		receive_only = false;
}

/* After a receive wrote what it writes. */
void
queue_receive_ends(void)
{
	receive_end = XactLastRecEnd;
}
