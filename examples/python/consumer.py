#!/usr/bin/python3
"""Long-polling, exactly-once consumer with a dead-letter queue and a
graceful shutdown.

Each batch is one transaction: receive (long poll), do the work in this
database, delete.  The work and the delete commit together, so each
message's effect happens exactly once.  Each message's work runs under a
savepoint: a handler error rolls back that message's work only, and the
message is handed back with change_visibility(0); its receive has counted,
so after max_receive_count failures the next receive moves it to the
dead-letter queue.  (Without savepoints a plain ROLLBACK gives the same
rule for the whole batch: the extension counts rolled-back receives, see
docs/dead-letters.md, "Rolled-back receives"; but one poison message would then take its
neighbours to the dead-letter queue with it.)

SIGINT (Ctrl-C) does not interrupt a batch: the batch in hand is finished
and committed, then the loop exits.  A shutdown takes at most the long-poll
wait plus one batch.

As a self-test, the program seeds its queue, sends itself SIGINT from the
middle of a batch, checks that batch committed, starts the loop again
until the queue is drained, and checks the results.
"""

import datetime
import json
import os
import signal
import sys

import psycopg

QUEUE, DLQ = "py.jobs", "py.jobs_dlq"
MAX_RECEIVE_COUNT = 3
WAIT = datetime.timedelta(seconds=2)  # psycopg sends a timedelta as an interval


def check(ok, what):
    """Fail the example (exit 1) when a result is not what it should be."""
    if not ok:
        print(f"consumer.py: FAILED: {what!r}", file=sys.stderr)
        sys.exit(1)


def connect():
    # statement_timeout must be longer than the longest wait, or a long poll
    # is cancelled (57014) before it can return.  Never use a client-side
    # timeout instead: it abandons a receive the server still completes,
    # leasing messages nobody reads until their visibility timeout ends.
    return psycopg.connect(os.environ.get("DATABASE_URL", ""), options="-c statement_timeout=30s")


stopping = False
signalled = False  # self-test: SIGINT sent once


def on_sigint(signum, frame):
    global stopping
    stopping = True  # checked between batches, never inside one
    print("consumer: SIGINT, finishing the batch in hand")


def handle(cur, msg_id, body):
    """The business work: here, one row per job."""
    global signalled
    job = json.loads(body)  # bodies come back as text
    if job.get("poison"):
        raise ValueError(f"cannot process job {job['n']}")
    cur.execute("INSERT INTO py_done (n, message_id) VALUES (%s, %s)", (job["n"], msg_id))
    if job["n"] == 9 and not signalled:
        signalled = True
        os.kill(os.getpid(), signal.SIGINT)  # self-test: Ctrl-C mid-batch


def run(conn, drain=False):
    """The consumer loop.  Returns the message ids of the last batch."""
    global stopping
    stopping = False
    last = []
    while not stopping:
        with conn.transaction(), conn.cursor() as cur:
            cur.execute(
                "SELECT message_id, receipt, body FROM queue.receive(%s, max_messages => 5, wait => %s)",
                (QUEUE, WAIT),
            )
            batch = cur.fetchall()
            if not batch and drain:
                return last  # self-test: the queue is empty
            for msg_id, receipt, body in batch:
                try:
                    with conn.transaction():  # SAVEPOINT
                        handle(cur, msg_id, body)
                        cur.execute("SELECT queue.delete(%s, %s)", (QUEUE, receipt))
                except ValueError as e:
                    # Work undone; hand the message back now.  Its receive
                    # counted: after MAX_RECEIVE_COUNT it goes to the DLQ.
                    print(f"consumer: {e}, message {msg_id} back to the queue")
                    cur.execute("SELECT queue.change_visibility(%s, %s, '0')", (QUEUE, receipt))
            last = [m for m, _, _ in batch]
        # COMMIT happened here: the work and the deletes of the whole batch.
    return last


def main():
    with connect() as conn:
        with conn.transaction():
            conn.execute("DROP TABLE IF EXISTS py_done")
            conn.execute("CREATE TABLE py_done (n int PRIMARY KEY, message_id bigint NOT NULL)")
            conn.execute("SELECT queue.drop(%s, if_exists => true)", (QUEUE,))
            conn.execute("SELECT queue.drop(%s, if_exists => true)", (DLQ,))
            conn.execute("SELECT queue.create(%s)", (DLQ,))
            conn.execute(
                "SELECT queue.create(%s, visibility_timeout => '30 s', dead_letter_queue => %s,"
                " max_receive_count => %s)",
                (QUEUE, DLQ, MAX_RECEIVE_COUNT),
            )
            jobs = [json.dumps({"n": n, "poison": n == 4}) for n in range(1, 13)]
            conn.execute("SELECT count(*) FROM queue.send_batch(%s, %s::jsonb[])", (QUEUE, jobs))

        signal.signal(signal.SIGINT, on_sigint)
        in_hand = run(conn)
        check(stopping, "the loop stopped on SIGINT")
        done = {r[0] for r in conn.execute("SELECT message_id FROM py_done")}
        # Every message of the interrupted batch was either done or handed back.
        rest = {r[0] for r in conn.execute("SELECT message_id FROM queue.peek(%s, 100)", (QUEUE,))}
        check(in_hand and all(m in done or m in rest for m in in_hand), (in_hand, done, rest))
        check(len(rest) > 0, "the loop exited before draining the queue")

        run(conn, drain=True)  # "restart" the consumer; stop when empty

        done = [r[0] for r in conn.execute("SELECT n FROM py_done ORDER BY n")]
        check(done == [n for n in range(1, 13) if n != 4], done)
        left = conn.execute("SELECT count(*) FROM queue.peek(%s, 100)", (QUEUE,)).fetchone()[0]
        check(left == 0, f"{left} messages left")
        dead = conn.execute("SELECT body, receive_count FROM queue.peek(%s, 100)", (DLQ,)).fetchall()
        check(len(dead) == 1 and json.loads(dead[0][0])["n"] == 4, dead)
        check(dead[0][1] == MAX_RECEIVE_COUNT, dead)
        print(f"consumer: {len(done)} jobs done once each, job 4 dead-lettered after {dead[0][1]} receives")


if __name__ == "__main__":
    main()
