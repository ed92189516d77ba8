/*-------------------------------------------------------------------------
 *
 * worker.c
 *	  The SQS endpoint's workers as processes: their registration in the
 *	  postmaster, each worker's start (its database, its settings, the
 *	  long-poll watcher), and its event loop, which serves libmicrohttpd
 *	  (server.c), the parked and forwarded requests (exchange.c) and
 *	  libcurl's forwards (forward.c) from one WaitEventSet.
 *
 * queue.sqs_workers background workers each listen on queue.sqs_listen
 * (server.c).  A worker's loop waits on its latch (signals, and the wakes
 * of the wait slots its parked requests watch, core_api.h), postmaster
 * death, libmicrohttpd's epoll descriptor, the sockets of the parked and
 * forwarded connections (to see a client leave) and libcurl's sockets.
 * Every request is one call of sqs_handle (protocol.c), which runs its own
 * transactions and never throws; a ReceiveMessage that would wait comes
 * back with park set, and its connection is suspended until its queue's
 * wait generation moves or its time ends, then served again (exchange.c).
 *
 * Also the library's PG_MODULE_MAGIC and _PG_init: this file owns them.
 *
 * May call: server.c, exchange.c, forward.c, protocol.c (the request
 * bounds' settings), shares.c (their settings), shared.c, the core's
 * watchers and settings (core_api.h), PostgreSQL.  Called by: the core's
 * _PG_init (queue_sqs_register, in the postmaster) and the postmaster
 * (queue_sqs_main, each worker).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <sys/resource.h>

#include "access/xact.h"
#include "catalog/pg_database.h"
#include "commands/dbcommands.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "postmaster/interrupt.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "tcop/tcopprot.h"
#include "utils/guc.h"
#include "utils/memutils.h"

#include "common/compat.h"
#include "core_api.h"
#include "server.h"
#include "sqs.h"

PG_MODULE_MAGIC;

PGDLLEXPORT void queue_sqs_register(void);
PGDLLEXPORT void queue_sqs_main(Datum main_arg);
void		_PG_init(void);

/* user_data of libcurl's sockets in the wait set */
static char sqs_forward_marker;
static WaitEventSet *sqs_wes;
static WaitEvent *sqs_events;
static int	sqs_wes_size;

/* The core loads this library and calls queue_sqs_register; nothing here. */
void
_PG_init(void)
{
}

/*
 * Called by the core's _PG_init in the postmaster when queue.sqs_listen is
 * set: checks the address (a bad one stops the server here, with its
 * reason, rather than in workers restarted every second) and registers the
 * workers.
 */
void
queue_sqs_register(void)
{
	const char *listen = GetConfigOption("queue.sqs_listen", false, false);
	const char *nworkers_s = GetConfigOption("queue.sqs_workers", false, false);
	int			nworkers = nworkers_s ? atoi(nworkers_s) : 2;
	SqsListen	addr;
	const char *err = NULL;

	if (!sqs_parse_listen(listen, &addr, &err))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid value for parameter \"queue.sqs_listen\": \"%s\"", listen),
				 errdetail("%s.", err),
				 errhint("Use port, :port, host:port or [IPv6 address]:port.")));

	sqs_shared_request();
	for (int i = 0; i < nworkers; i++)
	{
		BackgroundWorker bgw;

		memset(&bgw, 0, sizeof(bgw));
		bgw.bgw_flags = BGWORKER_SHMEM_ACCESS | BGWORKER_BACKEND_DATABASE_CONNECTION;
		bgw.bgw_start_time = BgWorkerStart_RecoveryFinished;
		bgw.bgw_restart_time = 1;
		snprintf(bgw.bgw_library_name, BGW_MAXLEN, "queue_sqs");
		snprintf(bgw.bgw_function_name, BGW_MAXLEN, "queue_sqs_main");
		snprintf(bgw.bgw_name, BGW_MAXLEN, "queue sqs worker %d", i);
		snprintf(bgw.bgw_type, BGW_MAXLEN, "queue sqs worker");
		bgw.bgw_main_arg = Int32GetDatum(i);
		bgw.bgw_notify_pid = 0;
		RegisterBackgroundWorker(&bgw);
	}
}

