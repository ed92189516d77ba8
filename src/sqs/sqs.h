/*-------------------------------------------------------------------------
 *
 * sqs.h
 *	  The SQS endpoint (DESIGN.md "SQS API"): Amazon SQS's HTTP API served
 *	  by background workers, in a library of its own (queue_sqs), so the
 *	  core library has no HTTP dependency.
 *
 * Rooms of this folder, top to bottom (each may call only those below it):
 *	  worker.c	 the workers as processes: registration, start, settings,
 *				 each one's event loop (one WaitEventSet, no threads)
 *	  server.c	 libmicrohttpd's daemon in that loop: requests in
 *	  exchange.c a request once it has arrived: served, answered (errors
 *				 too, from wire.c's table through protocol.c), parked long
 *				 polls and lock retries, forwards; server.h is what these
 *				 three share, top to bottom
 *	  forward.c  on a Citus cluster, requests for another node's queue sent
 *				 on to that node's endpoint by libcurl's multi interface,
 *				 driven by worker.c's loop
 *	  protocol.c one request: which protocol (AWS JSON 1.0 or Query), its
 *				 transaction, authentication, the action, the answer in the
 *				 request's protocol (JSON or XML), SQS's errors; whether
 *				 to forward it asks the core (storage/citus.c, core_api.h)
 *	  query.c	 the Query protocol's own parts: parameters folded into the
 *				 JSON input shape, the output shape as XML, the queue a
 *				 path names (query.h: what it offers protocol.c alone)
 *	  actions.c  each SQS action as calls of the SQL API, as the key's role:
 *				 actions.c dispatches to its rooms, queues.c, attributes.c,
 *				 send.c, receive.c, settle.c, move_tasks.c, over
 *				 statements.c and shape.c (actions.h: what they share)
 *	  sigv4.c	 AWS Signature Version 4, the keys' secrets (via the core)
 *	  digest.c	 SQS's MD5 digests of bodies and message attributes
 *	  wire.c	 SQS's errors (table, sqs_fail) and a request's headers: the
 *				 vocabulary every file above shares
 *	  shared.c	 the workers' shared memory: recent purges (PurgeQueue's
 *				 minute), workers that died connecting to their database
 *	  shares.c	 each role's share of a worker's parked long polls and
 *				 forward slots
 * Below them: PostgreSQL, libmicrohttpd (server.c and exchange.c only),
 * libcurl (forward.c only, when built with it), OpenSSL, and the few
 * functions the core exports for this library (core_api.h).  Nothing in
 * the core includes this file.
 *
 *-------------------------------------------------------------------------
 */
#ifndef QUEUE_SQS_H
#define QUEUE_SQS_H

#include "common/compat.h"				/* pg_noreturn before PostgreSQL 16 */
#include "lib/stringinfo.h"
#include "utils/elog.h"
#include "utils/jsonb.h"
#include "utils/timestamp.h"

/* SQS's wire limits (REFERENCE.md 1.7, DESIGN.md "SQS API") */
#define SQS_MAX_BATCH			10
#define SQS_MAX_WAIT_SECONDS	20
#define SQS_MAX_DELAY_SECONDS	900
#define SQS_MAX_BODY			(4 * 1024 * 1024)	/* HTTP request body cap */
#define SQS_MAX_SKEW_SECS		(15 * 60)

typedef struct SqsPair			/* a header or a decoded parameter */
{
	char	   *name;
	char	   *value;
} SqsPair;

/*
 * One request as server.c hands it over: everything is in the memory
 * context the call runs in, or lives as long as the request.
 */
typedef struct SqsRequest
{
	const char *method;			/* "POST", "GET", ... */
	const char *raw_path;		/* request line's path, still percent-encoded */
	const char *raw_query;		/* after '?', as received; "" when none */
	int			nheaders;
	SqsPair    *headers;		/* names lower-cased, values as received */
	int			nparams;
	SqsPair    *params;			/* decoded query-string and form-body params,
								 * in order (Query protocol) */
	const char *body;			/* raw body bytes (signed as they are) */
	size_t		body_len;
	TimestampTz started_at;		/* when the request had fully arrived */
	const char *peer;			/* client address, for logs */
} SqsRequest;

