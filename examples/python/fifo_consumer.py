#!/usr/bin/python3
"""FIFO consumer: each message group is processed in send order.

A FIFO queue delivers a group's messages in the order their sends
committed, and no other receive gets a group while one of its messages is
in flight.  The producer side shows deduplication ids; the consumer side
shows receive_attempt_id, which recovers a receive whose reply was lost
(a dropped connection, a timeout in the client): retried with the same id,
the receive returns the same messages with the same receipts instead of
leaving them leased to nobody.
"""

import datetime
import os
import sys

import psycopg

QUEUE = "py.payments.fifo"


def check(ok, what):
    """Fail the example (exit 1) when a result is not what it should be."""
    if not ok:
        print(f"fifo_consumer.py: FAILED: {what!r}", file=sys.stderr)
        sys.exit(1)


def connect():
    return psycopg.connect(os.environ.get("DATABASE_URL", ""), options="-c statement_timeout=30s")


def main():
    with connect() as conn:
        with conn.transaction():
            conn.execute("SELECT queue.drop(%s, if_exists => true)", (QUEUE,))
            conn.execute("SELECT queue.create(%s, fifo => true)", (QUEUE,))

        # Producer: three accounts, interleaved; each event carries its group
        # (the account) and a deduplication id.  Array parameters need an
        # explicit cast: send_batch exists for text[] and jsonb[].
        events = [(acct, step) for step in range(1, 5) for acct in ("alice", "bob", "carol")]
        with conn.transaction():
            conn.execute(
                "SELECT count(*) FROM queue.send_batch(%s, %s::text[],"
                " message_group_ids => %s::text[], deduplication_ids => %s::text[])",
                (
                    QUEUE,
                    [f"{a}:{s}" for a, s in events],
                    [a for a, _ in events],
                    [f"{a}-{s}" for a, s in events],
                ),
            )
        # A retried send (the producer did not see its reply) is a duplicate:
        # nothing is enqueued and the original message id comes back.
        dup = conn.execute(
            "SELECT duplicate FROM queue.send(%s, 'alice:1', message_group_id => 'alice',"
            " deduplication_id => 'alice-1')",
            (QUEUE,),
        ).fetchone()[0]
        conn.commit()
        check(dup is True, "the retried send is a duplicate")

        # receive_attempt_id: pretend the first reply was lost, and retry.
        attempt = "worker-1:receive-1"
        recv = (
            "SELECT message_id, receipt, body, message_group_id FROM queue.receive(%s,"
            " max_messages => 3, wait => %s, receive_attempt_id => %s)"
        )
        with conn.transaction():
            first = conn.execute(recv, (QUEUE, datetime.timedelta(seconds=1), attempt)).fetchall()
        with conn.transaction():
            again = conn.execute(recv, (QUEUE, datetime.timedelta(seconds=1), attempt)).fetchall()
        check(len(again) == 3 and again == first, (first, again))  # same messages, same receipts

        seen = {}

        def process(batch):
            for msg_id, receipt, body, group in batch:
                acct, step = body.split(":")  # bodies come back as text
                check(acct == group, (acct, group))
                seen.setdefault(group, []).append(int(step))
                conn.execute("SELECT queue.delete(%s, %s)", (QUEUE, receipt))

        with conn.transaction():
            process(again)
        while True:
            with conn.transaction():  # receive, work, delete: one transaction
                batch = conn.execute(
                    "SELECT message_id, receipt, body, message_group_id"
                    " FROM queue.receive(%s, max_messages => 3, wait => %s)",
                    (QUEUE, datetime.timedelta(seconds=1)),
                ).fetchall()
                if not batch:
                    break
                process(batch)

        for acct in ("alice", "bob", "carol"):
            check(seen.get(acct) == [1, 2, 3, 4], (acct, seen.get(acct)))
        print(f"fifo_consumer: {sum(map(len, seen.values()))} messages, each group in order: {seen}")


if __name__ == "__main__":
    main()
