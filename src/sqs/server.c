/*-------------------------------------------------------------------------
 *
 * server.c
 *	  The SQS endpoint's HTTP server: libmicrohttpd's daemon inside each
 *	  worker's own event loop (no threads), and its callbacks, which take a
 *	  request in (request line, headers, body, decoded parameters) until it
 *	  has fully arrived, then hand it to exchange.c and queue its answer.
 *
 * queue.sqs_listen is parsed here (sqs_parse_listen: for worker.c's check
 * in the postmaster too); each worker binds it with SO_REUSEPORT, so the
 * kernel spreads connections over the workers.  The daemon runs in epoll
 * mode: worker.c's loop waits on its descriptor and calls sqs_daemon_run,
 * in which libmicrohttpd accepts, reads, calls the access handler (new
 * requests are served right there) and writes.  Bodies are bounded per
 * request (SQS_MAX_BODY) and per worker (queue.sqs_request_memory), and
 * only a request that names a key has its body read at all.
 *
 * What it refuses itself (a body over the cap, parameters it cannot decode,
 * an anonymous body, no budget left) it refuses with wire.c's error codes
 * through exchange.c, which answers every request.
 *
 * May call: exchange.c, libmicrohttpd, PostgreSQL.  Called by: worker.c
 * (the daemon's start, runs, timeout and stop; the listen address; the
 * body budget's setting) and libmicrohttpd (its callbacks).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <limits.h>
#include <netdb.h>
#include <sys/socket.h>

#include "common/pg_prng.h"
#include "miscadmin.h"
#include "utils/guc.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#include "common/compat.h"
#include "server.h"
#include "sqs.h"

/* When queue.sqs_listen names no port */
#define SQS_DEFAULT_PORT		9324
/* An idle or stalled connection is closed after this (seconds) */
#define SQS_CONNECTION_TIMEOUT	60
/* Decoded parameters of one request, at most (bounds the parsing) */
#define SQS_MAX_PARAMS			4096
/* libmicrohttpd's form parser's buffer: bounds a parameter's name */
#define SQS_FORM_BUFFER			4096

static struct MHD_Daemon *sqs_daemon;
static MemoryContext sqs_requests_cxt;
/*
 * Request bodies: queue.sqs_request_memory (bytes) a worker may hold for
 * all its connections together, and what they hold (a declared body is
 * reserved whole before a byte of it is read; a chunked one as it comes).
 */
static size_t sqs_body_budget;
static size_t sqs_body_reserved;

/*
 * Parse queue.sqs_listen: "port", ":port", "host:port", "[v6]:port", or a
 * host alone (the default port).  False with *err set when malformed.
 */
bool
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

