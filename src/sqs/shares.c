/*-------------------------------------------------------------------------
 *
 * shares.c
 *	  Each role's share of what an endpoint worker holds for requests that
 *	  wait (issue 48: no tenant holds a shared process beyond a bound).
 *
 * A worker serves every role from one loop, and two things of it are held
 * for as long as a request waits:
 *
 *	- a parked long poll (exchange.c) holds a connection of the worker's
 *	  queue.sqs_max_connections for up to 20 seconds.  A role parks at most
 *	  queue.sqs_long_polls_per_role (default 1,000) at once; its next long
 *	  poll is answered ServiceUnavailable (the SDKs retry it later), so
 *	  one role's long polls never take every connection.
 *	- a forward to another node of a Citus cluster (forward.c) holds one of
 *	  the worker's SQS_FORWARDS_MAX slots until the node answers: a
 *	  forwarded ReceiveMessage for its whole wait.  A role holds at most
 *	  queue.sqs_forwards_per_role (default 64) forwards at once, and
 *	  forwarded ReceiveMessage calls of all roles together at most
 *	  SQS_FORWARDS_MAX - SQS_FORWARDS_SHORT, so the other calls (answered
 *	  by the node in milliseconds) always find a slot, whatever the long
 *	  polls hold.  Beyond either, ServiceUnavailable.
 *
 * The counts are the worker's own (no shared memory): each worker bounds
 * its own loop.  Settings read at start and at each reload.
 *
 * May call: PostgreSQL.  Called by: exchange.c (take, give), worker.c
 * (settings).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "utils/guc.h"
#include "utils/hsearch.h"
#include "utils/memutils.h"

#include "sqs.h"

typedef struct RoleShare
{
	Oid			role;			/* hash key */
	int			held[SQS_SHARE_KINDS];
} RoleShare;

static HTAB *shares = NULL;
static int	totals[SQS_SHARE_KINDS];
static int	long_polls_per_role = 1000;
static int	forwards_per_role = 64;

/* queue.sqs_long_polls_per_role and queue.sqs_forwards_per_role (worker.c, start and reload) */
void
sqs_shares_read_settings(void)
{
	const char *v = GetConfigOption("queue.sqs_long_polls_per_role", true, false);

	long_polls_per_role = v ? atoi(v) : 1000;
	v = GetConfigOption("queue.sqs_forwards_per_role", true, false);
	forwards_per_role = v ? atoi(v) : 64;
}

static RoleShare *
share_of(Oid role, bool create)
{
	bool		found;
	RoleShare  *s;

	if (shares == NULL)
	{
		HASHCTL		ctl;

		if (!create)
			return NULL;
		memset(&ctl, 0, sizeof(ctl));
		ctl.keysize = sizeof(Oid);
		ctl.entrysize = sizeof(RoleShare);
		ctl.hcxt = TopMemoryContext;
		shares = hash_create("queue sqs role shares", 64, &ctl,
							 HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
	}
	s = hash_search(shares, &role, create ? HASH_ENTER : HASH_FIND, &found);
	if (create && !found)
		memset(s->held, 0, sizeof(s->held));
	return s;
}

/*
 * Take one of role's share of kind; false (nothing taken) when the role,
 * or for forwarded receives all roles together, hold their bound.
 */
bool
sqs_share_take(SqsShareKind kind, Oid role)
{
	RoleShare  *s = share_of(role, true);

	switch (kind)
	{
		case SQS_SHARE_LONG_POLL:
			if (s->held[kind] >= long_polls_per_role)
				return false;
			break;
		case SQS_SHARE_FORWARD:
		case SQS_SHARE_FORWARD_RECEIVE:
			if (s->held[SQS_SHARE_FORWARD] + s->held[SQS_SHARE_FORWARD_RECEIVE] >= forwards_per_role)
				return false;
			if (kind == SQS_SHARE_FORWARD_RECEIVE &&
				totals[kind] >= SQS_FORWARDS_MAX - SQS_FORWARDS_SHORT)
				return false;
			break;
		default:
			return false;
	}
	s->held[kind]++;
	totals[kind]++;
	return true;
}

/* Give back what sqs_share_take took. */
void
sqs_share_give(SqsShareKind kind, Oid role)
{
	RoleShare  *s = share_of(role, false);
	bool		any = false;

	if (s == NULL || s->held[kind] <= 0)
		return;
	s->held[kind]--;
	totals[kind]--;
	for (int k = 0; k < SQS_SHARE_KINDS; k++)
		any |= s->held[k] > 0;
	if (!any)
		hash_search(shares, &role, HASH_REMOVE, NULL);
}
