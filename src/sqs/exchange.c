/*-------------------------------------------------------------------------
 *
 * exchange.c
 *	  A request of the SQS endpoint once it has fully arrived, until its
 *	  answer is queued: served by sqs_handle (protocol.c), answered, parked
 *	  in the worker's loop while it waits (a long poll, or a request that
 *	  met a lock and is tried again), or forwarded to its queue's node of a
 *	  Citus cluster (forward.c); and the worker's books of them: the wait
 *	  slots its parked requests watch (core_api.h), each role's share of
 *	  long polls and forwards held (shares.c).
 *
 * Every answer the worker gives is built here: sqs_handle's, a forward's
 * relayed as the queue's node gave it, and the SQS errors the worker
 * answers itself, before or around sqs_handle (sqs_exchange_refuse), which
 * protocol.c renders from wire.c's table like every other error.
 * libmicrohttpd takes an answer only in its access handler (server.c),
 * so a parked or forwarded request's connection is resumed and its answer
 * queued there.
 *
 * May call: forward.c, protocol.c, shares.c, the core's wait slots
 * (core_api.h), libmicrohttpd, PostgreSQL.  Called by: server.c
 * (serve, park, forward, refuse, queue; unpark at completion) and
 * worker.c (the parked and forwarded requests in its loop).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <sys/socket.h>
#include <time.h>

#include "access/xact.h"
#include "lib/ilist.h"
#include "miscadmin.h"
#include "storage/latch.h"
#include "utils/hsearch.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#include "common/compat.h"
#include "core_api.h"
#include "server.h"
#include "sqs.h"

/* Parked requests served again per pass of the loop, at most */
#define SQS_RETRIES_PER_PASS	128
/*
 * A request that met a lock (protocol.c: its transaction hit the short
 * queue.sqs_lock_timeout) is parked and tried again after SQS_LOCK_RETRY_MS,
 * doubling up to SQS_LOCK_RETRY_MAX_MS, for at most SQS_LOCK_RETRY_FOR_MS in
 * all; then it is answered ServiceUnavailable (503), which the SDKs retry.
 * At most SQS_LOCK_RETRIES_PER_PASS such tries per pass of the loop: each
 * may wait out one lock timeout, and the other connections come first.
 */
#define SQS_LOCK_RETRY_MS		10
#define SQS_LOCK_RETRY_MAX_MS	500
#define SQS_LOCK_RETRY_FOR_MS	5000
#define SQS_LOCK_RETRIES_PER_PASS 2

/* How many parked requests of this worker watch one wait slot */
typedef struct SqsSlotCount
{
	int			slot;
	int			count;
} SqsSlotCount;

/* Which worker this is (worker.c sets it at start), for logs and watches */
int			sqs_index;

static dlist_head sqs_parked = DLIST_STATIC_INIT(sqs_parked);
static int	sqs_nparked;
/* Requests forwarded to another node (suspended until its answer) */
static dlist_head sqs_forwarded = DLIST_STATIC_INIT(sqs_forwarded);
static int	sqs_nforwarded;
static HTAB *sqs_slots;
/* The parked or forwarded set changed: worker.c's wait set is stale */
static bool sqs_wes_stale = true;

