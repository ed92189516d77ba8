#!/usr/bin/python3
"""Outbox producer: the business row and its message commit together.

The order and the message describing it are written in ONE transaction, so
the message exists if and only if the order does: no relay process, no
dual write.  A transaction that fails after the send leaves no message.

Run:  DATABASE_URL=postgresql:///mydb /usr/bin/python3 outbox_producer.py
      (or set PGHOST, PGPORT, PGDATABASE, PGUSER as for psql)
Needs psycopg 3 (Debian: python3-psycopg).  Exits non-zero if a check fails.
"""

import json
import os
import sys

import psycopg
from psycopg.types.json import Jsonb

QUEUE = "py.outbox"


def check(ok, what):
    """Fail the example (exit 1) when a result is not what it should be."""
    if not ok:
        print(f"{os.path.basename(sys.argv[0])}: FAILED: {what!r}", file=sys.stderr)
        sys.exit(1)


def connect():
    # An empty conninfo makes libpq read PGHOST, PGPORT, ... like psql does.
    return psycopg.connect(os.environ.get("DATABASE_URL", ""))


def setup(conn):
    with conn.transaction():
        conn.execute("DROP TABLE IF EXISTS py_orders")
        conn.execute("CREATE TABLE py_orders (order_id bigint PRIMARY KEY, item text NOT NULL)")
        conn.execute("SELECT queue.drop(%s, if_exists => true)", (QUEUE,))
        conn.execute("SELECT queue.create(%s)", (QUEUE,))


def place_order(conn, order_id, item, fail_after_send=False):
    """Insert the order and send its message in one transaction."""
    with conn.transaction():  # BEGIN ... COMMIT, or ROLLBACK on an exception
        conn.execute("INSERT INTO py_orders (order_id, item) VALUES (%s, %s)", (order_id, item))
        # Jsonb() picks the jsonb overload of queue.send: the body is stored
        # as jsonb's normalised text.  A plain str would take the text one.
        row = conn.execute(
            "SELECT message_id FROM queue.send(%s, %s)",
            (QUEUE, Jsonb({"order_id": order_id, "item": item})),
        ).fetchone()
        if fail_after_send:
            raise RuntimeError("payment service down")  # rolls back order AND message
        return row[0]  # bigint comes back as a Python int


def main():
    with connect() as conn:
        setup(conn)

        ids = [place_order(conn, 1, "book"), place_order(conn, 2, "pen")]
        try:
            place_order(conn, 3, "lamp", fail_after_send=True)
        except RuntimeError:
            pass  # the order and its message are both gone

        # A batch: an array parameter needs an explicit cast, because
        # send_batch has a text[] and a jsonb[] overload (42725 otherwise).
        with conn.transaction():
            conn.execute("INSERT INTO py_orders VALUES (4, 'cup'), (5, 'mug')")
            bodies = [json.dumps({"order_id": 4, "item": "cup"}), json.dumps({"order_id": 5, "item": "mug"})]
            rows = conn.execute(
                "SELECT ordinal, message_id FROM queue.send_batch(%s, %s::jsonb[])", (QUEUE, bodies)
            ).fetchall()
            ids += [r[1] for r in rows]

        # Check: exactly the committed orders have messages, in order.
        orders = [r[0] for r in conn.execute("SELECT order_id FROM py_orders ORDER BY order_id")]
        msgs = conn.execute(
            "SELECT message_id, body FROM queue.peek(%s, max_messages => 100)", (QUEUE,)
        ).fetchall()
        # Bodies come back as text, whichever overload sent them: parse them.
        check(all(isinstance(body, str) for _, body in msgs), msgs)
        sent = [json.loads(body)["order_id"] for _, body in msgs]
        check(orders == [1, 2, 4, 5], orders)
        check(sent == orders, sent)
        check([m for m, _ in msgs] == ids, (msgs, ids))
        check(all(isinstance(i, int) for i in ids), ids)
        print(f"outbox_producer: {len(orders)} orders, {len(sent)} messages, rolled-back order 3 left none")


if __name__ == "__main__":
    main()
