/*-------------------------------------------------------------------------
 *
 * server.h
 *	  What the three files of the SQS endpoint's workers share, and nothing
 *	  else includes: one request's state in a worker (SqsExchange) and what
 *	  each of the three offers the ones above it.  Top to bottom:
 *
 *	  worker.c	 the process: registration, start, settings, the event loop
 *	  server.c	 libmicrohttpd: its daemon, its callbacks, requests in
 *	  exchange.c a request that has arrived: served (sqs_handle), answered,
 *				 parked (long polls, lock retries), forwarded
 *
 * worker.c calls server.c and exchange.c; server.c calls exchange.c;
 * exchange.c calls neither (sqs.h says what lies below all three).
 *
 *-------------------------------------------------------------------------
 */
#ifndef QUEUE_SQS_SERVER_H
#define QUEUE_SQS_SERVER_H

#include <microhttpd.h>

#include "lib/ilist.h"

#include "sqs.h"

/* queue.sqs_listen, parsed (the host is resolved in the worker) */
typedef struct SqsListen
{
	char		host[256];		/* "" : 127.0.0.1, "*" : any IPv4 address */
	int			port;
} SqsListen;

typedef enum SqsPhase
{
	SQS_READING,				/* headers or body still arriving */
	SQS_PARKED,					/* suspended until its queue or its time */
	SQS_ANSWERED,				/* answer built, to be queued */
	SQS_DROPPED,				/* client left while parked: close */
	SQS_DONE					/* answer queued */
} SqsPhase;

/*
 * One request, from its request line to its completion.  Everything
 * hangs off cxt, deleted when libmicrohttpd reports the request complete.
 */
typedef struct SqsExchange
{
	MemoryContext cxt;
	MemoryContext attempt_cxt;	/* one call of sqs_handle; reset per call */
	struct MHD_Connection *conn;
	SqsPhase	phase;
	bool		started;		/* the access handler has seen the headers */
	char	   *raw_uri;		/* as on the request line */
	StringInfoData body;
	size_t		reserved;		/* bytes of the worker's body budget held */
	struct MHD_PostProcessor *form;
	bool		form_bad;
	bool		too_many_params;
	SqsPair    *params;
	int			nparams;
	int			maxparams;
	SqsRequest	req;
	SqsResponse resp;
	struct MHD_Response *answer;
	unsigned int answer_status;
	char		request_id[37];
	/* while parked */
	dlist_node	park_node;
	int64		park_queue_id;
	uint64		park_generation;
	TimestampTz park_until;
	bool		parked;			/* in sqs_parked, its slot counted */
	bool		park_due;		/* woken before it slept: serve again now */
	bool		closed;			/* the client closed its socket */
	int			fd;
	/* a request that met a lock: parked for its time, not its queue */
	bool		lock_retry;
	int			lock_tries;
	TimestampTz lock_since;		/* its first lock timeout */
	/* forwarded to its queue's node of a Citus cluster (forward.c) */
	char	   *forward_url;	/* set by the last sqs_handle: forward it */
	SqsForward *forward;		/* while forwarded */
	dlist_node	forward_node;
	/* what it holds of its role's shares (shares.c) */
	Oid			park_role;		/* a parked long poll's, or InvalidOid */
	Oid			forward_role;	/* a forward's, or InvalidOid */
	SqsShareKind forward_share;
} SqsExchange;

/*
 * Which worker this is (0 ... queue.sqs_workers - 1), for logs and the
 * core's watcher bits: set by worker.c at start, defined in exchange.c
 * (the bottom of the three, so that none reads a file above it).
 */
extern int	sqs_index;

/*
 * server.c: libmicrohttpd's daemon, started and driven by worker.c's loop;
 * its callbacks take each request in and hand it to exchange.c.
 */
extern bool sqs_parse_listen(const char *value, SqsListen *out, const char **err);
extern void sqs_read_body_budget(void);
extern int	sqs_daemon_start(const char *listen, int max_connections);
extern void sqs_daemon_run(void);
extern long sqs_daemon_timeout(void);
extern void sqs_daemon_stop(void);

/*
 * exchange.c: a request that has fully arrived (server.c), until its
 * answer is queued: served, answered, parked, forwarded.
 */
extern bool sqs_exchange_serve(SqsExchange *ex);
extern bool sqs_exchange_park(SqsExchange *ex);
extern bool sqs_exchange_forward(SqsExchange *ex, bool suspended);
extern void sqs_exchange_refuse(SqsExchange *ex, int err, const char *message);
extern enum MHD_Result sqs_exchange_queue(SqsExchange *ex);
extern void sqs_exchange_unpark(SqsExchange *ex);
extern void sqs_exchange_unforward(SqsExchange *ex);
/* ... and the parked and forwarded ones, for worker.c's loop */
struct WaitEventSet;
extern void sqs_park_init(void);
extern bool sqs_park_sockets_changed(void);
extern int	sqs_park_nsockets(void);
extern void sqs_park_add_events(struct WaitEventSet *wes);
extern long sqs_park_timeout(long timeout);
extern void sqs_serve_parked(void);
extern void sqs_forwards_done(void);
extern void sqs_park_drop_all(void);

#endif							/* QUEUE_SQS_SERVER_H */