/* At the worker's start: the counts of watched wait slots. */
void
sqs_park_init(void)
{
	HASHCTL		ctl;

	memset(&ctl, 0, sizeof(ctl));
	ctl.keysize = sizeof(int);
	ctl.entrysize = sizeof(SqsSlotCount);
	ctl.hcxt = TopMemoryContext;
	sqs_slots = hash_create("queue sqs watched slots", 64, &ctl,
							HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
}

/* An RFC 7231 date for the Date header (SDKs correct their clocks by it). */
static void
sqs_http_date(char *buf, size_t size)
{
	static const char *const days[] = {"Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"};
	static const char *const months[] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
	"Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
	time_t		now = time(NULL);
	struct tm	tm;

	gmtime_r(&now, &tm);
	snprintf(buf, size, "%s, %02d %s %04d %02d:%02d:%02d GMT",
			 days[tm.tm_wday], tm.tm_mday, months[tm.tm_mon], tm.tm_year + 1900,
			 tm.tm_hour, tm.tm_min, tm.tm_sec);
}

/*
 * The answer, built now and queued by the access handler (libmicrohttpd
 * takes responses only there).  The body is copied.  The response carries
 * Date and x-amzn-RequestId unless the caller's headers have them.
 */
static void
exchange_answer(SqsExchange *ex, int status, const char *content_type,
				const char *body, size_t len, const SqsPair *headers, int nheaders)
{
	struct MHD_Response *r;
	bool		have_id = false;
	bool		have_date = false;
	char		date[64];

	if (ex->answer != NULL)
		MHD_destroy_response(ex->answer);
	ex->answer = NULL;
	ex->phase = SQS_ANSWERED;
	ex->answer_status = (status >= 100 && status <= 999) ? status : 500;
	r = MHD_create_response_from_buffer(len, (void *) (body ? body : ""),
										MHD_RESPMEM_MUST_COPY);
	if (r == NULL)
		return;					/* no memory: the handler closes */
	for (int i = 0; i < nheaders; i++)
	{
		if (headers[i].name == NULL || headers[i].value == NULL)
			continue;
		if (pg_strcasecmp(headers[i].name, "x-amzn-RequestId") == 0)
			have_id = true;
		if (pg_strcasecmp(headers[i].name, "Date") == 0)
			have_date = true;
		MHD_add_response_header(r, headers[i].name, headers[i].value);
	}
	MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE,
							content_type ? content_type : "text/plain");
	if (!have_id)
		MHD_add_response_header(r, "x-amzn-RequestId", ex->request_id);
	if (!have_date)
	{
		sqs_http_date(date, sizeof(date));
		MHD_add_response_header(r, MHD_HTTP_HEADER_DATE, date);
	}
	ex->answer = r;
}

/*
 * An SQS error the worker answers itself, before or around sqs_handle:
 * protocol.c renders it from wire.c's table, as it does every error, in
 * the request's protocol as far as the headers tell (AWS JSON 1.0 when
 * X-Amz-Target is present, Query's XML otherwise).
 */
void
sqs_exchange_refuse(SqsExchange *ex, int err, const char *message)
{
	MemoryContext old = MemoryContextSwitchTo(ex->cxt);
	SqsResponse resp;
	bool		json;

	json = MHD_lookup_connection_value(ex->conn, MHD_HEADER_KIND, "X-Amz-Target") != NULL;
	memset(&resp, 0, sizeof(resp));
	initStringInfo(&resp.body);
	sqs_refuse(&resp, json, err, message, ex->request_id);
	exchange_answer(ex, resp.status, resp.content_type, resp.body.data, resp.body.len,
					resp.headers, Min(resp.nheaders, lengthof(resp.headers)));
	MemoryContextSwitchTo(old);
}

/* Queue the built answer; MHD_NO closes the connection. */
enum MHD_Result
sqs_exchange_queue(SqsExchange *ex)
{
	enum MHD_Result ret;

	if (ex->answer == NULL)
		return MHD_NO;
	ret = MHD_queue_response(ex->conn, ex->answer_status, ex->answer);
	MHD_destroy_response(ex->answer);
	ex->answer = NULL;
	ex->phase = SQS_DONE;
	return ret;
}

/* Count of parked requests on a wait slot: watched while above zero. */
static void
slot_acquire(int64 queue_id)
{
	int			slot = queue_wait_slot_of(queue_id);
	SqsSlotCount *e;
	bool		found;

	e = hash_search(sqs_slots, &slot, HASH_ENTER, &found);
	if (!found)
		e->count = 0;
	e->count++;
}

static void
slot_release(int64 queue_id)
{
	int			slot = queue_wait_slot_of(queue_id);
	SqsSlotCount *e;

	e = hash_search(sqs_slots, &slot, HASH_FIND, NULL);
	if (e == NULL)
		return;
	if (--e->count <= 0)
	{
		hash_search(sqs_slots, &slot, HASH_REMOVE, NULL);
		queue_wait_watch(sqs_index, queue_id, false);
	}
}

