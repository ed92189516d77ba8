/*-------------------------------------------------------------------------
 *
 * protocol.c
 *	  One SQS request from parsed HTTP to its answer (REFERENCE.md 1.7):
 *	  which of SQS's two protocols it speaks, its transaction, its
 *	  authentication, its action as the key's role, and the answer in the
 *	  request's protocol, errors included.
 *
 * AWS JSON 1.0 (X-Amz-Target: AmazonSQS.<Action>) carries the action's
 * input shape as a JSON object and gets the output shape back as JSON.
 * Query (Action=<Action>, form or query string) carries the same input
 * flattened into parameters (Attribute.1.Name, ...); query.c folds them
 * back into the JSON input shape (sqs_fold_query), so the actions
 * (actions.c and its rooms, actions.h) see one shape for both, and turns
 * the output shape into the XML answer whose element names botocore's
 * Query model (service-2.json) expects (sqs_xml_render).
 *
 * The protocol is the content type's, as SQS picks it: a form body is Query
 * even with an X-Amz-Target header.  A Query request posted to a queue URL
 * (/<account>/<queue>) with no QueueUrl addresses the queue of its path
 * (query.c's sqs_path_queue_name).  STS GetCallerIdentity, signed with the
 * sts scope, is the one action of another service served (AWS tooling asks
 * it for the account id).
 *
 * Errors: the actions and sigv4.c raise SQS's errors with sqs_fail (an
 * ereport(ERROR) remembered here); every other error comes from the SQL
 * API and is mapped by its SQLSTATE (sql_error()).  Anything unexpected is
 * an InternalError whose real message goes to the server log only.
 *
 * May call: query.c (the Query protocol's own parts, query.h), actions.c,
 * sigv4.c, PostgreSQL.  Called by: exchange.c (sqs_handle, sqs_refuse),
 * worker.c (sqs_read_request_bounds).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <stdarg.h>

#include "access/xact.h"
#include "catalog/namespace.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "mb/pg_wchar.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/json.h"
#include "utils/jsonb.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"
#include "utils/timeout.h"

#include "common/compat.h"
#include "core_api.h"
#include "sqs.h"
#include "query.h"

#define SQS_API_VERSION "2012-11-05"
#define STS_API_VERSION "2011-06-15"
#define STS_TARGET "AWSSecurityTokenServiceV20110615."
#define JSON_CONTENT_TYPE "application/x-amz-json-1.0"
#define XML_CONTENT_TYPE "text/xml"

/*
 * Bounds on what a request may hold (every loop over input is bounded;
 * query.c bounds a Query request's parameters)
 */
#define MAX_ACTION_NAME		64
#define MAX_JSON_DEPTH		32		/* SQS's input shapes nest 4 deep */

/*
 * Real SQS actions that actions.c may not serve: an action of this list
 * it does not know is UnsupportedOperation, any other name InvalidAction.
 */
static const char *const sqs_actions[] = {
	"AddPermission", "CancelMessageMoveTask", "ChangeMessageVisibility",
	"ChangeMessageVisibilityBatch", "CreateQueue", "DeleteMessage",
	"DeleteMessageBatch", "DeleteQueue", "GetQueueAttributes", "GetQueueUrl",
	"ListDeadLetterSourceQueues", "ListMessageMoveTasks", "ListQueueTags",
	"ListQueues", "PurgeQueue", "ReceiveMessage", "RemovePermission",
	"SendMessage", "SendMessageBatch", "SetQueueAttributes",
	"StartMessageMoveTask", "TagQueue", "UntagQueue",
};

typedef enum SqsProtocol
{
	PROTO_JSON,
	PROTO_QUERY,
} SqsProtocol;

/* True while the JSON body is being parsed: its errors are malformed JSON */
static bool parsing_body = false;

/*
 * A Query request that asked for JSON (Accept: application/json): SQS
 * answers its Query API in JSON then, {"<Action>Response": {"<Action>Result":
 * ..., "ResponseMetadata": ...}}, and its errors as {"Error": ...}.  Set for
 * the request sqs_handle serves, false otherwise.
 */
