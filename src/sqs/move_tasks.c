/*-------------------------------------------------------------------------
 *
 * move_tasks.c
 *	  The message move tasks over the SQS endpoint: StartMessageMoveTask,
 *	  ListMessageMoveTasks, CancelMessageMoveTask.  A task is recorded in
 *	  queue._move_tasks (as the tables' owner, after SQS's checks and the
 *	  caller's rights) and run by the database's queue worker
 *	  (src/worker/move_task.c); the endpoint never moves a message itself.
 *
 * May call: statements.c, shape.c, wire.c (sqs_fail), the core
 * (queue_move_task_started, core_api.h), PostgreSQL.  Called by:
 * actions.c.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "executor/spi.h"
#include "mb/pg_wchar.h"
#include "utils/builtins.h"
#include "utils/json.h"
#include "utils/jsonb.h"
#include "utils/timestamp.h"

#include "common/compat.h"
#include "core_api.h"
#include "actions.h"

/* ---------------------------------------------------------------------
 * Message move tasks: recorded in queue._move_tasks, run by the queue
 * worker (src/worker/move_task.c); the endpoint never moves a message itself
 * ---------------------------------------------------------------------
 */

/*
 * A task's TaskHandle as SQS makes it: base64 of
 * {"taskId":"<id>","sourceArn":"<the source's ARN>"} (LocalStack's tests,
 * checked against AWS, decode it so).
 */
static char *
task_handle(SqsCall *call, const char *task_id, const char *source)
{
	StringInfoData doc;

	initStringInfo(&doc);
	appendStringInfoString(&doc, "{\"taskId\":");
	escape_json(&doc, task_id);
	appendStringInfoString(&doc, ",\"sourceArn\":");
	escape_json(&doc, sqs_queue_arn(call, source));
	appendStringInfoChar(&doc, '}');
	return sqs_b64_encode(doc.data);
}

/* A queue as a move task sees it: its id, type and the caller's rights. */
typedef struct TaskQueue
{
	int64		id;
	bool		fifo;
	bool		is_dlq;			/* some queue names it as its dead-letter queue */
	bool		manage;
	bool		send;
} TaskQueue;

/* Look a queue up for a move task: false when the caller may not see it. */
static bool
task_queue(SqsCall *call, const char *name, TaskQueue *tq)
{
	QueueRow	q;
	Datum		v[2];
	bool		isnull;

	if (!sqs_fetch_queue(name, &q))
		return false;
	v[0] = CStringGetTextDatum(q.name);
	v[1] = ObjectIdGetDatum(call->auth.role);
	sqs_run_as_owner(P_TASK_SOURCE, v, NULL);
	if (SPI_processed == 0)
		return false;
	sqs_check_result_cols(5);
	tq->id = DatumGetInt64(sqs_col(0, 1, &isnull));
	tq->fifo = DatumGetBool(sqs_col(0, 2, &isnull));
	tq->is_dlq = DatumGetBool(sqs_col(0, 3, &isnull));
	tq->manage = DatumGetBool(sqs_col(0, 4, &isnull)) && !isnull;
	tq->send = DatumGetBool(sqs_col(0, 5, &isnull)) && !isnull;
	return true;
}

/*
 * StartMessageMoveTask: SQS's checks, then a RUNNING task recorded and
 * answered at once; its commit wakes the queue worker, which moves the
 * messages as the caller's role, at MaxNumberOfMessagesPerSecond.
 */
