"""The SQS endpoint across the nodes of a Citus cluster, with boto3, for
test/t/037_citus.pl: every request goes to one node's endpoint, for a
queue that lives on another node.

    python3 citus_client.py <endpoint> <key> <secret> <mode> <queue> [args]

Modes (lines "value<TAB>name<TAB>text", tap_lines.py):
    create            CreateQueue; the queue URL
    send BODY         SendMessage; the MessageId
    wait SECS         one ReceiveMessage (WaitTimeSeconds=SECS), then a
                      DeleteMessage of what came: how many, when it answered
                      (epoch seconds), the bodies, and how many deleted
    attrs             GetQueueAttributes: ApproximateNumberOfMessages
    error             a SendMessage whose error code is printed (a wrong
                      secret: InvalidClientTokenId or SignatureDoesNotMatch)
"""
import os
import sys
import time

import botocore

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # -I leaves it out
from tap_lines import queue_url, sqs_client, value  # noqa: E402

ENDPOINT, KEY, SECRET, MODE, QUEUE = sys.argv[1:6]
ARGS = sys.argv[6:]
sqs = sqs_client(ENDPOINT, KEY, SECRET)
URL = queue_url(ENDPOINT, QUEUE)

if MODE == 'create':
    value('url', sqs.create_queue(QueueName=QUEUE)['QueueUrl'])
elif MODE == 'send':
    value('id', sqs.send_message(QueueUrl=URL, MessageBody=ARGS[0])['MessageId'])
elif MODE == 'wait':
    r = sqs.receive_message(QueueUrl=URL, WaitTimeSeconds=int(ARGS[0]), MaxNumberOfMessages=10)
    at = time.time()
    msgs = r.get('Messages', [])
    value('received', len(msgs))
    value('at', '%.3f' % at)
    value('bodies', ','.join(m['Body'] for m in msgs))
    n = 0
    for m in msgs:
        sqs.delete_message(QueueUrl=URL, ReceiptHandle=m['ReceiptHandle'])
        n += 1
    value('deleted', n)
elif MODE == 'attrs':
    a = sqs.get_queue_attributes(QueueUrl=URL, AttributeNames=['ApproximateNumberOfMessages'])
    value('visible', a['Attributes']['ApproximateNumberOfMessages'])
elif MODE == 'error':
    try:
        sqs.send_message(QueueUrl=URL, MessageBody='never')
        value('error', 'none')
    except botocore.exceptions.ClientError as e:
        value('error', e.response['Error']['Code'])
