/*-------------------------------------------------------------------------
 *
 * actions.c
 *	  Each SQS action as calls of the SQL API (DESIGN.md "SQS API"), run by
 *	  protocol.c inside its transaction, SPI connected, already as the
 *	  access key's role: the SQL API's own privilege checks apply, and the
 *	  actions add only SQS's wire rules (names, ranges, batches, attribute
 *	  types, digests) and its shapes.  This file is their door: the
 *	  dispatch table (sqs_run_action), the queue a request addresses
 *	  (sqs_addressed_queue), GetCallerIdentity and the actions refused; the
 *	  others live in the rooms actions.h lists, top to bottom.
 *
 * The input is the action's input shape as AWS JSON 1.0 sends it (a Query
 * request is folded into the same shape by query.c, every scalar a
 * string); the output is the output shape as a JSON object appended to
 * out.  Shapes and member names follow botocore's model of SQS
 * (2012-11-05), and for the message move tasks, which that model predates,
 * the current API reference.
 *
 * Every statement is schema-qualified, takes its input as parameters only,
 * and is prepared once per backend (statements.c).  Errors the SQL API
 * raises propagate to protocol.c, which maps their SQLSTATEs; where SQS
 * answers differently (receipts, ended leases), the error is caught in
 * the action's room (settle.c): in a subtransaction when the action goes
 * on (batch entries), or turned into the SQS error at once when it does
 * not.
 *
 * Choices where SQS and the SQL API differ (docs/sqs-api.md documents them):
 *	- FifoThroughputLimit is accepted (perQueue | perMessageGroupId) but
 *	  not stored; it reads back perMessageGroupId when the deduplication
 *	  scope is messageGroup, else perQueue.
 *	- CreateQueue of an existing queue compares only the attributes given
 *	  (as SQS and its emulators do; tags are not compared), so a bare
 *	  CreateQueue returns the URL of a queue made with other attributes.
 *	- LastModifiedTimestamp is the creation time (nothing records alters).
 *	- A message's size is checked as SQS counts it (body, attribute names,
 *	  types and values) against 1 MiB here, and by the SQL API against the
 *	  queue's max_message_size as it counts it (body + attributes' text).
 *	- A message move task is recorded here (move_tasks.c) and run by the
 *	  database's queue worker in the background (src/worker/move_task.c),
 *	  as the caller's role; starting, listing and cancelling one need
 *	  manage on its source queue.
 *	- On the wire as SQS, where SQL is stricter (DESIGN.md "SQS API",
 *	  2026-11-27): MessageIds are UUIDs mapped from message ids (shape.c's
 *	  sqs_kv_message_id; queue.message_uuid in SQL), a stale receipt's
 *	  DeleteMessage succeeds and deletes nothing, a dead letter's
 *	  "queue.dead_letter" attribute is DeadLetterQueueSourceArn instead,
 *	  DeleteQueue drops a dead-letter queue (force), a second PurgeQueue
 *	  within 60 s is PurgeQueueInProgress (shared.c).
 *	- SSE attributes are kept in queue._sqs_attributes and reported as set,
 *	  never enforced; a Policy with statements is refused; AWSTraceHeader
 *	  is kept among the message's attributes (TRACE_HEADER_ATTR).
 *
 * Functions the rooms share carry the folder's sqs_ prefix (actions.h);
 * the rest are static to their room.
 *
 * May call: queues.c, attributes.c, send.c, receive.c, settle.c,
 * move_tasks.c, shape.c (actions.h), wire.c (sqs_fail), PostgreSQL.
 * Called by: protocol.c (sqs_run_action, sqs_addressed_queue).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "miscadmin.h"
#include "utils/jsonb.h"

#include "common/compat.h"
#include "actions.h"

/*
 * STS GetCallerIdentity (signed with the sts scope; protocol.c admits it
 * for nothing else): the account id, an ARN naming the key's role, and
 * the key as UserId.
 */
static void
act_get_caller_identity(SqsCall *call, StringInfo out)
{
	char	   *role = GetUserNameFromId(call->auth.role, true);
	bool		first = true;

	appendStringInfoChar(out, '{');
	sqs_kv_str(out, &first, "UserId", call->auth.access_key_id);
	sqs_kv_str(out, &first, "Account", call->account_id ? call->account_id : "000000000000");
	sqs_kv_str(out, &first, "Arn", psprintf("arn:aws:iam::%s:role/%s",
										call->account_id ? call->account_id : "000000000000",
										role ? role : call->auth.access_key_id));
	appendStringInfoChar(out, '}');
}

