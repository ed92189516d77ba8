"""test/bench/bloat_consumer.py - one consumer of test/bench/bloat.sh.

Receives up to BATCH messages and deletes what came, as fast as it can,
until DEADLINE (a Unix time); each receive is timed on its own (the
statement's round trip, its commit included: autocommit).  Prints one line
per receive: "<unix time at its end> <receive ms> <messages got>".

    python3 -I bloat_consumer.py DSN KIND QUEUE BATCH DEADLINE

KIND: queue (the extension's queue.receive / queue.delete_batch), floor
(the hand-written SKIP LOCKED queue bench_floor of lib.sh), pgmq
(pgmq.read / pgmq.delete with a 30 s visibility timeout).
"""
import sys
import time

import psycopg

RECEIVE = {
    "queue": "SELECT receipt FROM queue.receive(%s, max_messages => %s)",
    "floor": """UPDATE bench_floor SET visible_at = now() + interval '30 s',
                       receive_count = receive_count + 1
                 WHERE id IN (SELECT id FROM bench_floor WHERE visible_at <= now()
                               ORDER BY visible_at, id LIMIT %s FOR UPDATE SKIP LOCKED)
                RETURNING id""",
    "pgmq": "SELECT msg_id FROM pgmq.read(%s, 30, %s)",
}
DELETE = {
    "queue": "SELECT count(*) FROM queue.delete_batch(%s, %s::text[])",
    "floor": "DELETE FROM bench_floor WHERE id = ANY (%s::bigint[])",
    "pgmq": "SELECT count(*) FROM pgmq.delete(%s, %s::bigint[])",
}


def main():
    dsn, kind, queue, batch, deadline = sys.argv[1:6]
    batch = int(batch)
    deadline = float(deadline)
    conn = psycopg.connect(dsn, autocommit=True)
    cur = conn.cursor()
    out = sys.stdout
    recv_args = (batch,) if kind == "floor" else (queue, batch)
    while True:
        t0 = time.time()
        if t0 >= deadline:
            break
        cur.execute(RECEIVE[kind], recv_args, prepare=True)
        handles = [r[0] for r in cur.fetchall()]
        t1 = time.time()
        if handles:
            if kind == "floor":
                cur.execute(DELETE[kind], (handles,), prepare=True)
            else:
                cur.execute(DELETE[kind], (queue, handles), prepare=True)
        else:
            # nothing visible: the producer's next message is 2 ms away
            time.sleep(0.002)
        out.write("%.3f %.3f %d\n" % (t1, (t1 - t0) * 1000.0, len(handles)))
    out.flush()
    conn.close()


if __name__ == "__main__":
    main()