void
sqs_act_start_message_move_task(SqsCall *call, StringInfo out)
{
	JsonbContainer *in = &call->input->root;
	char	   *source = sqs_name_of_arn(sqs_req_str(in, "SourceArn"), "SourceArn");
	char	   *dest_arn = sqs_in_str(in, "DestinationArn");
	char	   *dest = dest_arn ? sqs_name_of_arn(dest_arn, "DestinationArn") : NULL;
	int64		rate = 0;
	bool		has_rate;
	TaskQueue	sq;
	TaskQueue	dq = {0};
	int64		to_move = 0;
	Datum		v[8];
	char		nulls[8] = {' ', ' ', ' ', ' ', ' ', ' ', ' ', ' '};
	unsigned char rnd[16];
	char		task_id[37];
	bool		first = true;

	has_rate = sqs_in_int(in, "MaxNumberOfMessagesPerSecond", 1, 500, &rate);
	if (!task_queue(call, source, &sq))
		sqs_fail(SQS_ERR_RESOURCE_NOT_FOUND, "The resource that you specified for the SourceArn parameter doesn't exist.");
	if (!sq.manage)
		sqs_fail(SQS_ERR_ACCESS_DENIED, "Access to the resource %s is denied.",
				 sqs_queue_arn(call, source));
	if (!sq.is_dlq)
		sqs_fail(SQS_ERR_INVALID_PARAMETER_VALUE, "Source queue must be configured as a Dead Letter Queue.");
	if (dest != NULL)
	{
		if (!task_queue(call, dest, &dq))
			sqs_fail(SQS_ERR_RESOURCE_NOT_FOUND, "The resource that you specified for the DestinationArn parameter doesn't exist.");
		if (dq.id == sq.id)
			sqs_fail(SQS_ERR_INVALID_PARAMETER_VALUE, "Source queue arn and destination queue arn cannot be the same.");
		if (dq.fifo != sq.fifo)
			sqs_fail(SQS_ERR_INVALID_PARAMETER_VALUE, "The destination queue must be a %s queue like the source queue.",
					 sq.fifo ? "FIFO" : "standard");
		if (!dq.send)
			sqs_fail(SQS_ERR_ACCESS_DENIED, "Access to the resource %s is denied.",
					 sqs_queue_arn(call, dest));
	}

	/* ApproximateNumberOfMessagesToMove: the dead-letter queue's depth now */
	{
		int64		counts[3];

		sqs_queue_depth(source, counts);
		to_move = counts[0] + counts[1] + counts[2];
	}

	/* the task's id, a random (version 4) UUID as SQS's */
	if (!pg_strong_random(rnd, sizeof(rnd)))
		elog(ERROR, "could not generate a task id");
	rnd[6] = (rnd[6] & 0x0f) | 0x40;
	rnd[8] = (rnd[8] & 0x3f) | 0x80;
	snprintf(task_id, sizeof(task_id),
			 "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
			 rnd[0], rnd[1], rnd[2], rnd[3], rnd[4], rnd[5], rnd[6], rnd[7],
			 rnd[8], rnd[9], rnd[10], rnd[11], rnd[12], rnd[13], rnd[14], rnd[15]);
	v[0] = CStringGetTextDatum(task_id);
	v[1] = Int64GetDatum(sq.id);
	if (dest != NULL)
	{
		v[2] = Int64GetDatum(dq.id);
		v[3] = CStringGetTextDatum(dest);
	}
	else
		nulls[2] = nulls[3] = 'n';
	v[4] = ObjectIdGetDatum(call->auth.role);
	if (has_rate)
		v[5] = Int32GetDatum((int32) rate);
	else
		nulls[5] = 'n';
	v[6] = Int64GetDatum(to_move);
	v[7] = TimestampTzGetDatum(GetCurrentTimestamp());
	sqs_run_as_owner(P_TASK_ADD, v, nulls);
	if (SPI_processed == 0)
		sqs_fail(SQS_ERR_INVALID_PARAMETER_VALUE,
				 "There is already a task running. Only one active task is allowed for a source queue arn at a given time.");
	/* the newest SQS_MOVE_TASKS_MAX records of the source are kept */
	v[0] = Int64GetDatum(sq.id);
	v[1] = Int64GetDatum(SQS_MOVE_TASKS_MAX);
	sqs_run_as_owner(P_TASK_PRUNE, v, NULL);
	queue_move_task_started();

	appendStringInfoChar(out, '{');
	sqs_kv_str(out, &first, "TaskHandle", task_handle(call, task_id, source));
	appendStringInfoChar(out, '}');
}

/*
 * ListMessageMoveTasks: the source's newest tasks first, as SQS lists
 * them (TaskHandle only while RUNNING).  Needs manage on the source, as
 * starting and cancelling do.
 */
