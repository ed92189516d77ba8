/*-------------------------------------------------------------------------
 *
 * actions.h
 *	  What the rooms of the SQS actions share, and nothing else includes:
 *	  SQS's limits, the statements' kinds, a queue's row and settable
 *	  attributes, and what each room offers the ones above it.  Top to
 *	  bottom (each may call only those below it):
 *
 *	  actions.c	   the dispatch table (sqs_run_action), the queue a request
 *				   addresses (sqs_addressed_queue), GetCallerIdentity and
 *				   the actions refused as unsupported
 *	  queues.c	   CreateQueue, DeleteQueue, PurgeQueue, GetQueueUrl,
 *				   ListQueues, ListDeadLetterSourceQueues, tags
 *	  attributes.c a queue's Attributes map read and checked (CreateQueue's
 *				   too), Get/SetQueueAttributes, the encryption attributes
 *	  send.c	   SendMessage(Batch): a message's checks, its message and
 *				   system attributes, AWSTraceHeader
 *	  receive.c	   ReceiveMessage, long polls (resp->park)
 *	  settle.c	   DeleteMessage, ChangeMessageVisibility and their batches
 *	  move_tasks.c Start/List/CancelMessageMoveTask (queue._move_tasks)
 *	  statements.c the prepared statements and their runs (as the caller,
 *				   as the tables' owner, in a subtransaction), a result's
 *				   columns, a queue's row and depth
 *	  shape.c	   the input shape read, names, URLs and ARNs, the output
 *				   shape's helpers, a batch's entries and its answer
 *
 * actions.c calls the six action rooms; queues.c calls attributes.c too;
 * every action room calls statements.c and shape.c, which call neither
 * each other nor any room above (sqs.h says what lies below them all:
 * wire.c's sqs_fail, digest.c, shared.c, the core's core_api.h).
 *
 *-------------------------------------------------------------------------
 */
#ifndef QUEUE_SQS_ACTIONS_H
#define QUEUE_SQS_ACTIONS_H

#include "utils/elog.h"
#include "utils/jsonb.h"
#include "utils/timestamp.h"

#include "sqs.h"
/* SQS's limits that sqs.h does not hold (REFERENCE.md 1.7) */
#define SQS_NAME_MAX			80
#define SQS_MAX_ATTRS			10		/* message attributes per message */
#define SQS_ATTR_NAME_MAX		256
#define SQS_TOKEN_MAX			128		/* group, dedup, attempt ids */
#define SQS_MESSAGE_MAX			(1024 * 1024)	/* SQS's largest message */
#define SQS_BATCH_MAX_BYTES		(1024 * 1024)	/* a whole send batch */
#define SQS_MAX_VISIBILITY		43200
#define SQS_LIST_MAX			1000
#define SQS_MOVE_TASKS_MAX		10
#define SQS_MAX_TAGS			50

/* where a message's AWSTraceHeader is kept among its attributes */
#define TRACE_HEADER_ATTR		"queue.aws_trace_header"

/* The statements, prepared once per backend and kept (statements.c) */
typedef enum PlanKind
{
	P_CREATE,
	P_ALTER,
	P_DROP,
	P_PURGE,
	P_QUEUE,
	P_LIST,
	P_DLQ_SOURCES,
	P_STATS,
	P_SEND,
	P_SEND_BATCH,
	P_WAIT_HINT,
	P_RECEIVE,
	P_DELETE,
	P_CHANGE_VIS,
	P_TAG,
	P_UNTAG,
	P_TASK_SOURCE,
	P_TASK_ADD,
	P_TASK_PRUNE,
	P_TASK_LIST,
	P_TASK_CANCEL,
	P_SSE_SET,
	P_SSE_GET,
	P_NUM
} PlanKind;

/* The members of an object, in its (jsonb) order. */
typedef struct Pairs
{
	int			n;
	char	  **keys;
	JsonbValue *vals;
} Pairs;

/* A queue's row of queue.queues, copied out. */
typedef struct QueueRow
{
	char	   *name;
	bool		fifo;
	int64		visibility;
	int64		delay;
	int64		retention;
	int64		max_message_size;
	int64		receive_wait;
	bool		cbd;
	char	   *scope;
	char	   *dlq;
	int64		max_receive_count;
	bool		allow_null;
	int			nallow;
	char	  **allow;
	Jsonb	   *tags;
	TimestampTz created_at;
} QueueRow;

/* Settable attributes as an action gives them (attributes.c). */
typedef struct QueueAttrs
{
	bool		has_visibility,
				has_delay,
				has_retention,
				has_max_size,
				has_wait,
				has_fifo,
				has_cbd,
				has_scope,
				has_redrive,
				has_allow;
	int64		visibility,
				delay,
				retention,
				max_size,
				wait;
	bool		fifo,
				cbd;
	const char *scope;
	char	   *dlq;			/* "" removes the dead-letter queue */
	int64		max_receive_count;
	bool		allow_all;		/* redrive_allow null */
	int			nallow;
	char	  **allow;
	StringInfoData sse;			/* SQS's encryption attributes given, as
								 * a JSON object's members; len 0: none */
} QueueAttrs;

