"""One sequential boto3 client's full cycle against the SQS endpoint, for
test/bench/sqs_sdk.sh: for SECS seconds, SendMessage(Batch) of BATCH
messages, ReceiveMessage of up to BATCH, DeleteMessage(Batch) of what came,
one request after another (Debian's boto3 1.26: the Query protocol).

    python3 sqs_sdk.py <endpoint> <key> <secret> <queue> <batch> <secs>

Prints "<msgs/s> messages/s (<n> deleted in <s> s, <requests> requests)".
"""
import sys
import time

import boto3
import botocore

endpoint, key, secret, queue, batch, secs = sys.argv[1:7]
batch, secs = int(batch), float(secs)
sqs = boto3.client('sqs', endpoint_url=endpoint, region_name='us-east-1',
                   aws_access_key_id=key, aws_secret_access_key=secret,
                   config=botocore.config.Config(retries={'max_attempts': 1}))
url = sqs.get_queue_url(QueueName=queue)['QueueUrl']
body = 'x' * 100
done = requests = 0
t0 = time.monotonic()
while time.monotonic() - t0 < secs:
    if batch == 1:
        sqs.send_message(QueueUrl=url, MessageBody=body)
    else:
        sqs.send_message_batch(QueueUrl=url, Entries=[
            {'Id': str(i), 'MessageBody': body} for i in range(batch)])
    msgs = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=batch).get('Messages', [])
    if batch == 1:
        for m in msgs:
            sqs.delete_message(QueueUrl=url, ReceiptHandle=m['ReceiptHandle'])
    elif msgs:
        r = sqs.delete_message_batch(QueueUrl=url, Entries=[
            {'Id': str(i), 'ReceiptHandle': m['ReceiptHandle']} for i, m in enumerate(msgs)])
        if r.get('Failed'):
            sys.exit('delete failed: %r' % r['Failed'])
    requests += 3
    done += len(msgs)
el = time.monotonic() - t0
print('%.1f messages/s (%d deleted in %.1f s, %d requests)' % (done / el, done, el, requests))