/* Everything of a request goes, at its completion or its connection's end. */
static void
exchange_free(SqsExchange *ex)
{
	sqs_exchange_unpark(ex);
	sqs_exchange_unforward(ex);
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
			sqs_exchange_refuse(ex, SQS_PERR_TOO_LARGE,
								"the request body is larger than 4194304 bytes");
			return sqs_exchange_queue(ex);
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
		sqs_exchange_refuse(ex, SQS_ERR_MISSING_AUTHENTICATION_TOKEN,
							"Request is missing Authentication Token");
		return sqs_exchange_queue(ex);
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
			sqs_exchange_refuse(ex, SQS_PERR_UNAVAILABLE,
								"The endpoint is reading too many request bodies; try again later.");
			return sqs_exchange_queue(ex);
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
 * Whether the NUL of form-encoded text is in a message's body: the value
 * of a parameter named MessageBody, or ending ".MessageBody" (a batch
 * entry's).
 */
static bool
form_nul_in_body(const char *s, size_t len)
{
	size_t		start = 0;

	while (start < len)
	{
		size_t		end = start;
		size_t		eq;

		while (end < len && s[end] != '&')
			end++;
		for (eq = start; eq < end && s[eq] != '='; eq++)
			;
		if (eq < end && form_has_nul(s + eq + 1, end - eq - 1))
		{
			size_t		nlen = eq - start;

			return (nlen == 11 && strncmp(s + start, "MessageBody", 11) == 0) ||
				(nlen > 12 && strncmp(s + eq - 12, ".MessageBody", 12) == 0);
		}
		start = end + 1;
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
		sqs_exchange_refuse(ex, SQS_PERR_MALFORMED_QUERY,
							"the request has more than 4096 parameters");
		return false;
	}
	if (ex->form_bad)
	{
		sqs_exchange_refuse(ex, SQS_PERR_MALFORMED_QUERY,
							"the form-encoded body is malformed");
		return false;
	}

	q = strchr(ex->raw_uri, '?');
	if ((q != NULL && form_has_nul(q, strlen(q))) ||
		(form_body && form_has_nul(ex->body.data, ex->body.len)))
	{
		/* in a message's body, SQS's answer to a character it refuses */
		if ((q != NULL && form_nul_in_body(q + 1, strlen(q + 1))) ||
			(form_body && form_nul_in_body(ex->body.data, ex->body.len)))
			sqs_exchange_refuse(ex, SQS_ERR_INVALID_MESSAGE_CONTENTS, SQS_NUL_IN_MESSAGE);
		else
			sqs_exchange_refuse(ex, SQS_PERR_MALFORMED_QUERY,
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
			return sqs_exchange_queue(ex);
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
		ret = sqs_exchange_queue(ex);
	else if (sqs_exchange_serve(ex))
		ret = sqs_exchange_queue(ex);
	else if (ex->forward_url != NULL)
	{
		if (!sqs_exchange_forward(ex, false))
			ret = sqs_exchange_queue(ex);
	}
	else if (!sqs_exchange_park(ex))
		ret = sqs_exchange_queue(ex);
	MemoryContextSwitchTo(old);
	return ret;
}

/*
 * queue.sqs_request_memory (kB): the bytes of bodies a worker may hold.
 * At start and at each reload (worker.c).
 */
void
sqs_read_body_budget(void)
{
	const char *v = GetConfigOption("queue.sqs_request_memory", true, false);

	sqs_body_budget = (size_t) (v ? atoi(v) : 65536) * 1024;
	if (sqs_body_budget < SQS_MAX_BODY)
		sqs_body_budget = SQS_MAX_BODY;
}

/*
 * Start libmicrohttpd on queue.sqs_listen, without threads, in epoll mode;
 * its epoll descriptor, for worker.c's wait set.
 */
int
sqs_daemon_start(const char *listen, int max_connections)
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
	const union MHD_DaemonInfo *info;

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

	/* every request's state lives below it (exchange_new) */
	sqs_requests_cxt = AllocSetContextCreate(TopMemoryContext, "queue sqs requests",
											 ALLOCSET_DEFAULT_SIZES);
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
	sqs_daemon = d;
	info = MHD_get_daemon_info(sqs_daemon, MHD_DAEMON_INFO_EPOLL_FD);
	if (info == NULL)
		ereport(FATAL,
				(errmsg("queue sqs worker %d: libmicrohttpd has no epoll descriptor", sqs_index)));
	return info->epoll_fd;
}

/*
 * One turn of the daemon: accept, read, call the access handler, write
 * (MHD_run; worker.c's loop, each pass).
 */
void
sqs_daemon_run(void)
{
	MHD_run(sqs_daemon);
}

/* libmicrohttpd's next timeout (milliseconds), or -1 when it has none */
long
sqs_daemon_timeout(void)
{
	MHD_UNSIGNED_LONG_LONG mhd_ms;

	if (MHD_get_timeout(sqs_daemon, &mhd_ms) == MHD_YES)
		return (long) Min(mhd_ms, (MHD_UNSIGNED_LONG_LONG) INT_MAX);
	return -1;
}

/*
 * SIGTERM, once exchange.c has closed the suspended connections: the
 * daemon stops, closing the listening socket and every connection.
 */
void
sqs_daemon_stop(void)
{
	if (sqs_daemon != NULL)
		MHD_stop_daemon(sqs_daemon);
	sqs_daemon = NULL;
}
