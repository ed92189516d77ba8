/*
 * longpoll.c: commit-to-return latency of waiting receives.
 *
 *   longpoll CONNINFO RECEIVERS QUEUES ROUNDS
 *
 * Opens RECEIVERS connections, each waiting in queue.receive(..., wait =>
 * '20 s') on one of QUEUES queues (lp_0 .. lp_<QUEUES-1>, created here),
 * receivers spread evenly over the queues.  Then ROUNDS times: one send
 * (autocommit, so it has committed when the call returns) to a queue
 * chosen in turn; the time from the send's return to the first receiver's
 * result arriving is one sample.  Exactly one receiver may get the message
 * (the others keep waiting: checked); it deletes it and waits again.
 * Prints the median, p90, p99 and max in milliseconds.
 *
 * Timings come from one process and one monotonic clock, so no clock skew
 * enters; the figure includes the receiver's own result transfer.
 */
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "libpq-fe.h"

static double
now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000.0 + ts.tv_nsec / 1e6;
}

static void
die(PGconn *conn, const char *what)
{
	fprintf(stderr, "longpoll: %s: %s", what, conn ? PQerrorMessage(conn) : "\n");
	exit(1);
}

static void
exec_ok(PGconn *conn, const char *sql)
{
	PGresult   *res = PQexec(conn, sql);

	if (PQresultStatus(res) != PGRES_TUPLES_OK && PQresultStatus(res) != PGRES_COMMAND_OK)
		die(conn, sql);
	PQclear(res);
}

static void
start_wait(PGconn *conn, const char *queue)
{
	const char *params[1] = {queue};

	if (!PQsendQueryParams(conn,
						   "SELECT receipt, receive_count FROM queue.receive($1, wait => '20 s')",
						   1, NULL, params, NULL, NULL, 0))
		die(conn, "send receive");
}

static int
cmp_double(const void *a, const void *b)
{
	double		x = *(const double *) a;
	double		y = *(const double *) b;

	return (x > y) - (x < y);
}

