/*-------------------------------------------------------------------------
 *
 * elevated.c
 *	  The settings under which the extension's own background processes
 *	  run their SQL, and the sandbox a consumer's handler runs in
 *	  (DESIGN.md "Access": nothing that runs with elevated rights can be
 *	  steered by a session's, a role's or a database's settings).
 *
 * The queue worker and the consumer processes are sessions of the
 * bootstrap superuser.  PostgreSQL applies the database's settings (ALTER
 * DATABASE ... SET, which its owner may issue) when such a process
 * connects.  A search_path naming a schema of the owner's would let the
 * owner's operators and functions shadow pg_catalog's in every statement
 * the process runs, as superuser (the class of CVE-2018-1058 and
 * CVE-2023-39417).  So right after connecting, queue_pin_process_settings
 * sets the settings that change what a statement means or whether it runs
 * (search_path first) at PGC_S_OVERRIDE: above every database, role and
 * file setting, and the value RESET returns to.  The worker never runs user
 * code, so nothing can change them afterwards; the consumer processes run
 * handlers, which is what queue_sandbox_enter/leave are for.
 *
 * A handler runs the way PostgreSQL runs index expressions during VACUUM
 * and ANALYZE (vacuum_rel, do_analyze_rel: the table owner's role, a
 * security-restricted operation, a new GUC nest level, and AtEOXact_GUC
 * with isCommit false afterwards, so every setting made inside, SET or
 * set_config(..., false) alike, is undone): as the consumer's role, with
 * SECURITY_RESTRICTED_OPERATION (no SET ROLE, no temporary objects, no
 * PREPARE, no cursors WITH HOLD, no LISTEN: nothing that outlives the
 * batch), at a GUC nest level of its own whose search_path is the one its
 * creator had at create_consumer.  Leaving the sandbox pops that level
 * (undoing whatever the handler set), restores the superuser identity, and
 * gives back session-level advisory locks the handler took.  pg_cron
 * takes the other road (a process per job, connected as the job's role);
 * a consumer process serves many batches, so it needs the sandbox.
 *
 * May call: PostgreSQL only.  Called by: worker.c, sweep.c, failed.c,
 * move_task.c, consumer_worker.c.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "miscadmin.h"
#include "postmaster/bgworker.h"
#include "storage/lock.h"
#include "utils/acl.h"
#include "utils/guc.h"

#include "common/queue_common.h"

/*
 * What a database owner could set that changes the meaning of our
 * statements or keeps them from running.  search_path is the one that
 * matters for rights; the others keep the worker working whatever the
 * database says (a read-only default would stop every sweep, a
 * statement_timeout would cut them, transform_null_equals would change
 * what "= NULL" means, standard_conforming_strings how a literal parses,
 * session_replication_role whether triggers fire).
 */
static const struct
{
	const char *name;
	const char *value;
}			pinned[] =
{
	{"search_path", QUEUE_SEARCH_PATH},
	{"statement_timeout", "0"},
	{"lock_timeout", "0"},
	{"idle_in_transaction_session_timeout", "0"},
	{"default_transaction_read_only", "off"},
	{"default_transaction_isolation", "read committed"},
	{"default_transaction_deferrable", "off"},
	{"transform_null_equals", "off"},
	{"standard_conforming_strings", "on"},
	{"session_replication_role", "origin"},
	{"DateStyle", "ISO, MDY"},
	{"IntervalStyle", "postgres"},
};

/*
 * Right after BackgroundWorkerInitializeConnection*: pin the settings
 * above for the life of the process (PGC_S_OVERRIDE outranks the
 * database's and the role's settings and the configuration file, and is
 * also the value RESET goes back to).
 */
void
queue_pin_process_settings(void)
{
	bool		own_xact = !IsTransactionState();

	for (int i = 0; i < lengthof(pinned); i++)
		SetConfigOption(pinned[i].name, pinned[i].value, PGC_SUSET, PGC_S_OVERRIDE);

	/*
	 * Who the process is.  ALTER DATABASE ... SET session_authorization (or
	 * role), which the database's owner may issue and PostgreSQL applies
	 * when a superuser's session connects, would make every statement of
	 * ours run as a role the owner chose; exit_on_error would turn a
	 * client's mistake into the end of the process.  Take the identity the
	 * process connected with back, at the same source; checking a role
	 * name needs the catalog, hence a transaction of its own when the
	 * caller has none.
	 */
	if (own_xact)
		StartTransactionCommand();
	SetConfigOption("session_authorization",
					GetUserNameFromId(GetAuthenticatedUserId(), false),
					PGC_SUSET, PGC_S_OVERRIDE);
	SetConfigOption("role", "none", PGC_SUSET, PGC_S_OVERRIDE);
	SetConfigOption("exit_on_error", "off", PGC_SUSET, PGC_S_OVERRIDE);
	if (GetUserId() != GetAuthenticatedUserId() || !superuser())
		ereport(FATAL,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("queue background process could not take back its own identity")));
	if (own_xact)
		CommitTransactionCommand();
}

