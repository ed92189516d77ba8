/*-------------------------------------------------------------------------
 *
 * forward.c
 *	  On a Citus cluster, requests for a queue of another node go to that
 *	  node's endpoint (docs/citus.md "The SQS endpoint across nodes"):
 *	  libcurl's multi interface, driven by worker.c's event loop, so a
 *	  forwarded request holds a socket of the worker, never the worker.
 *
 * exchange.c starts a forward once protocol.c has verified the request and
 * found the queue's node (SqsResponse.forward_url); the request goes as it
 * was received (method, path and query, headers, body: its signature stays
 * valid, and the queue's node verifies it again), marked with
 * SQS_FORWARDED_HEADER so that it is never forwarded twice.  libcurl tells
 * which of its sockets it waits on and when its next timeout is; worker.c
 * puts those in its WaitEventSet and calls back here when one is ready.
 * A finished forward (its answer, or its failure) is handed back to
 * exchange.c, which answers the client with it.
 *
 * Bounds: SQS_FORWARDS_MAX forwards in flight per worker (exchange.c
 * answers ServiceUnavailable beyond), connecting at most
 * SQS_FORWARD_CONNECT_MS, the whole exchange at most SQS_FORWARD_TOTAL_MS
 * (a long poll's 20 s and a margin), an answer of at most
 * SQS_FORWARD_MAX_ANSWER bytes.  No signals (CURLOPT_NOSIGNAL).
 *
 * Built only with libcurl (QUEUE_SQS_CURL, src/sqs/Makefile); without it
 * sqs_forward_available is false and exchange.c answers such a request
 * ServiceUnavailable.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "lib/ilist.h"
#include "storage/latch.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#include "sqs.h"

#ifdef QUEUE_SQS_CURL
#include <curl/curl.h>

#define SQS_FORWARD_CONNECT_MS	1000
#define SQS_FORWARD_TOTAL_MS	((SQS_MAX_WAIT_SECONDS + 10) * 1000)
#define SQS_FORWARD_MAX_ANSWER	(2 * SQS_MAX_BODY)
#define SQS_FORWARD_MAX_SOCKETS	(2 * SQS_FORWARDS_MAX)

struct SqsForward
{
	CURL	   *easy;
	struct curl_slist *headers;
	void	   *owner;			/* exchange.c's SqsExchange */
	MemoryContext cxt;			/* the exchange's: the answer grows there */
	StringInfoData body;
	bool		overflow;
	char	   *content_type;
	SqsPair		pairs[2];		/* x-amzn-RequestId, x-amzn-query-error */
	int			npairs;
	dlist_node	node;
};

/* The sockets libcurl waits on, and for what (CURL_POLL_IN/OUT/INOUT) */
typedef struct SqsCurlSocket
{
	curl_socket_t fd;
	int			what;			/* 0: free entry */
} SqsCurlSocket;

static CURLM *multi;
static SqsCurlSocket sockets[SQS_FORWARD_MAX_SOCKETS];
static TimestampTz timer_due = 0;	/* 0: no timeout asked */
static bool sockets_changed = true;
static int	nforwards = 0;
static dlist_head forwards = DLIST_STATIC_INIT(forwards);

static int
on_socket(CURL *easy, curl_socket_t fd, int what, void *userp, void *socketp)
{
	int			free_slot = -1;

	for (int i = 0; i < SQS_FORWARD_MAX_SOCKETS; i++)
	{
		if (sockets[i].what != 0 && sockets[i].fd == fd)
		{
			sockets[i].what = (what == CURL_POLL_REMOVE) ? 0 : what;
			sockets_changed = true;
			return 0;
		}
		if (sockets[i].what == 0 && free_slot < 0)
			free_slot = i;
	}
	if (what == CURL_POLL_REMOVE)
		return 0;
	if (free_slot < 0)
		return -1;				/* more sockets than forwards allow: fail it */
	sockets[free_slot].fd = fd;
	sockets[free_slot].what = what;
	sockets_changed = true;
	return 0;
}

static int
on_timer(CURLM *m, long timeout_ms, void *userp)
{
	if (timeout_ms < 0)
		timer_due = 0;
	else
		timer_due = TimestampTzPlusMilliseconds(GetCurrentTimestamp(), timeout_ms);
	return 0;
}