/* Who a verified request runs as. */
typedef struct SqsAuth
{
	Oid			role;
	char		access_key_id[129];
	char		region[64];		/* the credential scope's region */
	char		service[4];		/* the scope's service: "sqs", or "sts" */
} SqsAuth;

/*
 * What protocol.c answers.  A ReceiveMessage that found nothing and may
 * still wait sets park: exchange.c keeps the connection open without a
 * response and calls sqs_handle again with the same request when the
 * queue's wait slot generation moves away from park_generation (a commit
 * woke the queue) or at park_until, whichever comes first.
 */
typedef struct SqsResponse
{
	int			status;			/* HTTP status */
	const char *content_type;
	StringInfoData body;
	int			nheaders;
	SqsPair		headers[4];		/* e.g. x-amzn-query-error */
	bool		park;
	int64		park_queue_id;
	uint64		park_generation;
	TimestampTz park_until;
	bool		lock_retry;		/* it met a lock (queue.sqs_lock_timeout):
								 * the answer is ServiceUnavailable, which
								 * exchange.c may instead try again later */
	char	   *forward_url;	/* on a Citus cluster, the endpoint of the
								 * queue's node: exchange.c forwards the request
								 * there as received and relays the answer */
	bool		forward_receive;	/* ... a ReceiveMessage, which may wait there */
	Oid			role;			/* the verified request's role (shares.c);
								 * InvalidOid before verification */
} SqsResponse;

/* The header a forwarded request carries: it is never forwarded again. */
#define SQS_FORWARDED_HEADER	"x-queue-forwarded"

/*
 * The errors of SQS on the wire (REFERENCE.md 1.7).  wire.c holds the
 * table: JSON __type, Query code, HTTP status, Sender or Receiver.
 */
typedef enum SqsError
{
	SQS_ERR_NONE = 0,
	SQS_ERR_QUEUE_DOES_NOT_EXIST,
	SQS_ERR_QUEUE_NAME_EXISTS,
	SQS_ERR_INVALID_PARAMETER_VALUE,
	SQS_ERR_MISSING_PARAMETER,
	SQS_ERR_ACCESS_DENIED,
	SQS_ERR_BATCH_ENTRY_IDS_NOT_DISTINCT,
	SQS_ERR_BATCH_REQUEST_TOO_LONG,
	SQS_ERR_EMPTY_BATCH_REQUEST,
	SQS_ERR_INVALID_BATCH_ENTRY_ID,
	SQS_ERR_MESSAGE_NOT_INFLIGHT,
	SQS_ERR_PURGE_QUEUE_IN_PROGRESS,
	SQS_ERR_QUEUE_DELETED_RECENTLY,
	SQS_ERR_TOO_MANY_ENTRIES_IN_BATCH_REQUEST,
	SQS_ERR_UNSUPPORTED_OPERATION,
	SQS_ERR_RECEIPT_HANDLE_IS_INVALID,
	SQS_ERR_OVER_LIMIT,
	SQS_ERR_INVALID_ATTRIBUTE_NAME,
	SQS_ERR_INVALID_ATTRIBUTE_VALUE,
	SQS_ERR_INVALID_MESSAGE_CONTENTS,
	SQS_ERR_RESOURCE_NOT_FOUND,		/* move tasks */
	SQS_ERR_INVALID_ACTION,			/* unknown or unsupported action */
	SQS_ERR_INVALID_CLIENT_TOKEN_ID,	/* 403s from here on */
	SQS_ERR_SIGNATURE_DOES_NOT_MATCH,
	SQS_ERR_INCOMPLETE_SIGNATURE,
	SQS_ERR_MISSING_AUTHENTICATION_TOKEN,
	SQS_ERR_REQUEST_EXPIRED,
	SQS_ERR_INTERNAL_ERROR,			/* 500 */
	SQS_ERR_NUM
} SqsError;