/*
 * The queue worker serves every queue of its database, its consumers'
 * processes and its move tasks from one loop: a lock some role's open
 * transaction holds (an open purge, a move, a row of the registry) must
 * not stop it.  Its lock waits end after QUEUE_WORKER_LOCK_TIMEOUT ms; the
 * statement that waited fails, and what it was for is tried again on a
 * later pass (queue_recover).
 */
#define QUEUE_WORKER_LOCK_TIMEOUT "100"

void
queue_bound_lock_waits(void)
{
	SetConfigOption("lock_timeout", QUEUE_WORKER_LOCK_TIMEOUT, PGC_SUSET, PGC_S_OVERRIDE);
}

/*
 * Whether this process is serving an action of the SQS endpoint (set by
 * queue_sqs around each one, core_api.h).  The SQL API then keeps SQS's
 * rules where the wire differs from SQL (DESIGN.md "SQS API"): a message's
 * size as SQS counts it, which the endpoint checked (api/send.c); the
 * latest receipt of a standard message whose lease ended leasing it again,
 * and a FIFO delete needing a running lease (api/settle.c).
 */
bool		queue_sqs_wire = false;

void
queue_sqs_wire_rules(bool on)
{
	queue_sqs_wire = on;
}

/*
 * After an error in one of a background process's own transactions:
 * report it (a lock it would not wait for at DEBUG1 only: it is tried
 * again, and a held lock would otherwise log a line every pass) and
 * abandon the transaction; the caller's memory context is cxt again.
 */
void
queue_recover(MemoryContext cxt)
{
	ErrorData  *edata;

	MemoryContextSwitchTo(cxt);
	edata = CopyErrorData();
	if (edata->sqlerrcode == ERRCODE_LOCK_NOT_AVAILABLE)
	{
		FlushErrorState();
		ereport(DEBUG1,
				(errmsg("%s: %s; tried again later", MyBgworkerEntry ?
						MyBgworkerEntry->bgw_type : "queue", edata->message)));
	}
	else
	{
		EmitErrorReport();
		FlushErrorState();
	}
	AbortCurrentTransaction();
	MemoryContextSwitchTo(cxt);
}

/*
 * Enter the handler's sandbox, inside the batch's transaction: the
 * consumer's role in a security-restricted operation, at a new GUC nest
 * level with the creator's search_path and the given statement_timeout
 * (ms, as text).  queue_sandbox_leave must follow; an error in between is
 * undone by the transaction's abort (nest level, user and security
 * context alike).
 */
void
queue_sandbox_enter(QueueSandbox *sb, Oid role, const char *search_path,
					const char *statement_timeout)
{
	GetUserIdAndSecContext(&sb->save_userid, &sb->save_sec);
	sb->nestlevel = NewGUCNestLevel();
	(void) set_config_option("search_path", search_path,
							 PGC_USERSET, PGC_S_SESSION,
							 GUC_ACTION_SAVE, true, 0, false);
	(void) set_config_option("statement_timeout", statement_timeout,
							 PGC_USERSET, PGC_S_SESSION,
							 GUC_ACTION_SAVE, true, 0, false);
	SetUserIdAndSecContext(role, sb->save_sec | SECURITY_LOCAL_USERID_CHANGE |
						   SECURITY_RESTRICTED_OPERATION);
}

/*
 * Leave the sandbox: every setting the handler made is undone (isCommit
 * false pops SET, SET LOCAL and set_config alike, as after VACUUM's
 * index expressions), the identity is the process's again, and advisory
 * locks the handler took at session level are given back.
 */
void
queue_sandbox_leave(QueueSandbox *sb)
{
	AtEOXact_GUC(false, sb->nestlevel);
	SetUserIdAndSecContext(sb->save_userid, sb->save_sec);
	LockReleaseSession(USER_LOCKMETHOD);
}