static size_t
on_body(char *data, size_t size, size_t n, void *userp)
{
	SqsForward *f = userp;
	size_t		len = size * n;

	if (f->body.len + len > SQS_FORWARD_MAX_ANSWER)
	{
		f->overflow = true;
		return 0;				/* aborts the transfer */
	}
	appendBinaryStringInfo(&f->body, data, len);
	return len;
}

/* One header line of the answer: its status line starts the headers again. */
static size_t
on_header(char *data, size_t size, size_t n, void *userp)
{
	SqsForward *f = userp;
	size_t		len = size * n;
	const char *colon;
	MemoryContext old;
	char	   *value;
	size_t		vlen;

	if (len >= 5 && strncmp(data, "HTTP/", 5) == 0)
	{
		f->content_type = NULL;
		f->npairs = 0;
		return len;
	}
	colon = memchr(data, ':', len);
	if (colon == NULL)
		return len;
	value = (char *) colon + 1;
	vlen = len - (value - data);
	while (vlen > 0 && (*value == ' ' || *value == '\t'))
		value++, vlen--;
	while (vlen > 0 && (value[vlen - 1] == '\r' || value[vlen - 1] == '\n' || value[vlen - 1] == ' '))
		vlen--;
	old = MemoryContextSwitchTo(f->cxt);
	if (colon - data == 12 && pg_strncasecmp(data, "content-type", 12) == 0)
		f->content_type = pnstrdup(value, vlen);
	else if (f->npairs < lengthof(f->pairs) &&
			 ((colon - data == 16 && pg_strncasecmp(data, "x-amzn-RequestId", 16) == 0) ||
			  (colon - data == 18 && pg_strncasecmp(data, "x-amzn-query-error", 18) == 0)))
	{
		f->pairs[f->npairs].name = pnstrdup(data, colon - data);
		f->pairs[f->npairs].value = pnstrdup(value, vlen);
		f->npairs++;
	}
	MemoryContextSwitchTo(old);
	return len;
}

bool
sqs_forward_available(void)
{
	return true;
}

/* Headers not passed on: the hop's own, and those libcurl sets. */
static bool
hop_header(const char *lname)
{
	static const char *const hop[] = {
		"host", "content-length", "transfer-encoding", "connection", "keep-alive",
		"expect", "te", "trailer", "upgrade", "proxy-authorization", "proxy-connection",
		SQS_FORWARDED_HEADER
	};

	for (int i = 0; i < lengthof(hop); i++)
		if (strcmp(lname, hop[i]) == 0)
			return true;
	return false;
}

/*
 * Start forwarding req to the endpoint base_url ("http://host:port"), for
 * owner; the answer will grow in cxt (which must outlive the forward).
 * NULL when it cannot start (too many in flight, or libcurl refused).
 */