/*
 * Errors of the protocol itself, beyond sqs.h's SqsError (protocol.c's,
 * and HTTP's that server.c refuses before sqs_handle: they index the same
 * table, wire.c).
 */
#define SQS_PERR_SERIALIZATION		(SQS_ERR_NUM + 0)	/* malformed JSON */
#define SQS_PERR_MISSING_ACTION		(SQS_ERR_NUM + 1)	/* no action at all */
#define SQS_PERR_UNAVAILABLE		(SQS_ERR_NUM + 2)	/* retry later */
#define SQS_PERR_TOO_LARGE			(SQS_ERR_NUM + 3)	/* body over SQS_MAX_BODY */
#define SQS_PERR_MALFORMED_QUERY	(SQS_ERR_NUM + 4)	/* parameters unusable */
#define SQS_PERR_NUM				(SQS_ERR_NUM + 5)

/* SQS's words for a NUL in a message's body (server.c, protocol.c) */
#define SQS_NUL_IN_MESSAGE \
	"Invalid binary character '#x0' was found in the message body, the set of allowed characters is " \
	"#x9 | #xA | #xD | #x20 to #xD7FF | #xE000 to #xFFFD | #x10000 to #x10FFFF"

typedef struct SqsErrorInfo
{
	const char *json_type;		/* AWS JSON 1.0 __type */
	const char *query_code;		/* Query <Code>, x-amzn-query-error */
	int			status;			/* HTTP status */
	bool		sender;			/* Sender (client) or Receiver fault */
	int			sqlstate;		/* what sqs_fail raises it as */
} SqsErrorInfo;

/*
 * wire.c, the bottom of this folder: SQS's error table, sqs_fail and what
 * catches it, a request's headers.  Every file above may call it; it calls
 * only PostgreSQL.
 */
extern const SqsErrorInfo *sqs_error_info(int err);
extern int	sqs_fail_raised(const ErrorData *edata);
extern void sqs_fail_forget(void);
extern const char *sqs_header(const SqsRequest *req, const char *lname);

/* shared.c: the workers' shared memory (PostgreSQL only below it) */
extern void sqs_shared_request(void);
extern bool sqs_purge_note(const char *queue_name, TimestampTz now);
extern bool sqs_connect_begin(int index);
extern void sqs_connect_end(int index);
extern bool sqs_missing_log_once(void);

/*
 * forward.c: forwards to another node's endpoint (Citus).  At most
 * SQS_FORWARDS_MAX in flight per worker.  Without libcurl,
 * sqs_forward_available is false and nothing starts.
 */
#define SQS_FORWARDS_MAX		256
/* ... of which forwarded ReceiveMessage calls never hold these (shares.c) */
#define SQS_FORWARDS_SHORT		64
typedef struct SqsForward SqsForward;
struct WaitEventSet;
extern bool sqs_forward_available(void);
extern SqsForward *sqs_forward_start(const char *base_url, const SqsRequest *req,
									 void *owner, MemoryContext cxt);
extern void sqs_forward_cancel(SqsForward *f);
extern bool sqs_forward_sockets_changed(void);
extern int	sqs_forward_nsockets(void);
extern void sqs_forward_add_events(struct WaitEventSet *wes, void *marker);
extern void sqs_forward_socket_ready(pgsocket fd, uint32 events);
extern long sqs_forward_timeout(void);
extern bool sqs_forward_next_done(void **owner, int *status, const char **content_type,
								  const char **body, size_t *len, const SqsPair **pairs,
								  int *npairs);

/*
 * protocol.c: serve one request completely (its own transaction or
 * transactions; never throws: every failure becomes an SQS error answer).
 */