static bool query_json = false;

static bool
name_in(const char *name, const char *const *list, int n)
{
	for (int i = 0; i < n; i++)
		if (strcmp(name, list[i]) == 0)
			return true;
	return false;
}

/* The first value of a request parameter, or NULL */
static const char *
request_param(const SqsRequest *req, const char *name)
{
	for (int i = 0; i < req->nparams; i++)
		if (strcmp(req->params[i].name, name) == 0)
			return req->params[i].value;
	return NULL;
}

/* Whether the client asked for JSON (Accept: application/json) */
static bool
accepts_json(const SqsRequest *req)
{
	const char *accept = sqs_header(req, "accept");

	for (const char *p = accept; p != NULL && *p; p++)
		if (pg_strncasecmp(p, "application/json", 16) == 0)
			return true;
	return false;
}

/* Whether the request has a parameter besides a presigned URL's X-Amz-* */
static bool
request_has_params(const SqsRequest *req)
{
	for (int i = 0; i < req->nparams; i++)
		if (pg_strncasecmp(req->params[i].name, "X-Amz-", 6) != 0)
			return true;
	return false;
}

/*
 * An error the SQL API raised, as SQS's error: the client's mistakes keep
 * the API's message (written for users: it names the argument); anything
 * else is logged and answered with a message that says nothing inside.
 */
static int
sql_error(const ErrorData *edata, const char **message)
{
	*message = edata->message ? edata->message : "";
	switch (edata->sqlerrcode)
	{
		case ERRCODE_UNDEFINED_OBJECT:
			return SQS_ERR_QUEUE_DOES_NOT_EXIST;
		case ERRCODE_DUPLICATE_OBJECT:
			return SQS_ERR_QUEUE_NAME_EXISTS;
		case ERRCODE_INSUFFICIENT_PRIVILEGE:
			return SQS_ERR_ACCESS_DENIED;
		case ERRCODE_INVALID_PARAMETER_VALUE:
		case ERRCODE_NULL_VALUE_NOT_ALLOWED:
		case ERRCODE_INVALID_NAME:
		case ERRCODE_NAME_TOO_LONG:
		case ERRCODE_PROGRAM_LIMIT_EXCEEDED:
		case ERRCODE_INVALID_TEXT_REPRESENTATION:
		case ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE:
		case ERRCODE_INVALID_BINARY_REPRESENTATION:
		case ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE:
		case ERRCODE_STRING_DATA_RIGHT_TRUNCATION:
		case ERRCODE_CHARACTER_NOT_IN_REPERTOIRE:
		case ERRCODE_UNTRANSLATABLE_CHARACTER:
			/* a refusal of the SQL API is the client's, never a 5xx */
		case ERRCODE_DEPENDENT_OBJECTS_STILL_EXIST:
			return SQS_ERR_INVALID_PARAMETER_VALUE;
		case ERRCODE_FEATURE_NOT_SUPPORTED:
			return SQS_ERR_UNSUPPORTED_OPERATION;
		case ERRCODE_READ_ONLY_SQL_TRANSACTION:
		case ERRCODE_T_R_SERIALIZATION_FAILURE:
		case ERRCODE_T_R_DEADLOCK_DETECTED:
		case ERRCODE_LOCK_NOT_AVAILABLE:
		case ERRCODE_QUERY_CANCELED:
		case ERRCODE_TOO_MANY_CONNECTIONS:
		case ERRCODE_OUT_OF_MEMORY:
		case ERRCODE_DISK_FULL:
			elog(LOG, "SQS request failed: %s (SQLSTATE %s)",
				 *message, unpack_sql_state(edata->sqlerrcode));
			*message = "The service is unavailable; try again later.";
			return SQS_PERR_UNAVAILABLE;
		default:
			elog(LOG, "SQS request failed: %s (SQLSTATE %s)",
				 *message, unpack_sql_state(edata->sqlerrcode));
			*message = "We encountered an internal error. Please try again.";
			return SQS_ERR_INTERNAL_ERROR;
	}
}

