/*-------------------------------------------------------------------------
 *
 * wire.c
 *	  The SQS endpoint's shared vocabulary, at the bottom of src/sqs/: SQS's
 *	  errors on the wire (the table of codes, statuses and faults), the
 *	  raising of one (sqs_fail) and its recognition when caught, and a
 *	  request's headers.  The actions (actions.c and its rooms) and sigv4.c
 *	  raise, protocol.c catches and answers; none of them needs another to
 *	  do so.
 *
 * May call: PostgreSQL only.  Called by: every file of src/sqs/.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <stdarg.h>

#include "mb/pg_wchar.h"

#include "common/compat.h"
#include "sqs.h"

/*
 * SQS's errors on the wire.  The pairs of JSON name and Query code are
 * REFERENCE.md 1.7's; statuses follow the current SQS model (the
 * awsQueryError traits of @aws-sdk/client-sqs: OverLimit and
 * PurgeQueueInProgress 403, ReceiptHandleIsInvalid and
 * ResourceNotFoundException 404).  Errors that SQS's model does not list
 * (validation, authentication, unknown operation, internal) are AWS's
 * common errors, whose JSON __type is in the com.amazon.coral.service
 * namespace as AWS sends them; the authentication errors are all 403 here.
 *
 * Choices: an unknown action is UnknownOperationException in JSON (what
 * AWS answers an unknown X-Amz-Target with) and InvalidAction in Query; a
 * real SQS action this endpoint does not serve (AddPermission,
 * RemovePermission) is AWS.SimpleQueueService.UnsupportedOperation; a
 * malformed JSON body is SerializationException; a request naming no
 * action is MissingAction; a read-only or overloaded database (25006, a
 * serialization failure, a deadlock, a cancelled statement) is
 * ServiceUnavailable 503, which the SDKs retry.  The worker's own refusals
 * before a request reaches sqs_handle (exchange.c, server.c) come from
 * this table too: a body over SQS_MAX_BODY is RequestEntityTooLarge 413,
 * parameters that cannot be decoded (too many, a malformed form body, a
 * NUL) are MalformedQueryString 400.
 */
#define SQS_NS "com.amazonaws.sqs#"
#define CORAL_NS "com.amazon.coral.service#"
#define SQS_PREFIX "AWS.SimpleQueueService."