/*
 * The loop's WaitEventSet: latch, postmaster death, libmicrohttpd's epoll
 * descriptor, each parked or forwarded connection's socket (for its close)
 * and libcurl's.  Built again when those changed, once per pass:
 * O(parked).
 */
static void
sqs_build_wait_set(int mhd_fd)
{
	int			size = 3 + sqs_park_nsockets() + sqs_forward_nsockets();

	if (sqs_wes != NULL)
		FreeWaitEventSet(sqs_wes);
	/* a set for the life of the process: no resource owner (17 on) */
#if PG_VERSION_NUM >= 170000
	sqs_wes = CreateWaitEventSet(NULL, size);
#else
	sqs_wes = CreateWaitEventSet(TopMemoryContext, size);
#endif
	AddWaitEventToSet(sqs_wes, WL_LATCH_SET, PGINVALID_SOCKET, MyLatch, NULL);
	AddWaitEventToSet(sqs_wes, WL_EXIT_ON_PM_DEATH, PGINVALID_SOCKET, NULL, NULL);
	AddWaitEventToSet(sqs_wes, WL_SOCKET_READABLE, mhd_fd, NULL, NULL);
	sqs_park_add_events(sqs_wes);
	sqs_forward_add_events(sqs_wes, &sqs_forward_marker);
	if (sqs_events == NULL)
		sqs_events = MemoryContextAlloc(TopMemoryContext, size * sizeof(WaitEvent));
	else if (size > sqs_wes_size)
		sqs_events = repalloc(sqs_events, size * sizeof(WaitEvent));
	sqs_wes_size = Max(size, sqs_wes_size);
}

/*
 * How long the loop may sleep: until libmicrohttpd's or libcurl's next
 * timeout or the earliest parked request's end; not at all when a parked
 * request is due.
 */
static long
sqs_next_timeout(void)
{
	long		timeout = sqs_daemon_timeout();
	long		fwd = sqs_forward_timeout();

	if (fwd >= 0 && (timeout < 0 || fwd < timeout))
		timeout = fwd;
	return sqs_park_timeout(timeout);
}

/*
 * SIGTERM: the parked and forwarded connections are closed (libmicrohttpd
 * cannot stop with suspended ones), the daemon stops (closing the
 * listening socket and every connection), the watcher goes.
 */
static void
sqs_shutdown(void)
{
	sqs_park_drop_all();
	sqs_daemon_stop();
	queue_wait_watcher_detach(sqs_index);
}

/* Whatever way the worker ends, its watcher bits go with it. */
static void
sqs_at_exit(int code, Datum arg)
{
	queue_wait_watcher_detach(DatumGetInt32(arg));
}

/*
 * queue.sqs_request_memory (kB): the bytes of bodies a worker may hold;
 * and the bounds of each request's transaction (protocol.c).  At start and
 * at each reload.
 */
static void
sqs_read_settings(void)
{
	sqs_read_body_budget();		/* server.c's body budget */
	sqs_read_request_bounds();	/* protocol.c's lock and time bounds */
	sqs_shares_read_settings(); /* each role's share (shares.c) */
}

/* Open files: 10,000 connections need far more than the usual soft limit. */
static void
sqs_raise_fd_limit(int max_connections)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) != 0)
		return;
	if (rl.rlim_cur < rl.rlim_max)
	{
		rl.rlim_cur = rl.rlim_max;
		if (setrlimit(RLIMIT_NOFILE, &rl) != 0)
			ereport(LOG,
					(errmsg("queue sqs worker %d: could not raise the open files limit: %m",
							sqs_index)));
		getrlimit(RLIMIT_NOFILE, &rl);
	}
	if (rl.rlim_cur != RLIM_INFINITY &&
		(rlim_t) max_connections + 100 > rl.rlim_cur)
		ereport(LOG,
				(errmsg("queue sqs worker %d: open files limit %lu is below queue.sqs_max_connections (%d)",
						sqs_index, (unsigned long) rl.rlim_cur, max_connections)));
}

/*
 * The worker's last start died connecting to its database (missing, most
 * likely: queue.sqs_database names none yet).  Rather than die again every
 * second, connect to no database, say so once in the log (one line for
 * all workers), and look for it with a back-off (1 s doubling to 10 s: a
 * look is one index probe of a shared catalog);
 * once it is there, end so that the postmaster starts the worker again
 * (bgw_restart_time), which then connects.
 */
