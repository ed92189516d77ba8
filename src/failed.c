/*-------------------------------------------------------------------------
 *
 * failed.c
 *	  Receives whose transaction rolls back still count (DESIGN.md
 *	  "Consumers": receives in transactions that roll back).
 *
 * Stub: the interface the receive path and the consumers use; the rule
 * itself is not built yet.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "queue.h"

/*
 * The receive path reports the messages it leased in the current
 * (sub)transaction: if that rolls back, each counts as a receive and comes
 * back after the queue's retry_delay (or the delay set below).
 */
void
queue_note_received(QueueMeta *q, int n, const int64 *ids,
					const int32 *receive_counts, int64 vt)
{
}

/*
 * A consumer chooses when the messages of a batch that fails come back
 * (DESIGN.md "Consumers": exponential or fixed).  Backend-local.
 */
void
queue_set_retry(QueueRetry how)
{
}
