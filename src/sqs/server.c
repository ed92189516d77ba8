/*-------------------------------------------------------------------------
 *
 * server.c
 *	  The SQS endpoint's workers: libmicrohttpd inside each worker's own
 *	  event loop (no threads), requests in, responses out, and long polls
 *	  parked in the loop instead of holding a process each.
 *
 * queue.sqs_workers background workers each bind queue.sqs_listen with
 * SO_REUSEPORT, so the kernel spreads connections over them.  A worker's
 * loop waits on one WaitEventSet: its latch (signals, and the wakes of the
 * wait slots its parked requests watch, core_api.h), postmaster death,
 * libmicrohttpd's epoll descriptor, and the sockets of the parked
 * connections (to see a client leave).  Every request is one call of
 * sqs_handle (protocol.c), which runs its own transactions and never
 * throws; a ReceiveMessage that would wait comes back with park set, and
 * its connection is suspended until its queue's wait generation moves or
 * its time ends, then served again.
 *
 * Also the library's PG_MODULE_MAGIC and _PG_init: this file owns them.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <limits.h>
#include <netdb.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <microhttpd.h>

#include "access/xact.h"
#include "commands/dbcommands.h"
#include "common/pg_prng.h"
#include "fmgr.h"
#include "lib/ilist.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "postmaster/interrupt.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "tcop/tcopprot.h"
#include "utils/guc.h"
#include "utils/hsearch.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#include "common/compat.h"
#include "core_api.h"
#include "sqs.h"

PG_MODULE_MAGIC;

PGDLLEXPORT void queue_sqs_register(void);
PGDLLEXPORT void queue_sqs_main(Datum main_arg);
void		_PG_init(void);

/* When queue.sqs_listen names no port */
#define SQS_DEFAULT_PORT		9324
/* An idle or stalled connection is closed after this (seconds) */
#define SQS_CONNECTION_TIMEOUT	60
/* Decoded parameters of one request, at most (bounds the parsing) */
#define SQS_MAX_PARAMS			4096
/* Parked requests served again per pass of the loop, at most */
#define SQS_RETRIES_PER_PASS	128
/* libmicrohttpd's form parser's buffer: bounds a parameter's name */
#define SQS_FORM_BUFFER			4096
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

/* How many parked requests of this worker watch one wait slot */
typedef struct SqsSlotCount
{
	int			slot;
	int			count;
} SqsSlotCount;

static int	sqs_index;
static struct MHD_Daemon *sqs_daemon;
static MemoryContext sqs_requests_cxt;
static dlist_head sqs_parked = DLIST_STATIC_INIT(sqs_parked);
static int	sqs_nparked;
/* Requests forwarded to another node (suspended until its answer) */
static dlist_head sqs_forwarded = DLIST_STATIC_INIT(sqs_forwarded);
static int	sqs_nforwarded;
/* user_data of libcurl's sockets in the wait set */
static char sqs_forward_marker;
static HTAB *sqs_slots;
/*
 * Request bodies: queue.sqs_request_memory (bytes) a worker may hold for
 * all its connections together, and what they hold (a declared body is
 * reserved whole before a byte of it is read; a chunked one as it comes).
 */
static size_t sqs_body_budget;
static size_t sqs_body_reserved;
static WaitEventSet *sqs_wes;
static WaitEvent *sqs_events;
static int	sqs_wes_size;
static bool sqs_wes_stale = true;

/* The core loads this library and calls queue_sqs_register; nothing here. */
void
_PG_init(void)
{
}

/*
 * Parse queue.sqs_listen: "port", ":port", "host:port", "[v6]:port", or a
 * host alone (the default port).  False with *err set when malformed.
 */
static bool
sqs_parse_listen(const char *value, SqsListen *out, const char **err)
{
	char		buf[512];
	char	   *s = buf;
	char	   *host = NULL;
	char	   *port = NULL;
	size_t		len;

	memset(out, 0, sizeof(*out));
	if (value == NULL || strlen(value) >= sizeof(buf))
	{
		*err = "too long";
		return false;
	}
	strlcpy(buf, value, sizeof(buf));
	while (*s == ' ' || *s == '\t')
		s++;
	len = strlen(s);
	while (len > 0 && (s[len - 1] == ' ' || s[len - 1] == '\t'))
		s[--len] = '\0';
	if (len == 0)
	{
		*err = "empty";
		return false;
	}

	if (s[0] == '[')
	{
		char	   *close = strchr(s, ']');

		if (close == NULL)
		{
			*err = "no \"]\" after an IPv6 address";
			return false;
		}
		*close = '\0';
		host = s + 1;
		if (close[1] == ':')
			port = close + 2;
		else if (close[1] != '\0')
		{
			*err = "expected \":port\" after \"]\"";
			return false;
		}
	}
	else
	{
		char	   *colon = strrchr(s, ':');

		if (colon != NULL && strchr(s, ':') != colon)
		{
			*err = "an IPv6 address goes in brackets, as in [::1]:9324";
			return false;
		}
		if (colon != NULL)
		{
			*colon = '\0';
			host = s;
			port = colon + 1;
		}
		else if (strspn(s, "0123456789") == len)
			port = s;
		else
			host = s;
	}

	if (host != NULL)
	{
		if (strlen(host) >= sizeof(out->host))
		{
			*err = "host name too long";
			return false;
		}
		strlcpy(out->host, host, sizeof(out->host));
		if (strcmp(out->host, "0.0.0.0") == 0)
			strlcpy(out->host, "*", sizeof(out->host));
	}
	out->port = SQS_DEFAULT_PORT;
	if (port != NULL)
	{
		if (*port == '\0' || strlen(port) > 5 ||
			strspn(port, "0123456789") != strlen(port) ||
			atoi(port) < 1 || atoi(port) > 65535)
		{
			*err = "the port must be a number from 1 to 65535";
			return false;
		}
		out->port = atoi(port);
	}
	return true;
}