SqsForward *
sqs_forward_start(const char *base_url, const SqsRequest *req, void *owner, MemoryContext cxt)
{
	SqsForward *f;
	StringInfoData url;
	StringInfoData line;
	const char *host = sqs_header(req, "host");
	bool		has_ctype = sqs_header(req, "content-type") != NULL;
	bool		has_accept = sqs_header(req, "accept") != NULL;
	MemoryContext old;
	size_t		blen;

	if (nforwards >= SQS_FORWARDS_MAX)
		return NULL;
	if (multi == NULL)
	{
		if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK ||
			(multi = curl_multi_init()) == NULL)
			return NULL;
		curl_multi_setopt(multi, CURLMOPT_SOCKETFUNCTION, on_socket);
		curl_multi_setopt(multi, CURLMOPT_TIMERFUNCTION, on_timer);
	}

	old = MemoryContextSwitchTo(cxt);
	f = palloc0(sizeof(SqsForward));
	f->owner = owner;
	f->cxt = cxt;
	initStringInfo(&f->body);
	f->easy = curl_easy_init();
	if (f->easy == NULL)
	{
		MemoryContextSwitchTo(old);
		return NULL;
	}

	initStringInfo(&url);
	blen = strlen(base_url);
	while (blen > 0 && base_url[blen - 1] == '/')
		blen--;
	appendBinaryStringInfo(&url, base_url, blen);
	appendStringInfoString(&url, req->raw_path && req->raw_path[0] ? req->raw_path : "/");
	if (req->raw_query && req->raw_query[0])
		appendStringInfo(&url, "?%s", req->raw_query);

	initStringInfo(&line);
	for (int i = 0; i < req->nheaders; i++)
	{
		if (hop_header(req->headers[i].name))
			continue;
		resetStringInfo(&line);
		appendStringInfo(&line, "%s: %s", req->headers[i].name, req->headers[i].value);
		f->headers = curl_slist_append(f->headers, line.data);
	}
	resetStringInfo(&line);
	appendStringInfo(&line, "Host: %s", host ? host : "localhost");
	f->headers = curl_slist_append(f->headers, line.data);
	f->headers = curl_slist_append(f->headers, SQS_FORWARDED_HEADER ": 1");
	f->headers = curl_slist_append(f->headers, "Expect:");
	if (!has_ctype)
		f->headers = curl_slist_append(f->headers, "Content-Type:");
	if (!has_accept)
		f->headers = curl_slist_append(f->headers, "Accept:");

	curl_easy_setopt(f->easy, CURLOPT_URL, url.data);
	curl_easy_setopt(f->easy, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(f->easy, CURLOPT_HTTP_VERSION, (long) CURL_HTTP_VERSION_1_1);
	curl_easy_setopt(f->easy, CURLOPT_PROTOCOLS_STR, "http,https");
	curl_easy_setopt(f->easy, CURLOPT_FOLLOWLOCATION, 0L);
	curl_easy_setopt(f->easy, CURLOPT_CONNECTTIMEOUT_MS, (long) SQS_FORWARD_CONNECT_MS);
	curl_easy_setopt(f->easy, CURLOPT_TIMEOUT_MS, (long) SQS_FORWARD_TOTAL_MS);
	curl_easy_setopt(f->easy, CURLOPT_HTTPHEADER, f->headers);
	curl_easy_setopt(f->easy, CURLOPT_WRITEFUNCTION, on_body);
	curl_easy_setopt(f->easy, CURLOPT_WRITEDATA, f);
	curl_easy_setopt(f->easy, CURLOPT_HEADERFUNCTION, on_header);
	curl_easy_setopt(f->easy, CURLOPT_HEADERDATA, f);
	curl_easy_setopt(f->easy, CURLOPT_PRIVATE, f);
	if (strcmp(req->method, "GET") == 0)
		curl_easy_setopt(f->easy, CURLOPT_HTTPGET, 1L);
	else
	{
		/* the body lives with the request, as long as the forward */
		curl_easy_setopt(f->easy, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t) req->body_len);
		curl_easy_setopt(f->easy, CURLOPT_POSTFIELDS, req->body ? req->body : "");
		if (strcmp(req->method, "POST") != 0)
			curl_easy_setopt(f->easy, CURLOPT_CUSTOMREQUEST, req->method);
	}
	pfree(url.data);
	pfree(line.data);
	MemoryContextSwitchTo(old);

	if (curl_multi_add_handle(multi, f->easy) != CURLM_OK)
	{
		curl_slist_free_all(f->headers);
		curl_easy_cleanup(f->easy);
		return NULL;
	}
	dlist_push_tail(&forwards, &f->node);
	nforwards++;
	return f;
}

/* Stop a forward (its client left, or the worker ends); f is freed with its context. */
void
sqs_forward_cancel(SqsForward *f)
{
	if (f == NULL || f->easy == NULL)
		return;
	curl_multi_remove_handle(multi, f->easy);
	curl_easy_cleanup(f->easy);
	curl_slist_free_all(f->headers);
	f->easy = NULL;
	f->headers = NULL;
	dlist_delete(&f->node);
	nforwards--;
}

/* Whether the set of sockets to wait on changed since the last sqs_forward_add_events. */
bool
sqs_forward_sockets_changed(void)
{
	return sockets_changed;
}

int
sqs_forward_nsockets(void)
{
	int			n = 0;

	for (int i = 0; i < SQS_FORWARD_MAX_SOCKETS; i++)
		if (sockets[i].what != 0)
			n++;
	return n;
}

