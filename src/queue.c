/*-------------------------------------------------------------------------
 *
 * queue.c
 *	  Module entry point: GUCs and, when preloaded, the shared memory hooks.
 *
 * Everything a SQL function needs works without preloading; preloading
 * adds the shared memory (counters, long-poll wake-ups) and the background
 * workers.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "miscadmin.h"
#include "fmgr.h"
#include "utils/guc.h"

#include "common/queue_common.h"
#include "storage/queue_storage.h"
#include "fifo/queue_fifo.h"
#include "lease/queue_lease.h"
#include "api/queue_api.h"
#include "push/queue_push.h"
#include "worker/queue_worker.h"

PG_MODULE_MAGIC;

/* Largest max_message_size a queue may have (queue.max_message_size_limit). */
int			queue_max_message_size_limit = 1048576;

/* True when loaded from shared_preload_libraries. */
bool		queue_preloaded = false;

/*
 * The SQS endpoint's settings (DESIGN.md "SQS API").  They live here so
 * they exist whether or not the endpoint's library is loaded (the prefix
 * "queue" is reserved below); the library (src/sqs/) reads them.
 */
static char *queue_sqs_listen = NULL;
static int	queue_sqs_workers = 2;
static char *queue_sqs_database = NULL;
static char *queue_sqs_account_id = NULL;
static char *queue_sqs_public_url = NULL;
static int	queue_sqs_max_connections = 10000;
static int	queue_sqs_lock_timeout = 10;
static int	queue_sqs_statement_timeout = 5000;
static int	queue_sqs_request_memory = 65536;
static int	queue_sqs_long_polls_per_role = 1000;
static int	queue_sqs_forwards_per_role = 64;

/*
 * The layout queue.create gives a queue when its call does not say
 * (DESIGN.md "Storage"): queue.create's default for "dedicated" reads it.
 */
static int	queue_default_storage = 0;
static const struct config_enum_entry storage_options[] = {
	{"shared", 0, false},
	{"dedicated", 1, false},
	{NULL, 0, false}
};

/*
 * What the worker may do beyond PostgreSQL's own vacuum while a transaction
 * holds the horizon back (worker/horizon.c): auto (recycle and compact only
 * while no snapshot could see what goes, nor a standby read it),
 * ignore_standbys (the same, standbys not counted), off (vacuum only).
 */
static const struct config_enum_entry maintenance_options[] = {
	{"auto", QUEUE_MAINTENANCE_AUTO, false},
	{"ignore_standbys", QUEUE_MAINTENANCE_IGNORE_STANDBYS, false},
	{"off", QUEUE_MAINTENANCE_OFF, false},
	{NULL, 0, false}
};

void		_PG_init(void);

PG_FUNCTION_INFO_V1(queue_preloaded_sql);