/* A request id as AWS's: a random UUID */
static void
make_request_id(char *buf)
{
	uint8		b[16];

	if (!pg_strong_random(b, sizeof(b)))
	{
		/* cannot happen on a working system; still unique enough */
		uint64		t = (uint64) GetCurrentTimestamp();

		memset(b, 0, sizeof(b));
		memcpy(b, &t, sizeof(t));
		memcpy(b + 8, &MyProcPid, sizeof(MyProcPid));
	}
	b[6] = (b[6] & 0x0f) | 0x40;
	b[8] = (b[8] & 0x3f) | 0x80;
	snprintf(buf, 37,
			 "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
			 b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7],
			 b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15]);
}

static void
add_header(SqsResponse *resp, const char *name, const char *value)
{
	if (resp->nheaders < (int) lengthof(resp->headers))
	{
		resp->headers[resp->nheaders].name = pstrdup(name);
		resp->headers[resp->nheaders].value = pstrdup(value);
		resp->nheaders++;
	}
}

/*
 * The error answer, in the request's protocol, into resp (whose body is
 * reset): JSON {"__type", "message"} with x-amzn-query-error, or Query's
 * <ErrorResponse>.
 */
static void
error_answer(SqsResponse *resp, SqsProtocol proto, int err,
			 const char *message, const char *request_id)
{
	const SqsErrorInfo *info = sqs_error_info(err);
	char		qerr[160];

	resp->status = info->status;
	resp->park = false;
	resetStringInfo(&resp->body);
	/* SQS's Query words for a missing queue name the API version */
	if (proto == PROTO_QUERY && err == SQS_ERR_QUEUE_DOES_NOT_EXIST &&
		strcmp(message, "The specified queue does not exist.") == 0)
		message = "The specified queue does not exist for this wsdl version.";
	if (proto == PROTO_JSON)
	{
		resp->content_type = JSON_CONTENT_TYPE;
		appendStringInfoString(&resp->body, "{\"__type\":");
		escape_json(&resp->body, info->json_type);
		appendStringInfoString(&resp->body, ",\"message\":");
		escape_json(&resp->body, message);
		appendStringInfoChar(&resp->body, '}');
		snprintf(qerr, sizeof(qerr), "%s;%s", info->query_code,
				 info->sender ? "Sender" : "Receiver");
		add_header(resp, "x-amzn-query-error", qerr);
	}
	else if (query_json)
	{
		resp->content_type = "application/json";
		appendStringInfo(&resp->body, "{\"Error\":{\"Type\":\"%s\",\"Code\":",
						 info->sender ? "Sender" : "Receiver");
		escape_json(&resp->body, info->query_code);
		appendStringInfoString(&resp->body, ",\"Message\":");
		escape_json(&resp->body, message);
		appendStringInfoString(&resp->body, "},\"RequestId\":");
		escape_json(&resp->body, request_id);
		appendStringInfoChar(&resp->body, '}');
	}
	else
	{
		resp->content_type = XML_CONTENT_TYPE;
		appendStringInfoString(&resp->body,
							   "<?xml version=\"1.0\"?><ErrorResponse xmlns=\"" SQS_XMLNS "\"><Error>");
		appendStringInfo(&resp->body, "<Type>%s</Type>",
						 info->sender ? "Sender" : "Receiver");
		sqs_xml_text_element(&resp->body, "Code", info->query_code, strlen(info->query_code));
		sqs_xml_text_element(&resp->body, "Message", message, strlen(message));
		appendStringInfoString(&resp->body, "<Detail/></Error>");
		sqs_xml_text_element(&resp->body, "RequestId", request_id, strlen(request_id));
		appendStringInfoString(&resp->body, "</ErrorResponse>");
	}
}

/*
 * The JSON protocol's body as the input object: valid UTF-8, a JSON
 * object, nesting bounded (a deeper body is not an SQS input and would
 * only cost stack).
 */