/* Take a parked request out of the parked list (it is being answered). */
void
sqs_exchange_unpark(SqsExchange *ex)
{
	if (!ex->parked)
		return;
	ex->parked = false;
	dlist_delete(&ex->park_node);
	sqs_nparked--;
	if (ex->park_queue_id != 0)
		slot_release(ex->park_queue_id);
	if (OidIsValid(ex->park_role))
		sqs_share_give(SQS_SHARE_LONG_POLL, ex->park_role);
	ex->park_role = InvalidOid;
	sqs_wes_stale = true;
}

/* A forward ended (answered, failed, or its client left): its slot is free. */
static void
exchange_forward_ended(SqsExchange *ex)
{
	ex->forward = NULL;
	dlist_delete(&ex->forward_node);
	sqs_nforwarded--;
	if (OidIsValid(ex->forward_role))
		sqs_share_give(ex->forward_share, ex->forward_role);
	ex->forward_role = InvalidOid;
	sqs_wes_stale = true;
}

/* A forward given up (its request is over, or the worker stops). */
void
sqs_exchange_unforward(SqsExchange *ex)
{
	if (ex->forward == NULL)
		return;
	sqs_forward_cancel(ex->forward);
	exchange_forward_ended(ex);
}

/*
 * One call of sqs_handle.  It runs its own transactions and should never
 * throw; anything that escapes all the same is logged, rolled back and
 * answered 500.  True: answered (ex->answer built); false: park.
 */
bool
sqs_exchange_serve(SqsExchange *ex)
{
	MemoryContext old;

	MemoryContextReset(ex->attempt_cxt);
	old = MemoryContextSwitchTo(ex->attempt_cxt);
	memset(&ex->resp, 0, sizeof(ex->resp));
	initStringInfo(&ex->resp.body);
	ex->resp.status = 200;
	PG_TRY();
	{
		sqs_handle(&ex->req, &ex->resp);
	}
	PG_CATCH();
	{
		MemoryContextSwitchTo(ex->attempt_cxt);
		EmitErrorReport();
		FlushErrorState();
		AbortOutOfAnyTransaction();
		memset(&ex->resp, 0, sizeof(ex->resp));
		ex->resp.status = 500;
	}
	PG_END_TRY();
	MemoryContextSwitchTo(old);

	if (ex->resp.status == 500 && ex->resp.content_type == NULL)
	{
		sqs_exchange_refuse(ex, SQS_ERR_INTERNAL_ERROR, "internal error");
		return true;
	}
	if (ex->resp.lock_retry)
	{
		/* it met a lock: park it for a while, unless it has waited enough */
		TimestampTz now = GetCurrentTimestamp();

		if (!ex->lock_retry)
		{
			ex->lock_since = now;
			ex->lock_tries = 0;
		}
		if (!TimestampDifferenceExceeds(ex->lock_since, now, SQS_LOCK_RETRY_FOR_MS))
		{
			int			ms = SQS_LOCK_RETRY_MS << Min(ex->lock_tries, 8);

			ex->lock_tries++;
			ex->lock_retry = true;
			ex->resp.park = true;
			ex->resp.park_queue_id = 0;
			ex->resp.park_generation = 0;
			ex->resp.park_until = TimestampTzPlusMilliseconds(now, Min(ms, SQS_LOCK_RETRY_MAX_MS));
			return false;
		}
		/* answered with the ServiceUnavailable protocol.c built */
	}
	ex->lock_retry = false;
	ex->forward_url = NULL;
	if (ex->resp.forward_url != NULL)
	{
		/* to the queue's node: the caller forwards it */
		ex->forward_url = MemoryContextStrdup(ex->cxt, ex->resp.forward_url);
		return false;
	}
	if (ex->resp.park)
		return false;
	exchange_answer(ex, ex->resp.status, ex->resp.content_type,
					ex->resp.body.data, ex->resp.body.data ? ex->resp.body.len : 0,
					ex->resp.headers, Min(ex->resp.nheaders, lengthof(ex->resp.headers)));
	return true;
}