static const SqsErrorInfo error_table[SQS_PERR_NUM] = {
	[SQS_ERR_NONE] = {CORAL_NS "InternalFailure", "InternalError", 500, false, ERRCODE_INTERNAL_ERROR},
	[SQS_ERR_QUEUE_DOES_NOT_EXIST] = {SQS_NS "QueueDoesNotExist", SQS_PREFIX "NonExistentQueue", 400, true, ERRCODE_UNDEFINED_OBJECT},
	[SQS_ERR_QUEUE_NAME_EXISTS] = {SQS_NS "QueueNameExists", "QueueAlreadyExists", 400, true, ERRCODE_DUPLICATE_OBJECT},
	[SQS_ERR_INVALID_PARAMETER_VALUE] = {SQS_NS "InvalidParameterValueException", "InvalidParameterValue", 400, true, ERRCODE_INVALID_PARAMETER_VALUE},
	[SQS_ERR_MISSING_PARAMETER] = {SQS_NS "MissingRequiredParameterException", "MissingParameter", 400, true, ERRCODE_INVALID_PARAMETER_VALUE},
	[SQS_ERR_ACCESS_DENIED] = {CORAL_NS "AccessDeniedException", "AccessDenied", 403, true, ERRCODE_INSUFFICIENT_PRIVILEGE},
	[SQS_ERR_BATCH_ENTRY_IDS_NOT_DISTINCT] = {SQS_NS "BatchEntryIdsNotDistinct", SQS_PREFIX "BatchEntryIdsNotDistinct", 400, true, ERRCODE_INVALID_PARAMETER_VALUE},
	[SQS_ERR_BATCH_REQUEST_TOO_LONG] = {SQS_NS "BatchRequestTooLong", SQS_PREFIX "BatchRequestTooLong", 400, true, ERRCODE_INVALID_PARAMETER_VALUE},
	[SQS_ERR_EMPTY_BATCH_REQUEST] = {SQS_NS "EmptyBatchRequest", SQS_PREFIX "EmptyBatchRequest", 400, true, ERRCODE_INVALID_PARAMETER_VALUE},
	[SQS_ERR_INVALID_BATCH_ENTRY_ID] = {SQS_NS "InvalidBatchEntryId", SQS_PREFIX "InvalidBatchEntryId", 400, true, ERRCODE_INVALID_PARAMETER_VALUE},
	[SQS_ERR_MESSAGE_NOT_INFLIGHT] = {SQS_NS "MessageNotInflight", SQS_PREFIX "MessageNotInflight", 400, true, ERRCODE_INVALID_PARAMETER_VALUE},
	[SQS_ERR_PURGE_QUEUE_IN_PROGRESS] = {SQS_NS "PurgeQueueInProgress", SQS_PREFIX "PurgeQueueInProgress", 403, true, ERRCODE_INVALID_PARAMETER_VALUE},
	[SQS_ERR_QUEUE_DELETED_RECENTLY] = {SQS_NS "QueueDeletedRecently", SQS_PREFIX "QueueDeletedRecently", 400, true, ERRCODE_INVALID_PARAMETER_VALUE},
	[SQS_ERR_TOO_MANY_ENTRIES_IN_BATCH_REQUEST] = {SQS_NS "TooManyEntriesInBatchRequest", SQS_PREFIX "TooManyEntriesInBatchRequest", 400, true, ERRCODE_INVALID_PARAMETER_VALUE},
	[SQS_ERR_UNSUPPORTED_OPERATION] = {SQS_NS "UnsupportedOperation", SQS_PREFIX "UnsupportedOperation", 400, true, ERRCODE_FEATURE_NOT_SUPPORTED},
	[SQS_ERR_RECEIPT_HANDLE_IS_INVALID] = {SQS_NS "ReceiptHandleIsInvalid", "ReceiptHandleIsInvalid", 404, true, ERRCODE_INVALID_PARAMETER_VALUE},
	[SQS_ERR_OVER_LIMIT] = {SQS_NS "OverLimit", "OverLimit", 403, true, ERRCODE_PROGRAM_LIMIT_EXCEEDED},
	[SQS_ERR_INVALID_ATTRIBUTE_NAME] = {SQS_NS "InvalidAttributeName", "InvalidAttributeName", 400, true, ERRCODE_INVALID_PARAMETER_VALUE},
	[SQS_ERR_INVALID_ATTRIBUTE_VALUE] = {SQS_NS "InvalidAttributeValue", "InvalidAttributeValue", 400, true, ERRCODE_INVALID_PARAMETER_VALUE},
	[SQS_ERR_INVALID_MESSAGE_CONTENTS] = {SQS_NS "InvalidMessageContents", "InvalidMessageContents", 400, true, ERRCODE_INVALID_PARAMETER_VALUE},
	[SQS_ERR_RESOURCE_NOT_FOUND] = {SQS_NS "ResourceNotFoundException", "ResourceNotFoundException", 404, true, ERRCODE_UNDEFINED_OBJECT},
	[SQS_ERR_INVALID_ACTION] = {CORAL_NS "UnknownOperationException", "InvalidAction", 400, true, ERRCODE_FEATURE_NOT_SUPPORTED},
	[SQS_ERR_INVALID_CLIENT_TOKEN_ID] = {CORAL_NS "InvalidClientTokenId", "InvalidClientTokenId", 403, true, ERRCODE_INVALID_AUTHORIZATION_SPECIFICATION},
	[SQS_ERR_SIGNATURE_DOES_NOT_MATCH] = {CORAL_NS "SignatureDoesNotMatch", "SignatureDoesNotMatch", 403, true, ERRCODE_INVALID_AUTHORIZATION_SPECIFICATION},
	[SQS_ERR_INCOMPLETE_SIGNATURE] = {CORAL_NS "IncompleteSignature", "IncompleteSignature", 403, true, ERRCODE_INVALID_AUTHORIZATION_SPECIFICATION},
	[SQS_ERR_MISSING_AUTHENTICATION_TOKEN] = {CORAL_NS "MissingAuthenticationToken", "MissingAuthenticationToken", 403, true, ERRCODE_INVALID_AUTHORIZATION_SPECIFICATION},
	[SQS_ERR_REQUEST_EXPIRED] = {CORAL_NS "RequestExpired", "RequestExpired", 403, true, ERRCODE_INVALID_AUTHORIZATION_SPECIFICATION},
	[SQS_ERR_INTERNAL_ERROR] = {CORAL_NS "InternalFailure", "InternalError", 500, false, ERRCODE_INTERNAL_ERROR},
	[SQS_PERR_SERIALIZATION] = {CORAL_NS "SerializationException", "SerializationException", 400, true, ERRCODE_INVALID_TEXT_REPRESENTATION},
	[SQS_PERR_MISSING_ACTION] = {CORAL_NS "MissingAction", "MissingAction", 400, true, ERRCODE_INVALID_PARAMETER_VALUE},
	[SQS_PERR_UNAVAILABLE] = {CORAL_NS "ServiceUnavailable", "ServiceUnavailable", 503, false, ERRCODE_INTERNAL_ERROR},
	[SQS_PERR_TOO_LARGE] = {SQS_NS "RequestEntityTooLarge", "RequestEntityTooLarge", 413, true, ERRCODE_PROGRAM_LIMIT_EXCEEDED},
	[SQS_PERR_MALFORMED_QUERY] = {SQS_NS "MalformedQueryString", "MalformedQueryString", 400, true, ERRCODE_INVALID_PARAMETER_VALUE},
};