static void
act_unsupported(SqsCall *call, StringInfo out)
{
	sqs_fail(SQS_ERR_UNSUPPORTED_OPERATION,
			 "%s is not supported by this endpoint: access is granted with queue.grant in SQL.",
			 call->action);
}

/* ---------------------------------------------------------------------
 * Dispatch
 * ---------------------------------------------------------------------
 */
typedef void (*ActionFn) (SqsCall *call, StringInfo out);

static const struct
{
	const char *name;
	ActionFn	fn;
}			actions[] = {
	{"CreateQueue", sqs_act_create_queue},
	{"DeleteQueue", sqs_act_delete_queue},
	{"GetQueueUrl", sqs_act_get_queue_url},
	{"GetCallerIdentity", act_get_caller_identity},
	{"ListQueues", sqs_act_list_queues},
	{"GetQueueAttributes", sqs_act_get_queue_attributes},
	{"SetQueueAttributes", sqs_act_set_queue_attributes},
	{"PurgeQueue", sqs_act_purge_queue},
	{"TagQueue", sqs_act_tag_queue},
	{"UntagQueue", sqs_act_untag_queue},
	{"ListQueueTags", sqs_act_list_queue_tags},
	{"SendMessage", sqs_act_send_message},
	{"SendMessageBatch", sqs_act_send_message_batch},
	{"DeleteMessage", sqs_act_delete_message},
	{"DeleteMessageBatch", sqs_act_delete_message_batch},
	{"ChangeMessageVisibility", sqs_act_change_message_visibility},
	{"ChangeMessageVisibilityBatch", sqs_act_change_message_visibility_batch},
	{"ListDeadLetterSourceQueues", sqs_act_list_dead_letter_source_queues},
	{"StartMessageMoveTask", sqs_act_start_message_move_task},
	{"ListMessageMoveTasks", sqs_act_list_message_move_tasks},
	{"CancelMessageMoveTask", sqs_act_cancel_message_move_task},
	{"AddPermission", act_unsupported},
	{"RemovePermission", act_unsupported},
};

bool
sqs_run_action(SqsCall *call, StringInfo out, SqsResponse *resp)
{
	Jsonb	   *empty = NULL;

	if (call->input == NULL)
	{
		empty = DatumGetJsonbP(sqs_cstring_jsonb("{}"));
		call->input = empty;
	}
	if (!JB_ROOT_IS_OBJECT(call->input))
		sqs_fail(SQS_ERR_INVALID_PARAMETER_VALUE, "The request body must be a JSON object.");

	if (strcmp(call->action, "ReceiveMessage") == 0)
	{
		sqs_act_receive_message(call, out, resp);
		return true;
	}
	for (int i = 0; i < lengthof(actions); i++)
		if (strcmp(call->action, actions[i].name) == 0)
		{
			actions[i].fn(call, out);
			return true;
		}
	return false;
}

/*
 * The queue an action addresses, as its name (NULL for the actions that
 * address none: ListQueues, GetCallerIdentity, CancelMessageMoveTask's
 * handle), for routing the request to the queue's node of a Citus cluster
 * (protocol.c).  A malformed parameter fails as the action would.
 */
char *
sqs_addressed_queue(SqsCall *call)
{
	JsonbContainer *in;
	const char *a = call->action;
	char	   *s;

	if (call->input == NULL || !JB_ROOT_IS_OBJECT(call->input))
		return NULL;
	in = &call->input->root;
	if (strcmp(a, "CreateQueue") == 0 || strcmp(a, "GetQueueUrl") == 0)
		return (s = sqs_in_str(in, "QueueName")) != NULL && s[0] != '\0' ? s : NULL;
	if (strcmp(a, "StartMessageMoveTask") == 0 || strcmp(a, "ListMessageMoveTasks") == 0)
	{
		const char *colon;

		if ((s = sqs_in_str(in, "SourceArn")) == NULL)
			return NULL;
		colon = strrchr(s, ':');
		return colon && colon[1] != '\0' ? pstrdup(colon + 1) : NULL;
	}
	if (strcmp(a, "ListQueues") == 0 || strcmp(a, "GetCallerIdentity") == 0 ||
		strcmp(a, "CancelMessageMoveTask") == 0)
		return NULL;
	if (call->path_queue == NULL && sqs_in_str(in, "QueueUrl") == NULL)
		return NULL;
	return sqs_queue_of(call);
}
