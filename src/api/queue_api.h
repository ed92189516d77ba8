/*-------------------------------------------------------------------------
 *
 * queue_api.h
 *	  The SQL API's message calls: send, receive, delete and change visibility
 *	  (DESIGN.md "API"); each is an entry point that checks its arguments,
 *	  opens the queue (access/) and calls the rooms below.
 *
 * Files of src/api/, top to bottom (a file calls only files below it):
 *	  send.c      send, send_batch (and the entries of topics' deliveries)
 *	  receive.c   receive (long polls, receive attempts), peek
 *	  settle.c    delete, delete_batch, change_visibility(_batch)
 *	  errors.c    what every public function's errors show: no context
 *	              lines of the extension's internals (the fmgr hook;
 *	              calls nothing of ours)
 *
 * May call: lease/, fifo/, state/, access/, storage/, common/.  Nothing here includes or calls a folder above
 * it (the layers, bottom to top: common, storage, access, state, fifo,
 * lease, api, push, worker; then queue.c).
 *
 * Invariants:
 *	  - Bad input is refused with its SQLSTATE before anything changes.
 *
 *-------------------------------------------------------------------------
 */
#ifndef QUEUE_API_H
#define QUEUE_API_H

#include "storage/queue_storage.h"

/* send.c */
extern text *queue_body_text(Datum d, bool is_jsonb, QueueMeta *q,
							 const char *argname);
extern void queue_check_message_size(QueueMeta *q, Datum body, Datum attrs,
									 bool attrs_null, const char *argname);
extern void queue_check_attributes(Jsonb *attrs, const char *argname);
extern void queue_send_entries(QueueMeta *q, SendBatch *b, int64 delay,
							   bool batch, int64 *ids, bool *dup);
extern void queue_batch_array(FunctionCallInfo fcinfo, int argno,
							  const char *argname, int n, Oid elemtype,
							  Datum **vals, bool **nulls);

/* errors.c: installed by _PG_init */
extern void queue_api_errors_init(void);

/* receive.c: a consumer's FIFO receive takes one group (consumer.c) */
extern bool queue_receive_one_group;
extern PGDLLEXPORT TimestampTz queue_receive_window_opens(void);

#endif							/* QUEUE_API_H */
