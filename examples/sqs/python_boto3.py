#!/usr/bin/python3
"""examples/sqs/python_boto3.py: boto3 against the queue extension's SQS endpoint.

Debian's python3-boto3 (1.26; botocore 1.29 speaks SQS's Query protocol).
Three things an SQS user does, each checked:
  fifo         a FIFO queue: two message groups sent in order, one message
               sent twice with the same deduplication id; the consumer gets
               each group in order and the duplicate once
  dead-letter  a queue with a RedrivePolicy (maxReceiveCount 2): a message
               received and never deleted moves to the dead-letter queue
  long poll    ReceiveMessage with WaitTimeSeconds=5 is answered by a send
               from a second client (another thread) well before its deadline

Environment: SQS_ENDPOINT_URL (http://host:port), AWS_ACCESS_KEY_ID,
AWS_SECRET_ACCESS_KEY, AWS_DEFAULT_REGION.  Queues are named py<pid>-...
and deleted at the end.  Prints "fifo ok", "dead-letter ok", "long poll ok
(...)"; exits 1 on the first mismatch.  Run with /usr/bin/python3 -I.
"""
import json
import os
import sys
import threading
import time

import boto3

ENDPOINT = os.environ.get("SQS_ENDPOINT_URL", "http://127.0.0.1:9324")
PREFIX = f"py{os.getpid()}-"


def client():
    return boto3.session.Session().client("sqs", endpoint_url=ENDPOINT)


def check(cond, what):
    if not cond:
        print(f"FAILED: {what}")
        sys.exit(1)


def fifo(sqs):
    url = sqs.create_queue(QueueName=PREFIX + "orders.fifo",
                           Attributes={"FifoQueue": "true",
                                       "VisibilityTimeout": "30"})["QueueUrl"]
    sent = {"g1": ["g1-a", "g1-b", "g1-c"], "g2": ["g2-a", "g2-b"]}
    for i in range(3):
        for group, bodies in sent.items():
            if i < len(bodies):
                r = sqs.send_message(QueueUrl=url, MessageBody=bodies[i],
                                     MessageGroupId=group,
                                     MessageDeduplicationId=bodies[i])
                check("SequenceNumber" in r, "FIFO send returns a SequenceNumber")
    # the same deduplication id again: accepted, not delivered twice
    again = sqs.send_message(QueueUrl=url, MessageBody="g1-a", MessageGroupId="g1",
                             MessageDeduplicationId="g1-a")
    check(again.get("MessageId"), "a duplicate send is accepted (SQS does not tell)")

    got = {"g1": [], "g2": []}
    for _ in range(20):
        r = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, WaitTimeSeconds=1,
                                AttributeNames=["MessageGroupId"])
        msgs = r.get("Messages", [])
        for m in msgs:
            got[m["Attributes"]["MessageGroupId"]].append(m["Body"])
        if msgs:
            sqs.delete_message_batch(QueueUrl=url, Entries=[
                {"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]}
                for i, m in enumerate(msgs)])
        if sum(len(v) for v in got.values()) >= 5:
            break
    # one more receive: nothing left, the duplicate included
    r = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, WaitTimeSeconds=1)
    check(not r.get("Messages"), f"queue empty after the groups: {r.get('Messages')}")
    check(got == sent, f"each group in order, each message once: {got}")
    sqs.delete_queue(QueueUrl=url)
    print("fifo ok")


def dead_letter(sqs):
    dlq = sqs.create_queue(QueueName=PREFIX + "dead")["QueueUrl"]
    dlq_arn = sqs.get_queue_attributes(QueueUrl=dlq, AttributeNames=["QueueArn"]
                                       )["Attributes"]["QueueArn"]
    check(dlq_arn.startswith("arn:aws:sqs:") and dlq_arn.endswith(":" + PREFIX + "dead"),
          f"QueueArn {dlq_arn}")
    work = sqs.create_queue(QueueName=PREFIX + "work", Attributes={
        "RedrivePolicy": json.dumps({"deadLetterTargetArn": dlq_arn,
                                     "maxReceiveCount": "2"})})["QueueUrl"]
    policy = json.loads(sqs.get_queue_attributes(QueueUrl=work, AttributeNames=["RedrivePolicy"]
                                                 )["Attributes"]["RedrivePolicy"])
    check(policy["deadLetterTargetArn"] == dlq_arn and int(policy["maxReceiveCount"]) == 2,
          f"RedrivePolicy read back: {policy}")
    sqs.send_message(QueueUrl=work, MessageBody="poison")

    receives = 0
    moved = None
    deadline = time.monotonic() + 30
    while moved is None and time.monotonic() < deadline:
        r = sqs.receive_message(QueueUrl=work, VisibilityTimeout=1, WaitTimeSeconds=2,
                                AttributeNames=["ApproximateReceiveCount"])
        for m in r.get("Messages", []):
            check(m["Body"] == "poison", f"body {m['Body']}")
            receives += 1
            check(int(m["Attributes"]["ApproximateReceiveCount"]) == receives,
                  f"ApproximateReceiveCount {m['Attributes']} after {receives} receives")
        d = sqs.receive_message(QueueUrl=dlq, WaitTimeSeconds=0)
        if d.get("Messages"):
            moved = d["Messages"][0]
    check(moved is not None, "the message reached the dead-letter queue")
    check(moved["Body"] == "poison", f"dead-letter body {moved['Body']}")
    check(receives == 2, f"received {receives} times before it moved (maxReceiveCount 2)")
    sources = sqs.list_dead_letter_source_queues(QueueUrl=dlq).get("queueUrls", [])
    check(any(u.endswith("/" + PREFIX + "work") for u in sources),
          f"ListDeadLetterSourceQueues {sources}")
    sqs.delete_message(QueueUrl=dlq, ReceiptHandle=moved["ReceiptHandle"])
    sqs.delete_queue(QueueUrl=work)
    sqs.delete_queue(QueueUrl=dlq)
    print("dead-letter ok")


def long_poll(sqs):
    url = sqs.create_queue(QueueName=PREFIX + "poll")["QueueUrl"]
    check(not sqs.receive_message(QueueUrl=url, WaitTimeSeconds=0).get("Messages"),
          "new queue is empty")

    def producer():
        time.sleep(1.0)
        client().send_message(QueueUrl=url, MessageBody="wake up")

    t = threading.Thread(target=producer)
    start = time.monotonic()
    t.start()
    r = sqs.receive_message(QueueUrl=url, WaitTimeSeconds=5)
    elapsed = time.monotonic() - start
    t.join()
    msgs = r.get("Messages", [])
    check(len(msgs) == 1 and msgs[0]["Body"] == "wake up", f"long poll got {msgs}")
    check(0.9 <= elapsed < 4.0, f"long poll returned after {elapsed:.2f} s (send at 1 s, "
          "deadline 5 s)")
    sqs.delete_message(QueueUrl=url, ReceiptHandle=msgs[0]["ReceiptHandle"])
    sqs.delete_queue(QueueUrl=url)
    print(f"long poll ok (returned after {elapsed:.1f} s of 5)")


def main():
    sqs = client()
    fifo(sqs)
    dead_letter(sqs)
    long_poll(sqs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