static void
sqs_wait_for_database(const char *db)
{
	long		delay_ms = 1000;

	BackgroundWorkerInitializeConnection(NULL, NULL, 0);
	for (;;)
	{
		Oid			dboid;

		CHECK_FOR_INTERRUPTS();
		if (ConfigReloadPending)
		{
			ConfigReloadPending = false;
			ProcessConfigFile(PGC_SIGHUP);
		}
		StartTransactionCommand();
		dboid = get_database_oid(db, true);
		CommitTransactionCommand();
		if (OidIsValid(dboid))
			break;
		if (sqs_missing_log_once())
			ereport(LOG,
					(errmsg("queue sqs workers: database \"%s\" does not exist; the SQS endpoint waits for it", db),
					 errhint("Create the database, or set queue.sqs_database to one that exists (a restart is needed).")));
		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 delay_ms, PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
		delay_ms = Min(delay_ms * 2, 10 * 1000);
	}
	sqs_connect_end(sqs_index);
	ereport(LOG,
			(errmsg("queue sqs worker %d: database \"%s\" exists now; restarting to serve it",
					sqs_index, db)));
	proc_exit(1);
}

/*
 * A worker: connect, pin the settings, attach the watcher, listen, loop.
 *
 * Each pass: rebuild the wait set if the parked set changed; sleep until
 * the latch, a readable epoll descriptor, a parked client's close, or the
 * next timeout; handle interrupts and SIGHUP; serve the due parked
 * requests; then let libmicrohttpd accept, read, call the access handler
 * (new requests are served right there) and write.
 */
void
queue_sqs_main(Datum main_arg)
{
	const char *listen;
	const char *db;
	int			max_connections;
	int			mhd_fd;

	sqs_index = DatumGetInt32(main_arg);
	pqsignal(SIGHUP, SignalHandlerForConfigReload);
	pqsignal(SIGTERM, die);
	BackgroundWorkerUnblockSignals();

	db = GetConfigOption("queue.sqs_database", false, false);
	if (db == NULL)
		db = "postgres";
	if (sqs_connect_begin(sqs_index))
		sqs_wait_for_database(db);	/* never returns */
	BackgroundWorkerInitializeConnection(db, NULL, 0);
	sqs_connect_end(sqs_index);
	queue_pin_process_settings();
	queue_wait_watcher_attach(sqs_index);
	before_shmem_exit(sqs_at_exit, Int32GetDatum(sqs_index));

	sqs_park_init();
	sqs_read_settings();
	listen = GetConfigOption("queue.sqs_listen", false, false);
	max_connections = atoi(GetConfigOption("queue.sqs_max_connections", false, false));
	sqs_raise_fd_limit(max_connections);
	mhd_fd = sqs_daemon_start(listen, max_connections);
	ereport(LOG,
			(errmsg("queue sqs worker %d listening on %s", sqs_index, listen)));

	for (;;)
	{
		int			n;
		long		timeout;

		if (sqs_park_sockets_changed() || sqs_forward_sockets_changed())
			sqs_build_wait_set(mhd_fd);
		timeout = sqs_next_timeout();
		pgstat_report_activity(STATE_IDLE, NULL);
		n = WaitEventSetWait(sqs_wes, timeout, sqs_events, sqs_wes_size,
							 PG_WAIT_EXTENSION);
		for (int i = 0; i < n; i++)
		{
			if (sqs_events[i].events & WL_LATCH_SET)
				ResetLatch(MyLatch);
			if (sqs_events[i].user_data == &sqs_forward_marker)
				sqs_forward_socket_ready(sqs_events[i].fd, sqs_events[i].events);
			else if ((sqs_events[i].events & WL_SOCKET_CLOSED) && sqs_events[i].user_data)
				((SqsExchange *) sqs_events[i].user_data)->closed = true;
		}
		if (ProcDiePending)
		{
			sqs_shutdown();
			CHECK_FOR_INTERRUPTS();
		}
		CHECK_FOR_INTERRUPTS();
		if (ConfigReloadPending)
		{
			ConfigReloadPending = false;
			ProcessConfigFile(PGC_SIGHUP);
			sqs_read_settings();
		}
		sqs_forwards_done();
		sqs_serve_parked();
		sqs_daemon_run();
		pgstat_report_stat(false);
	}
}