/* shape.c: reading the input shape (a member, a scalar, a list, an integer) */
extern JsonbValue *sqs_member(JsonbContainer *c, const char *key);
extern char *sqs_scalar_text(JsonbValue *v, const char *name);
extern char *sqs_in_str(JsonbContainer *c, const char *key);
extern char *sqs_req_str(JsonbContainer *c, const char *key);
extern bool sqs_wire_int(const char *text, int64 *out);
extern bool sqs_in_int(JsonbContainer *c, const char *key, int64 min, int64 max, int64 *out);
extern JsonbContainer *sqs_in_container(JsonbContainer *c, const char *key, bool object);
extern void sqs_obj_pairs(JsonbContainer *c, Pairs *p);
extern char **sqs_in_str_list(JsonbContainer *c, const char *key, int *n);
/* names, URLs, ARNs (sqs_queue_url and sqs_queue_arn: sqs.h) */
extern char *sqs_name_of_arn(const char *arn, const char *param);
extern char *sqs_queue_of(SqsCall *call);
extern bool sqs_valid_token(const char *t);
/* the output shape: a member's key, members, datums for parameters */
extern void sqs_key(StringInfo out, bool *first, const char *k);
extern void sqs_kv_str(StringInfo out, bool *first, const char *k, const char *v);
extern void sqs_kv_int(StringInfo out, bool *first, const char *k, int64 v);
extern void sqs_kv_int_str(StringInfo out, bool *first, const char *k, int64 v);
extern void sqs_kv_message_id(StringInfo out, bool *first, const char *k, int64 id);
extern void sqs_kv_sequence(StringInfo out, bool *first, const char *k, int64 seq);
extern int64 sqs_epoch_ms(TimestampTz ts);
extern Datum sqs_secs_interval(int64 s);
extern Datum sqs_cstring_jsonb(const char *s);
extern char *sqs_b64_encode(const char *s);
extern char *sqs_b64_decode_token(const char *s, const char *param);
extern Datum sqs_names_array(char **names, int n);
/* a batch: its entries (1..10, distinct valid ids), its answer */
extern void sqs_batch_result(StringInfo out, StringInfo ok, StringInfo failed);
extern JsonbContainer **sqs_batch_entries(SqsCall *call, int *n, char ***ids);
extern void sqs_failed_entry(StringInfo out, bool *first_entry, const char *id, SqsError err, const char *msg);

/* statements.c: run a statement kind, read its result, a queue's row and depth */
extern void sqs_run(PlanKind k, Datum *values, const char *nulls);
extern void sqs_run_as_owner(PlanKind k, Datum *values, const char *nulls);
extern ErrorData *sqs_run_in_subxact(PlanKind k, Datum *values, const char *nulls, bool *result);
extern void sqs_check_result_cols(int n);
extern Datum sqs_col(uint64 row, int c, bool *isnull);
extern char *sqs_col_text(uint64 row, int c);
extern bool sqs_fetch_queue(const char *name, QueueRow *q);
extern void sqs_need_queue(const char *name, QueueRow *q);
extern void sqs_queue_depth(const char *name, int64 *counts);

/* attributes.c: the Attributes map (CreateQueue's too), Get/SetQueueAttributes */
extern bool sqs_attr_bool(const char *name, const char *value);
extern void sqs_parse_queue_attrs(JsonbContainer *map, bool creating, QueueAttrs *a, bool queue_fifo);
extern void sqs_store_sse(const char *name, const QueueAttrs *a);
extern void sqs_act_set_queue_attributes(SqsCall *call, StringInfo out);
extern void sqs_act_get_queue_attributes(SqsCall *call, StringInfo out);

/* queues.c: the actions on queues as a whole */
extern void sqs_act_create_queue(SqsCall *call, StringInfo out);
extern void sqs_act_delete_queue(SqsCall *call, StringInfo out);
extern void sqs_act_purge_queue(SqsCall *call, StringInfo out);
extern void sqs_act_get_queue_url(SqsCall *call, StringInfo out);
extern void sqs_act_list_queues(SqsCall *call, StringInfo out);
extern void sqs_act_list_dead_letter_source_queues(SqsCall *call, StringInfo out);
extern void sqs_act_tag_queue(SqsCall *call, StringInfo out);
extern void sqs_act_untag_queue(SqsCall *call, StringInfo out);
extern void sqs_act_list_queue_tags(SqsCall *call, StringInfo out);

/* send.c: SendMessage, SendMessageBatch */
extern void sqs_act_send_message(SqsCall *call, StringInfo out);
extern void sqs_act_send_message_batch(SqsCall *call, StringInfo out);

/* receive.c: ReceiveMessage (may set resp->park: a long poll) */
extern void sqs_act_receive_message(SqsCall *call, StringInfo out, SqsResponse *resp);

/* settle.c: DeleteMessage, ChangeMessageVisibility and their batches */
extern void sqs_act_delete_message(SqsCall *call, StringInfo out);
extern void sqs_act_change_message_visibility(SqsCall *call, StringInfo out);
extern void sqs_act_delete_message_batch(SqsCall *call, StringInfo out);
extern void sqs_act_change_message_visibility_batch(SqsCall *call, StringInfo out);

/* move_tasks.c: the message move tasks */
extern void sqs_act_start_message_move_task(SqsCall *call, StringInfo out);
extern void sqs_act_list_message_move_tasks(SqsCall *call, StringInfo out);
extern void sqs_act_cancel_message_move_task(SqsCall *call, StringInfo out);

#endif							/* QUEUE_SQS_ACTIONS_H */