void
_PG_init(void)
{
	DefineCustomIntVariable("queue.max_message_size_limit",
							"Largest max_message_size a queue may be given, in bytes.",
							"Message bodies are stored as text, so the hard ceiling is 1 GB.",
							&queue_max_message_size_limit,
							1048576, 1, 1024 * 1024 * 1024 - 1,
							PGC_SUSET, 0,
							NULL, NULL, NULL);
	DefineCustomIntVariable("queue.max_queues",
							"Queues whose counters shared memory can hold, over all databases.",
							"Queues beyond this many still work; their counters read as 0.",
							&queue_max_queues,
							16384, 16, 1000000,
							PGC_POSTMASTER, 0,
							NULL, NULL, NULL);
	DefineCustomEnumVariable("queue.default_storage",
							 "The layout of a queue created without \"dedicated\": shared or dedicated.",
							 "Shared: rows in the tables of all queues; dedicated: tables of its own.",
							 &queue_default_storage,
							 0, storage_options,
							 PGC_USERSET, 0,
							 NULL, NULL, NULL);
	DefineCustomEnumVariable("queue.storage_maintenance",
							 "What the queue worker does beyond vacuum while the horizon is held back: "
							 "auto, ignore_standbys or off.",
							 "auto: recycle and compact queue tables only while no snapshot could see the "
							 "versions removed and no standby is connected; ignore_standbys: standbys not "
							 "counted; off: plain vacuum only.",
							 &queue_storage_maintenance,
							 QUEUE_MAINTENANCE_AUTO, maintenance_options,
							 PGC_SIGHUP, 0,
							 NULL, NULL, NULL);
	DefineCustomIntVariable("queue.plan_cache_queues",
							"Queues a backend keeps prepared statements for (0: every queue it uses).",
							"Beyond this many, the plans of the queue used longest ago are freed.",
							&queue_plan_cache_queues,
							0, 0, 1000000,
							PGC_USERSET, 0,
							NULL, NULL, NULL);
	DefineCustomBoolVariable("queue.worker_enabled",
							 "Runs the queue background workers (sweeps of expired messages and ids).",
							 NULL,
							 &queue_worker_enabled,
							 true,
							 PGC_SIGHUP, 0,
							 NULL, NULL, NULL);
	DefineCustomIntVariable("queue.sweep_interval",
							"Time between two passes of a database's queue worker.",
							"Each pass sweeps only the queues in which something can have expired.",
							&queue_sweep_interval,
							1000, 10, 3600 * 1000,
							PGC_SIGHUP, GUC_UNIT_MS,
							NULL, NULL, NULL);
	DefineCustomBoolVariable("queue.durable_receives",
							 "Makes transactions that only received wait for their WAL flush at commit.",
							 "Off: such a transaction commits as with synchronous_commit = off; a lease lost "
							 "in a crash only makes its message visible again.",
							 &queue_durable_receives,
							 false,
							 PGC_USERSET, 0,
							 NULL, NULL, NULL);
	DefineCustomStringVariable("queue.sqs_listen",
							   "Address the SQS endpoint listens on (host:port; empty: off).",
							   "A port alone, or :port, listens on 127.0.0.1. Needs queue in shared_preload_libraries.",
							   &queue_sqs_listen,
							   "",
							   PGC_POSTMASTER, 0,
							   NULL, NULL, NULL);
	DefineCustomIntVariable("queue.sqs_workers",
							"Background workers serving the SQS endpoint.",
							NULL,
							&queue_sqs_workers,
							2, 1, 64,
							PGC_POSTMASTER, 0,
							NULL, NULL, NULL);
	DefineCustomStringVariable("queue.sqs_database",
							   "Database the SQS endpoint serves.",
							   NULL,
							   &queue_sqs_database,
							   "postgres",
							   PGC_POSTMASTER, 0,
							   NULL, NULL, NULL);
	DefineCustomStringVariable("queue.sqs_account_id",
							   "Account id in the SQS endpoint's queue URLs and ARNs.",
							   NULL,
							   &queue_sqs_account_id,
							   "000000000000",
							   PGC_SIGHUP, 0,
							   NULL, NULL, NULL);
	DefineCustomStringVariable("queue.sqs_public_url",
							   "Base URL of the SQS endpoint's queue URLs, as clients reach it (e.g. https://sqs.example.com).",
							   "Empty: http://<Host header>. Set it behind a TLS proxy.",
							   &queue_sqs_public_url,
							   "",
							   PGC_SIGHUP, 0,
							   NULL, NULL, NULL);
	DefineCustomIntVariable("queue.sqs_max_connections",
							"Open HTTP connections each SQS endpoint worker accepts.",
							NULL,
							&queue_sqs_max_connections,
							10000, 16, 1000000,
							PGC_POSTMASTER, 0,
							NULL, NULL, NULL);
	DefineCustomIntVariable("queue.sqs_lock_timeout",
							"How long an SQS request waits for a lock before it is parked and tried again.",
							"A request still blocked after 5 s of tries is answered ServiceUnavailable (503).",
							&queue_sqs_lock_timeout,
							10, 1, 10000,
							PGC_SIGHUP, GUC_UNIT_MS,
							NULL, NULL, NULL);
	DefineCustomIntVariable("queue.sqs_statement_timeout",
							"How long one SQS request's transaction may run before it is cancelled (ServiceUnavailable).",
							NULL,
							&queue_sqs_statement_timeout,
							5000, 100, 3600000,
							PGC_SIGHUP, GUC_UNIT_MS,
							NULL, NULL, NULL);
	DefineCustomIntVariable("queue.sqs_request_memory",
							"Request bodies each SQS endpoint worker may hold for all its connections together.",
							"A body that would exceed it is refused before it is read (ServiceUnavailable, 503).",
							&queue_sqs_request_memory,
							65536, 4096, INT_MAX / 1024,
							PGC_SIGHUP, GUC_UNIT_KB,
							NULL, NULL, NULL);
	DefineCustomIntVariable("queue.sqs_long_polls_per_role",
							"Long polls of one role each SQS endpoint worker keeps waiting at once.",
							"The role's next long poll is answered ServiceUnavailable (503) until one ends.",
							&queue_sqs_long_polls_per_role,
							1000, 1, INT_MAX,
							PGC_SIGHUP, 0,
							NULL, NULL, NULL);
	DefineCustomIntVariable("queue.sqs_forwards_per_role",
							"Requests of one role each SQS endpoint worker forwards to other Citus nodes at once.",
							"Of the worker's 256 forward slots; beyond it the role's requests are answered ServiceUnavailable (503).",
							&queue_sqs_forwards_per_role,
							64, 1, 256,
							PGC_SIGHUP, 0,
							NULL, NULL, NULL);
	queue_failed_init();
	queue_rate_init();
	queue_consumer_init();
	queue_move_task_init();
	MarkGUCPrefixReserved("queue");

	queue_catalog_init();
	queue_planner_hook_init();
	queue_api_errors_init();

	if (process_shared_preload_libraries_in_progress)
	{
		queue_preloaded = true;
		queue_shmem_init();
		queue_worker_register_launcher();
		queue_utility_hook_init();

		/*
		 * The SQS endpoint: its own library (libmicrohttpd), loaded only
		 * when asked for, so the core has no HTTP dependency.  It registers
		 * its workers; it calls back into this library (core_api.h), which
		 * is loaded by now.
		 */
		if (queue_sqs_listen != NULL && queue_sqs_listen[0] != '\0')
		{
			void		(*sqs_register) (void);

			sqs_register = (void (*) (void))
				load_external_function("$libdir/queue_sqs", "queue_sqs_register", true, NULL);
			sqs_register();
		}
	}
}

/* queue._preloaded(): lets CREATE EXTENSION warn when preload is missing. */
Datum
queue_preloaded_sql(PG_FUNCTION_ARGS)
{
	PG_RETURN_BOOL(queue_preloaded);
}