void
sqs_act_list_message_move_tasks(SqsCall *call, StringInfo out)
{
	JsonbContainer *in = &call->input->root;
	char	   *source = sqs_name_of_arn(sqs_req_str(in, "SourceArn"), "SourceArn");
	int64		max = 1;
	TaskQueue	sq;
	Datum		v[2];

	(void) sqs_in_int(in, "MaxResults", 1, SQS_MOVE_TASKS_MAX, &max);
	if (!task_queue(call, source, &sq))
		sqs_fail(SQS_ERR_RESOURCE_NOT_FOUND, "The resource that you specified for the SourceArn parameter doesn't exist.");
	if (!sq.manage)
		sqs_fail(SQS_ERR_ACCESS_DENIED, "Access to the resource %s is denied.",
				 sqs_queue_arn(call, source));
	v[0] = Int64GetDatum(sq.id);
	v[1] = Int64GetDatum(max);
	sqs_run_as_owner(P_TASK_LIST, v, NULL);
	sqs_check_result_cols(8);

	appendStringInfoString(out, "{\"Results\":[");
	for (uint64 r = 0; r < SPI_processed; r++)
	{
		bool		first = true;
		bool		isnull;
		char	   *status = sqs_col_text(r, 3);
		char	   *dest = sqs_col_text(r, 2);
		char	   *reason = sqs_col_text(r, 7);
		Datum		d;

		if (r > 0)
			appendStringInfoChar(out, ',');
		appendStringInfoChar(out, '{');
		if (status != NULL && strcmp(status, "RUNNING") == 0)
			sqs_kv_str(out, &first, "TaskHandle", task_handle(call, sqs_col_text(r, 1), source));
		sqs_kv_str(out, &first, "Status", status ? status : "COMPLETED");
		sqs_kv_str(out, &first, "SourceArn", sqs_queue_arn(call, source));
		if (dest != NULL)
			sqs_kv_str(out, &first, "DestinationArn", sqs_queue_arn(call, dest));
		d = sqs_col(r, 8, &isnull);
		if (!isnull)
			sqs_kv_int(out, &first, "MaxNumberOfMessagesPerSecond", DatumGetInt32(d));
		d = sqs_col(r, 4, &isnull);
		sqs_kv_int(out, &first, "ApproximateNumberOfMessagesMoved", isnull ? 0 : DatumGetInt64(d));
		d = sqs_col(r, 5, &isnull);
		if (!isnull)
			sqs_kv_int(out, &first, "ApproximateNumberOfMessagesToMove", DatumGetInt64(d));
		if (reason != NULL)
			sqs_kv_str(out, &first, "FailureReason", reason);
		d = sqs_col(r, 6, &isnull);
		if (!isnull)
			sqs_kv_int(out, &first, "StartedTimestamp", sqs_epoch_ms(DatumGetTimestampTz(d)));
		appendStringInfoChar(out, '}');
	}
	appendStringInfoString(out, "]}");
}

/*
 * CancelMessageMoveTask: a RUNNING task of a source the caller manages
 * becomes CANCELLED (the worker's slice under way finishes first: it
 * holds the row); answers how many it moved.
 */
void
sqs_act_cancel_message_move_task(SqsCall *call, StringInfo out)
{
	char	   *handle = sqs_req_str(&call->input->root, "TaskHandle");
	char	   *doc = sqs_b64_decode_token(handle, "TaskHandle");
	size_t		len = strlen(doc);
	Jsonb	   *jb;
	char	   *task_id;
	char	   *source_arn;
	TaskQueue	sq;
	Datum		v[3];
	bool		isnull;
	bool		first = true;
	int64		moved;

	/* SQS's handle: base64 of {"taskId": ..., "sourceArn": ...} */
	if (len < 2 || doc[0] != '{' || doc[len - 1] != '}' ||
		!pg_verify_mbstr(PG_UTF8, doc, (int) len, true))
		sqs_fail(SQS_ERR_INVALID_PARAMETER_VALUE, "Value for parameter TaskHandle is invalid.");
	jb = DatumGetJsonbP(sqs_cstring_jsonb(doc));
	task_id = JB_ROOT_IS_OBJECT(jb) ? sqs_in_str(&jb->root, "taskId") : NULL;
	source_arn = JB_ROOT_IS_OBJECT(jb) ? sqs_in_str(&jb->root, "sourceArn") : NULL;
	if (task_id == NULL || source_arn == NULL)
		sqs_fail(SQS_ERR_INVALID_PARAMETER_VALUE, "Value for parameter TaskHandle is invalid.");
	if (!task_queue(call, sqs_name_of_arn(source_arn, "SourceArn"), &sq))
		sqs_fail(SQS_ERR_RESOURCE_NOT_FOUND,
				 "The resource that you specified for the SourceArn parameter doesn't exist.");

	v[0] = CStringGetTextDatum(task_id);
	v[1] = ObjectIdGetDatum(call->auth.role);
	v[2] = Int64GetDatum(sq.id);
	sqs_run_as_owner(P_TASK_CANCEL, v, NULL);
	if (SPI_processed == 0)
		sqs_fail(SQS_ERR_RESOURCE_NOT_FOUND, "Task does not exist.");
	sqs_check_result_cols(1);
	moved = DatumGetInt64(sqs_col(0, 1, &isnull));
	appendStringInfoChar(out, '{');
	sqs_kv_int(out, &first, "ApproximateNumberOfMessagesMoved", moved);
	appendStringInfoChar(out, '}');
}