/*
 * Called by the core's _PG_init in the postmaster when queue.sqs_listen is
 * set: checks the address (a bad one stops the server here, with its
 * reason, rather than in workers restarted every second) and registers the
 * workers.
 */
void
queue_sqs_register(void)
{
	const char *listen = GetConfigOption("queue.sqs_listen", false, false);
	const char *nworkers_s = GetConfigOption("queue.sqs_workers", false, false);
	int			nworkers = nworkers_s ? atoi(nworkers_s) : 2;
	SqsListen	addr;
	const char *err = NULL;

	if (!sqs_parse_listen(listen, &addr, &err))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid value for parameter \"queue.sqs_listen\": \"%s\"", listen),
				 errdetail("%s.", err),
				 errhint("Use port, :port, host:port or [IPv6 address]:port.")));

	sqs_shared_request();
	for (int i = 0; i < nworkers; i++)
	{
		BackgroundWorker bgw;

		memset(&bgw, 0, sizeof(bgw));
		bgw.bgw_flags = BGWORKER_SHMEM_ACCESS | BGWORKER_BACKEND_DATABASE_CONNECTION;
		bgw.bgw_start_time = BgWorkerStart_RecoveryFinished;
		bgw.bgw_restart_time = 1;
		snprintf(bgw.bgw_library_name, BGW_MAXLEN, "queue_sqs");
		snprintf(bgw.bgw_function_name, BGW_MAXLEN, "queue_sqs_main");
		snprintf(bgw.bgw_name, BGW_MAXLEN, "queue sqs worker %d", i);
		snprintf(bgw.bgw_type, BGW_MAXLEN, "queue sqs worker");
		bgw.bgw_main_arg = Int32GetDatum(i);
		bgw.bgw_notify_pid = 0;
		RegisterBackgroundWorker(&bgw);
	}
}

/*
 * libmicrohttpd's messages go to the server log.  Until the daemon runs
 * (why it cannot listen) all of them; then most are about clients (closed
 * early, malformed, over the connection limit) and a flood of clients must
 * not flood the log: one a minute at LOG, the rest at DEBUG1.
 */
static void sqs_mhd_log(void *cls, const char *fmt, va_list ap) pg_attribute_printf(2, 0);

static void
sqs_mhd_log(void *cls, const char *fmt, va_list ap)
{
	static TimestampTz last_logged = 0;
	static int	quiet = 0;
	char		buf[512];
	size_t		len;
	int			level = LOG;

	vsnprintf(buf, sizeof(buf), fmt, ap);
	len = strlen(buf);
	while (len > 0 && (buf[len - 1] == '\n' || buf[len - 1] == '\r'))
		buf[--len] = '\0';
	if (sqs_daemon != NULL)
	{
		TimestampTz now = GetCurrentTimestamp();

		if (last_logged != 0 &&
			!TimestampDifferenceExceeds(last_logged, now, 60 * 1000))
		{
			level = DEBUG1;
			quiet++;
		}
		else
			last_logged = now;
	}
	if (level == LOG && quiet > 0)
		ereport(LOG,
				(errmsg("queue sqs worker %d: libmicrohttpd: %s", sqs_index, buf),
				 errdetail("%d more messages of libmicrohttpd in the last minute were logged at DEBUG1.",
						   quiet)));
	else
		ereport(level,
				(errmsg("queue sqs worker %d: libmicrohttpd: %s", sqs_index, buf)));
	if (level == LOG)
		quiet = 0;
}

/*
 * libmicrohttpd's can't-happen: this worker ends (and is restarted)
 * instead of the process aborting, which would restart the whole server.
 */