/*
 * Park (or park again) a request that sqs_handle wants to wait: watch its
 * queue's wait slot, then compare the generation it read before trying:
 * a commit in between has moved it, and the request is served again at
 * once.  A long poll holds one of its role's share while it waits
 * (shares.c); false when the role holds its share already: then it is
 * answered ServiceUnavailable instead (out of the parked list), and the
 * caller queues the answer (or resumes a connection that was parked).
 */
bool
sqs_exchange_park(SqsExchange *ex)
{
	if (ex->resp.park_queue_id != 0 && !OidIsValid(ex->park_role))
	{
		if (!sqs_share_take(SQS_SHARE_LONG_POLL, ex->resp.role))
		{
			sqs_exchange_unpark(ex);
			memset(&ex->resp, 0, sizeof(ex->resp));
			MemoryContextReset(ex->attempt_cxt);
			sqs_exchange_refuse(ex, SQS_PERR_UNAVAILABLE,
								"This role has too many long polls waiting at this endpoint "
								"(queue.sqs_long_polls_per_role); try again later.");
			return false;
		}
		ex->park_role = ex->resp.role;
	}
	if (!ex->parked)
	{
		const union MHD_ConnectionInfo *info;

		MHD_suspend_connection(ex->conn);
		info = MHD_get_connection_info(ex->conn, MHD_CONNECTION_INFO_CONNECTION_FD);
		ex->fd = info ? info->connect_fd : -1;
		ex->phase = SQS_PARKED;
		ex->parked = true;
		ex->closed = false;
		sqs_nparked++;
		sqs_wes_stale = true;
		if (ex->resp.park_queue_id != 0)
			slot_acquire(ex->resp.park_queue_id);
	}
	else
	{
		dlist_delete(&ex->park_node);
		if (ex->park_queue_id != ex->resp.park_queue_id)
		{
			if (ex->park_queue_id != 0)
				slot_release(ex->park_queue_id);
			if (ex->resp.park_queue_id != 0)
				slot_acquire(ex->resp.park_queue_id);
		}
	}
	dlist_push_tail(&sqs_parked, &ex->park_node);
	ex->park_queue_id = ex->resp.park_queue_id;
	ex->park_generation = ex->resp.park_generation;
	ex->park_until = ex->resp.park_until;
	/* queue 0: a lock retry, due at its time only */
	ex->park_due = false;
	if (ex->park_queue_id != 0)
	{
		queue_wait_watch(sqs_index, ex->park_queue_id, true);
		ex->park_due = queue_wait_generation_of(ex->park_queue_id) != ex->park_generation;
	}

	/* what the call allocated is not needed while it waits */
	memset(&ex->resp, 0, sizeof(ex->resp));
	MemoryContextReset(ex->attempt_cxt);
	return true;
}

/*
 * Forward a request that sqs_handle found to be for another node's queue
 * (ex->forward_url) there, its connection suspended (already, when
 * suspended is true) until the answer comes (sqs_forwards_done).  False:
 * it could not start, and the answer (ServiceUnavailable) is built.
 */
bool
sqs_exchange_forward(SqsExchange *ex, bool suspended)
{
	const union MHD_ConnectionInfo *info;

	if (!sqs_forward_available())
	{
		sqs_exchange_refuse(ex, SQS_PERR_UNAVAILABLE,
							"The queue is on another node of the cluster, and this endpoint "
							"cannot forward to it (built without libcurl).");
		return false;
	}
	/* one of its role's share of the forward slots (shares.c) */
	ex->forward_share = ex->resp.forward_receive ? SQS_SHARE_FORWARD_RECEIVE : SQS_SHARE_FORWARD;
	if (!sqs_share_take(ex->forward_share, ex->resp.role))
	{
		sqs_exchange_refuse(ex, SQS_PERR_UNAVAILABLE,
							"This role has too many requests forwarded from this endpoint "
							"(queue.sqs_forwards_per_role); try again later.");
		return false;
	}
	ex->forward = sqs_forward_start(ex->forward_url, &ex->req, ex, ex->cxt);
	if (ex->forward == NULL)
	{
		sqs_share_give(ex->forward_share, ex->resp.role);
		sqs_exchange_refuse(ex, SQS_PERR_UNAVAILABLE,
							"The endpoint is forwarding too many requests; try again later.");
		return false;
	}
	ex->forward_role = ex->resp.role;
	if (!suspended)
		MHD_suspend_connection(ex->conn);
	info = MHD_get_connection_info(ex->conn, MHD_CONNECTION_INFO_CONNECTION_FD);
	ex->fd = info ? info->connect_fd : -1;
	ex->closed = false;
	ex->phase = SQS_PARKED;
	dlist_push_tail(&sqs_forwarded, &ex->forward_node);
	sqs_nforwarded++;
	sqs_wes_stale = true;
	memset(&ex->resp, 0, sizeof(ex->resp));
	MemoryContextReset(ex->attempt_cxt);
	return true;
}