static Jsonb *
parse_json_body(const SqsRequest *req)
{
	char	   *text;
	int			depth = 0;
	bool		in_string = false;
	Jsonb	   *jb;

	if (req->body_len == 0)
		return DatumGetJsonbP(DirectFunctionCall1(jsonb_in, CStringGetDatum("{}")));
	if (!pg_verifymbstr(req->body, (int) req->body_len, true))
		sqs_fail((SqsError) SQS_PERR_SERIALIZATION,
				 "The request body is not valid UTF-8.");
	for (size_t i = 0; i < req->body_len; i++)
	{
		char		c = req->body[i];

		if (in_string)
		{
			if (c == '\\')
				i++;
			else if (c == '"')
				in_string = false;
		}
		else if (c == '"')
			in_string = true;
		else if ((c == '{' || c == '[') && ++depth > MAX_JSON_DEPTH)
			sqs_fail((SqsError) SQS_PERR_SERIALIZATION,
					 "The request body nests deeper than %d levels.", MAX_JSON_DEPTH);
		else if (c == '}' || c == ']')
			depth--;
	}
	text = pnstrdup(req->body, req->body_len);
	parsing_body = true;
	jb = DatumGetJsonbP(DirectFunctionCall1(jsonb_in, CStringGetDatum(text)));
	parsing_body = false;
	if (!JB_ROOT_IS_OBJECT(jb) || JB_ROOT_IS_SCALAR(jb))
		sqs_fail((SqsError) SQS_PERR_SERIALIZATION,
				 "The request body is not a JSON object.");
	return jb;
}

/* ----------------------------------------------------------------
 * One request
 * ----------------------------------------------------------------
 */

/* An action name: letters only, bounded */
static bool
valid_action_name(const char *s)
{
	size_t		len = strlen(s);

	if (len == 0 || len > MAX_ACTION_NAME)
		return false;
	for (; *s; s++)
		if (!((*s >= 'A' && *s <= 'Z') || (*s >= 'a' && *s <= 'z')))
			return false;
	return true;
}

/*
 * The bounds of one request's transaction (DESIGN.md "SQS API": no request
 * of one role delays another's beyond a bound).  The workers serve every
 * connection from one loop, so a statement that waits holds them all:
 * a lock wait ends after queue.sqs_lock_timeout (the request is then tried
 * again later by exchange.c, or answered ServiceUnavailable), and the whole
 * transaction after queue.sqs_statement_timeout (ServiceUnavailable).
 * Both are set here, at the transaction's own level, above the worker's
 * pinned settings (elevated.c) and beyond the reach of any role's or the
 * database's: the request runs none of their settings.
 */
static char request_lock_timeout[32] = "10";
static int	request_statement_timeout = 5000;

/*
 * queue.sqs_lock_timeout and queue.sqs_statement_timeout, read by worker.c
 * when the worker starts and at each reload, not per request.
 */
void
sqs_read_request_bounds(void)
{
	const char *v;

	/* GetConfigOption's answer lives in a buffer the next call reuses */
	v = GetConfigOption("queue.sqs_lock_timeout", true, false);
	strlcpy(request_lock_timeout, v ? v : "10", sizeof(request_lock_timeout));
	v = GetConfigOption("queue.sqs_statement_timeout", true, false);
	request_statement_timeout = v ? atoi(v) : 5000;
}

static void
request_bounds(void)
{
	(void) set_config_option("lock_timeout", request_lock_timeout,
							 PGC_SUSET, PGC_S_SESSION, GUC_ACTION_LOCAL,
							 true, 0, false);
	if (request_statement_timeout > 0)
		enable_timeout_after(STATEMENT_TIMEOUT, request_statement_timeout);
}

/*
 * After the transaction: the timer goes, and a cancel it raised too late
 * to be seen inside the transaction must not be seen by the worker's loop.
 */
static void
request_bounds_end(void)
{
	disable_timeout(STATEMENT_TIMEOUT, false);
	QueryCancelPending = false;
}

/*
 * An SQS error answered without a transaction (exchange.c: the worker's
 * own, before or around sqs_handle): in AWS JSON 1.0 when json, else
 * Query's XML, from wire.c's table as every other error.
 */