static void
sqs_mhd_panic(void *cls, const char *file, unsigned int line, const char *reason)
{
	ereport(FATAL,
			(errmsg("queue sqs worker %d: libmicrohttpd failed: %s (%s:%u)",
					sqs_index, reason ? reason : "?", file ? file : "?", line)));
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

/* A random (version 4) UUID as the request's id. */
static void
sqs_new_request_id(char *buf)
{
	uint64		hi = pg_prng_uint64(&pg_global_prng_state);
	uint64		lo = pg_prng_uint64(&pg_global_prng_state);

	hi = (hi & ~UINT64CONST(0xF000)) | UINT64CONST(0x4000);
	lo = (lo & ~(UINT64CONST(0xC) << 60)) | (UINT64CONST(0x8) << 60);
	snprintf(buf, 37, "%08x-%04x-%04x-%04x-%012llx",
			 (unsigned int) (hi >> 32), (unsigned int) ((hi >> 16) & 0xFFFF),
			 (unsigned int) (hi & 0xFFFF), (unsigned int) (lo >> 48),
			 (unsigned long long) (lo & UINT64CONST(0xFFFFFFFFFFFF)));
}

/* A new request's state, in its own memory context. */
static SqsExchange *
exchange_new(struct MHD_Connection *conn, const char *uri)
{
	MemoryContext cxt;
	SqsExchange *ex;

	cxt = AllocSetContextCreate(sqs_requests_cxt, "queue sqs request",
								ALLOCSET_SMALL_SIZES);
	ex = MemoryContextAllocZero(cxt, sizeof(SqsExchange));
	ex->cxt = cxt;
	ex->attempt_cxt = AllocSetContextCreate(cxt, "queue sqs attempt",
											ALLOCSET_SMALL_SIZES);
	ex->conn = conn;
	ex->phase = SQS_READING;
	ex->raw_uri = MemoryContextStrdup(cxt, uri ? uri : "");
	ex->fd = -1;
	sqs_new_request_id(ex->request_id);
	return ex;
}

/*
 * libmicrohttpd's URI log callback: the request line's URI before any
 * decoding (SigV4 signs the path and query as sent).  What it returns is
 * the request's state from then on.
 */
static void *
sqs_uri_log(void *cls, const char *uri, struct MHD_Connection *conn)
{
	return exchange_new(conn, uri);
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
static void
exchange_unpark(SqsExchange *ex)
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

/* Everything of a request goes, at its completion or its connection's end. */
static void
exchange_unforward(SqsExchange *ex)
{
	if (ex->forward == NULL)
		return;
	sqs_forward_cancel(ex->forward);
	exchange_forward_ended(ex);
}

static void
exchange_free(SqsExchange *ex)
{
	exchange_unpark(ex);
	exchange_unforward(ex);
	Assert(sqs_body_reserved >= ex->reserved);
	sqs_body_reserved -= ex->reserved;
	ex->reserved = 0;
	if (ex->form != NULL)
		MHD_destroy_post_processor(ex->form);
	if (ex->answer != NULL)
		MHD_destroy_response(ex->answer);
	MemoryContextDelete(ex->cxt);
}

/* libmicrohttpd's NOTIFY_COMPLETED: the request is over, one way or another. */
static void
sqs_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
			  enum MHD_RequestTerminationCode toe)
{
	SqsExchange *ex = *con_cls;

	*con_cls = NULL;
	if (ex != NULL)
		exchange_free(ex);
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
 * An error the server answers itself (before or around sqs_handle), in
 * the request's protocol as far as it can tell: AWS JSON 1.0 when
 * X-Amz-Target is present, Query's XML otherwise.
 */
static void
exchange_fail(SqsExchange *ex, int status, const char *code, const char *message)
{
	StringInfoData body;
	SqsPair		hdr[1];
	bool		json;
	const char *fault = status >= 500 ? "Receiver" : "Sender";
	MemoryContext old = MemoryContextSwitchTo(ex->cxt);

	json = MHD_lookup_connection_value(ex->conn, MHD_HEADER_KIND, "X-Amz-Target") != NULL;
	initStringInfo(&body);
	if (json)
	{
		appendStringInfo(&body, "{\"__type\":\"com.amazonaws.sqs#%s\",\"message\":\"%s\"}",
						 code, message);
		hdr[0].name = "x-amzn-query-error";
		hdr[0].value = psprintf("%s;%s", code, fault);
		exchange_answer(ex, status, "application/x-amz-json-1.0", body.data, body.len, hdr, 1);
	}
	else
	{
		appendStringInfo(&body,
						 "<?xml version=\"1.0\"?><ErrorResponse xmlns=\"http://queue.amazonaws.com/doc/2012-11-05/\">"
						 "<Error><Type>%s</Type><Code>%s</Code><Message>%s</Message><Detail/></Error>"
						 "<RequestId>%s</RequestId></ErrorResponse>",
						 fault, code, message, ex->request_id);
		exchange_answer(ex, status, "text/xml", body.data, body.len, NULL, 0);
	}
	MemoryContextSwitchTo(old);
}

/*
 * An SQS error the server answers before sqs_handle (protocol.c builds it,
 * in the request's protocol as far as the headers tell).
 */
static void
exchange_refuse(SqsExchange *ex, int err, const char *message)
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
static enum MHD_Result
exchange_queue(SqsExchange *ex)
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

/* Append a decoded parameter (bounded: SQS_MAX_PARAMS). */
static SqsPair *
exchange_add_param(SqsExchange *ex, const char *name, const char *value, size_t len)
{
	SqsPair    *p;

	if (ex->nparams >= SQS_MAX_PARAMS)
	{
		ex->too_many_params = true;
		return NULL;
	}
	if (ex->nparams == ex->maxparams)
	{
		ex->maxparams = ex->maxparams ? ex->maxparams * 2 : 16;
		if (ex->params == NULL)
			ex->params = MemoryContextAlloc(ex->cxt, ex->maxparams * sizeof(SqsPair));
		else
			ex->params = repalloc(ex->params, ex->maxparams * sizeof(SqsPair));
	}
	p = &ex->params[ex->nparams++];
	p->name = MemoryContextStrdup(ex->cxt, name ? name : "");
	p->value = MemoryContextAlloc(ex->cxt, len + 1);
	if (len > 0)
		memcpy(p->value, value, len);
	p->value[len] = '\0';
	return p;
}

/* MHD_GET_ARGUMENT_KIND iterator: the query string's decoded arguments. */
static enum MHD_Result
sqs_query_arg(void *cls, enum MHD_ValueKind kind, const char *key, const char *value)
{
	SqsExchange *ex = cls;

	exchange_add_param(ex, key, value, value ? strlen(value) : 0);
	return ex->too_many_params ? MHD_NO : MHD_YES;
}

/*
 * The form parser's iterator: a field's value may come in pieces (off is
 * where this piece starts); the pieces of one field are joined.
 */
static enum MHD_Result
sqs_form_field(void *cls, enum MHD_ValueKind kind, const char *key,
			   const char *filename, const char *content_type,
			   const char *transfer_encoding, const char *data,
			   uint64_t off, size_t size)
{
	SqsExchange *ex = cls;

	if (off > 0 && ex->nparams > 0)
	{
		SqsPair    *p = &ex->params[ex->nparams - 1];
		size_t		have = strlen(p->value);

		p->value = repalloc(p->value, have + size + 1);
		memcpy(p->value + have, data, size);
		p->value[have + size] = '\0';
		return MHD_YES;
	}
	exchange_add_param(ex, key, data, data ? size : 0);
	return ex->too_many_params ? MHD_NO : MHD_YES;
}

/* MHD_HEADER_KIND iterator: the headers, names lower-cased. */
static enum MHD_Result
sqs_header_iter(void *cls, enum MHD_ValueKind kind, const char *key, const char *value)
{
	SqsExchange *ex = cls;
	SqsPair    *h = (SqsPair *) &ex->req.headers[ex->req.nheaders];
	char	   *name = MemoryContextStrdup(ex->cxt, key ? key : "");

	for (char *c = name; *c; c++)
		*c = pg_ascii_tolower((unsigned char) *c);
	h->name = name;
	h->value = MemoryContextStrdup(ex->cxt, value ? value : "");
	ex->req.nheaders++;
	return MHD_YES;
}

/*
 * First call of the access handler: the headers are in.  A declared body
 * over SQS_MAX_BODY is refused at once (413); a form body gets
 * libmicrohttpd's form parser; the query string's arguments are taken.
 */
static enum MHD_Result
exchange_start(SqsExchange *ex, const char *method)
{
	const char *length;
	const char *ctype;
	bool		chunked;
	unsigned long long declared = 0;

	ex->started = true;
	ex->req.method = MemoryContextStrdup(ex->cxt, method ? method : "");
	length = MHD_lookup_connection_value(ex->conn, MHD_HEADER_KIND,
										 MHD_HTTP_HEADER_CONTENT_LENGTH);
	chunked = MHD_lookup_connection_value(ex->conn, MHD_HEADER_KIND,
										  MHD_HTTP_HEADER_TRANSFER_ENCODING) != NULL;
	if (length != NULL)
	{
		char	   *end;

		errno = 0;
		declared = strtoull(length, &end, 10);
		if (errno != 0 || declared > SQS_MAX_BODY)
		{
			exchange_fail(ex, 413, "RequestEntityTooLarge",
						  "the request body is larger than 4194304 bytes");
			return exchange_queue(ex);
		}
	}

	/*
	 * A body is read only for a request that names a key (the Authorization
	 * header, or X-Amz-Credential in a presigned query): nothing of an
	 * anonymous one is buffered past its headers.  The signature itself
	 * needs the body (SigV4 signs its hash), so a named key is all that can
	 * be asked for here; the budget below bounds what such requests hold.
	 */
	if ((declared > 0 || chunked) &&
		MHD_lookup_connection_value(ex->conn, MHD_HEADER_KIND, "Authorization") == NULL &&
		MHD_lookup_connection_value(ex->conn, MHD_GET_ARGUMENT_KIND, "X-Amz-Credential") == NULL)
	{
		exchange_refuse(ex, SQS_ERR_MISSING_AUTHENTICATION_TOKEN,
						"Request is missing Authentication Token");
		return exchange_queue(ex);
	}

	/*
	 * The worker's budget for bodies: a declared body is reserved whole
	 * now, or refused with ServiceUnavailable (the SDKs retry it) before a
	 * byte of it is read; a chunked one is reserved as it arrives.
	 */
	if (declared > 0)
	{
		if (sqs_body_reserved + declared > sqs_body_budget)
		{
			exchange_refuse(ex, SQS_PERR_UNAVAILABLE,
							"The endpoint is reading too many request bodies; try again later.");
			return exchange_queue(ex);
		}
		ex->reserved = declared;
		sqs_body_reserved += declared;
	}
	initStringInfo(&ex->body);

	ctype = MHD_lookup_connection_value(ex->conn, MHD_HEADER_KIND,
										MHD_HTTP_HEADER_CONTENT_TYPE);
	if (ctype != NULL &&
		pg_strncasecmp(ctype, MHD_HTTP_POST_ENCODING_FORM_URLENCODED,
					   strlen(MHD_HTTP_POST_ENCODING_FORM_URLENCODED)) == 0)
		ex->form = MHD_create_post_processor(ex->conn, SQS_FORM_BUFFER,
											 sqs_form_field, ex);

	MHD_get_connection_values(ex->conn, MHD_GET_ARGUMENT_KIND, sqs_query_arg, ex);
	return MHD_YES;
}

/* A piece of the body: kept raw (signed as sent) and fed to the form parser. */
static enum MHD_Result
exchange_body(SqsExchange *ex, const char *data, size_t size)
{
	/*
	 * Only a chunked body can get here past the cap (a declared length is
	 * checked first); libmicrohttpd takes no answer in the middle of a body,
	 * so the connection is closed.
	 */
	if ((size_t) ex->body.len + size > SQS_MAX_BODY)
		return MHD_NO;
	if ((size_t) ex->body.len + size > ex->reserved)
	{
		/* chunked, or more than declared: reserve what is new, or close */
		size_t		more = (size_t) ex->body.len + size - ex->reserved;

		if (sqs_body_reserved + more > sqs_body_budget)
			return MHD_NO;
		ex->reserved += more;
		sqs_body_reserved += more;
	}
	appendBinaryStringInfo(&ex->body, data, size);
	if (ex->form != NULL && !ex->form_bad && !ex->too_many_params &&
		MHD_post_process(ex->form, data, size) != MHD_YES)
		ex->form_bad = true;
	return MHD_YES;
}

/* The peer's address, for logs. */
static const char *
exchange_peer(SqsExchange *ex)
{
	const union MHD_ConnectionInfo *info;
	char		host[NI_MAXHOST];

	info = MHD_get_connection_info(ex->conn, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
	if (info == NULL || info->client_addr == NULL)
		return "";
	if (getnameinfo(info->client_addr,
					info->client_addr->sa_family == AF_INET6 ?
					sizeof(struct sockaddr_in6) : sizeof(struct sockaddr_in),
					host, sizeof(host), NULL, 0, NI_NUMERICHOST) != 0)
		return "";
	return MemoryContextStrdup(ex->cxt, host);
}

/*
 * Whether form-encoded text holds a NUL: a raw one or %00.  A decoded
 * parameter is a C string, so a NUL would cut it short: "a%00b" would be
 * the queue "a".  (%2500 is the text "%00", not a NUL.)
 */
static bool
form_has_nul(const char *s, size_t len)
{
	for (size_t i = 0; i < len; i++)
	{
		if (s[i] == '\0')
			return true;
		if (s[i] == '%' && i + 2 < len && s[i + 1] == '0' && s[i + 2] == '0')
			return true;
	}
	return false;
}

/*
 * The whole request has arrived: fill the SqsRequest, which stays as it
 * is for every later call of sqs_handle with it.
 */
static bool
exchange_complete(SqsExchange *ex)
{
	SqsRequest *req = &ex->req;
	char	   *q;
	int			n;
	bool		form_body = (ex->form != NULL);

	/*
	 * Destroying the form parser delivers a last field left unterminated;
	 * its verdict on a trailing name without "=" is not held against the
	 * request (the raw body is what is signed and kept).
	 */
	if (ex->form != NULL)
	{
		(void) MHD_destroy_post_processor(ex->form);
		ex->form = NULL;
	}
	if (ex->too_many_params)
	{
		exchange_fail(ex, MHD_HTTP_BAD_REQUEST, "MalformedQueryString",
					  "the request has more than 4096 parameters");
		return false;
	}
	if (ex->form_bad)
	{
		exchange_fail(ex, MHD_HTTP_BAD_REQUEST, "MalformedQueryString",
					  "the form-encoded body is malformed");
		return false;
	}

	q = strchr(ex->raw_uri, '?');
	if ((q != NULL && form_has_nul(q, strlen(q))) ||
		(form_body && form_has_nul(ex->body.data, ex->body.len)))
	{
		exchange_fail(ex, MHD_HTTP_BAD_REQUEST, "MalformedQueryString",
					  "a parameter holds a NUL character");
		return false;
	}
	if (q != NULL)
	{
		req->raw_path = pnstrdup(ex->raw_uri, q - ex->raw_uri);
		req->raw_query = q + 1;
	}
	else
	{
		req->raw_path = ex->raw_uri;
		req->raw_query = "";
	}
	n = MHD_get_connection_values(ex->conn, MHD_HEADER_KIND, NULL, NULL);
	req->headers = palloc0(Max(n, 1) * sizeof(SqsPair));
	req->nheaders = 0;
	MHD_get_connection_values(ex->conn, MHD_HEADER_KIND, sqs_header_iter, ex);
	Assert(req->nheaders <= n);
	req->nparams = ex->nparams;
	req->params = ex->params;
	req->body = ex->body.data;
	req->body_len = ex->body.len;
	req->started_at = GetCurrentTimestamp();
	req->peer = exchange_peer(ex);
	return true;
}

/*
 * One call of sqs_handle.  It runs its own transactions and should never
 * throw; anything that escapes all the same is logged, rolled back and
 * answered 500.  True: answered (ex->answer built); false: park.
 */
static bool
exchange_serve(SqsExchange *ex)
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
		exchange_fail(ex, 500, "InternalError", "internal error");
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
static bool
exchange_park(SqsExchange *ex)
{
	if (ex->resp.park_queue_id != 0 && !OidIsValid(ex->park_role))
	{
		if (!sqs_share_take(SQS_SHARE_LONG_POLL, ex->resp.role))
		{
			exchange_unpark(ex);
			memset(&ex->resp, 0, sizeof(ex->resp));
			MemoryContextReset(ex->attempt_cxt);
			exchange_refuse(ex, SQS_PERR_UNAVAILABLE,
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

static bool sqs_peer_gone(int fd);

/*
 * Forward a request that sqs_handle found to be for another node's queue
 * (ex->forward_url) there, its connection suspended (already, when
 * suspended is true) until the answer comes (sqs_forwards_done).  False:
 * it could not start, and the answer (ServiceUnavailable) is built.
 */
static bool
exchange_forward(SqsExchange *ex, bool suspended)
{
	const union MHD_ConnectionInfo *info;

	if (!sqs_forward_available())
	{
		exchange_refuse(ex, SQS_PERR_UNAVAILABLE,
						"The queue is on another node of the cluster, and this endpoint "
						"cannot forward to it (built without libcurl).");
		return false;
	}
	/* one of its role's share of the forward slots (shares.c) */
	ex->forward_share = ex->resp.forward_receive ? SQS_SHARE_FORWARD_RECEIVE : SQS_SHARE_FORWARD;
	if (!sqs_share_take(ex->forward_share, ex->resp.role))
	{
		exchange_refuse(ex, SQS_PERR_UNAVAILABLE,
						"This role has too many requests forwarded from this endpoint "
						"(queue.sqs_forwards_per_role); try again later.");
		return false;
	}
	ex->forward = sqs_forward_start(ex->forward_url, &ex->req, ex, ex->cxt);
	if (ex->forward == NULL)
	{
		sqs_share_give(ex->forward_share, ex->resp.role);
		exchange_refuse(ex, SQS_PERR_UNAVAILABLE,
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

/*
 * The forwards that finished: answer their clients with what the queue's
 * node answered (or ServiceUnavailable when it could not be reached); and
 * drop those whose client left.
 */
static void
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
			exchange_refuse(ex, SQS_PERR_UNAVAILABLE,
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
			exchange_unforward(ex);
			ex->phase = SQS_DROPPED;
			MHD_resume_connection(ex->conn);
		}
		else
			ex->closed = false;
	}
}

/*
 * libmicrohttpd's access handler, called when the headers are in, for
 * each piece of the body, once the request is complete, and again after
 * a parked request is resumed.
 */
static enum MHD_Result
sqs_access(void *cls, struct MHD_Connection *conn, const char *url,
		   const char *method, const char *version, const char *upload_data,
		   size_t *upload_data_size, void **con_cls)
{
	SqsExchange *ex = *con_cls;
	MemoryContext old;
	enum MHD_Result ret = MHD_YES;

	if (ex == NULL)
	{
		ex = exchange_new(conn, url);
		*con_cls = ex;
	}
	ex->conn = conn;

	switch (ex->phase)
	{
		case SQS_ANSWERED:
			return exchange_queue(ex);
		case SQS_DROPPED:
			return MHD_NO;
		case SQS_PARKED:
		case SQS_DONE:
			*upload_data_size = 0;
			return MHD_YES;
		case SQS_READING:
			break;
	}

	old = MemoryContextSwitchTo(ex->cxt);
	if (!ex->started)
		ret = exchange_start(ex, method);
	else if (*upload_data_size > 0)
	{
		size_t		size = *upload_data_size;

		*upload_data_size = 0;
		ret = exchange_body(ex, upload_data, size);
	}
	else if (!exchange_complete(ex))
		ret = exchange_queue(ex);
	else if (exchange_serve(ex))
		ret = exchange_queue(ex);
	else if (ex->forward_url != NULL)
	{
		if (!exchange_forward(ex, false))
			ret = exchange_queue(ex);
	}
	else if (!exchange_park(ex))
		ret = exchange_queue(ex);
	MemoryContextSwitchTo(old);
	return ret;
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

/* A parked request whose client left: closed without being served. */
static void
exchange_drop(SqsExchange *ex)
{
	exchange_unpark(ex);
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
static void
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
		if (exchange_serve(ex))
		{
			exchange_unpark(ex);
			ex->phase = SQS_ANSWERED;
			MHD_resume_connection(ex->conn);
		}
		else if (ex->forward_url != NULL)
		{
			/* its queue moved to another node meanwhile */
			exchange_unpark(ex);
			if (!exchange_forward(ex, true))
			{
				ex->phase = SQS_ANSWERED;
				MHD_resume_connection(ex->conn);
			}
		}
		else if (expired && ex->resp.park_until <= now)
		{
			/* sqs_handle must answer once the time is over */
			elog(LOG, "queue sqs worker %d: request parked again after its time", sqs_index);
			exchange_unpark(ex);
			exchange_fail(ex, 500, "InternalError", "internal error");
			MHD_resume_connection(ex->conn);
		}
		else if (!exchange_park(ex))
		{
			ex->phase = SQS_ANSWERED;
			MHD_resume_connection(ex->conn);
		}
		MemoryContextSwitchTo(old);
	}
}

/*
 * The loop's WaitEventSet: latch, postmaster death, libmicrohttpd's epoll
 * descriptor and each parked connection's socket (for its close).  Built
 * again when the parked set changed, once per pass: O(parked).
 */
static void
sqs_build_wait_set(int mhd_fd)
{
	dlist_iter	it;
	int			size = 3 + sqs_nparked + sqs_nforwarded + sqs_forward_nsockets();

	if (sqs_wes != NULL)
		FreeWaitEventSet(sqs_wes);
	/* a set for the life of the process: no resource owner (17 on) */
#if PG_VERSION_NUM >= 170000
	sqs_wes = CreateWaitEventSet(NULL, size);
#else
	sqs_wes = CreateWaitEventSet(TopMemoryContext, size);
#endif
	AddWaitEventToSet(sqs_wes, WL_LATCH_SET, PGINVALID_SOCKET, MyLatch, NULL);
	AddWaitEventToSet(sqs_wes, WL_EXIT_ON_PM_DEATH, PGINVALID_SOCKET, NULL, NULL);
	AddWaitEventToSet(sqs_wes, WL_SOCKET_READABLE, mhd_fd, NULL, NULL);
	dlist_foreach(it, &sqs_parked)
	{
		SqsExchange *ex = dlist_container(SqsExchange, park_node, it.cur);

		if (ex->fd >= 0)
			AddWaitEventToSet(sqs_wes, WL_SOCKET_CLOSED, ex->fd, NULL, ex);
	}
	dlist_foreach(it, &sqs_forwarded)
	{
		SqsExchange *ex = dlist_container(SqsExchange, forward_node, it.cur);

		if (ex->fd >= 0)
			AddWaitEventToSet(sqs_wes, WL_SOCKET_CLOSED, ex->fd, NULL, ex);
	}
	sqs_forward_add_events(sqs_wes, &sqs_forward_marker);
	if (sqs_events == NULL)
		sqs_events = MemoryContextAlloc(TopMemoryContext, size * sizeof(WaitEvent));
	else if (size > sqs_wes_size)
		sqs_events = repalloc(sqs_events, size * sizeof(WaitEvent));
	sqs_wes_size = Max(size, sqs_wes_size);
	sqs_wes_stale = false;
}

/*
 * How long the loop may sleep: until libmicrohttpd's next timeout or the
 * earliest parked request's end; not at all when a parked request is due.
 */
static long
sqs_next_timeout(void)
{
	MHD_UNSIGNED_LONG_LONG mhd_ms;
	long		timeout = -1;
	TimestampTz now = 0;
	dlist_iter	it;

	if (MHD_get_timeout(sqs_daemon, &mhd_ms) == MHD_YES)
		timeout = (long) Min(mhd_ms, (MHD_UNSIGNED_LONG_LONG) INT_MAX);
	{
		long		fwd = sqs_forward_timeout();

		if (fwd >= 0 && (timeout < 0 || fwd < timeout))
			timeout = fwd;
	}
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
 * SIGTERM: the parked connections are closed (libmicrohttpd cannot stop
 * with suspended ones), the daemon stops (closing the listening socket and
 * every connection), the watcher goes.
 */
static void
sqs_shutdown(void)
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

		exchange_unforward(ex);
		ex->phase = SQS_DROPPED;
		MHD_resume_connection(ex->conn);
	}
	if (sqs_daemon != NULL)
		MHD_stop_daemon(sqs_daemon);
	sqs_daemon = NULL;
	queue_wait_watcher_detach(sqs_index);
}

/* Whatever way the worker ends, its watcher bits go with it. */
static void
sqs_at_exit(int code, Datum arg)
{
	queue_wait_watcher_detach(DatumGetInt32(arg));
}

/*
 * queue.sqs_request_memory (kB): the bytes of bodies a worker may hold;
 * and the bounds of each request's transaction (protocol.c).  At start and
 * at each reload.
 */
static void
sqs_read_settings(void)
{
	const char *v = GetConfigOption("queue.sqs_request_memory", true, false);

	sqs_body_budget = (size_t) (v ? atoi(v) : 65536) * 1024;
	if (sqs_body_budget < SQS_MAX_BODY)
		sqs_body_budget = SQS_MAX_BODY;
	sqs_read_request_bounds();	/* protocol.c's lock and time bounds */
	sqs_shares_read_settings(); /* each role's share (shares.c) */
}

/* Open files: 10,000 connections need far more than the usual soft limit. */
static void
sqs_raise_fd_limit(int max_connections)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) != 0)
		return;
	if (rl.rlim_cur < rl.rlim_max)
	{
		rl.rlim_cur = rl.rlim_max;
		if (setrlimit(RLIMIT_NOFILE, &rl) != 0)
			ereport(LOG,
					(errmsg("queue sqs worker %d: could not raise the open files limit: %m",
							sqs_index)));
		getrlimit(RLIMIT_NOFILE, &rl);
	}
	if (rl.rlim_cur != RLIM_INFINITY &&
		(rlim_t) max_connections + 100 > rl.rlim_cur)
		ereport(LOG,
				(errmsg("queue sqs worker %d: open files limit %lu is below queue.sqs_max_connections (%d)",
						sqs_index, (unsigned long) rl.rlim_cur, max_connections)));
}

/* Start libmicrohttpd on queue.sqs_listen, without threads, in epoll mode. */
static struct MHD_Daemon *
sqs_start_daemon(const char *listen, int max_connections)
{
	SqsListen	addr;
	const char *err = NULL;
	struct addrinfo hints;
	struct addrinfo *res = NULL;
	struct sockaddr_storage ss;
	char		port[16];
	const char *host;
	int			rc;
	unsigned int flags;
	struct MHD_Daemon *d;

	if (!sqs_parse_listen(listen, &addr, &err))
		ereport(FATAL,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid value for parameter \"queue.sqs_listen\": \"%s\"", listen),
				 errdetail("%s.", err)));
	if (addr.host[0] == '\0')
		host = "127.0.0.1";
	else if (strcmp(addr.host, "*") == 0)
		host = "0.0.0.0";
	else
		host = addr.host;
	snprintf(port, sizeof(port), "%d", addr.port);
	memset(&hints, 0, sizeof(hints));
	hints.ai_family = AF_UNSPEC;
	hints.ai_socktype = SOCK_STREAM;
	hints.ai_flags = AI_NUMERICSERV | AI_PASSIVE;
	rc = getaddrinfo(host, port, &hints, &res);
	if (rc != 0 || res == NULL)
		ereport(FATAL,
				(errmsg("queue sqs worker %d: could not resolve \"%s\": %s",
						sqs_index, host, gai_strerror(rc))));
	memset(&ss, 0, sizeof(ss));
	memcpy(&ss, res->ai_addr, Min(res->ai_addrlen, sizeof(ss)));
	freeaddrinfo(res);

	flags = MHD_USE_EPOLL | MHD_ALLOW_SUSPEND_RESUME | MHD_USE_ERROR_LOG;
	if (ss.ss_family == AF_INET6)
		flags |= MHD_USE_IPv6;
	MHD_set_panic_func(sqs_mhd_panic, NULL);
	d = MHD_start_daemon(flags, (uint16_t) addr.port, NULL, NULL, sqs_access, NULL,
						 MHD_OPTION_EXTERNAL_LOGGER, sqs_mhd_log, NULL,
						 MHD_OPTION_SOCK_ADDR, (struct sockaddr *) &ss,
						 MHD_OPTION_LISTENING_ADDRESS_REUSE, (unsigned int) 1,
						 MHD_OPTION_CONNECTION_LIMIT, (unsigned int) max_connections,
						 MHD_OPTION_CONNECTION_TIMEOUT, (unsigned int) SQS_CONNECTION_TIMEOUT,
						 MHD_OPTION_URI_LOG_CALLBACK, sqs_uri_log, NULL,
						 MHD_OPTION_NOTIFY_COMPLETED, sqs_completed, NULL,
						 MHD_OPTION_END);
	if (d == NULL)
		ereport(FATAL,
				(errmsg("queue sqs worker %d: could not listen on \"%s\"", sqs_index, listen)));
	return d;
}

/*
 * The worker's last start died connecting to its database (missing, most
 * likely: queue.sqs_database names none yet).  Rather than die again every
 * second, connect to no database, say so once in the log (one line for
 * all workers), and look for it with a back-off (1 s doubling to 10 s: a
 * look is one index probe of a shared catalog);
 * once it is there, end so that the postmaster starts the worker again
 * (bgw_restart_time), which then connects.
 */
static void
sqs_wait_for_database(const char *db)
{
	long		delay_ms = 1000;

	BackgroundWorkerInitializeConnection(NULL, NULL, 0);
	for (;;)
	{
		Oid			dboid;

		CHECK_FOR_INTERRUPTS();
		if (ConfigReloadPending)
		{
			ConfigReloadPending = false;
			ProcessConfigFile(PGC_SIGHUP);
		}
		StartTransactionCommand();
		dboid = get_database_oid(db, true);
		CommitTransactionCommand();
		if (OidIsValid(dboid))
			break;
		if (sqs_missing_log_once())
			ereport(LOG,
					(errmsg("queue sqs workers: database \"%s\" does not exist; the SQS endpoint waits for it", db),
					 errhint("Create the database, or set queue.sqs_database to one that exists (a restart is needed).")));
		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 delay_ms, PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
		delay_ms = Min(delay_ms * 2, 10 * 1000);
	}
	sqs_connect_end(sqs_index);
	ereport(LOG,
			(errmsg("queue sqs worker %d: database \"%s\" exists now; restarting to serve it",
					sqs_index, db)));
	proc_exit(1);
}

/*
 * A worker: connect, pin the settings, attach the watcher, listen, loop.
 *
 * Each pass: rebuild the wait set if the parked set changed; sleep until
 * the latch, a readable epoll descriptor, a parked client's close, or the
 * next timeout; handle interrupts and SIGHUP; serve the due parked
 * requests; then let libmicrohttpd accept, read, call the access handler
 * (new requests are served right there) and write.
 */
void
queue_sqs_main(Datum main_arg)
{
	const char *listen;
	const char *db;
	int			max_connections;
	int			mhd_fd;
	const union MHD_DaemonInfo *info;
	HASHCTL		ctl;

	sqs_index = DatumGetInt32(main_arg);
	pqsignal(SIGHUP, SignalHandlerForConfigReload);
	pqsignal(SIGTERM, die);
	BackgroundWorkerUnblockSignals();

	db = GetConfigOption("queue.sqs_database", false, false);
	if (db == NULL)
		db = "postgres";
	if (sqs_connect_begin(sqs_index))
		sqs_wait_for_database(db);	/* never returns */
	BackgroundWorkerInitializeConnection(db, NULL, 0);
	sqs_connect_end(sqs_index);
	queue_pin_process_settings();
	queue_wait_watcher_attach(sqs_index);
	before_shmem_exit(sqs_at_exit, Int32GetDatum(sqs_index));

	sqs_requests_cxt = AllocSetContextCreate(TopMemoryContext, "queue sqs requests",
											 ALLOCSET_DEFAULT_SIZES);
	memset(&ctl, 0, sizeof(ctl));
	ctl.keysize = sizeof(int);
	ctl.entrysize = sizeof(SqsSlotCount);
	ctl.hcxt = TopMemoryContext;
	sqs_slots = hash_create("queue sqs watched slots", 64, &ctl,
							HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);

	sqs_read_settings();
	listen = GetConfigOption("queue.sqs_listen", false, false);
	max_connections = atoi(GetConfigOption("queue.sqs_max_connections", false, false));
	sqs_raise_fd_limit(max_connections);
	sqs_daemon = sqs_start_daemon(listen, max_connections);
	info = MHD_get_daemon_info(sqs_daemon, MHD_DAEMON_INFO_EPOLL_FD);
	if (info == NULL)
		ereport(FATAL,
				(errmsg("queue sqs worker %d: libmicrohttpd has no epoll descriptor", sqs_index)));
	mhd_fd = info->epoll_fd;
	ereport(LOG,
			(errmsg("queue sqs worker %d listening on %s", sqs_index, listen)));

	for (;;)
	{
		int			n;
		long		timeout;

		if (sqs_wes_stale || sqs_forward_sockets_changed())
			sqs_build_wait_set(mhd_fd);
		timeout = sqs_next_timeout();
		pgstat_report_activity(STATE_IDLE, NULL);
		n = WaitEventSetWait(sqs_wes, timeout, sqs_events, sqs_wes_size,
							 PG_WAIT_EXTENSION);
		for (int i = 0; i < n; i++)
		{
			if (sqs_events[i].events & WL_LATCH_SET)
				ResetLatch(MyLatch);
			if (sqs_events[i].user_data == &sqs_forward_marker)
				sqs_forward_socket_ready(sqs_events[i].fd, sqs_events[i].events);
			else if ((sqs_events[i].events & WL_SOCKET_CLOSED) && sqs_events[i].user_data)
				((SqsExchange *) sqs_events[i].user_data)->closed = true;
		}
		if (ProcDiePending)
		{
			sqs_shutdown();
			CHECK_FOR_INTERRUPTS();
		}
		CHECK_FOR_INTERRUPTS();
		if (ConfigReloadPending)
		{
			ConfigReloadPending = false;
			ProcessConfigFile(PGC_SIGHUP);
			sqs_read_settings();
		}
		sqs_forwards_done();
		sqs_serve_parked();
		MHD_run(sqs_daemon);
		pgstat_report_stat(false);
	}
}