int
main(int argc, char **argv)
{
	const char *conninfo;
	int			nrecv;
	int			nqueues;
	int			rounds;
	PGconn	   *sender;
	PGconn	  **recv;
	char	  **queue_of;
	struct pollfd *fds;
	double	   *samples;
	int			extra = 0;
	int			redelivered = 0;	/* a lease lost somewhere: must stay 0 */

	if (argc != 5)
	{
		fprintf(stderr, "usage: longpoll CONNINFO RECEIVERS QUEUES ROUNDS\n");
		return 2;
	}
	conninfo = argv[1];
	nrecv = atoi(argv[2]);
	nqueues = atoi(argv[3]);
	rounds = atoi(argv[4]);
	if (nrecv < 1 || nqueues < 1 || nqueues > nrecv || rounds < 1)
		return 2;

	sender = PQconnectdb(conninfo);
	if (PQstatus(sender) != CONNECTION_OK)
		die(sender, "connect");
	exec_ok(sender, "SET client_min_messages = warning");
	for (int q = 0; q < nqueues; q++)
	{
		char		sql[200];

		snprintf(sql, sizeof(sql),
				 "SELECT queue.create('lp_%d'); SELECT queue.purge('lp_%d')", q, q);
		exec_ok(sender, sql);
	}

	recv = calloc(nrecv, sizeof(PGconn *));
	queue_of = calloc(nrecv, sizeof(char *));
	fds = calloc(nrecv, sizeof(struct pollfd));
	samples = calloc(rounds, sizeof(double));
	for (int r = 0; r < nrecv; r++)
	{
		recv[r] = PQconnectdb(conninfo);
		if (PQstatus(recv[r]) != CONNECTION_OK)
			die(recv[r], "connect");
		queue_of[r] = malloc(32);
		snprintf(queue_of[r], 32, "lp_%d", r % nqueues);
		start_wait(recv[r], queue_of[r]);
		fds[r].fd = PQsocket(recv[r]);
		fds[r].events = POLLIN;
	}

	/* Let every receiver reach its sleep before the first send. */
	{
		struct timespec pause = {0, 500 * 1000 * 1000};

		nanosleep(&pause, NULL);
	}

	for (int i = 0; i < rounds; i++)
	{
		const char *params[1] = {queue_of[i % nrecv]};
		PGresult   *res;
		double		t0;
		int			got = -1;

		res = PQexecParams(sender, "SELECT message_id FROM queue.send($1, 'ping')",
						   1, NULL, params, NULL, NULL, 0);
		if (PQresultStatus(res) != PGRES_TUPLES_OK)
			die(sender, "send");
		PQclear(res);
		t0 = now_ms();

		while (got < 0)
		{
			if (poll(fds, nrecv, 30000) <= 0)
				die(NULL, "no receiver woke within 30 s");
			for (int r = 0; r < nrecv && got < 0; r++)
			{
				if (!(fds[r].revents & POLLIN))
					continue;
				if (!PQconsumeInput(recv[r]))
					die(recv[r], "consume");
				if (PQisBusy(recv[r]))
					continue;
				res = PQgetResult(recv[r]);
				if (PQresultStatus(res) != PGRES_TUPLES_OK)
					die(recv[r], "receive");
				if (PQntuples(res) == 1)
				{
					const char *dparams[2] = {queue_of[r], PQgetvalue(res, 0, 0)};
					PGresult   *dres;

					samples[i] = now_ms() - t0;
					got = r;
					if (atoi(PQgetvalue(res, 0, 1)) != 1)
					{
						redelivered++;
						fprintf(stderr, "longpoll: round %d: receiver %d got a message received %s times, after %.1f ms\n",
								i, r, PQgetvalue(res, 0, 1), samples[i]);
					}
					while (PQgetResult(recv[r]) != NULL)
						;
					dres = PQexecParams(recv[r], "SELECT queue.delete($1, $2)",
										2, NULL, dparams, NULL, NULL, 0);
					if (PQresultStatus(dres) != PGRES_TUPLES_OK)
						die(recv[r], "delete");
					if (strcmp(PQgetvalue(dres, 0, 0), "t") != 0)
						fprintf(stderr, "longpoll: round %d: delete returned %s\n", i, PQgetvalue(dres, 0, 0));
					PQclear(dres);
				}
				else
					while (PQgetResult(recv[r]) != NULL)
						;
				PQclear(res);
				start_wait(recv[r], queue_of[r]);
			}
		}
	}

	/* Nobody else may have received anything: every queue is empty now. */
	{
		PGresult   *res = PQexec(sender,
								 "SELECT coalesce(sum(visible + in_flight), 0) FROM queue.stats"
								 " WHERE queue_name LIKE 'lp\\_%'");

		if (PQresultStatus(res) != PGRES_TUPLES_OK)
			die(sender, "stats");
		extra = atoi(PQgetvalue(res, 0, 0));
		PQclear(res);
	}

	qsort(samples, rounds, sizeof(double), cmp_double);
	printf("receivers=%d queues=%d rounds=%d median_ms=%.3f p90_ms=%.3f p99_ms=%.3f max_ms=%.3f left_over=%d redelivered=%d\n",
		   nrecv, nqueues, rounds,
		   samples[rounds / 2], samples[(int) (rounds * 0.9)],
		   samples[(int) (rounds * 0.99)], samples[rounds - 1], extra, redelivered);

	/*
	 * Cancel the receives still waiting and wait for their answers, so the
	 * backends are gone when we exit (the next run needs the slots).
	 */
	for (int r = 0; r < nrecv; r++)
	{
		PGcancel   *cancel = PQgetCancel(recv[r]);
		char		err[256];
		PGresult   *res;

		if (cancel != NULL)
		{
			(void) PQcancel(cancel, err, sizeof(err));
			PQfreeCancel(cancel);
		}
		while ((res = PQgetResult(recv[r])) != NULL)
			PQclear(res);
		PQfinish(recv[r]);
	}
	PQfinish(sender);
	return extra == 0 && redelivered == 0 ? 0 : 1;
}
