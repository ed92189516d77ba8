#!/usr/bin/python3
"""Topic publisher: one publish, delivered to every subscribed queue whose
filters match, inside the publisher's transaction (all queues or none).

billing subscribes to everything; shipping_eu only to messages tagged
"eu" whose "total" attribute is positive (an SNS filter policy).
"""

import datetime
import json
import os
import sys

import psycopg
from psycopg.types.json import Jsonb

TOPIC, BILLING, SHIPPING_EU = "py.orders", "py.billing", "py.shipping_eu"


def check(ok, what):
    """Fail the example (exit 1) when a result is not what it should be."""
    if not ok:
        print(f"topic_publisher.py: FAILED: {what!r}", file=sys.stderr)
        sys.exit(1)


def connect():
    return psycopg.connect(os.environ.get("DATABASE_URL", ""), options="-c statement_timeout=30s")


def main():
    with connect() as conn:
        with conn.transaction():
            conn.execute("SELECT queue.drop_topic(%s, if_exists => true)", (TOPIC,))
            for q in (BILLING, SHIPPING_EU):
                conn.execute("SELECT queue.drop(%s, if_exists => true)", (q,))
                conn.execute("SELECT queue.create(%s)", (q,))
            conn.execute("SELECT queue.create_topic(%s)", (TOPIC,))
            conn.execute("SELECT queue.subscribe(%s, %s)", (TOPIC, BILLING))
            conn.execute(
                "SELECT queue.subscribe(%s, %s, filter_tags => '{eu}',"
                " filter_policy => '{\"total\": [{\"numeric\": [\">\", 0]}]}')",
                (TOPIC, SHIPPING_EU),
            )

        publish = (
            "SELECT message_id, delivered FROM queue.publish(%s, %s, tags => %s::text[], attributes => %s)"
        )
        delivered = {}
        orders = [(1, "eu", 99.5), (2, "us", 10.0), (3, "eu", 0)]
        for order_id, region, total in orders:
            with conn.transaction():  # publish with the business write, as an outbox
                row = conn.execute(
                    publish, (TOPIC, Jsonb({"order_id": order_id}), [region], Jsonb({"total": total}))
                ).fetchone()
                delivered[order_id] = row[1]
        # A publish that rolls back delivers nothing anywhere.
        with conn.transaction():
            conn.execute(publish, (TOPIC, Jsonb({"order_id": 4}), ["eu"], Jsonb({"total": 5})))
            raise psycopg.Rollback()  # leaves the block, rolled back, no error

        check(delivered == {1: 2, 2: 1, 3: 1}, delivered)

        def drain(queue_name):
            with conn.transaction():
                rows = conn.execute(
                    "SELECT body, queue.delete(%s, receipt) FROM queue.receive(%s, max_messages => 10, wait => %s)",
                    (queue_name, queue_name, datetime.timedelta(seconds=1)),
                ).fetchall()
            return sorted(json.loads(body)["order_id"] for body, _ in rows)

        billing, shipping = drain(BILLING), drain(SHIPPING_EU)
        check(billing == [1, 2, 3], billing)
        check(shipping == [1], shipping)
        print(f"topic_publisher: billing got {billing}, shipping_eu got {shipping}")


if __name__ == "__main__":
    main()