extern void sqs_handle(const SqsRequest *req, SqsResponse *resp);
/* The settings that bound a request's transaction, read again on reload */
extern void sqs_read_request_bounds(void);
/*
 * An SQS error the worker answers itself, before or around sqs_handle
 * (exchange.c), rendered from wire.c's table as every error is (JSON when
 * json, else Query XML).
 */
extern void sqs_refuse(SqsResponse *resp, bool json, int err,
					   const char *message, const char *request_id);

/*
 * Raise an SQS error from the actions or sigv4.c (wire.c): an ereport(ERROR)
 * that protocol.c catches and answers with err's code and this message.
 */
pg_noreturn extern void sqs_fail(SqsError err, const char *fmt,...) pg_attribute_printf(2, 3);

/*
 * What an action sees.  input is the action's input shape as AWS JSON 1.0
 * sends it; a Query request's flattened parameters are folded into the
 * same shape first (query.c), with every scalar a JSON string, so
 * actions read numbers and booleans from either a JSON number/boolean or a
 * string.
 */
typedef struct SqsCall
{
	const SqsRequest *req;
	SqsAuth		auth;
	const char *action;			/* "SendMessage", ... */
	Jsonb	   *input;
	bool		query_protocol;
	const char *host;			/* Host header, for queue URLs */
	const char *account_id;		/* queue.sqs_account_id */
	const char *public_url;		/* queue.sqs_public_url; NULL or "": none */
	const char *path_queue;		/* Query: the queue the request path names
								 * (/<account>/<queue>), used when there is
								 * no QueueUrl; NULL when none */
} SqsCall;

/*
 * actions.c: run one action, inside a transaction protocol.c started, SPI
 * connected, already as the key's role.  On success append the output
 * shape as a JSON object to out (the JSON protocol's body; query.c
 * turns it into XML for Query).  Client errors: sqs_fail.  May set
 * resp->park (ReceiveMessage).  False: no such action.
 */
extern bool sqs_run_action(SqsCall *call, StringInfo out, SqsResponse *resp);
/* The queue an action addresses (NULL: none), for routing on a Citus cluster */
extern char *sqs_addressed_queue(SqsCall *call);
/* shape.c: the queue URL and ARN of a queue name */
extern char *sqs_queue_url(const SqsCall *call, const char *queue_name);
extern char *sqs_queue_arn(const SqsCall *call, const char *queue_name);

/*
 * sigv4.c: verify a request's signature (header or presigned form).
 * Inside a transaction, SPI connected, still as the worker's superuser:
 * looks the key up with the core's queue._access_key_secret.  Fills auth;
 * failures: sqs_fail with one of the 403 errors.
 */
extern void sqs_verify(const SqsRequest *req, TimestampTz now, SqsAuth *auth);

/* digest.c: lowercase hex MD5s (33 bytes with the NUL) */
extern void sqs_md5_hex(const char *data, size_t len, char *hex);
/*
 * MD5OfMessageAttributes of an SQS MessageAttributes object
 * ({"name": {"DataType": ..., "StringValue"|"BinaryValue": ...}}, binary
 * values base64 as on the wire); false when attrs has none.
 */
extern bool sqs_md5_of_attributes(Jsonb *attrs, char *hex);

/*
 * shares.c: each role's share of a worker's parked long polls and forward
 * slots (queue.sqs_long_polls_per_role, queue.sqs_forwards_per_role).
 */
typedef enum SqsShareKind
{
	SQS_SHARE_LONG_POLL,		/* a parked ReceiveMessage */
	SQS_SHARE_FORWARD,			/* a forward of another action */
	SQS_SHARE_FORWARD_RECEIVE,	/* a forwarded ReceiveMessage */
	SQS_SHARE_KINDS
} SqsShareKind;
extern void sqs_shares_read_settings(void);
extern bool sqs_share_take(SqsShareKind kind, Oid role);
extern void sqs_share_give(SqsShareKind kind, Oid role);

#endif							/* QUEUE_SQS_H */