/* Has the client of a parked request closed its end? */
static bool
sqs_peer_gone(int fd)
{
	char		c;
	ssize_t		n;

	if (fd < 0)
		return false;
	n = recv(fd, &c, 1, MSG_PEEK | MSG_DONTWAIT);
	if (n == 0)
		return true;
	if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
		return true;
	return false;
}

/*
 * The forwards that finished: answer their clients with what the queue's
 * node answered (or ServiceUnavailable when it could not be reached); and
 * drop those whose client left.
 */
void
sqs_forwards_done(void)
{
	void	   *owner;
	int			status;
	const char *ctype;
	const char *body;
	size_t		len;
	const SqsPair *pairs;
	int			npairs;
	dlist_mutable_iter it;

	while (sqs_forward_next_done(&owner, &status, &ctype, &body, &len, &pairs, &npairs))
	{
		SqsExchange *ex = owner;
		MemoryContext old = MemoryContextSwitchTo(ex->cxt);

		if (status != 0)
			exchange_answer(ex, status, ctype, body, len, pairs, npairs);
		else
			sqs_exchange_refuse(ex, SQS_PERR_UNAVAILABLE,
								"The queue's node of the cluster did not answer; try again later.");
		MemoryContextSwitchTo(old);
		/* forward.c freed its part */
		exchange_forward_ended(ex);
		MHD_resume_connection(ex->conn);
	}
	dlist_foreach_modify(it, &sqs_forwarded)
	{
		SqsExchange *ex = dlist_container(SqsExchange, forward_node, it.cur);

		if (ex->closed && sqs_peer_gone(ex->fd))
		{
			sqs_exchange_unforward(ex);
			ex->phase = SQS_DROPPED;
			MHD_resume_connection(ex->conn);
		}
		else
			ex->closed = false;
	}
}

/* A parked request whose client left: closed without being served. */
static void
exchange_drop(SqsExchange *ex)
{
	sqs_exchange_unpark(ex);
	ex->phase = SQS_DROPPED;
	MHD_resume_connection(ex->conn);
}

/*
 * Serve again the parked requests whose queue's generation moved, whose
 * time ended, or that were woken before they slept; drop those whose
 * client left.  At most SQS_RETRIES_PER_PASS calls per pass, so the loop
 * keeps serving other connections; the rest go next pass (a served one
 * that parks again moves to the end of the list).
 */