/*
 * The SQS error raised by the last sqs_fail, and its message: an error
 * caught in sqs_handle is that SQS error only when its SQLSTATE and
 * message are the same (an action may have caught an sqs_fail of its own
 * in between, e.g. for a batch entry).
 */
static int	fail_err = SQS_ERR_NONE;
static char fail_msg[1024];

/* The row of the error table of err (InternalError when out of range) */
const SqsErrorInfo *
sqs_error_info(int err)
{
	if (err < 0 || err >= SQS_PERR_NUM)
		err = SQS_ERR_INTERNAL_ERROR;
	return &error_table[err];
}

/*
 * Raise an SQS error: remember which one, then ereport(ERROR) with the
 * message, which sqs_handle catches and answers with err's code.
 */
void
sqs_fail(SqsError err, const char *fmt,...)
{
	va_list		args;
	int			e = (int) err;
	int			n;

	if (e <= SQS_ERR_NONE || e >= SQS_PERR_NUM)
		e = SQS_ERR_INTERNAL_ERROR;
	va_start(args, fmt);
	n = vsnprintf(fail_msg, sizeof(fail_msg), fmt, args);
	va_end(args);

	/*
	 * A message cut at the buffer's end (it may quote a long value of the
	 * request) must not end in part of a character: the answer would not
	 * be valid UTF-8, and clients fail to parse it.
	 */
	if (n >= (int) sizeof(fail_msg))
	{
		int			len = strlen(fail_msg);

		fail_msg[pg_mbcliplen(fail_msg, len, len)] = '\0';
	}
	fail_err = e;
	ereport(ERROR,
			(errcode(error_table[e].sqlstate),
			 errmsg_internal("%s", fail_msg)));
}

/*
 * The SQS error an error caught by protocol.c is, when it is the last
 * sqs_fail's (same SQLSTATE and message); else SQS_ERR_NONE.
 */
int
sqs_fail_raised(const ErrorData *edata)
{
	if (fail_err != SQS_ERR_NONE &&
		edata->sqlerrcode == error_table[fail_err].sqlstate &&
		edata->message != NULL &&
		strcmp(edata->message, fail_msg) == 0)
		return fail_err;
	return SQS_ERR_NONE;
}

/* Forget the last sqs_fail (at the end of each request) */
void
sqs_fail_forget(void)
{
	fail_err = SQS_ERR_NONE;
}

/*
 * The value of a request header by its lower-case name, or NULL; the first
 * when it repeats.
 */
const char *
sqs_header(const SqsRequest *req, const char *lname)
{
	for (int i = 0; i < req->nheaders; i++)
		if (pg_strcasecmp(req->headers[i].name, lname) == 0)
			return req->headers[i].value;
	return NULL;
}