void
sqs_refuse(SqsResponse *resp, bool json, int err, const char *message,
		   const char *request_id)
{
	resp->nheaders = 0;
	query_json = false;			/* (refusals before sqs_handle: XML) */
	add_header(resp, "x-amzn-RequestId", request_id);
	error_answer(resp, json ? PROTO_JSON : PROTO_QUERY, err, message, request_id);
}

/*
 * Serve one request completely: never throws, never leaves a transaction
 * open; resp's body and headers are allocated in the caller's memory
 * context.
 */
void
sqs_handle(const SqsRequest *req, SqsResponse *resp)
{
	MemoryContext cxt = CurrentMemoryContext;
	char		request_id[37];
	const char *target = sqs_header(req, "x-amz-target");
	const char *ctype = sqs_header(req, "content-type");
	SqsProtocol proto;
	const char *action = NULL;
	StringInfo	out;
	StringInfo	answer;
	volatile bool ok = false;
	ErrorData  *edata = NULL;

	make_request_id(request_id);
	resp->status = 200;
	resp->content_type = NULL;
	initStringInfo(&resp->body);
	resp->nheaders = 0;
	resp->park = false;
	resp->park_queue_id = 0;
	resp->park_generation = 0;
	resp->park_until = 0;
	resp->lock_retry = false;
	resp->forward_url = NULL;
	resp->forward_receive = false;
	resp->role = InvalidOid;
	add_header(resp, "x-amzn-RequestId", request_id);

	/*
	 * Which protocol, which action: nothing here can throw.  An X-Amz-Target
	 * header means AWS JSON 1.0, except on a form-encoded body, or on a
	 * request with no content type whose query string names an Action: those
	 * are Query (Amazon::SQS::Simple sends "AmazonSQSv20121105.<Action>"
	 * with a Query body).  A JSON request with another content type is
	 * still answered in JSON, as its client expects.
	 */
	if (target != NULL &&
		(ctype != NULL ? pg_strncasecmp(ctype, "application/x-www-form-urlencoded", 33) != 0
		 : request_param(req, "Action") == NULL))
	{
		proto = PROTO_JSON;
		if (strcmp(target, STS_TARGET "GetCallerIdentity") == 0)
			action = "GetCallerIdentity";
		else if (strncmp(target, "AmazonSQS.", 10) != 0 || !valid_action_name(target + 10))
		{
			error_answer(resp, proto, SQS_ERR_INVALID_ACTION,
						 "The X-Amz-Target header names no operation of AmazonSQS.",
						 request_id);
			return;
		}
		else
			action = target + 10;
	}
	else
	{
		const char *version = request_param(req, "Version");

		action = request_param(req, "Action");
		proto = (action == NULL && ctype != NULL &&
				 pg_strncasecmp(ctype, "application/x-amz-json", 22) == 0)
			? PROTO_JSON : PROTO_QUERY;
		if (action == NULL && proto == PROTO_QUERY && !request_has_params(req) &&
			sqs_path_queue_name(req->raw_path) != NULL)
		{
			/*
			 * A queue's URL asked for with nothing at all (a browser, curl):
			 * SQS answers 404 with an UnknownOperationException document,
			 * whatever the Accept header asks for.
			 */
			resp->status = 404;
			resp->park = false;
			resp->content_type = XML_CONTENT_TYPE;
			resetStringInfo(&resp->body);
			appendStringInfoString(&resp->body,
								   "<?xml version=\"1.0\"?><UnknownOperationException/>");
			return;
		}
		query_json = proto == PROTO_QUERY && accepts_json(req);
		if (action == NULL)
		{
			error_answer(resp, proto, SQS_PERR_MISSING_ACTION,
						 proto == PROTO_JSON
						 ? "The request has no X-Amz-Target header."
						 : "The request must contain the parameter Action.",
						 request_id);
			return;
		}
		if (!valid_action_name(action))
		{
			error_answer(resp, proto, SQS_ERR_INVALID_ACTION,
						 "The action is not valid for this endpoint.", request_id);
			return;
		}
		if (version != NULL && strcmp(version, SQS_API_VERSION) != 0 &&
			!(strcmp(action, "GetCallerIdentity") == 0 &&
			  strcmp(version, STS_API_VERSION) == 0))
		{
			error_answer(resp, proto, SQS_ERR_INVALID_PARAMETER_VALUE,
						 "Version " SQS_API_VERSION " is the only version served.",
						 request_id);
			return;
		}
	}

	/* the action's output and the answer outlive the transaction */
	out = makeStringInfo();
	answer = makeStringInfo();
	sqs_fail_forget();
	parsing_body = false;

	PG_TRY();
	{
		SqsCall		call;
		Oid			save_uid;
		int			save_sec;
		char	   *input_text;

		SetCurrentStatementStartTimestamp();
		StartTransactionCommand();
		request_bounds();
		PushActiveSnapshot(GetTransactionSnapshot());
		pgstat_report_activity(STATE_RUNNING, action);
		if (SPI_connect() != SPI_OK_CONNECT)
			elog(ERROR, "SPI_connect failed");

		memset(&call, 0, sizeof(call));
		sqs_verify(req, req->started_at ? req->started_at : GetCurrentTimestamp(),
				   &call.auth);
		if (!OidIsValid(call.auth.role))
			elog(ERROR, "SQS request verified with no role");
		resp->role = call.auth.role;

		call.req = req;
		call.action = action;
		call.query_protocol = (proto == PROTO_QUERY);
		if (proto == PROTO_QUERY)
			call.path_queue = sqs_path_queue_name(req->raw_path);

		/*
		 * A queue's URL serves the actions on a queue (and GetQueueUrl, as
		 * SQS's does), not those on the account: SQS answers them there
		 * with InvalidAction.
		 */
		if (call.path_queue != NULL &&
			(strcmp(action, "CreateQueue") == 0 || strcmp(action, "ListQueues") == 0))
			sqs_fail(SQS_ERR_INVALID_ACTION,
					 "The action %s is not valid for this endpoint.", action);
		if (proto == PROTO_JSON)
			call.input = parse_json_body(req);
		else
		{
			input_text = sqs_fold_query(req, action);
			call.input = DatumGetJsonbP(DirectFunctionCall1(jsonb_in,
															CStringGetDatum(input_text)));
		}

		/*
		 * On a Citus cluster, a queue of another node: the request goes
		 * there as received (exchange.c), verified here first and again
		 * there; one that was forwarded already is served here.
		 */
		if (sqs_header(req, SQS_FORWARDED_HEADER) == NULL)
		{
			char	   *qname = sqs_addressed_queue(&call);

			/*
			 * storage/citus.c decides, by the wrong-node guard's own rule:
			 * only tables a superuser made count, read in a restricted
			 * operation; a lookup that fails serves the request here.
			 */
			if (qname != NULL)
			{
				char	   *url = queue_citus_endpoint_of(qname);

				if (url != NULL)
				{
					resp->forward_url = MemoryContextStrdup(cxt, url);
					resp->forward_receive = strcmp(action, "ReceiveMessage") == 0;
				}
			}
		}

		GetUserIdAndSecContext(&save_uid, &save_sec);
		SetUserIdAndSecContext(call.auth.role,
							   save_sec | SECURITY_LOCAL_USERID_CHANGE |
							   SECURITY_RESTRICTED_OPERATION);

		/*
		 * A signature scoped to STS is good for GetCallerIdentity only, and
		 * GetCallerIdentity only with one (AWS tooling learns the account
		 * this way before it builds queue ARNs).
		 */
		if ((strcmp(call.auth.service, "sts") == 0) !=
			(strcmp(action, "GetCallerIdentity") == 0))
			sqs_fail(SQS_ERR_INVALID_ACTION,
					 "The action %s is not valid for this endpoint.", action);

		call.host = sqs_header(req, "host");
		if (call.host == NULL)
			call.host = "localhost";
		call.account_id = GetConfigOption("queue.sqs_account_id", true, false);
		if (call.account_id == NULL)
			call.account_id = "000000000000";
		/* a string setting's value is the setting's own: no copy needed */
		call.public_url = GetConfigOption("queue.sqs_public_url", true, false);

		/* the SQL API keeps SQS's rules where the wire differs (core_api.h) */
		queue_sqs_wire_rules(true);
		if (resp->forward_url != NULL)
			;					/* served by the queue's node */
		else if (!sqs_run_action(&call, out, resp))
		{
			if (name_in(action, sqs_actions, lengthof(sqs_actions)))
				sqs_fail(SQS_ERR_UNSUPPORTED_OPERATION,
						 "The action %s is not supported by this endpoint.", action);
			sqs_fail(SQS_ERR_INVALID_ACTION,
					 "The action %s is not valid for this endpoint.", action);
		}
		queue_sqs_wire_rules(false);
		SetUserIdAndSecContext(save_uid, save_sec);

		/* answer grows in cxt, where it was made */
		if (resp->park)
			;
		else if (proto == PROTO_JSON)
			appendStringInfoString(answer, out->len > 0 ? out->data : "{}");
		else if (query_json)
		{
			appendStringInfo(answer, "{\"%sResponse\":{", action);
			if (sqs_query_has_result(action))
				appendStringInfo(answer, "\"%sResult\":%s,", action,
								 out->len > 0 ? out->data : "{}");
			appendStringInfoString(answer, "\"ResponseMetadata\":{\"RequestId\":");
			escape_json(answer, request_id);
			appendStringInfoString(answer, "}}}");
		}
		else
			sqs_xml_render(answer, action, out->data, request_id);

		SPI_finish();
		PopActiveSnapshot();
		CommitTransactionCommand();
		ok = true;
	}
	PG_CATCH();
	{
		queue_sqs_wire_rules(false);
		MemoryContextSwitchTo(cxt);
		edata = CopyErrorData();
		FlushErrorState();
		AbortCurrentTransaction();
	}
	PG_END_TRY();
	request_bounds_end();

	MemoryContextSwitchTo(cxt);
	pgstat_report_activity(STATE_IDLE, NULL);

	if (ok && resp->forward_url != NULL)
		;						/* exchange.c forwards it */
	else if (ok)
	{
		resp->status = 200;
		resp->content_type = (proto == PROTO_JSON) ? JSON_CONTENT_TYPE :
			query_json ? "application/json" : XML_CONTENT_TYPE;
		resetStringInfo(&resp->body);
		if (!resp->park)
			appendBinaryStringInfo(&resp->body, answer->data, answer->len);
	}
	else
	{
		int			err;
		const char *message;

		if (parsing_body && edata->sqlerrcode == ERRCODE_UNTRANSLATABLE_CHARACTER &&
			action != NULL && strncmp(action, "SendMessage", 11) == 0)
		{
			/* a \u0000 in a message: SQS's answer to a character it refuses */
			err = SQS_ERR_INVALID_MESSAGE_CONTENTS;
			message = SQS_NUL_IN_MESSAGE;
		}
		else if (parsing_body)
		{
			err = SQS_PERR_SERIALIZATION;
			message = edata->detail
				? psprintf("The request body is not valid JSON: %s", edata->detail)
				: "The request body is not valid JSON.";
		}
		else if ((err = sqs_fail_raised(edata)) != SQS_ERR_NONE)
			message = edata->message;
		else if (edata->sqlerrcode == ERRCODE_LOCK_NOT_AVAILABLE)
		{
			/* a lock held elsewhere: exchange.c may try again later */
			err = SQS_PERR_UNAVAILABLE;
			message = "The queue is busy; try again later.";
			resp->lock_retry = true;
		}
		else
			err = sql_error(edata, &message);
		error_answer(resp, proto, err, message, request_id);
		FreeErrorData(edata);
	}
	sqs_fail_forget();
	parsing_body = false;
	query_json = false;
	pfree(out->data);
	pfree(out);
	pfree(answer->data);
	pfree(answer);
}