void
sqs_serve_parked(void)
{
	dlist_mutable_iter it;
	TimestampTz now = GetCurrentTimestamp();
	int			budget = SQS_RETRIES_PER_PASS;
	int			lock_budget = SQS_LOCK_RETRIES_PER_PASS;
	int			seen = 0;
	int			total = sqs_nparked;

	dlist_foreach_modify(it, &sqs_parked)
	{
		SqsExchange *ex = dlist_container(SqsExchange, park_node, it.cur);
		bool		expired;
		MemoryContext old;

		if (++seen > total)
			break;				/* the ones parked again in this pass */
		if (ex->closed)
		{
			exchange_drop(ex);
			continue;
		}
		expired = now >= ex->park_until;
		if (!expired && !ex->park_due &&
			(ex->park_queue_id == 0 ||
			 queue_wait_generation_of(ex->park_queue_id) == ex->park_generation))
			continue;
		if (budget-- <= 0 || (ex->lock_retry && lock_budget-- <= 0))
		{
			ex->park_due = true;
			continue;
		}
		if (sqs_peer_gone(ex->fd))
		{
			exchange_drop(ex);
			continue;
		}
		ex->park_due = false;
		old = MemoryContextSwitchTo(ex->cxt);
		if (sqs_exchange_serve(ex))
		{
			sqs_exchange_unpark(ex);
			ex->phase = SQS_ANSWERED;
			MHD_resume_connection(ex->conn);
		}
		else if (ex->forward_url != NULL)
		{
			/* its queue moved to another node meanwhile */
			sqs_exchange_unpark(ex);
			if (!sqs_exchange_forward(ex, true))
			{
				ex->phase = SQS_ANSWERED;
				MHD_resume_connection(ex->conn);
			}
		}
		else if (expired && ex->resp.park_until <= now)
		{
			/* sqs_handle must answer once the time is over */
			elog(LOG, "queue sqs worker %d: request parked again after its time", sqs_index);
			sqs_exchange_unpark(ex);
			sqs_exchange_refuse(ex, SQS_ERR_INTERNAL_ERROR, "internal error");
			MHD_resume_connection(ex->conn);
		}
		else if (!sqs_exchange_park(ex))
		{
			ex->phase = SQS_ANSWERED;
			MHD_resume_connection(ex->conn);
		}
		MemoryContextSwitchTo(old);
	}
}


/*
 * The parked and forwarded requests in worker.c's loop.  Their sockets
 * changed (one parked, forwarded, answered or dropped) since the loop's
 * wait set was built last.
 */
bool
sqs_park_sockets_changed(void)
{
	return sqs_wes_stale;
}

/* How many sockets sqs_park_add_events adds, at the most */
int
sqs_park_nsockets(void)
{
	return sqs_nparked + sqs_nforwarded;
}

/*
 * Each parked or forwarded connection's socket, to see its client leave
 * (the event's user_data is its SqsExchange, whose closed the loop sets).
 */
void
sqs_park_add_events(struct WaitEventSet *wes)
{
	dlist_iter	it;

	dlist_foreach(it, &sqs_parked)
	{
		SqsExchange *ex = dlist_container(SqsExchange, park_node, it.cur);

		if (ex->fd >= 0)
			AddWaitEventToSet(wes, WL_SOCKET_CLOSED, ex->fd, NULL, ex);
	}
	dlist_foreach(it, &sqs_forwarded)
	{
		SqsExchange *ex = dlist_container(SqsExchange, forward_node, it.cur);

		if (ex->fd >= 0)
			AddWaitEventToSet(wes, WL_SOCKET_CLOSED, ex->fd, NULL, ex);
	}
	sqs_wes_stale = false;
}

/*
 * How long the loop may sleep, given timeout (milliseconds, -1: no end):
 * no longer than until the earliest parked request's end; not at all when
 * a parked request is due.
 */
long
sqs_park_timeout(long timeout)
{
	TimestampTz now = 0;
	dlist_iter	it;

	dlist_foreach(it, &sqs_parked)
	{
		SqsExchange *ex = dlist_container(SqsExchange, park_node, it.cur);
		long		ms;

		if (ex->park_due || ex->closed ||
			(ex->park_queue_id != 0 &&
			 queue_wait_generation_of(ex->park_queue_id) != ex->park_generation))
			return 0;
		if (now == 0)
			now = GetCurrentTimestamp();
		ms = ex->park_until <= now ? 0 : (long) ((ex->park_until - now + 999) / 1000);
		if (timeout < 0 || ms < timeout)
			timeout = ms;
	}
	return timeout;
}

/*
 * SIGTERM: the parked and forwarded connections are closed before the
 * daemon stops (libmicrohttpd cannot stop with suspended ones).
 */
void
sqs_park_drop_all(void)
{
	dlist_mutable_iter it;

	dlist_foreach_modify(it, &sqs_parked)
	{
		SqsExchange *ex = dlist_container(SqsExchange, park_node, it.cur);

		exchange_drop(ex);
	}
	dlist_foreach_modify(it, &sqs_forwarded)
	{
		SqsExchange *ex = dlist_container(SqsExchange, forward_node, it.cur);

		sqs_exchange_unforward(ex);
		ex->phase = SQS_DROPPED;
		MHD_resume_connection(ex->conn);
	}
}
