/*-------------------------------------------------------------------------
 *
 * queue_access.h
 *	  Who may do what (DESIGN.md "Access"): privilege checks and the switch
 *	  to the tables' owner for an API call, roles that own queues, consumers,
 *	  subscriptions and access keys, and the SQS endpoint's keys.
 *
 * Files of src/access/, top to bottom (a file calls only files below it):
 *	  access_keys.c the SQS endpoint's access keys (secrets under the receipt key)
 *	  role_refs.c roles referenced by the extension: DROP ROLE / OWNED / REASSIGN
 *	  acl.c       privileges of queues, queue_open/queue_enter: the caller's check,
 *	              then the tables' owner with a pinned search_path
 *
 * May call: storage/, common/.  Nothing here includes or calls a folder above
 * it (the layers, bottom to top: common, storage, access, state, fifo,
 * lease, api, push, worker; then queue.c).
 *
 * Invariants:
 *	  - A privilege is checked before any row is touched (42501).
 *	  - Code run as the tables' owner runs with search_path pinned to
 *	    pg_catalog, pg_temp, and never runs a caller's code.
 *
 *-------------------------------------------------------------------------
 */
#ifndef QUEUE_ACCESS_H
#define QUEUE_ACCESS_H

#include "storage/queue_storage.h"

/* acl.c */
typedef struct QueueCall
{
	Oid			caller;			/* who called: checked against the queue */
	Oid			save_userid;
	int			save_sec;
	int			search_path_pin;	/* queue_pin_search_path's (compat.h) */
} QueueCall;

extern void queue_enter(QueueCall *call);
extern void queue_leave(QueueCall *call);
extern bool queue_role_holds(Oid relid, Oid role, AclMode mode);
extern bool queue_role_holds_shared(Oid role, Oid owner, const Oid *grantees, int n);
extern AclMode queue_priv_mode(QueuePriv priv);
extern void queue_check_privilege(QueueMeta *q, Oid caller, QueuePriv priv);
extern bool queue_meta_role_holds(QueueMeta *q, Oid role, QueuePriv priv);
extern QueueMeta *queue_open(QueueCall *call, text *name, QueuePriv priv);
extern void queue_close(QueueCall *call);

extern bool queue_holds_by_id(int64 queue_id, Oid role, QueuePriv priv, bool any);
extern PGDLLEXPORT bool queue_role_may_log_in(Oid role, TimestampTz now);

/* role_refs.c */
extern void queue_role_refs_utility(Node *stmt, bool done);

#endif							/* QUEUE_ACCESS_H */