/* Put libcurl's sockets in the loop's set; their events come back by marker. */
void
sqs_forward_add_events(WaitEventSet *wes, void *marker)
{
	for (int i = 0; i < SQS_FORWARD_MAX_SOCKETS; i++)
	{
		uint32		ev = 0;

		if (sockets[i].what == 0)
			continue;
		if (sockets[i].what & CURL_POLL_IN)
			ev |= WL_SOCKET_READABLE;
		if (sockets[i].what & CURL_POLL_OUT)
			ev |= WL_SOCKET_WRITEABLE;
		AddWaitEventToSet(wes, ev, sockets[i].fd, NULL, marker);
	}
	sockets_changed = false;
}

/* A socket of libcurl's is ready (events as WaitEventSetWait gave them). */
void
sqs_forward_socket_ready(pgsocket fd, uint32 events)
{
	int			mask = 0;
	int			running;

	if (multi == NULL)
		return;
	if (events & WL_SOCKET_READABLE)
		mask |= CURL_CSELECT_IN;
	if (events & WL_SOCKET_WRITEABLE)
		mask |= CURL_CSELECT_OUT;
	curl_multi_socket_action(multi, fd, mask, &running);
}

/* How long the loop may sleep for libcurl's sake: -1 forever, else ms. */
long
sqs_forward_timeout(void)
{
	TimestampTz now;

	if (multi == NULL || timer_due == 0)
		return -1;
	now = GetCurrentTimestamp();
	if (timer_due <= now)
		return 0;
	return (long) ((timer_due - now + 999) / 1000);
}

/*
 * Run libcurl's timeouts when due, then hand back one finished forward:
 * its owner, and the answer (status 0 when it failed).  False: none.
 */
bool
sqs_forward_next_done(void **owner, int *status, const char **content_type,
					  const char **body, size_t *len, const SqsPair **pairs, int *npairs)
{
	CURLMsg    *msg;
	int			left;
	int			running;

	if (multi == NULL)
		return false;
	if (timer_due != 0 && timer_due <= GetCurrentTimestamp())
	{
		timer_due = 0;
		curl_multi_socket_action(multi, CURL_SOCKET_TIMEOUT, 0, &running);
	}
	while ((msg = curl_multi_info_read(multi, &left)) != NULL)
	{
		SqsForward *f = NULL;
		long		code = 0;

		if (msg->msg != CURLMSG_DONE)
			continue;
		curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, (char **) &f);
		if (f == NULL)
			continue;
		if (msg->data.result == CURLE_OK && !f->overflow)
			curl_easy_getinfo(f->easy, CURLINFO_RESPONSE_CODE, &code);
		else
			ereport(LOG,
					(errmsg("queue sqs worker: forwarding a request to its queue's node failed: %s",
							f->overflow ? "answer too large" : curl_easy_strerror(msg->data.result))));
		*owner = f->owner;
		*status = (code >= 100 && code <= 599) ? (int) code : 0;
		*content_type = f->content_type;
		*body = f->body.data;
		*len = f->body.len;
		*pairs = f->pairs;
		*npairs = f->npairs;
		sqs_forward_cancel(f);
		return true;
	}
	return false;
}

#else							/* !QUEUE_SQS_CURL */

bool
sqs_forward_available(void)
{
	return false;
}

SqsForward *
sqs_forward_start(const char *base_url, const SqsRequest *req, void *owner, MemoryContext cxt)
{
	return NULL;
}

void
sqs_forward_cancel(SqsForward *f)
{
}

bool
sqs_forward_sockets_changed(void)
{
	return false;
}

int
sqs_forward_nsockets(void)
{
	return 0;
}

void
sqs_forward_add_events(WaitEventSet *wes, void *marker)
{
}

void
sqs_forward_socket_ready(pgsocket fd, uint32 events)
{
}

long
sqs_forward_timeout(void)
{
	return -1;
}

bool
sqs_forward_next_done(void **owner, int *status, const char **content_type,
					  const char **body, size_t *len, const SqsPair **pairs, int *npairs)
{
	return false;
}

#endif							/* QUEUE_SQS_CURL */
