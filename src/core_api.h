/*-------------------------------------------------------------------------
 *
 * core_api.h
 *	  What the core library exports to the SQS endpoint's library
 *	  (src/sqs/, queue_sqs): the few functions it calls directly.  Both
 *	  libraries live in one process; the core is loaded first (it loads
 *	  queue_sqs itself, queue.c), so these symbols resolve: each is
 *	  PGDLLEXPORT, since PGXS builds modules with -fvisibility=hidden from
 *	  PostgreSQL 16 (on 18, without it, queue_sqs.so failed to load:
 *	  "undefined symbol: queue_pin_process_settings").  Everything else the
 *	  endpoint does goes through the SQL API, as the caller's role.
 *
 *-------------------------------------------------------------------------
 */
#ifndef QUEUE_CORE_API_H
#define QUEUE_CORE_API_H

#include "utils/timestamp.h"

/* elevated.c: the settings a background process of ours runs under */
extern PGDLLEXPORT void queue_pin_process_settings(void);

/*
 * wait.c: long polls parked in an event loop instead of a process.  A
 * watcher (0 .. 63, one per endpoint worker) attaches its latch once;
 * queue_wait_watch(w, queue_id, true) asks for that latch to be set
 * whenever the queue's wait slot is woken (a commit made messages
 * receivable), until the same call with false.  A queue's generation moves
 * before each wake: read it before trying a receive, watch, then compare
 * again before sleeping (a commit in between has moved it).
 */
extern PGDLLEXPORT void queue_wait_watcher_attach(int watcher);
extern PGDLLEXPORT void queue_wait_watcher_detach(int watcher);
extern PGDLLEXPORT void queue_wait_watch(int watcher, int64 queue_id, bool on);
extern PGDLLEXPORT uint64 queue_wait_generation_of(int64 queue_id);
extern PGDLLEXPORT int	queue_wait_slot_of(int64 queue_id);

/* acl.c: whether a role may log in now (LOGIN, VALID UNTIL not past) */
extern PGDLLEXPORT bool queue_role_may_log_in(Oid role, TimestampTz now);

/*
 * move_task.c: the current transaction recorded a RUNNING message move
 * task (queue._move_tasks); its commit wakes the database's queue worker,
 * which runs the task in the background.
 */
extern PGDLLEXPORT void queue_move_task_started(void);

/*
 * citus.c: on a Citus cluster queue.citus_setup() set up, the SQS endpoint
 * URL of the node holding queue_name's shard when that is another node
 * (queue_citus.sqs_endpoints), palloc'd; NULL when the request is served
 * here (no such cluster, this node's queue, no endpoint named, or a
 * lookup that failed: logged, not thrown; the request's own timeouts and
 * cancels are).  SPI connected.
 */
extern PGDLLEXPORT char *queue_citus_endpoint_of(const char *queue_name);

/*
 * elevated.c: on (true) while the endpoint serves an action: the SQL API
 * then keeps SQS's rules where the wire differs from SQL (a message's size
 * as SQS counts it, which the endpoint checked; the latest receipt of a
 * standard message whose lease ended leases it again; a FIFO delete needs
 * a running lease).  Off between actions.
 */
extern PGDLLEXPORT void queue_sqs_wire_rules(bool on);

/*
 * receive.c: when the last queue.receive of this process came back empty
 * because a rate limit's window was closed, the time it opens (a parked
 * long poll tries again then, no sooner); 0 otherwise.
 */
extern PGDLLEXPORT TimestampTz queue_receive_window_opens(void);

#endif							/* QUEUE_CORE_API_H */
